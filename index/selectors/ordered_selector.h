// OrderedSelector: the oldest (FIFO) or newest (LIFO) live item.
#ifndef REPLAYDB_INDEX_SELECTORS_ORDERED_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_ORDERED_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <map>

#include "index/selectors/selector.h"

namespace replaydb::index {

// Items ordered by ItemRef::seq. Select always returns the item with the
// smallest seq (kOldestFirst, FIFO) or the largest (kNewestFirst, LIFO), with
// probability 1, and ignores the generator, priorities and strata. Insert
// is amortised O(1) for a seq larger than every other (a new item goes at
// the end) and O(log n) for an older one (a trajectory restored from a
// checkpoint or loaded from the cold tier: its items interleave with other
// trajectories'); REQUIRES: a seq not present. Remove O(log n) from
// anywhere, Select O(1). Not thread-safe (see Selector).
class OrderedSelector final : public Selector {
 public:
  enum class Order : uint8_t {
    kOldestFirst = 0,  // FIFO
    kNewestFirst = 1,  // LIFO
  };

  explicit OrderedSelector(Order order) : order_(order) {}
  OrderedSelector(const OrderedSelector&) = delete;
  OrderedSelector& operator=(const OrderedSelector&) = delete;

  Order order() const { return order_; }

  using Selector::Select;

  void Insert(const ItemRef& item) override;
  void Remove(const ItemRef& item) override;
  // Does nothing: the order is by seq, not priority.
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return items_.size(); }
  Selection Select(util::Random& rng, Stratum stratum) const override;

 private:
  const Order order_;
  std::map<uint64_t, ItemKey> items_;  // seq -> key
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_ORDERED_SELECTOR_H_
