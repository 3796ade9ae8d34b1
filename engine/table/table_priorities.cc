// TableImpl's priority updates: from the host (UpdatePriorities: the
// selector, the eviction order, the log) and from device arrays
// (UpdatePrioritiesFromDevice: the GPU priority table, and the host's copy
// of a logged table); and item deletion (DeleteItems), which takes items out
// of the same selector and log.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "kernels/runtime/device_memory.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

namespace {

// How often device_log_thread_ logs the priorities set on the GPU: the
// most a crash can lose of them (docs/durability.md).
constexpr std::chrono::milliseconds kDeviceLogPeriod(50);
// Items per collection, at most (16 bytes each of pinned memory).
constexpr int64_t kDeviceCollectMax = int64_t{1} << 20;

}  // namespace

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
  // The device table marked the items; device_log_thread_ logs them.
  ++device_update_calls_;
  if (!device_log_thread_.joinable() && !device_log_stop_) {
    device_log_thread_ = std::thread([this] { DeviceLogLoop(); });
  }
  if (!device_log_error_.ok()) return std::exchange(device_log_error_, Status::OK());
  return Status::OK();
}

void TableImpl::DeviceLogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    device_log_cv_.wait_for(lock, kDeviceLogPeriod, [&] { return device_log_stop_; });
    if (device_log_stop_) return;
    if (device_update_calls_ == device_update_calls_logged_) continue;
    lock.unlock();
    const Status s = LogDevicePriorities();
    lock.lock();
    if (!s.ok() && device_log_error_.ok()) device_log_error_ = s;
  }
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
  const Status s = LogDevicePriorities();
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (device_log_error_.ok()) device_log_error_ = s;
  }
}

Status TableImpl::QueueDeviceCollectLocked(
    int mark, std::unique_ptr<kernels::DevicePriorityTable::Updated>* buffer) {
  kernels::DevicePriorityTable* device = draws_->device_priorities();
  if (*buffer == nullptr) {
    REPLAYDB_ASSIGN_OR_RETURN(
        *buffer, device->NewUpdated(std::min<int64_t>(spec_.capacity_steps, kDeviceCollectMax)));
  }
  return device->CollectUpdated(mark, buffer->get());
}

Result<uint64_t> TableImpl::AppendDeviceRecord(wal::LogWriter& log, uint32_t table_id,
                                               const kernels::DevicePriorityTable::Updated& got) {
  const size_t n = static_cast<size_t>(got.count());
  device_record_.UpdatePriorities(table_id, std::span(got.keys(), n),
                                  std::span(got.priorities(), n));
  Result<uint64_t> seq = log.Append(wal::RecordType::kUpdatePriorities, device_record_.payload());
  if (!seq.ok()) {
    return seq.status().WithContext("table " + Quoted(name_) +
                                    ": logging priorities set on the GPU");
  }
  return seq;
}

Status TableImpl::LogDevicePriorities() {
  std::lock_guard<std::mutex> serial(device_log_mu_);
  // Bounded: updates arriving meanwhile wait for the next period.
  for (int round = 0; round < 64; ++round) {
    std::shared_ptr<wal::LogWriter> log;
    uint64_t calls = 0;
    uint32_t table_id = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_ || log_ == nullptr || draws_->device_priorities() == nullptr ||
          device_update_calls_ == device_update_calls_logged_) {
        return Status::OK();
      }
      calls = device_update_calls_;
      log = log_;
      table_id = table_id_;
      // Queued on the device table's stream under mu_, behind every update
      // made before it; waited for without mu_.
      REPLAYDB_RETURN_IF_ERROR(
          QueueDeviceCollectLocked(kernels::DevicePriorityTable::kLogMark, &device_log_buffer_)
              .WithContext("table " + Quoted(name_) + ": collecting priorities set on the GPU"));
    }
    const kernels::DevicePriorityTable::Updated& got = *device_log_buffer_;
    REPLAYDB_RETURN_IF_ERROR(device_log_buffer_->Wait().WithContext(
        "table " + Quoted(name_) + ": collecting priorities set on the GPU"));
    if (got.count() > 0) {
      REPLAYDB_ASSIGN_OR_RETURN(const uint64_t seq, AppendDeviceRecord(*log, table_id, got));
      REPLAYDB_RETURN_IF_ERROR(SyncLog(seq, /*wait=*/false));
    }
    if (!got.more()) {
      std::lock_guard<std::mutex> lock(mu_);
      device_update_calls_logged_ = std::max(device_update_calls_logged_, calls);
      return Status::OK();
    }
  }
  return Status::OK();
}

Status TableImpl::CollectDevicePrioritiesLocked() {
  kernels::DevicePriorityTable* device = draws_->device_priorities();
  if (device == nullptr || device_updates_ == 0) return Status::OK();
  using Table = kernels::DevicePriorityTable;
  const std::string context = "table " + Quoted(name_) + ": collecting priorities set on the GPU";
  // No update runs meanwhile (mu_): each loop ends once the marks are gone.
  if (log_ != nullptr && device_update_calls_ != device_update_calls_logged_) {
    do {
      REPLAYDB_RETURN_IF_ERROR(QueueDeviceCollectLocked(Table::kLogMark, &device_log_buffer_)
                                   .WithContext(context));
      REPLAYDB_RETURN_IF_ERROR(device_log_buffer_->Wait().WithContext(context));
      if (device_log_buffer_->count() > 0) {
        REPLAYDB_RETURN_IF_ERROR(AppendDeviceRecord(*log_, table_id_, *device_log_buffer_).status());
      }
    } while (device_log_buffer_->more());
    device_update_calls_logged_ = device_update_calls_;
  }
  do {
    REPLAYDB_RETURN_IF_ERROR(
        QueueDeviceCollectLocked(Table::kCheckpointMark, &device_checkpoint_buffer_)
            .WithContext(context));
    REPLAYDB_RETURN_IF_ERROR(device_checkpoint_buffer_->Wait().WithContext(context));
    const Table::Updated& got = *device_checkpoint_buffer_;
    for (int64_t i = 0; i < got.count(); ++i) {
      const ItemKey key = got.keys()[i];
      Trajectory* t = store_.Find(ItemKeyTrajectory(key));
      const int64_t start = ItemKeyStart(key);
      if (t == nullptr || start >= t->items_created) continue;
      ItemState& item = store_.ItemAt(*t, start);
      if (!store_.ItemLive(item)) continue;
      item.priority = got.priorities()[i];
      t->dirty = true;
    }
  } while (device_checkpoint_buffer_->more());
  return Status::OK();
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
