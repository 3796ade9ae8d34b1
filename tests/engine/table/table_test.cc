// Table behaviour through the public API: windows, padding, items, selectors,
// max_times_sampled, eviction, writers' errors.
#include <map>
#include <thread>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::StepData;
using testing_util::ChiSquareCritical;
using testing_util::TempDir;
using ::testing::HasSubstr;

TableSpec MixedSpec(const std::string& name, int64_t L, Padding padding, int64_t block_steps) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kF32, {3, 2}},
                  {"action", DType::kI64, {}},
                  {"done", DType::kBool, {}},
                  {"frame", DType::kU8, {5}},
                  {"logits", DType::kBF16, {3}}};
  spec.capacity_steps = 4096;
  spec.block_steps = block_steps;
  spec.sequence_length = L;
  spec.padding = padding;
  return spec;
}

// Everything written, by trajectory id: steps[t] = per-column bytes.
using Written = std::map<uint64_t, std::vector<StepData>>;

// Writes `lengths.size()` trajectories of random steps; returns what it wrote.
Written WriteTrajectories(Table& table, const TableSpec& spec, const std::vector<int>& lengths,
                          std::mt19937_64& rng) {
  Written written;
  auto writer = table.NewWriter();
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (int len : lengths) {
    std::vector<StepData> steps;
    for (int i = 0; i < len; ++i) {
      steps.push_back(RandomStep(spec, rng));
      EXPECT_OK((*writer)->Append(steps.back().tensors));
    }
    const uint64_t id = (*writer)->trajectory_id();
    EXPECT_OK((*writer)->End(rng() % 2 ? EndReason::kTerminal : EndReason::kTruncated));
    if (len > 0) written[id] = std::move(steps);
  }
  return written;
}

// Checks every window of `batch` against what was written.
void CheckBatch(const SampleBatch& batch, const TableSpec& spec, const Written& written) {
  const int64_t B = batch.batch_size;
  const int64_t L = batch.sequence_length;
  ASSERT_EQ(batch.columns.size(), spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    EXPECT_EQ(batch.columns[c].dtype(), spec.columns[c].dtype);
    EXPECT_EQ(batch.columns[c].shape(), spec.columns[c].shape.Prepend(L).Prepend(B));
  }
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t id = ItemKeyTrajectory(batch.keys[b]);
    const int64_t start = ItemKeyStart(batch.keys[b]);
    auto it = written.find(id);
    ASSERT_NE(it, written.end()) << "sampled unknown trajectory " << id;
    const auto& steps = it->second;
    ASSERT_LT(start, static_cast<int64_t>(steps.size()));
    for (int64_t l = 0; l < L; ++l) {
      const bool real = start + l < static_cast<int64_t>(steps.size());
      ASSERT_EQ(batch.mask[b * L + l], real ? 1 : 0) << "item " << b << " step " << l;
      for (size_t c = 0; c < spec.columns.size(); ++c) {
        const size_t cb = spec.columns[c].step_bytes();
        const std::byte* got = batch.columns[c].data() + (b * L + l) * cb;
        if (real) {
          ASSERT_EQ(std::memcmp(got, steps[start + l].columns[c].data(), cb), 0)
              << "trajectory " << id << " step " << start + l << " column " << c;
        } else {
          for (size_t i = 0; i < cb; ++i) ASSERT_EQ(got[i], std::byte{0}) << "padding not zero";
        }
      }
    }
  }
}

class TableTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }
  std::shared_ptr<Table> Create(const TableSpec& spec) {
    return testing_util::CreateTable(db_.get(), spec);
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableTest, SampledWindowsAreByteIdenticalAndNeverCrossTrajectories) {
  for (int64_t L : {1, 3, 7}) {
    for (Padding padding : {Padding::kNone, Padding::kTail}) {
      SCOPED_TRACE("L=" + std::to_string(L) + " padding=" + std::string(PaddingName(padding)));
      const TableSpec spec = MixedSpec("t" + std::to_string(L) + std::string(PaddingName(padding)),
                                       L, padding, /*block_steps=*/4);
      auto table = Create(spec);
      std::vector<int> lengths;
      for (int i = 0; i < 12; ++i) lengths.push_back(1 + static_cast<int>(rng_() % 20));
      lengths.push_back(20);  // at least one trajectory longer than L
      const Written written = WriteTrajectories(*table, spec, lengths, rng_);

      int64_t expected_items = 0;
      for (int len : lengths) {
        expected_items += padding == Padding::kTail ? len : std::max<int64_t>(0, len - L + 1);
      }
      const TableInfo info = table->Info();
      EXPECT_EQ(info.num_items, expected_items);
      EXPECT_EQ(info.num_trajectories, static_cast<int64_t>(lengths.size()));
      EXPECT_EQ(info.num_open_trajectories, 0);

      SampleBatch batch;
      for (int round = 0; round < 20; ++round) {
        ASSERT_OK(table->Sample(32, {}, &batch));
        CheckBatch(batch, spec, written);
      }
    }
  }
}

// Seed: the same contents, the same seed and the same calls give the same
// draws, for every host selector; another seed gives others.
TEST_F(TableTest, SeedMakesDrawsRepeat) {
  for (SelectorKind selector : {SelectorKind::kUniform, SelectorKind::kPrioritized}) {
    TableSpec spec = MixedSpec(std::string("seed_") + std::string(SelectorKindName(selector)), 2,
                               Padding::kNone, /*block_steps=*/8);
    spec.selector = selector;
    auto table = Create(spec);
    WriteTrajectories(*table, spec, {30, 17, 45, 9}, rng_);
    const uint64_t seed = rng_();
    const auto draws = [&] {
      std::vector<ItemKey> keys;
      for (int i = 0; i < 4; ++i) {
        auto batch = table->Sample(32);
        EXPECT_OK(batch.status());
        if (batch.ok()) keys.insert(keys.end(), batch->keys.begin(), batch->keys.end());
      }
      return keys;
    };
    ASSERT_OK(table->Seed(seed));
    const std::vector<ItemKey> first = draws();
    ASSERT_OK(table->Seed(seed));
    EXPECT_EQ(draws(), first);
    ASSERT_OK(table->Seed(seed + 1));
    EXPECT_NE(draws(), first);
  }
}

TEST_F(TableTest, TailPaddingCreatesPaddedItemsAtEnd) {
  TableSpec spec = MixedSpec("tail", 3, Padding::kTail, 2);
  spec.selector = SelectorKind::kFifo;
  auto table = Create(spec);
  const Written written = WriteTrajectories(*table, spec, {5}, rng_);
  // Starts 0..4; windows of starts 3 and 4 are padded.
  EXPECT_EQ(table->Info().num_items, 5);
  auto w = table->NewWriter();
  ASSERT_TRUE(w.ok());
  auto batch = table->Sample(1);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(ItemKeyStart(batch->keys[0]), 0);  // FIFO: the oldest item
  CheckBatch(*batch, spec, written);

  // A trajectory shorter than L still gets items with tail padding.
  TableSpec spec2 = MixedSpec("tail_short", 4, Padding::kTail, 2);
  auto t2 = Create(spec2);
  const Written w2 = WriteTrajectories(*t2, spec2, {2}, rng_);
  EXPECT_EQ(t2->Info().num_items, 2);
  for (int i = 0; i < 10; ++i) {
    auto b = t2->Sample(4);
    ASSERT_TRUE(b.ok());
    CheckBatch(*b, spec2, w2);
  }
}

TEST_F(TableTest, NoPaddingSkipsShortTrajectories) {
  const TableSpec spec = MixedSpec("nopad", 4, Padding::kNone, 8);
  auto table = Create(spec);
  WriteTrajectories(*table, spec, {3, 2, 1}, rng_);
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, 0);
  EXPECT_EQ(info.num_steps, 6);
  auto batch = table->Sample(1, {.timeout = std::chrono::milliseconds(20)});
  EXPECT_EQ(batch.status().code(), Status::Code::kDeadlineExceeded);
}

