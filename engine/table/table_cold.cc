// TableImpl's cold tier: spilling evicted trajectories into the cold store,
// loading them back, and rotating a dataset larger than the hot tier through
// it. The design is in docs/cold_tier.md; keys and values in engine/cold/COLD.md.
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/cold/cold_generated.h"
#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

std::string_view View(const flatbuffers::FlatBufferBuilder& fbb) {
  return {reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()};
}

}  // namespace

void TableImpl::SetColdStore(std::shared_ptr<ColdStore> store) {
  std::lock_guard<std::mutex> lock(mu_);
  cold_store_ = std::move(store);
  // A read-only table spills nothing, but rotates.
  const bool work = read_only_.load() ? rotation_every_samples_ > 0 : spill_;
  if (work && cold_store_ != nullptr && !cold_thread_.joinable() && !cold_stop_) {
    cold_thread_ = std::thread([this] { ColdLoop(); });
  }
}

void TableImpl::StoredMetaLocked(const Trajectory& t, StoredTrajectory* out) const {
  out->id = t.id;
  out->length = t.length;
  out->ended = t.ended;
  out->end_reason = t.end_reason;
  out->step_priorities.resize(static_cast<size_t>(t.length));
  for (int64_t i = 0; i < t.length; ++i) {
    out->step_priorities[static_cast<size_t>(i)] = store_.StepPriorityAt(t, i);
  }
  out->items.resize(static_cast<size_t>(t.items_created));
  out->live.resize(static_cast<size_t>(t.items_created));
  for (int64_t i = 0; i < t.items_created; ++i) {
    const ItemState& item = store_.ItemAt(t, i);
    out->items[static_cast<size_t>(i)] = item;
    out->live[static_cast<size_t>(i)] = store_.ItemLive(item);
  }
}

void TableImpl::BuildMeta(const StoredTrajectory& stored, bool cold,
                          flatbuffers::FlatBufferBuilder* fbb) {
  std::vector<fb::ColdItem> items;
  items.reserve(stored.items.size());
  for (size_t i = 0; i < stored.items.size(); ++i) {
    const ItemState& item = stored.items[i];
    items.emplace_back(item.seq, item.priority, item.times_sampled, stored.live[i]);
  }
  fbb->Clear();
  fbb->Finish(fb::CreateTrajectoryMeta(*fbb, stored.id, stored.length, stored.ended,
                                       static_cast<uint8_t>(stored.end_reason),
                                       fbb->CreateVector(stored.step_priorities),
                                       fbb->CreateVectorOfStructs(items), cold));
}

void TableImpl::BuildMetaLocked(const Trajectory& t, bool cold,
                                flatbuffers::FlatBufferBuilder* fbb) const {
  StoredTrajectory stored;
  StoredMetaLocked(t, &stored);
  BuildMeta(stored, cold, fbb);
}

TableImpl::ColdEntry TableImpl::ColdEntryOf(const Trajectory& t, bool spilling) const {
  ColdEntry e;
  e.length = t.length;
  e.spilling = spilling;
  e.ended = t.ended;
  e.end_reason = t.end_reason;
  // Counted from the items: an evicted trajectory's live_items is already 0.
  e.live_items = store_.CountLive(t);
  return e;
}

TableImpl::ColdEntry TableImpl::ColdEntryOf(const StoredTrajectory& stored) const {
  ColdEntry e;
  e.length = stored.length;
  e.ended = stored.ended;
  e.end_reason = stored.end_reason;
  for (size_t i = 0; i < stored.items.size(); ++i) {
    const bool deleted = stored.items[i].times_sampled == kDeletedItem;
    e.live_items += !deleted && (max_times_sampled_ == 0 || stored.live[i]) ? 1 : 0;
  }
  return e;
}

// ---- spilling

void TableImpl::SpillLocked(Trajectory& t) {
  // A writer whose trajectory was evicted gets an error and starts a new
  // one, so the spilled one is over.
  if (!t.ended) {
    t.ended = true;
    t.end_reason = EndReason::kTruncated;
  }
  if (read_only_.load(std::memory_order_relaxed)) {
    // Nothing to write: a read-only table holds only stored trajectories.
    cold_[t.id] = ColdEntryOf(t, /*spilling=*/false);
    cold_steps_ += t.length;
    return;
  }
  SpillJob job;
  job.t = store_.At(t.id);
  flatbuffers::FlatBufferBuilder fbb(256 + 32 * static_cast<size_t>(t.length));
  BuildMetaLocked(t, /*cold=*/true, &fbb);
  job.meta.assign(View(fbb));
  if (t.persisted_steps < t.length) {
    // The blocks stay until the steps are written.
    ++t.pins;
    job.pinned = true;
    for (int64_t b : t.blocks) job.blocks.push_back(pool_.address(b));
  }
  cold_[t.id] = ColdEntryOf(t, /*spilling=*/true);
  cold_steps_ += t.length;
  spill_queue_.push_back(std::move(job));
  cold_cv_.notify_all();
}

