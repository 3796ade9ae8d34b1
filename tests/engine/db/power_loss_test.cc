// Power loss, not only a crash of the process: writers run (with automatic
// checkpoints and spills in the background) until the fault-injecting Env
// cuts the power at a random moment, dropping every byte not yet fsynced,
// and keeps the machine off while the database is closed. Then it reopens
// on what a restart would find, again and again on the same directory. What
// docs/durability.md promises is checked exactly:
//   - WalSyncMode::kAlways: every acknowledged Append and End;
//   - kBatch, writers with WriterOptions::sync: the same;
//   - kBatch, other writers: every Append and End whose record a completed
//     fsync of the log covers (one begun after the call returned:
//     FaultInjectionEnv::SyncTicket and SyncedSince);
// come back, byte for byte; nothing comes back that was never written, and
// no trajectory is longer than what its writer tried.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::FaultInjectionEnv;
using testing_util::TempDir;
using testing_util::TestSeed;

constexpr int kIterations = 6;
constexpr int kWriters = 4;                   // the last one writes into the spill table
constexpr int kTrajectoriesPerWriter = 1000;  // per power cycle, at most

TableSpec Spec(const std::string& name, bool spill) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kF32, Shape{4}}, {"raw", DType::kU8, Shape{24}}};
  spec.block_steps = 8;
  // The plain table never evicts: what it lost would be an eviction, not a
  // power loss. The spill table evicts into the cold tier all the time.
  spec.capacity_steps = spill ? 8 * 8 : 1 << 18;
  spec.spill = spill;
  return spec;
}

std::string StepBytes(const testing_util::StepData& s) {
  std::string out;
  for (const auto& c : s.columns) out.append(reinterpret_cast<const char*>(c.data()), c.size());
  return out;
}

// One trajectory as a writer wrote it in one power cycle.
struct Written {
  std::string table;
  uint64_t id = 0;
  bool sync = false;                 // WriterOptions::sync
  std::vector<std::string> steps;    // every step tried, acknowledged or not
  std::vector<uint64_t> marks;       // per acknowledged step: the log's sync ticket after it
  std::optional<uint64_t> end_mark;  // End(kTerminal) acknowledged: the same
};

// What must be in the database: per table and trajectory id.
struct Expected {
  std::vector<std::string> steps;  // every step that may come back, in order
  size_t required = 0;             // how many of them must
  std::optional<EndReason> end;    // must come back ended so
};
using Model = std::map<std::string, std::map<uint64_t, Expected>>;

// Writes ended trajectories of 1..20 steps until `stop`, or until a call
// fails (once the power is off, every one does). `acks` counts the steps
// acknowledged as durable (sync always, or a writer that waits for its
// fsync); the others are not counted.
void WriterLoop(Table* table, bool sync, bool durable, uint64_t seed, FaultInjectionEnv* env,
                const std::string& wal_dir, const std::atomic<bool>* stop,
                const std::atomic<bool>* powered_off, std::atomic<int64_t>* acks,
                std::vector<Written>* out) {
  std::mt19937_64 rng(seed);
  WriterOptions wo;
  wo.sync = sync;
  const TableSpec spec = table->spec();
  for (int i = 0; i < kTrajectoriesPerWriter && !stop->load(); ++i) {
    auto writer = table->NewWriter(wo);
    if (!writer.ok()) {
      EXPECT_TRUE(powered_off->load()) << writer.status().ToString();
      return;
    }
    Written w;
    w.table = table->name();
    w.sync = sync;
    Status s;
    const int steps = 1 + static_cast<int>(rng() % 20);
    for (int k = 0; k < steps && s.ok(); ++k) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      w.steps.push_back(StepBytes(step));
      s = (*writer)->Append(step.tensors);
      if (s.ok()) {
        w.marks.push_back(env->SyncTicket(wal_dir));
        if (durable) acks->fetch_add(1);
      }
      w.id = (*writer)->trajectory_id();
    }
    if (s.ok()) {
      s = (*writer)->End(EndReason::kTerminal);
      if (s.ok()) w.end_mark = env->SyncTicket(wal_dir);
    }
    if (w.id != 0) out->push_back(std::move(w));
    if (!s.ok()) {
      EXPECT_TRUE(powered_off->load()) << "failed with the power on: " << s.ToString();
      return;
    }
  }
}

// The bytes of steps [0, n) of trajectory `id`, one string per step.
std::vector<std::string> ReadSteps(Table& table, uint64_t id, int64_t n) {
  TrajectorySteps read;
  const Status s = table.ReadTrajectory(id, 0, n, &read);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> out(static_cast<size_t>(n));
  if (!s.ok()) return out;
  for (int64_t k = 0; k < n; ++k) {
    for (const Tensor& col : read.columns) {
      const size_t per = col.size_bytes() / static_cast<size_t>(n);
      out[static_cast<size_t>(k)].append(reinterpret_cast<const char*>(col.data()) + k * per, per);
    }
  }
  return out;
}

