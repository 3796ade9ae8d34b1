// Durability: the write-ahead log, checkpoints and recovery, through the
// public API (and the fault-injecting Env).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/env.h"
#include "tests/test_util.h"
#include "tests/support/fault_injection_env.h"

namespace replaydb {
namespace {

using testing_util::FaultInjectionEnv;

using ::testing::HasSubstr;
using testing_util::ManualCheckpoints;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec Spec(std::string name = "t") {
  TableSpec spec;
  spec.name = std::move(name);
  spec.columns = {{"obs", DType::kF32, Shape{3}}, {"act", DType::kU8, Shape{5}}};
  spec.capacity_steps = 1 << 14;
  spec.block_steps = 16;
  return spec;
}

std::unique_ptr<DB> Open(const DBOptions& o, const std::string& path) {
  auto db = DB::Open(o, path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

// What the test wrote: per trajectory id, each step's bytes (obs then act).
using Model = std::map<uint64_t, std::vector<std::string>>;

std::string StepBytes(const testing_util::StepData& s) {
  std::string out;
  for (const auto& c : s.columns) out.append(reinterpret_cast<const char*>(c.data()), c.size());
  return out;
}

// Writers whose trajectories stay open, as in a crash: kept alive until the
// database that owns their table is gone (their own End then has no table
// left to reach), never leaked.
using OpenWriters = std::vector<std::unique_ptr<TrajectoryWriter>>;

// Writes `trajectories` random trajectories of 1..40 steps; ends all but
// the last `open` of them, whose writers go to `open_writers`.
void Write(Table& table, std::mt19937_64& rng, int trajectories, int open, Model* model,
           OpenWriters* open_writers = nullptr, WriterOptions wo = {}) {
  const TableSpec spec = table.spec();
  for (int i = 0; i < trajectories; ++i) {
    ASSERT_OK_AND_ASSIGN(auto writer, table.NewWriter(wo));
    const int steps = 1 + static_cast<int>(rng() % 40);
    std::vector<std::string> bytes;
    for (int s = 0; s < steps; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      ASSERT_OK(writer->Append(step.tensors));
      bytes.push_back(StepBytes(step));
    }
    (*model)[writer->trajectory_id()] = bytes;
    if (i < trajectories - open) {
      ASSERT_OK(writer->End(EndReason::kTerminal));
    } else {
      ASSERT_NE(open_writers, nullptr);
      open_writers->push_back(std::move(writer));
    }
  }
}

// Every step of the model is in the table, byte-identical.
void Verify(Table& table, const Model& model) {
  std::vector<ItemKey> keys;
  std::vector<std::string> expected;
  for (const auto& [id, steps] : model) {
    for (size_t s = 0; s < steps.size(); ++s) {
      keys.push_back(MakeItemKey(id, static_cast<int64_t>(s)));
      expected.push_back(steps[s]);
    }
  }
  SampleBatch batch;
  ASSERT_OK(table.Lookup(keys, &batch));
  ASSERT_EQ(batch.keys.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(batch.mask[i], 1) << "key " << keys[i] << " missing after recovery";
    std::string got;
    for (const Tensor& col : batch.columns) {
      const size_t per = col.size_bytes() / keys.size();
      got.append(reinterpret_cast<const char*>(col.data()) + i * per, per);
    }
    ASSERT_EQ(got, expected[i]) << "key " << keys[i] << " differs after recovery";
  }
}

// Reopens the database at `path` (log only) and checks table "t" holds
// every step of `model`.
void ReopenAndVerify(const std::string& path, const Model& model) {
  auto db = Open(ManualCheckpoints(), path);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, model);
}

TEST(RecoveryTest, ReplaysTheLogWhenNoCheckpointWasTaken) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  int64_t items = 0;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 12, 3, &model, &open_writers);
    items = table->Info().num_items;
  }
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_NE(db, nullptr);
  const RecoveryInfo info = db->recovery_info();
  EXPECT_GT(info.wal_records, 0u);
  EXPECT_EQ(info.trajectories_ended, 3);
  EXPECT_EQ(info.dropped_bytes, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, model);
  EXPECT_EQ(table->Info().num_items, items);
  EXPECT_EQ(table->Info().num_open_trajectories, 0);
}

