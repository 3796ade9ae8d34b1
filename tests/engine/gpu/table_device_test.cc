// Tables whose priorities live on a GPU (TableSpec::priority_device): the
// host Sample path, SampleToDevice and UpdatePrioritiesFromDevice. Skipped
// where no GPU can be used; the error paths run everywhere.
#include <algorithm>
#include <cmath>
#include <map>

#include "replaydb/device.h"
#include "kernels/runtime/gpu.h"
#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::ChiSquareCritical;
using testing_util::TempDir;
using ::testing::HasSubstr;

TableSpec DeviceSpec(const std::string& name) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"x", DType::kF32, {3}}};
  spec.capacity_steps = 1 << 14;
  spec.block_steps = 16;
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_device = 0;
  spec.priority_exponent = 0.8;
  return spec;
}

TEST(TableDeviceTest, HostTablesRefuseDeviceCalls) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec = DeviceSpec("host");
  spec.priority_device = -1;
  auto table = db->CreateTable(spec);
  ASSERT_TRUE(table.ok());
  uint64_t fake = 0;
  float fake_f = 0;
  Status s = (*table)->UpdatePrioritiesFromDevice(&fake, &fake_f, 1, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'host' keeps its priorities on the host"));
  EXPECT_THAT(s.message(), HasSubstr("priority_device = -1"));
}

TEST(TableDeviceTest, WithoutAGpuCreationFailsClearly) {
  std::string why;
  if (kernels::CudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present";
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  auto table = db->CreateTable(DeviceSpec("gpu"));
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), Status::Code::kNotSupported);
  EXPECT_THAT(table.status().message(), HasSubstr("table 'gpu': priorities on CUDA device 0"));
  EXPECT_TRUE(db->ListTables().empty()) << "a failed CreateTable changed the catalog";
}

class TableDeviceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (kernels::CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    db_ = testing_util::OpenDB(dir_.path());
    auto t = db_->CreateTable(DeviceSpec("gpu"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    table_ = *t;
    auto writer = table_->NewWriter();
    ASSERT_TRUE(writer.ok());
    auto step = RandomStep(table_->spec(), rng_);
    for (int i = 0; i < 50; ++i) {
      const double p = i == 7 ? 0.0 : std::exp(std::uniform_real_distribution<double>(-3, 3)(rng_));
      priorities_.push_back(p);
      ASSERT_OK((*writer)->Append(step.tensors, p));
      keys_.push_back(MakeItemKey((*writer)->trajectory_id(), i));
    }
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }

  // Chi-square of `counts` against priorities_^0.8 (priority 0 excluded).
  void ExpectFollowsPriorities(const std::map<ItemKey, int64_t>& counts, int64_t draws) {
    double total = 0;
    for (double p : priorities_) total += std::pow(p, 0.8);
    double chi2 = 0;
    int bins = 0;
    for (size_t i = 0; i < keys_.size(); ++i) {
      const double mass = std::pow(priorities_[i], 0.8);
      auto it = counts.find(keys_[i]);
      const double got = it == counts.end() ? 0.0 : static_cast<double>(it->second);
      if (mass == 0) {
        EXPECT_EQ(got, 0) << "a zero-priority item was drawn";
        continue;
      }
      const double expected = draws * mass / total;
      chi2 += (got - expected) * (got - expected) / expected;
      ++bins;
    }
    EXPECT_LT(chi2, ChiSquareCritical(bins - 1));
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::shared_ptr<Table> table_;
  std::vector<double> priorities_;
  std::vector<ItemKey> keys_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableDeviceGpuTest, HostSampleFollowsPriorities) {
  std::map<ItemKey, int64_t> counts;
  SampleBatch batch;
  const int64_t draws = 200'000;
  for (int64_t n = 0; n < draws; n += 2000) {
    ASSERT_OK(table_->Sample(2000, {}, &batch));
    for (ItemKey k : batch.keys) ++counts[k];
    ASSERT_EQ(batch.columns.size(), 1u);
  }
  ExpectFollowsPriorities(counts, draws);
  EXPECT_EQ(table_->Info().items_sampled, draws);
}

TEST_F(TableDeviceGpuTest, SampleToDeviceAndUpdateFromDevice) {
  const int64_t B = 4096;
  auto d_keys = DeviceBuffer::Allocate(0, B * sizeof(uint64_t));
  auto d_probs = DeviceBuffer::Allocate(0, B * sizeof(float));
  auto d_weights = DeviceBuffer::Allocate(0, B * sizeof(float));
  ASSERT_TRUE(d_keys.ok() && d_probs.ok() && d_weights.ok());
  SampleOptions options;
  options.importance_beta = 0.5;
  std::map<ItemKey, int64_t> counts;
  std::vector<uint64_t> keys(B);
  std::vector<float> weights(B);
  const int rounds = 50;
  for (int r = 0; r < rounds; ++r) {
    ASSERT_OK(d_weights->Fill(0xFF));
    ASSERT_OK(table_->SampleToDevice(B, options,
                                     {d_keys->as<uint64_t>(), d_probs->as<float>(),
                                      d_weights->as<float>()},
                                     nullptr));
    ASSERT_OK(d_keys->CopyToHost(keys.data(), B * sizeof(uint64_t)));
    ASSERT_OK(d_weights->CopyToHost(weights.data(), B * sizeof(float)));
    for (int64_t b = 0; b < B; ++b) {
      ++counts[keys[b]];
      ASSERT_TRUE(weights[b] > 0 && weights[b] <= 1.0f) << weights[b];
    }
  }
  ExpectFollowsPriorities(counts, B * rounds);

  // Device-side update: item 3 gets all the mass; a stale key is skipped.
  std::vector<uint64_t> update_keys = {keys_[3], MakeItemKey(999999, 0)};
  std::vector<float> update_priorities = {1e6f, 5.0f};
  std::vector<uint64_t> others;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (i != 3) {
      update_keys.push_back(keys_[i]);
      update_priorities.push_back(0.0f);
    }
  }
  auto d_uk = DeviceBuffer::Allocate(0, update_keys.size() * sizeof(uint64_t));
  auto d_up = DeviceBuffer::Allocate(0, update_priorities.size() * sizeof(float));
  ASSERT_TRUE(d_uk.ok() && d_up.ok());
  ASSERT_OK(d_uk->CopyFromHost(update_keys.data(), update_keys.size() * sizeof(uint64_t)));
  ASSERT_OK(d_up->CopyFromHost(update_priorities.data(), update_priorities.size() * sizeof(float)));
  ASSERT_OK(table_->UpdatePrioritiesFromDevice(d_uk->as<uint64_t>(), d_up->as<float>(),
                                               static_cast<int64_t>(update_keys.size()), nullptr));
  ASSERT_OK(table_->SampleToDevice(B, {}, {d_keys->as<uint64_t>(), d_probs->as<float>(), nullptr},
                                   nullptr));
  ASSERT_OK(d_keys->CopyToHost(keys.data(), B * sizeof(uint64_t)));
  for (int64_t b = 0; b < B; ++b) ASSERT_EQ(keys[b], keys_[3]);
  const TableInfo info = table_->Info();
  EXPECT_EQ(info.priority_updates_skipped, 1);
  EXPECT_EQ(info.priority_updates, static_cast<int64_t>(update_keys.size()) - 1);
}

TEST_F(TableDeviceGpuTest, MassIsTheSumOfPrioritiesToTheExponentIncludingDeviceUpdates) {
  double want = 0;
  for (double p : priorities_) want += static_cast<double>(static_cast<float>(std::pow(p, 0.8)));
  auto mass = table_->Mass();
  ASSERT_TRUE(mass.ok()) << mass.status().ToString();
  EXPECT_EQ(mass->items, 50);
  EXPECT_NEAR(mass->total, want, 1e-9 * want);
  // A priority set on the device shows in the next Mass.
  const uint64_t key = keys_[11];
  const float p = 1000.0f;
  auto d_k = DeviceBuffer::Allocate(0, sizeof(uint64_t));
  auto d_p = DeviceBuffer::Allocate(0, sizeof(float));
  ASSERT_TRUE(d_k.ok() && d_p.ok());
  ASSERT_OK(d_k->CopyFromHost(&key, sizeof key));
  ASSERT_OK(d_p->CopyFromHost(&p, sizeof p));
  ASSERT_OK(table_->UpdatePrioritiesFromDevice(d_k->as<uint64_t>(), d_p->as<float>(), 1, nullptr));
  want += static_cast<float>(std::pow(1000.0, 0.8)) -
          static_cast<double>(static_cast<float>(std::pow(priorities_[11], 0.8)));
  mass = table_->Mass();
  ASSERT_TRUE(mass.ok()) << mass.status().ToString();
  EXPECT_NEAR(mass->total, want, 1e-6 * want);
}

TEST_F(TableDeviceGpuTest, AllPrioritiesZeroedOnTheDeviceIsAnErrorNotACrash) {
  std::vector<float> zeros(keys_.size(), 0.0f);
  auto d_keys = DeviceBuffer::Allocate(0, keys_.size() * sizeof(uint64_t));
  auto d_zeros = DeviceBuffer::Allocate(0, zeros.size() * sizeof(float));
  ASSERT_TRUE(d_keys.ok() && d_zeros.ok());
  ASSERT_OK(d_keys->CopyFromHost(keys_.data(), keys_.size() * sizeof(uint64_t)));
  ASSERT_OK(d_zeros->CopyFromHost(zeros.data(), zeros.size() * sizeof(float)));
  ASSERT_OK(table_->UpdatePrioritiesFromDevice(d_keys->as<uint64_t>(), d_zeros->as<float>(),
                                               static_cast<int64_t>(keys_.size()), nullptr));
  auto batch = table_->Sample(4, {.timeout = std::chrono::milliseconds(100)});
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(batch.status().message(), HasSubstr("every priority on the device may be 0"));
  // The table still works once an item gets mass again.
  ASSERT_OK(table_->UpdatePriorities(std::vector<ItemKey>{keys_[5]}, std::vector<double>{2.0}));
  auto again = table_->Sample(8);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (ItemKey k : again->keys) EXPECT_EQ(k, keys_[5]);
}

// Every priority 0 through host updates: a table drawing on the device
// fails the sample at once with FailedPrecondition naming the table (a
// host table draws uniformly then), through both sample paths.
TEST_F(TableDeviceGpuTest, AllPrioritiesZeroFailsFastNamingTheTable) {
  ASSERT_OK(table_->UpdatePriorities(keys_, std::vector<double>(keys_.size(), 0.0)));
  auto batch = table_->Sample(4, {.timeout = std::chrono::seconds(5)});
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(batch.status().message(), HasSubstr("table 'gpu' draws on CUDA device 0"));
  EXPECT_THAT(batch.status().message(), HasSubstr("no item of priority > 0"));
  auto d_keys = DeviceBuffer::Allocate(0, 4 * sizeof(uint64_t));
  auto d_probs = DeviceBuffer::Allocate(0, 4 * sizeof(float));
  ASSERT_TRUE(d_keys.ok() && d_probs.ok());
  const Status s = table_->SampleToDevice(4, {.timeout = std::chrono::seconds(5)},
                                          {d_keys->as<uint64_t>(), d_probs->as<float>()}, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'gpu' draws on CUDA device 0"));
}

// Importance weights by the table-wide largest (the default, kBuffer):
// (P_min / P)^beta with P_min that of the smallest positive priority, on
// both sample paths; kBatch: by the batch's largest.
TEST_F(TableDeviceGpuTest, ImportanceWeightsByTheTableOrTheBatch) {
  double min_positive = 1e300;
  for (double p : priorities_) {
    if (p > 0) min_positive = std::min(min_positive, p);
  }
  constexpr double kBeta = 0.6;
  const auto expected = [&](double priority) {
    return std::pow(std::pow(min_positive / priority, 0.8), kBeta);  // exponent 0.8
  };
  SampleOptions options;
  options.importance_beta = kBeta;
  ASSERT_EQ(options.weight_normalization, WeightNormalization::kBuffer);
  SampleBatch batch;
  ASSERT_OK(table_->Sample(512, options, &batch));
  for (int64_t b = 0; b < batch.batch_size; ++b) {
    ASSERT_NEAR(batch.weights[b], expected(batch.priorities[b]), 1e-5) << b;
  }
  // Large batches take the unfused path (cub::DeviceReduce::Min).
  for (const int64_t B : {int64_t{512}, int64_t{40000}}) {
    auto d_keys = DeviceBuffer::Allocate(0, B * sizeof(uint64_t));
    auto d_probs = DeviceBuffer::Allocate(0, B * sizeof(float));
    auto d_weights = DeviceBuffer::Allocate(0, B * sizeof(float));
    ASSERT_TRUE(d_keys.ok() && d_probs.ok() && d_weights.ok());
    for (WeightNormalization w : {WeightNormalization::kBuffer, WeightNormalization::kBatch}) {
      options.weight_normalization = w;
      ASSERT_OK(table_->SampleToDevice(
          B, options, {d_keys->as<uint64_t>(), d_probs->as<float>(), d_weights->as<float>()},
          nullptr));
      std::vector<uint64_t> keys(B);
      std::vector<float> probs(B), weights(B);
      ASSERT_OK(d_keys->CopyToHost(keys.data(), B * sizeof(uint64_t)));
      ASSERT_OK(d_probs->CopyToHost(probs.data(), B * sizeof(float)));
      ASSERT_OK(d_weights->CopyToHost(weights.data(), B * sizeof(float)));
      std::map<ItemKey, double> priority_of;
      for (size_t i = 0; i < keys_.size(); ++i) priority_of[keys_[i]] = priorities_[i];
      const float p_min = *std::min_element(probs.begin(), probs.end());
      for (int64_t b = 0; b < B; ++b) {
        if (w == WeightNormalization::kBuffer) {
          ASSERT_NEAR(weights[b], expected(priority_of.at(keys[b])), 1e-5) << "B " << B;
        } else {
          ASSERT_NEAR(weights[b], std::pow(p_min / probs[b], kBeta), 1e-5) << "B " << B;
        }
      }
      if (w == WeightNormalization::kBatch) {
        EXPECT_EQ(*std::max_element(weights.begin(), weights.end()), 1.0f);
      }
    }
    options.weight_normalization = WeightNormalization::kBuffer;
  }
}

}  // namespace
}  // namespace replaydb
