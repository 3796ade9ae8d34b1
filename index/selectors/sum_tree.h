// SumTree: fp64 values over numbered slots, with their total and a search
// by cumulative mass, each in O(log n). The prioritized selector's index.
#ifndef REPLAYDB_INDEX_SELECTORS_SUM_TREE_H_
#define REPLAYDB_INDEX_SELECTORS_SUM_TREE_H_

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "util/huge_page_allocator.h"

namespace replaydb::index {

// A complete binary tree in one flat array: capacity() is a power of two,
// the leaves (one per slot) fill the bottom level and every internal node
// holds the sum of its two children. Slots [0, size()) are in use; slots
// past size() up to capacity() hold 0.
//
// Exactness:
//  - Every internal node on a changed leaf's path is recomputed as
//    fl(left + right) from its children; nothing is adjusted by a delta. A
//    node's value is therefore a function of the leaves below it only, not
//    of the history of Set calls: no drift, and a subtree whose leaves are
//    all 0 sums to exactly 0.
//  - Total() differs from the exact sum of the leaves by at most about
//    log2(capacity()) * 2^-53 relative (one rounding per level).
//  - Find never returns a slot whose value is 0 while Total() > 0: the
//    descent never enters a child whose sum is 0, and a target that
//    rounding pushes past a subtree's sum (or a target >= Total()) ends on
//    that subtree's last positive leaf.
//
// Not thread-safe; const methods may run concurrently with each other.
class SumTree {
 public:
  // `n` slots, all 0.
  explicit SumTree(size_t n = 0);
  SumTree(const SumTree&) = default;
  SumTree& operator=(const SumTree&) = default;
  SumTree(SumTree&&) = default;
  SumTree& operator=(SumTree&&) = default;

  // Number of slots in use.
  size_t size() const { return size_; }
  // Leaves allocated: the smallest power of two >= size() (at least 1),
  // or more after growth followed by a shrinking Resize.
  size_t capacity() const { return capacity_; }

  // Makes the tree hold `new_n` slots. New slots hold 0; shrinking drops
  // slots [new_n, size()) (their values become 0; capacity stays). Growing
  // past capacity() at least doubles it, in O(new capacity).
  void Resize(size_t new_n);

  // Sets every slot s < size() to leaf(s) and recomputes the sums, in
  // O(capacity()). REQUIRES: as for Set, for every value.
  void Reassign(const std::function<double(size_t)>& leaf);

  // Sets a slot's value in O(log capacity()). A slot >= size() grows the
  // tree to slot + 1 slots first (amortised O(1) per slot, as Resize).
  // REQUIRES: value finite and >= 0; the sum of all values stays finite.
  void Set(size_t slot, double value);

  // REQUIRES: slot < size().
  double Get(size_t slot) const { return nodes_[capacity_ + slot]; }

  // The root: the sum of every slot's value (see Exactness).
  double Total() const { return nodes_[1]; }

  // The slot whose cumulative interval [sum of slots before it, that plus
  // its value) holds `target`, following the tree's own sums: at each node
  // go left if target < left sum, otherwise subtract the left sum and go
  // right. A negative target gives the first positive slot, a target >=
  // Total() (or NaN) the last positive one. The result always has
  // Get(slot) > 0. REQUIRES: Total() > 0.
  size_t Find(double target) const;
  // Find for every target (out[i] = Find(targets[i]), the same arithmetic),
  // the descents made together a level at a time, each prefetching its
  // next node's children, so that the misses of a large tree's lower
  // levels overlap across the targets. REQUIRES: as Find;
  // out.size() == targets.size().
  void FindMany(std::span<const double> targets, std::span<size_t> out) const;

 private:
  // Recomputes every internal node from the leaves: O(capacity()).
  void RebuildInternal();

  size_t size_ = 0;
  size_t capacity_ = 1;  // a power of two
  // nodes_[1] is the root, the children of node i are 2i and 2i + 1, the
  // leaf of slot s is nodes_[capacity_ + s]; nodes_[0] is unused. Siblings
  // are adjacent and 16-byte aligned, so each level of a descent reads one
  // cache line.
  std::vector<double, util::HugePageAllocator<double>> nodes_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_SUM_TREE_H_
