// The cold tier: spill on eviction, Load, reopen, replay, rotation, and a
// child process killed while it spills.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/cold/cold_generated.h"
#include "engine/cold/cold_store.h"
#include "kernels/runtime/gpu.h"
#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/support/fault_injection_env.h"

namespace replaydb {
namespace {

using testing_util::FaultInjectionEnv;

using ::testing::HasSubstr;
using testing_util::ManualCheckpoints;
using testing_util::TempDir;
using testing_util::TestSeed;

constexpr int64_t kBlockSteps = 8;
constexpr int64_t kHotBlocks = 8;

TableSpec SpillSpec(std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = "cold";
  spec.columns = {{"obs", DType::kF32, Shape{3}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(1 + rng() % 40)}}};
  spec.block_steps = kBlockSteps;
  spec.capacity_steps = kHotBlocks * kBlockSteps;
  spec.spill = true;
  return spec;
}

// Everything written, by item key (L = 1: one item per step).
struct Written {
  std::map<ItemKey, std::vector<std::vector<std::byte>>> steps;
  std::map<ItemKey, double> priority;
  std::map<uint64_t, int64_t> lengths;  // trajectory id -> steps
};

// Writes `n` ended trajectories of 1..max_len random steps with random
// priorities.
void WriteTrajectories(Table* table, const TableSpec& spec, int n, int64_t max_len,
                       std::mt19937_64& rng, Written* w) {
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (int i = 0; i < n; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(max_len));
    for (int64_t s = 0; s < len; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      const double p = static_cast<double>(rng() % 1000) / 10.0;
      ASSERT_OK((*writer)->Append(step.tensors, p));
      const ItemKey key = MakeItemKey((*writer)->trajectory_id(), s);
      w->steps[key] = step.columns;
      w->priority[key] = p;
    }
    w->lengths[(*writer)->trajectory_id()] = len;
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
}

// Waits until no trajectory is waiting to be spilled.
void AwaitSpills(Table* table) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (table->Info().spill_queue > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "spills did not finish";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Loads trajectory `id` if it is cold and checks every step of it against
// `w`, with its priority and `times` (key -> times sampled; absent: 0).
void ExpectTrajectory(Table* table, const Written& w, uint64_t id,
                      const std::map<ItemKey, uint32_t>& times) {
  const uint64_t ids[] = {id};
  ASSERT_OK(table->Load(ids));
  std::vector<ItemKey> keys;
  for (int64_t s = 0; s < w.lengths.at(id); ++s) keys.push_back(MakeItemKey(id, s));
  SampleBatch batch;
  ASSERT_OK(table->Lookup(keys, &batch));
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto& want = w.steps.at(keys[i]);
    for (size_t c = 0; c < want.size(); ++c) {
      const size_t cb = want[c].size();
      ASSERT_EQ(std::memcmp(static_cast<const std::byte*>(batch.columns[c].data()) + i * cb,
                            want[c].data(), cb),
                0)
          << "trajectory " << id << " step " << i << " column " << c;
    }
    EXPECT_EQ(batch.priorities[i], w.priority.at(keys[i])) << "trajectory " << id;
    auto t = times.find(keys[i]);
    EXPECT_EQ(batch.times_sampled[i], t == times.end() ? 0u : t->second) << "trajectory " << id;
  }
}

// Writes trajectories into a spill table `spec` (named "cold"), sampling in
// between, checks the cold counters, that cold items are not sampled, and
// that every trajectory loads back byte-identical, also after a reopen.
void SpillAndLoadRoundTrip(const TableSpec& spec, std::mt19937_64& rng) {
  TempDir dir;
  Written w;
  std::map<ItemKey, uint32_t> times;
  int64_t total_steps = 0;
  {
    auto db = testing_util::OpenDB(dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    // Sampled in between, so that sample counts must survive the spill.
    for (int round = 0; round < 6; ++round) {
      WriteTrajectories(table.get(), spec, 6, 20, rng, &w);
      ASSERT_OK_AND_ASSIGN(SampleBatch batch, table->Sample(4));
      for (int64_t b = 0; b < batch.batch_size; ++b) times[batch.keys[b]] = batch.times_sampled[b];
    }
    AwaitSpills(table.get());
    for (const auto& [id, len] : w.lengths) total_steps += len;
    const TableInfo info = table->Info();
    EXPECT_GT(info.cold_trajectories, 0);
    EXPECT_EQ(info.cold_trajectories + info.num_trajectories,
              static_cast<int64_t>(w.lengths.size()));
    EXPECT_EQ(info.cold_steps + info.num_steps, total_steps);
    EXPECT_EQ(info.cold_bytes, info.cold_steps * static_cast<int64_t>(spec.step_bytes()));
    EXPECT_GE(info.spilled_trajectories, info.cold_trajectories);
    EXPECT_EQ(table->ColdTrajectories().size(), static_cast<size_t>(info.cold_trajectories));

    // A cold item is not sampled, and a lookup says where it is.
    const uint64_t cold_id = table->ColdTrajectories(0, 1).at(0);
    const ItemKey cold_key = MakeItemKey(cold_id, 0);
    SampleBatch batch;
    const Status looked = table->Lookup(std::span<const ItemKey>(&cold_key, 1), &batch);
    EXPECT_EQ(looked.code(), Status::Code::kNotFound);
    EXPECT_THAT(looked.message(), HasSubstr("its trajectory is in the cold tier (Table::Load)"));
    const std::vector<uint64_t> cold_ids = table->ColdTrajectories();
    const std::set<uint64_t> cold_set(cold_ids.begin(), cold_ids.end());
    for (int i = 0; i < 20; ++i) {
      ASSERT_OK_AND_ASSIGN(SampleBatch s, table->Sample(8));
      for (int64_t b = 0; b < s.batch_size; ++b) {
        ASSERT_EQ(cold_set.count(ItemKeyTrajectory(s.keys[b])), 0u)
            << "sampled an item of cold trajectory " << ItemKeyTrajectory(s.keys[b]);
        times[s.keys[b]] = s.times_sampled[b];
      }
    }
    // Every trajectory, loaded one at a time (each load evicts others).
    for (const auto& [id, len] : w.lengths) ExpectTrajectory(table.get(), w, id, times);
    EXPECT_GT(table->Info().loaded_trajectories, 0);
  }
  // Reopened: what was cold stays cold, and every trajectory is still there.
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("cold"));
  AwaitSpills(table.get());
  const TableInfo info = table->Info();
  EXPECT_GT(info.cold_trajectories, 0);
  EXPECT_EQ(info.cold_steps + info.num_steps, total_steps);
  EXPECT_GT(info.spilled_trajectories, 0) << "counters survive the reopen";
  for (const auto& [id, len] : w.lengths) ExpectTrajectory(table.get(), w, id, times);
}

TEST(ColdTierTest, SpilledTrajectoriesLoadBackByteIdenticalAlsoAfterReopen) {
  std::mt19937_64 rng(TestSeed());
  SpillAndLoadRoundTrip(SpillSpec(rng), rng);
}

// On a GPU: pinned host blocks, and device blocks, whose spills read the
// blocks back with a device copy and whose loads write them with one.
TEST(ColdTierGpuTest, PinnedAndDeviceTablesSpillAndLoadByteIdentical) {
  std::string why;
  if (kernels::CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  for (const Placement placement : {Placement::Host(), Placement::Device(0)}) {
    SCOPED_TRACE("placement " + placement.ToString());
    std::mt19937_64 rng(TestSeed());
    TableSpec spec = SpillSpec(rng);
    spec.placement = placement;
    SpillAndLoadRoundTrip(spec, rng);
  }
}

TEST(ColdTierTest, LoadNamesWhatIsMissingAndLoadsNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = SpillSpec(rng);
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  Written w;
  WriteTrajectories(table.get(), spec, 20, 16, rng, &w);
  AwaitSpills(table.get());
  const std::vector<uint64_t> cold = table->ColdTrajectories();
  ASSERT_FALSE(cold.empty());
  const int64_t loaded_before = table->Info().loaded_trajectories;
  const uint64_t ids[] = {cold[0], 999999};
  const Status s = table->Load(ids);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("table 'cold': trajectory 999999 is neither in the hot nor "
                                     "in the cold tier; nothing loaded"));
  EXPECT_EQ(table->Info().loaded_trajectories, loaded_before);
  EXPECT_EQ(table->ColdTrajectories(), cold);
  // A range with nothing cold in it loads nothing, and is no error.
  EXPECT_OK(table->LoadRange(1000000, 2000000));
  // LoadRange of everything cold: the last ones loaded are hot at the end.
  ASSERT_OK(table->LoadRange(0, UINT64_MAX));
  EXPECT_EQ(table->Info().loaded_trajectories, loaded_before + static_cast<int64_t>(cold.size()));
  // Hot ones are skipped.
  const uint64_t again[] = {cold.back()};
  const int64_t loaded = table->Info().loaded_trajectories;
  EXPECT_OK(table->Load(again));
  EXPECT_EQ(table->Info().loaded_trajectories, loaded);
}

// A trajectory stored in two chunks (its first steps by a checkpoint, the
// rest by its spill) loads whole; a damaged or missing chunk makes Load fail
// with Corruption naming the trajectory and the step, and loads nothing.
TEST(ColdTierTest, ChunksLoadInPiecesAndDamagedOnesAreCorruption) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = SpillSpec(rng);
  Written w;
  uint64_t pieces = 0;
  {
    auto db = DB::Open(ManualCheckpoints(), dir.path());
    ASSERT_OK(db.status());
    ASSERT_OK_AND_ASSIGN(auto table, (*db)->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    const int64_t first = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t len = first + 1 + static_cast<int64_t>(rng() % 6);
    for (int64_t s = 0; s < len; ++s) {
      if (s == first) ASSERT_OK((*db)->Checkpoint());  // stores steps [0, first)
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      ASSERT_OK(writer->Append(step.tensors, 1.0));
      const ItemKey key = MakeItemKey(writer->trajectory_id(), s);
      w.steps[key] = step.columns;
      w.priority[key] = 1.0;
    }
    pieces = writer->trajectory_id();
    w.lengths[pieces] = len;
    ASSERT_OK(writer->End(EndReason::kTerminal));
    WriteTrajectories(table.get(), spec, 20, 16, rng, &w);  // evicts and spills it
    AwaitSpills(table.get());
    const std::vector<uint64_t> cold = table->ColdTrajectories();
    ASSERT_NE(std::find(cold.begin(), cold.end(), pieces), cold.end());
    ExpectTrajectory(table.get(), w, pieces, {});
    AwaitSpills(table.get());
    ASSERT_OK((*db)->Checkpoint());
  }
  // Damage two cold trajectories of at least 2 steps in the store.
  uint64_t garbled = 0;
  uint64_t cut = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto store, engine::ColdStore::Open(dir.path() + "/cold", Env::Default()));
    std::vector<uint32_t> tables;
    ASSERT_OK(store->ListTables(&tables));
    ASSERT_EQ(tables.size(), 1u);
    std::vector<uint64_t> damaged;
    ASSERT_OK(store->ForEachTrajectory(tables[0], [&](uint64_t id, std::string_view) {
      if (id != pieces && w.lengths.at(id) >= 2 && damaged.size() < 2) damaged.push_back(id);
      return Status::OK();
    }));
    ASSERT_EQ(damaged.size(), 2u);
    garbled = damaged[0];
    cut = damaged[1];
    engine::ColdStore::Batch batch;
    batch.PutSteps(tables[0], garbled, 0, "not a step chunk");
    // A well-formed first chunk one step short, with nothing after it.
    const int64_t short_len = w.lengths.at(cut) - 1;
    std::vector<uint8_t> data(static_cast<size_t>(short_len) * spec.step_bytes());
    for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
    flatbuffers::FlatBufferBuilder fbb;
    fbb.Finish(fb::CreateStepChunk(fbb, 0, short_len, static_cast<uint32_t>(spec.step_bytes()),
                                   fbb.CreateVector(data)));
    batch.PutSteps(tables[0], cut, 0,
                   std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                                    fbb.GetSize()));
    ASSERT_OK(store->Write(batch));
  }
  auto db = DB::Open(ManualCheckpoints(), dir.path());
  ASSERT_OK(db.status());
  ASSERT_OK_AND_ASSIGN(auto table, (*db)->GetTable("cold"));
  // Load of a hot trajectory does nothing: check both are cold.
  const std::vector<uint64_t> cold = table->ColdTrajectories();
  ASSERT_NE(std::find(cold.begin(), cold.end(), garbled), cold.end());
  ASSERT_NE(std::find(cold.begin(), cold.end(), cut), cold.end());
  const int64_t loaded_before = table->Info().loaded_trajectories;
  const uint64_t g[] = {garbled};
  Status s = table->Load(g);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("trajectory " + std::to_string(garbled) +
                                     ": the step chunk at step 0 is malformed"));
  const uint64_t c[] = {cut};
  s = table->Load(c);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  const int64_t cut_len = w.lengths.at(cut);
  EXPECT_THAT(s.message(),
              HasSubstr("trajectory " + std::to_string(cut) + ": has " +
                        std::to_string(cut_len - 1) + " stored steps of " +
                        std::to_string(cut_len) + " (no step chunk at step " +
                        std::to_string(cut_len - 1) + ")"));
  EXPECT_EQ(table->Info().loaded_trajectories, loaded_before);
  // Both stay cold (the loads may have evicted others to make room first).
  const std::vector<uint64_t> still = table->ColdTrajectories();
  EXPECT_NE(std::find(still.begin(), still.end(), garbled), still.end());
  EXPECT_NE(std::find(still.begin(), still.end(), cut), still.end());
  // The rest still loads, byte-identical, the two-piece one included.
  for (const auto& [id, len] : w.lengths) {
    if (id != garbled && id != cut) ExpectTrajectory(table.get(), w, id, {});
  }
}

