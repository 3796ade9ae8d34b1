// TableImpl::Apply: a logged change (a write-ahead-log record) applied
// again, by recovery (DBImpl::Recover through ApplyLogRecord,
// engine/db/log_apply.h) and by replicas. Idempotent against the checkpoint
// the records are applied onto: steps and ends already there are skipped.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

Result<int64_t> TableImpl::NextSlotLocked(Trajectory& t) {
  const int64_t block_index = t.length / layout_.block_steps;
  if (block_index == static_cast<int64_t>(t.blocks.size())) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    // Replay waits only for blocks being spilled: nothing else holds any.
    Status s = AddBlockLocked(lock, t, spill_ ? Deadline::max() : Clock::now());
    lock.release();
    REPLAYDB_RETURN_IF_ERROR(s);
  }
  return t.blocks[block_index] * layout_.block_steps + t.length % layout_.block_steps;
}

Status TableImpl::CopyStepInLocked(Trajectory& t, const std::byte* step) {
  assert(pool_.host_accessible() && "device blocks are replayed through FlushApplyRowsLocked");
  REPLAYDB_ASSIGN_OR_RETURN(const int64_t slot, NextSlotLocked(t));
  std::byte* block = pool_.address(slot / layout_.block_steps);
  const size_t in_block = static_cast<size_t>(slot % layout_.block_steps);
  for (size_t c = 0; c < columns_.size(); ++c) {
    const size_t cb = layout_.column_bytes[c];
    std::memcpy(block + layout_.column_offset[c] + in_block * cb, step, cb);
    step += cb;
  }
  return Status::OK();
}

Status TableImpl::PutStepLocked(Trajectory& t, const std::byte* step, const double* priority) {
  REPLAYDB_RETURN_IF_ERROR(CopyStepInLocked(t, step));
  PublishPutStepLocked(t, priority);
  return Status::OK();
}

void TableImpl::PublishPutStepLocked(Trajectory& t, const double* priority) {
  StepReservation r;  // completes_item false: the item is made below
  const bool completes = t.length + 1 >= sequence_length_;
  PublishStepLocked(t, r, priority);
  if (completes) {
    CreateItemLocked(t);
    limiter_.ForceInserts(1);
  }
}

Status TableImpl::FlushApplyRowsLocked(const wal::AppendStepsRecord& r, std::vector<size_t>* rows,
                                        std::vector<int64_t>* slots) {
  if (rows->empty()) return Status::OK();
  if (apply_rows_ == nullptr) apply_rows_ = std::make_unique<StagedRows>();
  StagedRows& staged = *apply_rows_;
  REPLAYDB_RETURN_IF_ERROR(staged.Prepare(tier_->device(), columns_, layout_, rows->size()));
  // Step-major record rows to one array per column.
  for (size_t k = 0; k < rows->size(); ++k) {
    const std::byte* step = r.data.data() + (*rows)[k] * r.step_bytes;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::memcpy(staged.column(c) + k * cb, step, cb);
      step += cb;
    }
  }
  Status s = staged.Scatter(*tier_, *slots);
  rows->clear();
  slots->clear();
  return s;
}

Status TableImpl::Apply(const wal::AppendStepsRecord& r) {
  REPLAYDB_RETURN_IF_ERROR(LoadBeforeApply(r.trajectory_ids));
  std::lock_guard<std::mutex> lock(mu_);
  if (r.step_bytes != layout_.step_bytes) {
    return Status::Corruption("table " + Quoted(name_) + ": logged steps have " +
                              std::to_string(r.step_bytes) + " bytes; the schema has " +
                              std::to_string(layout_.step_bytes));
  }
  // Device blocks: the record's rows are staged and scattered together
  // (FlushApplyRowsLocked), not copied one by one. Rows waiting there go
  // first whenever a step needs a new block from a full pool, which evicts
  // a trajectory and hands its blocks on (blocks freed behind a queued
  // scatter wait for it), and whenever they fill the staging.
  const bool batched = !pool_.host_accessible();
  const size_t batch_rows = StagedRows::RowsPerStage(static_cast<size_t>(r.step_bytes));
  std::vector<size_t> rows;
  std::vector<int64_t> slots;
  const auto where = [&](uint64_t id, int64_t step) {
    return "table " + Quoted(name_) + ": replaying step " + std::to_string(step) + " of trajectory " +
           std::to_string(id);
  };
  for (size_t i = 0; i < r.trajectory_ids.size(); ++i) {
    const uint64_t id = r.trajectory_ids[i];
    const int64_t step = r.steps[i];
    Trajectory* tp = store_.Find(id);
    if (tp == nullptr) {
      if (step != 0) continue;  // removed after the checkpoint
      std::shared_ptr<Trajectory> made = store_.Make(id);
      tp = made.get();
      store_.Insert(std::move(made));
    }
    Trajectory& t = *tp;
    if (const uint64_t key = r.KeyOf(i); key != 0) store_.SetWriterKey(t, key);
    if (step < t.length) continue;  // already in the checkpoint
    if (step > t.length || t.ended) {
      return Status::Corruption("table " + Quoted(name_) + ": logged step " + std::to_string(step) +
                                " of trajectory " + std::to_string(id) + " does not follow its " +
                                std::to_string(t.length) + (t.ended ? " steps (ended)" : " steps"));
    }
    const double* priority =
        r.priorities.empty() || std::isnan(r.priorities[i]) ? nullptr : &r.priorities[i];
    if (!batched) {
      REPLAYDB_RETURN_IF_ERROR(PutStepLocked(t, r.data.data() + i * r.step_bytes, priority)
                                   .WithContext(where(id, step)));
      continue;
    }
    // A new block from a full pool means an eviction (or a wait for
    // blocks): the rows waiting go first, so that no block they are bound
    // for changes hands before they land.
    const bool new_block = t.length / layout_.block_steps == static_cast<int64_t>(t.blocks.size());
    const bool may_evict = new_block && pool_.in_use() >= pool_.capacity_blocks();
    if (may_evict || rows.size() == batch_rows) {
      REPLAYDB_RETURN_IF_ERROR(
          FlushApplyRowsLocked(r, &rows, &slots).WithContext(where(id, step)));
    }
    Result<int64_t> slot = NextSlotLocked(t);
    if (!slot.ok()) return slot.status().WithContext(where(id, step));
    rows.push_back(i);
    slots.push_back(*slot);
    PublishPutStepLocked(t, priority);
  }
  if (!rows.empty()) {
    REPLAYDB_RETURN_IF_ERROR(FlushApplyRowsLocked(r, &rows, &slots)
                                 .WithContext("table " + Quoted(name_) + ": replaying steps"));
  }
  return Status::OK();
}

