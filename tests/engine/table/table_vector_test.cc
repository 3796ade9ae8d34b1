// VectorWriter::Append: one pass under the table's mutex for all
// environments (TableImpl::AppendVectorStep). Its bookkeeping must match N
// trajectory writers appending the same steps one environment at a time;
// errors of one environment leave the others their steps; environments the
// rate limiter admits are finished before the call waits for the rest; and
// the log replays what it appended.
#include <algorithm>
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
using namespace std::chrono_literals;

std::vector<ColumnSpec> Columns() {
  return {{"obs", DType::kF32, {3}}, {"action", DType::kI32, {}}, {"flag", DType::kU8, {2}}};
}

// One vector step of `n` environments: random bytes per column, [n, ...].
struct VectorStep {
  std::vector<std::vector<std::byte>> columns;
  std::vector<ConstTensor> tensors;
  // Environment env's step as a single step (views into `columns`).
  std::vector<ConstTensor> Env(const TableSpec& spec, size_t env) const {
    std::vector<ConstTensor> out;
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const size_t cb = spec.columns[c].step_bytes();
      out.push_back(
          {spec.columns[c].dtype, spec.columns[c].shape, columns[c].data() + env * cb, cb});
    }
    return out;
  }
};

VectorStep RandomVectorStep(const TableSpec& spec, size_t n, std::mt19937_64& rng) {
  VectorStep step;
  for (const ColumnSpec& col : spec.columns) {
    std::vector<std::byte> bytes(col.step_bytes() * n);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    if (col.dtype == DType::kF32) {
      // Finite floats: compare bytes, not NaN payloads.
      for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        const float f = static_cast<float>(rng() % 1000) / 7.0f;
        std::memcpy(bytes.data() + i, &f, 4);
      }
    }
    step.columns.push_back(std::move(bytes));
  }
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    step.tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(n),
                            step.columns[c].data(), step.columns[c].size()});
  }
  return step;
}

class TableVectorTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }
  std::shared_ptr<Table> Create(const TableSpec& spec) {
    return testing_util::CreateTable(db_.get(), spec);
  }
  // Everything a table shows of its trajectories and items.
  struct Snapshot {
    std::vector<TrajectoryInfo> trajectories;
    std::vector<std::vector<std::vector<std::byte>>> steps;  // per trajectory, per column
    std::vector<std::vector<double>> step_priorities;
    std::vector<ItemKey> keys;
    std::vector<double> priorities;
    TableInfo info;
  };
  Snapshot Take(Table& table) {
    Snapshot s;
    s.trajectories = table.ListTrajectories({});
    for (const TrajectoryInfo& t : s.trajectories) {
      TrajectorySteps read;
      EXPECT_OK(table.ReadTrajectory(t.id, 0, t.length, &read));
      std::vector<std::vector<std::byte>> cols;
      for (const Tensor& c : read.columns) {
        cols.emplace_back(c.data(), c.data() + c.size_bytes());
      }
      s.steps.push_back(std::move(cols));
      s.step_priorities.push_back(read.step_priorities);
    }
    EXPECT_OK(table.ItemPriorities(&s.keys, &s.priorities));
    s.info = table.Info();
    return s;
  }
  void ExpectSame(const Snapshot& a, const Snapshot& b) {
    ASSERT_EQ(a.trajectories.size(), b.trajectories.size());
    for (size_t i = 0; i < a.trajectories.size(); ++i) {
      SCOPED_TRACE("trajectory " + std::to_string(a.trajectories[i].id));
      EXPECT_EQ(a.trajectories[i].id, b.trajectories[i].id);
      EXPECT_EQ(a.trajectories[i].length, b.trajectories[i].length);
      EXPECT_EQ(a.trajectories[i].ended, b.trajectories[i].ended);
      EXPECT_EQ(a.trajectories[i].live_items, b.trajectories[i].live_items);
      EXPECT_EQ(a.steps[i], b.steps[i]);
      EXPECT_EQ(a.step_priorities[i], b.step_priorities[i]);
    }
    EXPECT_EQ(a.keys, b.keys);
    EXPECT_EQ(a.priorities, b.priorities);
    EXPECT_EQ(a.info.num_steps, b.info.num_steps);
    EXPECT_EQ(a.info.num_items, b.info.num_items);
    EXPECT_EQ(a.info.num_trajectories, b.info.num_trajectories);
    EXPECT_EQ(a.info.num_open_trajectories, b.info.num_open_trajectories);
    EXPECT_EQ(a.info.steps_inserted, b.info.steps_inserted);
    EXPECT_EQ(a.info.items_inserted, b.info.items_inserted);
    EXPECT_EQ(a.info.evicted_trajectories, b.info.evicted_trajectories);
    EXPECT_EQ(a.info.evicted_items, b.info.evicted_items);
    EXPECT_EQ(a.info.blocks_used, b.info.blocks_used);
    EXPECT_EQ(a.info.max_priority_seen, b.info.max_priority_seen);
    EXPECT_EQ(a.info.rate_limiter.inserts, b.info.rate_limiter.inserts);
    EXPECT_EQ(a.info.rate_limiter.deletes, b.info.rate_limiter.deletes);
  }
  void ExpectVerifies() {
    auto report = db_->Verify();
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_TRUE(report->problems.empty()) << report->problems[0];
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

// Random steps, priorities (given in some calls only) and ends; windows of
// 1 and 3 steps, tail padding, every StepPriority mode, with and without
// max_times_sampled, a tier small enough to evict ended trajectories: the
// vector writer's table ends up as the one fed by a writer per environment.
TEST_F(TableVectorTest, MatchesOneTrajectoryWriterPerEnvironment) {
  // Also with the appends' work split over threads (WriterOptions::threads).
  for (int threads : {1, 3}) {
  for (int64_t length : {1, 3}) {
    for (StepPriority mode :
         {StepPriority::kItem, StepPriority::kWindowMax, StepPriority::kWindowMean}) {
      for (bool small_tier : {false, true}) {
        SCOPED_TRACE(std::string(StepPriorityName(mode)) + (small_tier ? " small tier" : "") +
                     " L=" + std::to_string(length) + " threads=" + std::to_string(threads));
        const std::string suffix = std::to_string(threads) + "_" + std::to_string(length) + "_" +
                                   std::to_string(static_cast<int>(mode)) +
                                   (small_tier ? "_small" : "_large");
        TableSpec spec;
        spec.columns = Columns();
        spec.sequence_length = length;
        spec.padding = Padding::kTail;
        spec.step_priority = mode;
        spec.block_steps = 4;
        spec.selector = small_tier ? SelectorKind::kUniform : SelectorKind::kPrioritized;
        spec.max_times_sampled = small_tier ? 0 : 2;
        spec.eviction = small_tier ? EvictionPolicy::kOldestFirst : EvictionPolicy::kLowestPriority;
        // Small: room for about three trajectories per environment (they are
        // ended often enough that only ended ones are evicted).
        spec.capacity_steps = small_tier ? 5 * 12 * 4 : 4096;
        spec.name = "vector_" + suffix;
        auto vector_table = Create(spec);
        spec.name = "single_" + suffix;
        auto single_table = Create(spec);
        ASSERT_TRUE(vector_table && single_table);

        constexpr size_t kEnvs = 5;
        auto vw = vector_table->NewVectorWriter(kEnvs, {.threads = threads});
        ASSERT_TRUE(vw.ok());
        std::vector<std::unique_ptr<TrajectoryWriter>> writers;
        for (size_t env = 0; env < kEnvs; ++env) {
          auto w = single_table->NewWriter();
          ASSERT_TRUE(w.ok());
          writers.push_back(std::move(w).value());
        }
        std::vector<int> lengths(kEnvs, 0);
        for (int t = 0; t < 60; ++t) {
          const VectorStep step = RandomVectorStep(spec, kEnvs, rng_);
          std::vector<double> priorities;
          if (rng_() % 3 != 0) {
            for (size_t env = 0; env < kEnvs; ++env) {
              priorities.push_back(rng_() % 4 == 0 ? 0.0 : static_cast<double>(rng_() % 1000) / 10);
            }
          }
          ASSERT_OK((*vw)->Append(step.tensors, priorities));
          for (size_t env = 0; env < kEnvs; ++env) {
            std::optional<double> p;
            if (!priorities.empty()) p = priorities[env];
            ASSERT_OK(writers[env]->Append(step.Env(spec, env), p));
          }
          // The environments that end now, by End one at a time or by one
          // EndMany (with repeats, which are no-ops), in random order.
          const EndReason reason = rng_() % 2 ? EndReason::kTerminal : EndReason::kTruncated;
          std::vector<size_t> ending;
          for (size_t env = 0; env < kEnvs; ++env) {
            ++lengths[env];
            // Ends at most every 12 steps, so that the small tier always has
            // ended trajectories to evict.
            if (lengths[env] >= 12 || rng_() % 5 == 0) {
              ending.push_back(env);
              lengths[env] = 0;
            }
          }
          std::shuffle(ending.begin(), ending.end(), rng_);
          if (rng_() % 2 == 0) {
            std::vector<size_t> with_repeats = ending;
            if (!ending.empty()) with_repeats.push_back(ending[rng_() % ending.size()]);
            ASSERT_OK((*vw)->EndMany(with_repeats, reason));
          } else {
            for (size_t env : ending) ASSERT_OK((*vw)->End(env, reason));
          }
          for (size_t env : ending) ASSERT_OK(writers[env]->End(reason));
          if (t % 10 == 9 && !small_tier) {
            // New priorities for some items (which re-ranks ended
            // trajectories): the same keys in both.
            auto batch = vector_table->Sample(4, {.timeout = 1s, .peek = true});
            ASSERT_TRUE(batch.ok()) << batch.status().ToString();
            PriorityUpdateResult a, b;
            std::vector<double> updated(batch->keys.size(), 3.5);
            ASSERT_OK(vector_table->UpdatePriorities(batch->keys, updated, &a));
            ASSERT_OK(single_table->UpdatePriorities(batch->keys, updated, &b));
            EXPECT_EQ(a.updated, b.updated);
          }
        }
        ASSERT_NO_FATAL_FAILURE(ExpectSame(Take(*vector_table), Take(*single_table)));
        if (small_tier) {
          EXPECT_GT(vector_table->Info().evicted_trajectories, 0);
        }
      }
    }
  }
  }
  ExpectVerifies();
}

// Many environments over many blocks (odd block size, more blocks than one
// tile of the table's per-slot metadata), random ends, evictions: every
// step keeps its own value and priority, and every item the priority of
// its step. Step values and priorities name (environment, step), so a step
// whose metadata landed in another's place shows.
TEST_F(TableVectorTest, StepsKeepTheirPrioritiesAcrossManyBlocks) {
  // Also with the appends' work split over threads (WriterOptions::threads).
  for (int threads : {1, 4}) {
  SCOPED_TRACE("threads " + std::to_string(threads));
  TableSpec spec;
  spec.name = "many_blocks_" + std::to_string(threads);
  spec.columns = {{"tag", DType::kI32, {}}};
  spec.block_steps = 3;
  spec.selector = SelectorKind::kPrioritized;
  constexpr int64_t kEnvs = 150;
  constexpr int kMaxLength = 10;
  // Room for about three trajectories per environment: older ended ones go.
  spec.capacity_steps = kEnvs * 12 * 3;
  auto table = Create(spec);
  ASSERT_TRUE(table);
  auto vw = table->NewVectorWriter(kEnvs, {.threads = threads});
  ASSERT_TRUE(vw.ok());
  std::vector<int32_t> lengths(kEnvs, 0);
  std::vector<int32_t> tags(kEnvs);
  std::vector<double> priorities(kEnvs);
  for (int t = 0; t < 200; ++t) {
    for (int64_t env = 0; env < kEnvs; ++env) {
      tags[env] = static_cast<int32_t>(env) * 1000 + lengths[env];
      priorities[env] = tags[env] + 0.5;
    }
    const ConstTensor step{DType::kI32, Shape{kEnvs}, tags.data(), tags.size() * sizeof(int32_t)};
    ASSERT_OK((*vw)->Append(std::span<const ConstTensor>(&step, 1), priorities));
    for (int64_t env = 0; env < kEnvs; ++env) {
      if (++lengths[env] >= kMaxLength || rng_() % 4 == 0) {
        ASSERT_OK((*vw)->End(static_cast<size_t>(env), EndReason::kTerminal));
        lengths[env] = 0;
      }
    }
  }
  const TableInfo info = table->Info();
  EXPECT_GT(info.evicted_trajectories, 0);
  EXPECT_GT(info.blocks_used, 64);
  // Each trajectory's step values, by id.
  std::map<uint64_t, std::vector<int32_t>> steps;
  for (const TrajectoryInfo& t : table->ListTrajectories({})) {
    SCOPED_TRACE("trajectory " + std::to_string(t.id));
    TrajectorySteps read;
    ASSERT_OK(table->ReadTrajectory(t.id, 0, t.length, &read));
    ASSERT_EQ(read.columns.size(), 1u);
    std::vector<int32_t> values(static_cast<size_t>(t.length));
    std::memcpy(values.data(), read.columns[0].data(), values.size() * sizeof(int32_t));
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(values[i] % 1000, static_cast<int32_t>(i));
      EXPECT_EQ(values[i] / 1000, values[0] / 1000);
      EXPECT_EQ(read.step_priorities[i], values[i] + 0.5);
    }
    steps[t.id] = std::move(values);
  }
  std::vector<ItemKey> keys;
  std::vector<double> item_priorities;
  ASSERT_OK(table->ItemPriorities(&keys, &item_priorities));
  ASSERT_EQ(static_cast<int64_t>(keys.size()), info.num_items);
  EXPECT_EQ(info.num_items, info.num_steps);
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto it = steps.find(ItemKeyTrajectory(keys[i]));
    ASSERT_NE(it, steps.end()) << "item " << keys[i];
    const size_t start = static_cast<size_t>(ItemKeyStart(keys[i]));
    ASSERT_LT(start, it->second.size());
    EXPECT_EQ(item_priorities[i], it->second[start] + 0.5) << "item " << keys[i];
  }
  }
  ExpectVerifies();
}

