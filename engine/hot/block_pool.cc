#include "engine/hot/block_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/runtime/device_memory.h"

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

BlockPool::BlockPool(size_t block_bytes, int64_t capacity_blocks, BlockMemory memory, int device,
                     std::shared_ptr<SlabSource> slabs)
    : block_bytes_(block_bytes),
      stride_((block_bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment),
      capacity_blocks_(capacity_blocks),
      memory_(memory),
      device_(device),
      source_(memory == BlockMemory::kDevice ? nullptr : std::move(slabs)) {}

BlockPool::~BlockPool() {
  switch (memory_) {
    case BlockMemory::kHost:
      if (source_) {
        for (void* s : slabs_) source_->FreeSlab(static_cast<std::byte*>(s));
      } else {
        for (std::byte* b : addresses_) FreeBlock(b);
      }
      break;
    case BlockMemory::kPinned:
      for (void* s : slabs_) {
        if (source_) {
          kernels::UnregisterHost(s);
          source_->FreeSlab(static_cast<std::byte*>(s));
        } else {
          kernels::FreePinned(s);
        }
      }
      break;
    case BlockMemory::kDevice:
      for (void* s : slabs_) kernels::FreeDevice(device_, s);
      break;
  }
}

Status BlockPool::AddSlab() {
  const int64_t room = capacity_blocks_ - allocated();
  const int64_t blocks =
      std::clamp<int64_t>(static_cast<int64_t>(kSlabBytes / stride_), 1, room);
  const size_t bytes = static_cast<size_t>(blocks) * stride_;
  void* slab = nullptr;
  Status s;
  if (source_) {
    Result<std::byte*> got = source_->AllocateSlab(bytes);
    if (got.ok()) {
      slab = *got;
      // Pinned: the source's memory page-locked and mapped for the GPUs.
      if (memory_ == BlockMemory::kPinned) {
        s = kernels::RegisterHost(slab, bytes);
        if (!s.ok()) source_->FreeSlab(*got);
      }
    } else {
      s = got.status();
    }
  } else {
    s = memory_ == BlockMemory::kPinned ? kernels::AllocatePinned(bytes, &slab)
                                        : kernels::AllocateDevice(device_, bytes, &slab);
  }
  if (!s.ok()) {
    return s.WithContext("hot tier: a slab of " + std::to_string(blocks) + " blocks (" +
                         std::to_string(allocated()) + " of " + std::to_string(capacity_blocks_) +
                         " blocks allocated)");
  }
  slabs_.push_back(slab);
  slab_first_.push_back(allocated());
  bytes_reserved_ += static_cast<int64_t>(bytes);
  const int64_t first = allocated();
  for (int64_t i = 0; i < blocks; ++i) {
    addresses_.push_back(static_cast<std::byte*>(slab) + static_cast<size_t>(i) * stride_);
  }
  // Hand out the slab's blocks in increasing order.
  for (int64_t i = blocks - 1; i >= 0; --i) free_.push_back(first + i);
  return Status::OK();
}

Result<int64_t> BlockPool::Allocate() {
  if (free_.empty()) {
    if (allocated() >= capacity_blocks_) return int64_t{-1};
    if (memory_ == BlockMemory::kHost && !source_) {
      std::byte* b = AllocateBlock(block_bytes_);
      if (b == nullptr) {
        return Status::ResourceExhausted("hot tier: out of host memory allocating a block of " +
                                         std::to_string(block_bytes_) + " bytes (" +
                                         std::to_string(allocated()) + " blocks allocated)");
      }
      addresses_.push_back(b);
      bytes_reserved_ += static_cast<int64_t>(block_bytes_);
      ++in_use_;
      return allocated() - 1;
    }
    REPLAYDB_RETURN_IF_ERROR(AddSlab());
  }
  const int64_t id = free_.back();
  free_.pop_back();
  ++in_use_;
  return id;
}

BlockPool::SlabPlace BlockPool::place(int64_t block) const {
  const auto it = std::upper_bound(slab_first_.begin(), slab_first_.end(), block);
  SlabPlace p;
  p.slab = static_cast<int64_t>(it - slab_first_.begin()) - 1;
  p.offset = static_cast<size_t>(block - slab_first_[static_cast<size_t>(p.slab)]) * stride_;
  return p;
}

size_t BlockPool::slab_bytes(int64_t i) const {
  const size_t k = static_cast<size_t>(i);
  const int64_t end = k + 1 < slab_first_.size() ? slab_first_[k + 1] : allocated();
  return static_cast<size_t>(end - slab_first_[k]) * stride_;
}

void BlockPool::Free(int64_t block) {
  free_.push_back(block);
  --in_use_;
}

std::string_view BlockMemoryName(BlockMemory memory) {
  switch (memory) {
    case BlockMemory::kHost: return "host";
    case BlockMemory::kPinned: return "pinned";
    case BlockMemory::kDevice: return "device";
  }
  return "invalid";
}

}  // namespace replaydb::engine
