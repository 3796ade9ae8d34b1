#include "rdma/shared_slabs.h"

#include <cstdint>
#include <utility>

namespace replaydb::rdma {

Result<std::byte*> SharedSlabs::AllocateSlab(size_t bytes) {
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<SharedMemory> m, transport_->AllocateShared(bytes));
  std::byte* data = m->data();
  if (reinterpret_cast<uintptr_t>(data) % engine::BlockPool::kBlockAlignment != 0) {
    return Status::Internal("shared slabs: UCX mapped " + std::to_string(bytes) +
                            " bytes at an address not aligned to " +
                            std::to_string(engine::BlockPool::kBlockAlignment));
  }
  std::lock_guard<std::mutex> lock(mu_);
  slabs_[data] = std::move(m);
  return data;
}

void SharedSlabs::FreeSlab(std::byte* slab) {
  std::unique_ptr<SharedMemory> m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slabs_.find(slab);
    if (it == slabs_.end()) return;
    m = std::move(it->second);
    slabs_.erase(it);
  }
  // Unmapped here, outside the lock.
}

Result<std::string> SharedSlabs::Key(const std::byte* slab) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slabs_.find(slab);
  if (it == slabs_.end()) {
    return Status::NotFound("shared slabs: no slab starts at " +
                            std::to_string(reinterpret_cast<uintptr_t>(slab)));
  }
  return it->second->key();
}

size_t SharedSlabs::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slabs_.size();
}

}  // namespace replaydb::rdma
