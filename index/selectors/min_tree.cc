#include "index/selectors/min_tree.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace replaydb::index {

MinTree::MinTree(size_t n) : size_(n), capacity_(std::bit_ceil(std::max<size_t>(n, 1))) {
  nodes_.assign(2 * capacity_, kEmpty);
}

void MinTree::Grow(size_t new_n) {
  if (new_n > capacity_) {
    const size_t new_capacity = std::bit_ceil(std::max(new_n, 2 * capacity_));
    std::vector<double, util::HugePageAllocator<double>> nodes(2 * new_capacity, kEmpty);
    std::copy(nodes_.begin() + static_cast<std::ptrdiff_t>(capacity_),
              nodes_.begin() + static_cast<std::ptrdiff_t>(capacity_ + size_),
              nodes.begin() + static_cast<std::ptrdiff_t>(new_capacity));
    nodes_.swap(nodes);
    capacity_ = new_capacity;
    for (size_t node = capacity_ - 1; node >= 1; --node) {
      nodes_[node] = std::min(nodes_[2 * node], nodes_[2 * node + 1]);
    }
  }
  size_ = new_n;
}

void MinTree::Set(size_t slot, double value) {
  assert(!std::isnan(value) && "MinTree::Set: value is NaN");
  if (slot >= size_) Grow(slot + 1);
  size_t node = capacity_ + slot;
  nodes_[node] = value;
  // Up while the minimum changes: above a node whose minimum stays, every
  // node keeps its own (a random change stops after a level or two, where a
  // full walk of a 10M-slot tree costs 24 cache misses).
  for (node /= 2; node >= 1; node /= 2) {
    const double m = std::min(nodes_[2 * node], nodes_[2 * node + 1]);
    if (m == nodes_[node]) break;
    nodes_[node] = m;
  }
}

}  // namespace replaydb::index
