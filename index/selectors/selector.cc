#include "index/selectors/selector.h"

#include "index/selectors/block_uniform_selector.h"
#include "index/selectors/heap_selector.h"
#include "index/selectors/ordered_selector.h"
#include "index/selectors/prioritized_selector.h"
#include "index/selectors/uniform_selector.h"

namespace replaydb::index {

std::unique_ptr<Selector> NewSelector(const SelectorOptions& options) {
  switch (options.kind) {
    case SelectorKind::kUniform:
      if (options.slots > 0 && options.slots <= BlockUniformSelector::kMaxSlots) {
        return std::make_unique<BlockUniformSelector>(options.slots, options.block_steps);
      }
      return std::make_unique<UniformSelector>();
    case SelectorKind::kFifo:
      return std::make_unique<OrderedSelector>(OrderedSelector::Order::kOldestFirst);
    case SelectorKind::kLifo:
      return std::make_unique<OrderedSelector>(OrderedSelector::Order::kNewestFirst);
    case SelectorKind::kPrioritized:
      return std::make_unique<PrioritizedSelector>(options.priority_exponent);
    case SelectorKind::kMinHeap:
      return std::make_unique<HeapSelector>(HeapSelector::Order::kMin);
    case SelectorKind::kMaxHeap:
      return std::make_unique<HeapSelector>(HeapSelector::Order::kMax);
  }
  return nullptr;  // a value outside the enum (e.g. a corrupt catalog byte)
}

}  // namespace replaydb::index
