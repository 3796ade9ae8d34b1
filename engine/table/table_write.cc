// TableImpl's writes of one trajectory at a time (TrajectoryWriter, and a
// vector writer's per-environment ends): reserving room for a step (the rate
// limiter, a new trajectory, a new block), copying it in (host blocks) or
// scattering it (device blocks, AppendStepsToDevice), logging and
// publishing it; ending trajectories.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

namespace {

// Steps up to this size are copied while the table's mutex is held (cheaper
// than a second lock round trip); larger ones outside it.
constexpr size_t kCopyUnderLockBytes = 1024;

}  // namespace

Status TableImpl::ResetWriterIfEndedLocked(WriterSlot& slot) {
  Trajectory* t = slot.trajectory.get();
  if (t == nullptr) return Status::OK();
  if (t->evicted) {
    Status s = EvictedError(*t);
    slot.trajectory.reset();
    return s;
  }
  if (t->ended) {
    return Status::FailedPrecondition(
        "table " + Quoted(name_) + ": trajectory " + std::to_string(t->id) +
        " is ended but its End did not finish creating padded items; call End again before "
        "appending");
  }
  return Status::OK();
}

Status TableImpl::ReserveStepLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot,
                                    Deadline deadline, StepReservation* r, bool may_wait,
                                    bool* would_wait, int64_t* credit) {
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  if (slot.trajectory && (slot.trajectory->evicted || slot.trajectory->ended)) {
    REPLAYDB_RETURN_IF_ERROR(ResetWriterIfEndedLocked(slot));
  }

  const int64_t length = slot.trajectory ? slot.trajectory->length : 0;
  if (length >= kMaxTrajectorySteps) {
    return Status::ResourceExhausted("table " + Quoted(name_) + ": trajectory " +
                                     std::to_string(slot.trajectory->id) + " reached " +
                                     std::to_string(kMaxTrajectorySteps) +
                                     " steps, the longest a trajectory may be; end it");
  }
  // The item this step completes, if any, must be admitted first.
  r->completes_item = length + 1 >= sequence_length_;
  r->created = false;
  if (r->completes_item && credit != nullptr && *credit > 0) {
    --*credit;
  } else if (r->completes_item && !limiter_.TryReserveInserts(1)) {
    if (!may_wait) {
      *would_wait = true;
      return Status::OK();
    }
    REPLAYDB_RETURN_IF_ERROR(limiter_.AwaitReserveInserts(lock, 1, deadline));
    Status s = CheckOpenLocked();
    if (s.ok()) s = ResetWriterIfEndedLocked(slot);
    if (!s.ok()) {
      limiter_.ReleaseInserts(1);
      return s;
    }
  }

  if (!slot.trajectory) {
    std::shared_ptr<Trajectory> t = store_.StartNew();
    if (t == nullptr) {
      if (r->completes_item) limiter_.ReleaseInserts(1);
      return Status::ResourceExhausted("table " + Quoted(name_) + ": trajectory ids are exhausted");
    }
    slot.trajectory = std::move(t);
    r->created = true;
  }
  Trajectory& t = *slot.trajectory;
  const int64_t block_index = t.length / layout_.block_steps;
  if (block_index == static_cast<int64_t>(t.blocks.size())) {
    Status s = AddBlockLocked(lock, t, deadline);
    if (!s.ok()) {
      if (r->completes_item) limiter_.ReleaseInserts(1);
      if (t.evicted) {
        slot.trajectory.reset();
      } else if (r->created) {
        // Leave no empty trajectory behind a failed first step.
        RemoveTrajectoryLocked(t, /*evicted=*/false);
        slot.trajectory.reset();
      }
      return s;
    }
  }
  r->block = t.blocks[block_index];
  r->step_in_block = t.length % layout_.block_steps;
  return Status::OK();
}

Status TableImpl::CheckAfterCopyLocked(WriterSlot& slot, const StepReservation& r) {
  Trajectory& t = *slot.trajectory;
  Status s = CheckOpenLocked();
  if (s.ok() && t.evicted) s = EvictedError(t);
  if (!s.ok()) {
    if (r.completes_item) limiter_.ReleaseInserts(1);
    if (t.evicted) slot.trajectory.reset();
  }
  return s;
}

