// Large host buffers (a Tensor's memory: sampled batches), kept for reuse
// when freed. A batch made per call, as the C API and Python make them,
// then gets memory that is already mapped instead of fresh pages (faulting
// in 32 MiB costs tens of milliseconds), and memory page-locked once for
// copies from a GPU stays page-locked for the next batch.
//
// Buffers of kHostBufferCachedMin bytes and more are 4 KiB-aligned and, once
// freed, kept (at most kHostBufferCacheMaxBuffers of them and
// kHostBufferCacheMaxBytes in all, the least recently freed going first) for
// the next allocation of exactly the same size. Smaller ones come from
// new[]. Thread-safe.
#ifndef REPLAYDB_UTIL_HOST_BUFFERS_H_
#define REPLAYDB_UTIL_HOST_BUFFERS_H_

#include <cstddef>
#include <cstdint>

namespace replaydb::util {

inline constexpr size_t kHostBufferCachedMin = size_t{1} << 20;
inline constexpr size_t kHostBufferCacheMaxBuffers = 16;
inline constexpr size_t kHostBufferCacheMaxBytes = size_t{1} << 30;

// Throws std::bad_alloc as new[] does. bytes may be 0 (then nullptr).
std::byte* AllocateHostBuffer(size_t bytes);
// REQUIRES: p came from AllocateHostBuffer(bytes), or is null.
void FreeHostBuffer(std::byte* p, size_t bytes);

// How buffers get page-locked for device copies: installed by the GPU code
// (the kernels runtime has the CUDA calls); none by default.
struct HostPinner {
  bool (*pin)(void* p, size_t bytes);  // true when page-locked
  void (*unpin)(void* p);
};
// Installs `pinner` (null: none) and returns the previous one.
const HostPinner* SetHostPinner(const HostPinner* pinner);

// Page-locks the buffer at p (from AllocateHostBuffer of `bytes`), once for
// its life: true when it is page-locked now. False for a buffer below
// kHostBufferCachedMin, without a pinner, or when pinning fails.
bool PinHostBuffer(std::byte* p, size_t bytes);

// Releases the kept buffers (unpinning them) and keeps none from then on:
// for the end of the process, while the pinner still works (the GPU code
// registers it with atexit once the CUDA runtime is up).
void ReleaseKeptHostBuffers();

struct HostBufferStats {
  uint64_t reused = 0;     // allocations served from the kept buffers
  uint64_t allocated = 0;  // large allocations that needed new memory
  uint64_t pinned = 0;     // buffers page-locked by PinHostBuffer
  size_t kept_buffers = 0;
  size_t kept_bytes = 0;
};
HostBufferStats GetHostBufferStats();

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_HOST_BUFFERS_H_
