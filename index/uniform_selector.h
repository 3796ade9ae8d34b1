// UniformSelector: every live item with equal probability, with replacement.
#ifndef REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
#define REPLAYDB_INDEX_UNIFORM_SELECTOR_H_

#include <cstddef>
#include <functional>
#include <unordered_map>
#include <vector>

#include "index/selector.h"

namespace replaydb::index {

// Keys in a dense vector plus a key -> position map. Insert appends, Remove
// moves the last key into the hole (so positions change, the set does not),
// Select draws a position: all three O(1). Select reports probability
// 1 / size(). Priorities and strata are ignored. Not thread-safe (see
// Selector).
class UniformSelector final : public Selector {
 public:
  UniformSelector() = default;
  UniformSelector(const UniformSelector&) = delete;
  UniformSelector& operator=(const UniformSelector&) = delete;

  using Selector::Select;

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  // Does nothing: every item has the same chance whatever its priority.
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return keys_.size(); }
  Selection Select(Random& rng, Stratum stratum) const override;

  // Called with (position, slot) whenever the item at `position` changes
  // (an insert appends, a removal moves the last item into the hole), so a
  // copy of the dense array of slots (ItemRef::slot) can follow, e.g. on a
  // GPU that draws from it. Set before the first Insert.
  void set_on_place(std::function<void(size_t, int64_t)> on_place) {
    on_place_ = std::move(on_place);
  }

 private:
  std::vector<ItemKey> keys_;
  std::vector<int64_t> slots_;  // parallel to keys_ when on_place_ is set
  std::function<void(size_t, int64_t)> on_place_;
  // Invariant: positions_[keys_[i]] == i for every i.
  std::unordered_map<ItemKey, size_t> positions_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