bool TableImpl::PublishStepLocked(Trajectory& t, const StepReservation& r,
                                  const double* priority) {
  // Replay publishes without a reservation's block.
  const int64_t slot =
      r.block >= 0 ? r.block * layout_.block_steps + r.step_in_block : store_.SlotOf(t, t.length);
  if (priority != nullptr) max_priority_seen_ = std::max(max_priority_seen_, *priority);
  store_.Meta(slot).step_priority = priority != nullptr ? *priority : max_priority_seen_;
  ++t.length;
  t.dirty = true;
  ++num_steps_;
  ++steps_inserted_;
  if (r.completes_item) CreateItemLocked(t);
  return r.completes_item;
}

void TableImpl::AbandonStepLocked(WriterSlot& slot, const StepReservation& r) {
  if (r.completes_item) limiter_.ReleaseInserts(1);
  Trajectory& t = *slot.trajectory;
  if (t.evicted) {
    slot.trajectory.reset();
  } else if (r.created && !t.removed) {
    // Leave no empty trajectory behind a failed first step.
    RemoveTrajectoryLocked(t, /*evicted=*/false);
    slot.trajectory.reset();
  }
}

Status TableImpl::AppendStep(WriterSlot& slot, HostRows rows, int64_t index,
                             const double* priority, Deadline deadline, uint64_t* log_seq) {
  assert(pool_.host_accessible() && "device tables take AppendSteps");
  std::unique_lock<std::mutex> lock(mu_);
  StepReservation r;
  REPLAYDB_RETURN_IF_ERROR(ReserveStepLocked(lock, slot, deadline, &r));
  Trajectory& t = *slot.trajectory;
  std::byte* block = pool_.address(r.block);
  const auto copy_step = [&] {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::memcpy(block + layout_.column_offset[c] + static_cast<size_t>(r.step_in_block) * cb,
                  rows.Row(c, static_cast<size_t>(index), cb), cb);
    }
  };
  if (layout_.step_bytes <= kCopyUnderLockBytes) {
    copy_step();
  } else {
    // Large steps are copied outside the lock, the trajectory pinned so an
    // eviction meanwhile cannot hand its blocks to someone else.
    ++t.pins;
    lock.unlock();
    copy_step();
    lock.lock();
    UnpinLocked(t);
    REPLAYDB_RETURN_IF_ERROR(CheckAfterCopyLocked(slot, r));
  }
  // Logged before it is published: a step the log refused never appears.
  Result<uint64_t> logged = LogStepsLocked(slot.writer_key, t, rows, index, 1, priority);
  if (!logged.ok()) {
    AbandonStepLocked(slot, r);
    return logged.status();
  }
  if (log_seq != nullptr) *log_seq = *logged;
  if (PublishStepLocked(t, r, priority)) limiter_.CommitInserts(1);
  return Status::OK();
}

Status TableImpl::ReserveRunLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot,
                                   Deadline deadline, int64_t count,
                                   std::vector<StepReservation>* run) {
  run->assign(1, StepReservation{});
  REPLAYDB_RETURN_IF_ERROR(ReserveStepLocked(lock, slot, deadline, &(*run)[0]));
  Trajectory& t = *slot.trajectory;
  ExtendRunLocked(lock, t, t.length + 1, count - 1, deadline, run);
  return Status::OK();
}

void TableImpl::ExtendRunLocked(std::unique_lock<std::mutex>& lock, Trajectory& t, int64_t first,
                                int64_t count, Deadline deadline,
                                std::vector<StepReservation>* run) {
  const int64_t bs = layout_.block_steps;
  for (int64_t step = first; step < first + count; ++step) {
    if (step >= kMaxTrajectorySteps) break;  // the next run's reservation says so
    const int64_t block_index = step / bs;
    const bool new_block = block_index == static_cast<int64_t>(t.blocks.size());
    if (new_block && pool_.in_use() >= pool_.capacity_blocks()) break;
    StepReservation r;
    r.completes_item = step + 1 >= sequence_length_;
    if (r.completes_item && !limiter_.TryReserveInserts(1)) break;
    if (new_block && !AddBlockLocked(lock, t, deadline).ok()) {
      // The next run's reservation tries again and reports it.
      if (r.completes_item) limiter_.ReleaseInserts(1);
      break;
    }
    r.block = t.blocks[static_cast<size_t>(block_index)];
    r.step_in_block = step % bs;
    run->push_back(r);
  }
}

