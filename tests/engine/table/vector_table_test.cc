// Vector tables (TableSpec::lanes > 1, docs/vector_tables.md): a step holds
// one row per environment; each row is an item, keyed (segment, step *
// lanes + environment); the vector writer rolls segments of block_steps
// steps; draws pick a step, then an environment uniformly.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/device.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::TempDir;

TableSpec VectorSpec(int64_t lanes) {
  TableSpec spec;
  spec.name = "vt";
  spec.columns = {
      {"obs", DType::kF32, {3}}, {"action", DType::kI32, {}}, {"flag", DType::kU8, {2}}};
  spec.lanes = lanes;
  spec.block_steps = 8;
  spec.capacity_steps = 64;
  return spec;
}

// A vector step of random bytes: per column [lanes, shape...].
struct Step {
  std::vector<std::vector<std::byte>> columns;
  std::vector<ConstTensor> tensors;
  // Environment `lane`'s row of column c.
  std::vector<std::byte> Row(const TableSpec& spec, size_t c, int64_t lane) const {
    const size_t rb = spec.columns[c].step_bytes();
    const std::byte* p = columns[c].data() + static_cast<size_t>(lane) * rb;
    return {p, p + rb};
  }
};

Step RandomStep(const TableSpec& spec, std::mt19937_64& rng) {
  Step step;
  for (const ColumnSpec& col : spec.columns) {
    std::vector<std::byte> bytes(col.step_bytes() * static_cast<size_t>(spec.lanes));
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    step.columns.push_back(std::move(bytes));
  }
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    step.tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(spec.lanes),
                            step.columns[c].data(), step.columns[c].size()});
  }
  return step;
}

class VectorTableTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }

  // Appends `n` random vector steps through `w`, remembering each by
  // (segment, step).
  void Append(const TableSpec& spec, VectorWriter* w, int n) {
    for (int i = 0; i < n; ++i) {
      Step step = RandomStep(spec, rng_);
      const uint64_t segment_before = w->trajectory_id(0);
      ASSERT_OK(w->Append(step.tensors));
      // The step went to the segment open before the call, or to a new one.
      const uint64_t segment = segment_before != 0 && next_step_[segment_before] < spec.block_steps
                                   ? segment_before
                                   : last_segment_ + 1;
      last_segment_ = std::max(last_segment_, segment);
      const int64_t s = next_step_[segment]++;
      steps_[{segment, s}] = std::move(step);
    }
  }

  // Forgets the steps appended so far (for a new table).
  void Forget() {
    steps_.clear();
    next_step_.clear();
    last_segment_ = 0;
  }

  // Checks that batch row b of every column is the stored row its key names.
  void ExpectRows(const TableSpec& spec, const SampleBatch& batch) {
    for (int64_t b = 0; b < batch.batch_size; ++b) {
      const ItemKey key = batch.keys[b];
      const uint64_t segment = ItemKeyTrajectory(key);
      const int64_t step = ItemKeyStart(key) / spec.lanes;
      const int64_t lane = ItemKeyStart(key) % spec.lanes;
      auto it = steps_.find({segment, step});
      ASSERT_NE(it, steps_.end()) << "key " << key << " names no appended step";
      for (size_t c = 0; c < spec.columns.size(); ++c) {
        const size_t rb = spec.columns[c].step_bytes();
        ASSERT_EQ(batch.columns[c].shape(),
                  spec.columns[c].shape.Prepend(1).Prepend(batch.batch_size));
        const std::vector<std::byte> want = it->second.Row(spec, c, lane);
        EXPECT_EQ(std::memcmp(batch.columns[c].data() + b * rb, want.data(), rb), 0)
            << "column " << spec.columns[c].name << ", batch row " << b << ", segment " << segment
            << " step " << step << " environment " << lane;
      }
      EXPECT_EQ(batch.mask[b], 1);
    }
  }

  // Steps of about a megabyte (over 1024 environments) through a writer of
  // several threads, which split each step's bytes between them
  // (CopyRanges): every environment's row of every step reads back.
  void CheckLargeStepsSplitOverThreads(const Placement& placement) {
    Forget();
    const int64_t lanes = 1024 + static_cast<int64_t>(rng_() % 512);
    TableSpec spec = VectorSpec(lanes);
    spec.name = "large_" + placement.ToString();
    std::replace(spec.name.begin(), spec.name.end(), ':', '_');
    spec.columns[2].shape = Shape{static_cast<int64_t>(512 + rng_() % 1024)};
    spec.capacity_steps = 32;  // nothing is evicted
    spec.placement = placement;
    auto table = testing_util::CreateTable(db_.get(), spec);
    ASSERT_NE(table, nullptr);
    WriterOptions options;
    options.threads = 2 + static_cast<int>(rng_() % 4);
    SCOPED_TRACE(spec.name + ": lanes " + std::to_string(lanes) + ", threads " +
                 std::to_string(options.threads));
    ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(static_cast<size_t>(lanes), options));
    Append(spec, w.get(), 9 + static_cast<int>(rng_() % 12));  // past one segment
    std::vector<ItemKey> all;
    std::vector<double> priorities;
    ASSERT_OK(table->ItemPriorities(&all, &priorities));
    ASSERT_EQ(all.size(), steps_.size() * static_cast<size_t>(lanes));
    SampleBatch looked;
    ASSERT_OK(table->Lookup(all, &looked));
    ExpectRows(spec, looked);
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
  std::map<std::pair<uint64_t, int64_t>, Step> steps_;
  std::map<uint64_t, int64_t> next_step_;
  uint64_t last_segment_ = 0;
};

