// UniformSelector: every live item with equal probability, with replacement.
#ifndef REPLAYDB_INDEX_SELECTORS_UNIFORM_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_UNIFORM_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "index/selectors/selector.h"
#include "util/huge_page_allocator.h"

namespace replaydb::index {

// The live items in a dense array, plus a way to find an item's position in
// it. Insert appends, Remove moves the last item into the hole (so positions
// change, the set does not), Select draws a position: all three O(1).
// Select reports probability 1 / size(). Priorities and strata are ignored.
// Not thread-safe (see Selector).
//
// Two ways to keep them:
// - by key (the default constructor): the dense array holds keys, and a
//   hash map finds a key's position; for items given without a slot.
// - by slot (UniformSelector(num_slots, block_steps), what a table uses):
//   the dense array holds only the items' hot-tier slots (ItemRef::slot, 4
//   bytes each), a flat array indexed by slot finds an item's position, and
//   a key is rebuilt from its slot: the items of one hot-tier block are
//   consecutive steps of one trajectory, so their keys are the block's first
//   key plus the step. No hashing, no allocation per item, and the arrays an
//   append or a removal writes to stay small.
class UniformSelector final : public Selector {
 public:
  // Keeps items by key.
  UniformSelector() = default;
  // Keeps items by slot. Insert, Remove and Update then REQUIRE
  // 0 <= item.slot < num_slots, at most one present item per slot, and for
  // items in the same block (slot / block_steps) keys that differ as their
  // slots do (steps of one trajectory, as a table's blocks hold them).
  // Memory: 8 bytes per slot up to the highest slot inserted so far, 4 per
  // present item, 8 per block.
  // REQUIRES: 1 <= num_slots <= kMaxSlots, block_steps >= 1.
  explicit UniformSelector(int64_t num_slots, int64_t block_steps = 1);
  UniformSelector(const UniformSelector&) = delete;
  UniformSelector& operator=(const UniformSelector&) = delete;

  // Slots and positions are 32-bit.
  static constexpr int64_t kMaxSlots = int64_t{1} << 32;

  using Selector::Select;

  void Insert(const ItemRef& item) override;
  void InsertMany(std::span<const ItemRef> items) override;
  void Remove(const ItemRef& item) override;
  void RemoveMany(std::span<const ItemRef> items) override;
  // Does nothing: every item has the same chance whatever its priority.
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return by_slot() ? slots_.size() : entries_.size(); }
  Selection Select(util::Random& rng, Stratum stratum) const override;

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
  bool by_slot() const { return num_slots_ > 0; }
  void InsertOne(const ItemRef& item);
  void RemoveOne(const ItemRef& item);
  // By slot: the key of the item at `slot` (present).
  ItemKey KeyAt(uint32_t slot) const {
    return block_keys_[slot / block_steps_] + slot % block_steps_;
  }

  std::function<void(size_t, int64_t)> on_place_;
  const int64_t num_slots_ = 0;
  const uint32_t block_steps_ = 1;

  // By key: the live items densely, and positions_by_key_[entries_[i].key]
  // == i for every i.
  std::vector<Entry> entries_;
  std::unordered_map<ItemKey, size_t> positions_by_key_;

  // By slot: the live items' slots densely, positions_by_slot_[slots_[i]] ==
  // i for every i, and block_keys_[b] the key of block b's first step (for
  // the blocks that have held items; grown on demand like the positions).
  // Huge pages (util/huge_page_allocator.h): removals write to random
  // positions, inserts to every environment's block.
  std::vector<uint32_t, util::HugePageAllocator<uint32_t>> slots_;
  std::vector<uint32_t, util::HugePageAllocator<uint32_t>> positions_by_slot_;
  std::vector<ItemKey, util::HugePageAllocator<ItemKey>> block_keys_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_UNIFORM_SELECTOR_H_
