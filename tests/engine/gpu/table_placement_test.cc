// Hot-tier placement (host, pinned, device), gathers to the GPU, inserts
// from the GPU and the asynchronous DeviceSampler. The GPU tests compare
// every gather byte for byte with the CPU path (Lookup on a host-readable
// table) for the same keys, over fresh random data, with output buffers
// poisoned first; they skip with the reason where no GPU can be used. The
// placement parsing and error paths run everywhere.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "kernels/runtime/gpu.h"
#include "kernels/runtime/launch_faults.h"
#include "replaydb/db.h"
#include "replaydb/device.h"
#include "util/host_buffers.h"
#include "tests/device_out.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;
using ::testing::HasSubstr;

using testing_util::AllocateOut;
using testing_util::DeviceOut;
using testing_util::kPoison;
using testing_util::Take;

int Gpus(std::string* why) { return kernels::CudaDeviceCount(why); }

#define REQUIRE_GPU()                                         \
  do {                                                        \
    std::string _why;                                         \
    if (Gpus(&_why) == 0) GTEST_SKIP() << "no GPU: " << _why; \
  } while (0)

TEST(PlacementTest, ParseAndPrint) {
  for (const char* text : {"host", "auto", "device:0", "device:3", "device:1234"}) {
    auto p = Placement::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status().ToString();
    EXPECT_EQ(p->ToString(), text);
  }
  EXPECT_EQ(Placement::Parse("device:7")->device, 7);
  for (const char* bad : {"", "gpu", "device:", "device:x", "device:-1", "device:12345", "Host"}) {
    auto p = Placement::Parse(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(p.status().message(),
                HasSubstr("placement '" + std::string(bad) +
                          "' is not one of host, device:N (N a device index), auto"));
  }
}

TableSpec BasicSpec(const std::string& name) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"x", DType::kF32, Shape({3})}};
  spec.capacity_steps = 256;
  spec.block_steps = 8;
  return spec;
}

TEST(PlacementTest, Validation) {
  TableSpec spec = BasicSpec("v");
  spec.placement = Placement::Device(-2);
  EXPECT_THAT(spec.Validate().message(), HasSubstr("table 'v': placement device:-2 names no device"));
  spec.placement = Placement::Device(1);
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_device = 0;
  EXPECT_THAT(spec.Validate().message(),
              HasSubstr("placement device:1 and priority_device 0 differ"));
  spec.placement = Placement::Host();
  EXPECT_OK(spec.Validate());
  spec.placement = Placement::Device(0);
  EXPECT_OK(spec.Validate());
}

TEST(PlacementTest, PersistedInTheCatalog) {
  TempDir dir;
  {
    auto db = testing_util::OpenDB(dir.path());
    TableSpec spec = BasicSpec("a");
    spec.placement = Placement::Auto();
    ASSERT_TRUE(db->CreateTable(spec).ok());
  }
  auto db = testing_util::OpenDB(dir.path());
  auto table = db->GetTable("a");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ((*table)->spec().placement, Placement::Auto());
}

TEST(PlacementTest, WithoutAGpu) {
  std::string why;
  if (Gpus(&why) > 0) GTEST_SKIP() << "a GPU is present";
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec = BasicSpec("d");
  spec.placement = Placement::Device(0);
  auto created = db->CreateTable(spec);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), Status::Code::kNotSupported);
  EXPECT_THAT(created.status().message(),
              HasSubstr("table 'd': placement device:0 needs CUDA device 0, but no GPU can be "
                        "used ("));
  EXPECT_TRUE(db->ListTables().empty());

  // host and auto fall back to plain host memory, and say so.
  for (Placement p : {Placement::Host(), Placement::Auto()}) {
    spec.name = "h" + std::to_string(static_cast<int>(p.kind));
    spec.placement = p;
    auto table = db->CreateTable(spec);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    const TableInfo info = (*table)->Info();
    EXPECT_EQ(info.placement, "host");
    EXPECT_EQ(info.device, -1);
    uint64_t fake_keys[4];
    float fake[4];
    DeviceSampleOutput out{fake_keys, fake, nullptr, {}, nullptr};
    Status s = (*table)->SampleToDevice(4, {}, out, nullptr);
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("SampleToDevice needs a GPU that can address the hot "
                                       "tier, but it is in plain host memory"));
    s = (*table)->LookupToDevice(std::vector<ItemKey>{1}, out, nullptr);
    EXPECT_THAT(s.message(), HasSubstr("LookupToDevice needs a GPU"));
    EXPECT_THAT((*table)->NewDeviceSampler({}).status().message(),
                HasSubstr("NewDeviceSampler needs a GPU"));
    auto vw = (*table)->NewVectorWriter(2);
    ASSERT_TRUE(vw.ok());
    float data[6] = {};
    ConstTensor step{DType::kF32, Shape({2, 3}), data, sizeof(data)};
    s = (*vw)->AppendFromDevice({&step, 1}, nullptr);
    EXPECT_THAT(s.message(), HasSubstr("AppendFromDevice needs a GPU"));
  }
}

TEST(LookupTest, ReadsWhatWasWrittenAndNamesMissingKeys) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec = BasicSpec("l");
  spec.sequence_length = 3;
  spec.padding = Padding::kTail;
  auto table = Take(db->CreateTable(spec));
  auto writer = Take(table->NewWriter());
  std::vector<float> values;
  for (int i = 0; i < 5; ++i) {
    float x[3] = {i * 1.f, i * 10.f, i * 100.f};
    values.insert(values.end(), x, x + 3);
    const ConstTensor step[] = {{DType::kF32, Shape({3}), x, sizeof(x)}};
    ASSERT_OK(writer->Append(step));
  }
  ASSERT_OK(writer->End(EndReason::kTerminal));
  const uint64_t id = writer->trajectory_id() ? writer->trajectory_id() : 1;
  (void)id;
  const std::vector<ItemKey> keys = {MakeItemKey(1, 3), MakeItemKey(1, 0)};
  SampleBatch batch;
  ASSERT_OK(table->Lookup(keys, &batch));
  ASSERT_EQ(batch.columns.size(), 1u);
  const float* got = batch.columns[0].data_as<float>();
  // Window at 3: steps 3, 4 then one padded step.
  EXPECT_EQ(std::vector<float>(got, got + 9),
            std::vector<float>({3, 30, 300, 4, 40, 400, 0, 0, 0}));
  EXPECT_EQ(std::vector<float>(got + 9, got + 18),
            std::vector<float>(values.begin(), values.begin() + 9));
  EXPECT_EQ(batch.mask, std::vector<uint8_t>({1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(batch.probabilities, std::vector<double>({0, 0}));
  EXPECT_EQ(batch.times_sampled, std::vector<uint32_t>({0, 0}));
  EXPECT_EQ(table->Info().items_sampled, 0);

  Status s = table->Lookup(std::vector<ItemKey>{MakeItemKey(1, 1), MakeItemKey(9, 2)}, &batch);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("table 'l': key " + std::to_string(MakeItemKey(9, 2)) +
                                     " (trajectory 9, step 2, index 1) is not a live item"));
  s = table->Lookup({}, &batch);
  EXPECT_THAT(s.message(), HasSubstr("Lookup got 0 keys"));
}

// ---------------------------------------------------------------- GPU tests

// A table with columns of awkward sizes, filled with random trajectories.
// The same writes go to a table of each placement, so keys agree.
struct Fixture {
  TableSpec spec;
  std::vector<ItemKey> keys;  // every item
};

TableSpec GatherSpec(const std::string& name, std::mt19937_64& rng, Placement placement) {
  TableSpec spec;
  spec.name = name;
  // Step sizes from 1 byte to 64 KiB; odd sizes break 16-byte alignment.
  const std::vector<std::vector<ColumnSpec>> schemas = {
      {{"b", DType::kU8, Shape()}},
      {{"odd", DType::kU8, Shape({13})}, {"f", DType::kF32, Shape({3})}},
      {{"big", DType::kU8, Shape({65536})}},
      {{"mixed", DType::kI16, Shape({2, 7})}, {"d", DType::kF64, Shape({4})},
       {"flag", DType::kBool, Shape()}, {"page", DType::kU8, Shape({4100})}},
  };
  spec.columns = schemas[rng() % schemas.size()];
  spec.block_steps = std::vector<int64_t>{1, 4, 7, 16}[rng() % 4];
  spec.sequence_length = std::vector<int64_t>{1, 3, 7, 20}[rng() % 4];
  spec.padding = rng() % 2 ? Padding::kTail : Padding::kNone;
  spec.capacity_steps = 600;
  spec.placement = placement;
  return spec;
}

// One vector step of fresh random bytes for `n` environments: the host
// bytes, the same bytes in device memory (copied on `stream`), and tensors
// over each, for VectorWriter::Append and AppendFromDevice.
struct RandomVectorStep {
  std::vector<std::vector<std::byte>> host;
  std::vector<DeviceBuffer> device;
  std::vector<ConstTensor> host_t, device_t;
};

RandomVectorStep MakeRandomVectorStep(const TableSpec& spec, size_t n, std::mt19937_64& rng,
                                      const DeviceStream& stream) {
  RandomVectorStep step;
  step.host.resize(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    std::vector<std::byte>& bytes = step.host[c];
    bytes.resize(n * col.step_bytes());
    for (auto& b : bytes) b = static_cast<std::byte>(rng() & (col.dtype == DType::kBool ? 1 : 0xFF));
    step.device.push_back(Take(DeviceBuffer::Allocate(0, bytes.size())));
    const Status copied = step.device.back().CopyFromHost(bytes.data(), bytes.size(), 0, stream.handle());
    EXPECT_TRUE(copied.ok()) << copied.ToString();
    if (!copied.ok()) std::abort();
    const Shape shape = col.shape.Prepend(static_cast<int64_t>(n));
    step.host_t.push_back({col.dtype, shape, bytes.data(), bytes.size()});
    step.device_t.push_back({col.dtype, shape, step.device.back().data(), bytes.size()});
  }
  return step;
}

void FillTables(const std::vector<std::shared_ptr<Table>>& tables, std::mt19937_64& rng,
                std::vector<ItemKey>* keys) {
  const TableSpec spec = tables[0]->spec();
  std::vector<std::unique_ptr<TrajectoryWriter>> writers;
  for (auto& t : tables) writers.push_back(Take(t->NewWriter()));
  for (int traj = 0; traj < 12; ++traj) {
    const int length = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < length; ++i) {
      auto step = testing_util::RandomStep(spec, rng);
      for (auto& w : writers) ASSERT_OK(w->Append(step.tensors));
    }
    for (auto& w : writers) ASSERT_OK(w->End(EndReason::kTerminal));
  }
  SampleOptions o;
  o.gather = false;
  // Every live item, via the keys the table reports (sampling without
  // gather counts draws, so read the keys through a large sample of the
  // first table only... use Lookup of all candidate keys instead).
  keys->clear();
  SampleBatch probe;
  for (uint64_t id = 1; id <= 12; ++id) {
    for (int64_t start = 0; start < 40; ++start) {
      const ItemKey k = MakeItemKey(id, start);
      if (tables[0]->Lookup(std::vector<ItemKey>{k}, &probe).ok()) keys->push_back(k);
    }
  }
}

