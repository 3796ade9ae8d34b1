#include "util/huge_page_allocator.h"

#include <sys/mman.h>

#include <cstdint>

namespace replaydb::util {
namespace {

size_t RoundUp(size_t n) { return (n + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes; }

}  // namespace

void* AllocateHugePageBacked(size_t bytes) {
  const size_t size = RoundUp(bytes);
  // Map a huge page more than needed, then trim both ends to the alignment.
  const size_t mapped = size + kHugePageBytes;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + mapped;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - aligned - size);
  void* p = reinterpret_cast<void*>(aligned);
#ifdef MADV_HUGEPAGE
  (void)madvise(p, size, MADV_HUGEPAGE);  // advice: ordinary pages if declined
#endif
  return p;
}

void FreeHugePageBacked(void* p, size_t bytes) { munmap(p, RoundUp(bytes)); }

}  // namespace replaydb::util
