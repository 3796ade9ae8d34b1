// DB::OpenReadOnly: several readers beside a writer, each seeing the
// writer's last checkpoint; everything that would write fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec Spec(bool spill) {
  TableSpec spec;
  spec.name = "data";
  spec.columns = {{"x", DType::kF32, Shape{5}}, {"r", DType::kU8, Shape{3}}};
  spec.block_steps = 8;
  spec.capacity_steps = spill ? 64 : 4096;
  spec.spill = spill;
  return spec;
}

// Writes `n` ended trajectories; returns the steps by item key.
std::map<ItemKey, std::vector<std::vector<std::byte>>> Write(Table* table, const TableSpec& spec,
                                                             int n, std::mt19937_64& rng) {
  std::map<ItemKey, std::vector<std::vector<std::byte>>> out;
  auto writer = table->NewWriter();
  EXPECT_TRUE(writer.ok());
  for (int i = 0; i < n; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 12);
    for (int64_t s = 0; s < len; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      EXPECT_OK((*writer)->Append(step.tensors));
      out[MakeItemKey((*writer)->trajectory_id(), s)] = step.columns;
    }
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
  }
  return out;
}

void ExpectSteps(Table* table, const std::map<ItemKey, std::vector<std::vector<std::byte>>>& want) {
  std::map<uint64_t, std::vector<ItemKey>> by_trajectory;
  for (const auto& [key, cols] : want) by_trajectory[ItemKeyTrajectory(key)].push_back(key);
  for (const auto& [id, keys] : by_trajectory) {
    const uint64_t ids[] = {id};
    ASSERT_OK(table->Load(ids));
    SampleBatch batch;
    ASSERT_OK(table->Lookup(keys, &batch));
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto& cols = want.at(keys[i]);
      for (size_t c = 0; c < cols.size(); ++c) {
        ASSERT_EQ(std::memcmp(reinterpret_cast<const std::byte*>(batch.columns[c].data()) +
                                  i * cols[c].size(),
                              cols[c].data(), cols[c].size()),
                  0)
            << "trajectory " << id;
      }
    }
  }
}