TEST_F(VectorTableTest, SamplesAndLookupsReturnEachEnvironmentsRow) {
  const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 30);
  TableSpec spec = VectorSpec(lanes);
  spec.capacity_steps = 1024;  // nothing is evicted
  auto table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(static_cast<size_t>(lanes)));
  EXPECT_EQ(w->num_envs(), static_cast<size_t>(lanes));
  const int n = 20 + static_cast<int>(rng_() % 40);
  Append(spec, w.get(), n);

  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_steps, n);
  EXPECT_EQ(info.num_items, n * lanes);
  EXPECT_EQ(info.items_inserted, n * lanes);
  // The sampling mass counts items as Info does: one per environment.
  ASSERT_OK_AND_ASSIGN(const SamplingMass mass, table->Mass());
  EXPECT_EQ(mass.items, n * lanes);
  EXPECT_EQ(mass.total, static_cast<double>(n * lanes));
  // Segments of block_steps steps; all but the last ended by the writer.
  EXPECT_EQ(info.num_trajectories, (n + spec.block_steps - 1) / spec.block_steps);

  SampleBatch batch;
  ASSERT_OK(table->Sample(64, {}, &batch));
  ExpectRows(spec, batch);
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    EXPECT_DOUBLE_EQ(batch.probabilities[b], 1.0 / static_cast<double>(n * lanes));
  }
  // Lookup of the same keys, and of keys made by hand.
  SampleBatch looked;
  ASSERT_OK(table->Lookup(batch.keys, &looked));
  ExpectRows(spec, looked);
  std::vector<ItemKey> keys;
  for (const auto& [at, step] : steps_) {
    keys.push_back(MakeItemKey(at.first, at.second * lanes + static_cast<int64_t>(rng_() % lanes)));
  }
  ASSERT_OK(table->Lookup(keys, &looked));
  ExpectRows(spec, looked);
  EXPECT_EQ(table->Info().items_sampled, 64);
  // Every environment of every step is listed, and each listed key reads.
  std::vector<ItemKey> all;
  std::vector<double> priorities;
  ASSERT_OK(table->ItemPriorities(&all, &priorities));
  ASSERT_EQ(all.size(), static_cast<size_t>(n * lanes));
  EXPECT_EQ(std::set<ItemKey>(all.begin(), all.end()).size(), all.size());
  ASSERT_OK(table->Lookup(all, &looked));
  ExpectRows(spec, looked);
}

