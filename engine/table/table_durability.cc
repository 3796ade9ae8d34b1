// TableImpl's durability: logging changes to the WAL, replaying them,
// checkpoints into the cold store and restoring from them. The design is in
// docs/durability.md.
#include <flatbuffers/flatbuffers.h>
#include <time.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/cold/cold_generated.h"
#include "engine/table/table_impl.h"
#include "kernels/runtime/device_memory.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

namespace {

// The item clock ticks at most this often: an ItemClock record a
// millisecond at most per FIFO, LIFO or heap table, and insertion orders that
// compare across shards to within as much.
constexpr uint64_t kItemClockTickNs = 1'000'000;

uint64_t RealtimeNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

WriteAck ResolveAck(const TableSpec& spec, const WriterOptions& options) {
  const Acks acks = options.acks.mode == AckMode::kTable ? spec.acks : options.acks;
  WriteAck ack;
  ack.sync = options.sync || acks.mode == AckMode::kLeaderDurable;
  ack.replicas = acks.mode == AckMode::kReplicated ? acks.replicas : 0;
  if (acks.mode != AckMode::kNone) ack.max_lag = std::chrono::milliseconds(spec.max_lag_ms);
  ack.timeout = options.timeout;
  return ack;
}

void TableImpl::SetLog(std::shared_ptr<wal::LogWriter> log, uint32_t id,
                       std::shared_ptr<wal::ReplicaSet> replicas) {
  std::lock_guard<std::mutex> lock(mu_);
  if (replicas != nullptr && replica_set_ == nullptr) {
    replica_set_ = std::move(replicas);
    replicas_.store(replica_set_.get(), std::memory_order_release);
  }
  // TableLogging: kDefault logs unless the hot tier is in device memory.
  const bool logged = spec_.logging == TableLogging::kOn ||
                      (spec_.logging == TableLogging::kDefault &&
                       pool_.memory() != BlockMemory::kDevice);
  if (!logged) log.reset();
  log_sync_.store(log != nullptr ? static_cast<int>(log->sync_mode()) : -1);
  log_ = std::move(log);
  table_id_ = id;
}

Status TableImpl::SyncLog(uint64_t seq, bool wait) {
  if (seq == 0) return Status::OK();
  // Nothing to wait for: the record is in the OS since its append returned
  // (this keeps the per-step path free of a second table lock).
  const int mode = log_sync_.load(std::memory_order_relaxed);
  if (mode == static_cast<int>(WalSyncMode::kNone) ||
      (mode == static_cast<int>(WalSyncMode::kBatch) && !wait)) {
    return Status::OK();
  }
  std::shared_ptr<wal::LogWriter> log;
  {
    std::lock_guard<std::mutex> lock(mu_);
    log = log_;
  }
  if (log == nullptr) return Status::OK();
  return log->Sync(seq, wait).WithContext("table " + Quoted(name_));
}

Status TableImpl::CheckReplicas(int k) const {
  wal::ReplicaSet* set = replicas_.load(std::memory_order_acquire);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (set == nullptr || log_ == nullptr) {
      return Status::FailedPrecondition(
          "table " + Quoted(name_) + ": acks replicated(" + std::to_string(k) +
          ") needs the table's changes in the write-ahead log, which replicas read; this "
          "table logs nothing (TableSpec::logging, DBOptions::wal.enabled)");
    }
  }
  return set->CheckInSync(k, name_);
}

Status TableImpl::AckLog(uint64_t seq, const WriteAck& ack) {
  REPLAYDB_RETURN_IF_ERROR(SyncLog(seq, ack.sync));
  wal::ReplicaSet* set = replicas_.load(std::memory_order_acquire);
  if (seq == 0 || set == nullptr) return Status::OK();
  const bool throttle = ack.max_lag.count() > 0 && set->Lagging(ack.max_lag);
  if (ack.replicas == 0 && !throttle) return Status::OK();
  wal::LogPosition end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (log_ == nullptr) return Status::OK();
    end = log_->end();  // at or past record `seq`'s end
  }
  const Deadline until = DeadlineAfter(ack.timeout);
  if (throttle) REPLAYDB_RETURN_IF_ERROR(set->WaitCaughtUp(ack.max_lag, until, name_));
  if (ack.replicas > 0) {
    REPLAYDB_RETURN_IF_ERROR(set->WaitReplicated(end, ack.replicas, until, name_));
  }
  return Status::OK();
}