TEST(ReadOnlyTest, ReadersSeeTheLastCheckpointWhileTheWriterWrites) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = Spec(/*spill=*/false);
  ASSERT_OK_AND_ASSIGN(auto writer_db, DB::Open({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, writer_db->CreateTable(spec));
  const auto first = Write(table.get(), spec, 20, rng);
  ASSERT_OK(writer_db->Checkpoint());
  const int64_t checkpointed_steps = table->Info().num_steps;

  // The writer goes on (and checkpoints) while two readers open and read.
  std::atomic<bool> stop{false};
  std::thread writing([&] {
    std::mt19937_64 wrng(rng());
    while (!stop.load()) {
      Write(table.get(), spec, 3, wrng);
      EXPECT_OK(writer_db->Checkpoint());
    }
  });
  ASSERT_OK_AND_ASSIGN(auto reader1, DB::OpenReadOnly({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto reader2, DB::OpenReadOnly({}, dir.path()));
  EXPECT_TRUE(reader1->read_only());
  for (auto* reader : {reader1.get(), reader2.get()}) {
    ASSERT_EQ(reader->ListTables(), std::vector<std::string>{"data"});
    ASSERT_OK_AND_ASSIGN(auto t, reader->GetTable("data"));
    const int64_t steps = t->Info().num_steps;
    EXPECT_GE(steps, checkpointed_steps);
    ExpectSteps(t.get(), first);
    ASSERT_OK_AND_ASSIGN(SampleBatch batch, t->Sample(16));
    EXPECT_EQ(batch.batch_size, 16);
    // What the reader sees does not move with the writer.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(t->Info().num_steps, steps);
  }
  stop.store(true);
  writing.join();
  // A reader opened after the last checkpoint sees everything.
  const int64_t all_steps = table->Info().num_steps;
  ASSERT_OK_AND_ASSIGN(auto reader3, DB::OpenReadOnly({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto t3, reader3->GetTable("data"));
  EXPECT_EQ(t3->Info().num_steps, all_steps);
}

// The writer's checkpoints compact the cold store's files away while a
// reader opens; every open must still succeed, each with a view at least as
// new as the checkpoint taken before it began. (Bounded: 40 opens or 30 s.)
TEST(ReadOnlyTest, ReadersOpenWhileTheWriterCompactsAwayTheirFiles) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec = Spec(/*spill=*/false);
  spec.capacity_steps = 1 << 20;  // nothing evicted: num_steps only grows
  ASSERT_OK_AND_ASSIGN(auto writer_db, DB::Open({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, writer_db->CreateTable(spec));
  Write(table.get(), spec, 5, rng);
  ASSERT_OK(writer_db->Checkpoint());
  std::atomic<int64_t> checkpointed{table->Info().num_steps};
  std::atomic<bool> stop{false};
  std::thread writing([&] {
    std::mt19937_64 wrng(rng());
    while (!stop.load()) {
      Write(table.get(), spec, 2, wrng);
      const int64_t steps = table->Info().num_steps;
      EXPECT_OK(writer_db->Checkpoint());
      checkpointed.store(steps);
    }
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 40 && std::chrono::steady_clock::now() < until; ++i) {
    const int64_t floor = checkpointed.load();
    auto reader = DB::OpenReadOnly({}, dir.path());
    ASSERT_TRUE(reader.ok()) << "open " << i << ": " << reader.status().ToString();
    ASSERT_OK_AND_ASSIGN(auto t, (*reader)->GetTable("data"));
    EXPECT_GE(t->Info().num_steps, floor) << "open " << i;
    ASSERT_OK_AND_ASSIGN(SampleBatch batch, t->Sample(8));
    EXPECT_EQ(batch.batch_size, 8);
  }
  stop.store(true);
  writing.join();
}

TEST(ReadOnlyTest, WritesFailNamingTheReadOnlyOpen) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = Spec(/*spill=*/false);
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.path()));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    Write(table.get(), spec, 3, rng);
  }
  ASSERT_OK_AND_ASSIGN(auto db, DB::OpenReadOnly({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("data"));
  const auto expect = [](const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << what;
    EXPECT_THAT(s.message(), HasSubstr(what));
    EXPECT_THAT(s.message(), HasSubstr("read-only (DB::OpenReadOnly)"));
  };
  expect(table->NewWriter().status(), "table 'data': NewWriter needs a read-write database");
  expect(table->NewVectorWriter(4).status(), "NewVectorWriter");
  const ItemKey key = MakeItemKey(1, 0);
  const double p = 1;
  expect(table->UpdatePriorities(std::span<const ItemKey>(&key, 1), std::span<const double>(&p, 1)),
         "UpdatePriorities");
  expect(table->SetRateLimiter(RateLimiterSpec::MinSize(2)), "SetRateLimiter");
  TableSpec other = spec;
  other.name = "other";
  expect(db->CreateTable(other).status(), "CreateTable: database " + dir.path());
  expect(db->DropTable("data"), "DropTable");
  expect(db->Checkpoint(), "Checkpoint");
  // Nothing was written: a read-write open still finds one table.
  db.reset();
  table.reset();
  ASSERT_OK_AND_ASSIGN(auto rw, DB::Open({}, dir.path()));
  EXPECT_EQ(rw->ListTables(), std::vector<std::string>{"data"});
}

TEST(ReadOnlyTest, MissingDatabaseIsNotFound) {
  TempDir dir;
  const auto db = DB::OpenReadOnly({}, dir.Sub("nothing"));
  EXPECT_EQ(db.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(db.status().message(), HasSubstr("no database at " + dir.Sub("nothing")));
}

TEST(ReadOnlyTest, ReaderLoadsSpilledTrajectories) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = Spec(/*spill=*/true);
  ASSERT_OK_AND_ASSIGN(auto writer_db, DB::Open({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, writer_db->CreateTable(spec));
  const auto written = Write(table.get(), spec, 30, rng);
  ASSERT_OK(writer_db->Checkpoint());
  ASSERT_GT(table->Info().cold_trajectories, 0);
  ASSERT_OK_AND_ASSIGN(auto reader, DB::OpenReadOnly({}, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto t, reader->GetTable("data"));
  EXPECT_EQ(t->Info().cold_trajectories + t->Info().num_trajectories,
            table->Info().cold_trajectories + table->Info().num_trajectories);
  // Loading in the reader evicts within the reader only.
  ExpectSteps(t.get(), written);
  EXPECT_EQ(t->Info().spilled_bytes, table->Info().spilled_bytes);
}

}  // namespace
}  // namespace replaydb
