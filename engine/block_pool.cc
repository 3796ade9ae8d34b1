#include "engine/block_pool.h"

#include <cstdlib>
#include <string>

#ifdef REPLAYDB_USE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace replaydb::engine {
namespace {

#ifdef REPLAYDB_USE_JEMALLOC
// One arena for every table's hot tier, apart from the process's other
// allocations, so block churn does not fragment them. 0 if creation failed
// (then the default arenas serve).
unsigned HotTierArena() {
  static const unsigned arena = [] {
    unsigned index = 0;
    size_t size = sizeof(index);
    if (mallctl("arenas.create", &index, &size, nullptr, 0) != 0) return 0u;
    return index;
  }();
  return arena;
}

int AllocFlags() {
  int flags = MALLOCX_ALIGN(BlockPool::kBlockAlignment) | MALLOCX_TCACHE_NONE;
  if (const unsigned arena = HotTierArena(); arena != 0) flags |= MALLOCX_ARENA(arena);
  return flags;
}

std::byte* AllocateBlock(size_t bytes) { return static_cast<std::byte*>(mallocx(bytes, AllocFlags())); }
void FreeBlock(std::byte* p) { dallocx(p, MALLOCX_TCACHE_NONE); }
#else
std::byte* AllocateBlock(size_t bytes) {
  const size_t a = BlockPool::kBlockAlignment;
  return static_cast<std::byte*>(std::aligned_alloc(a, (bytes + a - 1) / a * a));
}
void FreeBlock(std::byte* p) { std::free(p); }
#endif

}  // namespace

BlockPool::BlockPool(size_t block_bytes, int64_t capacity_blocks)
    : block_bytes_(block_bytes), capacity_blocks_(capacity_blocks) {}

BlockPool::~BlockPool() {
  for (std::byte* b : all_) FreeBlock(b);
}

Result<std::byte*> BlockPool::Allocate() {
  if (!free_.empty()) {
    std::byte* b = free_.back();
    free_.pop_back();
    ++in_use_;
    return b;
  }
  if (allocated() >= capacity_blocks_) return static_cast<std::byte*>(nullptr);
  std::byte* b = AllocateBlock(block_bytes_);
  if (b == nullptr) {
    return Status::ResourceExhausted("hot tier: out of host memory allocating a block of " +
                                     std::to_string(block_bytes_) + " bytes (" +
                                     std::to_string(allocated()) + " blocks allocated)");
  }
  all_.push_back(b);
  ++in_use_;
  return b;
}

void BlockPool::Free(std::byte* block) {
  free_.push_back(block);
  --in_use_;
}

}  // namespace replaydb::engine