// A tier too small for every environment's open trajectory: a later
// environment's block comes from evicting an earlier one's trajectory,
// which loses its step (named in the error); the others keep theirs.
TEST_F(TableVectorTest, EnvironmentEvictedByALaterOneLosesOnlyItsStep) {
  for (int threads : {1, 3}) {
  SCOPED_TRACE("threads " + std::to_string(threads));
  TableSpec spec;
  spec.name = "tight_" + std::to_string(threads);
  spec.columns = Columns();
  spec.block_steps = 2;
  spec.capacity_steps = 6;  // 3 blocks
  auto table = Create(spec);
  // A trajectory that is not the vector writer's takes one block, and stays
  // open: the oldest, so the first to go.
  ASSERT_OK_AND_ASSIGN(auto single, table->NewWriter());
  ASSERT_OK(single->Append(testing_util::RandomStep(spec, rng_).tensors));
  auto vw = table->NewVectorWriter(3, {.threads = threads});
  ASSERT_TRUE(vw.ok()) << vw.status().ToString();
  const VectorStep step = RandomVectorStep(spec, 3, rng_);
  // Environments 0 and 1 take the free blocks, environment 2 evicts the
  // single writer's trajectory; the next step of each fits its block.
  ASSERT_OK((*vw)->Append(step.tensors));
  EXPECT_EQ(table->Info().evicted_trajectories, 1);
  ASSERT_OK((*vw)->Append(step.tensors));
  // The third step needs a block for each: environment 0's own trajectory is
  // the oldest then, and environment 1 evicts it.
  Status s = (*vw)->Append(RandomVectorStep(spec, 3, rng_).tensors);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("evicted"));
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_steps + info.evicted_items, info.steps_inserted);
  // The surviving environments' first steps are theirs.
  for (size_t env = 0; env < 3; ++env) {
    if ((*vw)->trajectory_id(env) == 0) continue;
    TrajectorySteps read;
    if (!table->ReadTrajectory((*vw)->trajectory_id(env), 0, 1, &read).ok()) continue;
    const auto want = step.Env(spec, env);
    for (size_t c = 0; c < want.size(); ++c) {
      EXPECT_EQ(std::memcmp(read.columns[c].data(), want[c].data, want[c].size_bytes), 0);
    }
  }
  }
  ExpectVerifies();
}

