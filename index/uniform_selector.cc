#include "index/uniform_selector.h"

#include <cassert>

namespace replaydb::index {

void UniformSelector::Insert(const ItemRef& item) {
  const auto [it, inserted] = positions_.try_emplace(item.key, keys_.size());
  assert(inserted && "UniformSelector::Insert: key already present");
  if (!inserted) return;
  keys_.push_back(item.key);
  if (on_place_) {
    slots_.push_back(item.slot);
    on_place_(keys_.size() - 1, item.slot);
  }
}

void UniformSelector::Remove(const ItemRef& item) {
  const auto it = positions_.find(item.key);
  assert(it != positions_.end() && "UniformSelector::Remove: key not present");
  if (it == positions_.end()) return;
  const size_t hole = it->second;
  const ItemKey last = keys_.back();
  keys_[hole] = last;
  positions_[last] = hole;  // a no-op when the removed key was the last one
  keys_.pop_back();
  positions_.erase(it);
  if (on_place_) {
    slots_[hole] = slots_.back();
    slots_.pop_back();
    if (hole < keys_.size()) on_place_(hole, slots_[hole]);
  }
}

void UniformSelector::Update(const ItemRef& item, double /*new_priority*/) {
  assert(positions_.count(item.key) && "UniformSelector::Update: key not present");
  (void)item;
}

Selection UniformSelector::Select(Random& rng, Stratum /*stratum*/) const {
  assert(!keys_.empty() && "UniformSelector::Select on an empty selector");
  const uint64_t position = rng.Uniform(keys_.size());
  return {keys_[position], 1.0 / static_cast<double>(keys_.size())};
}

}  // namespace replaydb::index
