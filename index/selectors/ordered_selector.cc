#include "index/selectors/ordered_selector.h"

#include <cassert>

namespace replaydb::index {

void OrderedSelector::Insert(const ItemRef& item) {
  assert(items_.count(item.seq) == 0 && "OrderedSelector::Insert: seq already present");
  // The hint makes an append (a new item's case) amortised O(1); an older
  // seq (a trajectory restored from a checkpoint or loaded from the cold
  // tier, whose items interleave with other trajectories') lands in its
  // sorted place, in O(log n).
  items_.emplace_hint(items_.end(), item.seq, item.key);
}

void OrderedSelector::Remove(const ItemRef& item) {
  const auto it = items_.find(item.seq);
  assert(it != items_.end() && it->second == item.key &&
         "OrderedSelector::Remove: item not present");
  if (it == items_.end() || it->second != item.key) return;
  items_.erase(it);
}

void OrderedSelector::Update(const ItemRef& item, double /*new_priority*/) {
  assert(items_.count(item.seq) && "OrderedSelector::Update: item not present");
  (void)item;
}

Selection OrderedSelector::Select(util::Random& /*rng*/, Stratum /*stratum*/) const {
  assert(!items_.empty() && "OrderedSelector::Select on an empty selector");
  const ItemKey key =
      order_ == Order::kOldestFirst ? items_.begin()->second : items_.rbegin()->second;
  return {key, 1.0};
}

}  // namespace replaydb::index