void TableImpl::RunSpillLocked(std::unique_lock<std::mutex>& lock) {
  SpillJob& job = spill_queue_.front();
  spill_running_ = true;
  const std::shared_ptr<Trajectory> tp = job.t;
  // As of now: a checkpoint that finished meanwhile may have stored more.
  const int64_t from = tp->persisted_steps;
  const int64_t to = tp->length;
  const uint32_t table_id = table_id_;
  const std::shared_ptr<ColdStore> store = cold_store_;
  Status s;
  if (tier_ && from < to) s = tier_->AwaitScatters();
  lock.unlock();
  ColdStore::Batch batch;
  if (s.ok() && from < to) {
    flatbuffers::FlatBufferBuilder fbb(static_cast<size_t>(to - from) * layout_.step_bytes + 128);
    s = BuildStepChunk(job.blocks, from, to, &fbb);
    if (s.ok()) batch.PutSteps(table_id, tp->id, from, View(fbb));
  }
  batch.PutTrajectory(table_id, tp->id, job.meta);
  if (s.ok()) s = store->WriteLogged(batch);
  lock.lock();
  spill_running_ = false;
  if (!s.ok()) {
    // Retried by the loop; the blocks stay, so writers wait (and time out
    // with this error in their message) rather than lose anything.
    spill_error_ = s.WithContext("table " + Quoted(name_) + ": spilling trajectory " +
                                 std::to_string(tp->id))
                       .ToString();
    cold_cv_.notify_all();
    return;
  }
  spill_error_.clear();
  tp->persisted_steps = std::max(tp->persisted_steps, to);
  tp->in_cold = true;
  ++spilled_trajectories_;
  spilled_bytes_ += (to - from) * static_cast<int64_t>(layout_.step_bytes);
  auto it = cold_.find(tp->id);
  if (it != cold_.end()) it->second.spilling = false;
  const bool pinned = job.pinned;
  spill_queue_.pop_front();
  if (pinned) UnpinLocked(*tp);  // the blocks go back; writers wake
  cold_cv_.notify_all();
}

void TableImpl::ColdLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cold_stop_) {
    if (!spill_queue_.empty() && !checkpointing_) {
      RunSpillLocked(lock);
      if (!spill_error_.empty() && !cold_stop_) {
        cold_cv_.wait_for(lock, std::chrono::milliseconds(100));
      }
      continue;
    }
    if (rotation_due_ && spill_queue_.empty()) {
      rotation_due_ = false;
      RotateLocked(lock);
      continue;
    }
    cold_cv_.wait(lock);
  }
}

// ---- rotation

void TableImpl::RotateLocked(std::unique_lock<std::mutex>& lock) {
  if (closed_ || cold_.empty()) return;
  const int64_t target = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(rotation_fraction_ *
                                        static_cast<double>(pool_.capacity_blocks()))));
  // Out: the ended trajectories that entered the hot tier first.
  std::set<uint64_t> out;
  int64_t freed = 0;
  while (freed < target && store_.num_ended() > 0) {
    Trajectory& t = *store_.OldestEnded();
    freed += static_cast<int64_t>(t.blocks.size());
    out.insert(t.id);
    RemoveTrajectoryLocked(t, /*evicted=*/true);
  }
  // Their spills first: a load below takes free blocks only.
  while (!spill_queue_.empty() && !cold_stop_) {
    if (checkpointing_) {
      cold_cv_.wait(lock);
      continue;
    }
    RunSpillLocked(lock);
    if (!spill_error_.empty()) return;  // retried by the loop
  }
  // In: cold trajectories after the last one rotation brought in, in id
  // order, wrapping around, until they fill what left.
  std::vector<uint64_t> in;
  int64_t blocks = 0;
  auto it = cold_.upper_bound(rotation_cursor_);
  for (size_t n = 0; n < cold_.size() && blocks < freed; ++n, ++it) {
    if (it == cold_.end()) it = cold_.begin();
    if (out.count(it->first) != 0 || it->second.spilling || loading_.count(it->first) != 0) {
      continue;
    }
    in.push_back(it->first);
    blocks += BlocksFor(it->second.length);
    rotation_cursor_ = it->first;
  }
  ++rotations_;
  lock.unlock();
  for (uint64_t id : in) {
    // Without eviction: the cold thread must not wait for its own spills.
    if (!LoadOne(id, /*evict=*/false).ok()) break;
  }
  lock.lock();
}