Result<uint64_t> TableImpl::LogLocked(wal::RecordType type) {
  const std::span<const std::byte> payload = record_.payload();
  return LogLocked(type, std::span<const std::span<const std::byte>>(&payload, 1));
}

namespace {
thread_local bool no_table_log = false;
}  // namespace

ScopedNoTableLog::ScopedNoTableLog() : previous_(no_table_log) { no_table_log = true; }
ScopedNoTableLog::~ScopedNoTableLog() { no_table_log = previous_; }
bool ScopedNoTableLog::active() { return no_table_log; }

Result<uint64_t> TableImpl::LogLocked(wal::RecordType type,
                                      std::span<const std::span<const std::byte>> pieces) {
  if (log_ == nullptr || no_table_log) return uint64_t{0};
  Result<uint64_t> seq = log_->AppendV(type, pieces);
  if (!seq.ok()) return seq.status().WithContext("table " + Quoted(name_));
  return seq;
}

Status TableImpl::LogPrioritiesLocked(std::unique_lock<std::mutex>& lock,
                                      std::span<const uint64_t> keys,
                                      std::span<const double> priorities) {
  if (keys.empty()) return Status::OK();
  record_.UpdatePriorities(table_id_, keys, priorities);
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t seq, LogLocked(wal::RecordType::kUpdatePriorities));
  lock.unlock();
  return SyncLog(seq, /*wait=*/false);
}

Status TableImpl::TickItemClockLocked() {
  if (!ordered_ || ScopedNoTableLog::active()) return Status::OK();
  const uint64_t now = RealtimeNs();
  if (now < item_clock_ns_ + kItemClockTickNs) return Status::OK();
  if (log_ != nullptr) {
    record_.ItemClock({table_id_, now});
    REPLAYDB_RETURN_IF_ERROR(LogLocked(wal::RecordType::kItemClock).status());
  }
  item_clock_ns_ = now;
  next_item_seq_ = std::max(next_item_seq_, now);
  return Status::OK();
}

Result<uint64_t> TableImpl::LogStepsLocked(uint64_t writer_key, const Trajectory& t, HostRows rows,
                                           int64_t index, int64_t count, const double* priorities) {
  REPLAYDB_RETURN_IF_ERROR(TickItemClockLocked());
  if (log_ == nullptr) return uint64_t{0};
  const size_t n = static_cast<size_t>(count);
  log_ids_.assign(n, t.id);
  log_steps_.resize(n);
  for (size_t i = 0; i < n; ++i) log_steps_[i] = t.length + static_cast<int64_t>(i);
  log_priorities_.clear();
  if (priorities != nullptr) log_priorities_.assign(priorities, priorities + n);
  std::byte* data = record_.AppendSteps(table_id_, static_cast<uint32_t>(layout_.step_bytes),
                                        log_ids_, log_steps_, log_priorities_, writer_key);
  if (rows.row_bytes != 0 && rows.row_bytes == layout_.step_bytes) {
    // Rows laid out as the record's: the log writes them from where they
    // lie, between the payload's bytes before and after its data, which
    // stays unfilled here.
    const std::span<const std::byte> payload = record_.payload();
    const size_t before = static_cast<size_t>(data - payload.data());
    const size_t bytes = n * layout_.step_bytes;
    const std::span<const std::byte> pieces[3] = {
        payload.first(before),
        {static_cast<const std::byte*>(rows.Row(0, static_cast<size_t>(index), 0)), bytes},
        payload.subspan(before + bytes)};
    return LogLocked(wal::RecordType::kAppendSteps, pieces);
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(index) + i;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::memcpy(data, rows.Row(c, row, cb), cb);
      data += cb;
    }
  }
  return LogLocked(wal::RecordType::kAppendSteps);
}

Result<uint64_t> TableImpl::LogStepsRecordLocked(const Trajectory& t,
                                                 std::span<std::byte> record) {
  REPLAYDB_RETURN_IF_ERROR(TickItemClockLocked());
  if (log_ == nullptr) return uint64_t{0};
  REPLAYDB_RETURN_IF_ERROR(wal::FillAppendSteps(record, t.id, t.length)
                               .WithContext("table " + Quoted(name_) + ": a remote append"));
  Result<uint64_t> seq = log_->Append(wal::RecordType::kAppendSteps, record);
  if (!seq.ok()) return seq.status().WithContext("table " + Quoted(name_));
  return seq;
}

