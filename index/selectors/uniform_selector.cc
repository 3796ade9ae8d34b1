#include "index/selectors/uniform_selector.h"

#include <algorithm>
#include <cassert>

namespace replaydb::index {
namespace {

// How many items ahead InsertMany and RemoveMany ask for the memory they
// will touch (the items' places are scattered: fetching several at once
// hides most of the latency).
constexpr size_t kPrefetchAhead = 16;

// Grows `v` to hold index `i` (geometrically, at most `limit` entries).
template <typename V>
void GrowFor(V& v, size_t i, size_t limit) {
  if (i < v.size()) return;
  v.resize(std::min(limit, std::max(i + 1, 2 * v.size())));
}

}  // namespace

UniformSelector::UniformSelector(int64_t num_slots, int64_t block_steps)
    : num_slots_(num_slots), block_steps_(static_cast<uint32_t>(block_steps)) {
  assert(num_slots >= 1 && num_slots <= kMaxSlots);
  assert(block_steps >= 1 && block_steps <= num_slots);
}

void UniformSelector::Insert(const ItemRef& item) { InsertOne(item); }

void UniformSelector::InsertMany(std::span<const ItemRef> items) {
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (by_slot() && i + kPrefetchAhead < n) {
      const size_t ahead = static_cast<size_t>(items[i + kPrefetchAhead].slot);
      if (ahead < positions_by_slot_.size()) __builtin_prefetch(&positions_by_slot_[ahead], 1);
    }
    InsertOne(items[i]);
  }
}

void UniformSelector::InsertOne(const ItemRef& item) {
  if (!by_slot()) {
    const size_t position = entries_.size();
    const bool inserted = positions_by_key_.try_emplace(item.key, position).second;
    assert(inserted && "UniformSelector::Insert: key already present");
    if (!inserted) return;
    entries_.push_back({item.key, item.slot});
    if (on_place_) on_place_(position, item.slot);
    return;
  }
  assert(item.slot >= 0 && item.slot < num_slots_ && "UniformSelector::Insert: slot out of range");
  const uint32_t slot = static_cast<uint32_t>(item.slot);
  const uint32_t position = static_cast<uint32_t>(slots_.size());
  GrowFor(positions_by_slot_, slot, static_cast<size_t>(num_slots_));
  positions_by_slot_[slot] = position;
  const uint32_t block = slot / block_steps_;
  GrowFor(block_keys_, block, static_cast<size_t>((num_slots_ - 1) / block_steps_ + 1));
  block_keys_[block] = item.key - slot % block_steps_;
  slots_.push_back(slot);
  if (on_place_) on_place_(position, item.slot);
}

void UniformSelector::Remove(const ItemRef& item) { RemoveOne(item); }

void UniformSelector::RemoveMany(std::span<const ItemRef> items) {
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (by_slot() && i + kPrefetchAhead < n && slots_.size() > kPrefetchAhead) {
      // The hole a later removal leaves, and where the item that will fill
      // it keeps its position (hints: removals meanwhile may move both).
      const size_t hole = positions_by_slot_[static_cast<size_t>(items[i + kPrefetchAhead].slot)];
      if (hole < slots_.size()) __builtin_prefetch(&slots_[hole], 1);
      __builtin_prefetch(&positions_by_slot_[slots_[slots_.size() - 1 - kPrefetchAhead]], 1);
    }
    RemoveOne(items[i]);
  }
}

void UniformSelector::RemoveOne(const ItemRef& item) {
  if (!by_slot()) {
    const auto it = positions_by_key_.find(item.key);
    assert(it != positions_by_key_.end() && "UniformSelector::Remove: key not present");
    if (it == positions_by_key_.end()) return;
    const size_t hole = it->second;
    const Entry last = entries_.back();
    entries_[hole] = last;
    positions_by_key_[last.key] = hole;  // a no-op when the removed key was the last one
    entries_.pop_back();
    positions_by_key_.erase(item.key);
    if (on_place_ && hole < entries_.size()) on_place_(hole, last.slot);
    return;
  }
  assert(item.slot >= 0 && static_cast<size_t>(item.slot) < positions_by_slot_.size() &&
         "UniformSelector::Remove: slot out of range");
  const uint32_t hole = positions_by_slot_[static_cast<size_t>(item.slot)];
  assert(hole < slots_.size() && slots_[hole] == static_cast<uint32_t>(item.slot) &&
         KeyAt(slots_[hole]) == item.key && "UniformSelector::Remove: no such item at the slot");
  const uint32_t last = slots_.back();
  slots_[hole] = last;
  positions_by_slot_[last] = hole;  // a no-op when the removed item was the last one
  slots_.pop_back();
  if (on_place_ && hole < slots_.size()) on_place_(hole, last);
}

void UniformSelector::Update(const ItemRef& item, double /*new_priority*/) {
  if (by_slot()) {
    assert(item.slot >= 0 && static_cast<size_t>(item.slot) < positions_by_slot_.size() &&
           KeyAt(static_cast<uint32_t>(item.slot)) == item.key &&
           "UniformSelector::Update: no such item at the slot");
  } else {
    assert(positions_by_key_.count(item.key) && "UniformSelector::Update: key not present");
  }
  (void)item;
}

Selection UniformSelector::Select(util::Random& rng, Stratum /*stratum*/) const {
  assert(size() > 0 && "UniformSelector::Select on an empty selector");
  const uint64_t position = rng.Uniform(size());
  const double probability = 1.0 / static_cast<double>(size());
  if (by_slot()) return {KeyAt(slots_[position]), probability};
  return {entries_[position].key, probability};
}

}  // namespace replaydb::index