// EndMany ends exactly the environments it names (repeats are no-ops), each
// with the reason given; their next steps start new trajectories while the
// others go on. An environment out of range fails the call before anything
// ends; an environment whose trajectory was evicted is named, and the
// others still end.
TEST_F(TableVectorTest, EndManyEndsTheEnvironmentsItNames) {
  TableSpec spec;
  spec.name = "end_many";
  spec.columns = Columns();
  spec.block_steps = 4;
  spec.capacity_steps = 4096;
  auto table = Create(spec);
  const size_t n = 2 + rng_() % 30;
  auto vw = table->NewVectorWriter(n);
  ASSERT_TRUE(vw.ok());
  ASSERT_OK((*vw)->Append(RandomVectorStep(spec, n, rng_).tensors));
  std::vector<uint64_t> ids(n);
  for (size_t env = 0; env < n; ++env) ids[env] = (*vw)->trajectory_id(env);

  // Out of range (after valid ones): nothing ends.
  std::vector<size_t> bad = {0, n - 1, n};
  Status s = (*vw)->EndMany(bad, EndReason::kTerminal);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("EndMany: table 'end_many': environment " + std::to_string(n) +
                                     " is out of range; the vector writer "
                                     "has " +
                                     std::to_string(n) + " environments"));
  EXPECT_EQ(table->Info().num_open_trajectories, static_cast<int64_t>(n));

  // A random subset, shuffled, with repeats.
  std::vector<size_t> ending;
  std::vector<bool> ends(n, false);
  for (size_t env = 0; env < n; ++env) {
    if (rng_() % 2 == 0) {
      ending.push_back(env);
      ends[env] = true;
    }
  }
  std::vector<size_t> given = ending;
  for (size_t i = 0; i < ending.size() / 2; ++i) given.push_back(ending[rng_() % ending.size()]);
  std::shuffle(given.begin(), given.end(), rng_);
  const EndReason reason = rng_() % 2 ? EndReason::kTerminal : EndReason::kTruncated;
  ASSERT_OK((*vw)->EndMany(given, reason));
  ASSERT_OK((*vw)->EndMany({}, reason));  // nothing to do
  EXPECT_EQ(table->Info().num_open_trajectories, static_cast<int64_t>(n - ending.size()));
  for (const TrajectoryInfo& t : table->ListTrajectories({})) {
    const size_t env = static_cast<size_t>(std::find(ids.begin(), ids.end(), t.id) - ids.begin());
    ASSERT_LT(env, n);
    EXPECT_EQ(t.ended, ends[env]) << "environment " << env;
    if (t.ended) {
      EXPECT_EQ(t.end_reason, reason) << "environment " << env;
    }
  }
  ASSERT_OK((*vw)->Append(RandomVectorStep(spec, n, rng_).tensors));
  for (size_t env = 0; env < n; ++env) {
    if (ends[env]) {
      EXPECT_NE((*vw)->trajectory_id(env), ids[env]) << "environment " << env;
    } else {
      EXPECT_EQ((*vw)->trajectory_id(env), ids[env]) << "environment " << env;
    }
  }

  // Evicted under the writer: a tier of two blocks, both held by the vector
  // writer's environments; another writer's step evicts environment 0's.
  spec.name = "end_many_tight";
  spec.block_steps = 2;
  spec.capacity_steps = 4;
  auto tight = Create(spec);
  auto tw = tight->NewVectorWriter(2);
  ASSERT_TRUE(tw.ok());
  ASSERT_OK((*tw)->Append(RandomVectorStep(spec, 2, rng_).tensors));
  const uint64_t survivor = (*tw)->trajectory_id(1);
  auto other = tight->NewWriter();
  ASSERT_TRUE(other.ok());
  ASSERT_OK((*other)->Append(RandomVectorStep(spec, 1, rng_).Env(spec, 0)));
  EXPECT_EQ(tight->Info().evicted_trajectories, 1);
  s = (*tw)->EndMany(std::vector<size_t>{0, 1}, EndReason::kTerminal);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("environment 0"));
  EXPECT_THAT(s.message(), HasSubstr("evicted"));
  EXPECT_EQ((*tw)->trajectory_id(0), 0u);
  EXPECT_EQ((*tw)->trajectory_id(1), 0u);
  bool found = false;
  for (const TrajectoryInfo& t : tight->ListTrajectories({})) {
    if (t.id != survivor) continue;
    found = true;
    EXPECT_TRUE(t.ended);
  }
  EXPECT_TRUE(found);

  // A dropped table: the call fails, naming why.
  ASSERT_OK(db_->DropTable("end_many"));
  s = (*vw)->EndMany(std::vector<size_t>{0}, EndReason::kTerminal);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  ExpectVerifies();
}