Status TableImpl::Apply(const wal::ItemClockRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  item_clock_ns_ = std::max(item_clock_ns_, r.time_ns);
  next_item_seq_ = std::max(next_item_seq_, r.time_ns);
  return Status::OK();
}

Status TableImpl::Apply(const wal::EndTrajectoryRecord& r) {
  // Writers refuse unknown reasons, so one here is damage or an older
  // build's: reported whether or not the trajectory is still here (Replay
  // names the segment and offset).
  if (EndReasonName(static_cast<EndReason>(r.reason)) == "invalid") {
    return Status::Corruption("table " + Quoted(name_) + ": logged end of trajectory " +
                              std::to_string(r.trajectory_id) + " has unknown reason " +
                              std::to_string(r.reason));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (Trajectory* t = store_.Find(r.trajectory_id); t != nullptr) {
    EndAppliedLocked(*t, static_cast<EndReason>(r.reason));
  }
  return Status::OK();
}

void TableImpl::EndAppliedLocked(Trajectory& t, EndReason reason) {
  if (t.ended) return;
  store_.MarkEnded(t, reason);
  if (padding_ == Padding::kTail) {
    while (t.items_created < t.length) {
      CreateItemLocked(t);
      limiter_.ForceInserts(1);
    }
  }
  MaybeReleaseConsumedLocked(t);
}

Status TableImpl::Apply(const wal::RemoveTrajectoryRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Trajectory* t = store_.Find(r.trajectory_id); t != nullptr) {
    // Evicted with spill on: spilled again (the checkpoint may predate it).
    RemoveTrajectoryLocked(*t, r.evicted);
    return Status::OK();
  }
  auto cold = cold_.find(r.trajectory_id);
  if (cold != cold_.end() && !r.evicted && !cold->second.spilling) {
    // Consumed after it was loaded (the store still says cold).
    cold_steps_ -= cold->second.length;
    cold_.erase(cold);
    removed_since_checkpoint_.push_back(r.trajectory_id);
  }
  return Status::OK();
}

Status TableImpl::Apply(const wal::ClearTableRecord& r) {
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(AwaitColdIdleLocked(lock, /*loads=*/true));
  ClearLocked(r.below_trajectory_id);
  return Status::OK();
}

Status TableImpl::Apply(const wal::RemoveItemsRecord& r) {
  std::vector<uint64_t> ids;
  for (const ItemKey key : r.keys) ids.push_back(ItemKeyTrajectory(key));
  REPLAYDB_RETURN_IF_ERROR(LoadBeforeApply(std::move(ids)));
  std::lock_guard<std::mutex> lock(mu_);
  if (r.deleted) {  // Table::DeleteItems
    DeleteItemsLocked(r.keys, nullptr);
    return Status::OK();
  }
  if (max_times_sampled_ == 0) return Status::OK();
  for (const ItemKey key : r.keys) {
    Trajectory* tp = store_.Find(ItemKeyTrajectory(key));
    const int64_t start = ItemKeyStart(key);
    if (tp == nullptr || start >= tp->items_created) continue;
    Trajectory& t = *tp;
    ItemState& item = store_.ItemAt(t, start);
    if (!store_.ItemLive(item)) continue;
    sample_budget_ -= DrawsLeft(item);
    // It was sampled to max_times_sampled: the samples since the state the
    // record is applied onto count (the log has no record of samples).
    limiter_.ForceSamples(static_cast<int64_t>(max_times_sampled_) - item.times_sampled);
    item.times_sampled = max_times_sampled_;
    t.dirty = true;
    DropItemLocked(t, start, item);
  }
  return Status::OK();
}

