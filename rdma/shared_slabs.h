// SharedSlabs: host slabs for a served database's hot tiers
// (engine::SlabSource) from a transport's SharedMemory, so that clients
// read its blocks one-sidedly (Transport::Read): on UCX 1.13 only memory
// UCX allocated is read that way (docs/status.md, issue 33). Each slab's
// key is kept for the clients that will read it.
//
// Thread safety: every method may be called from any thread.
#ifndef REPLAYDB_RDMA_SHARED_SLABS_H_
#define REPLAYDB_RDMA_SHARED_SLABS_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/hot/block_pool.h"
#include "rdma/transport.h"
#include "replaydb/status.h"

namespace replaydb::rdma {

class SharedSlabs : public engine::SlabSource {
 public:
  // `transport` must outlive this and every pool that uses it.
  explicit SharedSlabs(Transport* transport) : transport_(transport) {}

  // ResourceExhausted naming the size when UCX cannot map it.
  Result<std::byte*> AllocateSlab(size_t bytes) override;
  void FreeSlab(std::byte* slab) override;

  // What a peer needs to read the slab that starts at `slab`: its key
  // (SharedMemory::key) for Transport::ImportKey. NotFound for an address
  // that starts no slab of this source.
  Result<std::string> Key(const std::byte* slab) const;
  // Slabs held now.
  size_t size() const;

 private:
  Transport* const transport_;
  mutable std::mutex mu_;
  std::unordered_map<const std::byte*, std::unique_ptr<SharedMemory>> slabs_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_SHARED_SLABS_H_
