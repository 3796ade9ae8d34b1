// PrioritizedSelector: items drawn with probability proportional to
// priority^exponent, with replacement (prioritized experience replay).
#ifndef REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "index/selectors/selector.h"
#include "index/selectors/sum_tree.h"

namespace replaydb::index {

// Each item owns one slot of a SumTree whose leaf holds the item's mass:
//   mass(p) = 0            if p == 0,
//             1            if p > 0 and exponent == 0,
//             p^exponent   otherwise,
// clamped to [kMinMass, kMaxMass] for p > 0, so every item of positive
// priority has positive mass (p^exponent would underflow to 0 for, e.g.,
// p = 1e-200 and exponent 2) and the total cannot overflow (mass would be
// inf for p = 1e200 and exponent 2). The clamp only changes items whose
// p^exponent lies outside roughly [4.9e-324, 2.4e288].
//
// Select draws target = (stratum.index + U) / stratum.count * Total() with
// U = rng.NextDouble() and returns the slot SumTree::Find gives for it,
// with probability mass / Total(). With count = 1 that is one draw from
// the whole mass; with count = B the B draws for b = 0..B-1 come one from
// each of B equal slices of the mass in slot order. An item of priority 0
// is never returned.
//
// A new item takes the most recently freed slot, or else the next unused
// one (so items inserted into a fresh selector without removals occupy
// slots 0, 1, 2, ... in insertion order). A removed item's leaf is set to 0
// before its slot is freed. Slots are never given back: memory stays at
// the largest size() reached.
//
// Insert, Remove and Update take O(log n) (amortised: hash map, slot
// growth), Select O(log n). Not thread-safe (see Selector).
class PrioritizedSelector final : public Selector {
 public:
  // Smallest and largest mass an item of positive priority gets. kMaxMass
  // leaves room for 2^64 items of maximal mass before the total overflows.
  static constexpr double kMinMass = 0x1p-1074;  // the smallest denormal
  static constexpr double kMaxMass = 0x1p+959;   // 2^(1024 - 64 - 1)

  // REQUIRES: exponent finite and >= 0.
  explicit PrioritizedSelector(double exponent);
  PrioritizedSelector(const PrioritizedSelector&) = delete;
  PrioritizedSelector& operator=(const PrioritizedSelector&) = delete;

  double exponent() const { return exponent_; }
  // An item's mass for `priority` under this selector's exponent (above).
  double Mass(double priority) const;

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return slots_.size(); }
  using Selector::Select;
  // REQUIRES: has_mass(); 0 <= stratum.index < stratum.count. (Release
  // builds stay memory-safe when these break: without mass an arbitrary
  // live item comes back with probability 0, and an out-of-range stratum
  // clamps to the first or last positive item.)
  Selection Select(util::Random& rng, Stratum stratum) const override;
  bool has_mass() const override { return tree_.Total() > 0; }

  // The sum of every item's mass.
  double total_mass() const { return tree_.Total(); }

 private:
  const double exponent_;
  SumTree tree_;
  // Invariant: slots_[slot_keys_[s]] == s for every occupied slot s; the
  // leaves of free slots hold 0.
  std::unordered_map<ItemKey, size_t> slots_;
  std::vector<ItemKey> slot_keys_;
  std::vector<size_t> free_slots_;  // a stack: the last freed slot on top
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_
