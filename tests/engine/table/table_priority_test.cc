// Priorities through the table: step priorities, UpdatePriorities, the
// prioritized and heap selectors, importance weights, stratified draws,
// key-only samples and eviction by lowest priority.
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <thread>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::ChiSquareCritical;
using testing_util::TempDir;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class TablePriorityTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }

  TableSpec Spec(const std::string& name, SelectorKind selector, int64_t L = 1) {
    TableSpec spec;
    spec.name = name;
    spec.columns = {{"x", DType::kI32, {2}}};
    spec.capacity_steps = 1 << 16;
    spec.block_steps = 8;
    spec.sequence_length = L;
    spec.selector = selector;
    return spec;
  }
  std::shared_ptr<Table> Create(const TableSpec& spec) {
    return testing_util::CreateTable(db_.get(), spec);
  }
  // Writes one trajectory with the given step priorities (nullopt: none).
  std::vector<ItemKey> Write(Table& table, const std::vector<std::optional<double>>& priorities,
                             bool end = true) {
    auto writer = table.NewWriter();
    EXPECT_TRUE(writer.ok());
    auto step = RandomStep(table.spec(), rng_);
    for (const auto& p : priorities) EXPECT_OK((*writer)->Append(step.tensors, p));
    const uint64_t id = (*writer)->trajectory_id();
    std::vector<ItemKey> keys;
    for (size_t s = 0; s < priorities.size(); ++s) keys.push_back(MakeItemKey(id, s));
    if (end) EXPECT_OK((*writer)->End(EndReason::kTerminal));
    return keys;
  }
  // The priority of every key, read through key-only samples of a FIFO-free
  // table is not possible, so tests read priorities off drawn batches.
  std::map<ItemKey, double> DrawnPriorities(Table& table, int draws) {
    std::map<ItemKey, double> seen;
    SampleOptions opts;
    opts.gather = false;
    SampleBatch batch;
    for (int i = 0; i < draws; ++i) {
      EXPECT_OK(table.Sample(64, opts, &batch));
      for (int b = 0; b < 64; ++b) seen[batch.keys[b]] = batch.priorities[b];
    }
    return seen;
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

// Table::Mass: what several shards are drawn in proportion to.
TEST_F(TablePriorityTest, MassIsTheSumOfPrioritiesToTheExponent) {
  TableSpec spec = Spec("prio", SelectorKind::kPrioritized);
  spec.priority_exponent = std::uniform_real_distribution<double>(0.2, 2.0)(rng_);
  auto table = Create(spec);
  std::vector<std::optional<double>> priorities;
  double want = 0;
  double smallest = std::numeric_limits<double>::infinity();
  const int n = 5 + static_cast<int>(rng_() % 40);
  for (int i = 0; i < n; ++i) {
    // Wide range: the selector rescales its leaves, Mass must not show it.
    const double p = std::exp(std::uniform_real_distribution<double>(-300, 300)(rng_));
    priorities.push_back(p);
    want += std::pow(p, spec.priority_exponent);
    smallest = std::min(smallest, p);
  }
  std::vector<ItemKey> keys = Write(*table, priorities);
  auto mass = table->Mass();
  ASSERT_TRUE(mass.ok()) << mass.status().ToString();
  EXPECT_EQ(mass->items, n);
  EXPECT_NEAR(mass->total / want, 1.0, 1e-9);
  EXPECT_EQ(mass->smallest_priority, smallest);
  // Every priority 0: no mass (the host then draws uniformly).
  ASSERT_OK(table->UpdatePriorities(keys, std::vector<double>(keys.size(), 0.0)));
  mass = table->Mass();
  ASSERT_TRUE(mass.ok());
  EXPECT_EQ(mass->total, 0.0);
  EXPECT_EQ(mass->smallest_priority, 0.0);

  auto uniform = Create(Spec("uni", SelectorKind::kUniform));
  Write(*uniform, std::vector<std::optional<double>>(7, std::nullopt));
  mass = uniform->Mass();
  ASSERT_TRUE(mass.ok());
  EXPECT_EQ(mass->total, 7.0);
  EXPECT_EQ(mass->items, 7);

  for (SelectorKind kind : {SelectorKind::kFifo, SelectorKind::kLifo}) {
    auto certain = Create(Spec(std::string(SelectorKindName(kind)), kind));
    mass = certain->Mass();
    EXPECT_EQ(mass.status().code(), Status::Code::kNotSupported);
    EXPECT_THAT(mass.status().message(),
                HasSubstr("a " + std::string(SelectorKindName(kind)) +
                          " table has no sampling mass (its draws are certain)"));
  }
}

TEST_F(TablePriorityTest, PrioritizedSamplingFollowsPriorities) {
  TableSpec spec = Spec("prio", SelectorKind::kPrioritized);
  spec.priority_exponent = 0.5;
  auto table = Create(spec);
  std::vector<std::optional<double>> priorities;
  std::vector<double> mass;
  for (int i = 0; i < 40; ++i) {
    const double p = std::exp(std::uniform_real_distribution<double>(-4, 4)(rng_));
    priorities.push_back(p);
    mass.push_back(std::sqrt(p));
  }
  priorities.push_back(0.0);  // never drawn
  mass.push_back(0.0);
  const std::vector<ItemKey> keys = Write(*table, priorities);
  double total = 0;
  for (double m : mass) total += m;

  std::map<ItemKey, int64_t> counts;
  SampleBatch batch;
  const int64_t draws = 400'000;
  for (int64_t n = 0; n < draws; n += 1000) {
    ASSERT_OK(table->Sample(1000, {.gather = false}, &batch));
    for (int b = 0; b < 1000; ++b) {
      ++counts[batch.keys[b]];
      const size_t i = ItemKeyStart(batch.keys[b]);
      ASSERT_NEAR(batch.probabilities[b], mass[i] / total, 1e-12);
      ASSERT_EQ(batch.priorities[b], *priorities[i]);
    }
  }
  EXPECT_EQ(counts.count(keys.back()), 0u) << "a zero-priority item was drawn";
  double chi2 = 0;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    const double expected = draws * mass[i] / total;
    const double got = static_cast<double>(counts[keys[i]]);
    chi2 += (got - expected) * (got - expected) / expected;
  }
  EXPECT_LT(chi2, ChiSquareCritical(keys.size() - 2));
}

