// The hot tier's block pool (engine/hot/block_pool.h): plain host blocks,
// and host blocks carved from slabs that a SlabSource provides (a server's
// transport, whose memory peers read one-sidedly).
#include "engine/hot/block_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;

// Slabs from aligned_alloc, counted; fails while `fail` is set.
class CountingSource : public SlabSource {
 public:
  ~CountingSource() override {
    for (auto& [p, bytes] : live_) std::free(p);
  }
  Result<std::byte*> AllocateSlab(size_t bytes) override {
    if (fail) return Status::ResourceExhausted("the source has no room");
    auto* p = static_cast<std::byte*>(std::aligned_alloc(BlockPool::kBlockAlignment, bytes));
    live_[p] = bytes;
    ++allocated;
    return p;
  }
  void FreeSlab(std::byte* slab) override {
    EXPECT_EQ(live_.count(slab), 1u) << "a slab freed twice or never allocated";
    live_.erase(slab);
    std::free(slab);
  }
  size_t live() const { return live_.size(); }
  size_t bytes(std::byte* slab) const { return live_.at(slab); }

  bool fail = false;
  int allocated = 0;

 private:
  std::map<std::byte*, size_t> live_;
};

// Every block up to capacity: ids in increasing order, distinct aligned
// addresses whose ends hold what was written (no block overlaps the next);
// then -1; a freed id comes back.
void FillAndCheck(BlockPool& pool, std::mt19937_64& rng) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < pool.capacity_blocks(); ++i) {
    ASSERT_OK_AND_ASSIGN(const int64_t id, pool.Allocate());
    ASSERT_EQ(id, i);
    ids.push_back(id);
    std::byte* a = pool.address(id);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(a) % BlockPool::kBlockAlignment, 0u);
    // Its first and last bytes (touching all of a block of megabytes would
    // only slow the test).
    a[0] = a[pool.block_bytes() - 1] = static_cast<std::byte>(id & 0xFF);
  }
  ASSERT_OK_AND_ASSIGN(const int64_t none, pool.Allocate());
  EXPECT_EQ(none, -1);
  EXPECT_EQ(pool.in_use(), pool.capacity_blocks());
  for (const int64_t id : ids) {
    const std::byte* a = pool.address(id);
    ASSERT_EQ(a[0], static_cast<std::byte>(id & 0xFF)) << "block " << id << " overlaps another";
    ASSERT_EQ(a[pool.block_bytes() - 1], static_cast<std::byte>(id & 0xFF))
        << "block " << id << " overlaps another";
  }
  const int64_t freed = ids[rng() % ids.size()];
  pool.Free(freed);
  EXPECT_EQ(pool.in_use(), pool.capacity_blocks() - 1);
  ASSERT_OK_AND_ASSIGN(const int64_t again, pool.Allocate());
  EXPECT_EQ(again, freed);
}

TEST(BlockPoolTest, HostBlocksAreDistinctAlignedAndRecycled) {
  std::mt19937_64 rng(testing_util::TestSeed());
  BlockPool pool(1 + rng() % 5000, 1 + static_cast<int64_t>(rng() % 64));
  FillAndCheck(pool, rng);
  EXPECT_EQ(pool.slabs(), 0);
  EXPECT_EQ(pool.allocated(), pool.capacity_blocks());
}

// With a source, host blocks come from its slabs, lazily, each slab at
// most kSlabBytes (or one block); place() says where each block lies, and
// the pool gives every slab back when it goes.
TEST(BlockPoolTest, HostBlocksComeFromASlabSourceAndSayWhereTheyLie) {
  std::mt19937_64 rng(testing_util::TestSeed());
  auto source = std::make_shared<CountingSource>();
  {
    // Blocks of up to 8 MiB: a slab of 64 MiB holds 8 to thousands of them.
    const size_t block_bytes = 1 + rng() % (size_t{8} << 20);
    const int64_t capacity = 1 + static_cast<int64_t>(rng() % 40);
    BlockPool pool(block_bytes, capacity, BlockMemory::kHost, 0, source);
    EXPECT_EQ(pool.slabs(), 0);
    EXPECT_EQ(source->allocated, 0) << "a slab before any block was asked for";
    FillAndCheck(pool, rng);
    ASSERT_GT(pool.slabs(), 0);
    EXPECT_EQ(static_cast<size_t>(pool.slabs()), source->live());
    int64_t reserved = 0;
    for (int64_t i = 0; i < pool.slabs(); ++i) {
      EXPECT_LE(pool.slab_bytes(i), std::max(BlockPool::kSlabBytes,
                                             (block_bytes + 255) / 256 * 256));
      EXPECT_EQ(pool.slab_bytes(i), source->bytes(pool.slab(i)));
      reserved += static_cast<int64_t>(pool.slab_bytes(i));
    }
    EXPECT_EQ(pool.bytes_reserved(), reserved);
    for (int64_t b = 0; b < pool.allocated(); ++b) {
      const BlockPool::SlabPlace p = pool.place(b);
      ASSERT_GE(p.slab, 0);
      ASSERT_LT(p.slab, pool.slabs());
      ASSERT_LE(p.offset + block_bytes, pool.slab_bytes(p.slab)) << "block " << b;
      ASSERT_EQ(pool.address(b), pool.slab(p.slab) + p.offset) << "block " << b;
    }
  }
  EXPECT_EQ(source->live(), 0u) << "slabs the pool did not give back";
}

// A source that has no room: Allocate fails with its reason and the slab it
// wanted; nothing is lost, and the pool goes on once there is room.
TEST(BlockPoolTest, ASlabSourceWithoutRoomFailsNamingTheSlabAndThePoolGoesOn) {
  auto source = std::make_shared<CountingSource>();
  BlockPool pool(4096, 3, BlockMemory::kHost, 0, source);
  source->fail = true;
  const Result<int64_t> failed = pool.Allocate();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kResourceExhausted);
  EXPECT_THAT(failed.status().message(), HasSubstr("the source has no room"));
  EXPECT_THAT(failed.status().message(), HasSubstr("hot tier: a slab of 3 blocks"));
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.allocated(), 0);
  source->fail = false;
  ASSERT_OK_AND_ASSIGN(const int64_t id, pool.Allocate());
  EXPECT_EQ(id, 0);
  EXPECT_EQ(pool.slabs(), 1);
}

}  // namespace
}  // namespace replaydb::engine
