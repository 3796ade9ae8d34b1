// Table's inspection calls: ListTrajectories (with filters and paging over
// both tiers), ReadTrajectory (hot, cold, and while a spill cannot land),
// ItemPriorities, and Sample with SampleOptions::peek.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/support/fault_injection_env.h"

namespace replaydb {
namespace {

using testing_util::FaultInjectionEnv;

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TestSeed;

// What the test wrote into one trajectory.
struct Written {
  std::vector<std::vector<std::vector<std::byte>>> steps;  // [step][column] bytes
  std::vector<double> priorities;
  bool ended = false;
  EndReason reason = EndReason::kTruncated;
};

TableSpec InspectSpec(std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = "inspect";
  spec.columns = {{"obs", DType::kF32, Shape{static_cast<int64_t>(1 + rng() % 6)}},
                  {"flag", DType::kBool, Shape{}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(1 + rng() % 30), 2}}};
  spec.block_steps = 4;
  spec.capacity_steps = 40;
  spec.spill = true;
  return spec;
}

// Appends `len` random steps with random priorities through `writer`.
void AppendSteps(TrajectoryWriter* writer, const TableSpec& spec, int64_t len,
                 std::mt19937_64& rng, Written* w) {
  for (int64_t s = 0; s < len; ++s) {
    testing_util::StepData step = testing_util::RandomStep(spec, rng);
    const double p = static_cast<double>(rng() % 1000) / 8.0;
    ASSERT_OK(writer->Append(step.tensors, p));
    w->steps.push_back(step.columns);
    w->priorities.push_back(p);
  }
}

void AwaitSpills(Table* table) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (table->Info().spill_queue > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "spills did not finish";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Checks steps [first, first + count) of trajectory `id` read back against `w`.
void ExpectRead(Table* table, const TableSpec& spec, uint64_t id, const Written& w, int64_t first,
                int64_t count) {
  TrajectorySteps got;
  ASSERT_OK(table->ReadTrajectory(id, first, count, &got));
  const int64_t len = static_cast<int64_t>(w.steps.size());
  const int64_t n = std::min(count, len - first);
  EXPECT_EQ(got.info.id, id);
  EXPECT_EQ(got.info.length, len);
  EXPECT_EQ(got.first, first);
  ASSERT_EQ(got.step_priorities.size(), static_cast<size_t>(n)) << "trajectory " << id;
  ASSERT_EQ(got.columns.size(), spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const size_t cb = spec.columns[c].step_bytes();
    EXPECT_EQ(got.columns[c].dtype(), spec.columns[c].dtype);
    EXPECT_EQ(got.columns[c].shape(), spec.columns[c].shape.Prepend(n));
    ASSERT_EQ(got.columns[c].size_bytes(), static_cast<size_t>(n) * cb);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(got.columns[c].data() + static_cast<size_t>(i) * cb,
                            w.steps[static_cast<size_t>(first + i)][c].data(), cb),
                0)
          << "trajectory " << id << " step " << first + i << " column " << c;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(got.step_priorities[static_cast<size_t>(i)],
              w.priorities[static_cast<size_t>(first + i)]);
  }
}

TEST(TableInspectTest, ListsAndReadsTrajectoriesOfBothTiersWithFilters) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = InspectSpec(rng);
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  std::map<uint64_t, Written> written;
  {
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int t = 0; t < 24; ++t) {
      Written w;
      AppendSteps(writer.get(), spec, 1 + static_cast<int64_t>(rng() % 9), rng, &w);
      w.ended = true;
      w.reason = rng() % 2 == 0 ? EndReason::kTerminal : EndReason::kTruncated;
      written[writer->trajectory_id()] = w;
      ASSERT_OK(writer->End(w.reason));
    }
  }
  // Two left open, small enough to stay in the hot tier.
  ASSERT_OK_AND_ASSIGN(auto open1, table->NewWriter());
  ASSERT_OK_AND_ASSIGN(auto open2, table->NewWriter());
  for (TrajectoryWriter* w : {open1.get(), open2.get()}) {
    Written open;
    AppendSteps(w, spec, 1 + static_cast<int64_t>(rng() % 3), rng, &open);
    written[w->trajectory_id()] = open;
  }
  AwaitSpills(table.get());

  const std::vector<uint64_t> cold_ids = table->ColdTrajectories();
  const std::set<uint64_t> cold(cold_ids.begin(), cold_ids.end());
  ASSERT_FALSE(cold.empty()) << "the hot tier holds 40 of the ~130 steps";
  const std::vector<TrajectoryInfo> all = table->ListTrajectories();
  ASSERT_EQ(all.size(), written.size());
  size_t i = 0;
  for (const auto& [id, w] : written) {
    const TrajectoryInfo& t = all[i++];
    EXPECT_EQ(t.id, id);
    EXPECT_EQ(t.length, static_cast<int64_t>(w.steps.size())) << id;
    EXPECT_EQ(t.ended, w.ended) << id;
    if (w.ended) {
      EXPECT_EQ(t.end_reason, w.reason) << id;
    }
    EXPECT_EQ(t.tier, cold.count(id) != 0 ? Tier::kCold : Tier::kHot) << id;
    EXPECT_EQ(t.live_items, t.length) << "L = 1: one item per step";
  }

  // Random filters select exactly what filtering the whole list does.
  for (int round = 0; round < 40; ++round) {
    TrajectoryFilter f;
    f.from = rng() % (written.rbegin()->first + 2);
    f.limit = rng() % 8;
    f.min_length = static_cast<int64_t>(rng() % 5);
    f.max_length = f.min_length + static_cast<int64_t>(rng() % 8);
    if (rng() % 3 == 0) f.ended = rng() % 2 == 0;
    if (rng() % 3 == 0) f.tier = rng() % 2 == 0 ? Tier::kHot : Tier::kCold;
    std::vector<uint64_t> want;
    for (const TrajectoryInfo& t : all) {
      if (t.id < f.from || t.length < f.min_length || t.length > f.max_length) continue;
      if ((f.ended && *f.ended != t.ended) || (f.tier && *f.tier != t.tier)) continue;
      if (f.limit > 0 && want.size() == f.limit) break;
      want.push_back(t.id);
    }
    std::vector<uint64_t> got;
    for (const TrajectoryInfo& t : table->ListTrajectories(f)) got.push_back(t.id);
    EXPECT_EQ(got, want) << "round " << round << " from " << f.from << " limit " << f.limit;
  }

  // Every trajectory reads back, hot or cold, whole and in random pieces;
  // reading changes nothing.
  const TableInfo before = table->Info();
  for (const auto& [id, w] : written) {
    const int64_t len = static_cast<int64_t>(w.steps.size());
    ExpectRead(table.get(), spec, id, w, 0, len);
    const int64_t first = static_cast<int64_t>(rng() % static_cast<uint64_t>(len + 1));
    ExpectRead(table.get(), spec, id, w, first, static_cast<int64_t>(rng() % 12));
  }
  const TableInfo after = table->Info();
  EXPECT_EQ(after.cold_trajectories, before.cold_trajectories);
  EXPECT_EQ(after.loaded_trajectories, before.loaded_trajectories);
  EXPECT_EQ(table->ColdTrajectories(), cold_ids);
}

