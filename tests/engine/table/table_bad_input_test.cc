// Bad input to the writers and to Sample through the public API: enum values
// no build knows, counts and shapes whose sizes overflow or exceed what
// memory can hold. Each is refused with a Status naming the value, before
// anything is stored, logged or drawn, and nothing is thrown.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "engine/table/writers.h"
#include "replaydb/db.h"
#include "wal/records.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::StepData;
using testing_util::TempDir;
using ::testing::HasSubstr;

class TableBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }

  TableSpec Spec(const std::string& name) {
    TableSpec spec;
    spec.name = name;
    spec.columns = {{"obs", DType::kF32, {1 + static_cast<int64_t>(rng_() % 4)}},
                    {"act", DType::kI32, {}}};
    spec.capacity_steps = 1024;
    spec.block_steps = 1 + static_cast<int64_t>(rng_() % 8);
    return spec;
  }
  // An EndReason value past the known ones.
  EndReason UnknownReason() { return static_cast<EndReason>(2 + rng_() % 254); }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableBadInputTest, WriterEndRefusesAnUnknownReasonAndKeepsTheTrajectoryOpen) {
  const TableSpec spec = Spec("ends");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  const int64_t n = 1 + static_cast<int64_t>(rng_() % 10);
  for (int64_t i = 0; i < n; ++i) ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
  const uint64_t id = writer->trajectory_id();
  const EndReason bad = UnknownReason();
  const Status s = writer->End(bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'ends': End: reason " +
                             std::to_string(static_cast<int>(bad)) +
                             " is not an EndReason (0 terminal, 1 truncated)");
  // Nothing changed: the trajectory is open and takes more steps.
  EXPECT_EQ(writer->trajectory_id(), id);
  EXPECT_EQ(writer->num_steps(), n);
  EXPECT_EQ(table->Info().num_open_trajectories, 1);
  ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
  ASSERT_OK(writer->End(EndReason::kTerminal));
  const std::vector<TrajectoryInfo> listed = table->ListTrajectories();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].ended);
  EXPECT_EQ(listed[0].end_reason, EndReason::kTerminal);
  EXPECT_EQ(listed[0].length, n + 1);
  // Ending an empty trajectory with a bad reason is refused too.
  EXPECT_EQ(writer->End(bad).code(), Status::Code::kInvalidArgument);
}