TEST_F(VectorTableTest, DrawsAreUniformOverEnvironmentsAndSteps) {
  const int64_t lanes = 4;
  TableSpec spec = VectorSpec(lanes);
  auto table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
  Append(spec, w.get(), 12);  // 48 items
  std::map<ItemKey, int64_t> counts;
  const int64_t draws = 48 * 400;
  for (int64_t done = 0; done < draws; done += 256) {
    SampleBatch batch;
    SampleOptions options;
    options.gather = false;
    ASSERT_OK(table->Sample(256, options, &batch));
    for (ItemKey k : batch.keys) ++counts[k];
  }
  const int64_t total = (draws + 255) / 256 * 256;
  ASSERT_EQ(counts.size(), 48u) << "every (step, environment) item is drawn";
  const double expected = static_cast<double>(total) / 48;
  EXPECT_LT(testing_util::UniformChiSquare(counts, expected), testing_util::ChiSquareCritical(47));
}

TEST_F(VectorTableTest, EvictionTakesWholeSegments) {
  const int64_t lanes = 3;
  TableSpec spec = VectorSpec(lanes);  // 64 steps: 8 segments of 8
  auto table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
  Append(spec, w.get(), 64 + 8 * 3 + 5);
  const TableInfo info = table->Info();
  EXPECT_GT(info.evicted_trajectories, 0);
  EXPECT_EQ(info.evicted_items, info.evicted_trajectories * spec.block_steps * lanes);
  EXPECT_EQ(info.num_items, info.num_steps * lanes);
  EXPECT_LE(info.num_steps, 64);
  for (int i = 0; i < 20; ++i) {
    SampleBatch batch;
    ASSERT_OK(table->Sample(32, {}, &batch));
    ExpectRows(spec, batch);
    for (ItemKey k : batch.keys) {
      EXPECT_GT(ItemKeyTrajectory(k), static_cast<uint64_t>(info.evicted_trajectories))
          << "drew from an evicted segment";
    }
  }
}

// With nothing ended left, oldest-first eviction takes the oldest open
// segment, as it takes a per-environment writer's open trajectory: that
// writer's next Append says so and stores nothing, the one after starts a
// new segment, and no draw returns the evicted rows.
TEST_F(VectorTableTest, EvictedOpenSegmentReportsAndWriterRecovers) {
  const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 6);
  TableSpec spec = VectorSpec(lanes);
  spec.capacity_steps = 2 * spec.block_steps;  // two segments' blocks
  auto table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  std::vector<std::unique_ptr<VectorWriter>> w;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(static_cast<size_t>(lanes)));
    w.push_back(std::move(writer));
  }
  // One random step through `writer`, remembered under its segment when stored.
  const auto append = [&](VectorWriter* writer) {
    Step step = RandomStep(spec, rng_);
    Status s = writer->Append(step.tensors);
    if (s.ok()) {
      const uint64_t segment = writer->trajectory_id(0);
      steps_[{segment, next_step_[segment]++}] = std::move(step);
    }
    return s;
  };
  const auto expect_draws = [&](uint64_t never) {
    for (int i = 0; i < 10; ++i) {
      SampleBatch batch;
      ASSERT_OK(table->Sample(16, {}, &batch));
      ExpectRows(spec, batch);
      for (ItemKey k : batch.keys) EXPECT_NE(ItemKeyTrajectory(k), never) << "drew an evicted row";
    }
  };
  ASSERT_OK(append(w[0].get()));
  const uint64_t evicted = w[0]->trajectory_id(0);
  ASSERT_OK(append(w[1].get()));
  ASSERT_OK(append(w[1].get()));
  // The third segment needs a block and nothing has ended: the oldest open
  // segment, w[0]'s, goes.
  ASSERT_OK(append(w[2].get()));
  TableInfo info = table->Info();
  EXPECT_EQ(info.evicted_trajectories, 1);
  EXPECT_EQ(info.evicted_items, lanes);
  EXPECT_EQ(info.num_items, 3 * lanes);
  EXPECT_EQ(info.num_steps, 3);
  steps_.erase({evicted, 0});
  expect_draws(evicted);

  Status s = append(w[0].get());
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("table 'vt': trajectory " + std::to_string(evicted) +
                                     " was evicted from the hot tier while open (it had 1 steps"));
  EXPECT_EQ(w[0]->trajectory_id(0), 0u);
  EXPECT_EQ(table->Info().num_steps, 3) << "the refused step is not stored";

  // The next step starts a new segment (w[1]'s, now the oldest, makes room).
  ASSERT_OK(append(w[0].get()));
  EXPECT_NE(w[0]->trajectory_id(0), evicted);
  EXPECT_NE(w[0]->trajectory_id(0), 0u);
  info = table->Info();
  EXPECT_EQ(info.evicted_trajectories, 2);
  EXPECT_EQ(info.num_items, info.num_steps * lanes);
  for (auto it = steps_.begin(); it != steps_.end();) {
    it = it->first.first == w[0]->trajectory_id(0) || it->first.first == w[2]->trajectory_id(0)
             ? std::next(it)
             : steps_.erase(it);
  }
  expect_draws(evicted);
}