struct Counts {
  int64_t acked = 0;     // acknowledged steps
  int64_t required = 0;  // of them, promised to survive
};

// Checks the reopened database against `model`, then makes `model` what
// came back (all of it durable now, and every trajectory ended).
void VerifyAndAdopt(DB& db, Model* model) {
  for (auto& [name, trajectories] : *model) {
    ASSERT_OK_AND_ASSIGN(auto table, db.GetTable(name));
    std::map<uint64_t, TrajectoryInfo> listed;
    for (const TrajectoryInfo& t : table->ListTrajectories()) listed[t.id] = t;
    for (const auto& [id, info] : listed) {
      ASSERT_EQ(trajectories.count(id), 1u)
          << "table '" << name << "': trajectory " << id << " (" << info.length
          << " steps) came back but was never written";
    }
    for (auto& [id, want] : trajectories) {
      auto it = listed.find(id);
      const int64_t length = it == listed.end() ? 0 : it->second.length;
      ASSERT_GE(length, static_cast<int64_t>(want.required))
          << "table '" << name << "': trajectory " << id << " lost acknowledged steps";
      ASSERT_LE(length, static_cast<int64_t>(want.steps.size()))
          << "table '" << name << "': trajectory " << id << " has steps never written";
      const std::vector<std::string> got =
          length > 0 ? ReadSteps(*table, id, length) : std::vector<std::string>();
      for (int64_t k = 0; k < length; ++k) {
        ASSERT_EQ(got[static_cast<size_t>(k)], want.steps[static_cast<size_t>(k)])
            << "table '" << name << "': trajectory " << id << " step " << k
            << " came back corrupted";
      }
      if (want.end) {
        ASSERT_NE(it, listed.end());
        EXPECT_TRUE(it->second.ended) << "trajectory " << id;
        EXPECT_EQ(it->second.end_reason, *want.end)
            << "table '" << name << "': trajectory " << id << " lost its acknowledged End";
      }
      // Adopt what came back.
      want.steps.resize(static_cast<size_t>(length));
      want.required = static_cast<size_t>(length);
      want.end.reset();
      if (it != listed.end()) {
        EXPECT_TRUE(it->second.ended) << "recovery ends every open trajectory: " << id;
        want.end = it->second.end_reason;
      }
    }
  }
}

void PowerLossRun(WalSyncMode mode) {
  TempDir dir;
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  FaultInjectionEnv env;
  DBOptions o;
  o.env = &env;
  o.wal.sync = mode;
  o.checkpoint.every_wal_bytes = 16 << 10;  // checkpoints all the time
  const std::string wal_dir = dir.Sub("wal");
  Model model;
  Counts counts;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
    ASSERT_OK(db->CreateTable(Spec("plain", false)).status());
    ASSERT_OK(db->CreateTable(Spec("spill", true)).status());
    ASSERT_OK(db->Checkpoint());  // the tables are durable before the first cut
  }
  model["plain"];
  model["spill"];
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    SCOPED_TRACE("power cycle " + std::to_string(iteration));
    std::vector<std::vector<Written>> written(kWriters);
    {
      ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
      ASSERT_OK_AND_ASSIGN(auto plain, db->GetTable("plain"));
      ASSERT_OK_AND_ASSIGN(auto spill, db->GetTable("spill"));
      std::atomic<bool> stop{false};
      std::atomic<bool> powered_off{false};
      std::atomic<int64_t> acks{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kWriters; ++t) {
        Table* table = t + 1 == kWriters ? spill.get() : plain.get();
        // kBatch: half the writers ask for a sync, half do not.
        const bool sync = mode == WalSyncMode::kBatch && t % 2 == 0;
        const bool durable = mode == WalSyncMode::kAlways || sync;
        threads.emplace_back(WriterLoop, table, sync, durable, rng(), &env, wal_dir, &stop,
                             &powered_off, &acks, &written[static_cast<size_t>(t)]);
      }
      // The cut comes a random while after the first step acknowledged as
      // durable (after the first step of any writer, a loaded machine's
      // first fsync could still be under way at every cut, and the run
      // would promise nothing).
      const auto start = std::chrono::steady_clock::now();
      while (acks.load() == 0 &&
             std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 250'000));
      powered_off = true;
      ASSERT_OK(env.PowerOff());
      stop = true;
      plain->Close();  // wakes a writer waiting for blocks that spills hold
      spill->Close();
      for (auto& t : threads) t.join();
    }  // closing: its checkpoint and final fsyncs meet a machine that is off
    env.PowerOn();

    for (const std::vector<Written>& per_writer : written) {
      for (const Written& w : per_writer) {
        Expected& want = model[w.table][w.id];
        want.steps = w.steps;
        counts.acked += static_cast<int64_t>(w.marks.size());
        const bool all = mode == WalSyncMode::kAlways || w.sync;
        for (uint64_t mark : w.marks) {
          if (all || env.SyncedSince(wal_dir, mark)) ++want.required;
        }
        if (w.end_mark && (all || env.SyncedSince(wal_dir, *w.end_mark))) {
          want.end = EndReason::kTerminal;
        }
        counts.required += static_cast<int64_t>(want.required);
      }
    }
    auto db = DB::Open(o, dir.path());
    ASSERT_TRUE(db.ok()) << "reopening after the power loss: " << db.status().ToString();
    VerifyAndAdopt(**db, &model);
    if (::testing::Test::HasFailure()) return;
  }
  int64_t back = 0;
  for (const auto& [name, trajectories] : model) {
    for (const auto& [id, want] : trajectories) back += static_cast<int64_t>(want.steps.size());
  }
  std::cerr << "[ power    ] " << kIterations << " power losses: " << counts.acked
            << " steps acknowledged, " << counts.required << " of them promised to survive, "
            << back << " in the database at the end\n";
  EXPECT_GT(counts.required, 0);
}