TEST_F(TableTest, ItemsBecomeSampleableBeforeTheTrajectoryEnds) {
  const TableSpec spec = MixedSpec("online", 3, Padding::kNone, 4);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  Written written;
  std::vector<StepData>& steps = written[0];
  for (int i = 0; i < 2; ++i) {
    steps.push_back(RandomStep(spec, rng_));
    ASSERT_OK((*writer)->Append(steps.back().tensors));
  }
  EXPECT_EQ(table->Info().num_items, 0);
  steps.push_back(RandomStep(spec, rng_));
  ASSERT_OK((*writer)->Append(steps.back().tensors));
  EXPECT_EQ(table->Info().num_items, 1);
  EXPECT_EQ(table->Info().num_open_trajectories, 1);
  written[(*writer)->trajectory_id()] = std::move(written[0]);
  written.erase(0);
  auto batch = table->Sample(8);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  for (ItemKey k : batch->keys) EXPECT_EQ(ItemKeyStart(k), 0);
  CheckBatch(*batch, spec, written);
}

TEST_F(TableTest, UniformSamplingPassesChiSquare) {
  TableSpec spec = MixedSpec("uniform", 2, Padding::kNone, 4);
  auto table = Create(spec);
  std::vector<int> lengths;
  for (int i = 0; i < 10; ++i) lengths.push_back(2 + static_cast<int>(rng_() % 9));
  WriteTrajectories(*table, spec, lengths, rng_);
  const int64_t items = table->Info().num_items;
  ASSERT_GT(items, 10);
  std::map<ItemKey, int64_t> counts;
  const int64_t draws = 2000 * items;
  SampleBatch batch;
  for (int64_t n = 0; n < draws; n += 500) {
    ASSERT_OK(table->Sample(500, {}, &batch));
    for (int64_t b = 0; b < 500; ++b) {
      ++counts[batch.keys[b]];
      EXPECT_DOUBLE_EQ(batch.probabilities[b], 1.0 / items);
    }
  }
  ASSERT_EQ(static_cast<int64_t>(counts.size()), items);
  const double expected = static_cast<double>(draws) / items;
  const double chi2 = testing_util::UniformChiSquare(counts, expected);
  EXPECT_LT(chi2, ChiSquareCritical(items - 1)) << "items=" << items;
}

TEST_F(TableTest, FifoAndLifoOrderWithMaxTimesSampled) {
  for (SelectorKind kind : {SelectorKind::kFifo, SelectorKind::kLifo}) {
    TableSpec spec = MixedSpec(std::string(SelectorKindName(kind)), 1, Padding::kNone, 4);
    spec.selector = kind;
    spec.max_times_sampled = 1;
    auto table = Create(spec);
    const Written written = WriteTrajectories(*table, spec, {3, 4}, rng_);
    std::vector<ItemKey> order;
    for (const auto& [id, steps] : written) {
      for (size_t s = 0; s < steps.size(); ++s) order.push_back(MakeItemKey(id, s));
    }
    if (kind == SelectorKind::kLifo) std::reverse(order.begin(), order.end());
    for (ItemKey expected : order) {
      auto batch = table->Sample(1);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      EXPECT_EQ(batch->keys[0], expected);
      EXPECT_EQ(batch->probabilities[0], 1.0);
      EXPECT_EQ(batch->times_sampled[0], 1u);
    }
    const TableInfo info = table->Info();
    EXPECT_EQ(info.num_items, 0);
    EXPECT_EQ(info.items_removed, 7);
    // Fully consumed ended trajectories leave the hot tier.
    EXPECT_EQ(info.num_trajectories, 0);
    EXPECT_EQ(info.blocks_used, 0);
    auto empty = table->Sample(1, {.timeout = std::chrono::milliseconds(10)});
    EXPECT_EQ(empty.status().code(), Status::Code::kDeadlineExceeded);
  }
}