// ---- loading

Status TableImpl::ParseMeta(std::string_view bytes, uint64_t id, const std::string& where,
                            StoredTrajectory* out) {
  std::string aligned;
  const fb::TrajectoryMeta* meta = VerifiedValue<fb::TrajectoryMeta>(bytes, &aligned);
  if (meta == nullptr || meta->id() != id || meta->length() < 0 ||
      meta->step_priorities() == nullptr ||
      meta->step_priorities()->size() != static_cast<size_t>(meta->length()) ||
      meta->items() == nullptr || meta->items()->size() > static_cast<size_t>(meta->length())) {
    return Status::Corruption(where + ": metadata fails verification");
  }
  if (meta->ended() && EndReasonName(static_cast<EndReason>(meta->end_reason())) == "invalid") {
    return Status::Corruption(where + ": unknown end reason " +
                              std::to_string(meta->end_reason()));
  }
  out->id = id;
  out->length = meta->length();
  out->ended = meta->ended();
  // An open trajectory's stored reason means nothing; it ends truncated.
  out->end_reason =
      meta->ended() ? static_cast<EndReason>(meta->end_reason()) : EndReason::kTruncated;
  out->cold = meta->cold();
  out->step_priorities.assign(meta->step_priorities()->begin(), meta->step_priorities()->end());
  out->items.clear();
  out->live.clear();
  for (const fb::ColdItem* ci : *meta->items()) {
    ItemState item;
    item.seq = ci->seq();
    item.priority = ci->priority();
    item.times_sampled = ci->times_sampled();
    out->items.push_back(item);
    out->live.push_back(ci->live());
  }
  return Status::OK();
}

