#include "index/selectors/sum_tree.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>

namespace replaydb::index {

SumTree::SumTree(size_t n) : size_(n), capacity_(std::bit_ceil(std::max<size_t>(n, 1))) {
  nodes_.assign(2 * capacity_, 0.0);
}

void SumTree::Resize(size_t new_n) {
  if (new_n <= capacity_) {
    // Clear the dropped slots (a no-op when growing within capacity, where
    // slots past size_ already hold 0), one path at a time.
    for (size_t slot = new_n; slot < size_; ++slot) Set(slot, 0.0);
    size_ = new_n;
    return;
  }
  const size_t new_capacity = std::bit_ceil(std::max(new_n, 2 * capacity_));
  std::vector<double, util::HugePageAllocator<double>> nodes(2 * new_capacity, 0.0);
  std::copy(nodes_.begin() + static_cast<std::ptrdiff_t>(capacity_),
            nodes_.begin() + static_cast<std::ptrdiff_t>(capacity_ + size_),
            nodes.begin() + static_cast<std::ptrdiff_t>(new_capacity));
  nodes_.swap(nodes);
  capacity_ = new_capacity;
  size_ = new_n;
  RebuildInternal();
}

void SumTree::RebuildInternal() {
  for (size_t node = capacity_ - 1; node >= 1; --node) {
    nodes_[node] = nodes_[2 * node] + nodes_[2 * node + 1];
  }
}

void SumTree::Reassign(const std::function<double(size_t)>& leaf) {
  for (size_t slot = 0; slot < size_; ++slot) {
    const double value = leaf(slot);
    assert(value >= 0 && std::isfinite(value) && "SumTree::Reassign: value must be finite and >= 0");
    nodes_[capacity_ + slot] = value;
  }
  RebuildInternal();
}

void SumTree::Set(size_t slot, double value) {
  assert(value >= 0 && std::isfinite(value) && "SumTree::Set: value must be finite and >= 0");
  if (slot >= size_) Resize(slot + 1);
  size_t node = capacity_ + slot;
  nodes_[node] = value;
  // Recompute each ancestor from both children, never from a delta.
  for (node /= 2; node >= 1; node /= 2) {
    nodes_[node] = nodes_[2 * node] + nodes_[2 * node + 1];
  }
}

size_t SumTree::Find(double target) const {
  assert(Total() > 0 && "SumTree::Find on a tree without mass");
  const double* nodes = nodes_.data();
  // A target at or past the whole mass (or NaN) becomes +inf, which the loop
  // below turns into "rightmost positive child" at every level (inf < x is
  // false and inf - x stays inf).
  constexpr double kPastTheEnd = std::numeric_limits<double>::infinity();
  if (!(target < nodes[1])) target = kPastTheEnd;
  size_t node = 1;
  while (node < capacity_) {
    // Invariant: nodes[node] > 0, so at least one child is positive.
    const size_t left = 2 * node;
    const double left_sum = nodes[left];
    const double right_sum = nodes[left + 1];
    if (left_sum > 0 && (target < left_sum || right_sum == 0)) {
      node = left;
    } else {
      // right_sum > 0 here: either left_sum == 0 (and the node is positive)
      // or target >= left_sum with right_sum != 0.
      target -= left_sum;
      // Rounding can leave target >= right_sum even though target was below
      // this node's sum (e.g. a tie rounding target - left_sum up to
      // right_sum): clamp to the subtree's last positive leaf rather than
      // descend into it with a target that no longer means anything.
      if (!(target < right_sum)) target = kPastTheEnd;
      node = left + 1;
    }
  }
  return node - capacity_;
}

void SumTree::FindMany(std::span<const double> targets, std::span<size_t> out) const {
  assert(Total() > 0 && "SumTree::FindMany on a tree without mass");
  assert(out.size() == targets.size());
  const double* nodes = nodes_.data();
  constexpr double kPastTheEnd = std::numeric_limits<double>::infinity();
  // Each descent's target as it goes down (Find's `target`), in `left`.
  std::vector<double> left(targets.begin(), targets.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(left[i] < nodes[1])) left[i] = kPastTheEnd;
    out[i] = 1;
  }
  // Every leaf is at the same depth: one pass per level.
  for (size_t level = 1; level < capacity_; level *= 2) {
    for (size_t i = 0; i < out.size(); ++i) {
      const size_t node = out[i];
      const size_t l = 2 * node;
      const double left_sum = nodes[l];
      const double right_sum = nodes[l + 1];
      // Find's step without branches (the way down is a coin flip per
      // level: a branch would mispredict half the time).
      const double target = left[i];
      const bool go_left = left_sum > 0 && (target < left_sum || right_sum == 0);
      const double right_target = target - left_sum;
      const double clamped = right_target < right_sum ? right_target : kPastTheEnd;
      left[i] = go_left ? target : clamped;
      const size_t next = l + (go_left ? 0 : 1);
      out[i] = next;
      if (2 * next < 2 * capacity_) __builtin_prefetch(&nodes[2 * next]);
    }
  }
  for (size_t& node : out) node -= capacity_;
}

}  // namespace replaydb::index