TEST_F(TableTest, MaxTimesSampledRemovesAfterThatManyDraws) {
  TableSpec spec = MixedSpec("mts", 2, Padding::kNone, 4);
  spec.max_times_sampled = 3;
  auto table = Create(spec);
  WriteTrajectories(*table, spec, {6, 5}, rng_);  // 5 + 4 items
  std::map<ItemKey, uint32_t> seen;
  SampleBatch batch;
  // 27 draws in total are allowed; take them in batches of 9.
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(table->Sample(9, {}, &batch));
    for (int b = 0; b < 9; ++b) {
      const uint32_t n = ++seen[batch.keys[b]];
      EXPECT_EQ(batch.times_sampled[b], n);
      EXPECT_LE(n, 3u);
    }
  }
  EXPECT_EQ(seen.size(), 9u);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 3u);
  EXPECT_EQ(table->Info().num_items, 0);
  EXPECT_EQ(table->Info().items_removed, 9);
  auto more = table->Sample(1, {.timeout = std::chrono::milliseconds(10)});
  EXPECT_EQ(more.status().code(), Status::Code::kDeadlineExceeded);
}

TEST_F(TableTest, SampleWaitsForEnoughDrawsLeft) {
  TableSpec spec = MixedSpec("budget", 1, Padding::kNone, 4);
  spec.max_times_sampled = 1;
  auto table = Create(spec);
  WriteTrajectories(*table, spec, {3}, rng_);
  // Three items, each sampled once: a batch of 4 cannot be served.
  auto batch = table->Sample(4, {.timeout = std::chrono::milliseconds(20)});
  EXPECT_EQ(batch.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(table->Info().num_items, 3);  // nothing consumed by the failed call
  ASSERT_TRUE(table->Sample(3).ok());
}

TEST_F(TableTest, AppendValidationErrorsNameTableColumnAndValues) {
  const TableSpec spec = MixedSpec("val", 1, Padding::kNone, 4);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  StepData step = RandomStep(spec, rng_);
  ASSERT_OK((*writer)->Append(step.tensors));
  const TableInfo before = table->Info();

  auto expect_error = [&](std::vector<ConstTensor> tensors, const std::string& fragment) {
    Status s = (*writer)->Append(tensors);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(fragment));
    EXPECT_THAT(s.message(), HasSubstr("table 'val'"));
  };
  {
    auto t = step.tensors;
    t.pop_back();
    expect_error(t, "step has 4 tensors; the table has 5 columns (obs, action, done, frame, logits)");
  }
  {
    auto t = step.tensors;
    t[0].dtype = DType::kF64;
    expect_error(t, "column 'obs' expects dtype f32, got f64");
  }
  {
    auto t = step.tensors;
    t[0].shape = Shape{2, 3};
    expect_error(t, "column 'obs' expects shape [3, 2], got [2, 3]");
  }
  {
    auto t = step.tensors;
    t[3].size_bytes = 4;
    expect_error(t, "column 'frame' has size_bytes 4 but dtype u8 and shape [5] need 5");
  }
  {
    auto t = step.tensors;
    t[1].data = nullptr;
    expect_error(t, "column 'action' has a null data pointer");
  }
  // AppendMany with disagreeing leading dims.
  {
    StepData s2 = RandomStep(spec, rng_);
    std::vector<ConstTensor> many = s2.tensors;
    for (auto& t : many) t.shape = t.shape.Prepend(1);
    many[2].shape = Shape{2};
    Status s = (*writer)->AppendMany(many);
    EXPECT_THAT(s.message(), HasSubstr("column 'done' expects shape [1], got [2]"));
  }
  const TableInfo after = table->Info();
  EXPECT_EQ(after.num_steps, before.num_steps);
  EXPECT_EQ(after.num_items, before.num_items);
  EXPECT_EQ(after.steps_inserted, before.steps_inserted);
}

