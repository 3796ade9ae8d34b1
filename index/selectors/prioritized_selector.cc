#include "index/selectors/prioritized_selector.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace replaydb::index {

PrioritizedSelector::PrioritizedSelector(double exponent) : exponent_(exponent) {
  assert(std::isfinite(exponent) && exponent >= 0 &&
         "PrioritizedSelector: exponent must be finite and >= 0");
}

double PrioritizedSelector::Mass(double priority) const {
  assert(std::isfinite(priority) && priority >= 0 &&
         "PrioritizedSelector: priority must be finite and >= 0");
  // Not pow(0, 0) == 1: priority 0 is never drawn, whatever the exponent.
  if (!(priority > 0)) return 0.0;
  if (exponent_ == 0) return 1.0;
  const double mass = exponent_ == 1 ? priority : std::pow(priority, exponent_);
  return std::clamp(mass, kMinMass, kMaxMass);
}

void PrioritizedSelector::Insert(const ItemRef& item) {
  size_t slot;
  if (free_slots_.empty()) {
    slot = slot_keys_.size();
  } else {
    slot = free_slots_.back();
  }
  const auto [it, inserted] = slots_.try_emplace(item.key, slot);
  assert(inserted && "PrioritizedSelector::Insert: key already present");
  if (!inserted) return;
  if (free_slots_.empty()) {
    slot_keys_.push_back(item.key);
  } else {
    free_slots_.pop_back();
    slot_keys_[slot] = item.key;
  }
  tree_.Set(slot, Mass(item.priority));
}

void PrioritizedSelector::Remove(const ItemRef& item) {
  const auto it = slots_.find(item.key);
  assert(it != slots_.end() && "PrioritizedSelector::Remove: key not present");
  if (it == slots_.end()) return;
  const size_t slot = it->second;
  tree_.Set(slot, 0.0);
  free_slots_.push_back(slot);
  slots_.erase(it);
}

void PrioritizedSelector::Update(const ItemRef& item, double new_priority) {
  const auto it = slots_.find(item.key);
  assert(it != slots_.end() && "PrioritizedSelector::Update: key not present");
  if (it == slots_.end()) return;
  tree_.Set(it->second, Mass(new_priority));
}

Selection PrioritizedSelector::Select(util::Random& rng, Stratum stratum) const {
  assert(has_mass() && "PrioritizedSelector::Select without mass");
  assert(stratum.count >= 1 && stratum.index >= 0 && stratum.index < stratum.count &&
         "PrioritizedSelector::Select: stratum out of range");
  const double total = tree_.Total();
  if (!(total > 0)) {
    // A broken REQUIRES (asserted above). Rather than descend a tree without
    // mass, release builds return some live item with probability 0.
    return {slots_.empty() ? ItemKey{0} : slots_.begin()->first, 0.0};
  }
  const double u = rng.NextDouble();
  double target;
  if (stratum.count == 1) {
    target = u * total;
  } else {
    target = (static_cast<double>(stratum.index) + u) / static_cast<double>(stratum.count) * total;
  }
  // Find clamps a target that rounding puts at or past the total.
  const size_t slot = tree_.Find(target);
  return {slot_keys_[slot], tree_.Get(slot) / total};
}

}  // namespace replaydb::index
