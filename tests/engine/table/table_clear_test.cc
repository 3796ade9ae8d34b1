// Table::Clear: every trajectory, hot and cold, leaves with its items as one
// logged change that recovery repeats (a crash leaves the table as it was or
// empty), the rate limiter starts afresh, and the table's handles and
// writers go on working. Refusals name the table and why.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;
using ::testing::HasSubstr;

TableSpec Spec(SelectorKind selector, bool spill) {
  TableSpec spec;
  spec.name = "c";
  spec.columns = {{"v", DType::kI64, {}}};
  spec.capacity_steps = 256;  // small: with spill, older trajectories go cold
  spec.block_steps = 16;
  spec.selector = selector;
  spec.spill = spill;
  return spec;
}

// Appends `n` steps (step i holds `tag` * 1000 + i) with `writer`.
void AppendSteps(TrajectoryWriter& writer, int64_t tag, int n) {
  for (int i = 0; i < n; ++i) {
    const int64_t v = tag * 1000 + i;
    ConstTensor t{DType::kI64, Shape(), &v, sizeof v};
    ASSERT_OK(writer.Append(std::span<const ConstTensor>(&t, 1), 1.0 + (i % 4)));
  }
}

// Ended trajectories of random lengths; returns their ids.
std::set<uint64_t> WriteEnded(Table& table, std::mt19937_64& rng, int trajectories) {
  std::set<uint64_t> ids;
  auto writer = table.NewWriter();
  EXPECT_OK(writer.status());
  if (!writer.ok()) return ids;
  for (int k = 0; k < trajectories; ++k) {
    AppendSteps(**writer, k, 1 + static_cast<int>(rng() % 40));
    ids.insert((*writer)->trajectory_id());
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
  }
  return ids;
}

// The trajectories that peeking samples of 8 reach: at least 50 batches, then
// on until every one of `expected` has come up (a one-step trajectory among a
// hundred items can be missed by 400 draws), at most 5000 batches.
std::set<uint64_t> DrawnTrajectories(Table& table, const std::set<uint64_t>& expected) {
  std::set<uint64_t> seen;
  SampleOptions o;
  o.peek = true;
  o.timeout = std::chrono::milliseconds(0);
  for (int b = 0; b < 5000; ++b) {
    if (b >= 50 && std::includes(seen.begin(), seen.end(), expected.begin(), expected.end())) {
      break;
    }
    auto batch = table.Sample(8, o);
    if (!batch.ok()) break;
    for (ItemKey k : batch->keys) seen.insert(ItemKeyTrajectory(k));
  }
  return seen;
}

// Every trajectory the table lists, hot and cold.
std::set<uint64_t> Listed(Table& table) {
  std::set<uint64_t> ids;
  for (const TrajectoryInfo& t : table.ListTrajectories({})) ids.insert(t.id);
  for (uint64_t id : table.ColdTrajectories(0, 1 << 20)) ids.insert(id);
  return ids;
}

struct ClearCase {
  SelectorKind selector;
  bool spill;
};

class TableClearTest : public ::testing::TestWithParam<ClearCase> {
 protected:
  // The trajectories that draws of a table holding `ids` reach: all, or
  // under FIFO the oldest only.
  static std::set<uint64_t> Drawable(const std::set<uint64_t>& ids) {
    if (GetParam().selector != SelectorKind::kFifo || ids.empty()) return ids;
    return {*ids.begin()};
  }