TEST_F(TableTest, AppendManyEqualsAppends) {
  const TableSpec spec = MixedSpec("many", 4, Padding::kTail, 3);
  auto table = Create(spec);
  const int n = 11;
  std::vector<StepData> steps;
  for (int i = 0; i < n; ++i) steps.push_back(RandomStep(spec, rng_));
  std::vector<std::vector<std::byte>> cols(spec.columns.size());
  std::vector<ConstTensor> tensors;
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    for (const auto& s : steps) cols[c].insert(cols[c].end(), s.columns[c].begin(), s.columns[c].end());
    tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(n), cols[c].data(),
                       cols[c].size()});
  }
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  ASSERT_OK((*writer)->AppendMany(tensors));
  EXPECT_EQ((*writer)->num_steps(), n);
  Written written;
  written[(*writer)->trajectory_id()] = std::move(steps);
  ASSERT_OK((*writer)->End(EndReason::kTerminal));
  EXPECT_EQ(table->Info().num_items, n);
  for (int i = 0; i < 10; ++i) {
    auto batch = table->Sample(16);
    ASSERT_TRUE(batch.ok());
    CheckBatch(*batch, spec, written);
  }
}

TEST_F(TableTest, VectorWriterKeepsEnvironmentsApart) {
  const TableSpec spec = MixedSpec("vec", 3, Padding::kNone, 4);
  auto table = Create(spec);
  const size_t N = 5;
  auto vw = table->NewVectorWriter(N);
  ASSERT_TRUE(vw.ok());
  Written written;
  std::vector<std::vector<StepData>> current(N);
  for (int t = 0; t < 40; ++t) {
    std::vector<std::vector<std::byte>> cols(spec.columns.size());
    std::vector<ConstTensor> tensors;
    for (size_t env = 0; env < N; ++env) current[env].push_back(RandomStep(spec, rng_));
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      for (size_t env = 0; env < N; ++env) {
        const auto& b = current[env].back().columns[c];
        cols[c].insert(cols[c].end(), b.begin(), b.end());
      }
      tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(N), cols[c].data(),
                         cols[c].size()});
    }
    ASSERT_OK((*vw)->Append(tensors));
    for (size_t env = 0; env < N; ++env) {
      if (rng_() % 7 == 0) {
        written[(*vw)->trajectory_id(env)] = std::move(current[env]);
        current[env].clear();
        ASSERT_OK((*vw)->End(env, EndReason::kTerminal));
      }
    }
  }
  for (size_t env = 0; env < N; ++env) {
    if (!current[env].empty()) written[(*vw)->trajectory_id(env)] = current[env];
  }
  EXPECT_EQ(table->Info().steps_inserted, 40 * static_cast<int64_t>(N));
  for (int i = 0; i < 20; ++i) {
    auto batch = table->Sample(16);
    ASSERT_TRUE(batch.ok());
    CheckBatch(*batch, spec, written);
  }
  Status bad = (*vw)->End(N, EndReason::kTerminal);
  EXPECT_THAT(bad.message(), HasSubstr("environment 5 is out of range; the vector writer has 5"));
  auto zero = table->NewVectorWriter(0);
  EXPECT_THAT(zero.status().message(), HasSubstr("num_envs >= 1"));
}

TEST_F(TableTest, EvictsOldestEndedTrajectoriesFirst) {
  TableSpec spec = MixedSpec("evict", 2, Padding::kNone, 4);
  spec.capacity_steps = 32;  // 8 blocks
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  std::vector<uint64_t> ids;
  Written written;
  for (int t = 0; t < 10; ++t) {
    std::vector<StepData> steps;
    for (int i = 0; i < 8; ++i) {  // 2 blocks each
      steps.push_back(RandomStep(spec, rng_));
      ASSERT_OK((*writer)->Append(steps.back().tensors));
    }
    ids.push_back((*writer)->trajectory_id());
    written[ids.back()] = std::move(steps);
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_trajectories, 4);
  EXPECT_EQ(info.evicted_trajectories, 6);
  EXPECT_EQ(info.evicted_items, 6 * 7);
  EXPECT_EQ(info.num_items, 4 * 7);
  EXPECT_EQ(info.blocks_used, 8);
  EXPECT_EQ(info.rate_limiter.deletes, 6 * 7);
  // Only the newest four remain.
  for (int i = 0; i < 20; ++i) {
    auto batch = table->Sample(8);
    ASSERT_TRUE(batch.ok());
    for (ItemKey k : batch->keys) EXPECT_GE(ItemKeyTrajectory(k), ids[6]);
    CheckBatch(*batch, spec, written);
  }
}

