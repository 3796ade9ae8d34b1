// The hot tier's memory: fixed-size blocks, handed out by id up to a
// capacity and recycled through a free list. A block lives in plain host
// memory (a dedicated jemalloc arena when built with jemalloc), in pinned
// host memory mapped for the GPUs (zero-copy reads by kernels), or in the
// memory of one GPU. Pinned and device blocks are carved from slabs of up to
// kSlabBytes, obtained lazily as blocks are first needed; so are host blocks
// when a SlabSource provides the host memory (a server's transport, whose
// memory peers read one-sidedly: rdma/transport.h), pinned or not.
//
// Thread safety: not internally locked; the owning table's mutex guards it.
#ifndef REPLAYDB_ENGINE_HOT_BLOCK_POOL_H_
#define REPLAYDB_ENGINE_HOT_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::engine {

enum class BlockMemory : uint8_t {
  kHost = 0,    // plain host memory
  kPinned = 1,  // page-locked host memory, mapped for every GPU
  kDevice = 2,  // device memory of one GPU: host code must not dereference it
};

// Where host slabs come from instead of the allocator.
class SlabSource {
 public:
  virtual ~SlabSource() = default;
  // `bytes` of host memory aligned to BlockPool::kBlockAlignment, or why not.
  virtual Result<std::byte*> AllocateSlab(size_t bytes) = 0;
  // REQUIRES: `slab` came from AllocateSlab and its blocks are no longer used.
  virtual void FreeSlab(std::byte* slab) = 0;
};

class BlockPool {
 public:
  // Alignment of every block's address (a block's column regions are
  // 16-byte aligned within it, see TableLayout).
  static constexpr size_t kBlockAlignment = 256;
  // Pinned and device memory is obtained in slabs of at most this many bytes
  // (at least one block).
  static constexpr size_t kSlabBytes = size_t{64} << 20;

  // REQUIRES: block_bytes > 0, capacity_blocks > 0. `slabs` is used for
  // kHost memory, and for kPinned memory (its slabs then page-locked with
  // cudaHostRegister); not for kDevice. `device` is the GPU of kDevice
  // memory.
  BlockPool(size_t block_bytes, int64_t capacity_blocks, BlockMemory memory = BlockMemory::kHost,
            int device = 0, std::shared_ptr<SlabSource> slabs = nullptr);
  // Frees every block, in use or not.
  ~BlockPool();

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // The id (0 <= id < capacity_blocks()) of a block of block_bytes() bytes
  // (contents unspecified), -1 when all capacity_blocks() are in use, or
  // ResourceExhausted when the system has no memory for a new one. Ids are
  // first handed out in increasing order: an id >= a previous allocated()
  // is a block whose address the caller has not seen yet.
  Result<int64_t> Allocate();
  // REQUIRES: `block` came from Allocate() and is in use.
  void Free(int64_t block);

  // The block's address: host memory for kHost and kPinned (also the address
  // kernels use), device memory for kDevice.
  std::byte* address(int64_t block) const { return addresses_[static_cast<size_t>(block)]; }

  BlockMemory memory() const { return memory_; }
  int device() const { return device_; }
  // True when host code may read and write blocks directly.
  bool host_accessible() const { return memory_ != BlockMemory::kDevice; }
  size_t block_bytes() const { return block_bytes_; }
  int64_t capacity_blocks() const { return capacity_blocks_; }
  int64_t in_use() const { return in_use_; }
  // Blocks obtained from the system so far (in use or free).
  int64_t allocated() const { return static_cast<int64_t>(addresses_.size()); }
  // Bytes obtained from the system so far.
  int64_t bytes_reserved() const { return bytes_reserved_; }

  // Where a block lies in the slabs (pinned, device, or a SlabSource's):
  // the slab's index (0 <= slab < slabs()) and the block's offset in it.
  // REQUIRES: the pool has slabs (not plain host blocks) and block < allocated().
  struct SlabPlace {
    int64_t slab = 0;
    size_t offset = 0;
  };
  SlabPlace place(int64_t block) const;
  // Whether host (or pinned) blocks come from a SlabSource's slabs.
  bool has_source() const { return source_ != nullptr; }
  // Slabs obtained so far, in order, and their start and size.
  int64_t slabs() const { return static_cast<int64_t>(slabs_.size()); }
  std::byte* slab(int64_t i) const { return static_cast<std::byte*>(slabs_[static_cast<size_t>(i)]); }
  size_t slab_bytes(int64_t i) const;

 private:
  Status AddSlab();

  const size_t block_bytes_;
  const size_t stride_;  // block_bytes rounded up to kBlockAlignment
  const int64_t capacity_blocks_;
  const BlockMemory memory_;
  const int device_;
  const std::shared_ptr<SlabSource> source_;
  int64_t in_use_ = 0;
  int64_t bytes_reserved_ = 0;
  std::vector<std::byte*> addresses_;  // by block id
  std::vector<int64_t> free_;          // ids, the next to hand out last
  std::vector<void*> slabs_;           // kPinned, kDevice, and a source's
  std::vector<int64_t> slab_first_;    // the first block id of each slab
};

std::string_view BlockMemoryName(BlockMemory memory);  // "host", "pinned", "device"

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_HOT_BLOCK_POOL_H_