TEST_F(VectorTableTest, LargeStepsAreSplitOverTheWriterThreads) {
  CheckLargeStepsSplitOverThreads(Placement::Host());
}

TEST_F(VectorTableTest, ReopenKeepsTheSpecAndTheSteps) {
  // From a checkpoint taken on close, and from the log alone.
  for (const bool replay : {false, true}) {
    SCOPED_TRACE(replay ? "replaying the log" : "from the checkpoint");
    const std::string path = dir_.path() + (replay ? "/replay" : "/checkpoint");
    const DBOptions options = replay ? testing_util::ManualCheckpoints() : DBOptions{};
    Forget();
    const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 7);
    TableSpec spec = VectorSpec(lanes);
    spec.capacity_steps = 256;
    const int n = 1 + static_cast<int>(rng_() % 40);
    {
      ASSERT_OK_AND_ASSIGN(auto db, DB::Open(options, path));
      auto table = testing_util::CreateTable(db.get(), spec);
      ASSERT_NE(table, nullptr);
      ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
      Append(spec, w.get(), n);
    }
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(options, path));
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("vt"));
    EXPECT_EQ(table->spec(), spec);
    EXPECT_EQ(table->Info().num_items, n * lanes);
    SampleBatch batch;
    ASSERT_OK(table->Sample(64, {}, &batch));
    ExpectRows(spec, batch);
    // Writing goes on, in a new segment.
    ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
    ASSERT_OK(w->Append(RandomStep(spec, rng_).tensors));
    EXPECT_EQ(table->Info().num_items, (n + 1) * lanes);
  }
}

// Datasets: a read-only opener, an export and an import all give back the
// same environments' rows (segments travel as trajectories).
TEST_F(VectorTableTest, ReadOnlyOpenExportAndImportKeepTheRows) {
  const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 9);
  TableSpec spec = VectorSpec(lanes);
  spec.capacity_steps = 256;
  const int n = 1 + static_cast<int>(rng_() % 60);
  {
    auto table = testing_util::CreateTable(db_.get(), spec);
    ASSERT_NE(table, nullptr);
    ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
    Append(spec, w.get(), n);
    ASSERT_OK(db_->Checkpoint());
  }
  const auto expect_rows = [&](DB* db, std::string_view name) {
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable(name));
    EXPECT_EQ(table->spec().lanes, lanes);
    EXPECT_EQ(table->Info().num_items, n * lanes);
    SampleBatch batch;
    ASSERT_OK(table->Sample(64, {}, &batch));
    ExpectRows(spec, batch);
  };
  {
    SCOPED_TRACE("read-only opener");
    ASSERT_OK_AND_ASSIGN(auto reader, DB::OpenReadOnly({}, dir_.path()));
    expect_rows(reader.get(), "vt");
  }
  const std::string exported = dir_.path() + "/exported";
  ASSERT_OK(db_->ExportTable("vt", exported));
  {
    SCOPED_TRACE("export");
    ASSERT_OK_AND_ASSIGN(auto copy, DB::Open({}, exported));
    expect_rows(copy.get(), "vt");
  }
  {
    SCOPED_TRACE("import");
    ASSERT_OK_AND_ASSIGN(auto other, DB::Open({}, dir_.path() + "/other"));
    ASSERT_OK(other->ImportTable(exported, "vt").status());
    expect_rows(other.get(), "vt");
  }
}