// The rate limiter admits only some environments' items: the others time
// out, named, without a step or a trajectory; the next call carries on.
TEST_F(TableVectorTest, RateLimiterTimeoutStopsOnlyTheEnvironmentsItRefuses) {
  // With threads, the shared pass is skipped when the limiter does not
  // admit every environment: the same outcome.
  for (int threads : {1, 3}) {
  SCOPED_TRACE("threads " + std::to_string(threads));
  TableSpec spec = TableSpec::Queue("queue_" + std::to_string(threads), Columns(), 5);
  spec.capacity_steps = 1024;
  auto table = Create(spec);
  auto vw = table->NewVectorWriter(8, {.timeout = 30ms, .threads = threads});
  ASSERT_TRUE(vw.ok());
  const VectorStep step = RandomVectorStep(spec, 8, rng_);
  Status s = (*vw)->Append(step.tensors);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("environment 5"));
  for (size_t env = 0; env < 8; ++env) {
    EXPECT_EQ((*vw)->trajectory_id(env) != 0, env < 5) << env;
  }
  TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, 5);
  EXPECT_EQ(info.rate_limiter.inserts, 5);
  EXPECT_GE(info.rate_limiter.blocked_inserts, 1);
  // FIFO: environments' items in environment order.
  for (size_t env = 0; env < 3; ++env) {
    auto batch = table->Sample(1);
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(ItemKeyTrajectory(batch->keys[0]), (*vw)->trajectory_id(env));
  }
  // Room for three more: environments 0-2 of the next call.
  s = (*vw)->Append(step.tensors);
  EXPECT_THAT(s.message(), HasSubstr("environment 3"));
  info = table->Info();
  EXPECT_EQ(info.num_items, 5);
  EXPECT_EQ(info.num_steps, 8);
  EXPECT_EQ(info.rate_limiter.inserts, 8);
  }
  ExpectVerifies();
}

