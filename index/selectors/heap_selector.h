// HeapSelector: the item of lowest (min-heap) or highest (max-heap)
// priority.
#ifndef REPLAYDB_INDEX_SELECTORS_HEAP_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_HEAP_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <set>

#include "index/selectors/selector.h"

namespace replaydb::index {

// Items ordered by (priority, seq): Select returns the item of lowest
// (kMin) or highest (kMax) priority, ties going to the oldest (smallest
// seq) under both orders, with probability 1; it ignores the generator and
// the stratum. Insert, Remove and Update take O(log n), Select O(1).
// Remove and Update find the item by the (priority, seq) the caller gives,
// which the Selector contract makes the item's current ones. Not
// thread-safe (see Selector).
class HeapSelector final : public Selector {
 public:
  enum class Order : uint8_t {
    kMin = 0,  // lowest priority first
    kMax = 1,  // highest priority first
  };

  explicit HeapSelector(Order order) : items_(EntryLess{order}) {}
  HeapSelector(const HeapSelector&) = delete;
  HeapSelector& operator=(const HeapSelector&) = delete;

  Order order() const { return items_.key_comp().order; }

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return items_.size(); }
  using Selector::Select;
  Selection Select(util::Random& rng, Stratum stratum) const override;

 private:
  struct Entry {
    double priority;
    uint64_t seq;
    ItemKey key;
  };
  // The selected item first: by priority (ascending for kMin, descending
  // for kMax), then by seq ascending. seq is unique, so no two entries
  // compare equal.
  struct EntryLess {
    Order order;
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.priority != b.priority) {
        return order == Order::kMin ? a.priority < b.priority : a.priority > b.priority;
      }
      return a.seq < b.seq;
    }
  };

  std::set<Entry, EntryLess> items_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_HEAP_SELECTOR_H_