Result<uint64_t> TableImpl::LogVectorStepsLocked(std::span<WriterSlot> slots,
                                                 std::span<const int64_t> dest,
                                                 const VectorSteps& steps,
                                                 std::span<const double> priorities,
                                                 std::span<std::byte> record) {
  REPLAYDB_RETURN_IF_ERROR(TickItemClockLocked());
  if (log_ == nullptr) return uint64_t{0};
  const size_t n = slots.size();
  std::vector<uint64_t> ids;
  std::vector<int64_t> step_index;
  std::vector<double> prios;
  std::vector<size_t> envs;
  // (A remote vector writer's keys: noted on the trajectories, and in the
  // record written here when the writer's own is not of use.)
  std::vector<uint64_t> keys;
  for (size_t env = 0; env < n; ++env) {
    if (dest[env] < 0) continue;
    envs.push_back(env);
    Trajectory& t = *slots[env].trajectory;
    ids.push_back(t.id);
    step_index.push_back(t.length);
    if (!priorities.empty()) prios.push_back(priorities[env]);
    if (slots[env].writer_key != 0) {
      store_.SetWriterKey(t, slots[env].writer_key);
      keys.resize(envs.size(), 0);
      keys.back() = slots[env].writer_key;
    }
  }
  if (!keys.empty()) keys.resize(envs.size(), 0);
  if (envs.empty()) return uint64_t{0};
  if (!record.empty() && envs.size() == n) {
    REPLAYDB_RETURN_IF_ERROR(wal::FillAppendSteps(record, ids, step_index)
                                 .WithContext("table " + Quoted(name_) + ": a remote vector step"));
    Result<uint64_t> seq = log_->Append(wal::RecordType::kAppendSteps, record);
    if (!seq.ok()) return seq.status().WithContext("table " + Quoted(name_));
    return seq;
  }
  std::vector<const std::byte*> host(steps.columns.begin(), steps.columns.end());
  if (steps.device) {
    // One copy per column of the whole device array, ordered after the
    // caller's stream, into pinned staging memory (several times the rate
    // of a copy to pageable memory), then a host-side transpose into the
    // record.
    const size_t total = static_cast<size_t>(layout_.step_bytes) * n;
    if (log_staging_.size() < total) {
      Result<PinnedBuffer> grown =
          PinnedBuffer::Allocate(std::max(total, 2 * log_staging_.size()));
      if (!grown.ok()) {
        return grown.status().WithContext("staging a device vector step for the log");
      }
      log_staging_ = std::move(grown).value();
    }
    size_t offset = 0;
    for (size_t c = 0; c < columns_.size(); ++c) {
      std::byte* dst = log_staging_.as<std::byte>() + offset;
      const size_t bytes = layout_.column_bytes[c] * n;
      REPLAYDB_RETURN_IF_ERROR(CopyDeviceToHost(dst, steps.columns[c], bytes, steps.stream));
      host[c] = dst;
      offset += bytes;
    }
  }
  std::byte* data = record_.AppendSteps(table_id_, static_cast<uint32_t>(layout_.step_bytes), ids,
                                        step_index, prios, 0, keys);
  for (size_t env : envs) {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::memcpy(data, host[c] + env * (steps.row_bytes != 0 ? steps.row_bytes : cb), cb);
      data += cb;
    }
  }
  return LogLocked(wal::RecordType::kAppendSteps);
}

Status TableImpl::ReadSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                            std::string* out) const {
  out->resize(static_cast<size_t>(to - from) * layout_.step_bytes);
  return ReadSteps(blocks, from, to, reinterpret_cast<std::byte*>(out->data()));
}

Status TableImpl::BuildStepChunk(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                                 flatbuffers::FlatBufferBuilder* fbb) const {
  fbb->Clear();
  const size_t bytes = static_cast<size_t>(to - from) * layout_.step_bytes;
  uint8_t* data = nullptr;
  const auto vector = fbb->CreateUninitializedVector(bytes, &data);
  REPLAYDB_RETURN_IF_ERROR(ReadSteps(blocks, from, to, reinterpret_cast<std::byte*>(data)));
  fbb->Finish(fb::CreateStepChunk(*fbb, from, to - from,
                                  static_cast<uint32_t>(layout_.step_bytes), vector));
  return Status::OK();
}