TEST_F(VectorTableTest, WhatItRefusesSaysWhy) {
  // Each option this version refuses, set on a valid vector spec.
  const std::vector<std::pair<std::function<void(TableSpec*)>, std::string>> refusals = {
      {[](TableSpec* t) { t->lanes = 0; }, "lanes is 0; it must be between 1 and 16777216"},
      {[](TableSpec* t) { t->sequence_length = 2; },
       "a vector table (lanes 4) needs sequence_length 1, got 2"},
      {[](TableSpec* t) { t->selector = SelectorKind::kPrioritized; },
       "needs the uniform selector, got prioritized"},
      {[](TableSpec* t) { t->max_times_sampled = 1; }, "needs max_times_sampled 0, got 1"},
      {[](TableSpec* t) { t->eviction = EvictionPolicy::kLowestPriority; },
       "needs eviction oldest_first"},
      {[](TableSpec* t) { t->spill = true; }, "needs spill off"},
      {[](TableSpec* t) {
         t->lanes = 4096;
         t->block_steps = 8192;
         t->capacity_steps = 8192;
       },
       "needs block_steps * lanes <= 16777216"},
      {[](TableSpec* t) {
         t->columns[0].shape = Shape({1, 1, 1, 1, 1, 1, 1, 1});
       },
       "needs columns of at most 7 dims"},
      {[](TableSpec* t) {
         t->lanes = 1 << 20;
         t->columns = {{"big", DType::kU8, {512}}};
       },
       "a step of all columns (a vector step of 1048576 environments) needs 536870912 bytes"},
  };
  for (const auto& [change, message] : refusals) {
    TableSpec spec = VectorSpec(4);
    change(&spec);
    EXPECT_THAT(db_->CreateTable(spec).status().message(), HasSubstr(message));
  }

  const int64_t lanes = 4;
  const TableSpec spec = VectorSpec(lanes);
  auto table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  EXPECT_THAT(table->NewWriter().status().message(),
              HasSubstr("'vt' is a vector table of 4 environments: write it with "
                        "NewVectorWriter(4)"));
  EXPECT_THAT(table->NewVectorWriter(3).status().message(),
              HasSubstr("a vector table of 4 environments; a vector writer of 3 cannot write it"));
  ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
  Step step = RandomStep(spec, rng_);
  const std::vector<double> priorities(lanes, 1.0);
  EXPECT_THAT(w->Append(step.tensors, priorities).message(),
              HasSubstr("vector step: a vector table keeps no per-environment priorities"));
  // A step of the wrong number of environments.
  std::vector<ConstTensor> short_step = step.tensors;
  short_step[0].shape = spec.columns[0].shape.Prepend(lanes - 1);
  short_step[0].size_bytes = spec.columns[0].step_bytes() * (lanes - 1);
  EXPECT_THAT(w->Append(short_step).message(), HasSubstr("column 'obs'"));
  EXPECT_EQ(table->Info().num_steps, 0) << "a refused step stores nothing";
  ASSERT_OK(w->Append(step.tensors));
  EXPECT_OK(w->End(3, EndReason::kTerminal));
  EXPECT_THAT(
      w->End(4, EndReason::kTerminal).message(),
      HasSubstr("End: environment 4 is out of range; the vector writer has 4 environments"));
  const std::vector<size_t> envs = {0, 2, 9};
  EXPECT_THAT(w->EndMany(envs, EndReason::kTerminal).message(),
              HasSubstr("EndMany: environment 9 is out of range"));
  SampleBatch batch;
  ASSERT_OK(table->Sample(1, {}, &batch));
  const std::vector<ItemKey> keys = {batch.keys[0]};
  const std::vector<double> p = {2.0};
  EXPECT_THAT(table->UpdatePriorities(keys, p).message(),
              HasSubstr("UpdatePriorities: a vector table (lanes 4) keeps no per-environment "
                        "priorities"));
  EXPECT_THAT(
      table
          ->Lookup(std::vector<ItemKey>{MakeItemKey(ItemKeyTrajectory(keys[0]), 4 * 7 + 1)}, &batch)
          .message(),
      HasSubstr("step 7, environment 1, index 0) is not a live item"));
  EXPECT_THAT(table->UpdatePrioritiesFromDevice(nullptr, nullptr, 0, nullptr).message(),
              HasSubstr("UpdatePrioritiesFromDevice: a vector table (lanes 4) keeps no "
                        "per-environment priorities"));

  // An error of the whole vector step names no environment: here the rate
  // limiter allows one step (4 items) and nothing more until samples come.
  TableSpec limited = VectorSpec(lanes);
  limited.name = "limited";
  limited.rate_limiter = RateLimiterSpec::SampleToInsertRatio(1.0, 4, -1.0, 4.0);
  auto lt = testing_util::CreateTable(db_.get(), limited);
  ASSERT_NE(lt, nullptr);
  WriterOptions quick;
  quick.timeout = std::chrono::milliseconds(1);
  ASSERT_OK_AND_ASSIGN(auto lw, lt->NewVectorWriter(lanes, quick));
  ASSERT_OK(lw->Append(step.tensors));
  const Status waited = lw->Append(step.tensors);
  EXPECT_EQ(waited.code(), Status::Code::kDeadlineExceeded) << waited.ToString();
  EXPECT_THAT(waited.message(), HasSubstr("rate limiter to allow 4 inserts"));
  EXPECT_THAT(waited.message(), Not(HasSubstr("environment")));
  EXPECT_EQ(lt->Info().num_items, lanes);
}