// Copies a device array to the host.
std::vector<std::byte> ToHost(const DeviceBuffer& buffer, size_t bytes) {
  std::vector<std::byte> host(bytes);
  EXPECT_OK(buffer.CopyToHost(host.data(), bytes));
  return host;
}

// Checks that the device outputs hold exactly `expected` (columns, mask).
void ExpectSameAsHost(const DeviceOut& out, const SampleBatch& expected, const std::string& what) {
  ASSERT_OK(DeviceSynchronize(0));
  for (size_t c = 0; c < expected.columns.size(); ++c) {
    const Tensor& want = expected.columns[c];
    auto got = ToHost(out.columns[c], want.size_bytes());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size_bytes()), 0)
        << what << ": column " << c << " differs from the CPU path";
  }
  auto mask = ToHost(out.mask, expected.mask.size());
  ASSERT_EQ(std::memcmp(mask.data(), expected.mask.data(), expected.mask.size()), 0)
      << what << ": mask differs";
}

// Checks that `got` (a lookup in one table) reads as `want` (the same keys
// in its twin): keys, mask and every column byte for byte.
void ExpectSameRows(const SampleBatch& want, const SampleBatch& got, const std::string& what) {
  ASSERT_EQ(got.keys, want.keys) << what;
  EXPECT_EQ(got.mask, want.mask) << what;
  ASSERT_EQ(got.columns.size(), want.columns.size()) << what;
  for (size_t c = 0; c < want.columns.size(); ++c) {
    ASSERT_EQ(want.columns[c].size_bytes(), got.columns[c].size_bytes()) << what << " column " << c;
    ASSERT_EQ(
        std::memcmp(want.columns[c].data(), got.columns[c].data(), want.columns[c].size_bytes()), 0)
        << what << ": column " << c << " differs";
  }
}

class TableGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    db_ = testing_util::OpenDB(dir_.path());
  }
  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableGpuTest, PlacementsAndInfo) {
  TableSpec spec = BasicSpec("pinned");
  auto pinned = Take(db_->CreateTable(spec));
  EXPECT_EQ(pinned->Info().placement, "pinned");
  EXPECT_EQ(pinned->Info().device, 0);
  spec.name = "dev";
  spec.placement = Placement::Device(0);
  auto dev = Take(db_->CreateTable(spec));
  spec.name = "auto";
  spec.placement = Placement::Auto();
  auto autop = Take(db_->CreateTable(spec));
  EXPECT_EQ(dev->Info().placement, "device:0");
  EXPECT_EQ(autop->Info().placement, "device:0");
  EXPECT_EQ(dev->Info().bytes_reserved, 0) << "memory is obtained lazily";
  auto w = Take(dev->NewWriter());
  float x[3] = {1, 2, 3};
  const ConstTensor step[] = {{DType::kF32, Shape({3}), x, sizeof(x)}};
  ASSERT_OK(w->Append(step));
  const TableInfo info = dev->Info();
  EXPECT_GE(info.bytes_reserved, info.bytes_used);
  EXPECT_GT(info.bytes_used, 0);
  std::string why;
  spec.name = "far";
  spec.placement = Placement::Device(Gpus(&why));
  auto far = db_->CreateTable(spec);
  EXPECT_EQ(far.status().code(), Status::Code::kNotSupported);
  EXPECT_THAT(far.status().message(), HasSubstr("needs CUDA device " +
                                                std::to_string(Gpus(&why)) + ", but only"));
}

// The heart of it: gathers from pinned and device memory, to the host and
// to the device, equal the CPU path byte for byte.
TEST_F(TableGpuTest, GathersAreByteIdenticalToTheCpuPath) {
  for (int round = 0; round < 8; ++round) {
    const std::string r = std::to_string(round);
    TableSpec host_spec = GatherSpec("h" + r, rng_, Placement::Host());
    TableSpec dev_spec = host_spec;
    dev_spec.name = "d" + r;
    dev_spec.placement = Placement::Device(0);
    auto host = Take(db_->CreateTable(host_spec));
    auto dev = Take(db_->CreateTable(dev_spec));
    ASSERT_EQ(host->Info().placement, "pinned");
    std::vector<ItemKey> all;
    FillTables({host, dev}, rng_, &all);
    ASSERT_FALSE(all.empty());
    const int64_t B = 1 + static_cast<int64_t>(rng_() % 70);
    std::vector<ItemKey> keys(B);
    for (auto& k : keys) k = all[rng_() % all.size()];
    const std::string what = "round " + r + " (block_steps " +
                             std::to_string(host_spec.block_steps) + ", L " +
                             std::to_string(host_spec.sequence_length) + ", B " +
                             std::to_string(B) + ")";
    SampleBatch cpu;  // pinned memory read by the CPU
    ASSERT_OK(host->Lookup(keys, &cpu));
    SampleBatch via_gpu;  // device memory, gathered by a kernel, copied back
    ASSERT_OK(dev->Lookup(keys, &via_gpu));
    for (size_t c = 0; c < cpu.columns.size(); ++c) {
      ASSERT_EQ(std::memcmp(cpu.columns[c].data(), via_gpu.columns[c].data(),
                            cpu.columns[c].size_bytes()),
                0)
          << what << ": device-memory Lookup differs in column " << c;
    }
    for (auto& table : {host, dev}) {
      DeviceOut out = AllocateOut(host_spec, B);
      ASSERT_OK(table->LookupToDevice(keys, out.view, nullptr));
      ExpectSameAsHost(out, cpu, what + " " + table->Info().placement);
      auto got_keys = ToHost(out.keys, B * 8);
      ASSERT_EQ(std::memcmp(got_keys.data(), keys.data(), B * 8), 0);
    }
    ASSERT_OK(db_->DropTable(host_spec.name));
    ASSERT_OK(db_->DropTable(dev_spec.name));
  }
}

// Host samples of a device table: a batch's large columns are page-locked
// once and copied out of the device at pinned speed (util/host_buffers.h),
// and a batch made after one was freed, as the C API and Python make one per
// call, reuses that memory, page-locked already. The bytes are a host
// twin's, for the keys drawn.
TEST_F(TableGpuTest, HostSamplesOfADeviceTableLandInPageLockedMemoryTheNextBatchReuses) {
  TableSpec host_spec;
  host_spec.name = "h";
  const int64_t step_bytes = 4096 + 16 * static_cast<int64_t>(rng_() % 256);
  host_spec.columns = {{"obs", DType::kU8, Shape{step_bytes}}, {"r", DType::kF32, Shape()}};
  host_spec.sequence_length = 1 + static_cast<int64_t>(rng_() % 4);
  host_spec.padding = Padding::kTail;
  host_spec.capacity_steps = 1024;
  TableSpec dev_spec = host_spec;
  dev_spec.name = "d";
  dev_spec.placement = Placement::Device(0);
  auto host = Take(db_->CreateTable(host_spec));
  auto dev = Take(db_->CreateTable(dev_spec));
  std::vector<ItemKey> all;
  FillTables({host, dev}, rng_, &all);
  ASSERT_FALSE(all.empty());
  // At least 1 MiB of "obs" per batch: a buffer kept and page-locked.
  const int64_t B = (util::kHostBufferCachedMin / (step_bytes * host_spec.sequence_length)) + 1 +
                    static_cast<int64_t>(rng_() % 64);
  const util::HostBufferStats before = util::GetHostBufferStats();
  const std::byte* first_obs = nullptr;
  for (int call = 0; call < 3; ++call) {
    SampleBatch batch;  // fresh each call
    ASSERT_OK(dev->Sample(B, {}, &batch));
    ASSERT_EQ(batch.columns[0].size_bytes(),
              static_cast<size_t>(B * host_spec.sequence_length * step_bytes));
    if (call == 0) first_obs = batch.columns[0].data();
    EXPECT_EQ(batch.columns[0].data(), first_obs) << "call " << call << " got other memory";
    SampleBatch want;
    ASSERT_OK(host->Lookup(batch.keys, &want));
    for (size_t c = 0; c < want.columns.size(); ++c) {
      ASSERT_EQ(std::memcmp(want.columns[c].data(), batch.columns[c].data(),
                            want.columns[c].size_bytes()),
                0)
          << "call " << call << ": column " << c << " differs from the host twin";
    }
    EXPECT_EQ(batch.mask, want.mask);
  }
  const util::HostBufferStats after = util::GetHostBufferStats();
  EXPECT_EQ(after.pinned - before.pinned, 1u) << "page-locked once";
  EXPECT_GE(after.reused - before.reused, 2u);
}

