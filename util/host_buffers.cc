#include "util/host_buffers.h"

#include <list>
#include <mutex>
#include <new>
#include <unordered_map>

namespace replaydb::util {
namespace {

constexpr std::align_val_t kAlign{4096};

struct Kept {
  std::byte* p;
  size_t bytes;
  const HostPinner* pinned_by;  // null: not page-locked
};

// Never destroyed: buffers may be freed (and unpinned) by other static
// destructors, after the CUDA runtime is gone; the OS takes it all back.
struct Cache {
  std::mutex mu;
  const HostPinner* pinner = nullptr;
  std::unordered_map<std::byte*, const HostPinner*> live;  // large buffers handed out: pinned by
  std::list<Kept> kept;  // least recently freed first
  size_t kept_bytes = 0;
  bool keep = true;  // false after ReleaseKeptHostBuffers
  uint64_t reused = 0;
  uint64_t allocated = 0;
  uint64_t pinned = 0;
};

Cache& TheCache() {
  static Cache* cache = new Cache;
  return *cache;
}

void Release(const Kept& k) {
  if (k.pinned_by != nullptr) k.pinned_by->unpin(k.p);
  ::operator delete(k.p, kAlign);
}

}  // namespace

std::byte* AllocateHostBuffer(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes < kHostBufferCachedMin) return new std::byte[bytes];
  Cache& c = TheCache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (auto it = c.kept.rbegin(); it != c.kept.rend(); ++it) {  // most recent first
      if (it->bytes != bytes) continue;
      const Kept k = *it;
      c.kept.erase(std::next(it).base());
      c.kept_bytes -= k.bytes;
      c.live[k.p] = k.pinned_by;
      ++c.reused;
      return k.p;
    }
    ++c.allocated;
  }
  auto* p = static_cast<std::byte*>(::operator new(bytes, kAlign));
  std::lock_guard<std::mutex> lock(c.mu);
  c.live[p] = nullptr;
  return p;
}

void FreeHostBuffer(std::byte* p, size_t bytes) {
  if (p == nullptr) return;
  if (bytes < kHostBufferCachedMin) {
    delete[] p;
    return;
  }
  Cache& c = TheCache();
  std::list<Kept> out;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    const HostPinner* pinned_by = nullptr;
    if (auto it = c.live.find(p); it != c.live.end()) {
      pinned_by = it->second;
      c.live.erase(it);
    }
    c.kept.push_back({p, bytes, pinned_by});
    c.kept_bytes += bytes;
    while (!c.kept.empty() && (!c.keep || c.kept.size() > kHostBufferCacheMaxBuffers ||
                               c.kept_bytes > kHostBufferCacheMaxBytes)) {
      c.kept_bytes -= c.kept.front().bytes;
      out.splice(out.end(), c.kept, c.kept.begin());
    }
  }
  for (const Kept& k : out) Release(k);
}

void ReleaseKeptHostBuffers() {
  Cache& c = TheCache();
  std::list<Kept> out;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.keep = false;
    out.swap(c.kept);
    c.kept_bytes = 0;
  }
  for (const Kept& k : out) Release(k);
}

const HostPinner* SetHostPinner(const HostPinner* pinner) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  const HostPinner* previous = c.pinner;
  c.pinner = pinner;
  return previous;
}

bool PinHostBuffer(std::byte* p, size_t bytes) {
  if (p == nullptr || bytes < kHostBufferCachedMin) return false;
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.live.find(p);
  if (it == c.live.end()) return false;
  if (it->second != nullptr) return true;
  if (c.pinner == nullptr || !c.pinner->pin(p, bytes)) return false;
  it->second = c.pinner;
  ++c.pinned;
  return true;
}

HostBufferStats GetHostBufferStats() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.reused, c.allocated, c.pinned, c.kept.size(), c.kept_bytes};
}

}  // namespace replaydb::util