class VectorTableGpuTest : public VectorTableTest {};

// Device arrays for `batch` sampled items of `spec`, poisoned.
struct DeviceOut {
  std::vector<DeviceBuffer> columns;
  DeviceBuffer keys, probabilities, mask;
  DeviceSampleOutput view;
};

Result<DeviceOut> AllocateOut(const TableSpec& spec, int64_t batch) {
  DeviceOut out;
  for (const ColumnSpec& c : spec.columns) {
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(0, batch * c.step_bytes()));
    out.columns.push_back(std::move(b));
    out.view.columns.push_back(out.columns.back().data());
  }
  REPLAYDB_ASSIGN_OR_RETURN(out.keys, DeviceBuffer::Allocate(0, batch * sizeof(uint64_t)));
  REPLAYDB_ASSIGN_OR_RETURN(out.probabilities, DeviceBuffer::Allocate(0, batch * sizeof(float)));
  REPLAYDB_ASSIGN_OR_RETURN(out.mask, DeviceBuffer::Allocate(0, batch));
  for (DeviceBuffer* b : {&out.keys, &out.probabilities, &out.mask}) {
    REPLAYDB_RETURN_IF_ERROR(b->Fill(0xAB));
  }
  for (DeviceBuffer& b : out.columns) REPLAYDB_RETURN_IF_ERROR(b.Fill(0xAB));
  out.view.keys = out.keys.as<uint64_t>();
  out.view.probabilities = out.probabilities.as<float>();
  out.view.mask = out.mask.as<uint8_t>();
  return out;
}

// A device batch (column pointers, keys and mask in device memory) as a
// host SampleBatch, copied after the work queued on `stream`.
Result<SampleBatch> ToHostBatch(const TableSpec& spec, int64_t batch,
                                const std::vector<void*>& columns, const uint64_t* keys,
                                const uint8_t* mask, void* stream) {
  SampleBatch out;
  out.batch_size = batch;
  out.sequence_length = 1;
  out.keys.resize(static_cast<size_t>(batch));
  out.mask.resize(static_cast<size_t>(batch));
  REPLAYDB_RETURN_IF_ERROR(
      CopyDeviceToHost(out.keys.data(), keys, batch * sizeof(uint64_t), stream));
  REPLAYDB_RETURN_IF_ERROR(CopyDeviceToHost(out.mask.data(), mask, batch, stream));
  out.columns.resize(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    out.columns[c].Reset(spec.columns[c].dtype, spec.columns[c].shape.Prepend(1).Prepend(batch));
    REPLAYDB_RETURN_IF_ERROR(
        CopyDeviceToHost(out.columns[c].data(), columns[c], out.columns[c].size_bytes(), stream));
  }
  return out;
}

