// TableImpl's item bookkeeping, shared by writes, ends, applied log records
// and samples: an item's priority from its window's steps, new items (the
// selector, counts, the device tier's item lengths) and items sampled away.
// Defined inline, for the files of engine/table/ whose loops make or drop an
// item per step or per draw (table_write.cc, table_vector_write.cc,
// table_apply.cc, table_cold.cc, table_sample.cc) to include.
#ifndef REPLAYDB_ENGINE_TABLE_TABLE_ITEMS_H_
#define REPLAYDB_ENGINE_TABLE_TABLE_ITEMS_H_

#include <algorithm>
#include <vector>

#include "engine/table/table_impl.h"

namespace replaydb::engine {

inline double TableImpl::NewItemPriorityLocked(const Trajectory& t, int64_t start, int64_t slot) const {
  const int64_t end = std::min(t.length, start + sequence_length_);
  switch (step_priority_) {
    case StepPriority::kItem:
      return store_.Meta(slot).step_priority;
    case StepPriority::kWindowMax: {
      double best = store_.StepPriorityAt(t, start);
      for (int64_t i = start + 1; i < end; ++i) best = std::max(best, store_.StepPriorityAt(t, i));
      return best;
    }
    case StepPriority::kWindowMean: {
      double sum = 0;
      for (int64_t i = start; i < end; ++i) sum += store_.StepPriorityAt(t, i);
      return sum / static_cast<double>(end - start);
    }
  }
  return store_.StepPriorityAt(t, start);
}

inline void TableImpl::CreateItemLocked(Trajectory& t, int64_t slot,
                                 std::vector<index::ItemRef>* selector_batch) {
  const int64_t start = t.items_created;
  if (slot < 0) slot = store_.SlotOf(t, start);
  ItemState& item = store_.Meta(slot).item;
  item.seq = next_item_seq_++;
  item.priority = NewItemPriorityLocked(t, start, slot);
  item.times_sampled = 0;
  ++t.items_created;
  ++items_inserted_;
  AddLiveItemLocked(t, start, item, slot, selector_batch);
  if (t.ranked && item.priority > t.best_priority) store_.Rank(t);
}

inline void TableImpl::AddLiveItemLocked(Trajectory& t, int64_t start, const ItemState& item,
                                  int64_t slot, std::vector<index::ItemRef>* selector_batch) {
  ++t.live_items;
  ++num_items_;
  sample_budget_ += DrawsLeft(item);
  if (slot < 0) slot = store_.SlotOf(t, start);
  if (tier_ && tier_->item_steps()) {
    tier_->NewItem(slot, std::min(sequence_length_, t.length - start));
  }
  const index::ItemRef ref{MakeItemKey(t.id, start), item.seq, item.priority, slot};
  if (selector_batch != nullptr) {
    selector_batch->push_back(ref);
  } else {
    selector_.Insert(ref);
  }
}

inline void TableImpl::DropItemLocked(Trajectory& t, int64_t start, const ItemState& item) {
  selector_.Remove({MakeItemKey(t.id, start), item.seq, item.priority, store_.SlotOf(t, start)});
  --t.live_items;
  --num_items_;
  ++items_removed_;
  limiter_.Delete(1);
  if (t.ranked && item.priority >= t.best_priority) store_.Rank(t);
}

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_TABLE_ITEMS_H_