TEST_F(TableBadInputTest, VectorWriterEndsRefuseAnUnknownReason) {
  const TableSpec spec = Spec("vector_ends");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  const size_t envs = 2 + rng_() % 6;
  ASSERT_OK_AND_ASSIGN(auto vw, table->NewVectorWriter(envs));
  std::vector<std::vector<std::byte>> data(spec.columns.size());
  std::vector<ConstTensor> tensors;
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    data[c].resize(col.step_bytes() * envs);
    tensors.push_back({col.dtype, col.shape.Prepend(static_cast<int64_t>(envs)), data[c].data(),
                       data[c].size()});
  }
  ASSERT_OK(vw->Append(tensors));
  const EndReason bad = UnknownReason();
  const std::string reason = "reason " + std::to_string(static_cast<int>(bad)) +
                             " is not an EndReason (0 terminal, 1 truncated)";
  Status s = vw->End(0, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'vector_ends': End: " + reason);
  std::vector<size_t> all(envs);
  for (size_t e = 0; e < envs; ++e) all[e] = e;
  s = vw->EndMany(all, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'vector_ends': EndMany: " + reason);
  EXPECT_EQ(table->Info().num_open_trajectories, static_cast<int64_t>(envs));
  ASSERT_OK(vw->EndMany(all, EndReason::kTruncated));
  EXPECT_EQ(table->Info().num_open_trajectories, 0);

  // A vector table's writer (one trajectory of all lanes) checks it too.
  TableSpec lanes = Spec("lanes");
  lanes.lanes = static_cast<int64_t>(envs);
  std::shared_ptr<Table> lane_table = testing_util::CreateTable(db_.get(), lanes);
  ASSERT_NE(lane_table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto lw, lane_table->NewVectorWriter(envs));
  s = lw->End(0, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'lanes': End: " + reason);
  s = lw->EndMany(all, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'lanes': EndMany: " + reason);
}

TEST_F(TableBadInputTest, VectorWriterOfTooManyEnvironmentsIsRefusedNotThrown) {
  const TableSpec spec = Spec("envs");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  const size_t limit = size_t{1} << 24;  // kMaxVectorWriterEnvs
  for (size_t envs : {size_t{1} << 40, limit + 1, std::numeric_limits<size_t>::max(),
                      limit + 1 + rng_() % (size_t{1} << 50)}) {
    auto vw = table->NewVectorWriter(envs);
    ASSERT_FALSE(vw.ok());
    EXPECT_EQ(vw.status().code(), Status::Code::kInvalidArgument) << vw.status().ToString();
    EXPECT_EQ(vw.status().message(),
              "table 'envs': a vector writer of " + std::to_string(envs) +
                  " environments is more than the limit of 16777216 (kMaxVectorWriterEnvs)");
  }
}

// Every environment of a vector writer keeps a trajectory open in a block of
// its own: a table with fewer blocks refuses the writer, saying what fits,
// instead of evicting open trajectories on the first append.
TEST_F(TableBadInputTest, VectorWriterOfMoreEnvironmentsThanBlocksIsRefusedSayingWhatFits) {
  TableSpec spec = Spec("blocks");
  const int64_t blocks = 1 + static_cast<int64_t>(rng_() % 6);
  spec.block_steps = 4 << (rng_() % 4);
  spec.capacity_steps = blocks * spec.block_steps;
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->Info().blocks_capacity, blocks);
  const size_t envs = static_cast<size_t>(blocks) + 1 + rng_() % 5;
  auto refused = table->NewVectorWriter(envs);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "table 'blocks': a vector writer of " + std::to_string(envs) +
                " environments keeps " + std::to_string(envs) +
                " trajectories open, each in a block of its own; the table has " +
                std::to_string(blocks) + " block" + (blocks == 1 ? "" : "s") + " of " +
                std::to_string(spec.block_steps) + " steps: give capacity_steps >= " +
                std::to_string(static_cast<int64_t>(envs) * spec.block_steps) +
                ", or block_steps <= " +
                std::to_string(std::max<int64_t>(
                    1, spec.capacity_steps / static_cast<int64_t>(envs))));
  // As many environments as blocks: every one writes.
  ASSERT_OK_AND_ASSIGN(auto vw, table->NewVectorWriter(static_cast<size_t>(blocks)));
  std::vector<StepData> steps;
  for (int64_t e = 0; e < blocks; ++e) steps.push_back(RandomStep(spec, rng_));
  std::vector<ConstTensor> stacked;
  std::vector<std::vector<uint8_t>> bytes(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    for (const StepData& s : steps) {
      const auto* p = static_cast<const uint8_t*>(s.tensors[c].data);
      bytes[c].insert(bytes[c].end(), p, p + s.tensors[c].size_bytes);
    }
    std::vector<int64_t> dims = {blocks};
    for (int64_t d : spec.columns[c].shape.dims()) dims.push_back(d);
    stacked.push_back({spec.columns[c].dtype, Shape::FromSpan(dims), bytes[c].data(), bytes[c].size()});
  }
  ASSERT_OK(vw->Append(stacked));
  EXPECT_EQ(table->Info().num_steps, blocks);
}

TEST_F(TableBadInputTest, AppendManyWithALeadingDimThatOverflowsIsRefused) {
  TableSpec spec = Spec("many");
  spec.columns = {{"obs", DType::kF32, {}}};
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  // 2^62 f32 values are 2^64 bytes: wrapped, the size was 0 and matched a
  // tensor of no data.
  const int64_t n = (int64_t{1} << 62) + static_cast<int64_t>(rng_() % 4) * (int64_t{1} << 60);
  ConstTensor t{DType::kF32, Shape{n}, nullptr, 0};
  Status s = writer->AppendMany(std::span<const ConstTensor>(&t, 1));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'many': AppendMany, column 'obs': " + std::to_string(n) +
                             " rows of 4 bytes overflow 64 bits");
  // A negative count of steps.
  t.shape = Shape{-3};
  s = writer->AppendMany(std::span<const ConstTensor>(&t, 1));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'many': AppendMany: the tensors' leading dim (steps) is -3; it "
                         "must be >= 0");
  EXPECT_EQ(table->Info().steps_inserted, 0);
  EXPECT_EQ(writer->num_steps(), 0);
}

