// HugePageAllocator: for large arrays whose elements are touched in no
// particular order, many pages apart (the hot tier's per-slot tables): an
// array of kHugePageBytes or more is mapped on its own, aligned to
// kHugePageBytes, and offered to the kernel for transparent huge pages
// (madvise MADV_HUGEPAGE), so that touching thousands of its elements costs
// a few TLB entries instead of thousands. Smaller arrays come from operator
// new. Where the kernel declines (huge pages off), the memory works as
// ordinary pages.
#ifndef REPLAYDB_UTIL_HUGE_PAGE_ALLOCATOR_H_
#define REPLAYDB_UTIL_HUGE_PAGE_ALLOCATOR_H_

#include <cstddef>
#include <new>

namespace replaydb::util {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Raw memory for HugePageAllocator: `bytes` >= kHugePageBytes, mapped
// (zeroed) and aligned to kHugePageBytes; throws std::bad_alloc when the
// system has none.
void* AllocateHugePageBacked(size_t bytes);
// REQUIRES: p came from AllocateHugePageBacked(bytes).
void FreeHugePageBacked(void* p, size_t bytes);

template <typename T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugePageBytes) return static_cast<T*>(AllocateHugePageBacked(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugePageBytes) {
      FreeHugePageBacked(p, bytes);
    } else {
      ::operator delete(p, std::align_val_t{alignof(T)});
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_HUGE_PAGE_ALLOCATOR_H_