// Thousands of environments, their appends split over 3 threads (every
// shared pass: reservations, the copy, the publish and the selector's
// inserts) against the same appends on the caller's thread alone: random
// steps, priorities in some calls, random ends, a tier small enough to
// evict. Both tables end up the same.
TEST_F(TableVectorTest, ThreadsShareTheWorkOfManyEnvironments) {
  const size_t envs = 1500 + rng_() % 1000;
  SCOPED_TRACE("environments " + std::to_string(envs));
  TableSpec spec;
  spec.columns = {{"obs", DType::kF32, {2}}, {"tag", DType::kI32, {}}};
  spec.block_steps = 4;
  spec.capacity_steps = static_cast<int64_t>(envs) * 4 * 6;
  std::vector<std::shared_ptr<Table>> tables;
  std::vector<std::unique_ptr<VectorWriter>> writers;
  for (int threads : {1, 3}) {
    spec.name = "shared_" + std::to_string(threads);
    tables.push_back(Create(spec));
    ASSERT_TRUE(tables.back());
    auto vw = tables.back()->NewVectorWriter(envs, {.threads = threads});
    ASSERT_TRUE(vw.ok());
    writers.push_back(std::move(vw).value());
  }
  std::vector<int> lengths(envs, 0);
  for (int t = 0; t < 40; ++t) {
    const VectorStep step = RandomVectorStep(spec, envs, rng_);
    std::vector<double> priorities;
    if (rng_() % 2 == 0) {
      for (size_t env = 0; env < envs; ++env) priorities.push_back(static_cast<double>(rng_() % 100));
    }
    for (auto& w : writers) ASSERT_OK(w->Append(step.tensors, priorities));
    for (size_t env = 0; env < envs; ++env) {
      if (++lengths[env] >= 9 || rng_() % 6 == 0) {
        for (auto& w : writers) ASSERT_OK(w->End(env, EndReason::kTerminal));
        lengths[env] = 0;
      }
    }
  }
  EXPECT_GT(tables[0]->Info().evicted_trajectories, 0);
  ASSERT_NO_FATAL_FAILURE(ExpectSame(Take(*tables[1]), Take(*tables[0])));
  ExpectVerifies();
}

// Steps too large to copy under the lock (more than 64 KiB a call), while
// another writer's trajectory takes blocks by evicting the vector writer's
// open ones: an environment evicted during the copy loses its step, and the
// items published (counted per part) are exactly those of the others.
TEST_F(TableVectorTest, ThreadsCountOnlyStepsThatSurviveTheCopy) {
  TableSpec spec;
  spec.name = "evicted_during_copy";
  spec.columns = {{"obs", DType::kU8, {96}}};
  spec.block_steps = 64;  // most calls reserve every environment in the shared pass
  const size_t envs = 1024 + rng_() % 256;  // ~100 KiB a call
  spec.capacity_steps = static_cast<int64_t>(envs + 2) * spec.block_steps;
  auto table = Create(spec);
  auto vw = table->NewVectorWriter(envs, {.threads = 3});
  ASSERT_TRUE(vw.ok());
  std::atomic<bool> stop{false};
  std::mt19937_64 rival_rng(rng_());
  std::thread rival([&] {
    auto w = table->NewWriter();
    ASSERT_TRUE(w.ok());
    // A block's worth of steps per call, now and then: each takes a block,
    // evicting the oldest trajectory (environment 0's, 1's, ...), often
    // while the vector writer copies.
    const int64_t n = spec.block_steps;
    std::vector<std::byte> rows(static_cast<size_t>(n) * 96, std::byte{7});
    const ConstTensor steps[] = {{DType::kU8, {n, 96}, rows.data(), rows.size()}};
    while (!stop.load()) {
      Status s = (*w)->AppendMany(steps);
      ASSERT_TRUE(s.ok() || s.code() == Status::Code::kFailedPrecondition) << s.ToString();
      std::this_thread::sleep_for(std::chrono::microseconds(rival_rng() % 3000));
    }
  });
  int64_t lost = 0;
  const VectorStep step = RandomVectorStep(spec, envs, rng_);
  for (int call = 0; call < 200; ++call) {
    Status s = (*vw)->Append(step.tensors);
    if (!s.ok()) {
      ++lost;
      EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("evicted"));
    }
  }
  stop = true;
  rival.join();
  EXPECT_GT(lost, 0) << "the rival writer evicted nothing";
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, info.num_steps);  // L = 1
  ExpectVerifies();
}