TEST_F(TablePriorityTest, StepPrioritiesBecomeItemPriorities) {
  const std::vector<std::optional<double>> p = {1.0, 4.0, 2.0, 8.0, 0.5};
  for (StepPriority mode :
       {StepPriority::kItem, StepPriority::kWindowMax, StepPriority::kWindowMean}) {
    SCOPED_TRACE(std::string(StepPriorityName(mode)));
    TableSpec spec = Spec(std::string("steps_") + std::string(StepPriorityName(mode)),
                          SelectorKind::kPrioritized, /*L=*/3);
    spec.padding = Padding::kTail;
    spec.step_priority = mode;
    auto table = Create(spec);
    const auto keys = Write(*table, p);
    const auto seen = DrawnPriorities(*table, 50);
    ASSERT_EQ(seen.size(), 5u);
    for (int start = 0; start < 5; ++start) {
      const int end = std::min(5, start + 3);
      double expected = *p[start];
      if (mode == StepPriority::kWindowMax) {
        for (int i = start; i < end; ++i) expected = std::max(expected, *p[i]);
      } else if (mode == StepPriority::kWindowMean) {
        expected = 0;
        for (int i = start; i < end; ++i) expected += *p[i];
        expected /= end - start;
      }
      EXPECT_DOUBLE_EQ(seen.at(keys[start]), expected) << "start " << start;
    }
  }
}

