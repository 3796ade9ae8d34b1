#include "index/selectors/ordered_selector.h"

#include <cassert>

namespace replaydb::index {

void OrderedSelector::Insert(const ItemRef& item) {
  assert((items_.empty() || item.seq > items_.rbegin()->first) &&
         "OrderedSelector::Insert: seq must exceed every seq inserted before");
  // The hint makes an append (the contract's case) amortised O(1); an
  // out-of-order seq still lands in its sorted place, in O(log n).
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