TEST_F(TableGpuTest, SampleToDeviceMatchesLookupOfItsKeys) {
  for (Placement p : {Placement::Host(), Placement::Device(0)}) {
    for (bool on_device_draws : {false, true}) {
      TableSpec spec = GatherSpec(std::string("s") + (on_device_draws ? "d" : "h") +
                                      std::to_string(static_cast<int>(p.kind)),
                                  rng_, p);
      if (on_device_draws) {
        spec.selector = rng_() % 2 ? SelectorKind::kPrioritized : SelectorKind::kUniform;
        spec.priority_device = 0;
      }
      auto table = Take(db_->CreateTable(spec));
      std::vector<ItemKey> all;
      FillTables({table}, rng_, &all);
      const int64_t B = 64;
      SampleOptions options;
      options.importance_beta = 0.5;
      for (int i = 0; i < 3; ++i) {
        DeviceOut out = AllocateOut(spec, B);
        ASSERT_OK(table->SampleToDevice(B, options, out.view, nullptr));
        ASSERT_OK(DeviceSynchronize(0));
        std::vector<ItemKey> keys(B);
        ASSERT_OK(out.keys.CopyToHost(keys.data(), B * 8));
        SampleBatch expected;
        ASSERT_OK(table->Lookup(keys, &expected));
        ExpectSameAsHost(out, expected, spec.name);
        std::vector<float> probabilities(B), weights(B);
        ASSERT_OK(out.probabilities.CopyToHost(probabilities.data(), B * 4));
        ASSERT_OK(out.weights.CopyToHost(weights.data(), B * 4));
        for (int64_t b = 0; b < B; ++b) {
          ASSERT_GT(probabilities[b], 0) << spec.name;
          ASSERT_GT(weights[b], 0);
          ASSERT_LE(weights[b], 1.0f + 1e-6f);
        }
      }
    }
  }
}

// A uniform table drawing on the device draws inside the gather kernel:
// every live item equally often (chi-square), probability 1 / N, weight 1,
// and after removals only live items.
TEST_F(TableGpuTest, UniformDrawsOnTheDeviceAreUniform) {
  for (Placement p : {Placement::Host(), Placement::Device(0)}) {
    TableSpec spec = BasicSpec("u" + std::to_string(static_cast<int>(p.kind)));
    spec.placement = p;
    spec.priority_device = 0;
    spec.capacity_steps = 64;  // 8 blocks of 8: the 9th trajectory evicts the 1st
    auto table = Take(db_->CreateTable(spec));
    auto writer = Take(table->NewWriter());
    std::vector<ItemKey> live;
    const auto write_trajectory = [&] {
      for (int i = 0; i < 8; ++i) {
        float x[3] = {static_cast<float>(i), 0, 0};
        const ConstTensor step[] = {{DType::kF32, Shape({3}), x, sizeof(x)}};
        ASSERT_OK(writer->Append(step));
      }
      for (int i = 0; i < 8; ++i) live.push_back(MakeItemKey(writer->trajectory_id(), i));
      ASSERT_OK(writer->End(EndReason::kTerminal));
    };
    for (int t = 0; t < 8; ++t) write_trajectory();
    write_trajectory();  // evicts trajectory 1 (and its 8 items)
    live.erase(live.begin(), live.begin() + 8);
    ASSERT_EQ(table->Info().num_items, 64);
    const int64_t B = 1024;
    DeviceOut out = AllocateOut(spec, B);
    SampleOptions options;
    options.importance_beta = 0.4;
    std::map<ItemKey, int64_t> counts;
    std::vector<uint64_t> keys(B);
    std::vector<float> probabilities(B), weights(B);
    constexpr int kCalls = 32;
    for (int call = 0; call < kCalls; ++call) {
      ASSERT_OK(table->SampleToDevice(B, options, out.view, nullptr));
      ASSERT_OK(out.keys.CopyToHost(keys.data(), B * 8));
      ASSERT_OK(out.probabilities.CopyToHost(probabilities.data(), B * 4));
      ASSERT_OK(out.weights.CopyToHost(weights.data(), B * 4));
      for (int64_t b = 0; b < B; ++b) {
        ++counts[keys[b]];
        ASSERT_FLOAT_EQ(probabilities[b], 1.0f / 64);
        ASSERT_EQ(weights[b], 1.0f);
      }
      if (call == 0) {
        // The gathered windows are the drawn items' windows.
        SampleBatch expected;
        ASSERT_OK(table->Lookup(std::vector<ItemKey>(keys.begin(), keys.end()), &expected));
        ExpectSameAsHost(out, expected, spec.name);
      }
    }
    ASSERT_EQ(counts.size(), live.size()) << "every live item is drawn, no other";
    double chi2 = 0;
    const double expected = static_cast<double>(B) * kCalls / static_cast<double>(live.size());
    for (ItemKey k : live) {
      ASSERT_TRUE(counts.count(k)) << "live key " << k << " never drawn";
      const double d = static_cast<double>(counts[k]) - expected;
      chi2 += d * d / expected;
    }
    EXPECT_LT(chi2, testing_util::ChiSquareCritical(static_cast<double>(live.size() - 1)));
    EXPECT_EQ(table->Info().items_sampled, B * kCalls);
    uint64_t k = 0;
    float f = 0;
    Status s = table->UpdatePrioritiesFromDevice(&k, &f, 1, nullptr);
    EXPECT_THAT(s.message(), HasSubstr("the uniform selector has no priorities to update"));
  }
}

// Every step carries a tag (writer << 48 | trajectory << 24 | step), so a
// gathered window proves by itself that it read the right, unrecycled
// blocks: consecutive tags whose step part is the key's start, and page
// bytes that repeat the tag's low byte.
constexpr int64_t kPage = 4093;

TableSpec TaggedSpec(const std::string& name, Placement p) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"tag", DType::kI64, Shape()}, {"page", DType::kU8, Shape({kPage})}};
  spec.block_steps = 8;
  spec.sequence_length = 5;
  spec.padding = Padding::kTail;
  spec.capacity_steps = 160;  // small: writers keep evicting
  spec.placement = p;
  return spec;
}

void CheckTagged(const uint64_t* tags, const uint8_t* pages, const uint8_t* mask, ItemKey key,
                 int64_t L, const std::string& what) {
  ASSERT_EQ(mask[0], 1) << what;
  ASSERT_EQ(static_cast<int64_t>(tags[0] & 0xFFFFFF), ItemKeyStart(key)) << what;
  for (int64_t l = 0; l < L; ++l) {
    const uint8_t* page = pages + l * kPage;
    if (mask[l]) {
      ASSERT_EQ(tags[l], tags[0] + l) << what << " step " << l;
      ASSERT_EQ(page[0], static_cast<uint8_t>(tags[l])) << what << " step " << l;
      ASSERT_EQ(page[kPage - 1], static_cast<uint8_t>(tags[l])) << what << " step " << l;
    } else {
      ASSERT_EQ(tags[l], 0u) << what << " padded step " << l;
      ASSERT_EQ(page[0], 0) << what << " padded step " << l;
    }
  }
}

void WriteTagged(Table* table, uint64_t writer_index, std::atomic<bool>* stop, uint64_t seed) {
  auto writer = Take(table->NewWriter());
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> page(kPage);
  for (uint64_t traj = 0; !stop->load(); ++traj) {
    const int length = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < length; ++i) {
      uint64_t tag = (writer_index << 48) | ((traj & 0xFFFFFF) << 24) | static_cast<uint64_t>(i);
      std::fill(page.begin(), page.end(), static_cast<uint8_t>(tag));
      ConstTensor tensors[2] = {{DType::kI64, Shape(), &tag, 8},
                                {DType::kU8, Shape({kPage}), page.data(), page.size()}};
      if (!writer->Append(tensors).ok()) break;
    }
    (void)writer->End(EndReason::kTerminal);
  }
}