TEST_F(TablePriorityTest, StepsWithoutPriorityGetTheMaximumSeen) {
  auto table = Create(Spec("default", SelectorKind::kPrioritized));
  EXPECT_EQ(table->Info().max_priority_seen, 1.0);
  const auto first = Write(*table, {std::nullopt, 0.25});
  const auto second = Write(*table, {7.0, std::nullopt});
  const auto seen = DrawnPriorities(*table, 100);
  EXPECT_EQ(seen.at(first[0]), 1.0);
  EXPECT_EQ(seen.at(first[1]), 0.25);
  EXPECT_EQ(seen.at(second[0]), 7.0);
  EXPECT_EQ(seen.at(second[1]), 7.0);
  EXPECT_EQ(table->Info().max_priority_seen, 7.0);
  // Updates raise it too.
  ASSERT_OK(table->UpdatePriorities(std::vector<ItemKey>{first[0]}, std::vector<double>{9.0}));
  EXPECT_EQ(table->Info().max_priority_seen, 9.0);
}

TEST_F(TablePriorityTest, UpdatePrioritiesAppliesSkipsAndValidates) {
  TableSpec spec = Spec("update", SelectorKind::kPrioritized);
  spec.max_times_sampled = 0;
  auto table = Create(spec);
  const auto keys = Write(*table, {1.0, 1.0, 1.0, 1.0});
  PriorityUpdateResult result;
  const std::vector<ItemKey> update_keys = {keys[0], keys[1], keys[1], MakeItemKey(999, 0),
                                            MakeItemKey(ItemKeyTrajectory(keys[0]), 17)};
  ASSERT_OK(table->UpdatePriorities(update_keys, std::vector<double>{0.0, 5.0, 3.0, 2.0, 2.0},
                                    &result));
  EXPECT_EQ(result.updated, 3);
  EXPECT_EQ(result.skipped, 2);
  auto seen = DrawnPriorities(*table, 100);
  EXPECT_EQ(seen.count(keys[0]), 0u) << "priority 0 drawn";
  EXPECT_EQ(seen.at(keys[1]), 3.0);  // the last of repeated keys wins
  EXPECT_EQ(table->Info().priority_updates, 3);
  EXPECT_EQ(table->Info().priority_updates_skipped, 2);

  // Bad input changes nothing.
  Status bad = table->UpdatePriorities(std::vector<ItemKey>{keys[2], keys[3]},
                                       std::vector<double>{4.0, -1.0});
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("priority -1.000000 for key " + std::to_string(keys[3]) +
                                       " (index 1) is invalid"));
  bad = table->UpdatePriorities(std::vector<ItemKey>{keys[2]}, std::vector<double>{NAN});
  EXPECT_THAT(bad.message(), HasSubstr("finite and >= 0"));
  bad = table->UpdatePriorities(std::vector<ItemKey>{keys[2]}, std::vector<double>{});
  EXPECT_THAT(bad.message(), HasSubstr("got 1 keys and 0 priorities"));
  seen = DrawnPriorities(*table, 100);
  EXPECT_EQ(seen.at(keys[2]), 1.0);
}

TEST_F(TablePriorityTest, UpdatesOfEvictedKeysNeverReachNewItems) {
  TableSpec spec = Spec("evicted_keys", SelectorKind::kPrioritized);
  spec.capacity_steps = 8;
  spec.block_steps = 4;
  auto table = Create(spec);
  const auto old_keys = Write(*table, {1.0, 1.0, 1.0, 1.0});
  Write(*table, {1.0, 1.0, 1.0, 1.0});
  const auto newest = Write(*table, {1.0, 1.0, 1.0, 1.0});  // evicts the first
  ASSERT_EQ(table->Info().evicted_trajectories, 1);
  PriorityUpdateResult result;
  ASSERT_OK(table->UpdatePriorities(old_keys, std::vector<double>(4, 100.0), &result));
  EXPECT_EQ(result.skipped, 4);
  EXPECT_EQ(result.updated, 0);
  for (const auto& [key, p] : DrawnPriorities(*table, 50)) EXPECT_EQ(p, 1.0) << key;
}

