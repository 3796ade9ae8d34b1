// Epochs and fences of a local database (engine/db/db_impl.h; failover
// across servers: tests/tools/replication_test.cc): epochs only rise and
// are kept in DIR/EPOCHS; a fenced database's log takes no more writes,
// also when opened again, and says where they go; damaged files are named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>

#include "engine/db/db_impl.h"
#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;

TableSpec Spec() {
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"obs", DType::kF32, Shape{4}}};
  spec.capacity_steps = 1024;
  spec.block_steps = 16;
  return spec;
}

TEST(EpochsTest, EpochsRiseAreKeptAndAFenceSealsTheLogAcrossReopens) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  const uint64_t first = 1 + rng() % 5;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(testing_util::ManualCheckpoints(), dir.path()));
    auto* impl = static_cast<DBImpl*>(db.get());
    EXPECT_EQ(impl->epoch(), 0u);
    ASSERT_OK(db->CreateTable(Spec()).status());
    ASSERT_OK(impl->BeginEpoch(first));
    const Status again = impl->BeginEpoch(first);
    EXPECT_EQ(again.code(), Status::Code::kFailedPrecondition);
    EXPECT_THAT(again.message(), HasSubstr("epoch " + std::to_string(first) +
                                           " is not past epoch " + std::to_string(first)));
    ASSERT_OK(impl->BeginEpoch(first + 1));
    // A fence at or below its epoch is refused.
    const Status low = impl->Fence(first + 1, "ucx://127.0.0.1:9").status();
    EXPECT_THAT(low.message(), HasSubstr("is in epoch " + std::to_string(first + 1)));
    ASSERT_OK(impl->Fence(first + 2, "ucx://127.0.0.1:9").status());
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    const Status append = writer->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0);
    EXPECT_EQ(append.code(), Status::Code::kFailedPrecondition);
    EXPECT_THAT(append.message(),
                HasSubstr("is no longer the primary: epoch " + std::to_string(first + 2) +
                          "'s primary is ucx://127.0.0.1:9"));
    ASSERT_OK_AND_ASSIGN(auto info, db->Replication());
    EXPECT_EQ(info.epoch, first + 1);
    ASSERT_EQ(info.epochs.size(), 2u);
    EXPECT_EQ(info.epochs[0].epoch, first);
    EXPECT_EQ(info.fenced_by, "ucx://127.0.0.1:9");
    EXPECT_EQ(info.fenced_epoch, first + 2);
  }
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(testing_util::ManualCheckpoints(), dir.path()));
    auto* impl = static_cast<DBImpl*>(db.get());
    EXPECT_EQ(impl->epoch(), first + 1);
    EXPECT_TRUE(impl->fenced());
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    EXPECT_THAT(writer->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0).message(),
                HasSubstr("epoch " + std::to_string(first + 2) + "'s primary is"));
  }
}

TEST(EpochsTest, DamagedEpochAndFenceFilesAreNamed) {
  testing_util::TempDir dir;
  { ASSERT_OK(DB::Open(testing_util::ManualCheckpoints(), dir.path()).status()); }
  std::ofstream(dir.path() + "/EPOCHS") << "replaydb epochs 1\n2 1 0\n1 1 0\n";
  Status s = DB::Open(testing_util::ManualCheckpoints(), dir.path()).status();
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr(dir.path() + "/EPOCHS does not parse as an epoch history"));
  EXPECT_THAT(s.message(), HasSubstr("epoch 1 after epoch 2"));
  std::ofstream(dir.path() + "/EPOCHS") << "replaydb epochs 1\n2 1 0\n";
  std::ofstream(dir.path() + "/FENCED") << "replaydb fenced 1\nepoch x\n";
  s = DB::Open(testing_util::ManualCheckpoints(), dir.path()).status();
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr(dir.path() + "/FENCED does not parse as a fence"));
}

}  // namespace
}  // namespace replaydb::engine
