// TableImpl's hot-tier blocks and eviction: giving a trajectory a block
// (evicting whole trajectories in the store's order when the pool is full,
// or waiting for blocks that copies, GPU kernels or spills still hold),
// taking a trajectory out of the tier, and returning its blocks once
// nothing reads them.
#include <algorithm>
#include <cassert>
#include <string>

#include "engine/table/table_impl.h"
#include "util/format.h"
#include "util/interrupt.h"
#include "util/prefetch.h"

namespace replaydb::engine {

using util::Quoted;
using util::PrefetchForWrite;

Status TableImpl::AddBlockLocked(std::unique_lock<std::mutex>& lock, Trajectory& t,
                                 Deadline deadline) {
  while (true) {
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    if (t.evicted) return EvictedError(t);
    REPLAYDB_ASSIGN_OR_RETURN(const int64_t block, pool_.Allocate());
    if (block >= 0) {
      TakeBlockLocked(t, block);
      return Status::OK();
    }
    // Full. Blocks that in-flight copies still hold come back soon; wait for
    // them before evicting anything more.
    if (ReclaimDeferredLocked()) continue;
    if (!deferred_.empty()) {
      // The GPU still reads them: wait for the oldest access they wait for.
      REPLAYDB_RETURN_IF_ERROR(tier_->WaitFor(deferred_.front().first));
      continue;
    }
    // Blocks being spilled come back once written: up to an eighth of the
    // tier may be on its way out before a writer waits (the spill thread
    // then always has work queued); other pinned blocks are waited for first.
    std::shared_ptr<Trajectory> victim;
    const int64_t headroom =
        spill_ && cold_store_ != nullptr ? std::max<int64_t>(1, pool_.capacity_blocks() / 8) : 1;
    if (pending_free_blocks_ - leased_free_blocks_ < headroom) victim = store_.PickVictim(t);
    if (pending_free_blocks_ > 0 && !victim) {
      const util::WaitEnd end = util::WaitInterruptibly(blocks_cv_, lock, deadline);
      if (end == util::WaitEnd::kInterrupted) {
        return Status::Cancelled("table " + Quoted(name_) +
                                 ": interrupted while waiting for hot-tier blocks");
      }
      if (end == util::WaitEnd::kTimedOut && pending_free_blocks_ > 0 &&
          pool_.in_use() >= pool_.capacity_blocks()) {
        return Status::DeadlineExceeded(
            "table " + Quoted(name_) + ": timed out waiting for hot-tier blocks that " +
            (spill_queue_.empty()
                 ? std::string(leased_free_blocks_ > 0
                                   ? "samples read in place still hold (their leases)"
                                   : "in-flight samples still read")
                                  : "are being spilled to the cold tier (" +
                                        std::to_string(spill_queue_.size()) +
                                        " trajectories queued" +
                                        (spill_error_.empty() ? ")" : "; the last spill failed: " +
                                                                          spill_error_ + ")")));
      }
      continue;
    }
    if (!victim) {
      return Status::ResourceExhausted(
          "table " + Quoted(name_) + ": trajectory " + std::to_string(t.id) + " (" +
          std::to_string(t.length) + " steps) does not fit in the hot tier of " +
          std::to_string(layout_.num_blocks) + " blocks of " +
          std::to_string(layout_.block_steps) + " steps (" +
          std::to_string(layout_.num_blocks * layout_.block_steps) +
          " steps); end trajectories sooner or raise the capacity");
    }
    RemoveTrajectoryLocked(*victim, /*evicted=*/true);
  }
}

void TableImpl::TakeBlockLocked(Trajectory& t, int64_t block) {
  store_.CoverBlocks(pool_.allocated());
  if (tier_) {
    for (; blocks_seen_ < pool_.allocated(); ++blocks_seen_) {
      tier_->NewBlock(blocks_seen_, pool_.address(blocks_seen_));
    }
    if (!t.blocks.empty()) tier_->Link(t.blocks.back(), block);
    if (tier_->uniform_draws()) {
      // The key of the block's first row: a vector table's keys count rows
      // (step * lanes + environment).
      tier_->SetBlockKey(block, MakeItemKey(t.id, static_cast<int64_t>(t.blocks.size()) *
                                                      layout_.block_steps * spec_.lanes));
    }
  }
  t.blocks.push_back(block);
}

void TableImpl::RemoveTrajectoryLocked(Trajectory& t, bool evicted, bool log) {
  if (log && log_ != nullptr && t.length > 0) {
    // Best effort: if the log refuses the record (a failed disk), replay
    // brings the trajectory back; nothing acknowledged is lost.
    record_.RemoveTrajectory({table_id_, t.id, evicted});
    (void)LogLocked(wal::RecordType::kRemoveTrajectory);
  }
  const bool spilled = evicted && (spill_ || read_only_.load(std::memory_order_relaxed)) &&
                       cold_store_ != nullptr;
  if (t.in_cold && !spilled) removed_since_checkpoint_.push_back(t.id);
  // Without max_times_sampled every created item is live and has no draws
  // to give back: a selector that removes whole blocks needs no walk.
  // (Deleted items make the walk needed too.)
  int64_t removed_items = max_times_sampled_ == 0 && t.live_items == t.items_created
                              ? selector_.RemoveBlocks(t.blocks)
                              : -1;
  assert(removed_items < 0 || removed_items == t.live_items);
  if (removed_items < 0) removed_items = RemoveItemsOneByOneLocked(t);
  t.live_items = 0;
  num_items_ -= removed_items;
  num_steps_ -= t.length;
  if (removed_items > 0) limiter_.Delete(removed_items);
  if (evicted) {
    ++evicted_trajectories_;
    evicted_items_ += removed_items;
  }
  t.removed = true;
  t.evicted = evicted;
  if (spilled) SpillLocked(t);  // may pin t until its steps are written
  if (t.pins == 0) {
    ReleaseBlocksLocked(&t.blocks);
  } else {
    pending_free_blocks_ += static_cast<int64_t>(t.blocks.size());
    if (t.leases == t.pins) leased_free_blocks_ += static_cast<int64_t>(t.blocks.size());
  }
  // Last: this may drop the final reference to `t`.
  store_.Erase(t);
}

int64_t TableImpl::RemoveItemsOneByOneLocked(Trajectory& t) {
  int64_t removed_items = 0;
  const int64_t bs = layout_.block_steps;
  // Block by block: a block's steps are kMetaStride entries apart in the
  // store's metadata, so the walk asks for the entries ahead itself.
  constexpr int64_t kAhead = 8;
  for (int64_t first = 0; first < t.items_created; first += bs) {
    const int64_t block = t.blocks[static_cast<size_t>(first / bs)];
    const SlotMeta* meta = &store_.MetaAt(block, 0);
    const int64_t steps = std::min(bs, t.items_created - first);
    for (int64_t i = 0; i < std::min(kAhead, steps); ++i) PrefetchForWrite(meta + i * TrajectoryStore::kMetaStride);
    for (int64_t i = 0; i < steps; ++i) {
      if (i + kAhead < steps) PrefetchForWrite(meta + (i + kAhead) * TrajectoryStore::kMetaStride);
      const ItemState& item = meta[i * TrajectoryStore::kMetaStride].item;
      if (!store_.ItemLive(item)) continue;
      removing_.push_back(
          {MakeItemKey(t.id, first + i), item.seq, item.priority, block * bs + i});
      sample_budget_ -= DrawsLeft(item);
      ++removed_items;
    }
  }
  selector_.RemoveMany(removing_);
  removing_.clear();
  return removed_items;
}

void TableImpl::UnpinLocked(Trajectory& t) {
  --t.pins;
  if (!t.removed || t.blocks.empty()) return;
  if (t.pins > 0) {
    // Only leases hold it now: a writer need not wait for it.
    if (t.pins == t.leases) leased_free_blocks_ += static_cast<int64_t>(t.blocks.size());
    return;
  }
  pending_free_blocks_ -= static_cast<int64_t>(t.blocks.size());
  ReleaseBlocksLocked(&t.blocks);
  blocks_cv_.notify_all();
}

void TableImpl::UnleaseLocked(Trajectory& t) {
  --t.leases;
  --t.pins;
  if (!t.removed || t.blocks.empty()) return;
  const auto n = static_cast<int64_t>(t.blocks.size());
  // Still held: whether only leases hold it has not changed (both counts
  // went down by one).
  if (t.pins > 0) return;
  pending_free_blocks_ -= n;
  leased_free_blocks_ -= n;
  ReleaseBlocksLocked(&t.blocks);
  blocks_cv_.notify_all();
}

void TableImpl::ReleaseBlocksLocked(std::vector<int64_t>* blocks) {
  if (blocks->empty()) return;
  // As of the last poll: polling costs a CUDA call per event asked, and
  // deferred blocks are reclaimed (with a poll) when the pool runs out.
  if (tier_ && tier_->launched() > tier_->completed()) {
    pending_free_blocks_ += static_cast<int64_t>(blocks->size());
    deferred_.emplace_back(tier_->launched(), std::move(*blocks));
  } else {
    for (int64_t b : *blocks) pool_.Free(b);
  }
  blocks->clear();
}

bool TableImpl::ReclaimDeferredLocked() {
  if (deferred_.empty()) return false;
  const uint64_t done = tier_->Completed();
  bool freed = false;
  while (!deferred_.empty() && deferred_.front().first <= done) {
    for (int64_t b : deferred_.front().second) pool_.Free(b);
    pending_free_blocks_ -= static_cast<int64_t>(deferred_.front().second.size());
    deferred_.pop_front();
    freed = true;
  }
  return freed;
}

void TableImpl::MaybeReleaseConsumedLocked(Trajectory& t) {
  if (!t.ended || t.removed || t.items_created == 0 || t.live_items > 0) return;
  const int64_t all_items = padding_ == Padding::kTail
                                ? t.length
                                : std::max<int64_t>(0, t.length - sequence_length_ + 1);
  if (t.items_created < all_items) return;
  RemoveTrajectoryLocked(t, /*evicted=*/false);
}

// ---- Clear

Status TableImpl::AwaitColdIdleLocked(std::unique_lock<std::mutex>& lock, bool loads) {
  cold_cv_.wait(lock, [&] {
    return closed_ || cold_stop_ ||
           (spill_queue_.empty() && !spill_running_ && (!loads || loading_.empty())) ||
           !spill_error_.empty();
  });
  if (!spill_queue_.empty() || spill_running_) {
    return Status::IOError("table " + Quoted(name_) + ": " + std::to_string(spill_queue_.size()) +
                           " trajectories wait to be spilled; the last spill failed: " +
                           spill_error_);
  }
  return Status::OK();
}

Status TableImpl::Clear() {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("Clear"));
  uint64_t seq = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    REPLAYDB_RETURN_IF_ERROR(AwaitColdIdleLocked(lock, /*loads=*/true));
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    // Logged first, as one record: replay clears what the checkpoint and
    // the records before it held, and keeps trajectories started after it.
    const uint64_t below = store_.next_id();
    if (log_ != nullptr) {
      record_.ClearTable({table_id_, below});
      REPLAYDB_ASSIGN_OR_RETURN(seq, LogLocked(wal::RecordType::kClearTable));
    }
    ClearLocked(below);
  }
  return SyncLog(seq, /*wait=*/true);
}

void TableImpl::ClearLocked(uint64_t below) {
  std::vector<std::shared_ptr<Trajectory>> hot;
  for (const auto& [id, tp] : store_.trajectories()) {
    if (id < below) hot.push_back(tp);
  }
  for (const std::shared_ptr<Trajectory>& tp : hot) {
    tp->cleared = true;
    RemoveTrajectoryLocked(*tp, /*evicted=*/false, /*log=*/false);
    tp->evicted = true;  // its writer's next call reports the clear and starts anew
  }
  for (auto it = cold_.begin(); it != cold_.end() && it->first < below;) {
    // No spill or load is in flight (AwaitColdIdleLocked, or recovery).
    cold_steps_ -= it->second.length;
    removed_since_checkpoint_.push_back(it->first);
    it = cold_.erase(it);
  }
  ++clears_;
  limiter_.Reset();
  blocks_cv_.notify_all();
  cold_cv_.notify_all();
}

}  // namespace replaydb::engine