// Every live priority 0: draws are uniform (as Reverb's), not a wait that
// only a priority update ends.
TEST_F(TablePriorityTest, AllZeroPrioritiesDrawUniformly) {
  auto table = Create(Spec("zero", SelectorKind::kPrioritized));
  const auto keys = Write(*table, {0.0, 0.0, 0.0});
  SampleOptions opts;
  opts.timeout = 5s;  // it waited forever before
  opts.importance_beta = 0.5;
  std::map<ItemKey, int64_t> counts;
  for (int i = 0; i < 30; ++i) {
    auto b = table->Sample(100, opts);
    ASSERT_OK(b.status());
    for (int64_t j = 0; j < 100; ++j) {
      ++counts[b->keys[j]];
      EXPECT_EQ(b->probabilities[j], 1.0 / 3);
      EXPECT_EQ(b->weights[j], 1.0);
    }
  }
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_LT(testing_util::UniformChiSquare(counts, 1000.0), ChiSquareCritical(2));
  // A positive priority takes every draw.
  ASSERT_OK(table->UpdatePriorities(std::vector<ItemKey>{keys[1]}, std::vector<double>{2.0}));
  auto b = table->Sample(8);
  ASSERT_OK(b.status());
  for (ItemKey k : b->keys) EXPECT_EQ(k, keys[1]);
}

TEST_F(TablePriorityTest, BatchesDrawZeroPriorityItemsOnceThePositiveOnesAreGone) {
  // max_times_sampled = 1: the item of priority 1 is drawn first and leaves;
  // the second draw then finds only priority 0 and draws it (uniformly).
  TableSpec spec = Spec("midway", SelectorKind::kPrioritized);
  spec.max_times_sampled = 1;
  auto table = Create(spec);
  const auto keys = Write(*table, {1.0, 0.0});
  auto both = table->Sample(2, {.timeout = 5s});
  ASSERT_OK(both.status());
  EXPECT_EQ(both->keys[0], keys[0]);
  EXPECT_EQ(both->probabilities[0], 1.0);
  EXPECT_EQ(both->keys[1], keys[1]);
  EXPECT_EQ(both->probabilities[1], 1.0);
  EXPECT_EQ(table->Info().num_items, 0);
  EXPECT_EQ(table->Sample(1, {.timeout = 20ms}).status().code(), Status::Code::kDeadlineExceeded);
}

TEST_F(TablePriorityTest, ImportanceWeights) {
  auto table = Create(Spec("weights", SelectorKind::kPrioritized));
  const auto keys = Write(*table, {1.0, 2.0, 4.0, 8.0, 16.0});
  SampleBatch batch;
  SampleOptions opts;
  opts.importance_beta = 0.7;
  // The default: PER's, by the buffer-wide largest weight, that of the item
  // of priority 1: w = (P_min / P)^beta = (1 / priority)^0.7, whatever the
  // batch drew.
  EXPECT_EQ(opts.weight_normalization, WeightNormalization::kBuffer);
  ASSERT_OK(table->Sample(4, opts, &batch));
  ASSERT_EQ(batch.weights.size(), 4u);
  for (int b = 0; b < 4; ++b) {
    EXPECT_NEAR(batch.weights[b], std::pow(1.0 / batch.priorities[b], 0.7), 1e-12);
  }
  // By the batch's largest weight.
  opts.weight_normalization = WeightNormalization::kBatch;
  ASSERT_OK(table->Sample(256, opts, &batch));
  ASSERT_EQ(batch.weights.size(), 256u);
  double max_raw = 0;
  std::vector<double> raw;
  for (double p : batch.probabilities) {
    raw.push_back(std::pow(5 * p, -0.7));
    max_raw = std::max(max_raw, raw.back());
  }
  for (int b = 0; b < 256; ++b) EXPECT_NEAR(batch.weights[b], raw[b] / max_raw, 1e-12);
  EXPECT_EQ(*std::max_element(batch.weights.begin(), batch.weights.end()), 1.0);
  // A batch that drew only the heaviest item: 1 by the batch, (1/16)^0.7
  // by the buffer.
  ASSERT_OK(table->UpdatePriorities(std::vector<ItemKey>{keys[4]},
                                    std::vector<double>{1e12}));
  ASSERT_OK(table->Sample(2, opts, &batch));
  EXPECT_EQ(batch.weights[0], 1.0);
  opts.weight_normalization = WeightNormalization::kBuffer;
  ASSERT_OK(table->Sample(2, opts, &batch));
  ASSERT_EQ(batch.priorities[0], 1e12);
  EXPECT_NEAR(batch.weights[0], std::pow(1e-12, 0.7), 1e-20);
  // Uniform tables: every weight is 1 either way.
  auto uniform = Create(Spec("uniform_weights", SelectorKind::kUniform));
  Write(*uniform, {1.0, 5.0, 9.0});
  for (WeightNormalization w : {WeightNormalization::kBuffer, WeightNormalization::kBatch}) {
    opts.weight_normalization = w;
    ASSERT_OK(uniform->Sample(16, opts, &batch));
    for (double x : batch.weights) EXPECT_EQ(x, 1.0);
  }
  opts.importance_beta = -1;
  ASSERT_OK(table->Sample(4, opts, &batch));
  EXPECT_TRUE(batch.weights.empty());
  opts.importance_beta = NAN;
  EXPECT_THAT(table->Sample(4, opts, &batch).message(), HasSubstr("importance_beta is nan"));
  opts.importance_beta = 0.5;
  opts.weight_normalization = static_cast<WeightNormalization>(7);
  const Status bad = table->Sample(4, opts, &batch);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("table 'weights': weight_normalization is 7"));
}

