// DB::Wal, DB::Verify, DB::Compact, and the cancel flags and progress reports
// of the long calls (LongOperationOptions).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/cold/cold_store.h"
#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::ManualCheckpoints;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec SmallSpill(const std::string& name) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"x", DType::kF32, Shape{3}}, {"b", DType::kU8, Shape{5}}};
  spec.block_steps = 8;
  spec.capacity_steps = 64;
  spec.spill = true;
  return spec;
}

// Writes n ended trajectories of 1..20 random steps; returns the steps.
int64_t Fill(Table* table, int n, std::mt19937_64& rng) {
  auto writer = table->NewWriter();
  EXPECT_TRUE(writer.ok());
  int64_t steps = 0;
  for (int t = 0; t < n; ++t) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 20);
    for (int64_t s = 0; s < len; ++s) {
      EXPECT_OK((*writer)->Append(testing_util::RandomStep(table->spec(), rng).tensors));
    }
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
    steps += len;
  }
  return steps;
}

void AwaitSpills(Table* table) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (table->Info().spill_queue > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(WalInfoTest, CountsWhatACrashWouldReplay) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(SmallSpill("t")));
  ASSERT_OK(db->Checkpoint());
  ASSERT_OK_AND_ASSIGN(WalInfo before, db->Wal());
  EXPECT_TRUE(before.enabled);
  EXPECT_EQ(before.dir, dir.path() + "/wal");
  EXPECT_EQ(before.records_since_checkpoint, 0u);
  EXPECT_GE(before.checkpoint_sequence, 1u);
  Fill(table.get(), 1 + static_cast<int>(rng() % 3), rng);
  ASSERT_OK_AND_ASSIGN(WalInfo after, db->Wal());
  EXPECT_GT(after.records_since_checkpoint, 0u);
  EXPECT_GT(after.bytes_since_checkpoint, after.records_since_checkpoint);
  EXPECT_GE(after.segments, 1u);
  EXPECT_GE(after.bytes, after.bytes_since_checkpoint);
  EXPECT_EQ(after.checkpoint_segment, before.checkpoint_segment);
  EXPECT_TRUE(after.note.empty()) << after.note;
  // A reader sees the same log; the writer's checkpoint empties it.
  {
    ASSERT_OK_AND_ASSIGN(auto reader, DB::OpenReadOnly({}, dir.path()));
    ASSERT_OK_AND_ASSIGN(WalInfo seen, reader->Wal());
    EXPECT_EQ(seen.records_since_checkpoint, after.records_since_checkpoint);
  }
  ASSERT_OK(db->Checkpoint());
  ASSERT_OK_AND_ASSIGN(WalInfo emptied, db->Wal());
  EXPECT_EQ(emptied.records_since_checkpoint, 0u);
  EXPECT_EQ(emptied.checkpoint_sequence, after.checkpoint_sequence + 1);
}

TEST(VerifyTest, CleanDatabaseReadsEverythingAndFindsNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto a, db->CreateTable(SmallSpill("a")));
  ASSERT_OK_AND_ASSIGN(auto b, db->CreateTable(SmallSpill("b")));
  const int64_t steps = Fill(a.get(), 10 + static_cast<int>(rng() % 10), rng) +
                        Fill(b.get(), 1 + static_cast<int>(rng() % 3), rng);
  AwaitSpills(a.get());
  ASSERT_OK(db->Checkpoint());
  ASSERT_OK_AND_ASSIGN(VerifyReport r, db->Verify());
  EXPECT_TRUE(r.problems.empty()) << r.problems[0];
  EXPECT_EQ(r.tables, 2);
  EXPECT_EQ(r.steps, steps);
  EXPECT_EQ(r.bytes, steps * static_cast<int64_t>(a->spec().step_bytes()));
  EXPECT_EQ(r.cold_trajectories, a->Info().cold_trajectories + b->Info().cold_trajectories);
  EXPECT_GT(r.cold_trajectories, 0);
  EXPECT_EQ(r.hot_trajectories, a->Info().num_trajectories + b->Info().num_trajectories);
  ASSERT_OK(db->Compact());
  ASSERT_OK_AND_ASSIGN(VerifyReport again, db->Verify());
  EXPECT_TRUE(again.problems.empty());
  EXPECT_EQ(again.steps, steps);
}

TEST(VerifyTest, ReportsADamagedColdTrajectory) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  uint64_t damaged = 0;
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(SmallSpill("t")));
    Fill(t.get(), 20, rng);
    AwaitSpills(t.get());
    const std::vector<uint64_t> cold = t->ColdTrajectories();
    ASSERT_FALSE(cold.empty());
    damaged = cold[rng() % cold.size()];
    ASSERT_OK(db->Checkpoint());
  }
  {
    ASSERT_OK_AND_ASSIGN(auto store,
                         engine::ColdStore::Open(dir.path() + "/cold", Env::Default()));
    std::vector<uint32_t> tables;
    ASSERT_OK(store->ListTables(&tables));
    ASSERT_EQ(tables.size(), 1u);
    engine::ColdStore::Batch batch;
    batch.PutSteps(tables[0], damaged, 0, "garbage");
    ASSERT_OK(store->Write(batch));
  }
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(VerifyReport r, db->Verify());
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_THAT(r.problems[0], HasSubstr("table 't': cold store "));
  EXPECT_THAT(r.problems[0], HasSubstr("trajectory " + std::to_string(damaged) +
                                       ": the step chunk at step 0 is malformed"));
}