TEST(RecoveryTest, CheckpointThenLogTail) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 6, 1, &model, &open_writers);
    ASSERT_OK(db->Checkpoint());
    Write(*table, rng, 6, 2, &model, &open_writers);
    ASSERT_OK(db->Checkpoint());
    Write(*table, rng, 5, 0, &model);
  }
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(db->recovery_info().checkpoint_found);
  EXPECT_GT(db->recovery_info().wal_records, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, model);
  // Reopening again (after the checkpoint Open took) replays nothing.
  db.reset();
  db = Open(ManualCheckpoints(), dir.path());
  EXPECT_EQ(db->recovery_info().wal_records, 0u);
  ASSERT_OK_AND_ASSIGN(table, db->GetTable("t"));
  Verify(*table, model);
}

// With automatic checkpoints (the default) Open returns after the replay and
// the checkpoint thread takes the recovery checkpoint: the replayed segments
// go soon after, and what they held is then in the cold store.
TEST(RecoveryTest, RecoveryCheckpointRunsInTheBackgroundWhenAutomatic) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 8, 2, &model, &open_writers);
  }
  const auto segments = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.Sub("wal"))) {
      n += e.path().extension() == ".log";
    }
    return n;
  };
  ASSERT_GE(segments(), 1u);
  {
    DBOptions automatic;  // defaults: every 256 MiB or 300 s, on close
    automatic.checkpoint.on_close = false;
    auto db = Open(automatic, dir.path());
    ASSERT_NE(db, nullptr);
    EXPECT_GT(db->recovery_info().wal_records, 0u);
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
    Verify(*table, model);  // serving before the checkpoint is done
    // Only the new segment is left once the background checkpoint is done.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (segments() > 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(segments(), 1u) << "the replayed segments were not checkpointed away";
  }
  // What the replayed segments held is in the checkpoint.
  auto db = Open(ManualCheckpoints(), dir.path());
  EXPECT_TRUE(db->recovery_info().checkpoint_found);
  EXPECT_EQ(db->recovery_info().wal_records, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, model);
}

// TableLogging::kOff: the table is durable as of its last checkpoint, and
// what it did since is not replayed, while a logged table beside it loses
// nothing.
TEST(RecoveryTest, UnloggedTableIsDurableAsOfItsLastCheckpoint) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model logged, unlogged;
  int64_t unlogged_steps = 0;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto t, db->CreateTable(Spec("t")));
    TableSpec spec = Spec("u");
    spec.logging = TableLogging::kOff;
    ASSERT_OK_AND_ASSIGN(auto u, db->CreateTable(spec));
    Write(*t, rng, 5, 0, &logged);
    Write(*u, rng, 5, 0, &unlogged);
    ASSERT_OK(db->Checkpoint());
    unlogged_steps = u->Info().num_steps;
    Write(*t, rng, 4, 0, &logged);
    Model lost;
    Write(*u, rng, 4, 0, &lost);
    EXPECT_GT(u->Info().num_steps, unlogged_steps);
  }
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_OK_AND_ASSIGN(auto t, db->GetTable("t"));
  ASSERT_OK_AND_ASSIGN(auto u, db->GetTable("u"));
  EXPECT_EQ(u->spec().logging, TableLogging::kOff);
  Verify(*t, logged);
  Verify(*u, unlogged);
  EXPECT_EQ(u->Info().num_steps, unlogged_steps);
}

TEST(RecoveryTest, CheckpointRoundTripKeepsPrioritiesAndDistribution) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec = Spec();
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_exponent = 0.7;
  Model model;
  std::map<ItemKey, double> probability;
  std::vector<ItemKey> keys;
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    Write(*table, rng, 10, 0, &model);
    std::vector<double> priorities;
    for (const auto& [id, steps] : model) {
      for (size_t s = 0; s < steps.size(); ++s) {
        keys.push_back(MakeItemKey(id, static_cast<int64_t>(s)));
        priorities.push_back(static_cast<double>(rng() % 1000) / 10.0);
      }
    }
    ASSERT_OK(table->UpdatePriorities(keys, priorities, nullptr));
    ASSERT_OK_AND_ASSIGN(SampleBatch batch, table->Sample(4096, {}));
    for (int64_t b = 0; b < batch.batch_size; ++b) probability[batch.keys[b]] = batch.probabilities[b];
  }
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, model);
  ASSERT_OK_AND_ASSIGN(SampleBatch batch, table->Sample(4096, {}));
  int compared = 0;
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    auto it = probability.find(batch.keys[b]);
    if (it == probability.end()) continue;
    EXPECT_NEAR(batch.probabilities[b], it->second, 1e-12) << "key " << batch.keys[b];
    ++compared;
  }
  EXPECT_GT(compared, 100);
}