TEST_F(TableTest, OpenTrajectoryThatCannotFitFailsClearly) {
  TableSpec spec = MixedSpec("nofit", 1, Padding::kNone, 4);
  spec.capacity_steps = 16;
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  StepData step = RandomStep(spec, rng_);
  for (int i = 0; i < 16; ++i) ASSERT_OK((*writer)->Append(step.tensors));
  Status s = (*writer)->Append(step.tensors);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("(16 steps) does not fit in the hot tier of 4 blocks of 4 steps"));
  EXPECT_THAT(s.message(), HasSubstr("table 'nofit'"));
  EXPECT_EQ(table->Info().num_steps, 16);
}

TEST_F(TableTest, EvictedOpenTrajectoryReportsAndWriterRecovers) {
  TableSpec spec = MixedSpec("evict_open", 1, Padding::kNone, 4);
  spec.capacity_steps = 16;
  auto table = Create(spec);
  auto old_writer = table->NewWriter();
  auto new_writer = table->NewWriter();
  ASSERT_TRUE(old_writer.ok() && new_writer.ok());
  StepData step = RandomStep(spec, rng_);
  ASSERT_OK((*old_writer)->Append(step.tensors));
  const uint64_t old_id = (*old_writer)->trajectory_id();
  // The second writer needs every block: the older open trajectory goes.
  for (int i = 0; i < 16; ++i) ASSERT_OK((*new_writer)->Append(step.tensors));
  EXPECT_EQ(table->Info().evicted_trajectories, 1);
  Status s = (*old_writer)->Append(step.tensors);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("trajectory " + std::to_string(old_id) +
                                     " was evicted from the hot tier while open"));
  EXPECT_EQ((*old_writer)->trajectory_id(), 0u);
}

TEST_F(TableTest, BadSampleArguments) {
  const TableSpec spec = MixedSpec("args", 1, Padding::kNone, 4);
  auto table = Create(spec);
  auto batch = table->Sample(0);
  EXPECT_EQ(batch.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(batch.status().message(), HasSubstr("table 'args': batch_size is 0"));
  batch = table->Sample(-3);
  EXPECT_THAT(batch.status().message(), HasSubstr("batch_size is -3"));
}

TEST_F(TableTest, ClosedAndDroppedTablesRefuseCalls) {
  const TableSpec spec = MixedSpec("closing", 1, Padding::kNone, 4);
  auto table = Create(spec);
  auto writer = table->NewWriter();
  ASSERT_TRUE(writer.ok());
  // A sampler blocked on an empty table is woken by the drop.
  std::thread sampler([&] {
    auto b = table->Sample(1);
    EXPECT_EQ(b.status().code(), Status::Code::kCancelled) << b.status().ToString();
    EXPECT_THAT(b.status().message(), HasSubstr("closing"));
  });
  // Dropped once it waits (its rate limiter counts it), at most 30 s on.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (table->Info().rate_limiter.blocked_samples == 0 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(table->Info().rate_limiter.blocked_samples, 1);
  ASSERT_OK(db_->DropTable("closing"));
  sampler.join();
  StepData step = RandomStep(spec, rng_);
  Status s = (*writer)->Append(step.tensors);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'closing' is dropped"));
  EXPECT_THAT(table->NewWriter().status().message(), HasSubstr("is dropped"));
}

}  // namespace
}  // namespace replaydb