Status TableImpl::ForEachStoredChunk(ColdStore& store, uint32_t table_id, uint64_t id,
                                     int64_t length, size_t step_bytes, const std::string& where,
                                     const ChunkVisitor& fn) {
  // Chunks tile the steps: each starts where the one before ends. Following
  // them by key reads only the chunks in use (a rewrite from step 0 leaves
  // no stale chunk in the way), with one point lookup each.
  for (int64_t first = 0; first < length;) {
    Status s = store.WithChunk(table_id, id, first, [&](std::string_view bytes) -> Status {
      // In place: a chunk is as large as a trajectory, so no aligned copy.
      StepChunkView chunk;
      if (!ReadStepChunk(bytes, &chunk) || chunk.first_step != first || chunk.count < 1 ||
          chunk.step_bytes != step_bytes || chunk.data == nullptr ||
          chunk.data_bytes != static_cast<size_t>(chunk.count) * step_bytes ||
          first + chunk.count > length) {
        return Status::Corruption(where + ": the step chunk at step " + std::to_string(first) +
                                  " is malformed or does not fit its " + std::to_string(length) +
                                  " steps");
      }
      REPLAYDB_RETURN_IF_ERROR(fn(first, chunk.count, chunk.data));
      first += chunk.count;
      return Status::OK();
    });
    if (s.code() == Status::Code::kNotFound) {
      return Status::Corruption(where + ": has " + std::to_string(first) + " stored steps of " +
                                std::to_string(length) + " (no step chunk at step " +
                                std::to_string(first) + ")");
    }
    REPLAYDB_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

Status TableImpl::ReadChunks(ColdStore& store, uint32_t table_id, size_t step_bytes,
                             const std::string& where, StoredTrajectory* out) {
  out->steps.resize(static_cast<size_t>(out->length) * step_bytes);
  return ForEachStoredChunk(store, table_id, out->id, out->length, step_bytes, where,
                            [&](int64_t first, int64_t count, const std::byte* data) {
                              std::memcpy(out->steps.data() + static_cast<size_t>(first) * step_bytes,
                                          data, static_cast<size_t>(count) * step_bytes);
                              return Status::OK();
                            });
}

Status TableImpl::ReadChunksInto(ColdStore& store, const StoredTrajectory& stored,
                                 std::span<std::byte* const> blocks,
                                 const std::string& where) const {
  return ForEachStoredChunk(store, table_id_, stored.id, stored.length, layout_.step_bytes, where,
                            [&](int64_t first, int64_t count, const std::byte* data) {
                              return WriteSteps(blocks, first, first + count, data);
                            });
}

std::string TableImpl::StoredWhere(const ColdStore& store, uint64_t id) const {
  return "cold store " + store.dir() + ": table " + Quoted(name_) + " (id " +
         std::to_string(table_id_) + ") trajectory " + std::to_string(id);
}

Status TableImpl::ReadStored(ColdStore& store, uint64_t id, bool steps,
                             StoredTrajectory* out) const {
  const std::string where = StoredWhere(store, id);
  std::string value;
  REPLAYDB_RETURN_IF_ERROR(store.GetTrajectory(table_id_, id, &value));
  REPLAYDB_RETURN_IF_ERROR(ParseMeta(value, id, where, out));
  if (steps) {
    REPLAYDB_RETURN_IF_ERROR(ReadChunks(store, table_id_, layout_.step_bytes, where, out));
  }
  return Status::OK();
}

Status TableImpl::ReadStoredFrom(ColdStore& store, uint32_t table_id, size_t step_bytes,
                                 uint64_t id, StoredTrajectory* out) {
  const std::string where = "cold store " + store.dir() + ": table id " +
                            std::to_string(table_id) + " trajectory " + std::to_string(id);
  std::string value;
  REPLAYDB_RETURN_IF_ERROR(store.GetTrajectory(table_id, id, &value));
  REPLAYDB_RETURN_IF_ERROR(ParseMeta(value, id, where, out));
  return ReadChunks(store, table_id, step_bytes, where, out);
}

// ---- datasets

Status TableImpl::ImportStored(StoredTrajectory& stored) {
  if (stored.steps.size() != static_cast<size_t>(stored.length) * layout_.step_bytes ||
      stored.step_priorities.size() != static_cast<size_t>(stored.length) ||
      stored.items.size() != stored.live.size() ||
      stored.items.size() > static_cast<size_t>(stored.length) || stored.length < 1) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": imported trajectory " +
                                   std::to_string(stored.id) + " is inconsistent (" +
                                   std::to_string(stored.length) + " steps, " +
                                   std::to_string(stored.steps.size()) + " bytes, " +
                                   std::to_string(stored.items.size()) + " items)");
  }
  // Stored ended (an open one as truncated); items sampled away stay so
  // under this table's max_times_sampled.
  StoredTrajectory t;
  t.id = stored.id;
  t.length = stored.length;
  t.ended = true;
  t.end_reason = stored.ended ? stored.end_reason : EndReason::kTruncated;
  t.step_priorities = stored.step_priorities;
  t.items = stored.items;
  t.live.resize(t.items.size());
  for (size_t i = 0; i < t.items.size(); ++i) {
    ItemState& item = t.items[i];
    if (!stored.live[i] && max_times_sampled_ > 0) {
      item.times_sampled = std::max<uint32_t>(item.times_sampled, max_times_sampled_);
    }
    t.live[i] = store_.ItemLive(item);
  }
  std::shared_ptr<ColdStore> store;
  uint32_t table_id = 0;
  flatbuffers::FlatBufferBuilder meta(256 + 32 * static_cast<size_t>(t.length));
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    if (store_.Find(t.id) != nullptr || cold_.count(t.id) != 0 || t.id == 0 ||
        t.id > kMaxTrajectoryId) {
      return Status::InvalidArgument("table " + Quoted(name_) + ": imported trajectory id " +
                                     std::to_string(t.id) + " is taken or out of range");
    }
    if (cold_store_ == nullptr) {
      return Status::FailedPrecondition("table " + Quoted(name_) + " has no cold store");
    }
    store = cold_store_;
    table_id = table_id_;
    BuildMeta(t, /*cold=*/true, &meta);
  }
  flatbuffers::FlatBufferBuilder chunk(stored.steps.size() + 128);
  const auto data = chunk.CreateVector(reinterpret_cast<const uint8_t*>(stored.steps.data()),
                                       stored.steps.size());
  chunk.Finish(fb::CreateStepChunk(chunk, 0, t.length, static_cast<uint32_t>(layout_.step_bytes),
                                   data));
  ColdStore::Batch batch;
  batch.PutSteps(table_id, t.id, 0, View(chunk));
  batch.PutTrajectory(table_id, t.id, View(meta));
  REPLAYDB_RETURN_IF_ERROR(store->WriteLogged(batch).WithContext("table " + Quoted(name_)));
  std::lock_guard<std::mutex> lock(mu_);
  cold_[t.id] = ColdEntryOf(t);
  cold_steps_ += t.length;
  store_.NoteId(t.id);
  for (const ItemState& item : t.items) {
    next_item_seq_ = std::max(next_item_seq_, item.seq + 1);
    max_priority_seen_ = std::max(max_priority_seen_, item.priority);
  }
  steps_inserted_ += t.length;
  items_inserted_ += static_cast<int64_t>(t.items.size());
  return Status::OK();
}

