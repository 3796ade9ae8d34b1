// UniformSelector: every live item with equal probability, with replacement.
#ifndef REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
#define REPLAYDB_INDEX_UNIFORM_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "index/selector.h"

namespace replaydb::index {

// The live items in a dense array, plus a way to find an item's position in
// it. Insert appends, Remove moves the last item into the hole (so positions
// change, the set does not), Select draws a position: all three O(1).
// Select reports probability 1 / size(). Priorities and strata are ignored.
// Not thread-safe (see Selector).
//
// Two ways to find a position:
// - by key (the default constructor): a hash map, for items given without
//   a slot;
// - by slot (UniformSelector(num_slots), what a table uses): a flat array
//   indexed by ItemRef::slot, the item's place in the hot tier. No hashing
//   and no allocation per item; the items of one hot-tier block sit side by
//   side, so removing a trajectory's items reads its slots in order.
class UniformSelector final : public Selector {
 public:
  // Finds items by key.
  UniformSelector() = default;
  // Finds items by slot. Insert, Remove and Update then REQUIRE
  // 0 <= item.slot < num_slots, with at most one present item per slot.
  // Memory: 4 bytes per slot up to the highest slot inserted so far.
  // REQUIRES: 1 <= num_slots <= kMaxSlots.
  explicit UniformSelector(int64_t num_slots);
  UniformSelector(const UniformSelector&) = delete;
  UniformSelector& operator=(const UniformSelector&) = delete;

  // Positions by slot are 32-bit.
  static constexpr int64_t kMaxSlots = int64_t{1} << 32;

  using Selector::Select;

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  // Does nothing: every item has the same chance whatever its priority.
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return items_.size(); }
  Selection Select(Random& rng, Stratum stratum) const override;

  // Called with (position, slot) whenever the item at `position` changes
  // (an insert appends, a removal moves the last item into the hole), so a
  // copy of the dense array of slots (ItemRef::slot) can follow, e.g. on a
  // GPU that draws from it. Set before the first Insert.
  void set_on_place(std::function<void(size_t, int64_t)> on_place) {
    on_place_ = std::move(on_place);
  }

 private:
  struct Entry {
    ItemKey key;
    int64_t slot;
  };
  // The position of `item` (present).
  size_t PositionOf(const ItemRef& item) const;

  std::vector<Entry> items_;  // the live items, densely
  std::function<void(size_t, int64_t)> on_place_;
  // By slot (num_slots_ > 0): positions_by_slot_[items_[i].slot] == i for
  // every i; grown on demand up to num_slots_ entries.
  const int64_t num_slots_ = 0;
  std::vector<uint32_t> positions_by_slot_;
  // By key: positions_by_key_[items_[i].key] == i for every i.
  std::unordered_map<ItemKey, size_t> positions_by_key_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_UNIFORM_SELECTOR_H_
