// Selectors decide which items a sample draws. The table owns one selector
// and calls it under its mutex: implementations need not be thread-safe.
#ifndef REPLAYDB_INDEX_SELECTORS_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "replaydb/options.h"
#include "replaydb/types.h"
#include "util/fork_join.h"
#include "util/random.h"

namespace replaydb::index {

// An item as the selector sees it.
struct ItemRef {
  ItemKey key = 0;
  // Insertion order: strictly increasing over a table's life.
  uint64_t seq = 0;
  // The item's priority: finite and >= 0. Only prioritized and heap
  // selectors use it.
  double priority = 0;
  // Where the item's window starts in the hot tier (block * block_steps +
  // step in block), for selectors on a GPU and those that index items by
  // their place (uniform selectors made with slots, which REQUIRE it in
  // Insert, Remove and Update); -1 when not given.
  int64_t slot = -1;
};

struct Selection {
  ItemKey key = 0;
  // Probability this draw had of picking `key` (1 for FIFO, LIFO and heaps).
  double probability = 0;
};

// Which part of the probability mass a draw comes from. With count = B and
// index = b, a prioritized selector draws from the b-th of B equal slices of
// the mass (stratified sampling); count = 1 means the whole mass.
struct Stratum {
  int64_t index = 0;
  int64_t count = 1;
};

struct SelectorOptions {
  SelectorKind kind = SelectorKind::kUniform;
  // Prioritized: probability proportional to priority^priority_exponent.
  double priority_exponent = 1.0;
  // The hot tier's slots (blocks * block_steps) when > 0: a uniform
  // selector is then a BlockUniformSelector, which keeps items by
  // ItemRef::slot (flat arrays) instead of hashing keys; every ItemRef
  // given to it must carry its slot, and the items of one block
  // (block_steps slots) be steps of one trajectory. Ignored by the other
  // kinds, and when above BlockUniformSelector::kMaxSlots.
  // Default: 0 (items kept by key).
  int64_t slots = 0;
  // Steps per hot-tier block, with `slots`. Default: 1.
  int64_t block_steps = 1;
};

class Selector {
 public:
  virtual ~Selector() = default;

  // REQUIRES: item.key not present; item.seq greater than every seq given
  // before; item.priority finite and >= 0.
  virtual void Insert(const ItemRef& item) = 0;
  // Insert of each item in order (REQUIRES as for Insert); one call for
  // many, which implementations may make cheaper than Insert per item.
  virtual void InsertMany(std::span<const ItemRef> items) {
    for (const ItemRef& item : items) Insert(item);
  }
  // InsertMany of items no two of which share a hot-tier block (slot /
  // block_steps; a vector append's, one per environment), which
  // implementations may split over the parts of `fork_join`. The result is
  // InsertMany's.
  virtual void InsertManyDistinctBlocks(std::span<const ItemRef> items, util::ForkJoin& fork_join) {
    (void)fork_join;
    InsertMany(items);
  }
  // REQUIRES: item present (same key and seq as inserted; priority as last
  // set).
  virtual void Remove(const ItemRef& item) = 0;
  // Remove of each item in order (REQUIRES as for Remove).
  virtual void RemoveMany(std::span<const ItemRef> items) {
    for (const ItemRef& item : items) Remove(item);
  }
  // Removes every present item in the hot-tier blocks `blocks` (block =
  // slot / block_steps; items inserted with slots) and returns how many it
  // removed; -1, removing nothing, when the selector cannot (the caller
  // then removes the items with Remove or RemoveMany).
  virtual int64_t RemoveBlocks(std::span<const int64_t> blocks) {
    (void)blocks;
    return -1;
  }
  // Changes a present item's priority from item.priority to new_priority.
  // Selectors that ignore priorities do nothing.
  // REQUIRES: item present; new_priority finite and >= 0.
  virtual void Update(const ItemRef& item, double new_priority) = 0;
  virtual size_t size() const = 0;
  // Picks one item. Does not remove it. Selectors without probability mass
  // ignore `stratum`. A prioritized selector never returns an item of
  // priority 0 while any item has priority > 0 (and draws uniformly when
  // none has). REQUIRES: has_mass().
  virtual Selection Select(util::Random& rng, Stratum stratum) const = 0;
  Selection Select(util::Random& rng) const { return Select(rng, Stratum{}); }
  // out.size() draws, draw b of stratum {b, out.size()} when `stratified`:
  // as many Selects, which a selector may make together (prefetching the
  // lines each will read before it reads any) where that changes nothing
  // but their speed and the order the random numbers are taken in.
  virtual void SelectMany(util::Random& rng, bool stratified, std::span<Selection> out) const {
    const int64_t n = static_cast<int64_t>(out.size());
    for (int64_t b = 0; b < n; ++b) {
      out[b] = Select(rng, stratified ? Stratum{b, n} : Stratum{});
    }
  }
  // Whether Select can draw: size() > 0 for the host's selectors.
  virtual bool has_mass() const { return size() > 0; }

  // For importance weights normalised over the whole selector (PER's
  // definition, SampleOptions::weight_normalization): log2(P_min / P),
  // where P is the probability a draw picks a given live item of
  // `priority` and P_min the smallest such probability over the live items
  // a draw can pick. <= 0. Selectors whose draws give every item they can
  // pick the same probability (uniform; FIFO, LIFO and heaps, whose draws
  // are certain) return 0, as does a prioritized selector drawing
  // uniformly. Computed in log space: it stays finite where P_min / P
  // underflows. REQUIRES: the item can be drawn (a prioritized selector's
  // item of priority 0 only while no item has priority > 0).
  virtual double Log2MinProbabilityRatio(double priority) const {
    (void)priority;
    return 0;
  }
};

// nullptr for a kind outside the enum.
std::unique_ptr<Selector> NewSelector(const SelectorOptions& options);

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_SELECTOR_H_