Status TableImpl::FillHot() {
  for (uint64_t id : ColdTrajectories(0, 0)) {
    const Status s = LoadOne(id, /*evict=*/false);
    if (s.code() == Status::Code::kResourceExhausted) return Status::OK();  // full
    REPLAYDB_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

Status TableImpl::AddBlocksLocked(std::unique_lock<std::mutex>& lock, Trajectory& t,
                                  int64_t length, bool evict) {
  const int64_t need = BlocksFor(length);
  if (!evict) {
    ReclaimDeferredLocked();
    if (pool_.capacity_blocks() - pool_.in_use() < need) {
      return Status::ResourceExhausted("table " + Quoted(name_) + ": no free hot-tier blocks for " +
                                       std::to_string(length) + " steps");
    }
  }
  while (static_cast<int64_t>(t.blocks.size()) < need) {
    if (evict) {
      REPLAYDB_RETURN_IF_ERROR(AddBlockLocked(lock, t, Deadline::max()));
      continue;
    }
    REPLAYDB_ASSIGN_OR_RETURN(const int64_t block, pool_.Allocate());
    if (block < 0) {
      return Status::ResourceExhausted("table " + Quoted(name_) + ": no free hot-tier blocks");
    }
    TakeBlockLocked(t, block);
  }
  return Status::OK();
}

Status TableImpl::WriteSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                             const std::byte* steps) const {
  const int64_t bs = layout_.block_steps;
  const size_t step_bytes = layout_.step_bytes;
  std::vector<std::byte> scratch;
  for (int64_t s = from; s < to;) {
    const int64_t b = s / bs;
    const int64_t s_end = std::min(to, (b + 1) * bs);
    const size_t first = static_cast<size_t>(s % bs);
    const size_t count = static_cast<size_t>(s_end - s);
    size_t step_offset = 0;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::byte* dst = blocks[b] + layout_.column_offset[c] + first * cb;
      const std::byte* src = steps + static_cast<size_t>(s - from) * step_bytes + step_offset;
      std::byte* run = pool_.host_accessible() ? dst : (scratch.resize(count * cb), scratch.data());
      for (size_t i = 0; i < count; ++i) std::memcpy(run + i * cb, src + i * step_bytes, cb);
      if (!pool_.host_accessible()) {
        REPLAYDB_RETURN_IF_ERROR(tier_->WriteFromHost(dst, run, count * cb));
      }
      step_offset += cb;
    }
    s = s_end;
  }
  return Status::OK();
}

void TableImpl::InstallLocked(const std::shared_ptr<Trajectory>& tp, StoredTrajectory& stored,
                              bool loaded) {
  Trajectory& t = *tp;
  t.length = stored.length;
  for (int64_t i = 0; i < t.length; ++i) {
    store_.Meta(store_.SlotOf(t, i)).step_priority = stored.step_priorities[static_cast<size_t>(i)];
  }
  num_steps_ += t.length;
  store_.Insert(tp);
  int64_t live = 0;
  for (size_t i = 0; i < stored.items.size(); ++i) {
    ItemState item = stored.items[i];
    if (!stored.live[i] && max_times_sampled_ > 0) {
      item.times_sampled = std::max<uint32_t>(item.times_sampled, max_times_sampled_);
    }
    const int64_t start = t.items_created;
    store_.ItemAt(t, start) = item;
    ++t.items_created;
    if (store_.ItemLive(item)) {
      AddLiveItemLocked(t, start, item);
      ++live;
    }
  }
  t.persisted_steps = t.length;
  t.in_cold = true;
  if (stored.ended) store_.MarkEnded(t, stored.end_reason);
  // A loaded trajectory is stored as cold; the next checkpoint says hot.
  t.dirty = loaded;
  auto it = cold_.find(t.id);
  if (it != cold_.end()) {
    cold_steps_ -= it->second.length;
    cold_.erase(it);
  }
  store_.NoteId(t.id);
  if (loaded) {
    ++loaded_trajectories_;
    if (live > 0) limiter_.ForceInserts(live);
  }
}