TEST(TableInspectTest, ReadTrajectoryNamesWhatIsWrong) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec = InspectSpec(rng);
  spec.spill = false;  // eviction drops trajectories
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  Written w;
  AppendSteps(writer.get(), spec, 5, rng, &w);
  const uint64_t id = writer->trajectory_id();
  TrajectorySteps out;
  Status s = table->ReadTrajectory(id, 6, 1, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("table 'inspect': trajectory 1 has 5 steps; cannot read from step 6"));
  s = table->ReadTrajectory(id, -1, 1, &out);
  EXPECT_THAT(s.message(), HasSubstr("cannot read 1 steps from step -1; both must be >= 0"));
  s = table->ReadTrajectory(id, 0, -2, &out);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  s = table->ReadTrajectory(id, 0, 1, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("out is null"));
  s = table->ReadTrajectory(id + 7, 0, 1, &out);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("table 'inspect' has no trajectory " + std::to_string(id + 7) +
                        " in either tier"));
  // Reading at the end gives no steps; the open trajectory reads as open.
  ASSERT_OK(table->ReadTrajectory(id, 5, 3, &out));
  EXPECT_TRUE(out.step_priorities.empty());
  EXPECT_FALSE(out.info.ended);
  // Evicted without spill: gone, and the message says so.
  ASSERT_OK(writer->End(EndReason::kTerminal));
  for (int t = 0; t < 12; ++t) {
    Written more;
    AppendSteps(writer.get(), spec, 8, rng, &more);
    ASSERT_OK(writer->End(EndReason::kTerminal));
  }
  s = table->ReadTrajectory(id, 0, 1, &out);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("it left the table: evicted without spill, consumed"));
}

// A spill that cannot land (the disk is full) keeps the trajectory's blocks:
// reading it then reads them.
TEST(TableInspectTest, ReadsATrajectoryWhoseSpillWaitsForRoom) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = testing_util::ManualCheckpoints();
  o.env = &env;
  o.wal.enabled = false;
  const TableSpec spec = InspectSpec(rng);
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  env.SetSpaceLimit(env.bytes_written());
  std::map<uint64_t, Written> written;
  WriterOptions wo;
  wo.timeout = std::chrono::milliseconds(200);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(wo));
  // Ended trajectories of 4 steps (one block each) until a writer has to
  // wait for spills that cannot land.
  Status s;
  for (int t = 0; t < 40 && s.ok(); ++t) {
    Written w;
    uint64_t id = 0;
    for (int step = 0; step < 4 && s.ok(); ++step) {
      testing_util::StepData data = testing_util::RandomStep(spec, rng);
      s = writer->Append(data.tensors, 2.0 + step);
      if (s.ok()) {
        w.steps.push_back(data.columns);
        w.priorities.push_back(2.0 + step);
        id = writer->trajectory_id();
      }
    }
    if (s.ok()) s = writer->End(EndReason::kTerminal);
    if (id != 0) written[id] = w;
  }
  ASSERT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  const std::vector<TrajectoryInfo> spilling =
      table->ListTrajectories({.tier = Tier::kCold});
  ASSERT_FALSE(spilling.empty());
  EXPECT_GT(table->Info().spill_queue, 0);
  for (const TrajectoryInfo& t : spilling) {
    EXPECT_TRUE(t.ended);
    ExpectRead(table.get(), spec, t.id, written.at(t.id), 0, t.length);
  }
  env.ClearSpaceLimit();
  AwaitSpills(table.get());
  for (const TrajectoryInfo& t : spilling) {
    ExpectRead(table.get(), spec, t.id, written.at(t.id), 0, t.length);
  }
}