TEST(ColdTierTest, WithoutSpillEvictionDropsTrajectories) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec = SpillSpec(rng);
  spec.spill = false;
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  Written w;
  WriteTrajectories(table.get(), spec, 20, 16, rng, &w);
  const TableInfo info = table->Info();
  EXPECT_GT(info.evicted_trajectories, 0);
  EXPECT_EQ(info.cold_trajectories, 0);
  EXPECT_EQ(info.spilled_trajectories, 0);
  const uint64_t first[] = {w.lengths.begin()->first};
  EXPECT_EQ(table->Load(first).code(), Status::Code::kNotFound);
}

TEST(ColdTierTest, ReplayRespillsAndKeepsUpdatesOfLoadedTrajectories) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = SpillSpec(rng);
  Written w;
  std::map<ItemKey, uint32_t> times;
  uint64_t loaded = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    WriteTrajectories(table.get(), spec, 24, 16, rng, &w);
    AwaitSpills(table.get());
    loaded = table->ColdTrajectories().at(0);
    const uint64_t ids[] = {loaded};
    ASSERT_OK(table->Load(ids));
    // New priorities for the loaded trajectory: logged; the store still
    // has it as cold, so replay must load it to apply them.
    std::vector<ItemKey> keys;
    std::vector<double> priorities;
    for (int64_t s = 0; s < w.lengths.at(loaded); ++s) {
      keys.push_back(MakeItemKey(loaded, s));
      priorities.push_back(static_cast<double>(rng() % 500) + 0.5);
      w.priority[keys.back()] = priorities.back();
    }
    ASSERT_OK(table->UpdatePriorities(keys, priorities));
  }  // no checkpoint: the reopen replays the whole log
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("cold"));
  AwaitSpills(table.get());
  EXPECT_GT(table->Info().cold_trajectories, 0);
  ExpectTrajectory(table.get(), w, loaded, times);
  for (const auto& [id, len] : w.lengths) ExpectTrajectory(table.get(), w, id, times);
}