TEST_F(TableGpuTest, DeviceSamplerUnderEvictionNeverReadsRecycledBlocks) {
  for (Placement p : {Placement::Host(), Placement::Device(0)}) {
    for (bool on_device_draws : {false, true}) {
      TableSpec spec = TaggedSpec(
          std::string("t") + std::to_string(static_cast<int>(p.kind)) + (on_device_draws ? "d" : "h"), p);
      if (on_device_draws) spec.priority_device = 0;
      auto table = Take(db_->CreateTable(spec));
      std::atomic<bool> stop{false};
      std::vector<std::thread> writers;
      struct Joiner {
        std::atomic<bool>* stop;
        std::vector<std::thread>* threads;
        ~Joiner() {
          *stop = true;
          for (auto& t : *threads) {
            if (t.joinable()) t.join();
          }
        }
      } joiner{&stop, &writers};
      for (uint64_t w = 0; w < 2; ++w) {
        writers.emplace_back(WriteTagged, table.get(), w + 1, &stop, rng_());
      }
      DeviceSamplerOptions options;
      options.batch_size = 32;
      options.in_flight = 3;
      auto sampler = table->NewDeviceSampler(options);
      ASSERT_TRUE(sampler.ok()) << sampler.status().ToString();
      auto stream = Take(DeviceStream::Create(0));
      const int64_t B = options.batch_size, L = spec.sequence_length;
      std::vector<uint64_t> tags(B * L), keys(B);
      std::vector<uint8_t> pages(B * L * kPage), mask(B * L);
      // At least 60 batches, and on until the writers have evicted (slow
      // under compute-sanitizer).
      for (int i = 0; i < 60 || (table->Info().evicted_trajectories < 3 && i < 100000); ++i) {
        DeviceBatch batch;
        ASSERT_OK((*sampler)->Next(stream.handle(), &batch));
        // Read it on the learner's stream, then give it back.
        auto copy = [&](void* dst, const void* src, size_t bytes) {
          ASSERT_OK(CopyDeviceToHost(dst, src, bytes, stream.handle()));
        };
        copy(tags.data(), batch.columns[0], tags.size() * 8);
        copy(pages.data(), batch.columns[1], pages.size());
        copy(mask.data(), batch.mask, mask.size());
        copy(keys.data(), batch.keys, keys.size() * 8);
        ASSERT_OK((*sampler)->Release(batch, stream.handle()));
        for (int64_t b = 0; b < B; ++b) {
          CheckTagged(&tags[b * L], &pages[b * L * kPage], &mask[b * L], keys[b], L,
                      spec.name + " batch " + std::to_string(i) + " item " + std::to_string(b));
        }
      }
      stop = true;
      for (auto& t : writers) t.join();
      EXPECT_GT(table->Info().evicted_trajectories, 0) << "the test meant to evict";
      sampler->reset();
    }
  }
}

TEST_F(TableGpuTest, DeviceSamplerContract) {
  TableSpec spec = TaggedSpec("c", Placement::Device(0));
  auto table = Take(db_->CreateTable(spec));
  DeviceSamplerOptions options;
  options.in_flight = 0;
  EXPECT_THAT(table->NewDeviceSampler(options).status().message(),
              HasSubstr("in_flight is 0; it must be between 1 and 16"));
  options.in_flight = 2;
  options.batch_size = 0;
  EXPECT_THAT(table->NewDeviceSampler(options).status().message(),
              HasSubstr("batch_size is 0; it must be >= 1"));
  options.batch_size = 4;
  options.sample.gather = false;
  EXPECT_THAT(table->NewDeviceSampler(options).status().message(),
              HasSubstr("needs sample.gather = true"));
  options.sample.gather = true;
  options.sample.timeout = std::chrono::milliseconds(50);
  auto sampler = Take(table->NewDeviceSampler(options));
  DeviceBatch batch;
  // Empty table: the rate limiter admits nothing.
  Status s = sampler->Next(nullptr, &batch, std::chrono::milliseconds(2000));
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("the rate limiter admitted no batch of 4 within 50 ms"));
  std::atomic<bool> stop{false};
  std::thread writer(WriteTagged, table.get(), 1, &stop, rng_());
  struct Joiner {
    std::atomic<bool>* stop;
    std::thread* thread;
    ~Joiner() {
      *stop = true;
      if (thread->joinable()) thread->join();
    }
  } joiner{&stop, &writer};
  DeviceBatch a, b;
  ASSERT_OK(sampler->Next(nullptr, &a, std::chrono::milliseconds(5000)));
  ASSERT_OK(sampler->Next(nullptr, &b, std::chrono::milliseconds(5000)));
  s = sampler->Next(nullptr, &batch);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("all 2 batches are lent out"));
  ASSERT_OK(sampler->Release(a, nullptr));
  s = sampler->Release(a, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("is not lent out by this sampler"));
  ASSERT_OK(sampler->Release(b, nullptr));
  stop = true;
  writer.join();
  table->Close();
  // Closed: the background error reaches Next.
  Status closed;
  for (int i = 0; i < 10 && closed.ok(); ++i) {
    closed = sampler->Next(nullptr, &batch, std::chrono::milliseconds(2000));
    if (closed.ok()) ASSERT_OK(sampler->Release(batch, nullptr));
  }
  EXPECT_THAT(closed.message(), HasSubstr("table 'c' is closed"));
}

// Each placement's table is written twice, from device memory
// (AppendFromDevice) and from host memory (Append: to a device table, one
// upload per column and one scatter), and must read back as a host twin.
TEST_F(TableGpuTest, VectorWriterAppendsFromDeviceMemory) {
  for (Placement p : {Placement::Host(), Placement::Device(0)}) {
    TableSpec spec = GatherSpec("v" + std::to_string(static_cast<int>(p.kind)), rng_, p);
    spec.capacity_steps = 16384;
    spec.padding = Padding::kTail;  // every step of an ended trajectory starts an item
    TableSpec ref_spec = spec;
    ref_spec.name += "ref";
    ref_spec.placement = Placement::Host();
    TableSpec host_fed_spec = spec;
    host_fed_spec.name += "host_fed";
    auto table = Take(db_->CreateTable(spec));
    auto ref = Take(db_->CreateTable(ref_spec));
    auto host_fed = Take(db_->CreateTable(host_fed_spec));
    // Sometimes wide enough for several chunks of a call.
    const size_t N = 1 + rng_() % (rng_() % 2 == 0 ? 9 : 300);
    auto vw = Take(table->NewVectorWriter(N));
    auto ref_vw = Take(ref->NewVectorWriter(N));
    auto host_fed_vw = Take(host_fed->NewVectorWriter(N, {.threads = 1 + int(rng_() % 3)}));
    auto stream = Take(DeviceStream::Create(0));
    for (int step = 0; step < 25; ++step) {
      const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
      ASSERT_OK(vw->AppendFromDevice(v.device_t, stream.handle()));
      ASSERT_OK(ref_vw->Append(v.host_t));
      ASSERT_OK(host_fed_vw->Append(v.host_t));
      // The inputs may be reused once the stream passes the append.
      ASSERT_OK(stream.Synchronize());
      if (rng_() % 6 == 0) {
        const size_t env = rng_() % N;
        ASSERT_OK(vw->End(env, EndReason::kTerminal));
        ASSERT_OK(ref_vw->End(env, EndReason::kTerminal));
        ASSERT_OK(host_fed_vw->End(env, EndReason::kTerminal));
      }
    }
    EXPECT_EQ(table->Info().steps_inserted, ref->Info().steps_inserted);
    EXPECT_EQ(host_fed->Info().steps_inserted, ref->Info().steps_inserted);
    for (size_t env = 0; env < N; ++env) {
      ASSERT_OK(vw->End(env, EndReason::kTruncated));
      ASSERT_OK(ref_vw->End(env, EndReason::kTruncated));
      ASSERT_OK(host_fed_vw->End(env, EndReason::kTruncated));
    }
    std::vector<ItemKey> keys;
    SampleBatch probe;
    for (uint64_t id = 1; id <= 4 * N + 64; ++id) {
      for (int64_t start = 0; start < 25; ++start) {
        if (ref->Lookup(std::vector<ItemKey>{MakeItemKey(id, start)}, &probe).ok()) {
          keys.push_back(MakeItemKey(id, start));
        }
      }
    }
    ASSERT_FALSE(keys.empty());
    SampleBatch want;
    ASSERT_OK(ref->Lookup(keys, &want));
    for (Table* t : {table.get(), host_fed.get()}) {
      SampleBatch got;
      ASSERT_OK(t->Lookup(keys, &got));
      ExpectSameRows(want, got, t->name());
    }
    // Wrong shape: a validation error, nothing stored.
    const int64_t before = table->Info().steps_inserted;
    std::vector<ConstTensor> bad(spec.columns.size());
    for (size_t c = 0; c < bad.size(); ++c) {
      bad[c] = {spec.columns[c].dtype, spec.columns[c].shape.Prepend(static_cast<int64_t>(N + 1)),
                probe.columns[0].data(), 1};
    }
    Status s = vw->AppendFromDevice(bad, stream.handle());
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("device vector step, column '" + spec.columns[0].name +
                                       "' expects shape"));
    EXPECT_EQ(table->Info().steps_inserted, before);
  }
}