TEST_F(TablePriorityTest, StratifiedDrawsCoverTheMassInOrder) {
  auto table = Create(Spec("strata", SelectorKind::kPrioritized));
  std::vector<std::optional<double>> p(64, 1.0);
  const auto keys = Write(*table, p);
  SampleOptions opts;
  opts.stratified = true;
  opts.gather = false;
  // 64 equal items, 64 strata: each stratum holds exactly one item.
  for (int round = 0; round < 10; ++round) {
    auto batch = table->Sample(64, opts);
    ASSERT_TRUE(batch.ok());
    for (int b = 0; b < 64; ++b) EXPECT_EQ(batch->keys[b], keys[b]);
  }
}

TEST_F(TablePriorityTest, KeyOnlySamplesLeaveColumnsEmpty) {
  auto table = Create(Spec("keys_only", SelectorKind::kUniform));
  Write(*table, {1.0, 1.0});
  auto batch = table->Sample(5, {.gather = false});
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->columns.empty());
  EXPECT_EQ(batch->keys.size(), 5u);
  EXPECT_EQ(batch->mask.size(), 5u);
  EXPECT_EQ(table->Info().items_sampled, 5);
}

TEST_F(TablePriorityTest, HeapSelectorsFollowPriorityAndInsertionOrder) {
  for (SelectorKind kind : {SelectorKind::kMinHeap, SelectorKind::kMaxHeap}) {
    TableSpec spec = Spec(std::string(SelectorKindName(kind)), kind);
    spec.max_times_sampled = 1;
    auto table = Create(spec);
    const auto keys = Write(*table, {3.0, 1.0, 3.0, 2.0, 1.0});
    ASSERT_OK(table->UpdatePriorities(std::vector<ItemKey>{keys[3]}, std::vector<double>{5.0}));
    // Priorities now 3, 1, 3, 5, 1.
    const std::vector<int> order = kind == SelectorKind::kMinHeap
                                       ? std::vector<int>{1, 4, 0, 2, 3}
                                       : std::vector<int>{3, 0, 2, 1, 4};
    for (int i : order) {
      auto b = table->Sample(1);
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(b->keys[0], keys[i]);
      EXPECT_EQ(b->probabilities[0], 1.0);
    }
  }
}