// With priority_device set, SampleToDevice draws inside the gather launch
// (docs/vector_tables.md, "Draws on the device"): a live step, then an
// environment, uniformly over every (step, environment) item, with
// probability 1 / items, each row the one its key names, never a row of an
// evicted segment; host samples still work.
TEST_F(VectorTableGpuTest, DrawsOnTheDeviceAreUniformOverEnvironmentsAndSteps) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  for (const bool device : {true, false}) {
    SCOPED_TRACE(device ? "device:0" : "pinned");
    Forget();
    const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 8);
    TableSpec spec = VectorSpec(lanes);
    spec.name = device ? "vd" : "vp";
    spec.capacity_steps = 32;  // 4 segments of 8 steps: more evict the oldest
    spec.placement = device ? Placement::Device(0) : Placement::Host();
    spec.priority_device = 0;
    auto table = testing_util::CreateTable(db_.get(), spec);
    ASSERT_NE(table, nullptr);
    ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
    const int n = 10 + static_cast<int>(rng_() % 50);
    Append(spec, w.get(), n);
    const int64_t items = table->Info().num_items;
    ASSERT_GT(items, 0);
    ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
    constexpr int64_t kBatch = 4096;
    ASSERT_OK_AND_ASSIGN(DeviceOut out, AllocateOut(spec, kBatch));
    std::map<ItemKey, int64_t> counts;
    const int64_t rounds = (items * 200 + kBatch - 1) / kBatch;
    for (int64_t r = 0; r < rounds; ++r) {
      ASSERT_OK(table->SampleToDevice(kBatch, {}, out.view, stream.handle()));
      ASSERT_OK_AND_ASSIGN(SampleBatch got, ToHostBatch(spec, kBatch, out.view.columns,
                                                        out.view.keys, out.view.mask,
                                                        stream.handle()));
      if (r == 0) {
        ExpectRows(spec, got);
        std::vector<float> probabilities(kBatch);
        ASSERT_OK(CopyDeviceToHost(probabilities.data(), out.view.probabilities,
                                   kBatch * sizeof(float), stream.handle()));
        for (float p : probabilities) {
          ASSERT_FLOAT_EQ(p, static_cast<float>(1.0 / static_cast<double>(items)));
        }
        // Every drawn key is live: a host Lookup finds it.
        SampleBatch looked;
        ASSERT_OK(table->Lookup(got.keys, &looked));
      }
      for (ItemKey k : got.keys) ++counts[k];
    }
    ASSERT_EQ(static_cast<int64_t>(counts.size()), items)
        << "every (step, environment) item is drawn, and nothing else";
    const double expected = static_cast<double>(rounds * kBatch) / static_cast<double>(items);
    EXPECT_LT(testing_util::UniformChiSquare(counts, expected),
              testing_util::ChiSquareCritical(static_cast<double>(items - 1)));
    SampleBatch host;
    ASSERT_OK(table->Sample(64, {}, &host));
    ExpectRows(spec, host);
  }
}

// The same in device memory (the step's bytes staged in pinned memory by the
// writer's threads, then scattered) and in pinned host memory.
TEST_F(VectorTableGpuTest, LargeStepsAreSplitOverTheWriterThreads) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  CheckLargeStepsSplitOverThreads(Placement::Device(0));
  CheckLargeStepsSplitOverThreads(Placement::Host());
}

