// Selectors decide which items a sample draws. The table owns one selector
// and calls it under its mutex: implementations need not be thread-safe.
//
// The prioritized and heap selectors (a later issue) implement this same
// interface; ItemRef will then carry a priority.
#ifndef REPLAYDB_INDEX_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "replaydb/options.h"
#include "replaydb/types.h"
#include "util/random.h"

namespace replaydb::index {

// An item as the selector sees it.
struct ItemRef {
  ItemKey key = 0;
  // Insertion order: strictly increasing over a table's life.
  uint64_t seq = 0;
};

struct Selection {
  ItemKey key = 0;
  // Probability this draw had of picking `key` (1 for FIFO and LIFO).
  double probability = 0;
};

class Selector {
 public:
  virtual ~Selector() = default;

  // REQUIRES: item.key not present; item.seq greater than every seq given
  // before.
  virtual void Insert(const ItemRef& item) = 0;
  // REQUIRES: item present (same key and seq as inserted).
  virtual void Remove(const ItemRef& item) = 0;
  virtual size_t size() const = 0;
  // Picks one item. Does not remove it. REQUIRES: size() > 0
  virtual Selection Select(Random& rng) const = 0;
};

// The selector for `kind`; nullptr for a value outside SelectorKind.
std::unique_ptr<Selector> NewSelector(SelectorKind kind);

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTOR_H_
