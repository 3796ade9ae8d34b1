// MinTree: fp64 values over numbered slots and their minimum, kept in
// O(log n) per change. The prioritized selector's record of each item's
// priority: the smallest positive one gives the buffer-wide importance
// weight normalisation (SampleOptions::weight_normalization), and the
// values are what its sum tree is rebuilt from when it rescales.
#ifndef REPLAYDB_INDEX_SELECTORS_MIN_TREE_H_
#define REPLAYDB_INDEX_SELECTORS_MIN_TREE_H_

#include <cstddef>
#include <limits>
#include <vector>

#include "util/huge_page_allocator.h"

namespace replaydb::index {

// A complete binary tree in one flat array, as SumTree: capacity() is a
// power of two, the leaves (one per slot) fill the bottom level and every
// internal node holds the smaller of its two children. Slots past size()
// hold +inf, and so does a slot nobody set. Not thread-safe; const methods
// may run concurrently with each other.
class MinTree {
 public:
  static constexpr double kEmpty = std::numeric_limits<double>::infinity();

  // `n` slots, all kEmpty.
  explicit MinTree(size_t n = 0);

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // Sets a slot's value in O(log capacity()), walking up only while the
  // minimum of a subtree changes. A slot >= size() grows the
  // tree to slot + 1 slots first (amortised O(1) per slot: capacity at
  // least doubles). REQUIRES: value is not NaN.
  void Set(size_t slot, double value);

  // REQUIRES: slot < size().
  double Get(size_t slot) const { return nodes_[capacity_ + slot]; }

  // The smallest value, kEmpty when every slot is.
  double Min() const { return nodes_[1]; }

 private:
  void Grow(size_t new_n);

  size_t size_ = 0;
  size_t capacity_ = 1;  // a power of two
  // nodes_[1] is the root, the children of node i are 2i and 2i + 1, the
  // leaf of slot s is nodes_[capacity_ + s]; nodes_[0] is unused.
  std::vector<double, util::HugePageAllocator<double>> nodes_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_MIN_TREE_H_