TEST(CancelTest, LongCallsStopAndLeaveNothingBehind) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  auto db = testing_util::OpenDB(dir.path() + "/db");
  ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(SmallSpill("t")));
  Fill(t.get(), 5, rng);
  ASSERT_OK(db->ExportTable("t", dir.path() + "/source"));
  const std::atomic<bool> cancel{true};
  LongOperationOptions cancelled;
  cancelled.cancel = &cancel;

  Status s = db->ExportTable("t", dir.path() + "/out", cancelled);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("interrupted after 0 steps; nothing was kept"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out"));

  Result<std::shared_ptr<Table>> imported =
      db->ImportTable(dir.path() + "/source", "t", "copy", cancelled);
  EXPECT_EQ(imported.status().code(), Status::Code::kCancelled);
  EXPECT_EQ(db->ListTables(), std::vector<std::string>{"t"}) << "no half-imported table";

  Result<VerifyReport> verified = db->Verify(cancelled);
  EXPECT_EQ(verified.status().code(), Status::Code::kCancelled);
  EXPECT_THAT(verified.status().message(), HasSubstr("verify interrupted"));

  s = db->Compact(cancelled);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_THAT(s.message(),
              HasSubstr("cold store " + dir.path() + "/db/cold: compaction interrupted"));
  // Nothing was damaged on the way.
  ASSERT_OK_AND_ASSIGN(VerifyReport r, db->Verify());
  EXPECT_TRUE(r.problems.empty());
}

TEST(CompactTest, ReadOnlyOpenersCannot) {
  TempDir dir;
  { auto db = testing_util::OpenDB(dir.path()); }
  ASSERT_OK_AND_ASSIGN(auto reader, DB::OpenReadOnly({}, dir.path()));
  const Status s = reader->Compact();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("Compact: database " + dir.path() + " was opened read-only"));
}

// What a progress callback was told, the string_views copied.
struct Report {
  std::string operation;
  int64_t done = 0;
  int64_t total = 0;
  std::string unit;
  bool finished = false;
};

// Options whose callback records every report into *reports.
LongOperationOptions Recording(std::vector<Report>* reports) {
  LongOperationOptions options;
  options.progress = [reports](const ProgressUpdate& u) {
    reports->push_back(
        {std::string(u.operation), u.done, u.total, std::string(u.unit), u.finished});
  };
  return options;
}

// The reports of one call: one operation and unit throughout, done never
// going down, the start first (done 0) and the finish last, only then.
void ExpectOneCall(const std::vector<Report>& reports, const std::string& operation,
                   const std::string& unit) {
  ASSERT_GE(reports.size(), 2u) << operation;
  EXPECT_EQ(reports.front().done, 0) << operation;
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].operation, operation);
    EXPECT_EQ(reports[i].unit, unit) << operation;
    EXPECT_EQ(reports[i].total, reports.front().total) << operation;
    EXPECT_EQ(reports[i].finished, i + 1 == reports.size()) << operation << " report " << i;
    if (i > 0) {
      EXPECT_GE(reports[i].done, reports[i - 1].done) << operation << " report " << i;
    }
  }
}

TEST(ProgressTest, LongCallsReportWhatTheyDidUpToTheTotal) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  auto db = testing_util::OpenDB(dir.path() + "/db");
  ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(SmallSpill("t")));
  const int64_t steps = Fill(t.get(), 10 + static_cast<int>(rng() % 10), rng);
  AwaitSpills(t.get());

  std::vector<Report> reports;
  ASSERT_OK(db->ExportTable("t", dir.path() + "/exported", Recording(&reports)));
  ExpectOneCall(reports, "export t", "steps");
  EXPECT_EQ(reports.back().done, steps);
  EXPECT_EQ(reports.back().total, steps);

  reports.clear();
  ASSERT_OK(db->ImportTable(dir.path() + "/exported", "t", "copy", Recording(&reports)).status());
  ExpectOneCall(reports, "import copy", "steps");
  EXPECT_EQ(reports.back().done, steps);
  EXPECT_EQ(reports.back().total, steps);

  reports.clear();
  ASSERT_OK_AND_ASSIGN(VerifyReport r, db->Verify(Recording(&reports)));
  EXPECT_TRUE(r.problems.empty());
  ExpectOneCall(reports, "verify " + dir.path() + "/db", "steps");
  EXPECT_EQ(reports.back().done, 2 * steps) << "both tables read";
  EXPECT_EQ(reports.back().total, 2 * steps);

  reports.clear();
  ASSERT_OK(db->Compact(Recording(&reports)));
  ExpectOneCall(reports, "compact " + dir.path() + "/db/cold", "bytes");
  EXPECT_EQ(reports.back().done, reports.back().total);
  EXPECT_GT(reports.back().total, 0);
}

TEST(ProgressTest, ACancelledCallStillReportsItsFinish) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  auto db = testing_util::OpenDB(dir.path() + "/db");
  ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(SmallSpill("t")));
  Fill(t.get(), 5, rng);
  const std::atomic<bool> cancel{true};
  std::vector<Report> reports;
  LongOperationOptions options = Recording(&reports);
  options.cancel = &cancel;
  const Status s = db->ExportTable("t", dir.path() + "/out", options);
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  ExpectOneCall(reports, "export t", "steps");
  EXPECT_EQ(reports.back().done, 0);
}

TEST(ProgressTest, ACallThatFailsBeforeItStartsReportsNothing) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path() + "/db");
  std::vector<Report> reports;
  const Status s = db->ExportTable("missing", dir.path() + "/out", Recording(&reports));
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_TRUE(reports.empty());
}

}  // namespace
}  // namespace replaydb