TEST(ColdTierTest, RotationSamplesEveryTrajectoryOfADatasetTenTimesTheHotTier) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  TableSpec spec = SpillSpec(rng);
  spec.rotation_fraction = 0.25;
  spec.rotation_every_samples = 32;
  auto db = testing_util::OpenDB(dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  // 80 trajectories of one block each: 10x the hot tier's 8 blocks.
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  std::set<uint64_t> all;
  for (int i = 0; i < 80; ++i) {
    for (int64_t s = 0; s < kBlockSteps; ++s) {
      ASSERT_OK((*writer)->Append(testing_util::RandomStep(spec, rng).tensors));
    }
    all.insert((*writer)->trajectory_id());
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
  AwaitSpills(table.get());
  EXPECT_EQ(table->Info().cold_trajectories, 72);
  std::set<uint64_t> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.size() < all.size() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_OK_AND_ASSIGN(SampleBatch batch, table->Sample(16));
    for (ItemKey k : batch.keys) seen.insert(ItemKeyTrajectory(k));
  }
  EXPECT_EQ(seen, all);
  const TableInfo info = table->Info();
  EXPECT_GT(info.rotations, 0);
  EXPECT_EQ(info.cold_trajectories + info.num_trajectories, 80);
}

TEST(ColdTierTest, SpillOnAFullDiskWaitsAndLosesNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  o.wal.enabled = false;  // only spills (and checkpoints) write while the disk is full
  TableSpec spec = SpillSpec(rng);
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  Written w;
  WriteTrajectories(table.get(), spec, 4, 8, rng, &w);
  env.SetSpaceLimit(env.bytes_written());
  // Writers go on until the spills they need cannot land; then they time
  // out naming the failed spill, and what they wrote stays.
  // (Long enough that the spill thread has met the full disk by then, however
  // loaded the machine.)
  WriterOptions wo;
  wo.timeout = std::chrono::seconds(5);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(wo));
  Status s;
  for (int i = 0; i < 200 && s.ok(); ++i) {
    testing_util::StepData step = testing_util::RandomStep(spec, rng);
    s = writer->Append(step.tensors, 1.0);
    if (s.ok()) {
      w.steps[MakeItemKey(writer->trajectory_id(), static_cast<int64_t>(i % 8))] = step.columns;
      w.priority[MakeItemKey(writer->trajectory_id(), static_cast<int64_t>(i % 8))] = 1.0;
      w.lengths[writer->trajectory_id()] = i % 8 + 1;
      if (i % 8 == 7) s = writer->End(EndReason::kTerminal);
    }
  }
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("being spilled to the cold tier"));
  EXPECT_THAT(s.message(), HasSubstr("the last spill failed"));
  EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
  const Status checkpoint = db->Checkpoint();
  EXPECT_EQ(checkpoint.code(), Status::Code::kIOError) << checkpoint.ToString();
  EXPECT_THAT(checkpoint.message(), HasSubstr("wait to be spilled; the last spill failed"));
  // Room again: the spills land (retried), and the checkpoint works.
  env.ClearSpaceLimit();
  AwaitSpills(table.get());
  ASSERT_OK(db->Checkpoint());
  writer.reset();
  for (const auto& [id, len] : w.lengths) {
    // The trajectory the failed append was in keeps the steps before it.
    Written one;
    for (int64_t step = 0; step < len; ++step) {
      const ItemKey key = MakeItemKey(id, step);
      if (w.steps.count(key) == 0) break;
      one.steps[key] = w.steps.at(key);
      one.priority[key] = w.priority.at(key);
      one.lengths[id] = step + 1;
    }
    if (one.lengths.count(id) != 0) ExpectTrajectory(table.get(), one, id, {});
  }
}