TEST(TableInspectTest, ItemPrioritiesFollowUpdatesAndRemovals) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec;
  spec.name = "prio";
  spec.columns = {{"x", DType::kI32, Shape{}}};
  spec.capacity_steps = 4096;
  spec.selector = SelectorKind::kPrioritized;
  spec.max_times_sampled = 1;
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  std::map<ItemKey, double> want;
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  for (int t = 0; t < 5; ++t) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 30);
    for (int64_t s = 0; s < len; ++s) {
      const int32_t x = static_cast<int32_t>(rng());
      const double p = 1 + static_cast<double>(rng() % 100);
      const ConstTensor step[] = {{DType::kI32, {}, &x, sizeof(x)}};
      ASSERT_OK(writer->Append(step, p));
      want[MakeItemKey(writer->trajectory_id(), s)] = p;
    }
    ASSERT_OK(writer->End(EndReason::kTerminal));
  }
  std::vector<ItemKey> keys;
  std::vector<double> update;
  for (const auto& [key, p] : want) {
    if (rng() % 2 == 0) continue;
    keys.push_back(key);
    update.push_back(static_cast<double>(rng() % 1000) / 3.0);
    want[key] = update.back();
  }
  ASSERT_OK(table->UpdatePriorities(keys, update));
  // Sampled once each (max_times_sampled = 1): gone.
  SampleOptions so;
  so.gather = false;
  ASSERT_OK_AND_ASSIGN(SampleBatch drawn, table->Sample(3, so));
  for (ItemKey k : drawn.keys) want.erase(k);
  std::vector<ItemKey> got_keys;
  std::vector<double> got;
  ASSERT_OK(table->ItemPriorities(&got_keys, &got));
  ASSERT_EQ(got_keys.size(), want.size());
  size_t i = 0;
  for (const auto& [key, p] : want) {
    EXPECT_EQ(got_keys[i], key);
    EXPECT_EQ(got[i], p) << "key " << key;
    ++i;
  }
  EXPECT_THAT(table->ItemPriorities(nullptr, &got).message(), HasSubstr("needs both outputs"));
}

TEST(TableInspectTest, PeekDrawsWithoutTakingAnything) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  // A queue: every draw would consume its item, and the rate limiter would
  // block a sample of more than the queue holds.
  TableSpec spec = TableSpec::Queue("queue", {{"x", DType::kF64, Shape{3}}}, 64);
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  SampleOptions peek;
  peek.peek = true;
  Status s = table->Sample(1, peek).status();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'queue' has nothing to draw: 0 live items"));
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  const int n = 2 + static_cast<int>(rng() % 20);
  std::vector<testing_util::StepData> steps;
  for (int i = 0; i < n; ++i) {
    steps.push_back(testing_util::RandomStep(spec, rng));
    ASSERT_OK(writer->Append(steps.back().tensors));
  }
  const TableInfo before = table->Info();
  // More items than the queue holds, drawn at once: the oldest each time.
  ASSERT_OK_AND_ASSIGN(SampleBatch batch, table->Sample(3 * n, peek));
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    EXPECT_EQ(ItemKeyStart(batch.keys[b]), 0);
    EXPECT_EQ(batch.times_sampled[b], 0u);
    EXPECT_EQ(std::memcmp(batch.columns[0].data() + b * 24, steps[0].columns[0].data(), 24), 0);
  }
  const TableInfo after = table->Info();
  EXPECT_EQ(after.num_items, before.num_items);
  EXPECT_EQ(after.items_sampled, before.items_sampled);
  EXPECT_EQ(after.rate_limiter.samples, before.rate_limiter.samples);
  EXPECT_EQ(after.rate_limiter.blocked_samples, before.rate_limiter.blocked_samples);
  // A real draw still takes the oldest.
  ASSERT_OK_AND_ASSIGN(SampleBatch taken, table->Sample(1));
  EXPECT_EQ(ItemKeyStart(taken.keys[0]), 0);
  EXPECT_EQ(table->Info().num_items, before.num_items - 1);
  // The device paths do not peek.
  DeviceSampleOutput out;
  s = table->SampleToDevice(1, peek, out, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("SampleToDevice does not peek"));
}

}  // namespace
}  // namespace replaydb