TEST_F(TableBadInputTest, SampleAndLookupTooLargeForMemoryAreRefusedBeforeDrawing) {
  // Items of 2^24 steps: a batch of 2^24 of them needs 2^48 bytes of mask
  // alone.
  TableSpec spec;
  spec.name = "long";
  spec.columns = {{"obs", DType::kU8, {}}};
  spec.sequence_length = kMaxTrajectorySteps;
  spec.padding = Padding::kTail;
  spec.block_steps = 65536;
  spec.capacity_steps = kMaxTrajectorySteps;
  spec.max_times_sampled = 3;
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
  ASSERT_OK(writer->End(EndReason::kTerminal));
  ASSERT_EQ(table->Info().num_items, 1);

  const int64_t B = int64_t{1} << (16 + rng_() % 9);  // 2^16 .. 2^24
  const int64_t L = kMaxTrajectorySteps;
  const uint64_t bytes = static_cast<uint64_t>(B) * L * 2 + static_cast<uint64_t>(B) * 36;
  auto drawn = table->Sample(B);
  ASSERT_FALSE(drawn.ok());
  EXPECT_EQ(drawn.status().code(), Status::Code::kResourceExhausted) << drawn.status().ToString();
  EXPECT_EQ(drawn.status().message(),
            "table 'long': a batch of " + std::to_string(B) + " items of " + std::to_string(L) +
                " steps needs " + std::to_string(bytes) +
                " bytes of host memory, more than the limit of 1099511627776 (kMaxSampleBytes)");
  // Nothing was drawn: no counter moved, the item was not consumed.
  TableInfo info = table->Info();
  EXPECT_EQ(info.items_sampled, 0);
  EXPECT_EQ(info.rate_limiter.samples, 0);
  EXPECT_EQ(info.num_items, 1);

  // Below the limit but more than the machine has: refused too, rather
  // than mapped (the allocator overcommits) and killed while zero-filling.
  const uint64_t memory =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const int64_t big = static_cast<int64_t>(memory / (2 * static_cast<uint64_t>(L))) + 1;
  const uint64_t big_bytes = static_cast<uint64_t>(big) * L * 2 + static_cast<uint64_t>(big) * 36;
  if (big_bytes <= (uint64_t{1} << 40)) {
    drawn = table->Sample(big);
    ASSERT_FALSE(drawn.ok());
    EXPECT_EQ(drawn.status().code(), Status::Code::kResourceExhausted) << drawn.status().ToString();
    EXPECT_EQ(drawn.status().message(),
              "table 'long': a batch of " + std::to_string(big) + " items of " + std::to_string(L) +
                  " steps needs " + std::to_string(big_bytes) +
                  " bytes of host memory, more than this machine's " + std::to_string(memory) +
                  " bytes of memory");
  }
  EXPECT_EQ(table->Info().items_sampled, 0);

  const std::vector<ItemKey> keys(size_t{1} << 16, MakeItemKey(1, 0));
  SampleBatch batch;
  Status s = table->Lookup(keys, &batch);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("table 'long': a batch of 65536 items of " +
                                     std::to_string(L) + " steps needs "));

  // A device sampler of such batches is refused the same way, before it
  // looks for a GPU.
  DeviceSamplerOptions device;
  device.batch_size = B;
  auto sampler = table->NewDeviceSampler(device);
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(sampler.status().code(), Status::Code::kResourceExhausted)
      << sampler.status().ToString();
  EXPECT_EQ(sampler.status().message(),
            "table 'long': DeviceSampler: a batch of " + std::to_string(B) + " items of " +
                std::to_string(L) + " steps needs " +
                std::to_string(static_cast<uint64_t>(B) * L * 2) +
                " bytes of device memory, more than the limit of 1099511627776 (kMaxSampleBytes)");
  device.batch_size = (int64_t{1} << 24) + 1 + static_cast<int64_t>(rng_() % 1000);
  sampler = table->NewDeviceSampler(device);
  ASSERT_FALSE(sampler.ok());
  EXPECT_EQ(sampler.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(sampler.status().message(),
            "table 'long': DeviceSampler batch_size is " + std::to_string(device.batch_size) +
                "; it must be at most 16777216, as Table::Sample's");

  // A batch that fits is drawn as usual.
  ASSERT_OK_AND_ASSIGN(SampleBatch one, table->Sample(1));
  EXPECT_EQ(one.columns[0].shape(), (Shape{1, L}));
  EXPECT_EQ(one.mask[0], 1);
  EXPECT_EQ(one.mask[1], 0);
  EXPECT_EQ(table->Info().items_sampled, 1);
}