void TableImpl::AbandonRunLocked(WriterSlot& slot, std::span<const StepReservation> run) {
  for (size_t i = 1; i < run.size(); ++i) {
    if (run[i].completes_item) limiter_.ReleaseInserts(1);
  }
  AbandonStepLocked(slot, run[0]);
}

void TableImpl::PublishRunLocked(Trajectory& t, std::span<const StepReservation> run,
                                 const double* priorities) {
  int64_t items = 0;
  for (size_t i = 0; i < run.size(); ++i) {
    if (PublishStepLocked(t, run[i], priorities == nullptr ? nullptr : priorities + i)) ++items;
  }
  if (items > 0) limiter_.CommitInserts(items);
}

Status TableImpl::AppendSteps(WriterSlot& slot, HostRows rows, int64_t n,
                              const double* priorities, Deadline deadline, StagedRows* staged,
                              std::span<std::byte> record, uint64_t* log_seq,
                              int64_t* appended) {
  *appended = 0;
  const bool device = !pool_.host_accessible();
  const int64_t bs = layout_.block_steps;
  // Device blocks: the rows go through `staged`, per_stage at a time.
  const int64_t per_stage =
      device ? static_cast<int64_t>(
                   StagedRows::RowsPerStage(static_cast<size_t>(layout_.step_bytes)))
             : n;
  std::vector<StepReservation> run;  // a run's reservations, in step order
  std::vector<int64_t> slots;        // and their hot-tier slots (device blocks)
  std::vector<std::byte*> blocks;    // or their blocks' addresses (host blocks)
  for (int64_t first = 0; first < n; first += per_stage) {
    const int64_t count = std::min(per_stage, n - first);
    if (device) {
      // Outside the mutex: only the writer uses `staged`, and the layout
      // never changes.
      REPLAYDB_RETURN_IF_ERROR(
          staged->Prepare(tier_->device(), columns_, layout_, static_cast<size_t>(count))
              .WithContext("table " + Quoted(name_)));
      staged->CopyRows(rows.base, static_cast<size_t>(first), static_cast<size_t>(count), nullptr,
                       rows.row_bytes);
    }
    std::unique_lock<std::mutex> lock(mu_);
    for (int64_t begin = 0; begin < count;) {
      const int64_t at = first + begin;  // the run's first step among the n
      REPLAYDB_RETURN_IF_ERROR(ReserveRunLocked(lock, slot, deadline, count - begin, &run));
      Trajectory& t = *slot.trajectory;
      if (slot.writer_key != 0) store_.SetWriterKey(t, slot.writer_key);  // (Adopt finds it)
      const int64_t steps = static_cast<int64_t>(run.size());
      if (device) {
        slots.resize(run.size());
        for (size_t i = 0; i < run.size(); ++i) slots[i] = run[i].block * bs + run[i].step_in_block;
        Status scattered = staged->Scatter(*tier_, slots, static_cast<size_t>(begin));
        if (!scattered.ok()) {
          AbandonRunLocked(slot, run);
          return scattered.WithContext("table " + Quoted(name_));
        }
      } else {
        // The blocks' addresses are read here, under the lock: another
        // writer's Allocate may grow the pool's address table meanwhile.
        blocks.resize(run.size());
        for (size_t i = 0; i < run.size(); ++i) blocks[i] = pool_.address(run[i].block);
        const auto copy_run = [&] {
          for (int64_t i = 0; i < steps; ++i) {
            const StepReservation& r = run[static_cast<size_t>(i)];
            std::byte* block = blocks[static_cast<size_t>(i)];
            for (size_t c = 0; c < columns_.size(); ++c) {
              const size_t cb = layout_.column_bytes[c];
              std::memcpy(
                  block + layout_.column_offset[c] + static_cast<size_t>(r.step_in_block) * cb,
                  rows.Row(c, static_cast<size_t>(at + i), cb), cb);
            }
          }
        };
        if (static_cast<size_t>(steps) * layout_.step_bytes <= kCopyUnderLockBytes) {
          copy_run();
        } else {
          // Copied outside the lock, the trajectory pinned (AppendStep).
          ++t.pins;
          lock.unlock();
          copy_run();
          lock.lock();
          UnpinLocked(t);
          Status s = CheckOpenLocked();
          if (s.ok() && t.evicted) s = EvictedError(t);
          if (!s.ok()) {
            AbandonRunLocked(slot, run);
            return s;
          }
        }
      }
      // Logged before they are published: steps the log refused never appear.
      const double* run_priorities = priorities == nullptr ? nullptr : priorities + at;
      Result<uint64_t> logged =
          !record.empty() && at == 0 && steps == n
              ? LogStepsRecordLocked(t, record)
              : LogStepsLocked(slot.writer_key, t, rows, at, steps, run_priorities);
      if (!logged.ok()) {
        AbandonRunLocked(slot, run);
        return logged.status();
      }
      if (log_seq != nullptr && *logged != 0) *log_seq = *logged;
      PublishRunLocked(t, run, run_priorities);
      *appended += steps;
      begin += steps;
    }
  }
  return Status::OK();
}