TEST(RecoveryTest, RateLimiterCountersAreRestoredOrReset) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  RateLimiterInfo before;
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 5, 0, &model);
    ASSERT_OK(table->Sample(7, {}).status());
    before = table->Info().rate_limiter;
  }
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
    const RateLimiterInfo after = table->Info().rate_limiter;
    EXPECT_EQ(after.inserts, before.inserts);
    EXPECT_EQ(after.samples, before.samples);
    EXPECT_EQ(after.deletes, before.deletes);
  }
  DBOptions reset;
  reset.checkpoint.reset_rate_limiters_on_restore = true;
  auto db = Open(reset, dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  const TableInfo info = table->Info();
  EXPECT_EQ(info.rate_limiter.inserts, info.num_items);
  EXPECT_EQ(info.rate_limiter.samples, 0);
  EXPECT_EQ(info.rate_limiter.deletes, 0);
}

TEST(RecoveryTest, WithoutTheLogOnlyCheckpointsSurvive) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  DBOptions o = ManualCheckpoints();
  o.wal.enabled = false;
  Model checkpointed, later;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 4, 0, &checkpointed);
    ASSERT_OK(db->Checkpoint());
    Write(*table, rng, 4, 0, &later);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("wal")));
  auto db = Open(o, dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, checkpointed);
  int64_t steps = 0;
  for (const auto& [id, s] : checkpointed) steps += static_cast<int64_t>(s.size());
  EXPECT_EQ(table->Info().num_steps, steps);
}

TEST(RecoveryTest, DroppedTableIsNotReplayedIntoItsSuccessor) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model old_model, new_model;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto old_table, db->CreateTable(Spec()));
    Write(*old_table, rng, 3, 0, &old_model);
    ASSERT_OK(db->DropTable("t"));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 2, 0, &new_model);
  }
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, new_model);
  int64_t steps = 0;
  for (const auto& [id, s] : new_model) steps += static_cast<int64_t>(s.size());
  EXPECT_EQ(table->Info().num_steps, steps);
}

TEST(RecoveryTest, FullDiskFailsTheWriterAndLosesNothingAcknowledged) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  Model acked;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    env.SetSpaceLimit(env.bytes_written() + 5000);
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    Status s;
    std::vector<std::string> steps;
    while (true) {
      testing_util::StepData step = testing_util::RandomStep(table->spec(), rng);
      s = writer->Append(step.tensors);
      if (!s.ok()) break;
      steps.push_back(StepBytes(step));
    }
    EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
    EXPECT_THAT(s.message(), HasSubstr(dir.Sub("wal")));
    EXPECT_THAT(s.message(), HasSubstr("table 't'"));
    ASSERT_FALSE(steps.empty());
    // The refused step was not published.
    EXPECT_EQ(writer->num_steps(), static_cast<int64_t>(steps.size()));
    acked[writer->trajectory_id()] = steps;
    env.ClearSpaceLimit();
    open_writers.push_back(std::move(writer));
  }
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  Verify(*table, acked);
  EXPECT_EQ(table->Info().num_steps, static_cast<int64_t>(acked.begin()->second.size()));
}

TEST(RecoveryTest, FailedFsyncIsStickyAndLosesNothingAcknowledged) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  o.wal.sync = WalSyncMode::kAlways;
  Model acked;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 3, 0, &acked);
    env.FailNthSync(1);
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    testing_util::StepData step = testing_util::RandomStep(table->spec(), rng);
    Status s = writer->Append(step.tensors);
    EXPECT_EQ(s.code(), Status::Code::kIOError);
    EXPECT_THAT(s.message(), HasSubstr("injected fsync failure"));
    s = writer->Append(step.tensors);
    EXPECT_EQ(s.code(), Status::Code::kIOError);
    EXPECT_THAT(s.message(), HasSubstr("reopen"));
    open_writers.push_back(std::move(writer));
  }
  ReopenAndVerify(dir.path(), acked);
}

