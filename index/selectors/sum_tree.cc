#include "index/selectors/sum_tree.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>

namespace replaydb::index {
namespace {

constexpr size_t kLineDoubles = 64 / sizeof(double);
static_assert(SumTree::kFanout == kLineDoubles, "a node's children fill one cache line");

// A target at or past the whole mass (or NaN) becomes +inf, which Pick
// turns into "last positive child" at every level (inf < x is false).
constexpr double kPastTheEnd = std::numeric_limits<double>::infinity();

// One level of a descent: among a node's children `c` (not all 0), the
// first positive one whose sum exceeds what is left of *target, subtracting
// the sums passed on the way. Where none does (the target was at or past
// the node's sum, or rounding pushed it there), the last positive child,
// with *target made +inf so that the levels below end on that subtree's
// last positive leaf. Without branches on the data: the way down is
// unpredictable, and Find and FindMany share this arithmetic exactly.
inline size_t Pick(const double* c, double* target) {
  double t = *target;
  size_t last = 0;
  size_t pick = 0;
  bool found = false;
  for (size_t i = 0; i < SumTree::kFanout; ++i) {
    const double s = c[i];
    const bool positive = s > 0;
    last = positive ? i : last;
    const bool here = !found && positive && t < s;
    pick = here ? i : pick;
    found = found || here;
    t = found ? t : t - s;
  }
  *target = found ? t : kPastTheEnd;
  return found ? pick : last;
}

}  // namespace

SumTree::SumTree(size_t n) : size_(n), capacity_(std::bit_ceil(std::max<size_t>(n, 1))) {
  Allocate();
}

void SumTree::Allocate() {
  // Level sizes: capacity_ leaves, then one node per kFanout below, to one.
  size_t counts[kMaxLevels];
  levels_ = 0;
  for (size_t count = capacity_;; count = (count + kFanout - 1) / kFanout) {
    assert(levels_ < kMaxLevels);
    counts[levels_++] = count;
    if (count == 1) break;
  }
  size_t total = 0;
  for (size_t l = 0; l < levels_; ++l) {
    offset_[l] = total;
    total += (counts[l] + kLineDoubles - 1) / kLineDoubles * kLineDoubles;
  }
  // One line more, to start the levels on a 64-byte boundary.
  nodes_.assign(total + kLineDoubles, 0.0);
  const auto address = reinterpret_cast<std::uintptr_t>(nodes_.data());
  const size_t skip = (64 - address % 64) % 64 / sizeof(double);
  for (size_t l = 0; l < levels_; ++l) offset_[l] += skip;
}

void SumTree::Resize(size_t new_n) {
  if (new_n <= capacity_) {
    // Clear the dropped slots (a no-op when growing within capacity, where
    // slots past size_ already hold 0), one path at a time.
    for (size_t slot = new_n; slot < size_; ++slot) Set(slot, 0.0);
    size_ = new_n;
    return;
  }
  std::vector<double, util::HugePageAllocator<double>> old;
  old.swap(nodes_);
  const size_t old_leaves = offset_[0];
  capacity_ = std::bit_ceil(std::max(new_n, 2 * capacity_));
  Allocate();
  std::copy(old.begin() + static_cast<std::ptrdiff_t>(old_leaves),
            old.begin() + static_cast<std::ptrdiff_t>(old_leaves + size_),
            nodes_.begin() + static_cast<std::ptrdiff_t>(offset_[0]));
  size_ = new_n;
  RebuildInternal();
}

void SumTree::Recompute(size_t level, size_t node) {
  const double* c = nodes_.data() + offset_[level - 1] + node * kFanout;
  double sum = c[0];
  for (size_t i = 1; i < kFanout; ++i) sum += c[i];
  nodes_[offset_[level] + node] = sum;
}

void SumTree::RebuildInternal() {
  size_t count = capacity_;
  for (size_t level = 1; level < levels_; ++level) {
    count = (count + kFanout - 1) / kFanout;
    for (size_t node = 0; node < count; ++node) Recompute(level, node);
  }
}

void SumTree::Reassign(const std::function<double(size_t)>& leaf) {
  for (size_t slot = 0; slot < size_; ++slot) {
    const double value = leaf(slot);
    assert(value >= 0 && std::isfinite(value) && "SumTree::Reassign: value must be finite and >= 0");
    nodes_[offset_[0] + slot] = value;
  }
  RebuildInternal();
}

void SumTree::Set(size_t slot, double value) {
  assert(value >= 0 && std::isfinite(value) && "SumTree::Set: value must be finite and >= 0");
  if (slot >= size_) Resize(slot + 1);
  nodes_[offset_[0] + slot] = value;
  // Recompute each ancestor from its children, never from a delta.
  size_t node = slot;
  for (size_t level = 1; level < levels_; ++level) {
    node /= kFanout;
    Recompute(level, node);
  }
}

size_t SumTree::Find(double target) const {
  assert(Total() > 0 && "SumTree::Find on a tree without mass");
  const double* nodes = nodes_.data();
  if (!(target < Total())) target = kPastTheEnd;
  // Invariant: the node reached has a positive sum, so a child is positive.
  size_t node = 0;
  for (size_t level = levels_ - 1; level > 0; --level) {
    node = node * kFanout + Pick(nodes + offset_[level - 1] + node * kFanout, &target);
  }
  return node;
}

void SumTree::FindMany(std::span<const double> targets, std::span<size_t> out) const {
  assert(Total() > 0 && "SumTree::FindMany on a tree without mass");
  assert(out.size() == targets.size());
  const double* nodes = nodes_.data();
  // Each descent's target as it goes down (Find's `target`), in `left`.
  std::vector<double> left(targets.begin(), targets.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(left[i] < Total())) left[i] = kPastTheEnd;
    out[i] = 0;
  }
  // Every leaf is at the same depth: one pass per level.
  for (size_t level = levels_ - 1; level > 0; --level) {
    const double* children = nodes + offset_[level - 1];
    const double* grandchildren = level > 1 ? nodes + offset_[level - 2] : nullptr;
    for (size_t i = 0; i < out.size(); ++i) {
      const size_t next = out[i] * kFanout + Pick(children + out[i] * kFanout, &left[i]);
      out[i] = next;
      if (grandchildren != nullptr) __builtin_prefetch(grandchildren + next * kFanout);
    }
  }
}

}  // namespace replaydb::index