TEST_F(TablePriorityTest, EvictionByLowestPriority) {
  TableSpec spec = Spec("evict_low", SelectorKind::kPrioritized);
  spec.capacity_steps = 12;
  spec.block_steps = 4;
  spec.eviction = EvictionPolicy::kLowestPriority;
  auto table = Create(spec);
  const auto a = Write(*table, {5.0, 1.0, 1.0, 1.0});  // best 5
  const auto b = Write(*table, {2.0, 2.0, 2.0, 2.0});  // best 2
  const auto c = Write(*table, {3.0, 9.0, 1.0, 1.0});  // best 9
  // Raise b above a: a becomes the lowest.
  ASSERT_OK(table->UpdatePriorities(std::vector<ItemKey>{b[2]}, std::vector<double>{6.0}));
  Write(*table, {1.0, 1.0, 1.0, 1.0});  // needs a block: evicts a
  auto seen = DrawnPriorities(*table, 200);
  for (ItemKey k : a) EXPECT_EQ(seen.count(k), 0u);
  EXPECT_EQ(seen.count(b[0]), 1u);
  EXPECT_EQ(seen.count(c[0]), 1u);
  // Now the newest (best 1) is the lowest: the next eviction takes it.
  const auto e = Write(*table, {4.0, 4.0, 4.0, 4.0});
  EXPECT_EQ(table->Info().evicted_trajectories, 2);
  seen = DrawnPriorities(*table, 200);
  EXPECT_EQ(seen.count(b[0]), 1u);
  EXPECT_EQ(seen.count(c[0]), 1u);
  EXPECT_EQ(seen.count(e[0]), 1u);
  EXPECT_EQ(table->Info().num_trajectories, 3);
}

TEST_F(TablePriorityTest, BadStepPriorities) {
  auto table = Create(Spec("bad_steps", SelectorKind::kPrioritized));
  auto writer = table->NewWriter();
  auto step = RandomStep(table->spec(), rng_);
  Status s = (*writer)->Append(step.tensors, -2.0);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 'bad_steps': step priority -2.000000 is invalid"));
  s = (*writer)->Append(step.tensors, INFINITY);
  EXPECT_THAT(s.message(), HasSubstr("priority inf is invalid"));
  EXPECT_EQ(table->Info().steps_inserted, 0);
  // AppendMany: count and values.
  std::vector<int32_t> data(6);
  const std::vector<ConstTensor> many = {{DType::kI32, {3, 2}, data.data(), 24}};
  s = (*writer)->AppendMany(many, std::vector<double>{1.0, 2.0});
  EXPECT_THAT(s.message(), HasSubstr("AppendMany has 3 steps but 2 priorities"));
  s = (*writer)->AppendMany(many, std::vector<double>{1.0, NAN, 2.0});
  EXPECT_THAT(s.message(), HasSubstr("AppendMany step 1 priority nan is invalid"));
  EXPECT_EQ(table->Info().steps_inserted, 0);
  ASSERT_OK((*writer)->AppendMany(many, std::vector<double>{1.0, 2.0, 3.0}));
  auto vw = table->NewVectorWriter(2);
  const std::vector<ConstTensor> two = {{DType::kI32, {2, 2}, data.data(), 16}};
  s = (*vw)->Append(two, std::vector<double>{1.0});
  EXPECT_THAT(s.message(), HasSubstr("vector step has 2 steps but 1 priorities"));
  ASSERT_OK((*vw)->Append(two, std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(table->Info().steps_inserted, 5);
}

TEST_F(TablePriorityTest, SpecValidationOfPriorityOptions) {
  TableSpec spec = Spec("v", SelectorKind::kPrioritized);
  spec.priority_exponent = -0.5;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("priority_exponent is -0.500000"));
  spec = Spec("v", SelectorKind::kFifo);
  spec.priority_device = 0;
  EXPECT_THAT(spec.Validate().message(),
              HasSubstr("priority_device 0 needs the prioritized or uniform selector, not fifo"));
  spec = Spec("v", SelectorKind::kUniform);
  spec.priority_device = 0;
  EXPECT_OK(spec.Validate());
  spec = Spec("v", SelectorKind::kPrioritized);
  spec.priority_device = 0;
  spec.max_times_sampled = 2;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("needs max_times_sampled = 0"));
  spec.priority_device = -2;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("priority_device is -2"));
  spec = Spec("v", SelectorKind::kPrioritized);
  spec.step_priority = static_cast<StepPriority>(7);
  EXPECT_THAT(spec.Validate().message(), HasSubstr("unknown step_priority 7"));
  spec = Spec("v", SelectorKind::kPrioritized);
  spec.logging = static_cast<TableLogging>(5);
  EXPECT_THAT(spec.Validate().message(), HasSubstr("table 'v': unknown logging 5"));
}

}  // namespace
}  // namespace replaydb