void TableImpl::PlaceSteps(WriterSlot& slot, int64_t ahead, int64_t n, PlacedSteps* placed,
                           std::vector<std::span<std::byte>>* pieces) {
  *placed = PlacedSteps{};
  pieces->clear();
  if (n <= 0 || ahead < 0 || !pool_.host_accessible()) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (log_ != nullptr || !CheckOpenLocked().ok()) return;
  Trajectory* t = slot.trajectory.get();
  // An ended or evicted trajectory: the copying path reports it.
  if (t != nullptr && (t->evicted || t->ended)) return;
  if (ahead > 0 && t == nullptr) return;
  const int64_t length = t != nullptr ? t->length : 0;
  if (length + ahead + n > kMaxTrajectorySteps) return;
  std::vector<StepReservation>& run = placed->run;
  {
    ScopedNoWait no_wait;
    const Deadline now = DeadlineAfter(std::chrono::milliseconds(0));
    if (ahead == 0) {
      if (!ReserveRunLocked(lock, slot, now, n, &run).ok()) run.clear();
    } else {
      // After the placed steps still to be published.
      ExtendRunLocked(lock, *t, length + ahead, n, now, &run);
    }
  }
  if (static_cast<int64_t>(run.size()) < n) {  // all or none
    // (A chained run's first step created nothing: only its credits go.)
    if (!run.empty()) AbandonRunLocked(slot, run);
    run.clear();
    return;
  }
  placed->trajectory = slot.trajectory;
  placed->first = length + ahead;
  ++placed->trajectory->pins;
  for (const StepReservation& r : run) {
    std::byte* block = pool_.address(r.block);
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      if (cb == 0) continue;
      std::byte* at = block + layout_.column_offset[c] + static_cast<size_t>(r.step_in_block) * cb;
      if (!pieces->empty() && pieces->back().data() + pieces->back().size() == at) {
        pieces->back() = {pieces->back().data(), pieces->back().size() + cb};
      } else {
        pieces->emplace_back(at, cb);
      }
    }
  }
}

Status TableImpl::PublishPlaced(WriterSlot& slot, PlacedSteps& placed, const double* priorities) {
  if (placed.trajectory == nullptr) {
    return Status::Internal("table " + Quoted(name_) + ": no placed steps to publish");
  }
  std::unique_lock<std::mutex> lock(mu_);
  Trajectory& t = *placed.trajectory;
  UnpinLocked(t);
  Status s = CheckOpenLocked();
  if (s.ok() && t.evicted) s = EvictedError(t);
  if (s.ok() && (slot.trajectory != placed.trajectory || t.length != placed.first)) {
    s = Status::Internal("table " + Quoted(name_) + ": placed steps from step " +
                         std::to_string(placed.first) + " of trajectory " +
                         std::to_string(t.id) + " published out of order (it holds " +
                         std::to_string(t.length) + ")");
  }
  // (Placed steps are never logged: the clock only numbers their items.)
  if (s.ok()) s = TickItemClockLocked();
  if (!s.ok()) {
    ReleasePlacedLocked(slot, placed);
    return s;
  }
  PublishRunLocked(t, placed.run, priorities);
  placed = PlacedSteps{};
  return Status::OK();
}