// Two vector writers of steps too large to copy under the lock (more than
// 64 KiB a call) on a table whose host pool is still growing (a new block
// per step): one writer's copy outside the lock runs while the other takes
// new blocks. Every row lands in its trajectory's step (the rows carry
// their writer, environment and step); under ThreadSanitizer this also
// checks that a copy outside the lock reads nothing the pool changes.
TEST_F(TableVectorTest, LargeStepsLandWhileAnotherWriterGrowsThePool) {
  constexpr size_t kRowBytes = 96;
  constexpr int kWriters = 2;
  constexpr int kSteps = 12;
  const size_t envs = 700 + rng_() % 200;  // 66-84 KiB a call
  TableSpec spec;
  spec.name = "growing_pool";
  spec.columns = {{"obs", DType::kU8, {static_cast<int64_t>(kRowBytes)}}};
  spec.block_steps = 1;
  spec.capacity_steps = static_cast<int64_t>(envs) * kWriters * kSteps;
  auto table = Create(spec);
  ASSERT_TRUE(table);
  // rows[w][s]: writer w's call s, envs rows; bytes 0-1: writer, step;
  // 2-3: environment; the rest random.
  std::vector<std::vector<std::vector<std::byte>>> rows(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (int s = 0; s < kSteps; ++s) {
      std::vector<std::byte> bytes(envs * kRowBytes);
      for (auto& b : bytes) b = static_cast<std::byte>(rng_());
      for (size_t env = 0; env < envs; ++env) {
        std::byte* row = bytes.data() + env * kRowBytes;
        row[0] = static_cast<std::byte>(w);
        row[1] = static_cast<std::byte>(s);
        row[2] = static_cast<std::byte>(env & 0xff);
        row[3] = static_cast<std::byte>(env >> 8);
      }
      rows[static_cast<size_t>(w)].push_back(std::move(bytes));
    }
  }
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      auto vw = table->NewVectorWriter(envs, {.threads = 1 + w});
      ASSERT_TRUE(vw.ok());
      for (const std::vector<std::byte>& step : rows[static_cast<size_t>(w)]) {
        const ConstTensor tensors[] = {
            {DType::kU8,
             {static_cast<int64_t>(envs), static_cast<int64_t>(kRowBytes)},
             step.data(),
             step.size()}};
        ASSERT_OK((*vw)->Append(tensors));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<TrajectoryInfo> trajectories = table->ListTrajectories({});
  ASSERT_EQ(trajectories.size(), envs * kWriters);
  for (const TrajectoryInfo& t : trajectories) {
    ASSERT_EQ(t.length, kSteps);
    TrajectorySteps read;
    ASSERT_OK(table->ReadTrajectory(t.id, 0, t.length, &read));
    const std::byte* got = read.columns[0].data();
    const size_t w = static_cast<size_t>(got[0]);
    const size_t env = static_cast<size_t>(got[2]) | static_cast<size_t>(got[3]) << 8;
    ASSERT_LT(w, static_cast<size_t>(kWriters));
    ASSERT_LT(env, envs);
    for (int s = 0; s < kSteps; ++s) {
      SCOPED_TRACE("writer " + std::to_string(w) + " environment " + std::to_string(env) +
                   " step " + std::to_string(s));
      const std::byte* want = rows[w][static_cast<size_t>(s)].data() + env * kRowBytes;
      EXPECT_EQ(std::memcmp(got + static_cast<size_t>(s) * kRowBytes, want, kRowBytes), 0);
    }
  }
  EXPECT_EQ(table->Info().blocks_used, spec.capacity_steps);
}

TEST_F(TableVectorTest, ThreadsOutsideTheirRangeAreRefused) {
  TableSpec spec;
  spec.name = "threads";
  spec.columns = Columns();
  auto table = Create(spec);
  for (int threads : {-1, kMaxWriterThreads + 1}) {
    auto vw = table->NewVectorWriter(4, {.threads = threads});
    ASSERT_FALSE(vw.ok());
    EXPECT_EQ(vw.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(vw.status().message(),
                HasSubstr("table 'threads': WriterOptions::threads " + std::to_string(threads) +
                          " is outside [0, 64] (0: automatic)"));
  }
  // More threads than environments: one per environment at most.
  auto vw = table->NewVectorWriter(2, {.threads = kMaxWriterThreads});
  ASSERT_TRUE(vw.ok());
  const VectorStep step = RandomVectorStep(spec, 2, rng_);
  ASSERT_OK((*vw)->Append(step.tensors));
  EXPECT_EQ(table->Info().num_steps, 2);
}

// While an environment waits for the rate limiter, the environments before
// it are already published: a sampler takes them, which lets the rest in.
// (Reserving all first would keep them from samplers until the timeout.)
TEST_F(TableVectorTest, EnvironmentsAdmittedBeforeAWaitAreSampleable) {
  TableSpec spec = TableSpec::Queue("queue", Columns(), 4);
  spec.capacity_steps = 1024;
  auto table = Create(spec);
  auto vw = table->NewVectorWriter(8, {.timeout = 20s});
  ASSERT_TRUE(vw.ok());
  const VectorStep step = RandomVectorStep(spec, 8, rng_);
  std::atomic<bool> done{false};
  Status appended;
  std::thread writer([&] {
    appended = (*vw)->Append(step.tensors);
    done = true;
  });
  for (int i = 0; i < 8; ++i) {
    auto batch = table->Sample(1, {.timeout = 10s});
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  }
  writer.join();
  EXPECT_TRUE(done.load());
  EXPECT_OK(appended);
  const TableInfo info = table->Info();
  EXPECT_EQ(info.rate_limiter.inserts, 8);
  EXPECT_EQ(info.items_sampled, 8);
  EXPECT_EQ(info.num_steps, 8);
}

// Vector steps (one log record per call) come back after a reopen that
// replays the log, with their priorities and the trajectories' ends.
TEST_F(TableVectorTest, LoggedVectorStepsReplay) {
  const std::string path = dir_.path() + "/logged";
  TableSpec spec;
  spec.name = "logged";
  spec.columns = Columns();
  spec.sequence_length = 2;
  spec.padding = Padding::kTail;
  spec.step_priority = StepPriority::kWindowMax;
  spec.block_steps = 4;
  spec.capacity_steps = 1024;
  Snapshot before;
  {
    auto db = DB::Open(testing_util::ManualCheckpoints(), path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto table = (*db)->CreateTable(spec);
    ASSERT_TRUE(table.ok());
    ASSERT_OK((*db)->Checkpoint());  // the log holds every step below
    auto vw = (*table)->NewVectorWriter(6);
    ASSERT_TRUE(vw.ok());
    for (int t = 0; t < 25; ++t) {
      const VectorStep step = RandomVectorStep(spec, 6, rng_);
      std::vector<double> priorities;
      if (t % 2 == 0) {
        for (int env = 0; env < 6; ++env) priorities.push_back(static_cast<double>(rng_() % 50));
      }
      ASSERT_OK((*vw)->Append(step.tensors, priorities));
      if (t % 7 == 6) ASSERT_OK((*vw)->End(static_cast<size_t>(t % 6), EndReason::kTerminal));
    }
    // Environments 0, 2 and 4 one at a time, the rest at once.
    for (size_t env = 0; env < 6; env += 2) ASSERT_OK((*vw)->End(env, EndReason::kTruncated));
    ASSERT_OK((*vw)->EndMany(std::vector<size_t>{5, 1, 3}, EndReason::kTerminal));
    vw->reset();
    before = Take(**table);
  }
  auto db = DB::Open(testing_util::ManualCheckpoints(), path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto table = (*db)->GetTable("logged");
  ASSERT_TRUE(table.ok());
  const Snapshot after = Take(**table);
  ASSERT_EQ(before.trajectories.size(), after.trajectories.size());
  for (size_t i = 0; i < before.trajectories.size(); ++i) {
    EXPECT_EQ(before.trajectories[i].id, after.trajectories[i].id);
    EXPECT_EQ(before.trajectories[i].length, after.trajectories[i].length);
    EXPECT_EQ(before.trajectories[i].ended, after.trajectories[i].ended);
    EXPECT_EQ(before.trajectories[i].end_reason, after.trajectories[i].end_reason);
    EXPECT_EQ(before.steps[i], after.steps[i]);
    EXPECT_EQ(before.step_priorities[i], after.step_priorities[i]);
  }
  EXPECT_EQ(before.keys, after.keys);
  EXPECT_EQ(before.priorities, after.priorities);
  EXPECT_EQ(before.info.num_items, after.info.num_items);
}

}  // namespace
}  // namespace replaydb