TEST(RecoveryTest, PowerLossKeepsEverySyncedStep) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  o.wal.sync = WalSyncMode::kAlways;
  Model acked;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 8, 2, &acked, &open_writers);
    ASSERT_OK(env.DropUnsyncedData());
  }
  ReopenAndVerify(dir.path(), acked);
}

// The cold store writes through the same Env (engine/cold/rocksdb_env.h): a full
// disk fails the checkpoint with the store's error, keeps the log it would
// have replaced, and a later checkpoint succeeds once there is room again.
TEST(RecoveryTest, CheckpointOnAFullDiskFailsAndLosesNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  Model acked;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 10, 0, &acked);
    const uint64_t before = env.bytes_written();
    env.SetSpaceLimit(before + 64);  // room for the next segment's header
    const Status s = db->Checkpoint();
    EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("cold store " + dir.Sub("cold")));
    EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
    EXPECT_GT(env.writes(), 0u);
    env.ClearSpaceLimit();
    Write(*table, rng, 5, 0, &acked);
    ASSERT_OK(db->Checkpoint());  // the store resumes once there is room
    Write(*table, rng, 5, 0, &acked);
  }
  ReopenAndVerify(dir.path(), acked);
}

// A checkpoint deletes the log it covers, so after a power loss its RocksDB
// files must be there: their writes, fsyncs and directory fsyncs go through
// the Env, which keeps exactly what was synced.
TEST(RecoveryTest, PowerLossAfterACheckpointKeepsIt) {
  OpenWriters open_writers;  // outlives every DB below
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  o.wal.sync = WalSyncMode::kAlways;
  Model acked;
  {
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 12, 0, &acked);
    const uint64_t syncs = env.syncs();
    ASSERT_OK(db->Checkpoint());
    EXPECT_GT(env.syncs(), syncs + 1) << "the cold store's fsyncs go through the Env";
    Write(*table, rng, 6, 2, &acked, &open_writers);
    ASSERT_OK(env.DropUnsyncedData());
  }
  ReopenAndVerify(dir.path(), acked);
}

std::string LastSegment(const std::string& wal_dir) {
  std::string last;
  for (const auto& e : std::filesystem::directory_iterator(wal_dir)) {
    if (e.path().extension() == ".log" && e.file_size() > 20) last = std::max(last, e.path().string());
  }
  return last;
}

TEST(RecoveryTest, TornTailIsDroppedOrReportedByMode) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 4, 0, &model);
  }
  const std::string segment = LastSegment(dir.Sub("wal"));
  ASSERT_FALSE(segment.empty());
  const auto size = std::filesystem::file_size(segment);
  std::filesystem::resize_file(segment, size - 3);

  DBOptions strict = ManualCheckpoints();
  strict.wal.recovery = RecoveryMode::kAbsoluteConsistency;
  auto failed = DB::Open(strict, dir.path());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kCorruption) << failed.status().ToString();
  EXPECT_THAT(failed.status().message(), HasSubstr(segment));
  EXPECT_THAT(failed.status().message(), HasSubstr("offset"));

  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_NE(db, nullptr);
  const RecoveryInfo info = db->recovery_info();
  EXPECT_GT(info.dropped_bytes, 0u);
  EXPECT_EQ(info.dropped_file, segment);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  // The last record (the last trajectory's End) was torn: every step is
  // still there.
  Verify(*table, model);
}

TEST(RecoveryTest, DamageInsideTheLogIsCorruptionUnlessPointInTime) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  Model model;
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec()));
    Write(*table, rng, 4, 0, &model);
  }
  const std::string segment = LastSegment(dir.Sub("wal"));
  ASSERT_FALSE(segment.empty());
  {
    std::fstream f(segment, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    char c;
    f.read(&c, 1);
    f.seekp(60);
    c = static_cast<char>(c ^ 0x10);
    f.write(&c, 1);
  }
  auto failed = DB::Open(ManualCheckpoints(), dir.path());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kCorruption) << failed.status().ToString();
  EXPECT_THAT(failed.status().message(), HasSubstr(segment));

  DBOptions pit = ManualCheckpoints();
  pit.wal.recovery = RecoveryMode::kPointInTime;
  auto db = Open(pit, dir.path());
  ASSERT_NE(db, nullptr);
  EXPECT_GT(db->recovery_info().dropped_bytes, 0u);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  EXPECT_LT(table->Info().num_steps, 4 * 40);
}

}  // namespace
}  // namespace replaydb
