#include "index/uniform_selector.h"

#include <algorithm>
#include <cassert>

namespace replaydb::index {

UniformSelector::UniformSelector(int64_t num_slots) : num_slots_(num_slots) {
  assert(num_slots >= 1 && num_slots <= kMaxSlots);
}

size_t UniformSelector::PositionOf(const ItemRef& item) const {
  if (num_slots_ > 0) {
    assert(item.slot >= 0 && item.slot < static_cast<int64_t>(positions_by_slot_.size()) &&
           "UniformSelector: slot out of range");
    const size_t position = positions_by_slot_[static_cast<size_t>(item.slot)];
    assert(position < items_.size() && items_[position].key == item.key &&
           "UniformSelector: no such item at the slot");
    return position;
  }
  const auto it = positions_by_key_.find(item.key);
  assert(it != positions_by_key_.end() && "UniformSelector: key not present");
  return it->second;
}

void UniformSelector::Insert(const ItemRef& item) {
  const size_t position = items_.size();
  if (num_slots_ > 0) {
    assert(item.slot >= 0 && item.slot < num_slots_ && "UniformSelector::Insert: slot out of range");
    const size_t slot = static_cast<size_t>(item.slot);
    if (slot >= positions_by_slot_.size()) {
      // Blocks are handed out lowest id first: grow geometrically.
      positions_by_slot_.resize(std::min<size_t>(static_cast<size_t>(num_slots_),
                                                 std::max(slot + 1, 2 * positions_by_slot_.size())));
    }
    positions_by_slot_[slot] = static_cast<uint32_t>(position);
  } else {
    const bool inserted = positions_by_key_.try_emplace(item.key, position).second;
    assert(inserted && "UniformSelector::Insert: key already present");
    if (!inserted) return;
  }
  items_.push_back({item.key, item.slot});
  if (on_place_) on_place_(position, item.slot);
}

void UniformSelector::Remove(const ItemRef& item) {
  if (num_slots_ == 0 && positions_by_key_.count(item.key) == 0) {
    assert(false && "UniformSelector::Remove: key not present");
    return;
  }
  const size_t hole = PositionOf(item);
  const Entry last = items_.back();
  items_[hole] = last;
  items_.pop_back();
  if (num_slots_ > 0) {
    // A no-op when the removed item was the last one.
    positions_by_slot_[static_cast<size_t>(last.slot)] = static_cast<uint32_t>(hole);
  } else {
    positions_by_key_[last.key] = hole;
    positions_by_key_.erase(item.key);
  }
  if (on_place_ && hole < items_.size()) on_place_(hole, last.slot);
}

void UniformSelector::Update(const ItemRef& item, double /*new_priority*/) {
#ifndef NDEBUG
  (void)PositionOf(item);
#else
  (void)item;
#endif
}

Selection UniformSelector::Select(Random& rng, Stratum /*stratum*/) const {
  assert(!items_.empty() && "UniformSelector::Select on an empty selector");
  const uint64_t position = rng.Uniform(items_.size());
  return {items_[position].key, 1.0 / static_cast<double>(items_.size())};
}

}  // namespace replaydb::index