Status TableImpl::ReadSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                            std::byte* out) const {
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
      const std::byte* src = blocks[b] + layout_.column_offset[c] + first * cb;
      if (!pool_.host_accessible()) {
        scratch.resize(count * cb);
        REPLAYDB_RETURN_IF_ERROR(
            kernels::CopyFromDevice(spec_.placement.device, scratch.data(), src, count * cb));
        src = scratch.data();
      }
      std::byte* dst = out + static_cast<size_t>(s - from) * step_bytes + step_offset;
      for (size_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * step_bytes, src + i * cb, cb);
      }
      step_offset += cb;
    }
    s = s_end;
  }
  return Status::OK();
}

Status TableImpl::CollectCheckpoint(ColdStore::Batch* batch) {
  struct Copy {
    std::shared_ptr<Trajectory> t;
    int64_t from, to;
    std::vector<std::byte*> blocks;
  };
  std::vector<Copy> copies;
  flatbuffers::FlatBufferBuilder fbb(1024);
  uint32_t table_id = 0;  // table_id_ as read under mu_, for the copies below
  // Priorities set on the GPU: collected below, one collection at a time.
  std::lock_guard<std::mutex> device_log_lock(device_log_mu_);
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Spills queued before this point hold the only copy of their steps
    // outside the log segments this checkpoint deletes: let them land first
    // (the flush below makes them durable). Later ones wait for CheckpointDone,
    // so that none overwrites a chunk this checkpoint writes.
    const Status spilled = AwaitColdIdleLocked(lock, /*loads=*/false);
    if (closed_) return Status::OK();
    // Failing spills (a full disk): the log they need must stay.
    REPLAYDB_RETURN_IF_ERROR(spilled);
    // Priorities set on the GPU before this point go into the items written
    // below, and into the log ahead of any later record.
    REPLAYDB_RETURN_IF_ERROR(CollectDevicePrioritiesLocked());
    checkpointing_ = true;
    table_id = table_id_;
    ticket_ = {};
    // Published steps may still be queued on the GPU's write stream.
    if (tier_) REPLAYDB_RETURN_IF_ERROR(tier_->AwaitScatters().WithContext("table " + Quoted(name_)));
    const RateLimiter::Counters c = limiter_.counters();
    fbb.Finish(fb::CreateTableState(
        fbb, store_.next_id(), next_item_seq_, max_priority_seen_, steps_inserted_,
        items_inserted_, items_sampled_, items_removed_, evicted_trajectories_, evicted_items_,
        priority_updates_, priority_updates_skipped_, c.inserts, c.samples, c.deletes,
        spilled_trajectories_, spilled_bytes_, loaded_trajectories_, rotations_));
    batch->PutTableState(table_id_, std::string_view(reinterpret_cast<const char*>(
                                                         fbb.GetBufferPointer()),
                                                     fbb.GetSize()));
    for (const auto& [id, tp] : store_.trajectories()) {
      Trajectory& t = *tp;
      if (t.length == 0) continue;
      const bool new_steps = t.length > t.persisted_steps;
      if (!t.dirty && !new_steps) continue;
      BuildMetaLocked(t, /*cold=*/false, &fbb);
      batch->PutTrajectory(table_id_, t.id,
                           std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                                            fbb.GetSize()));
      if (t.dirty) {
        t.dirty = false;
        ticket_.cleaned.push_back(tp);
      }
      t.in_cold = true;
      if (new_steps) {
        Copy copy{tp, t.persisted_steps, t.length, {}};
        for (int64_t b : t.blocks) copy.blocks.push_back(pool_.address(b));
        ++t.pins;
        copies.push_back(std::move(copy));
      }
    }
    for (uint64_t id : removed_since_checkpoint_) batch->DeleteTrajectory(table_id_, id);
    ticket_.removed.swap(removed_since_checkpoint_);
  }
  // Published steps never change, and the pins keep their blocks.
  Status s;
  for (const Copy& copy : copies) {
    if (!s.ok()) break;
    s = BuildStepChunk(copy.blocks, copy.from, copy.to, &fbb);
    if (!s.ok()) break;
    batch->PutSteps(table_id, copy.t->id, copy.from,
                    std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()),
                                     fbb.GetSize()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (Copy& copy : copies) {
    if (s.ok()) ticket_.persisted.emplace_back(copy.t, copy.to);
    UnpinLocked(*copy.t);
  }
  return s.WithContext("table " + Quoted(name_) + ": checkpoint");
}

