// Samples in place (TableImpl::SampleInPlace): a table whose hot tier comes
// from a SlabSource says where each window's steps lie, and holds their
// blocks (not freed, not used again) until the sample's pins go; what it
// names is what a gathered lookup of the same items gives. Refused for
// tables it cannot serve.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/db/db_impl.h"
#include "engine/table/table_impl.h"
#include "replaydb/device.h"
#include "tests/device_out.h"
#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;

// Host slabs from the allocator, as a server's transport would give them.
class HeapSlabs : public SlabSource {
 public:
  Result<std::byte*> AllocateSlab(size_t bytes) override {
    ++allocated;
    return static_cast<std::byte*>(std::aligned_alloc(BlockPool::kBlockAlignment, bytes));
  }
  void FreeSlab(std::byte* slab) override { std::free(slab); }
  int allocated = 0;
};

TableSpec Spec(std::mt19937_64& rng) {
  TableSpec spec;
  spec.name = "p";
  spec.columns = {{"obs", DType::kF32, Shape{static_cast<int64_t>(1 + rng() % 6)}},
                  {"act", DType::kI64, Shape{}}};
  spec.block_steps = 2 + static_cast<int64_t>(rng() % 6);  // windows cross blocks
  // Room for a batch's pinned blocks (16 windows of up to 7 blocks) and more.
  spec.capacity_steps = spec.block_steps * 256;
  spec.sequence_length = 1 + static_cast<int64_t>(rng() % 7);
  return spec;
}

// Ended trajectories of random steps and lengths, `steps` steps at least
// (a writer that would wait for blocks fails the test instead).
void Write(Table& table, std::mt19937_64& rng, int64_t steps) {
  WriterOptions o;
  o.timeout = std::chrono::seconds(10);
  auto writer = table.NewWriter(o);
  ASSERT_OK(writer.status());
  for (int64_t written = 0; written < steps;) {
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int s = 0; s < n; ++s) {
      testing_util::StepData step = testing_util::RandomStep(table.spec(), rng);
      ASSERT_OK((*writer)->Append(step.tensors, 1.0));
    }
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
    written += n;
  }
}

// The batch the segments of `where` name, read straight from the slabs
// (padding zero), as a reader of the server's memory would, or (by_slab
// false) from the blocks' addresses, as a server sending them would.
std::vector<std::string> ReadSegments(TableImpl& table, const InPlaceSample& where, int64_t B,
                                      int64_t L, bool by_slab = true) {
  const std::vector<SlabSpan> slabs = by_slab ? table.Slabs(0) : std::vector<SlabSpan>{};
  std::vector<std::string> columns;
  for (size_t c = 0; c < where.column_offset.size(); ++c) {
    const size_t step = where.column_step_bytes[c];
    std::string out(static_cast<size_t>(B * L) * step, '\0');
    for (const InPlaceSegment& g : where.segments) {
      const std::byte* block = by_slab ? slabs.at(g.slab).data + g.block_offset : g.block;
      std::memcpy(out.data() + (static_cast<size_t>(g.item * L + g.out_step)) * step,
                  block + where.column_offset[c] + g.first_step * step, g.count * step);
    }
    columns.push_back(std::move(out));
  }
  return columns;
}

// A database whose hot tiers come from HeapSlabs, with a table of Spec
// half written: the table's blocks are the source's slabs.
struct SlabTable {
  TempDir dir;
  std::shared_ptr<HeapSlabs> slabs = std::make_shared<HeapSlabs>();
  std::unique_ptr<DB> db;
  std::shared_ptr<Table> handle;
  TableSpec spec;
  TableImpl* table = nullptr;

  void Open(std::mt19937_64& rng) {
    ASSERT_OK_AND_ASSIGN(db, DBImpl::Open(testing_util::ManualCheckpoints(), dir.path(), slabs));
    spec = Spec(rng);
    ASSERT_OK_AND_ASSIGN(handle, db->CreateTable(spec));
    table = dynamic_cast<TableImpl*>(handle.get());
    ASSERT_NE(table, nullptr);
    ASSERT_TRUE(table->samples_in_place());
    ASSERT_NO_FATAL_FAILURE(Write(*table, rng, spec.capacity_steps / 2));
    EXPECT_GT(slabs->allocated, 0) << "the hot tier did not take the source's slabs";
  }
};

std::vector<std::string> Bytes(const SampleBatch& b) {
  std::vector<std::string> columns;
  for (const Tensor& t : b.columns) {
    columns.emplace_back(reinterpret_cast<const char*>(t.data()), t.size_bytes());
  }
  return columns;
}

