// util/host_buffers.h: large buffers kept for reuse when freed (a Tensor's
// memory), bounded, page-locked once through the installed pinner. The
// kept buffers are process-wide: sizes here are random and the checks use
// differences of the counters.
#include "util/host_buffers.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "replaydb/types.h"
#include "tests/test_util.h"

namespace replaydb::util {
namespace {

size_t RandomLargeSize(std::mt19937_64& rng) {
  return kHostBufferCachedMin + rng() % (3 * kHostBufferCachedMin);
}

TEST(HostBuffersTest, AFreedLargeBufferIsReusedByTheNextAllocationOfItsSize) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const size_t bytes = RandomLargeSize(rng);
  const HostBufferStats before = GetHostBufferStats();
  std::byte* a = AllocateHostBuffer(bytes);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 4096, 0u);
  std::memset(a, 0x5a, bytes);
  FreeHostBuffer(a, bytes);
  std::byte* other = AllocateHostBuffer(bytes + 4096);  // another size: not that one
  EXPECT_NE(other, a);
  std::byte* b = AllocateHostBuffer(bytes);
  EXPECT_EQ(b, a);
  const HostBufferStats after = GetHostBufferStats();
  EXPECT_EQ(after.reused - before.reused, 1u);
  EXPECT_EQ(after.allocated - before.allocated, 2u);
  FreeHostBuffer(b, bytes);
  FreeHostBuffer(other, bytes + 4096);
  // Small buffers are not kept.
  const size_t small = 1 + rng() % (kHostBufferCachedMin - 1);
  std::byte* s = AllocateHostBuffer(small);
  FreeHostBuffer(s, small);
  EXPECT_EQ(GetHostBufferStats().allocated, after.allocated) << "small ones are not counted";
  std::byte* c = AllocateHostBuffer(bytes);
  EXPECT_EQ(c, b) << "kept after its second use too";
  FreeHostBuffer(c, bytes);
  EXPECT_EQ(AllocateHostBuffer(0), nullptr);
}

TEST(HostBuffersTest, KeptBuffersAreBounded) {
  std::mt19937_64 rng(testing_util::TestSeed());
  std::vector<std::pair<std::byte*, size_t>> held;
  for (size_t i = 0; i < kHostBufferCacheMaxBuffers + 5; ++i) {
    const size_t bytes = RandomLargeSize(rng);
    held.emplace_back(AllocateHostBuffer(bytes), bytes);
  }
  for (const auto& [p, bytes] : held) FreeHostBuffer(p, bytes);
  const HostBufferStats stats = GetHostBufferStats();
  EXPECT_LE(stats.kept_buffers, kHostBufferCacheMaxBuffers);
  EXPECT_LE(stats.kept_bytes, kHostBufferCacheMaxBytes);
  EXPECT_GT(stats.kept_buffers, 0u);
}

// A pinner that records what it locks and unlocks.
std::set<void*>* g_locked = nullptr;
int g_pins = 0;
const HostPinner kCountingPinner = {
    [](void* p, size_t) {
      ++g_pins;
      return g_locked->insert(p).second;
    },
    [](void* p) { g_locked->erase(p); },
};

TEST(HostBuffersTest, BuffersArePageLockedOnceAndUnlockedWhenReleased) {
  std::mt19937_64 rng(testing_util::TestSeed());
  std::set<void*> locked;
  g_locked = &locked;
  g_pins = 0;
  const HostPinner* previous = SetHostPinner(nullptr);
  const size_t bytes = RandomLargeSize(rng);
  std::byte* p = AllocateHostBuffer(bytes);
  EXPECT_FALSE(PinHostBuffer(p, bytes)) << "no pinner";
  SetHostPinner(&kCountingPinner);
  EXPECT_TRUE(PinHostBuffer(p, bytes));
  EXPECT_TRUE(PinHostBuffer(p, bytes));
  EXPECT_EQ(g_pins, 1);
  std::byte* small = AllocateHostBuffer(100);
  EXPECT_FALSE(PinHostBuffer(small, 100)) << "small buffers stay pageable";
  FreeHostBuffer(small, 100);
  FreeHostBuffer(p, bytes);
  std::byte* again = AllocateHostBuffer(bytes);
  ASSERT_EQ(again, p);
  EXPECT_TRUE(PinHostBuffer(again, bytes));
  EXPECT_EQ(g_pins, 1) << "kept page-locked across its reuse";
  FreeHostBuffer(again, bytes);
  // Enough other buffers push it out of the kept ones: unlocked then.
  std::vector<std::pair<std::byte*, size_t>> pushers;
  for (size_t i = 0; i < kHostBufferCacheMaxBuffers + 1; ++i) {
    const size_t other = bytes + 4096 * (i + 1);
    pushers.emplace_back(AllocateHostBuffer(other), other);
  }
  for (const auto& [q, n] : pushers) FreeHostBuffer(q, n);
  EXPECT_EQ(locked.count(p), 0u) << "released without being unlocked";
  SetHostPinner(previous);
  g_locked = nullptr;
}

// At the end of a process (atexit, registered by the GPU code): the kept
// buffers are unpinned and freed, and later frees keep nothing. Run in a
// child process: it changes the process-wide store for good.
TEST(HostBuffersDeathTest, ReleasingTheKeptBuffersUnpinsThemAndKeepsNoMore) {
  EXPECT_EXIT(
      {
        std::set<void*> locked;
        g_locked = &locked;
        SetHostPinner(&kCountingPinner);
        const size_t bytes = kHostBufferCachedMin + 4096 * 7;
        std::byte* p = AllocateHostBuffer(bytes);
        const bool pinned = PinHostBuffer(p, bytes);
        FreeHostBuffer(p, bytes);
        const bool kept = GetHostBufferStats().kept_buffers > 0 && locked.count(p) == 1;
        ReleaseKeptHostBuffers();
        const bool released = GetHostBufferStats().kept_buffers == 0 && locked.empty();
        std::byte* q = AllocateHostBuffer(bytes);
        FreeHostBuffer(q, bytes);
        const bool none_kept = GetHostBufferStats().kept_buffers == 0;
        std::_Exit(pinned && kept && released && none_kept ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A Tensor's memory: a batch made after another of the same shape was freed
// gets its memory back.
TEST(HostBuffersTest, ATensorReusesTheMemoryOfAFreedTensorOfItsShape) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const Shape shape{static_cast<int64_t>(RandomLargeSize(rng) / 4)};
  const std::byte* first = nullptr;
  {
    Tensor t;
    t.Reset(DType::kF32, shape);
    first = t.data();
    std::memset(t.data(), 1, t.size_bytes());
  }
  Tensor u;
  u.Reset(DType::kF32, shape);
  EXPECT_EQ(u.data(), first);
  Tensor v;
  v.Reset(DType::kF32, shape);
  EXPECT_NE(v.data(), first);
}

}  // namespace
}  // namespace replaydb::util