Status TableImpl::LoadOne(uint64_t id, bool evict) {
  std::unique_lock<std::mutex> lock(mu_);
  std::map<uint64_t, ColdEntry>::iterator it;
  while (true) {
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    if (store_.Find(id) != nullptr) return Status::OK();
    it = cold_.find(id);
    if (it == cold_.end()) {
      return Status::NotFound("table " + Quoted(name_) + ": trajectory " + std::to_string(id) +
                              " is neither in the hot nor in the cold tier");
    }
    if (!it->second.spilling && loading_.count(id) == 0) break;
    cold_cv_.wait(lock);  // its spill, or another load of it, finishes
  }
  if (BlocksFor(it->second.length) > pool_.capacity_blocks()) {
    return Status::ResourceExhausted(
        "table " + Quoted(name_) + ": trajectory " + std::to_string(id) + " (" +
        std::to_string(it->second.length) + " steps) does not fit in the hot tier of " +
        std::to_string(layout_.num_blocks) + " blocks of " + std::to_string(layout_.block_steps) +
        " steps");
  }
  if (cold_store_ == nullptr) {
    return Status::FailedPrecondition("table " + Quoted(name_) + " has no cold store");
  }
  const std::shared_ptr<ColdStore> store = cold_store_;
  loading_.insert(id);
  const auto done = [&] {
    loading_.erase(id);
    cold_cv_.notify_all();
  };
  lock.unlock();
  // The metadata first, to size the blocks; the chunks then go straight
  // from RocksDB's block into ours.
  StoredTrajectory stored;
  Status s = ReadStored(*store, id, /*steps=*/false, &stored);
  lock.lock();
  if (s.ok()) s = CheckOpenLocked();
  if (!s.ok()) {
    done();
    return s;
  }
  std::shared_ptr<Trajectory> tp = store_.Make(id);
  s = AddBlocksLocked(lock, *tp, stored.length, evict);
  std::vector<std::byte*> blocks;
  for (int64_t b : tp->blocks) blocks.push_back(pool_.address(b));
  if (s.ok()) {
    // Nobody else sees tp before InstallLocked: copy without the lock.
    lock.unlock();
    s = ReadChunksInto(*store, stored, blocks, StoredWhere(*store, id));
    lock.lock();
  }
  if (s.ok()) s = CheckOpenLocked();
  if (!s.ok()) {
    for (int64_t b : tp->blocks) pool_.Free(b);
    tp->blocks.clear();
    blocks_cv_.notify_all();
    done();
    return s.WithContext("table " + Quoted(name_) + ": loading trajectory " + std::to_string(id));
  }
  InstallLocked(tp, stored, /*loaded=*/true);
  done();
  return Status::OK();
}

Status TableImpl::LoadIds(std::span<const uint64_t> ids) {
  for (uint64_t id : ids) REPLAYDB_RETURN_IF_ERROR(LoadOne(id, /*evict=*/true));
  return Status::OK();
}

Status TableImpl::Load(std::span<const uint64_t> trajectory_ids) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    for (uint64_t id : trajectory_ids) {
      if (store_.Find(id) == nullptr && cold_.count(id) == 0) {
        return Status::NotFound("table " + Quoted(name_) + ": trajectory " + std::to_string(id) +
                                " is neither in the hot nor in the cold tier; nothing loaded");
      }
    }
  }
  return LoadIds(trajectory_ids);
}

Status TableImpl::LoadRange(uint64_t first, uint64_t last) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    for (auto it = cold_.lower_bound(first); it != cold_.end() && it->first <= last; ++it) {
      ids.push_back(it->first);
    }
  }
  return LoadIds(ids);
}

Status TableImpl::ColdTrajectories(uint64_t from, size_t limit,
                                   std::vector<uint64_t>* ids) const {
  std::lock_guard<std::mutex> lock(mu_);
  ids->clear();
  for (auto it = cold_.lower_bound(from); it != cold_.end(); ++it) {
    if (limit != 0 && ids->size() >= limit) break;
    ids->push_back(it->first);
  }
  return Status::OK();
}

Status TableImpl::LoadBeforeApply(std::vector<uint64_t> ids) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(ids, [&](uint64_t id) { return cold_.count(id) == 0; });
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return LoadIds(ids);
}

}  // namespace replaydb::engine