TEST(TableInPlaceTest, SegmentsNameWhatALookupGathersAndPinsHoldTheirBlocks) {
  const uint64_t seed = testing_util::TestSeed();
  std::mt19937_64 rng(seed);
  SlabTable st;
  ASSERT_NO_FATAL_FAILURE(st.Open(rng));
  const TableSpec& spec = st.spec;
  TableImpl* table = st.table;

  const int64_t B = 1 + static_cast<int64_t>(rng() % 16);
  const int64_t L = spec.sequence_length;
  SampleOptions o;
  o.importance_beta = 0.5;
  SampleBatch drawn;
  InPlaceSample where;
  ASSERT_OK(table->SampleInPlace(B, o, &drawn, &where));
  EXPECT_TRUE(drawn.columns.empty());
  ASSERT_EQ(drawn.keys.size(), static_cast<size_t>(B));
  EXPECT_EQ(drawn.weights.size(), static_cast<size_t>(B));
  ASSERT_NE(where.pins, nullptr);
  SampleBatch looked;
  ASSERT_OK(table->Lookup(drawn.keys, &looked));
  EXPECT_EQ(looked.mask, drawn.mask);
  const std::vector<std::string> named = ReadSegments(*table, where, B, L);
  EXPECT_EQ(named, Bytes(looked)) << "seed " << seed;

  // Everything evicted twice over: the pinned blocks keep their bytes.
  ASSERT_NO_FATAL_FAILURE(Write(*table, rng, 2 * spec.capacity_steps));
  EXPECT_FALSE(table->Lookup(drawn.keys, &looked).ok()) << "the sampled items were not evicted";
  EXPECT_EQ(ReadSegments(*table, where, B, L), named) << "a pinned block was used again";

  // Released: the blocks go back and are written again.
  where.pins.reset();
  ASSERT_NO_FATAL_FAILURE(Write(*table, rng, 2 * spec.capacity_steps));
  EXPECT_NE(ReadSegments(*table, where, B, L), named) << "the released blocks were never reused";
}

// Without a slab source the segments name the blocks by address (what a
// server sends from without gathering first); vector tables are refused.
TEST(TableInPlaceTest, WithoutASlabSourceSegmentsNameBlockAddresses) {
  const uint64_t seed = testing_util::TestSeed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, DBImpl::Open(testing_util::ManualCheckpoints(), dir.path()));
  const TableSpec spec = Spec(rng);
  ASSERT_OK_AND_ASSIGN(auto handle, db->CreateTable(spec));
  auto* table = dynamic_cast<TableImpl*>(handle.get());
  ASSERT_NE(table, nullptr);
  ASSERT_NO_FATAL_FAILURE(Write(*table, rng, spec.capacity_steps / 2));
  EXPECT_FALSE(table->samples_in_place());
  ASSERT_EQ(table->samples_by_address(), table->Info().placement != "device");
  if (!table->samples_by_address()) GTEST_SKIP() << "this machine puts the table on a GPU";
  const int64_t B = 1 + static_cast<int64_t>(rng() % 16);
  const int64_t L = spec.sequence_length;
  SampleBatch drawn;
  InPlaceSample where;
  ASSERT_OK(table->SampleInPlace(B, SampleOptions{}, &drawn, &where));
  for (const InPlaceSegment& g : where.segments) EXPECT_EQ(g.slab, 0u);
  const std::vector<std::string> named = ReadSegments(*table, where, B, L, /*by_slab=*/false);
  SampleBatch looked;
  ASSERT_OK(table->Lookup(drawn.keys, &looked));
  EXPECT_EQ(named, Bytes(looked)) << "seed " << seed;

  TableSpec vector = Spec(rng);
  vector.name = "v";
  vector.lanes = 2;
  vector.sequence_length = 1;
  ASSERT_OK_AND_ASSIGN(auto vh, db->CreateTable(vector));
  auto* vt = dynamic_cast<TableImpl*>(vh.get());
  ASSERT_NE(vt, nullptr);
  const Status s = vt->SampleInPlace(1, SampleOptions{}, &drawn, &where);
  EXPECT_EQ(s.code(), Status::Code::kNotSupported);
  EXPECT_THAT(s.message(), HasSubstr("table 'v': samples in place need a one-lane table whose "
                                     "hot tier lies in host memory"));
}

// On a GPU machine a host table's blocks are pinned: a SlabSource's slabs
// are then page-locked and mapped (cudaHostRegister), and the GPU's gathers
// read them: LookupToDevice gives what the host lookup gives, and in-place
// samples still name the right bytes.
TEST(TableGpuInPlaceTest, KernelsGatherPinnedBlocksFromASlabSource) {
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  const uint64_t seed = testing_util::TestSeed();
  std::mt19937_64 rng(seed);
  SlabTable st;
  ASSERT_NO_FATAL_FAILURE(st.Open(rng));
  const TableSpec& spec = st.spec;
  TableImpl* table = st.table;
  EXPECT_EQ(table->Info().placement, "pinned");
  const int64_t B = 1 + static_cast<int64_t>(rng() % 16);
  const int64_t L = spec.sequence_length;
  SampleBatch drawn;
  InPlaceSample where;
  ASSERT_OK(table->SampleInPlace(B, SampleOptions{}, &drawn, &where));
  SampleBatch looked;
  ASSERT_OK(table->Lookup(drawn.keys, &looked));
  EXPECT_EQ(ReadSegments(*table, where, B, L), Bytes(looked)) << "seed " << seed;
  testing_util::DeviceOut out = testing_util::AllocateOut(spec, B);
  ASSERT_OK(table->LookupToDevice(drawn.keys, out.view, nullptr));
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    std::string got(looked.columns[c].size_bytes(), '\0');
    ASSERT_OK(CopyDeviceToHost(got.data(), out.view.columns[c], got.size()));
    EXPECT_EQ(got, Bytes(looked)[c]) << "column " << c << ", seed " << seed;
  }
}

}  // namespace
}  // namespace replaydb::engine
