// The hot tier's memory: fixed-size blocks, allocated lazily up to a
// capacity and recycled through a free list. This pool allocates host
// memory (a dedicated jemalloc arena when built with jemalloc); pinned and
// device placement plug in here later.
//
// Thread safety: not internally locked; the owning table's mutex guards it.
#ifndef REPLAYDB_ENGINE_BLOCK_POOL_H_
#define REPLAYDB_ENGINE_BLOCK_POOL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::engine {

class BlockPool {
 public:
  // Alignment of every block.
  static constexpr size_t kBlockAlignment = 64;

  // REQUIRES: block_bytes > 0, capacity_blocks > 0
  BlockPool(size_t block_bytes, int64_t capacity_blocks);
  // Frees every block, in use or not.
  ~BlockPool();

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of block_bytes() bytes (contents unspecified), nullptr when all
  // capacity_blocks() are in use, or ResourceExhausted when the system has no
  // memory for a new one.
  Result<std::byte*> Allocate();
  // REQUIRES: `block` came from Allocate() of this pool and is in use.
  void Free(std::byte* block);

  size_t block_bytes() const { return block_bytes_; }
  int64_t capacity_blocks() const { return capacity_blocks_; }
  int64_t in_use() const { return in_use_; }
  // Blocks obtained from the system so far (in use or on the free list).
  int64_t allocated() const { return static_cast<int64_t>(all_.size()); }

 private:
  const size_t block_bytes_;
  const int64_t capacity_blocks_;
  int64_t in_use_ = 0;
  std::vector<std::byte*> all_;
  std::vector<std::byte*> free_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_BLOCK_POOL_H_
