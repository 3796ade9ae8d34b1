#include "index/selector.h"

#include "index/ordered_selector.h"
#include "index/uniform_selector.h"

namespace replaydb::index {

std::unique_ptr<Selector> NewSelector(SelectorKind kind) {
  switch (kind) {
    case SelectorKind::kUniform:
      return std::make_unique<UniformSelector>();
    case SelectorKind::kFifo:
      return std::make_unique<OrderedSelector>(OrderedSelector::Order::kOldestFirst);
    case SelectorKind::kLifo:
      return std::make_unique<OrderedSelector>(OrderedSelector::Order::kNewestFirst);
  }
  return nullptr;  // a value outside the enum (e.g. a corrupt catalog byte)
}

}  // namespace replaydb::index