void TableImpl::CheckpointDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  checkpointing_ = false;
  cold_cv_.notify_all();
  if (ok) {
    for (auto& [t, steps] : ticket_.persisted) {
      t->persisted_steps = std::max(t->persisted_steps, steps);
    }
  } else {
    for (auto& t : ticket_.cleaned) t->dirty = true;
    removed_since_checkpoint_.insert(removed_since_checkpoint_.end(), ticket_.removed.begin(),
                                     ticket_.removed.end());
  }
  ticket_ = {};
}

Status TableImpl::Restore(ColdStore& store, bool reset_limiter) {
  const std::string where = "table " + Quoted(name_) + " (id " + std::to_string(table_id_) + ")";
  std::string value, aligned;
  Status s = store.GetTableState(table_id_, &value);
  if (s.code() == Status::Code::kNotFound) return Status::OK();  // never checkpointed
  REPLAYDB_RETURN_IF_ERROR(s);
  const fb::TableState* state = VerifiedValue<fb::TableState>(value, &aligned);
  if (state == nullptr) {
    return Status::Corruption("cold store " + store.dir() + ": " + where +
                              ": state fails verification");
  }
  std::unique_lock<std::mutex> lock(mu_);
  store_.set_next_id(state->next_trajectory_id());
  next_item_seq_ = state->next_item_seq();
  max_priority_seen_ = state->max_priority_seen();
  steps_inserted_ = state->steps_inserted();
  items_inserted_ = state->items_inserted();
  items_sampled_ = state->items_sampled();
  items_removed_ = state->items_removed();
  evicted_trajectories_ = state->evicted_trajectories();
  evicted_items_ = state->evicted_items();
  priority_updates_ = state->priority_updates();
  priority_updates_skipped_ = state->priority_updates_skipped();
  const RateLimiter::Counters counters{state->limiter_inserts(), state->limiter_samples(),
                                       state->limiter_deletes()};

  spilled_trajectories_ = state->spilled_trajectories();
  spilled_bytes_ = state->spilled_bytes();
  loaded_trajectories_ = state->loaded_trajectories();
  rotations_ = state->rotations();
  Status restored = store.ForEachTrajectory(
      table_id_, [&](uint64_t id, std::string_view bytes) -> Status {
        const std::string traj =
            "cold store " + store.dir() + ": " + where + " trajectory " + std::to_string(id);
        StoredTrajectory stored;
        REPLAYDB_RETURN_IF_ERROR(ParseMeta(bytes, id, traj, &stored));
        if (stored.length == 0) return Status::OK();
        store_.NoteId(id);
        // Spilled ones stay cold, and so does what no longer fits.
        const bool fits = pool_.capacity_blocks() - pool_.in_use() >= BlocksFor(stored.length);
        if (stored.cold || !fits) {
          cold_[id] = ColdEntryOf(stored);
          cold_steps_ += stored.length;
          return Status::OK();
        }
        std::shared_ptr<Trajectory> tp = store_.Make(id);
        REPLAYDB_RETURN_IF_ERROR(
            AddBlocksLocked(lock, *tp, stored.length, /*evict=*/false).WithContext(traj));
        std::vector<std::byte*> blocks;
        for (int64_t b : tp->blocks) blocks.push_back(pool_.address(b));
        Status s = ReadChunksInto(store, stored, blocks, traj);
        if (!s.ok()) {
          for (int64_t b : tp->blocks) pool_.Free(b);
          return s.WithContext(traj);
        }
        InstallLocked(tp, stored, /*loaded=*/false);
        return Status::OK();
      });
  REPLAYDB_RETURN_IF_ERROR(restored);
  limiter_.Restore(counters);
  // Trajectories that no longer fit stayed cold: their items count as
  // deleted. (Read-only opens replay nothing; DB::Open settles again after
  // its replay, SettleRateLimiter.)
  limiter_.SettleAfterRecovery(num_items_, reset_limiter);
  return Status::OK();
}

void TableImpl::SettleRateLimiter(bool reset_limiter) {
  std::lock_guard<std::mutex> lock(mu_);
  limiter_.SettleAfterRecovery(num_items_, reset_limiter);
}

}  // namespace replaydb::engine