TEST(ColdTierTest, SpecChecksRotation) {
  std::mt19937_64 rng(1);
  TableSpec spec = SpillSpec(rng);
  spec.rotation_fraction = 0.5;
  EXPECT_THAT(spec.Validate().message(),
              HasSubstr("rotation_fraction is 0.500000 and rotation_every_samples 0; rotation "
                        "needs a fraction in (0, 1] and a sample count > 0 (both 0: off)"));
  spec.rotation_every_samples = 10;
  spec.rotation_fraction = 1.5;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("rotation_fraction is 1.500000"));
  spec.rotation_fraction = 1;
  EXPECT_OK(spec.Validate());
  spec.spill = false;
  EXPECT_THAT(spec.Validate().message(),
              HasSubstr("table 'cold': rotation needs spill: trajectories rotated out of the hot "
                        "tier go to the cold tier"));
}

// ---- SIGKILL while spilling

constexpr const char* kChildEnv = "REPLAYDB_COLD_CRASH_CHILD_DIR";
constexpr size_t kCrashStepBytes = 40;

TableSpec CrashSpec() {
  TableSpec spec;
  spec.name = "crash";
  spec.columns = {{"x", DType::kU8, Shape{kCrashStepBytes}}};
  spec.block_steps = 16;
  spec.capacity_steps = 16 * 16;  // small: it spills all the time
  spec.spill = true;
  return spec;
}