  TempDir dir_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_P(TableClearTest, ClearEmptiesBothTiersAndEveryHandleGoesOn) {
  auto db = testing_util::OpenDB(dir_.path());
  auto table = testing_util::CreateTable(db.get(), Spec(GetParam().selector, GetParam().spill));
  ASSERT_NE(table, nullptr);
  WriteEnded(*table, rng_, 10 + static_cast<int>(rng_() % 20));
  ASSERT_OK(db->Checkpoint());
  WriteEnded(*table, rng_, 5);
  // A writer in the middle of a trajectory, and a second handle of the table.
  ASSERT_OK_AND_ASSIGN(auto open, table->NewWriter());
  AppendSteps(*open, 77, 5);
  const uint64_t open_id = open->trajectory_id();
  ASSERT_OK_AND_ASSIGN(auto other, db->GetTable("c"));
  if (GetParam().spill) {
    ASSERT_FALSE(table->ColdTrajectories(0, 10).empty()) << "nothing went cold";
  }
  ASSERT_GT(table->Info().rate_limiter.inserts, 0);

  ASSERT_OK(table->Clear());
  TableInfo info = other->Info();
  EXPECT_EQ(info.num_items, 0);
  EXPECT_EQ(info.num_steps, 0);
  EXPECT_EQ(info.num_trajectories, 0);
  EXPECT_EQ(info.num_open_trajectories, 0);
  EXPECT_EQ(info.rate_limiter.inserts, 0);
  EXPECT_EQ(info.rate_limiter.samples, 0);
  EXPECT_EQ(info.rate_limiter.deletes, 0);
  EXPECT_GT(info.steps_inserted, 0) << "lifetime counters keep counting";
  EXPECT_TRUE(Listed(*table).empty());
  SampleOptions o;
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(table->Sample(1, o).status().code(), Status::Code::kDeadlineExceeded);

  // The open trajectory's writer is told once, then starts a new one.
  const int64_t v = 1;
  ConstTensor t{DType::kI64, Shape(), &v, sizeof v};
  const Status s = open->Append(std::span<const ConstTensor>(&t, 1));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "table 'c': trajectory " + std::to_string(open_id) +
                             " was removed while open, with its 5 steps, by a Clear of the "
                             "table; the writer's next step starts a new trajectory");
  ASSERT_OK(open->Append(std::span<const ConstTensor>(&t, 1)));
  const uint64_t reopened = open->trajectory_id();
  EXPECT_GT(reopened, open_id);
  ASSERT_OK(open->End(EndReason::kTerminal));
  std::set<uint64_t> now = WriteEnded(*other, rng_, 3);
  now.insert(reopened);
  EXPECT_EQ(DrawnTrajectories(*table, Drawable(now)), Drawable(now));
  EXPECT_EQ(Listed(*table), now);
  ASSERT_OK_AND_ASSIGN(auto report, db->Verify());
  EXPECT_TRUE(report.problems.empty()) << report.problems[0];
}

// One record: a reopen that replays the log, with or without a checkpoint
// before the clear, and one after the checkpoint that follows it, all hold
// exactly what was written after the clear.
TEST_P(TableClearTest, RecoveryRepeatsTheClearAndTheColdStoreLetsGo) {
  std::set<uint64_t> after;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto opened = DB::Open(testing_util::ManualCheckpoints(), dir_.path());
    ASSERT_OK(opened.status());
    std::unique_ptr<DB> db = std::move(opened).value();
    std::shared_ptr<Table> table;
    if (round == 0) {
      table = testing_util::CreateTable(db.get(), Spec(GetParam().selector, GetParam().spill));
      ASSERT_NE(table, nullptr);
      WriteEnded(*table, rng_, 12 + static_cast<int>(rng_() % 10));
      if (rng_() % 2 == 0) ASSERT_OK(db->Checkpoint());
      WriteEnded(*table, rng_, 4);
      ASSERT_OK(table->Clear());
      after = WriteEnded(*table, rng_, 2 + static_cast<int>(rng_() % 3));
    } else {
      ASSERT_OK_AND_ASSIGN(table, db->GetTable("c"));
      if (round == 1) {
        EXPECT_GT(db->recovery_info().wal_records, 0u);
      }
    }
    EXPECT_EQ(Listed(*table), after);
    EXPECT_EQ(DrawnTrajectories(*table, Drawable(after)), Drawable(after));
    ASSERT_OK_AND_ASSIGN(auto report, db->Verify());
    EXPECT_TRUE(report.problems.empty()) << report.problems[0];
    if (round == 1) ASSERT_OK(db->Checkpoint());  // round 2 opens from it
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TableClearTest,
    ::testing::Values(ClearCase{SelectorKind::kUniform, false},
                      ClearCase{SelectorKind::kPrioritized, true},
                      ClearCase{SelectorKind::kFifo, true}),
    [](const auto& info) {
      return std::string(SelectorKindName(info.param.selector)) +
             (info.param.spill ? "_spill" : "");
    });