// A gather queued right behind a scatter on the same stream reads what the
// scatter wrote: a gather launched to overlap the kernel before it loads
// block bytes before that kernel is done only when that kernel is not a
// scatter (DeviceTier::EarlyReads). Each round appends a fresh step for
// every environment from device memory on a stream, then at once, on the
// same stream and without a sync, gathers those steps (LookupToDevice) and
// a second time (a gather behind a gather), checking both against the
// input; the tier is small, so the rows land in recycled blocks.
TEST_F(TableGpuTest, GathersRightBehindAScatterOnTheSameStreamReadItsRows) {
  for (Placement p : {Placement::Device(0), Placement::Host()}) {
    TableSpec spec;
    spec.name = std::string("s") + (p.kind == Placement::Kind::kDevice ? "dev" : "host");
    spec.columns = {{"x", DType::kU8, Shape({4096 + 16 * int64_t(rng_() % 3)})}};
    spec.block_steps = 4;
    const size_t N = 512 + rng_() % 1024;
    spec.capacity_steps = static_cast<int64_t>(N) * 8;
    spec.placement = p;
    auto table = Take(db_->CreateTable(spec));
    auto vw = Take(table->NewVectorWriter(N));
    auto stream = Take(DeviceStream::Create(0));
    DeviceOut out[2] = {AllocateOut(spec, static_cast<int64_t>(N)),
                        AllocateOut(spec, static_cast<int64_t>(N))};
    const size_t row = spec.columns[0].step_bytes();
    std::vector<ItemKey> keys(N);
    for (int round = 0; round < 24; ++round) {
      const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
      ASSERT_OK(vw->AppendFromDevice(v.device_t, stream.handle()));
      for (size_t env = 0; env < N; ++env) {
        keys[env] = MakeItemKey(vw->trajectory_id(env), round % 4);
      }
      for (DeviceOut& o : out) ASSERT_OK(table->LookupToDevice(keys, o.view, stream.handle()));
      ASSERT_OK(stream.Synchronize());
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<std::byte> got = ToHost(out[pass].columns[0], N * row);
        ASSERT_EQ(std::memcmp(got.data(), v.host[0].data(), N * row), 0)
            << spec.name << " round " << round << " pass " << pass;
      }
      if (round % 4 == 3) {
        for (size_t env = 0; env < N; ++env) ASSERT_OK(vw->End(env, EndReason::kTerminal));
      }
    }
    EXPECT_GT(table->Info().evicted_trajectories, 0) << spec.name;
  }
}

// A host Append into a device table stages its rows in pinned memory at most
// StagedRows::kMaxBytes (16 MiB) at a time: a call of more goes in
// pieces, each scattered before the next is staged, and must land whole.
TEST_F(TableGpuTest, HostVectorAppendsLargerThanTheStagingLandInPieces) {
  TableSpec spec;
  spec.name = "wide";
  spec.columns = {{"big", DType::kU8, Shape({65536})}, {"odd", DType::kU8, Shape({13})}};
  spec.block_steps = 4;
  spec.placement = Placement::Device(0);
  // 257 rows of 65549 bytes pass 16 MiB: two or three pieces a call.
  const size_t N = 257 + rng_() % 400;
  const int steps = 2 + static_cast<int>(rng_() % 4);
  // Room for every environment's two blocks: nothing is evicted.
  spec.capacity_steps = static_cast<int64_t>(N) * 8;
  TableSpec ref_spec = spec;
  ref_spec.name = "wide_ref";
  ref_spec.placement = Placement::Host();
  auto table = Take(db_->CreateTable(spec));
  auto ref = Take(db_->CreateTable(ref_spec));
  auto vw = Take(table->NewVectorWriter(N, {.threads = 1 + int(rng_() % 3)}));
  auto ref_vw = Take(ref->NewVectorWriter(N));
  auto stream = Take(DeviceStream::Create(0));
  for (int step = 0; step < steps; ++step) {
    const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
    ASSERT_OK(vw->Append(v.host_t));
    ASSERT_OK(ref_vw->Append(v.host_t));
  }
  EXPECT_EQ(table->Info().steps_inserted, static_cast<int64_t>(N) * steps);
  std::vector<ItemKey> keys;
  for (size_t env = 0; env < N; ++env) {
    for (int s = 0; s < steps; ++s) keys.push_back(MakeItemKey(vw->trajectory_id(env), s));
  }
  SampleBatch want, got;
  ASSERT_OK(ref->Lookup(keys, &want));
  ASSERT_OK(table->Lookup(keys, &got));
  ExpectSameRows(want, got, "wide");
}

// Every key of trajectories 1..ids whose item `table` can look up (steps
// below max_steps).
std::vector<ItemKey> LiveKeys(Table& table, uint64_t ids, int64_t max_steps) {
  std::vector<ItemKey> keys;
  SampleBatch probe;
  for (uint64_t id = 1; id <= ids; ++id) {
    for (int64_t start = 0; start < max_steps; ++start) {
      const ItemKey k = MakeItemKey(id, start);
      if (table.Lookup(std::vector<ItemKey>{k}, &probe).ok()) keys.push_back(k);
    }
  }
  return keys;
}

// Disarms kernels::LaunchFaults when a test leaves, a failed assertion
// included.
struct LaunchFaultsGuard {
  ~LaunchFaultsGuard() { kernels::LaunchFaults::Disarm(); }
};

// Every trajectory of `got` holds what the same trajectory, in id order, of
// `want` holds (ids may differ: a failed first step uses one up).
void ExpectSameTrajectories(Table& want, Table& got) {
  const std::vector<TrajectoryInfo> a = want.ListTrajectories({});
  const std::vector<TrajectoryInfo> b = got.ListTrajectories({});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("trajectory " + std::to_string(i));
    ASSERT_EQ(a[i].length, b[i].length);
    EXPECT_EQ(a[i].ended, b[i].ended);
    EXPECT_EQ(a[i].live_items, b[i].live_items);
    TrajectorySteps ra, rb;
    ASSERT_OK(want.ReadTrajectory(a[i].id, 0, a[i].length, &ra));
    ASSERT_OK(got.ReadTrajectory(b[i].id, 0, b[i].length, &rb));
    for (size_t c = 0; c < ra.columns.size(); ++c) {
      ASSERT_EQ(ra.columns[c].size_bytes(), rb.columns[c].size_bytes());
      EXPECT_EQ(std::memcmp(ra.columns[c].data(), rb.columns[c].data(), ra.columns[c].size_bytes()),
                0)
          << "column " << c;
    }
  }
}

// A launch that fails (made to, by kernels::LaunchFaults) stores nothing
// and says what failed: an AppendFromDevice whose scatter fails, a
// TrajectoryWriter Append or AppendMany into a device table whose scatter
// fails, and a LookupToDevice whose gather fails each return Internal
// naming the table and the kernel; the table counts nothing of the failed
// call (steps, items, trajectories, the rate limiter's inserts), and the
// calls after it store and read as in a host twin fed only the calls that
// succeeded. With 18 columns a call takes two launches, and the second one
// fails after the first was queued. A SampleToDevice whose gather fails
// still counts its host draws (as documented).
TEST_F(TableGpuTest, FailedLaunchesStoreNothingAndTheTableGoesOn) {
  LaunchFaultsGuard guard;
  for (Placement p : {Placement::Device(0), Placement::Host()}) {
    for (bool wide : {false, true}) {
      const std::string name =
          std::string(p.kind == Placement::Kind::kDevice ? "dev" : "pin") + (wide ? "_wide" : "");
      SCOPED_TRACE(name);
      TableSpec spec = GatherSpec(name, rng_, p);
      if (wide) {
        spec.columns.clear();
        for (int c = 0; c < 18; ++c) {
          spec.columns.push_back({"c" + std::to_string(c), c % 2 ? DType::kU8 : DType::kF32,
                                  Shape({1 + static_cast<int64_t>(rng_() % 9)})});
        }
      }
      spec.capacity_steps = 16384;                                  // nothing is evicted
      spec.sequence_length = 1 + static_cast<int64_t>(rng_() % 4);  // items from short trajectories
      TableSpec ref_spec = spec;
      ref_spec.name += "_ref";
      ref_spec.placement = Placement::Host();
      auto table = Take(db_->CreateTable(spec));
      auto ref = Take(db_->CreateTable(ref_spec));
      const size_t N = 1 + rng_() % 40;
      auto vw = Take(table->NewVectorWriter(N));
      auto ref_vw = Take(ref->NewVectorWriter(N));
      auto tw = Take(table->NewWriter());
      auto ref_tw = Take(ref->NewWriter());
      auto stream = Take(DeviceStream::Create(0));
      // The call's last launch fails.
      const int launches = wide ? 2 : 1;
      int failed = 0;
      for (int round = 0; round < 40; ++round) {
        // The last rounds fail a vector writer's launch if none failed yet
        // (by chance none did in about 1 run of 100).
        const bool must_fail = failed == 0 && round >= 36;
        // AppendFromDevice, Append, AppendMany
        const int kind = must_fail ? 0 : static_cast<int>(rng_() % 3);
        // A TrajectoryWriter into pinned blocks copies on the host: no launch.
        const bool launches_kernel = kind == 0 || p.kind == Placement::Kind::kDevice;
        const bool fail = must_fail || (launches_kernel && rng_() % 3 == 0);
        const TableInfo before = table->Info();
        if (fail) kernels::LaunchFaults::Arm(launches - 1, 1);
        Status s;
        if (kind == 0) {
          const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
          s = vw->AppendFromDevice(v.device_t, stream.handle());
          if (!fail) ASSERT_OK(ref_vw->Append(v.host_t));
          ASSERT_OK(stream.Synchronize());
        } else {
          const int64_t n = kind == 1 ? 1 : 1 + static_cast<int64_t>(rng_() % 6);
          const RandomVectorStep steps =
              MakeRandomVectorStep(spec, static_cast<size_t>(n), rng_, stream);
          if (kind == 1) {
            // One step: Append, with the step's shape (no leading 1).
            std::vector<ConstTensor> one = steps.host_t;
            for (size_t c = 0; c < one.size(); ++c) one[c].shape = spec.columns[c].shape;
            s = tw->Append(one);
            if (!fail) ASSERT_OK(ref_tw->Append(one));
          } else {
            s = tw->AppendMany(steps.host_t);
            if (!fail) ASSERT_OK(ref_tw->AppendMany(steps.host_t));
            if (fail) {
              EXPECT_THAT(s.message(), HasSubstr("AppendMany step 0 of " + std::to_string(n)));
            }
          }
        }
        if (!fail) {
          ASSERT_OK(s);
        } else {
          ++failed;
          EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
          EXPECT_THAT(s.message(), HasSubstr("table '" + spec.name + "'"));
          EXPECT_THAT(s.message(), HasSubstr("ScatterKernel launch"));
          EXPECT_THAT(s.message(), HasSubstr("cudaErrorLaunchOutOfResources"));
          const TableInfo after = table->Info();
          EXPECT_EQ(after.steps_inserted, before.steps_inserted);
          EXPECT_EQ(after.num_steps, before.num_steps);
          EXPECT_EQ(after.num_items, before.num_items);
          EXPECT_EQ(after.items_inserted, before.items_inserted);
          EXPECT_EQ(after.num_trajectories, before.num_trajectories);
          EXPECT_EQ(after.rate_limiter.inserts, before.rate_limiter.inserts);
        }
        if (rng_() % 5 == 0) {
          const size_t env = rng_() % N;
          ASSERT_OK(vw->End(env, EndReason::kTerminal));
          ASSERT_OK(ref_vw->End(env, EndReason::kTerminal));
          ASSERT_OK(tw->End(EndReason::kTruncated));
          ASSERT_OK(ref_tw->End(EndReason::kTruncated));
        }
      }
      kernels::LaunchFaults::Disarm();
      ASSERT_NO_FATAL_FAILURE(ExpectSameTrajectories(*ref, *table));

      // A gather that fails, then the same gather: what the CPU path reads.
      std::vector<ItemKey> keys;
      std::vector<double> priorities;
      ASSERT_OK(table->ItemPriorities(&keys, &priorities));
      ASSERT_FALSE(keys.empty());
      SampleBatch want;
      ASSERT_OK(table->Lookup(keys, &want));
      DeviceOut out = AllocateOut(spec, static_cast<int64_t>(keys.size()));
      kernels::LaunchFaults::Arm(launches - 1, 1);
      Status s = table->LookupToDevice(keys, out.view, stream.handle());
      EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("table '" + spec.name + "'"));
      EXPECT_THAT(s.message(), HasSubstr("GatherKernel launch"));
      ASSERT_OK(table->LookupToDevice(keys, out.view, stream.handle()));
      ExpectSameAsHost(out, want, name + " after a failed gather");
      EXPECT_GT(failed, 0);
      // SampleToDevice (drawn on the host): the draws count all the same.
      const int64_t samples = table->Info().rate_limiter.samples;
      const int64_t batch = 1 + static_cast<int64_t>(rng_() % keys.size());
      kernels::LaunchFaults::Arm(launches - 1, 1);
      s = table->SampleToDevice(batch, {}, out.view, stream.handle());
      EXPECT_EQ(s.code(), Status::Code::kInternal) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("GatherKernel launch"));
      EXPECT_EQ(table->Info().rate_limiter.samples, samples + batch);
      ASSERT_OK(table->SampleToDevice(batch, {}, out.view, stream.handle()));
      EXPECT_EQ(table->Info().rate_limiter.samples, samples + 2 * batch);
    }
  }
}

