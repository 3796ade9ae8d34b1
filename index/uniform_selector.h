// UniformSelector: every live item with equal probability, with replacement.
#ifndef REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
#define REPLAYDB_INDEX_UNIFORM_SELECTOR_H_

#include <cstddef>
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

 private:
  std::vector<ItemKey> keys_;
  // Invariant: positions_[keys_[i]] == i for every i.
  std::unordered_map<ItemKey, size_t> positions_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
