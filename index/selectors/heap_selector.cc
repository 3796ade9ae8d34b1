#include "index/selectors/heap_selector.h"

#include <cassert>
#include <cmath>

namespace replaydb::index {

void HeapSelector::Insert(const ItemRef& item) {
  assert(std::isfinite(item.priority) && item.priority >= 0 &&
         "HeapSelector::Insert: priority must be finite and >= 0");
  const bool inserted = items_.insert(Entry{item.priority, item.seq, item.key}).second;
  assert(inserted && "HeapSelector::Insert: seq already present");
  (void)inserted;
}

void HeapSelector::Remove(const ItemRef& item) {
  const auto it = items_.find(Entry{item.priority, item.seq, item.key});
  assert(it != items_.end() && it->key == item.key &&
         "HeapSelector::Remove: item not present with this priority and seq");
  if (it == items_.end() || it->key != item.key) return;
  items_.erase(it);
}

void HeapSelector::Update(const ItemRef& item, double new_priority) {
  assert(std::isfinite(new_priority) && new_priority >= 0 &&
         "HeapSelector::Update: priority must be finite and >= 0");
  auto node = items_.extract(Entry{item.priority, item.seq, item.key});
  assert(!node.empty() && node.value().key == item.key &&
         "HeapSelector::Update: item not present with this priority and seq");
  if (node.empty()) return;
  if (node.value().key != item.key) {
    items_.insert(std::move(node));  // not ours: put it back untouched
    return;
  }
  node.value().priority = new_priority;
  items_.insert(std::move(node));
}

Selection HeapSelector::Select(util::Random& /*rng*/, Stratum /*stratum*/) const {
  assert(!items_.empty() && "HeapSelector::Select on an empty selector");
  return {items_.begin()->key, 1.0};
}

}  // namespace replaydb::index