Status TableImpl::Apply(const wal::UpdatePrioritiesRecord& r) {
  for (double p : r.priorities) {
    if (!std::isfinite(p) || p < 0) {
      return Status::Corruption("table " + Quoted(name_) + ": logged priority " + std::to_string(p) +
                                " is invalid");
    }
  }
  // Keys of a trajectory loaded after the checkpoint, which the store still
  // has as cold: load it, or the update would be skipped.
  std::vector<uint64_t> ids;
  for (const ItemKey key : r.keys) ids.push_back(ItemKeyTrajectory(key));
  REPLAYDB_RETURN_IF_ERROR(LoadBeforeApply(std::move(ids)));
  return UpdatePriorities(r.keys, r.priorities, nullptr);
}

std::vector<uint64_t> TableImpl::EndOpenTrajectories() {
  std::vector<uint64_t> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, t] : store_.trajectories()) {
      if (!t->ended) open.push_back(id);
    }
  }
  for (uint64_t id : open) {
    (void)Apply(wal::EndTrajectoryRecord{table_id_, id, static_cast<uint8_t>(EndReason::kTruncated)});
  }
  {
    // Replay is over: its staged rows' pinned memory goes (once the last
    // scatter from it is done).
    std::lock_guard<std::mutex> lock(mu_);
    apply_rows_.reset();
  }
  return open;
}

size_t TableImpl::KeepOrphans() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, t] : store_.trajectories()) {
    if (!t->ended) orphans_.push_back(id);
  }
  // (Replay is over, as in EndOpenTrajectories.)
  apply_rows_.reset();
  return orphans_.size();
}

void TableImpl::Unadopt(const std::shared_ptr<Trajectory>& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t == nullptr || t->ended || t->evicted || t->removed) return;
  if (std::find(orphans_.begin(), orphans_.end(), t->id) == orphans_.end()) {
    orphans_.push_back(t->id);
  }
}

int64_t TableImpl::OpenLength(const WriterSlot& slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Trajectory* t = slot.trajectory.get();
  if (t == nullptr || t->ended || t->evicted || t->removed) return 0;
  return t->length;
}

Status TableImpl::EndOrphans() {
  std::vector<uint64_t> ended;
  {
    // (Under the lock throughout: a writer's Adopt takes an orphan whole,
    // or finds it ended.)
    std::lock_guard<std::mutex> lock(mu_);
    ended.swap(orphans_);
    for (const uint64_t id : ended) {
      if (Trajectory* t = store_.Find(id); t != nullptr)
        EndAppliedLocked(*t, EndReason::kTruncated);
    }
  }
  return LogEnds(ended);
}

Result<TableImpl::Adopted> TableImpl::Adopt(uint64_t key, uint64_t trajectory_id) {
  Adopted out;
  if (key == 0) return out;
  std::lock_guard<std::mutex> lock(mu_);
  // Its writer's key must be on it: ids are given again by each primary,
  // so one the writer knew may name another's trajectory here.
  std::shared_ptr<Trajectory> t;
  if (trajectory_id != 0) {
    t = store_.FindShared(trajectory_id);
    if (t == nullptr) {
      // (Spilled: ended. The cold tier keeps no writer keys.)
      if (const auto cold = cold_.find(trajectory_id); cold != cold_.end()) {
        out.state = Adopted::State::kEnded;
        out.trajectory_id = trajectory_id;
        out.num_steps = cold->second.length;
        out.end_reason = cold->second.end_reason;
      }
      return out;
    }
    if (t->writer_key != key) return out;
  } else {
    // (An orphan, or one ended since.)
    t = store_.FindByWriterKey(key);
    if (t == nullptr) return out;
  }
  out.trajectory_id = t->id;
  out.num_steps = t->length;
  if (t->ended) {
    out.state = Adopted::State::kEnded;
    out.end_reason = t->end_reason;
    return out;
  }
  const auto orphan = std::find(orphans_.begin(), orphans_.end(), t->id);
  if (orphan == orphans_.end()) {
    return Status::FailedPrecondition("table " + Quoted(name_) + ": trajectory " +
                                      std::to_string(t->id) +
                                      " is open and written by another writer");
  }
  orphans_.erase(orphan);
  out.state = Adopted::State::kOpen;
  out.trajectory = std::move(t);
  return out;
}

uint64_t TableImpl::WriterKeyOf(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Trajectory* t = store_.Find(id);
  return t != nullptr ? t->writer_key : 0;
}

uint64_t TableImpl::TrajectoryOfWriterKey(uint64_t key) const {
  if (key == 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const std::shared_ptr<Trajectory> t = store_.FindByWriterKey(key);
  return t != nullptr ? t->id : 0;
}

Status TableImpl::LogEnds(std::span<const uint64_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint64_t id : ids) {
    record_.EndTrajectory({table_id_, id, static_cast<uint8_t>(EndReason::kTruncated)});
    REPLAYDB_RETURN_IF_ERROR(LogLocked(wal::RecordType::kEndTrajectory).status());
  }
  return Status::OK();
}

}  // namespace replaydb::engine
