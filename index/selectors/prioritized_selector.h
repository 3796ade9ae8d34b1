// PrioritizedSelector: items drawn with probability proportional to
// priority^exponent, with replacement (prioritized experience replay).
#ifndef REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "index/selectors/min_tree.h"
#include "index/selectors/selector.h"
#include "index/selectors/sum_tree.h"
#include "util/huge_page_allocator.h"

namespace replaydb::index {

// Each item owns one slot of a SumTree whose leaf holds the item's mass,
// scaled by a power of two shared by every item:
//   mass(p) = 0                       if p == 0,
//             2^-scale                if p > 0 and exponent == 0,
//             p^exponent * 2^-scale   otherwise.
// The scale keeps the masses in range over the whole double range of
// priorities and exponents: p^exponent alone underflows to 0 for p = 1e-200
// and exponent 2, and overflows for p = 1e300. Where p^exponent is a normal
// double the leaf is pow(p, exponent) * 2^-scale; elsewhere p^exponent is
// formed as a mantissa and a power of two (p = m * 2^e: m^exponent *
// 2^(e * exponent), the fractional part of e * exponent folded into the
// mantissa; one rounding for whole exponents below 1000, a few otherwise),
// never overflowing or underflowing on the way.
// A probability is leaf / Total(): the scale cancels, so probabilities and
// draws follow the definition wherever a probability is a double.
//
// The scale: 0 at first; chosen again (Rescale) so that the largest
// priority's leaf lies in [2^480, 2^481) whenever
//  - a leaf would reach 2^958 (so the total of up to 2^64 leaves stays
//    finite), or
//  - the total falls below 1 while an item has positive priority. A total
//    >= 1 means every item whose probability is a normal double has a
//    normal leaf (leaf = probability * total), so no probability loses
//    precision to denormal leaves.
// A rescale recomputes every leaf from its priority, O(capacity); it comes
// only after the largest priority's mass has moved by a factor of about
// 2^477 up or 2^480 down, never in ordinary use.
//
// Every item of priority 0: Select then draws uniformly among the live
// items, with probability 1/size() (Reverb does the same; has_mass() is
// true whenever size() > 0). While any item has priority > 0, items of
// priority 0 are never drawn.
//
// Select draws target = (stratum.index + U) / stratum.count * Total() with
// U = rng.NextDouble() and returns the slot SumTree::Find gives for it,
// with probability leaf / Total(). With count = 1 that is one draw from the
// whole mass; with count = B the B draws for b = 0..B-1 come one from each
// of B equal slices of the mass in slot order. Drawing uniformly, stratum b
// of B is the b-th of B equal slices of the live items (in an order of
// their own).
//
// Beside the sum tree a MinTree holds each slot's priority (+inf for
// priority 0 and free slots): its minimum gives Log2MinProbabilityRatio
// (the buffer-wide importance weight normalisation) and the rescale reads
// the priorities from it.
//
// A new item takes the most recently freed slot, or else the next unused
// one (so items inserted into a fresh selector without removals occupy
// slots 0, 1, 2, ... in insertion order). A removed item's leaf is set to 0
// before its slot is freed. Slots are never given back: memory stays at
// the largest size() reached.
//
// Insert, Remove and Update take O(log n) (amortised: hash map, slot
// growth, rescales), Select O(log n). Not thread-safe (see Selector).
class PrioritizedSelector final : public Selector {
 public:
  // A rescale puts the largest priority's leaf in [2^kTargetExponent,
  // 2^(kTargetExponent + 1)); leaves stay below 2^(kMaxExponent + 1).
  static constexpr int kTargetExponent = 480;
  static constexpr int kMaxExponent = 957;

  // REQUIRES: exponent finite and >= 0.
  explicit PrioritizedSelector(double exponent);
  PrioritizedSelector(const PrioritizedSelector&) = delete;
  PrioritizedSelector& operator=(const PrioritizedSelector&) = delete;

  double exponent() const { return exponent_; }
  // The leaf an item of `priority` gets at the current scale (above).
  double Mass(double priority) const;
  // The current scale: leaves are p^exponent * 2^-scale().
  int64_t scale() const { return scale_; }

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return slots_.size(); }
  using Selector::Select;
  // REQUIRES: size() > 0; 0 <= stratum.index < stratum.count. (Release
  // builds stay memory-safe when these break: an out-of-range stratum
  // clamps to the first or last item.)
  Selection Select(util::Random& rng, Stratum stratum) const override;
  // The targets drawn in Select's order (the same random numbers), then
  // found together (SumTree::FindMany).
  void SelectMany(util::Random& rng, bool stratified, std::span<Selection> out) const override;
  bool has_mass() const override { return !slots_.empty(); }
  double Log2MinProbabilityRatio(double priority) const override;

  // The sum of every item's leaf.
  double total_mass() const { return tree_.Total(); }
  // The sum of every item's mass without the scale: sum of p^exponent over
  // the items (+inf where that overflows a double; 0 when every priority
  // is 0).
  double unscaled_mass() const { return std::ldexp(tree_.Total(), static_cast<int>(scale_)); }
  // Items of priority > 0.
  size_t positive() const { return positive_; }
  // The smallest priority > 0 of an item; 0 when none has one.
  double smallest_positive_priority() const { return positive_ == 0 ? 0 : priorities_.Min(); }

 private:
  // p^exponent as mantissa * 2^exponent2, mantissa in [0.5, 1) (see the
  // class comment). REQUIRES: p > 0, exponent_ > 0.
  void PowerOf(double p, double* mantissa, int64_t* exponent2) const;
  // Mass at `scale`.
  double MassAt(double priority, int64_t scale) const;
  // The leaf of mantissa * 2^exponent2 (PowerOf's) at `scale`.
  static double ScaledMass(double mantissa, int64_t exponent2, int64_t scale);
  // Gives `slot` priority `p` (the sum tree's leaf, the min tree's value,
  // the count of positives), rescaling first if its leaf would be too
  // large. REQUIRES: p finite and >= 0.
  void SetSlot(size_t slot, double old_priority, double p);
  // Rescales if the total fell below 1 while an item has priority > 0.
  void RescaleIfLow();
  // Chooses the scale anew from the largest priority held and recomputes
  // every leaf.
  void Rescale();

  const double exponent_;
  int64_t scale_ = 0;
  SumTree tree_;
  MinTree priorities_;  // each slot's priority; +inf for 0 and free slots
  size_t positive_ = 0;
  // Invariant: slots_[slot_keys_[s]] == s for every occupied slot s; the
  // leaves of free slots hold 0.
  std::unordered_map<ItemKey, size_t> slots_;
  std::vector<ItemKey, util::HugePageAllocator<ItemKey>> slot_keys_;
  std::vector<size_t> free_slots_;  // a stack: the last freed slot on top
  // The occupied slots, densely (for uniform draws), and each occupied
  // slot's place there.
  std::vector<size_t> occupied_;
  std::vector<size_t> place_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_PRIORITIZED_SELECTOR_H_