// A vector table in device memory (or pinned host memory) takes steps from
// host and device memory, and every read path gives each environment's row
// byte for byte: Sample, SampleToDevice, LookupToDevice, a DeviceSampler,
// and Sample after a reopen (the log replayed into device blocks, or a
// checkpoint loaded into them).
TEST_F(VectorTableGpuTest, DeviceAndPinnedTablesServeEveryEnvironmentsRow) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  for (const bool device : {true, false}) {
    for (const bool replay : {false, true}) {
      SCOPED_TRACE(std::string(device ? "device:0" : "pinned") +
                   (replay ? ", reopened from the log" : ", reopened from a checkpoint"));
      Forget();
      const int64_t lanes = 2 + static_cast<int64_t>(rng_() % 300);
      TableSpec spec = VectorSpec(lanes);
      spec.capacity_steps = 1024;
      spec.placement = device ? Placement::Device(0) : Placement::Host();
      // A device table is not logged by default (TableLogging::kDefault).
      spec.logging = TableLogging::kOn;
      const std::string path =
          dir_.path() + "/" + (device ? "d" : "p") + (replay ? "-replay" : "-checkpoint");
      const DBOptions options = replay ? testing_util::ManualCheckpoints() : DBOptions{};
      ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
      const int n = 2 + static_cast<int>(rng_() % 40);
      const int first_from_device = static_cast<int>(rng_() % 2);
      {
        ASSERT_OK_AND_ASSIGN(auto db, DB::Open(options, path));
        auto table = testing_util::CreateTable(db.get(), spec);
        ASSERT_NE(table, nullptr);
        EXPECT_EQ(table->Info().placement, device ? "device:0" : "pinned");
        ASSERT_OK_AND_ASSIGN(auto w, table->NewVectorWriter(lanes));
        for (int i = 0; i < n; ++i) {
          Step step = RandomStep(spec, rng_);
          const uint64_t before = w->trajectory_id(0);
          // Every other step from host memory, the others from device memory.
          if (i % 2 != first_from_device) {
            ASSERT_OK(w->Append(step.tensors));
          } else {
            std::vector<DeviceBuffer> buffers;
            std::vector<ConstTensor> tensors;
            for (size_t c = 0; c < spec.columns.size(); ++c) {
              const size_t bytes = step.columns[c].size();
              ASSERT_OK_AND_ASSIGN(DeviceBuffer b, DeviceBuffer::Allocate(0, bytes));
              ASSERT_OK(b.CopyFromHost(step.columns[c].data(), bytes, 0, stream.handle()));
              tensors.push_back({step.tensors[c].dtype, step.tensors[c].shape, b.data(), bytes});
              buffers.push_back(std::move(b));
            }
            ASSERT_OK(w->AppendFromDevice(tensors, stream.handle()));
            ASSERT_OK(stream.Synchronize());  // before the inputs are freed
          }
          const uint64_t segment = w->trajectory_id(0) != 0 ? w->trajectory_id(0) : before;
          steps_[{segment, next_step_[segment]++}] = std::move(step);
        }
        EXPECT_EQ(table->Info().num_items, n * lanes);

        SampleBatch host;
        ASSERT_OK(table->Sample(128, {}, &host));
        ExpectRows(spec, host);

        constexpr int64_t kBatch = 96;
        ASSERT_OK_AND_ASSIGN(DeviceOut out, AllocateOut(spec, kBatch));
        ASSERT_OK(table->SampleToDevice(kBatch, {}, out.view, stream.handle()));
        ASSERT_OK_AND_ASSIGN(SampleBatch sampled,
                             ToHostBatch(spec, kBatch, out.view.columns, out.view.keys,
                                         out.view.mask, stream.handle()));
        ExpectRows(spec, sampled);
        std::vector<float> probabilities(kBatch);
        ASSERT_OK(CopyDeviceToHost(probabilities.data(), out.view.probabilities,
                                   kBatch * sizeof(float), stream.handle()));
        for (float p : probabilities) EXPECT_FLOAT_EQ(p, 1.0f / static_cast<float>(n * lanes));

        // The host sample's keys, looked up on the device.
        ASSERT_OK_AND_ASSIGN(DeviceOut looked, AllocateOut(spec, host.batch_size));
        ASSERT_OK(table->LookupToDevice(host.keys, looked.view, stream.handle()));
        ASSERT_OK_AND_ASSIGN(SampleBatch lookup,
                             ToHostBatch(spec, host.batch_size, looked.view.columns,
                                         looked.view.keys, looked.view.mask, stream.handle()));
        EXPECT_EQ(lookup.keys, host.keys);
        ExpectRows(spec, lookup);

        DeviceSamplerOptions so;
        so.batch_size = 1 + static_cast<int64_t>(rng_() % 200);
        ASSERT_OK_AND_ASSIGN(auto sampler, table->NewDeviceSampler(so));
        for (int round = 0; round < 3; ++round) {
          DeviceBatch batch;
          ASSERT_OK(sampler->Next(stream.handle(), &batch));
          ASSERT_OK_AND_ASSIGN(SampleBatch got,
                               ToHostBatch(spec, batch.batch_size, batch.columns, batch.keys,
                                           batch.mask, stream.handle()));
          ExpectRows(spec, got);
          ASSERT_OK(sampler->Release(batch, stream.handle()));
        }
      }
      ASSERT_OK_AND_ASSIGN(auto db, DB::Open(options, path));
      ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("vt"));
      ASSERT_EQ(table->Info().num_items, n * lanes);
      SampleOptions quick;
      quick.timeout = std::chrono::seconds(10);
      SampleBatch batch;
      ASSERT_OK(table->Sample(128, quick, &batch));
      ExpectRows(spec, batch);
    }
  }
}

}  // namespace
}  // namespace replaydb