// TrajectoryWriter into a device table (TableImpl::AppendStepsToDevice):
// a call's rows are staged in pinned memory and scattered by runs. Random
// trajectories written by a random mix of Append and AppendMany (1 to 300
// steps: past 16 MiB of 64 KiB steps, so in pieces; across blocks; with and
// without priorities) through a tier that evicts, logged, must read as a
// host twin fed the same calls, before and after a reopen that replays the
// log.
TEST_F(TableGpuTest, TrajectoryWriterAppendManyIntoADeviceTableMatchesAHostTwin) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  TableSpec spec = GatherSpec("dev", rng_, Placement::Device(0));
  spec.logging = TableLogging::kOn;
  TableSpec host_spec = spec;
  host_spec.name = "host";
  host_spec.placement = Placement::Host();
  const int trajectories = 3 + static_cast<int>(rng_() % 5);
  int64_t longest = 0;
  std::vector<ItemKey> keys;
  const auto compare = [&](Table& dev, Table& host, const std::string& what) {
    EXPECT_EQ(dev.Info().num_steps, host.Info().num_steps) << what;
    EXPECT_EQ(dev.Info().num_items, host.Info().num_items) << what;
    keys = LiveKeys(host, static_cast<uint64_t>(trajectories), longest);
    ASSERT_FALSE(keys.empty()) << what;
    SampleBatch want, got;
    ASSERT_OK(host.Lookup(keys, &want));
    ASSERT_OK(dev.Lookup(keys, &got));
    ExpectSameRows(want, got, what);
    EXPECT_EQ(got.priorities, want.priorities) << what;
  };
  {
    auto db = Take(DB::Open(options, dir.path()));
    auto dev = Take(db->CreateTable(spec));
    auto host = Take(db->CreateTable(host_spec));
    auto w = Take(dev->NewWriter());
    auto host_w = Take(host->NewWriter());
    auto stream = Take(DeviceStream::Create(0));
    for (int traj = 0; traj < trajectories; ++traj) {
      const int64_t length = 1 + static_cast<int64_t>(rng_() % 300);
      longest = std::max(longest, length);
      for (int64_t done = 0; done < length;) {
        const int64_t n = 1 + static_cast<int64_t>(rng_() % static_cast<uint64_t>(length - done));
        const RandomVectorStep steps =
            MakeRandomVectorStep(spec, static_cast<size_t>(n), rng_, stream);
        std::vector<double> priorities;
        if (rng_() % 2) {
          for (int64_t i = 0; i < n; ++i) priorities.push_back(static_cast<double>(rng_() % 64));
        }
        if (n == 1 && rng_() % 2) {
          // One step: Append, with the step's shape (no leading 1).
          std::vector<ConstTensor> step = steps.host_t;
          for (size_t c = 0; c < step.size(); ++c) step[c].shape = spec.columns[c].shape;
          const std::optional<double> p =
              priorities.empty() ? std::nullopt : std::optional<double>(priorities[0]);
          ASSERT_OK(w->Append(step, p));
          ASSERT_OK(host_w->Append(step, p));
        } else {
          ASSERT_OK(w->AppendMany(steps.host_t, priorities));
          ASSERT_OK(host_w->AppendMany(steps.host_t, priorities));
        }
        done += n;
      }
      ASSERT_EQ(w->num_steps(), length);
      ASSERT_OK(w->End(EndReason::kTerminal));
      ASSERT_OK(host_w->End(EndReason::kTerminal));
    }
    EXPECT_EQ(dev->Info().evicted_trajectories, host->Info().evicted_trajectories);
    compare(*dev, *host, "written");
  }
  auto db = Take(DB::Open(options, dir.path()));
  EXPECT_GT(db->recovery_info().wal_records, 0u) << "recovered from the log";
  auto dev = Take(db->GetTable("dev"));
  auto host = Take(db->GetTable("host"));
  compare(*dev, *host, "replayed");
}

