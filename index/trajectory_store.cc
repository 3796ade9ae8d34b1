#include "index/trajectory_store.h"

#include <algorithm>

namespace replaydb::index {

std::shared_ptr<Trajectory> TrajectoryStore::StartNew() {
  if (next_id_ > kMaxTrajectoryId) return nullptr;
  std::shared_ptr<Trajectory> t = Make(next_id_++);
  map_.emplace_hint(map_.end(), t->id, t);  // the largest id
  by_id_.Insert(t->id, t);
  return t;
}

void TrajectoryStore::Insert(std::shared_ptr<Trajectory> t) {
  NoteId(t->id);
  const uint64_t id = t->id;
  if (t->writer_key != 0) by_key_[t->writer_key] = id;
  by_id_.Insert(id, t);
  map_.emplace(id, std::move(t));
}

void TrajectoryStore::Erase(Trajectory& t) {
  ended_.erase({t.hot_seq, t.id});
  Unrank(t);
  UnindexKey(t);
  const uint64_t id = t.id;
  by_id_.Erase(id);
  map_.erase(id);  // last: this may drop the final reference to t
}

void TrajectoryStore::MarkEnded(Trajectory& t, EndReason reason) {
  t.ended = true;
  t.end_reason = reason;
  t.dirty = true;
  // Usually the newest to end is among the newest in the tier.
  ended_.emplace_hint(ended_.end(), t.hot_seq, t.id);
  Rank(t);
}

std::shared_ptr<Trajectory> TrajectoryStore::PickVictim(const Trajectory& requester) const {
  if (options_.eviction == EvictionPolicy::kLowestPriority) {
    for (const auto& [priority, id] : ranked_) {
      if (id != requester.id) return At(id);
    }
  }
  for (const auto& [seq, id] : ended_) {
    if (id != requester.id) return At(id);
  }
  for (const auto& [id, t] : map_) {
    if (id != requester.id && !t->blocks.empty()) return t;
  }
  return nullptr;
}

void TrajectoryStore::Rank(Trajectory& t) {
  if (options_.eviction != EvictionPolicy::kLowestPriority) return;
  Unrank(t);
  double best = -1;
  for (int64_t start = 0; start < t.items_created; ++start) {
    const ItemState& item = ItemAt(t, start);
    if (ItemLive(item)) best = std::max(best, item.priority);
  }
  t.best_priority = best;
  t.ranked = true;
  ranked_.emplace(best, t.id);
}

void TrajectoryStore::Unrank(Trajectory& t) {
  if (!t.ranked) return;
  ranked_.erase({t.best_priority, t.id});
  t.ranked = false;
}

void TrajectoryStore::CoverBlocks(int64_t blocks) {
  const int64_t tiles = (blocks + kMetaTileBlocks - 1) / kMetaTileBlocks;
  const size_t slots = static_cast<size_t>(tiles * kMetaTileBlocks * options_.block_steps);
  if (meta_.size() < slots) meta_.resize(slots);
}

int64_t TrajectoryStore::CountLive(const Trajectory& t) const {
  int64_t live = 0;
  for (int64_t i = 0; i < t.items_created; ++i) live += ItemLive(ItemAt(t, i)) ? 1 : 0;
  return live;
}

}  // namespace replaydb::index