std::vector<uint8_t> CrashContent(uint64_t id, int64_t step) {
  std::mt19937_64 rng(id * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(step));
  std::vector<uint8_t> out(kCrashStepBytes);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

DBOptions CrashOptions() {
  DBOptions o;
  o.wal.sync = WalSyncMode::kNone;  // a killed process loses nothing handed to the OS
  o.checkpoint.every_wal_bytes = 32 << 10;
  return o;
}

TEST(ColdTierCrashTest, ChildWriter) {
  const char* dir = std::getenv(kChildEnv);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the cold-tier crash test's child process";
  auto db = DB::Open(CrashOptions(), dir);
  if (!db.ok()) std::_Exit(2);
  auto table = (*db)->GetTable("crash");
  if (!table.ok()) table = (*db)->CreateTable(CrashSpec());
  if (!table.ok()) std::_Exit(3);
  std::mt19937_64 rng(std::random_device{}());
  while (true) {
    auto writer = (*table)->NewWriter();
    if (!writer.ok()) std::_Exit(4);
    const int steps = 1 + static_cast<int>(rng() % 40);
    for (int s = 0; s < steps; ++s) {
      const uint64_t next = (*writer)->trajectory_id();
      // Content from a value known before the append: the id of the
      // previous step (0 for the first), reported with it.
      std::vector<uint8_t> bytes = CrashContent(next, s);
      ConstTensor t{DType::kU8, Shape{kCrashStepBytes}, bytes.data(), bytes.size()};
      if (!(*writer)->Append({&t, 1}).ok()) std::_Exit(5);
      char line[64];
      const int n = std::snprintf(line, sizeof(line), "%llu %d %llu\n",
                                  static_cast<unsigned long long>((*writer)->trajectory_id()), s,
                                  static_cast<unsigned long long>(next));
      if (::write(1, line, static_cast<size_t>(n)) != n) std::_Exit(6);
    }
    if (!(*writer)->End(EndReason::kTerminal).ok()) std::_Exit(7);
  }
}

TEST(ColdTierCrashTest, KilledWhileSpillingLosesNothingAcknowledged) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  std::map<uint64_t, std::map<int64_t, uint64_t>> acked;  // id -> step -> content id
  for (int it = 0; it < 5; ++it) {
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(pipefd[1], 1);
      ::close(pipefd[0]);
      ::close(pipefd[1]);
      ::setenv(kChildEnv, dir.path().c_str(), 1);
      const char* argv[] = {"/proc/self/exe", "--gtest_filter=ColdTierCrashTest.ChildWriter",
                            "--gtest_brief=1", nullptr};
      ::execv("/proc/self/exe", const_cast<char* const*>(argv));
      std::_Exit(127);
    }
    ::close(pipefd[1]);
    // The kill comes a random while after the child's first acknowledged
    // step, however slowly it starts (sanitizers, a busy machine).
    std::string out;
    char buf[4096];
    ssize_t n;
    while (out.find('\n') == std::string::npos &&
           (n = ::read(pipefd[0], buf, sizeof(buf))) > 0) {
      out.append(buf, static_cast<size_t>(n));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 400));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with status " << WEXITSTATUS(status);
    while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);
    for (size_t pos = 0;;) {
      const size_t nl = out.find('\n', pos);
      if (nl == std::string::npos) break;
      unsigned long long id = 0, from = 0;
      long long step = 0;
      ASSERT_EQ(std::sscanf(out.c_str() + pos, "%llu %lld %llu", &id, &step, &from), 3);
      acked[id][step] = from;
      pos = nl + 1;
    }
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(CrashOptions(), dir.path()));
    if (acked.empty()) continue;
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("crash"));
    EXPECT_GT(table->Info().cold_trajectories, 0) << "iteration " << it << ": nothing spilled";
    for (const auto& [id, steps] : acked) {
      const uint64_t ids[] = {id};
      ASSERT_OK(table->Load(ids));
      std::vector<ItemKey> keys;
      for (const auto& [step, from] : steps) keys.push_back(MakeItemKey(id, step));
      SampleBatch batch;
      ASSERT_OK(table->Lookup(keys, &batch));
      const auto* data = reinterpret_cast<const uint8_t*>(batch.columns[0].data());
      size_t i = 0;
      for (const auto& [step, from] : steps) {
        ASSERT_EQ(std::memcmp(data + i * kCrashStepBytes, CrashContent(from, step).data(),
                              kCrashStepBytes),
                  0)
            << "iteration " << it << ": step " << step << " of trajectory " << id << " differs";
        ++i;
      }
    }
  }
  EXPECT_FALSE(acked.empty());
}

}  // namespace
}  // namespace replaydb