// AppendMany into a device queue: a run of steps ends where the rate
// limiter would wait, so that the steps before it are scattered and
// published first. A sampler taking items one at a time while the writer
// waits must see every step, in order, byte for byte; and a writer that
// times out reports the step it stopped at, with the steps before it
// stored.
TEST_F(TableGpuTest, AppendManyIntoADeviceQueueRunsUntilTheRateLimiterWaits) {
  const int64_t size = 3 + static_cast<int64_t>(rng_() % 20);
  TableSpec spec =
      TableSpec::Queue("q", {{"x", DType::kU8, Shape({37})}, {"y", DType::kF32, Shape({3})}}, size);
  spec.block_steps = std::vector<int64_t>{1, 4, 7, 16}[rng_() % 4];
  // Room for both trajectories: consumed steps keep their blocks until
  // their trajectory leaves.
  spec.capacity_steps = 512;
  spec.placement = Placement::Device(0);
  auto table = Take(db_->CreateTable(spec));
  auto stream = Take(DeviceStream::Create(0));
  const int64_t n = size + 1 + static_cast<int64_t>(rng_() % 200);
  const RandomVectorStep steps = MakeRandomVectorStep(spec, static_cast<size_t>(n), rng_, stream);

  // Timed out: the queue takes `size` steps, then the writer waits.
  {
    auto w = Take(table->NewWriter({.timeout = std::chrono::milliseconds(50)}));
    const Status s = w->AppendMany(steps.host_t);
    EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
    EXPECT_THAT(s.ToString(),
                HasSubstr("AppendMany step " + std::to_string(size) + " of " + std::to_string(n)));
    EXPECT_EQ(w->num_steps(), size);
    EXPECT_EQ(table->Info().num_items, size);
    SampleBatch batch;
    ASSERT_OK(table->Sample(size, SampleOptions{}, &batch));
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const size_t bytes = static_cast<size_t>(size) * spec.columns[c].step_bytes();
      ASSERT_EQ(std::memcmp(batch.columns[c].data(), steps.host[c].data(), bytes), 0)
          << "column " << c << ": the steps before the timeout";
    }
  }

  // With a sampler: every step arrives, in order. (The writer gives up in
  // time if the sampler fails, so that the thread can be joined.)
  auto w = Take(table->NewWriter({.timeout = std::chrono::seconds(60)}));
  Status written;
  std::thread writer([&] { written = w->AppendMany(steps.host_t); });
  struct Join {
    std::thread& thread;
    ~Join() {
      if (thread.joinable()) thread.join();
    }
  } join{writer};
  for (int64_t i = 0; i < n; ++i) {
    SampleBatch batch;
    SampleOptions o;
    o.timeout = std::chrono::seconds(30);
    const Status s = table->Sample(1, o, &batch);
    ASSERT_TRUE(s.ok()) << "step " << i << ": " << s.ToString();
    ASSERT_EQ(ItemKeyStart(batch.keys[0]), i);
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const size_t bytes = spec.columns[c].step_bytes();
      ASSERT_EQ(std::memcmp(batch.columns[c].data(), steps.host[c].data() + i * bytes, bytes), 0)
          << "column " << c << " of step " << i;
    }
  }
  writer.join();
  EXPECT_OK(written);
  EXPECT_EQ(table->Info().num_items, 0);
}

}  // namespace
// Device-fed durability (docs/durability.md): in a device table with
// logging on, steps written with AppendFromDevice and priorities set with
// UpdatePrioritiesFromDevice reach the log through a device-to-host copy, so
// a reopen that replays only the log (no checkpoint) restores both, byte for
// byte, equal to a host-written twin. A device table with the default
// logging is not logged: it comes back as of its last checkpoint (empty).
TEST_F(TableGpuTest, DeviceFedStepsAndPrioritiesSurviveReopenFromTheLog) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  TableSpec spec = GatherSpec("dev", rng_, Placement::Device(0));
  spec.capacity_steps = 4096;
  spec.padding = Padding::kTail;
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_device = 0;
  spec.logging = TableLogging::kOn;
  TableSpec ref_spec = spec;
  ref_spec.name = "ref";
  ref_spec.placement = Placement::Host();
  ref_spec.priority_device = -1;
  ref_spec.logging = TableLogging::kDefault;
  TableSpec plain_spec = spec;
  plain_spec.name = "plain";
  plain_spec.logging = TableLogging::kDefault;
  const size_t N = 1 + rng_() % 9;
  const int steps = 1 + static_cast<int>(rng_() % 20);
  std::vector<ItemKey> keys;
  {
    auto db = Take(DB::Open(options, dir.path()));
    auto table = Take(db->CreateTable(spec));
    auto ref = Take(db->CreateTable(ref_spec));
    auto plain = Take(db->CreateTable(plain_spec));
    auto vw = Take(table->NewVectorWriter(N));
    auto ref_vw = Take(ref->NewVectorWriter(N));
    auto plain_vw = Take(plain->NewVectorWriter(N));
    auto stream = Take(DeviceStream::Create(0));
    for (int step = 0; step < steps; ++step) {
      const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
      ASSERT_OK(vw->AppendFromDevice(v.device_t, stream.handle()));
      ASSERT_OK(plain_vw->AppendFromDevice(v.device_t, stream.handle()));
      ASSERT_OK(ref_vw->Append(v.host_t));
      ASSERT_OK(stream.Synchronize());
    }
    for (size_t env = 0; env < N; ++env) {
      ASSERT_OK(vw->End(env, EndReason::kTerminal));
      ASSERT_OK(plain_vw->End(env, EndReason::kTerminal));
      ASSERT_OK(ref_vw->End(env, EndReason::kTerminal));
    }
    EXPECT_EQ(plain->Info().num_steps, static_cast<int64_t>(N) * steps);
    SampleBatch probe;
    for (uint64_t id = 1; id <= 64; ++id) {
      for (int64_t start = 0; start < steps; ++start) {
        if (ref->Lookup(std::vector<ItemKey>{MakeItemKey(id, start)}, &probe).ok()) {
          keys.push_back(MakeItemKey(id, start));
        }
      }
    }
    ASSERT_FALSE(keys.empty());
    // Fresh priorities for a random half of the items, from device memory
    // into the device table and from the host into its twin.
    std::vector<uint64_t> update_keys;
    std::vector<float> update_priorities;
    for (ItemKey k : keys) {
      if (rng_() % 2 == 0) continue;
      update_keys.push_back(k);
      update_priorities.push_back(static_cast<float>(1 + rng_() % 1000) / 8.0f);
    }
    if (!update_keys.empty()) {
      auto d_keys = Take(DeviceBuffer::Allocate(0, update_keys.size() * sizeof(uint64_t)));
      auto d_prios = Take(DeviceBuffer::Allocate(0, update_priorities.size() * sizeof(float)));
      ASSERT_OK(d_keys.CopyFromHost(update_keys.data(), update_keys.size() * sizeof(uint64_t)));
      ASSERT_OK(d_prios.CopyFromHost(update_priorities.data(),
                                     update_priorities.size() * sizeof(float)));
      ASSERT_OK(table->UpdatePrioritiesFromDevice(d_keys.as<uint64_t>(), d_prios.as<float>(),
                                                  static_cast<int64_t>(update_keys.size()),
                                                  stream.handle()));
      ASSERT_OK(stream.Synchronize());
      const std::vector<double> as_double(update_priorities.begin(), update_priorities.end());
      ASSERT_OK(ref->UpdatePriorities(std::vector<ItemKey>(update_keys.begin(), update_keys.end()),
                                      as_double));
    }
  }
  auto db = Take(DB::Open(options, dir.path()));
  EXPECT_GT(db->recovery_info().wal_records, 0u) << "recovered from the log";
  auto table = Take(db->GetTable("dev"));
  auto ref = Take(db->GetTable("ref"));
  EXPECT_EQ(table->Info().placement, "device:0");
  EXPECT_EQ(Take(db->GetTable("plain"))->Info().num_steps, 0) << "not logged by default";
  SampleBatch want, got;
  ASSERT_OK(ref->Lookup(keys, &want));
  ASSERT_OK(table->Lookup(keys, &got));
  ExpectSameRows(want, got, "dev");
  EXPECT_EQ(got.priorities, want.priorities);
}

namespace {

// A prioritized table whose priorities live on GPU 0 (host placement:
// logged by default), of one f32[2] column.
TableSpec GpuPrioritySpec() {
  TableSpec spec;
  spec.name = "p";
  spec.columns = {{"x", DType::kF32, Shape{2}}};
  spec.capacity_steps = 1024;
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_device = 0;
  return spec;
}

// One trajectory of `steps` steps of priority 1: its items' keys go to
// *keys, and (*want)[key] = 1.
void WritePriorityTrajectory(Table* table, int steps, std::vector<ItemKey>* keys,
                             std::map<ItemKey, double>* want) {
  auto writer = Take(table->NewWriter());
  for (int i = 0; i < steps; ++i) {
    const float v[2] = {static_cast<float>(i), 1.0f};
    const ConstTensor step[] = {{DType::kF32, Shape{2}, v, sizeof(v)}};
    ASSERT_OK(writer->Append(step, 1.0));
    keys->push_back(MakeItemKey(writer->trajectory_id(), i));
    (*want)[keys->back()] = 1.0;
  }
  ASSERT_OK(writer->End(EndReason::kTerminal));
}

// `rounds` calls of UpdatePrioritiesFromDevice on `stream`, each giving a
// random half of `keys` fresh priorities from device memory (kept alive in
// *inputs until the stream is done); (*want)[key] is each key's last one.
void UpdateRandomHalvesOnGpu(Table* table, const std::vector<ItemKey>& keys, int rounds,
                             std::mt19937_64& rng, const DeviceStream& stream,
                             std::vector<DeviceBuffer>* inputs, std::map<ItemKey, double>* want) {
  for (int round = 0; round < rounds; ++round) {
    std::vector<uint64_t> k;
    std::vector<float> p;
    for (const ItemKey key : keys) {
      if (rng() % 2) continue;
      k.push_back(key);
      p.push_back(static_cast<float>(1 + rng() % 1000) / 8.0f);
      (*want)[key] = p.back();
    }
    if (k.empty()) continue;
    inputs->push_back(Take(DeviceBuffer::Allocate(0, k.size() * sizeof(uint64_t))));
    ASSERT_OK(inputs->back().CopyFromHost(k.data(), k.size() * sizeof(uint64_t)));
    const uint64_t* d_keys = inputs->back().as<uint64_t>();
    inputs->push_back(Take(DeviceBuffer::Allocate(0, p.size() * sizeof(float))));
    ASSERT_OK(inputs->back().CopyFromHost(p.data(), p.size() * sizeof(float)));
    ASSERT_OK(table->UpdatePrioritiesFromDevice(d_keys, inputs->back().as<float>(),
                                                static_cast<int64_t>(k.size()), stream.handle()));
  }
}

}  // namespace