// A remote writer's appends arrive as log records (rdma/wire.fbs,
// AppendStep), which the server's writer takes whole
// (TrajectoryWriterImpl::AppendRecord). A record that does not decode, or
// names another table, another step size, rows it does not hold or an
// invalid priority is refused naming what, and stores nothing; a good one
// stores its rows from the one asked for.
TEST_F(TableBadInputTest, ALogRecordThatDoesNotFitTheTableIsRefusedAndStoresNothing) {
  const TableSpec spec = Spec("records");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto w, table->NewWriter());
  auto* writer = dynamic_cast<engine::TrajectoryWriterImpl*>(w.get());
  ASSERT_NE(writer, nullptr);
  size_t step_bytes = 0;
  for (const ColumnSpec& c : spec.columns) step_bytes += c.step_bytes();
  const size_t n = 2 + rng_() % 6;
  std::vector<std::string> rows(n);
  for (std::string& row : rows) {
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const StepData step = RandomStep(spec, rng_);
      row.append(reinterpret_cast<const char*>(step.columns[c].data()), step.columns[c].size());
    }
  }
  // A record of `rows` for table `id` with `bytes` per step, priorities
  // `p`, as a remote writer builds it, in a buffer of 8-byte words.
  std::vector<uint64_t> buffer;
  const auto build = [&](uint32_t id, uint32_t bytes, std::vector<double> p) {
    wal::RecordBuilder b;
    std::byte* data = b.AppendSteps(id, bytes, std::vector<uint64_t>(n),
                                    std::vector<int64_t>(n), p);
    if (bytes == step_bytes) {
      for (const std::string& row : rows) data = static_cast<std::byte*>(std::memcpy(data, row.data(), row.size())) + row.size();
    }
    buffer.assign((b.payload().size() + 7) / 8, 0);
    std::memcpy(buffer.data(), b.payload().data(), b.payload().size());
    return std::span<std::byte>(reinterpret_cast<std::byte*>(buffer.data()), b.payload().size());
  };
  const uint32_t id = writer->table_id();
  int64_t appended = -1;
  struct Case {
    std::span<std::byte> record;
    int64_t first_row;
    std::string want;
  };
  std::vector<double> nan_at(n, 1.0);
  const size_t bad = rng_() % n;
  nan_at[bad] = std::nan("");
  const std::string what = "table 'records': a remote append's log record";
  std::vector<uint64_t> junk(8, 0x5a5a5a5a5a5a5a5aull);
  const std::vector<std::pair<std::function<std::span<std::byte>()>, std::pair<int64_t, std::string>>>
      cases = {
          {[&] { return std::span<std::byte>(reinterpret_cast<std::byte*>(junk.data()), 64); },
           {0, what + ": AppendSteps record: payload fails FlatBuffers verification"}},
          {[&] { return build(id + 1, static_cast<uint32_t>(step_bytes), {}); },
           {0, what + " names table id " + std::to_string(id + 1) + "; this table's id is " +
                   std::to_string(id)}},
          {[&] { return build(id, static_cast<uint32_t>(step_bytes + 4), {}); },
           {0, what + " holds steps of " + std::to_string(step_bytes + 4) +
                   " bytes; this table's steps take " + std::to_string(step_bytes)}},
          {[&] { return build(id, static_cast<uint32_t>(step_bytes), {}); },
           {static_cast<int64_t>(n), what + " holds " + std::to_string(n) +
                                         " steps; it has none from step " + std::to_string(n)}},
          {[&] { return build(id, static_cast<uint32_t>(step_bytes), nan_at); },
           {0, "table 'records': a remote append step " + std::to_string(bad) +
                   " priority nan is invalid; priorities must be finite and >= 0"}},
      };
  for (const auto& [record, want] : cases) {
    const Status s = writer->AppendRecord(record(), want.first, &appended);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
    EXPECT_EQ(s.message(), want.second);
    EXPECT_EQ(appended, 0);
  }
  EXPECT_EQ(table->Info().steps_inserted, 0);
  // A good one, from row k on: rows k.. become the trajectory's steps 0...
  const int64_t k = static_cast<int64_t>(rng_() % n);
  ASSERT_OK(writer->AppendRecord(build(id, static_cast<uint32_t>(step_bytes), {}), k, &appended));
  EXPECT_EQ(appended, static_cast<int64_t>(n) - k);
  ASSERT_EQ(writer->num_steps(), static_cast<int64_t>(n) - k);
  TrajectorySteps read;
  ASSERT_OK(table->ReadTrajectory(writer->trajectory_id(), 0, writer->num_steps(), &read));
  for (int64_t i = 0; i < writer->num_steps(); ++i) {
    std::string got;
    for (const Tensor& col : read.columns) {
      const size_t per = col.size_bytes() / static_cast<size_t>(writer->num_steps());
      got.append(reinterpret_cast<const char*>(col.data()) + i * per, per);
    }
    EXPECT_EQ(got, rows[static_cast<size_t>(k + i)]) << "step " << i;
  }
}

}  // namespace
}  // namespace replaydb
