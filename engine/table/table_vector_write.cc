// TableImpl's vector steps (VectorWriter, and a vector table's
// LaneWriterImpl): one step for every environment of a writer in one pass
// under the mutex, the per-environment work split over the writer's
// threads where it has several; rows copied into host blocks or scattered
// into device blocks by one kernel, logged as one record, published
// together. See AppendVectorStep in table_impl.h.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>

#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "util/format.h"
#include "util/prefetch.h"

namespace replaydb::engine {

using util::Quoted;
using util::PrefetchForWrite;

namespace {

// A vector step whose rows add up to more than this is copied outside the
// table's mutex (its trajectories pinned); below it, under the mutex.
constexpr size_t kVectorCopyUnderLockBytes = 64 << 10;

// How many environments ahead a vector append asks for the memory it will
// touch: the environments' state is scattered over many cache lines, and
// fetching several at once hides most of the latency.
constexpr size_t kPrefetchAhead = 16;

// Copies one row of a column: small rows without a call to memcpy.
void CopyRow(std::byte* dst, const std::byte* src, size_t bytes) {
  switch (bytes) {
    case 1: std::memcpy(dst, src, 1); return;
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    case 16: std::memcpy(dst, src, 16); return;
    default: std::memcpy(dst, src, bytes); return;
  }
}

// The trajectory's first cache line (what an append reads and writes).
void PrefetchTrajectory(const Trajectory* t) {
  if (t != nullptr) PrefetchForWrite(t);
}

}  // namespace

Status TableImpl::AppendVectorStep(std::span<WriterSlot> slots, const VectorSteps& steps,
                                   std::span<const double> priorities, Deadline deadline,
                                   VectorScratch* scratch, uint64_t* log_seq,
                                   std::span<std::byte> record) {
  const size_t n = slots.size();
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  if (steps.device) REPLAYDB_RETURN_IF_ERROR(NeedTierLocked("AppendFromDevice"));
  scratch->reserved.resize(n);
  scratch->dest.resize(n);
  scratch->items_tallied = false;
  const int64_t bs = layout_.block_steps;
  Status first_error;
  const auto note = [&](size_t env, const Status& s) {
    if (first_error.ok()) first_error = SlotError(s, env);
  };
  // Chunks of environments: normally one, the whole vector.
  size_t begin = 0;
  while (begin < n) {
    size_t env = begin;
    bool holds = false;  // an environment of the chunk has room reserved
    // Inserts the rate limiter admitted for the chunk's items in advance
    // (as many as it would one by one); what is left goes back below.
    int64_t credit = limiter_.TryReserveUpTo(static_cast<int64_t>(n - begin));
    const int64_t evicted_before = evicted_trajectories_;
    const uint64_t clears_before = clears_;
    // With several parts and the whole vector admitted, the common case of
    // every environment is done by all parts at once first; the loop below
    // then reserves the others (kReserveLater) in order.
    bool shared = false;
    if (scratch->fork_join != nullptr && begin == 0 && credit == static_cast<int64_t>(n) &&
        scratch->skip.empty()) {
      size_t later = 0;
      credit -= SharedFastReserveLocked(slots, scratch, &later);
      shared = true;
      holds = later < n;
      if (later == 0) env = n;
    }
    for (; env < n; ++env) {
      if (shared && scratch->dest[env] != kReserveLater) continue;
      if (!scratch->skip.empty() && scratch->skip[env] != 0) {
        scratch->dest[env] = -1;  // (it holds the step already)
        continue;
      }
      if (env + kPrefetchAhead < n) PrefetchTrajectory(slots[env + kPrefetchAhead].trajectory.get());
      StepReservation& r = scratch->reserved[env];
      // The common case, when the credit covers the item (if the step
      // completes one).
      WriterSlot& slot = slots[env];
      if (!shared && FastReserveLocked(slot, &r) && (!r.completes_item || credit > 0)) {
        credit -= r.completes_item ? 1 : 0;
        scratch->dest[env] = r.block * bs + r.step_in_block;
        holds = true;
        continue;
      }
      scratch->dest[env] = -1;
      bool would_wait = false;
      Status s = ReserveStepLocked(lock, slot, deadline, &r, /*may_wait=*/!holds,
                                   &would_wait, &credit);
      if (would_wait) break;  // finish the chunk first, then wait
      if (!s.ok()) {
        note(env, s);
        continue;
      }
      slot.last_block = r.block;
      slot.num_blocks = slot.trajectory->blocks.size();
      scratch->dest[env] = r.block * bs + r.step_in_block;
      holds = true;
    }
    const size_t end = env;
    assert((!shared || end == n) && "the credit covered every environment: nothing waited");
    if (credit > 0) limiter_.ReleaseInserts(credit);
    // A later environment's block may have come from evicting an earlier
    // one's trajectory (here or, while the lock was released, elsewhere), or
    // a Clear ran while the lock was released: that one loses its step (its
    // block is someone else's now).
    const bool lost = evicted_trajectories_ != evicted_before || clears_ != clears_before;
    for (env = lost ? begin : end; env < end; ++env) {
      if (scratch->dest[env] < 0) continue;
      WriterSlot& slot = slots[env];
      if (!slot.trajectory->evicted) continue;
      note(env, EvictedError(*slot.trajectory));
      DropVectorStepLocked(slot, scratch->reserved[env], &scratch->dest[env], scratch);
    }
    // The record is the whole vector's: of use only to a chunk that is.
    REPLAYDB_RETURN_IF_ERROR(FinishVectorChunkLocked(
        lock, slots, begin, end, steps, priorities, scratch, log_seq, &first_error,
        begin == 0 && end == n ? record : std::span<std::byte>()));
    begin = end;
  }
  return first_error;
}

void TableImpl::DropVectorStepLocked(WriterSlot& slot, const StepReservation& r, int64_t* dest,
                                     VectorScratch* scratch) {
  AbandonStepLocked(slot, r);
  *dest = -1;
  scratch->items_tallied = false;
}

bool TableImpl::FastReserveLocked(const WriterSlot& slot, StepReservation* r) const {
  const Trajectory* t = slot.trajectory.get();
  if (t == nullptr || t->evicted || t->ended || t->removed || closed_ || slot.num_blocks == 0 ||
      t->blocks.size() != slot.num_blocks) {
    return false;
  }
  const int64_t bs = layout_.block_steps;
  const int64_t length = t->length;
  const int64_t in_block = length - static_cast<int64_t>(slot.num_blocks - 1) * bs;
  if (in_block >= bs || length >= kMaxTrajectorySteps) return false;
  r->completes_item = length + 1 >= sequence_length_;
  r->created = false;
  r->block = slot.last_block;
  r->step_in_block = in_block;
  return true;
}

int64_t TableImpl::SharedFastReserveLocked(std::span<WriterSlot> slots, VectorScratch* scratch,
                                           size_t* later) {
  util::ForkJoin* fj = scratch->fork_join.get();
  scratch->parts.resize(static_cast<size_t>(fj->parts()));
  const int64_t bs = layout_.block_steps;
  util::ForkJoin::ForEachShare(fj, slots.size(), [&](int part, size_t begin, size_t end) {
    VectorScratch::PartTally tally;
    for (size_t env = begin; env < end; ++env) {
      if (env + kPrefetchAhead < end) {
        PrefetchTrajectory(slots[env + kPrefetchAhead].trajectory.get());
      }
      StepReservation& r = scratch->reserved[env];
      if (FastReserveLocked(slots[env], &r)) {
        tally.items += r.completes_item ? 1 : 0;
        scratch->dest[env] = r.block * bs + r.step_in_block;
      } else {
        ++tally.todo;
        scratch->dest[env] = kReserveLater;
      }
    }
    scratch->parts[static_cast<size_t>(part)] = tally;
  });
  int64_t items = 0;
  *later = 0;
  for (const VectorScratch::PartTally& tally : scratch->parts) {
    items += tally.items;
    *later += tally.todo;
  }
  scratch->items_tallied = *later == 0;
  return items;
}

Status TableImpl::StageVectorRows(int device, const VectorSteps& rows, size_t first_row,
                                  size_t count, VectorScratch* scratch) const {
  StagedRows& staged = scratch->device_rows;
  REPLAYDB_RETURN_IF_ERROR(staged.Prepare(device, columns_, layout_, count));
  staged.CopyRows(rows.columns.data(), first_row, count, scratch->fork_join.get(),
                  rows.row_bytes);
  return Status::OK();
}

Status TableImpl::FinishVectorChunkLocked(std::unique_lock<std::mutex>& lock,
                                          std::span<WriterSlot> slots, size_t begin, size_t end,
                                          const VectorSteps& steps,
                                          std::span<const double> priorities,
                                          VectorScratch* scratch, uint64_t* log_seq,
                                          Status* first_error, std::span<std::byte> record) {
  const size_t count = end - begin;
  if (count == 0) return Status::OK();
  std::span<WriterSlot> chunk = slots.subspan(begin, count);
  std::span<int64_t> dest = std::span<int64_t>(scratch->dest).subspan(begin, count);
  std::span<StepReservation> reserved =
      std::span<StepReservation>(scratch->reserved).subspan(begin, count);
  const std::span<const double> chunk_priorities =
      priorities.empty() ? priorities : priorities.subspan(begin, count);
  // The chunk's rows, per column.
  const size_t num_columns = columns_.size();
  scratch->columns.resize(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    scratch->columns[c] = steps.Row(c, begin, layout_.column_bytes[c]);
  }
  const VectorSteps rows{scratch->columns, steps.device, steps.stream, steps.row_bytes};
  // Undoes every step of the chunk that still has room.
  const auto abandon_all = [&] {
    for (size_t i = 0; i < count; ++i) {
      if (dest[i] < 0) continue;
      DropVectorStepLocked(chunk[i], reserved[i], &dest[i], scratch);
    }
  };
  // Closed while a reservation waited for blocks (the lock released).
  if (Status open = CheckOpenLocked(); !open.ok()) {
    abandon_all();
    return open;
  }

  Status copied;
  if (steps.device) {
    // One kernel; blocks that leave the tier after it is queued wait for it
    // (the tier's access epochs), so nothing needs pinning.
    RowTensors(
        columns_, layout_, count, [&](size_t c) { return rows.columns[c]; }, &scratch->tensors);
    copied = tier_->Scatter(dest, scratch->tensors, steps.stream);
    if (!copied.ok()) {
      abandon_all();
      return copied.WithContext("table " + Quoted(name_) + ": AppendFromDevice");
    }
  } else {
    // Where row i of column c goes in host-accessible `block` (its block's
    // address).
    const auto row_dst = [&](size_t i, size_t c, std::byte* block) {
      return block + layout_.column_offset[c] +
             static_cast<size_t>(reserved[i].step_in_block) * layout_.column_bytes[c];
    };
    const auto copy_row = [&](size_t i, std::byte* block) {
      for (size_t c = 0; c < num_columns; ++c) {
        const size_t cb = layout_.column_bytes[c];
        CopyRow(row_dst(i, c, block), rows.Row(c, i, cb), cb);
      }
    };
    // Host-accessible blocks (memcpy, which cannot fail): each row into its
    // own block (block_of(i)), split over the writer's parts, if any: the
    // rows, or with fewer rows than parts (a vector table's one row per
    // call), their bytes.
    const auto copy_shared = [&](const auto& block_of) {
      util::ForkJoin* fj = scratch->fork_join.get();
      if (fj != nullptr && count < static_cast<size_t>(fj->parts())) {
        std::vector<util::CopyRange>& ranges = scratch->ranges;
        ranges.clear();
        for (size_t i = 0; i < count; ++i) {
          if (dest[i] < 0) continue;
          std::byte* block = block_of(i);
          for (size_t c = 0; c < num_columns; ++c) {
            const size_t cb = layout_.column_bytes[c];
            ranges.push_back({row_dst(i, c, block), rows.Row(c, i, cb), cb});
          }
        }
        util::CopyRanges(fj, ranges);
        return;
      }
      util::ForkJoin::ForEachShare(fj, count, [&](int /*part*/, size_t first, size_t last) {
        for (size_t i = first; i < last; ++i) {
          if (num_columns > 0 && i + kPrefetchAhead < last && dest[i + kPrefetchAhead] >= 0) {
            const size_t ahead = i + kPrefetchAhead;
            PrefetchForWrite(block_of(ahead) + layout_.column_offset[0] +
                     static_cast<size_t>(reserved[ahead].step_in_block) * layout_.column_bytes[0]);
          }
          if (dest[i] >= 0) copy_row(i, block_of(i));
        }
      });
    };
    if (pool_.host_accessible() && count * layout_.step_bytes <= kVectorCopyUnderLockBytes) {
      copy_shared([&](size_t i) { return pool_.address(reserved[i].block); });
    } else {
      // Outside the lock, the trajectories pinned so that an eviction
      // meanwhile cannot hand their blocks to someone else. The blocks'
      // addresses are read first, under the lock: the pool's table of them
      // grows as other writers take new blocks.
      const bool to_device = !pool_.host_accessible();
      const int device = to_device ? tier_->device() : -1;
      std::vector<std::byte*>& blocks = scratch->blocks;
      if (!to_device) blocks.resize(count);
      for (size_t i = 0; i < count; ++i) {
        if (dest[i] < 0) continue;
        ++chunk[i].trajectory->pins;
        if (!to_device) blocks[i] = pool_.address(reserved[i].block);
      }
      lock.unlock();
      if (to_device) {
        // Device blocks: the rows go to pinned memory first (at most
        // StagedRows::kMaxBytes of them at a time), then one scatter, queued
        // under the lock, reads them from there into their blocks. Rows of
        // environments evicted meanwhile land in blocks still pinned to
        // them, and are dropped below.
        const size_t per_stage = StagedRows::RowsPerStage(layout_.step_bytes);
        for (size_t first = 0; first < count && copied.ok(); first += per_stage) {
          const size_t n = std::min(per_stage, count - first);
          copied = StageVectorRows(device, rows, first, n, scratch);
          if (!copied.ok()) break;
          lock.lock();
          // Closed meanwhile: every environment drops its step below.
          const bool open = CheckOpenLocked().ok();
          if (open) copied = scratch->device_rows.Scatter(*tier_, dest.subspan(first, n));
          lock.unlock();
          if (!open) break;
        }
      } else {
        copy_shared([&](size_t i) { return blocks[i]; });
      }
      lock.lock();
      for (size_t i = 0; i < count; ++i) {
        if (dest[i] >= 0) UnpinLocked(*chunk[i].trajectory);
      }
      if (!copied.ok()) {
        abandon_all();
        return copied.WithContext("table " + Quoted(name_));
      }
      // Closed or evicted meanwhile: those environments lose the step.
      for (size_t i = 0; i < count; ++i) {
        if (dest[i] < 0) continue;
        Status s = CheckOpenLocked();
        if (s.ok() && chunk[i].trajectory->evicted) s = EvictedError(*chunk[i].trajectory);
        if (s.ok()) continue;
        DropVectorStepLocked(chunk[i], reserved[i], &dest[i], scratch);
        if (first_error->ok()) {
          *first_error = SlotError(s, begin + i);
        }
      }
    }
  }
  // Logged before they are published: a step the log refused never appears.
  Result<uint64_t> logged = LogVectorStepsLocked(chunk, dest, rows, chunk_priorities, record);
  if (!logged.ok()) {
    abandon_all();
    return logged.status().WithContext("table " + Quoted(name_) +
                                       (steps.device ? ": AppendFromDevice" : ": vector step"));
  }
  if (log_seq != nullptr && *logged != 0) *log_seq = *logged;
  // Publish (PublishStepLocked, in one pass): each step's priority and the
  // item it completes go to the SlotMeta beside its block; the items reach
  // the selector together.
  // With L = 1 an item is its step: its priority is the step's whatever
  // StepPriority says, and it sits in the step's slot (CreateItemLocked,
  // inlined). Items of a tier that keeps their lengths go the long way.
  const bool one_step_items = sequence_length_ == 1 && !(tier_ && tier_->item_steps());
  std::span<const index::ItemRef> items;
  if (one_step_items && scratch->fork_join != nullptr) {
    items = SharedPublishLocked(chunk, dest, reserved, chunk_priorities, scratch);
    // One item per environment, each in its own trajectory's block.
    selector_.InsertManyDistinctBlocks(items, *scratch->fork_join);
  } else {
    scratch->items.clear();
    PublishVectorStepsLocked(chunk, dest, reserved, chunk_priorities, one_step_items,
                             &scratch->items);
    items = scratch->items;
    selector_.InsertMany(items);
  }
  if (!items.empty()) limiter_.CommitInserts(static_cast<int64_t>(items.size()));
  return Status::OK();
}

void TableImpl::PrefetchMetaAhead(std::span<const int64_t> dest,
                                  std::span<const StepReservation> reserved, size_t i,
                                  size_t end) const {
  if (i + kPrefetchAhead < end && dest[i + kPrefetchAhead] >= 0) {
    const StepReservation& ahead = reserved[i + kPrefetchAhead];
    PrefetchForWrite(&store_.MetaAt(ahead.block, ahead.step_in_block));
  }
}

SlotMeta& TableImpl::PublishStepLocked(Trajectory& t, const StepReservation& r, double priority,
                                       int64_t* step) {
  SlotMeta& meta = store_.MetaAt(r.block, r.step_in_block);
  meta.step_priority = priority;
  *step = t.length++;
  t.dirty = true;
  return meta;
}

index::ItemRef TableImpl::NewOneStepItemLocked(Trajectory& t, SlotMeta& meta, int64_t step,
                                               int64_t slot, uint64_t seq, double priority) {
  meta.item.seq = seq;
  meta.item.priority = priority;
  meta.item.times_sampled = 0;
  ++t.items_created;
  ++t.live_items;
  return {MakeItemKey(t.id, step), seq, priority, slot};
}

std::span<const index::ItemRef> TableImpl::SharedPublishLocked(
    std::span<WriterSlot> chunk, std::span<const int64_t> dest,
    std::span<const StepReservation> reserved, std::span<const double> priorities,
    VectorScratch* scratch) {
  util::ForkJoin* fj = scratch->fork_join.get();
  const size_t count = chunk.size();
  // First each part's items, for their sequence numbers in environment order
  // (already counted when the reservations covered the whole vector: the
  // same parts' shares of the same range).
  if (scratch->items_tallied) {
    assert(count == scratch->dest.size() && "tallied only when one chunk holds every environment");
    for (VectorScratch::PartTally& tally : scratch->parts) {
      tally = VectorScratch::PartTally{.items = tally.items};
    }
  } else {
    scratch->parts.assign(static_cast<size_t>(fj->parts()), VectorScratch::PartTally{});
    util::ForkJoin::ForEachShare(fj, count, [&](int part, size_t begin, size_t end) {
      VectorScratch::PartTally& tally = scratch->parts[static_cast<size_t>(part)];
      for (size_t i = begin; i < end; ++i) {
        tally.items += dest[i] >= 0 && reserved[i].completes_item ? 1 : 0;
      }
    });
  }
  int64_t total = 0;
  for (VectorScratch::PartTally& tally : scratch->parts) {
    tally.first_item = total;
    total += tally.items;
  }
  std::vector<index::ItemRef>& items = scratch->items;
  if (items.size() < static_cast<size_t>(total)) items.resize(static_cast<size_t>(total));
  const uint64_t first_seq = next_item_seq_;
  const double max_seen = max_priority_seen_;
  util::ForkJoin::ForEachShare(fj, count, [&](int part, size_t begin, size_t end) {
    VectorScratch::PartTally& tally = scratch->parts[static_cast<size_t>(part)];
    int64_t next = tally.first_item;
    double max_priority = max_seen;
    for (size_t i = begin; i < end; ++i) {
      PrefetchMetaAhead(dest, reserved, i, end);
      if (dest[i] < 0) continue;
      Trajectory& t = *chunk[i].trajectory;
      assert(!t.ranked && "an appended trajectory is open; only ended ones are ranked");
      double priority = max_seen;
      if (!priorities.empty()) {
        priority = priorities[i];
        max_priority = std::max(max_priority, priority);
      }
      int64_t step = 0;
      SlotMeta& meta = PublishStepLocked(t, reserved[i], priority, &step);
      ++tally.published;
      if (!reserved[i].completes_item) continue;
      items[static_cast<size_t>(next)] = NewOneStepItemLocked(
          t, meta, step, dest[i], first_seq + static_cast<uint64_t>(next), priority);
      ++next;
      tally.draws += DrawsLeft(meta.item);
    }
    tally.max_priority = max_priority;
    assert(next - tally.first_item == tally.items && "a part's items differ from its count");
  });
  int64_t published = 0;
  for (const VectorScratch::PartTally& tally : scratch->parts) {
    published += tally.published;
    sample_budget_ += tally.draws;
    max_priority_seen_ = std::max(max_priority_seen_, tally.max_priority);
  }
  next_item_seq_ += static_cast<uint64_t>(total);
  items_inserted_ += total;
  num_items_ += total;
  num_steps_ += published;
  steps_inserted_ += published;
  return std::span<const index::ItemRef>(items).first(static_cast<size_t>(total));
}

void TableImpl::PublishVectorStepsLocked(std::span<WriterSlot> chunk,
                                         std::span<const int64_t> dest,
                                         std::span<const StepReservation> reserved,
                                         std::span<const double> chunk_priorities,
                                         bool one_step_items, std::vector<index::ItemRef>* out) {
  std::vector<index::ItemRef>& items = *out;
  const size_t count = chunk.size();
  int64_t published = 0;
  int64_t short_items = 0;  // made here, not by CreateItemLocked
  int64_t short_draws = 0;  // their DrawsLeft
  for (size_t i = 0; i < count; ++i) {
    PrefetchMetaAhead(dest, reserved, i, count);
    if (dest[i] < 0) continue;
    Trajectory& t = *chunk[i].trajectory;
    double priority = max_priority_seen_;
    if (!chunk_priorities.empty()) {
      priority = chunk_priorities[i];
      max_priority_seen_ = std::max(max_priority_seen_, priority);
    }
    int64_t step = 0;
    SlotMeta& meta = PublishStepLocked(t, reserved[i], priority, &step);
    ++published;
    if (!reserved[i].completes_item) continue;
    if (one_step_items && !t.ranked) {
      items.push_back(NewOneStepItemLocked(t, meta, step, dest[i], next_item_seq_++, priority));
      ++short_items;
      short_draws += DrawsLeft(meta.item);
      continue;
    }
    // With L = 1 the item starts at the step itself.
    CreateItemLocked(t, t.items_created == step ? dest[i] : -1, &items);
  }
  items_inserted_ += short_items;
  num_items_ += short_items;
  sample_budget_ += short_draws;
  num_steps_ += published;
  steps_inserted_ += published;
}

Status TableImpl::SlotError(const Status& s, size_t slot) const {
  return s.WithContext("environment " + std::to_string(slot));
}

}  // namespace replaydb::engine