// Clear syncs its record whatever the sync mode batches: a power loss right
// after it returns keeps the table empty.
TEST(TableClearDurabilityTest, APowerLossAfterClearReturnsKeepsItCleared) {
  TempDir dir;
  testing_util::FaultInjectionEnv env;
  DBOptions o = testing_util::ManualCheckpoints();
  o.env = &env;
  o.wal.sync = WalSyncMode::kBatch;
  std::mt19937_64 rng(testing_util::TestSeed());
  {
    auto db = DB::Open(o, dir.path());
    ASSERT_OK(db.status());
    auto table = testing_util::CreateTable(db->get(), Spec(SelectorKind::kUniform, false));
    ASSERT_NE(table, nullptr);
    WriteEnded(*table, rng, 6);
    ASSERT_OK((*db)->Checkpoint());
    ASSERT_OK(table->Clear());
    ASSERT_OK(env.DropUnsyncedData());
  }
  auto db = DB::Open(testing_util::ManualCheckpoints(), dir.path());
  ASSERT_OK(db.status());
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("c"));
  EXPECT_EQ(table->Info().num_items, 0);
  EXPECT_TRUE(Listed(*table).empty());
}

TEST(TableClearLimitsTest, AReadOnlyTableRefusesNamingWhy) {
  TempDir dir;
  {
    auto db = testing_util::OpenDB(dir.path());
    auto table = testing_util::CreateTable(db.get(), Spec(SelectorKind::kUniform, false));
    ASSERT_NE(table, nullptr);
  }
  auto db = DB::OpenReadOnly({}, dir.path());
  ASSERT_OK(db.status());
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("c"));
  const Status s = table->Clear();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("Clear"));
  EXPECT_THAT(s.message(), HasSubstr("read-only"));
}

// A vector table: every environment's open segment goes; the writer's next
// step reports it (naming an environment) and the one after starts anew.
TEST(TableClearLimitsTest, AVectorTableClearsAndItsWriterGoesOn) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec = Spec(SelectorKind::kUniform, false);
  spec.lanes = 4;
  auto table = testing_util::CreateTable(db.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(4));
  std::vector<int64_t> rows = {1, 2, 3, 4};
  ConstTensor t{DType::kI64, Shape{4}, rows.data(), rows.size() * sizeof(int64_t)};
  for (int i = 0; i < 5; ++i) ASSERT_OK(writer->Append(std::span<const ConstTensor>(&t, 1)));
  ASSERT_GT(table->Info().num_items, 0);
  ASSERT_OK(table->Clear());
  EXPECT_EQ(table->Info().num_items, 0);
  const Status s = writer->Append(std::span<const ConstTensor>(&t, 1));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("by a Clear of the table"));
  ASSERT_OK(writer->Append(std::span<const ConstTensor>(&t, 1)));
  EXPECT_EQ(table->Info().num_items, 4);
}

// Writers and samplers running through repeated clears: every call either
// succeeds or reports the clear; afterwards the table agrees with itself.
TEST(TableClearConcurrencyTest, ClearsBesideWritersAndSamplers) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  auto table = testing_util::CreateTable(db.get(), Spec(SelectorKind::kPrioritized, true));
  ASSERT_NE(table, nullptr);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      auto writer = table->NewWriter();
      ASSERT_OK(writer.status());
      for (int i = 0; i < 4000 && !stop.load(); ++i) {
        const int64_t v = w * 100000 + i;
        ConstTensor t{DType::kI64, Shape(), &v, sizeof v};
        const Status s = (*writer)->Append(std::span<const ConstTensor>(&t, 1));
        if (!s.ok()) {
          ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
          ASSERT_THAT(s.message(), HasSubstr("Clear"));
        }
        if (i % 23 == 22) {
          const Status e = (*writer)->End(EndReason::kTerminal);
          if (!e.ok()) {
            ASSERT_THAT(e.message(), HasSubstr("Clear"));
          }
        }
      }
    });
  }
  threads.emplace_back([&] {
    SampleOptions o;
    o.timeout = std::chrono::milliseconds(1);
    while (!stop.load()) {
      auto batch = table->Sample(4, o);
      if (!batch.ok()) {
        ASSERT_EQ(batch.status().code(), Status::Code::kDeadlineExceeded);
      }
    }
  });
  for (int c = 0; c < 20; ++c) {
    ASSERT_OK(table->Clear());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop.store(true);
  for (auto& th : threads) th.join();
  ASSERT_OK_AND_ASSIGN(auto report, db->Verify());
  EXPECT_TRUE(report.problems.empty()) << report.problems[0];
  ASSERT_OK(table->Clear());
  EXPECT_EQ(table->Info().num_steps, 0);
  EXPECT_TRUE(Listed(*table).empty());
}

}  // namespace
}  // namespace replaydb