TEST(PowerLossTest, SyncAlwaysKeepsEveryAcknowledgedStep) {
  PowerLossRun(WalSyncMode::kAlways);
}

TEST(PowerLossTest, SyncBatchKeepsEveryStepACompletedSyncCovers) {
  PowerLossRun(WalSyncMode::kBatch);
}

// A segment can be left holding only its header: an append that needed a
// new segment met a full disk after the header was written (the append
// fails, the log goes on in the new segment). Nothing used to fsync that
// header; when a checkpoint then rolled past the segment and failed (or the
// power went before it landed), the log after a power loss held an empty
// segment followed by the one with the acknowledged records, and Open
// refused it as damage inside the log ("empty segment (no header) (not in
// the last segment)").
TEST(PowerLossTest, AHeaderOnlySegmentSurvivesAPowerLoss) {
  for (WalSyncMode mode : {WalSyncMode::kAlways, WalSyncMode::kBatch}) {
    SCOPED_TRACE(mode == WalSyncMode::kAlways ? "sync always" : "sync batch");
    TempDir dir;
    std::mt19937_64 rng(TestSeed());
    FaultInjectionEnv env;
    DBOptions o = testing_util::ManualCheckpoints();
    o.env = &env;
    o.wal.sync = mode;
    o.wal.segment_bytes = 4096;
    WriterOptions wo;
    wo.sync = true;  // kBatch: the writer waits for its fsync
    std::vector<std::string> acked;
    uint64_t id = 0;
    {
      ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
      ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec("plain", false)));
      ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(wo));
      const auto append = [&]() -> Status {
        testing_util::StepData step = testing_util::RandomStep(table->spec(), rng);
        const Status s = writer->Append(step.tensors);
        if (s.ok()) acked.push_back(StepBytes(step));
        return s;
      };
      // Room for a segment header and no more, until an append needs the
      // next segment: it gets the header, the record does not fit.
      for (int i = 0;; ++i) {
        ASSERT_LT(i, 1000) << "the log never moved to a new segment";
        ASSERT_OK_AND_ASSIGN(const WalInfo before, db->Wal());
        env.SetSpaceLimit(env.bytes_written() + 20);
        const Status s = append();
        env.ClearSpaceLimit();
        ASSERT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
        ASSERT_OK_AND_ASSIGN(const WalInfo after, db->Wal());
        if (after.last_segment > before.last_segment) break;
        ASSERT_OK(append());
      }
      // A checkpoint rolls past it (room for the next header), then fails.
      env.SetSpaceLimit(env.bytes_written() + 64);
      const Status s = db->Checkpoint();
      env.ClearSpaceLimit();
      ASSERT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
      for (int k = 0; k < 5; ++k) ASSERT_OK(append());
      id = writer->trajectory_id();
      ASSERT_OK(env.PowerOff());
      table->Close();
    }
    env.PowerOn();
    auto db = DB::Open(o, dir.path());
    ASSERT_TRUE(db.ok()) << "reopening after the power loss: " << db.status().ToString();
    ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("plain"));
    EXPECT_EQ(ReadSteps(*table, id, static_cast<int64_t>(acked.size())), acked);
  }
}

}  // namespace
}  // namespace replaydb