void TableImpl::AbandonPlaced(WriterSlot& slot, PlacedSteps& placed) {
  if (placed.trajectory == nullptr) return;
  std::unique_lock<std::mutex> lock(mu_);
  UnpinLocked(*placed.trajectory);
  ReleasePlacedLocked(slot, placed);
}

void TableImpl::ReleasePlacedLocked(WriterSlot& slot, PlacedSteps& placed) {
  Trajectory& t = *placed.trajectory;
  for (const StepReservation& r : placed.run) {
    if (r.completes_item) limiter_.ReleaseInserts(1);
  }
  // As AbandonStepLocked: an evicted trajectory leaves the writer (its
  // error was reported once), and no empty trajectory stays behind a failed
  // first step (unless steps placed after these still hold it).
  if (slot.trajectory == placed.trajectory) {
    if (t.evicted) {
      slot.trajectory.reset();
    } else if (!placed.run.empty() && placed.run[0].created && !t.removed && t.length == 0 &&
               t.pins == 0) {
      RemoveTrajectoryLocked(t, /*evicted=*/false);
      slot.trajectory.reset();
    }
  }
  placed = PlacedSteps{};
}

Status TableImpl::EndTrajectory(WriterSlot& slot, EndReason reason, Deadline deadline,
                                uint64_t* log_seq) {
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  return EndTrajectoryLocked(lock, slot, reason, deadline, log_seq);
}

Status TableImpl::EndTrajectories(std::span<WriterSlot> slots, std::span<const size_t> envs,
                                  EndReason reason, Deadline deadline, uint64_t* log_seq) {
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  Status first_error;
  for (const size_t env : envs) {
    assert(env < slots.size());
    // Closed while padding items waited: the rest fail alike.
    Status s = CheckOpenLocked();
    if (s.ok()) s = EndTrajectoryLocked(lock, slots[env], reason, deadline, log_seq);
    if (!s.ok() && first_error.ok()) {
      first_error = s.WithContext("environment " + std::to_string(env));
    }
  }
  return first_error;
}

Status TableImpl::EndTrajectoryLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot,
                                      EndReason reason, Deadline deadline, uint64_t* log_seq) {
  if (!slot.trajectory) return Status::OK();
  Trajectory& t = *slot.trajectory;
  if (t.evicted) {
    Status s = EvictedError(t);
    slot.trajectory.reset();
    return s;
  }
  if (!t.ended) {
    // Tail-padded items are made below.
    if (padding_ == Padding::kTail) REPLAYDB_RETURN_IF_ERROR(TickItemClockLocked());
    if (log_ != nullptr) {
      record_.EndTrajectory({table_id_, t.id, static_cast<uint8_t>(reason)});
      REPLAYDB_ASSIGN_OR_RETURN(const uint64_t seq, LogLocked(wal::RecordType::kEndTrajectory));
      if (log_seq != nullptr) *log_seq = seq;
    }
    store_.MarkEnded(t, reason);
  }
  if (padding_ == Padding::kTail) {
    while (t.items_created < t.length) {
      REPLAYDB_RETURN_IF_ERROR(limiter_.AwaitReserveInserts(lock, 1, deadline));
      Status s = CheckOpenLocked();
      if (!s.ok() || t.removed) {
        limiter_.ReleaseInserts(1);
        if (s.ok()) s = EvictedError(t);
        slot.trajectory.reset();
        return s;
      }
      CreateItemLocked(t);
      limiter_.CommitInserts(1);
    }
  }
  MaybeReleaseConsumedLocked(t);
  slot.trajectory.reset();
  return Status::OK();
}

}  // namespace replaydb::engine