// Priorities set on the GPU of a logged table reach its items and the log
// off the caller's path (docs/durability.md, "Priorities set on the GPU"):
// a checkpoint taken right after the calls, the caller's stream never
// synchronized, holds every one of them (the host's copies show them at
// once), and so does a reopen. The last update of a key wins.
TEST_F(TableGpuTest, ACheckpointHoldsThePrioritiesSetOnTheGpuBeforeIt) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  const int steps = 8 + static_cast<int>(rng_() % 64);
  std::vector<ItemKey> keys;
  std::map<ItemKey, double> want;
  {
    auto db = Take(DB::Open(options, dir.path()));
    auto table = Take(db->CreateTable(GpuPrioritySpec()));
    ASSERT_NO_FATAL_FAILURE(WritePriorityTrajectory(table.get(), steps, &keys, &want));
    auto stream = Take(DeviceStream::Create(0));
    std::vector<DeviceBuffer> inputs;  // alive until the copies land
    ASSERT_NO_FATAL_FAILURE(
        UpdateRandomHalvesOnGpu(table.get(), keys, 6, rng_, stream, &inputs, &want));
    ASSERT_OK(db->Checkpoint());
    SampleBatch got;
    ASSERT_OK(table->Lookup(keys, &got));
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(got.priorities[i], want[keys[i]]) << "key " << keys[i] << ", after the checkpoint";
    }
    ASSERT_OK(stream.Synchronize());
  }
  auto db = Take(DB::Open(options, dir.path()));
  auto table = Take(db->GetTable("p"));
  SampleBatch got;
  ASSERT_OK(table->Lookup(keys, &got));
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(got.priorities[i], want[keys[i]]) << "key " << keys[i] << ", reopened";
  }
}

// The log gets the priorities set on the GPU of a logged table within
// moments, with no checkpoint and no close (docs/durability.md, "Priorities
// set on the GPU": a crash loses at most about the last 50 ms of them): a
// copy of the database directory taken while it is open, as a crash would
// leave it, reopens with every item's latest priority.
TEST_F(TableGpuTest, TheLogHoldsThePrioritiesSetOnTheGpuWithinMoments) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  const int steps = 8 + static_cast<int>(rng_() % 64);
  std::vector<ItemKey> keys;
  std::map<ItemKey, double> want;
  auto db = Take(DB::Open(options, dir.path()));
  auto table = Take(db->CreateTable(GpuPrioritySpec()));
  ASSERT_NO_FATAL_FAILURE(WritePriorityTrajectory(table.get(), steps, &keys, &want));
  auto stream = Take(DeviceStream::Create(0));
  std::vector<DeviceBuffer> inputs;  // alive until the stream is done
  ASSERT_NO_FATAL_FAILURE(UpdateRandomHalvesOnGpu(
      table.get(), keys, 1 + static_cast<int>(rng_() % 6), rng_, stream, &inputs, &want));
  ASSERT_OK(stream.Synchronize());
  // Copies until one holds them all: 40 tries, 100 ms apart.
  std::map<ItemKey, double> got;
  for (int attempt = 0; attempt < 40 && got != want; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    TempDir copy;
    std::filesystem::copy(dir.path(), copy.path(), std::filesystem::copy_options::recursive);
    auto reopened = Take(DB::Open(options, copy.path()));
    SampleBatch batch;
    ASSERT_OK(Take(reopened->GetTable("p"))->Lookup(keys, &batch));
    got.clear();
    for (size_t i = 0; i < keys.size(); ++i) got[keys[i]] = batch.priorities[i];
  }
  EXPECT_EQ(got, want) << "a copy taken 4 s after the updates lacks some of them";
}

// A device table with the default logging is durable as of its last
// checkpoint, which copies its blocks out of device memory: after a crash it
// equals a host twin (also unlogged) as of that checkpoint, byte for byte.
// Replay into device blocks stages a record's rows and scatters them
// together: rows waiting go first when a step needs a new block (which
// evicts here, the tier holding two rounds of trajectories) and when they
// fill the 16 MiB staging (a record of 257+ environments x 64 KiB). The
// replayed device table must read as its replayed host twin.
TEST_F(TableGpuTest, LoggedDeviceTableReplaysLargeRecordsThroughEvictions) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  const size_t N = 257 + rng_() % 60;
  TableSpec spec;
  spec.name = "dev";
  spec.columns = {{"big", DType::kU8, Shape({65536})}, {"odd", DType::kU8, Shape({13})}};
  spec.block_steps = 4;
  spec.capacity_steps = static_cast<int64_t>(N) * 4 * 2;
  spec.placement = Placement::Device(0);
  spec.logging = TableLogging::kOn;
  TableSpec host_spec = spec;
  host_spec.name = "host";
  host_spec.placement = Placement::Host();
  const int rounds = 3 + static_cast<int>(rng_() % 2);
  {
    auto db = Take(DB::Open(options, dir.path()));
    auto dev = Take(db->CreateTable(spec));
    auto host = Take(db->CreateTable(host_spec));
    auto dev_vw = Take(dev->NewVectorWriter(N));
    auto host_vw = Take(host->NewVectorWriter(N));
    auto stream = Take(DeviceStream::Create(0));
    for (int round = 0; round < rounds; ++round) {
      for (int step = 0; step < 4; ++step) {
        const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
        ASSERT_OK(dev_vw->Append(v.host_t));
        ASSERT_OK(host_vw->Append(v.host_t));
      }
      for (size_t env = 0; env < N; ++env) {
        ASSERT_OK(dev_vw->End(env, EndReason::kTerminal));
        ASSERT_OK(host_vw->End(env, EndReason::kTerminal));
      }
    }
    EXPECT_GT(dev->Info().evicted_trajectories, 0);
  }
  auto db = Take(DB::Open(options, dir.path()));
  EXPECT_GT(db->recovery_info().wal_records, 0u) << "recovered from the log";
  auto dev = Take(db->GetTable("dev"));
  auto host = Take(db->GetTable("host"));
  EXPECT_EQ(dev->Info().num_steps, host->Info().num_steps);
  EXPECT_EQ(dev->Info().num_steps, static_cast<int64_t>(N) * 4 * 2);
  std::vector<ItemKey> keys;
  SampleBatch probe;
  for (uint64_t id = 1; id <= N * rounds; ++id) {
    if (host->Lookup(std::vector<ItemKey>{MakeItemKey(id, 0)}, &probe).ok()) {
      for (int64_t s = 0; s < 4; ++s) keys.push_back(MakeItemKey(id, s));
    }
  }
  ASSERT_EQ(keys.size(), N * 4 * 2);
  SampleBatch want, got;
  ASSERT_OK(host->Lookup(keys, &want));
  ASSERT_OK(dev->Lookup(keys, &got));
  ExpectSameRows(want, got, "dev");
}

TEST_F(TableGpuTest, UnloggedDeviceTableComesBackAsOfItsLastCheckpoint) {
  TempDir dir;
  const DBOptions options = testing_util::ManualCheckpoints();
  TableSpec spec = GatherSpec("dev", rng_, Placement::Device(0));
  spec.capacity_steps = 4096;
  spec.padding = Padding::kTail;
  TableSpec host_spec = spec;
  host_spec.name = "host";
  host_spec.placement = Placement::Host();
  host_spec.logging = TableLogging::kOff;
  const size_t N = 1 + rng_() % 9;
  int64_t checkpointed_steps = 0;
  std::vector<ItemKey> keys;
  {
    auto db = Take(DB::Open(options, dir.path()));
    auto dev = Take(db->CreateTable(spec));
    auto host = Take(db->CreateTable(host_spec));
    auto stream = Take(DeviceStream::Create(0));
    // Two rounds: the first is checkpointed, the second lost in the crash.
    for (int round = 0; round < 2; ++round) {
      auto dev_vw = Take(dev->NewVectorWriter(N));
      auto host_vw = Take(host->NewVectorWriter(N));
      const int steps = 1 + static_cast<int>(rng_() % 12);
      for (int step = 0; step < steps; ++step) {
        const RandomVectorStep v = MakeRandomVectorStep(spec, N, rng_, stream);
        ASSERT_OK(dev_vw->AppendFromDevice(v.device_t, stream.handle()));
        ASSERT_OK(host_vw->Append(v.host_t));
        ASSERT_OK(stream.Synchronize());
      }
      for (size_t env = 0; env < N; ++env) {
        ASSERT_OK(dev_vw->End(env, EndReason::kTerminal));
        ASSERT_OK(host_vw->End(env, EndReason::kTerminal));
      }
      if (round == 0) {
        ASSERT_OK(db->Checkpoint());
        checkpointed_steps = dev->Info().num_steps;
        EXPECT_EQ(checkpointed_steps, static_cast<int64_t>(N) * steps);
        SampleBatch probe;
        for (uint64_t id = 1; id <= 64; ++id) {
          for (int64_t start = 0; start < steps; ++start) {
            if (host->Lookup(std::vector<ItemKey>{MakeItemKey(id, start)}, &probe).ok()) {
              keys.push_back(MakeItemKey(id, start));
            }
          }
        }
      }
    }
    EXPECT_GT(dev->Info().num_steps, checkpointed_steps);
  }
  ASSERT_FALSE(keys.empty());
  auto db = Take(DB::Open(options, dir.path()));
  auto dev = Take(db->GetTable("dev"));
  auto host = Take(db->GetTable("host"));
  EXPECT_EQ(dev->Info().placement, "device:0");
  EXPECT_EQ(dev->Info().num_steps, checkpointed_steps);
  EXPECT_EQ(host->Info().num_steps, checkpointed_steps);
  SampleBatch want, got;
  ASSERT_OK(host->Lookup(keys, &want));
  ASSERT_OK(dev->Lookup(keys, &got));
  ExpectSameRows(want, got, "dev");
}

}  // namespace replaydb
