// TableImpl's priority updates: from the host (UpdatePriorities: the
// selector, the eviction order, the log) and from device arrays
// (UpdatePrioritiesFromDevice: the GPU priority table, and the host's copy
// of a logged table); and item deletion (DeleteItems), which takes items out
// of the same selector and log.
#include <algorithm>
#include <cmath>
#include <string>

#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "kernels/runtime/device_memory.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

Status TableImpl::UpdatePriorities(std::span<const ItemKey> keys,
                                   std::span<const double> priorities,
                                   PriorityUpdateResult* result) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("UpdatePriorities"));
  if (keys.size() != priorities.size()) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": UpdatePriorities got " +
                                   std::to_string(keys.size()) + " keys and " +
                                   std::to_string(priorities.size()) + " priorities");
  }
  for (size_t i = 0; i < priorities.size(); ++i) {
    if (!std::isfinite(priorities[i]) || priorities[i] < 0) {
      return Status::InvalidArgument(
          "table " + Quoted(name_) + ": UpdatePriorities priority " + std::to_string(priorities[i]) +
          " for key " + std::to_string(keys[i]) + " (index " + std::to_string(i) +
          ") is invalid; priorities must be finite and >= 0; nothing was updated");
    }
  }
  PriorityUpdateResult r;
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  std::vector<ItemKey> logged_keys;
  std::vector<double> logged_priorities;
  for (size_t i = 0; i < keys.size(); ++i) {
    const ItemKey key = keys[i];
    Trajectory* tp = store_.Find(ItemKeyTrajectory(key));
    const int64_t start = ItemKeyStart(key);
    if (tp == nullptr || start >= tp->items_created || !store_.ItemLive(store_.ItemAt(*tp, start))) {
      ++r.skipped;
      continue;
    }
    Trajectory& t = *tp;
    ItemState& item = store_.ItemAt(t, start);
    const double old = item.priority;
    selector_.Update({key, item.seq, old, store_.SlotOf(t, start)}, priorities[i]);
    sample_budget_ -= DrawsLeft(item);
    item.priority = priorities[i];
    sample_budget_ += DrawsLeft(item);
    max_priority_seen_ = std::max(max_priority_seen_, item.priority);
    if (t.ranked && (item.priority > t.best_priority || old >= t.best_priority)) store_.Rank(t);
    t.dirty = true;
    ++r.updated;
    if (log_ != nullptr) {
      logged_keys.push_back(key);
      logged_priorities.push_back(item.priority);
    }
  }
  priority_updates_ += r.updated;
  priority_updates_skipped_ += r.skipped;
  // Samplers may have waited for probability mass.
  if (r.updated > 0) limiter_.NotifyAll();
  if (result != nullptr) *result = r;
  return LogPrioritiesLocked(lock, logged_keys, logged_priorities);
}

Status TableImpl::UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities,
                                             int64_t n, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("UpdatePrioritiesFromDevice"));
  if (n < 0 || (n > 0 && (keys == nullptr || priorities == nullptr))) {
    return Status::InvalidArgument("table " + Quoted(name_) +
                                   ": UpdatePrioritiesFromDevice needs n >= 0 and device "
                                   "pointers for keys and priorities");
  }
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(draws_->DevicePrioritiesStatus());
  if (n == 0) return Status::OK();
  REPLAYDB_RETURN_IF_ERROR(
      draws_->device_priorities()->UpdatePriorities(keys, priorities, n, stream));
  device_updates_ += n;
  limiter_.NotifyAll();
  if (log_ == nullptr) return Status::OK();
  // Durable tables see the update on the host too (a copy, then the log
  // and the items' priorities for checkpoints).
  std::vector<uint64_t> host_keys(static_cast<size_t>(n));
  std::vector<float> host_priorities(static_cast<size_t>(n));
  REPLAYDB_RETURN_IF_ERROR(CopyDeviceToHost(host_keys.data(), keys, n * sizeof(uint64_t), stream));
  REPLAYDB_RETURN_IF_ERROR(
      CopyDeviceToHost(host_priorities.data(), priorities, n * sizeof(float), stream));
  std::vector<uint64_t> logged_keys;
  std::vector<double> logged_priorities;
  for (int64_t i = 0; i < n; ++i) {
    Trajectory* t = store_.Find(ItemKeyTrajectory(host_keys[i]));
    const int64_t start = ItemKeyStart(host_keys[i]);
    if (t == nullptr || start >= t->items_created) continue;
    store_.ItemAt(*t, start).priority = host_priorities[i];
    t->dirty = true;
    logged_keys.push_back(host_keys[i]);
    logged_priorities.push_back(host_priorities[i]);
  }
  return LogPrioritiesLocked(lock, logged_keys, logged_priorities);
}

Status TableImpl::DeleteItems(std::span<const ItemKey> keys, int64_t* deleted) {
  if (deleted != nullptr) *deleted = 0;
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("DeleteItems"));
  if (tier_ && tier_->uniform_draws()) {
    return Status::InvalidArgument(
        "table " + Quoted(name_) + ": DeleteItems: the table draws uniformly on the GPU over "
        "whole blocks, which cannot skip deleted items (a table with a prioritized selector, "
        "or one sampled on the host, can delete them)");
  }
  if (keys.empty()) return Status::OK();
  std::vector<uint64_t> ids;
  ids.reserve(keys.size());
  for (const ItemKey key : keys) ids.push_back(ItemKeyTrajectory(key));
  REPLAYDB_RETURN_IF_ERROR(LoadBeforeApply(ids));  // cold items: loaded first
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  std::vector<ItemKey> gone;
  DeleteItemsLocked(keys, &gone);
  if (deleted != nullptr) *deleted = static_cast<int64_t>(gone.size());
  if (log_ != nullptr && !gone.empty()) {
    record_.RemoveItems(table_id_, gone, /*deleted=*/true);
    REPLAYDB_RETURN_IF_ERROR(LogLocked(wal::RecordType::kRemoveItems).status());
  }
  return Status::OK();
}

void TableImpl::DeleteItemsLocked(std::span<const ItemKey> keys, std::vector<ItemKey>* gone) {
  std::vector<uint64_t> touched;
  for (const ItemKey key : keys) {
    Trajectory* tp = store_.Find(ItemKeyTrajectory(key));
    const int64_t start = ItemKeyStart(key);
    if (tp == nullptr || start >= tp->items_created) continue;
    Trajectory& t = *tp;
    ItemState& item = store_.ItemAt(t, start);
    if (!store_.ItemLive(item)) continue;
    sample_budget_ -= DrawsLeft(item);
    item.times_sampled = kDeletedItem;
    t.dirty = true;
    DropItemLocked(t, start, item);
    if (gone != nullptr) gone->push_back(key);
    touched.push_back(t.id);
  }
  // A trajectory with nothing left to draw goes, once it has ended.
  for (const uint64_t id : touched) {
    if (Trajectory* t = store_.Find(id); t != nullptr) MaybeReleaseConsumedLocked(*t);
  }
}

}  // namespace replaydb::engine
