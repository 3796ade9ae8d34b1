// TableImpl's priority updates: from the host (UpdatePriorities: the
// selector, the eviction order, the log) and from device arrays
// (UpdatePrioritiesFromDevice: the GPU priority table, and the host's copy
// of a logged table); and item deletion (DeleteItems), which takes items out
// of the same selector and log.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

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
  // Durable tables see the update on the host too: copies queued on the
  // caller's stream, which device_log_thread_ applies to the items (for
  // checkpoints) and logs once they land. The caller does not wait.
  if (!device_log_error_.ok()) return std::exchange(device_log_error_, Status::OK());
  if (device_echo_ == nullptr) {
    device_echo_ = std::make_unique<HostEcho>(spec_.priority_device);
    device_log_thread_ = std::thread([this] { DeviceLogLoop(); });
  }
  const HostEcho::Part parts[] = {{keys, static_cast<size_t>(n) * sizeof(uint64_t)},
                                  {priorities, static_cast<size_t>(n) * sizeof(float)}};
  REPLAYDB_RETURN_IF_ERROR(device_echo_->Push(parts, stream)
                               .WithContext("table " + Quoted(name_) +
                                            ": copying device priorities for the log"));
  ++device_echoes_pushed_;
  device_log_cv_.notify_all();
  return Status::OK();
}

void TableImpl::DeviceLogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::string bytes;
  std::vector<uint64_t> logged_keys;
  std::vector<double> logged_priorities;
  while (true) {
    device_log_cv_.wait(lock, [&] {
      return device_log_stop_ || device_echoes_applied_ < device_echoes_pushed_;
    });
    if (device_echoes_applied_ == device_echoes_pushed_) return;  // stopping, all applied
    lock.unlock();
    Status s = device_echo_->Pop(&bytes);  // waits for the copies to land, without mu_
    lock.lock();
    if (s.ok() && !closed_) {
      // [n keys][n float priorities]
      const size_t n = bytes.size() / (sizeof(uint64_t) + sizeof(float));
      logged_keys.clear();
      logged_priorities.clear();
      for (size_t i = 0; i < n; ++i) {
        uint64_t key;
        float priority;
        std::memcpy(&key, bytes.data() + i * sizeof(uint64_t), sizeof(key));
        std::memcpy(&priority, bytes.data() + n * sizeof(uint64_t) + i * sizeof(float),
                    sizeof(priority));
        Trajectory* t = store_.Find(ItemKeyTrajectory(key));
        const int64_t start = ItemKeyStart(key);
        if (t == nullptr || start >= t->items_created) continue;
        store_.ItemAt(*t, start).priority = priority;
        t->dirty = true;
        logged_keys.push_back(key);
        logged_priorities.push_back(priority);
      }
      s = LogPrioritiesLocked(lock, logged_keys, logged_priorities);  // unlocks
      if (!lock.owns_lock()) lock.lock();
    }
    if (!s.ok() && device_log_error_.ok()) {
      device_log_error_ =
          s.WithContext("table " + Quoted(name_) + ": logging priorities set on the GPU");
    }
    ++device_echoes_applied_;
    device_log_cv_.notify_all();
  }
}

void TableImpl::DrainDeviceLog() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = device_echoes_pushed_;
  device_log_cv_.wait(lock, [&] { return device_echoes_applied_ >= target; });
}

void TableImpl::StopDeviceLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    device_log_stop_ = true;
    device_log_cv_.notify_all();
  }
  if (device_log_thread_.joinable() && device_log_thread_.get_id() != std::this_thread::get_id()) {
    device_log_thread_.join();
  }
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
