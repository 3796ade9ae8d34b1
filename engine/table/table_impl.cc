#include "engine/table/table_impl.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/gpu/device_sampler.h"
#include "index/selectors/uniform_selector.h"
#include "engine/table/vector_table.h"
#include "engine/table/writers.h"
#include "util/format.h"

namespace replaydb {

Result<SampleBatch> Table::Sample(int64_t batch_size, const SampleOptions& options) {
  SampleBatch batch;
  REPLAYDB_RETURN_IF_ERROR(Sample(batch_size, options, &batch));
  return batch;
}

namespace engine {
namespace {

// Largest batch one Sample call accepts.
constexpr int64_t kMaxBatchSize = int64_t{1} << 24;

// Steps up to this size are copied while the table's mutex is held (cheaper
// than a second lock round trip); larger ones outside it.
constexpr size_t kCopyUnderLockBytes = 1024;

}  // namespace

Result<std::shared_ptr<TableImpl>> TableImpl::Create(const TableSpec& spec,
                                                     PersistSpecFn persist) {
  const auto where = [&] { return "table " + Quoted(spec.name); };
  // Which GPU, if any, the table uses, and where its blocks go.
  std::string why_none;
  const int gpus = CudaDeviceCount(&why_none);
  const Placement& p = spec.placement;
  BlockMemory memory = BlockMemory::kHost;
  int device = spec.priority_device;
  if (p.kind == Placement::Kind::kDevice) {
    if (p.device >= gpus) {
      return Status::NotSupported(
          where() + ": placement " + p.ToString() + " needs CUDA device " +
          std::to_string(p.device) + ", but " +
          (gpus == 0 ? "no GPU can be used (" + why_none + ")"
                     : "only " + std::to_string(gpus) + " can be used"));
    }
    memory = BlockMemory::kDevice;
    device = p.device;
  } else if (gpus > 0) {
    // kHost: pinned host memory; kAuto: the priorities' device, else GPU 0.
    if (device < 0) device = 0;
    memory = p.kind == Placement::Kind::kAuto ? BlockMemory::kDevice : BlockMemory::kPinned;
  }
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DrawStrategy> draws,
                            DrawStrategy::Create(spec, gpus, why_none));
  std::unique_ptr<DeviceTier> tier;
  if (gpus > 0 && device >= 0) {
    DeviceTier::Options options;
    options.device = device;
    options.layout = TableLayout::For(spec);
    options.sequence_length = spec.sequence_length;
    options.lanes = spec.lanes;
    draws->ConfigureTier(&options);
    auto created = DeviceTier::Create(options);
    if (!created.ok()) return created.status().WithContext(where());
    tier = std::move(created).value();
  }
  draws->AttachTier(tier.get());
  if (spec.lanes > 1) {
    return std::shared_ptr<TableImpl>(std::make_shared<VectorTableImpl>(
        spec, std::move(persist), std::move(draws), memory, std::move(tier)));
  }
  return std::make_shared<TableImpl>(spec, std::move(persist), std::move(draws), memory,
                                     std::move(tier));
}

TableImpl::TableImpl(const TableSpec& spec, PersistSpecFn persist,
                     std::unique_ptr<DrawStrategy> draws, BlockMemory memory,
                     std::unique_ptr<DeviceTier> tier)
    : name_(spec.name),
      columns_(StoredColumns(spec)),
      item_columns_(spec.columns),
      layout_(TableLayout::For(spec)),
      sequence_length_(spec.sequence_length),
      padding_(spec.padding),
      max_times_sampled_(static_cast<uint32_t>(spec.max_times_sampled)),
      step_priority_(spec.step_priority),
      prioritized_(spec.selector == SelectorKind::kPrioritized),
      spill_(spec.spill),
      rotation_fraction_(spec.rotation_fraction),
      rotation_every_samples_(spec.rotation_every_samples),
      persist_(std::move(persist)),
      spec_(spec),
      pool_(layout_.block_bytes, layout_.num_blocks, memory, tier ? tier->device() : 0),
      tier_(std::move(tier)),
      limiter_(spec.rate_limiter, spec.name, spec.lanes),
      draws_(std::move(draws)),
      selector_(draws_->selector()),
      rng_(Random::FromEntropy()),
      store_({layout_.block_steps, static_cast<uint32_t>(spec.max_times_sampled), spec.eviction}) {}

TableImpl::~TableImpl() { CloseWithReason("closed"); }

TableSpec TableImpl::spec() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spec_;
}

void TableImpl::CloseWithReason(const std::string& reason) {
  {
    std::lock_guard<std::mutex> spec_lock(spec_mu_);
    persist_ = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      closed_ = true;
      closed_reason_ = reason;
      limiter_.Cancel();
      blocks_cv_.notify_all();
    }
    cold_stop_ = true;
    cold_cv_.notify_all();
  }
  // The cold thread finishes the spill it is writing, if any; queued ones
  // stay in the log (a logged table) or are lost with the closed table.
  if (cold_thread_.joinable() && cold_thread_.get_id() != std::this_thread::get_id()) {
    cold_thread_.join();
  }
  // A handle that outlives its database must not keep the store (and its
  // lock) open; loads in progress hold their own reference.
  std::lock_guard<std::mutex> lock(mu_);
  cold_store_.reset();
}

Status TableImpl::CheckWritable(std::string_view what) const {
  if (!read_only_.load(std::memory_order_relaxed)) return Status::OK();
  return Status::FailedPrecondition("table " + Quoted(name_) + ": " + std::string(what) +
                                    " needs a read-write database; this one was opened read-only "
                                    "(DB::OpenReadOnly)");
}

Status TableImpl::CheckOpenLocked() const {
  if (closed_) return Status::FailedPrecondition("table " + Quoted(name_) + " is " + closed_reason_);
  return Status::OK();
}

Status TableImpl::EvictedError(const Trajectory& t) const {
  return Status::FailedPrecondition(
      "table " + Quoted(name_) + ": trajectory " + std::to_string(t.id) +
      " was evicted from the hot tier while open (it had " + std::to_string(t.length) +
      " steps; the tier holds " + std::to_string(layout_.num_blocks * layout_.block_steps) +
      " steps); the writer's next step starts a new trajectory");
}

Status TableImpl::CheckNewWriter() const {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("NewWriter"));
  std::lock_guard<std::mutex> lock(mu_);
  return CheckOpenLocked();
}

Result<std::unique_ptr<TrajectoryWriter>> TableImpl::NewWriter(const WriterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckNewWriter());
  return std::unique_ptr<TrajectoryWriter>(
      std::make_unique<TrajectoryWriterImpl>(shared_from_this(), options));
}

Status TableImpl::CheckNewVectorWriter(size_t num_envs, const WriterOptions& options) const {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("NewVectorWriter"));
  if (num_envs == 0) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": a vector writer needs num_envs >= 1");
  }
  if (options.threads < 0 || options.threads > kMaxWriterThreads) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": WriterOptions::threads " +
                                   std::to_string(options.threads) + " is outside [0, " +
                                   std::to_string(kMaxWriterThreads) + "] (0: automatic)");
  }
  std::lock_guard<std::mutex> lock(mu_);
  return CheckOpenLocked();
}

Result<std::unique_ptr<VectorWriter>> TableImpl::NewVectorWriter(size_t num_envs,
                                                                 const WriterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckNewVectorWriter(num_envs, options));
  return std::unique_ptr<VectorWriter>(
      std::make_unique<VectorWriterImpl>(shared_from_this(), num_envs, options));
}

Status TableImpl::ValidateTensors(std::span<const ConstTensor> tensors, int64_t leading,
                                  std::string_view what) const {
  // The checks run on every append: messages are built only on failure.
  const auto prefix = [&] { return "table " + Quoted(name_) + ": " + std::string(what); };
  if (tensors.size() != columns_.size()) {
    std::string names;
    for (const ColumnSpec& c : columns_) names += (names.empty() ? "" : ", ") + c.name;
    return Status::InvalidArgument(prefix() + " has " + std::to_string(tensors.size()) +
                                   " tensors; the table has " + std::to_string(columns_.size()) +
                                   " columns (" + names + ")");
  }
  for (size_t c = 0; c < columns_.size(); ++c) {
    const ColumnSpec& col = columns_[c];
    const ConstTensor& t = tensors[c];
    const auto where = [&] { return prefix() + ", column " + Quoted(col.name); };
    if (t.dtype != col.dtype) {
      return Status::InvalidArgument(where() + " expects dtype " +
                                     std::string(DTypeName(col.dtype)) + ", got " +
                                     std::string(DTypeName(t.dtype)));
    }
    const Shape expected = leading < 0 ? col.shape : col.shape.Prepend(leading);
    if (!(t.shape == expected)) {
      return Status::InvalidArgument(where() + " expects shape " + expected.ToString() +
                                     ", got " + t.shape.ToString());
    }
    const size_t bytes = layout_.column_bytes[c] * static_cast<size_t>(leading < 0 ? 1 : leading);
    if (t.size_bytes != bytes) {
      return Status::InvalidArgument(where() + " has size_bytes " + std::to_string(t.size_bytes) +
                                     " but dtype " + std::string(DTypeName(col.dtype)) +
                                     " and shape " + expected.ToString() + " need " +
                                     std::to_string(bytes));
    }
    if (t.data == nullptr && bytes > 0) {
      return Status::InvalidArgument(where() + " has a null data pointer");
    }
  }
  return Status::OK();
}

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

Status TableImpl::ValidatePriority(double priority, std::string_view what) const {
  if (std::isfinite(priority) && priority >= 0) return Status::OK();
  return Status::InvalidArgument("table " + Quoted(name_) + ": " + std::string(what) + " priority " +
                                 std::to_string(priority) + " is invalid; priorities must be " +
                                 "finite and >= 0");
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

Status TableImpl::AppendStep(WriterSlot& slot, const std::byte* const* column_base, int64_t index,
                             const double* priority, Deadline deadline, uint64_t* log_seq) {
  assert(pool_.host_accessible() && "device tables take AppendStepsToDevice");
  std::unique_lock<std::mutex> lock(mu_);
  StepReservation r;
  REPLAYDB_RETURN_IF_ERROR(ReserveStepLocked(lock, slot, deadline, &r));
  Trajectory& t = *slot.trajectory;
  std::byte* block = pool_.address(r.block);
  const auto copy_step = [&] {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t cb = layout_.column_bytes[c];
      std::memcpy(block + layout_.column_offset[c] + static_cast<size_t>(r.step_in_block) * cb,
                  column_base[c] + static_cast<size_t>(index) * cb, cb);
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
  Result<uint64_t> logged = LogStepsLocked(t, column_base, index, 1, priority);
  if (!logged.ok()) {
    AbandonStepLocked(slot, r);
    return logged.status();
  }
  if (log_seq != nullptr) *log_seq = *logged;
  if (PublishStepLocked(t, r, priority)) limiter_.CommitInserts(1);
  return Status::OK();
}

Status TableImpl::AppendStepsToDevice(WriterSlot& slot, const std::byte* const* column_base,
                                      int64_t n, const double* priorities, Deadline deadline,
                                      StagedRows* staged, uint64_t* log_seq, int64_t* appended) {
  *appended = 0;
  const int64_t bs = layout_.block_steps;
  const int64_t per_stage =
      static_cast<int64_t>(StagedRows::RowsPerStage(static_cast<size_t>(layout_.step_bytes)));
  std::vector<StepReservation> run;  // the run's reservations, in step order
  std::vector<int64_t> slots;        // and their hot-tier slots
  for (int64_t first = 0; first < n; first += per_stage) {
    const int64_t count = std::min(per_stage, n - first);
    // Outside the mutex: only the writer uses `staged`, and the layout
    // never changes.
    REPLAYDB_RETURN_IF_ERROR(
        staged->Prepare(tier_->device(), columns_, layout_, static_cast<size_t>(count))
            .WithContext("table " + Quoted(name_)));
    staged->CopyRows(column_base, static_cast<size_t>(first), static_cast<size_t>(count), nullptr);
    std::unique_lock<std::mutex> lock(mu_);
    for (int64_t begin = 0; begin < count;) {
      const int64_t at = first + begin;  // the run's first step among the n
      // The run's first step: the whole reservation, which may wait, start
      // the trajectory, or evict (nothing of this call is unscattered now).
      run.assign(1, StepReservation{});
      REPLAYDB_RETURN_IF_ERROR(ReserveStepLocked(lock, slot, deadline, &run[0]));
      Trajectory& t = *slot.trajectory;
      slots.assign(1, run[0].block * bs + run[0].step_in_block);
      // The steps after it, while none would wait or evict.
      int64_t end = begin + 1;
      for (; end < count; ++end) {
        const int64_t step = t.length + (end - begin);
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
        run.push_back(r);
        slots.push_back(r.block * bs + r.step_in_block);
      }
      const int64_t steps = end - begin;
      const double* run_priorities = priorities == nullptr ? nullptr : priorities + at;
      // Undoes the run's reservations after a failed scatter or log record
      // (blocks taken for it stay with the trajectory, for its next steps).
      const auto abandon = [&] {
        for (size_t i = 1; i < run.size(); ++i) {
          if (run[i].completes_item) limiter_.ReleaseInserts(1);
        }
        AbandonStepLocked(slot, run[0]);
      };
      Status scattered = staged->Scatter(*tier_, slots, static_cast<size_t>(begin));
      if (!scattered.ok()) {
        abandon();
        return scattered.WithContext("table " + Quoted(name_));
      }
      // Logged before they are published: steps the log refused never appear.
      Result<uint64_t> logged = LogStepsLocked(t, column_base, at, steps, run_priorities);
      if (!logged.ok()) {
        abandon();
        return logged.status();
      }
      if (log_seq != nullptr && *logged != 0) *log_seq = *logged;
      int64_t items = 0;
      for (int64_t i = 0; i < steps; ++i) {
        const double* priority = run_priorities == nullptr ? nullptr : run_priorities + i;
        if (PublishStepLocked(t, run[static_cast<size_t>(i)], priority)) ++items;
      }
      if (items > 0) limiter_.CommitInserts(items);
      *appended += steps;
      begin = end;
    }
  }
  return Status::OK();
}

namespace {

// A vector step whose rows add up to more than this is copied outside the
// table's mutex (its trajectories pinned); below it, under the mutex.
constexpr size_t kVectorCopyUnderLockBytes = 64 << 10;

// How many environments ahead a vector append asks for the memory it will
// touch: the environments' state is scattered over many cache lines, and
// fetching several at once hides most of the latency.
constexpr size_t kPrefetchAhead = 16;

void Prefetch(const void* p) { __builtin_prefetch(p, 1, 3); }

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
  if (t != nullptr) Prefetch(t);
}

// (*out)[c]: `count` rows of column c at column(c), shaped [count, ...], for
// a scatter.
template <typename ColumnData>
void RowTensors(std::span<const ColumnSpec> columns, const TableLayout& layout, size_t count,
                const ColumnData& column, std::vector<ConstTensor>* out) {
  out->resize(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    (*out)[c] = ConstTensor{columns[c].dtype, columns[c].shape.Prepend(static_cast<int64_t>(count)),
                            column(c), layout.column_bytes[c] * count};
  }
}

}  // namespace

Status TableImpl::AppendVectorStep(std::span<WriterSlot> slots, const VectorSteps& steps,
                                   std::span<const double> priorities, Deadline deadline,
                                   VectorScratch* scratch, uint64_t* log_seq) {
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
    // With several parts and the whole vector admitted, the common case of
    // every environment is done by all parts at once first; the loop below
    // then reserves the others (kReserveLater) in order.
    bool shared = false;
    if (scratch->fork_join != nullptr && begin == 0 && credit == static_cast<int64_t>(n)) {
      size_t later = 0;
      credit -= SharedFastReserveLocked(slots, scratch, &later);
      shared = true;
      holds = later < n;
      if (later == 0) env = n;
    }
    for (; env < n; ++env) {
      if (shared && scratch->dest[env] != kReserveLater) continue;
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
    // one's trajectory (here or, while the lock was released, elsewhere):
    // that one loses its step (its block is someone else's now).
    for (env = evicted_trajectories_ != evicted_before ? begin : end; env < end; ++env) {
      if (scratch->dest[env] < 0) continue;
      WriterSlot& slot = slots[env];
      if (!slot.trajectory->evicted) continue;
      note(env, EvictedError(*slot.trajectory));
      DropVectorStepLocked(slot, scratch->reserved[env], &scratch->dest[env], scratch);
    }
    REPLAYDB_RETURN_IF_ERROR(FinishVectorChunkLocked(lock, slots, begin, end, steps, priorities,
                                                     scratch, log_seq, &first_error));
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
  ForkJoin* fj = scratch->fork_join.get();
  scratch->parts.resize(static_cast<size_t>(fj->parts()));
  const int64_t bs = layout_.block_steps;
  ForkJoin::ForEachShare(fj, slots.size(), [&](int part, size_t begin, size_t end) {
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

Status StagedRows::Prepare(int device, std::span<const ColumnSpec> schema,
                           const TableLayout& table_layout, size_t count) {
  columns = schema;
  layout = &table_layout;
  const size_t num_columns = columns.size();
  size_t bytes = 0;
  offsets.resize(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    offsets[c] = bytes;
    bytes += (layout->column_bytes[c] * count + 255) / 256 * 256;
  }
  if (stream.handle() == nullptr) {
    REPLAYDB_ASSIGN_OR_RETURN(stream, DeviceStream::Create(device));
  }
  // The last scatter has usually finished long before the next rows come.
  if (reading) {
    REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    reading = false;
  }
  if (rows.size() < bytes) {
    rows = PinnedBuffer();
    REPLAYDB_ASSIGN_OR_RETURN(rows, PinnedBuffer::Allocate(bytes));
  }
  return Status::OK();
}

void StagedRows::CopyRows(const std::byte* const* column_base, size_t first_row, size_t count,
                          ForkJoin* fork_join) {
  // Each column's rows are contiguous on both sides: one range per column,
  // its bytes split over the parts (a vector table's one row of megabytes
  // too).
  const size_t num_columns = offsets.size();
  ranges.resize(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    const size_t cb = layout->column_bytes[c];
    ranges[c] = {column(c), column_base[c] + first_row * cb, count * cb};
  }
  CopyRanges(fork_join, ranges);
}

Status StagedRows::Scatter(DeviceTier& tier, std::span<const int64_t> slots, size_t first_row) {
  RowTensors(
      columns, *layout, slots.size(),
      [&](size_t c) { return column(c) + first_row * layout->column_bytes[c]; }, &tensors);
  // Until it is done, the next Prepare waits before it overwrites `rows`.
  reading = true;
  return tier.Scatter(slots, tensors, stream.handle());
}

Status TableImpl::StageVectorRows(int device, const VectorSteps& rows, size_t first_row,
                                  size_t count, VectorScratch* scratch) const {
  StagedRows& staged = scratch->device_rows;
  REPLAYDB_RETURN_IF_ERROR(staged.Prepare(device, columns_, layout_, count));
  staged.CopyRows(rows.columns.data(), first_row, count, scratch->fork_join.get());
  return Status::OK();
}

Status TableImpl::FinishVectorChunkLocked(std::unique_lock<std::mutex>& lock,
                                          std::span<WriterSlot> slots, size_t begin, size_t end,
                                          const VectorSteps& steps,
                                          std::span<const double> priorities,
                                          VectorScratch* scratch, uint64_t* log_seq,
                                          Status* first_error) {
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
    scratch->columns[c] = steps.columns[c] + begin * layout_.column_bytes[c];
  }
  const VectorSteps rows{scratch->columns, steps.device, steps.stream};
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
        CopyRow(row_dst(i, c, block), rows.columns[c] + i * cb, cb);
      }
    };
    // Host-accessible blocks (memcpy, which cannot fail): each row into its
    // own block (block_of(i)), split over the writer's parts, if any: the
    // rows, or with fewer rows than parts (a vector table's one row per
    // call), their bytes.
    const auto copy_shared = [&](const auto& block_of) {
      ForkJoin* fj = scratch->fork_join.get();
      if (fj != nullptr && count < static_cast<size_t>(fj->parts())) {
        std::vector<CopyRange>& ranges = scratch->ranges;
        ranges.clear();
        for (size_t i = 0; i < count; ++i) {
          if (dest[i] < 0) continue;
          std::byte* block = block_of(i);
          for (size_t c = 0; c < num_columns; ++c) {
            const size_t cb = layout_.column_bytes[c];
            ranges.push_back({row_dst(i, c, block), rows.columns[c] + i * cb, cb});
          }
        }
        CopyRanges(fj, ranges);
        return;
      }
      ForkJoin::ForEachShare(fj, count, [&](int /*part*/, size_t first, size_t last) {
        for (size_t i = first; i < last; ++i) {
          if (num_columns > 0 && i + kPrefetchAhead < last && dest[i + kPrefetchAhead] >= 0) {
            const size_t ahead = i + kPrefetchAhead;
            Prefetch(block_of(ahead) + layout_.column_offset[0] +
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
  Result<uint64_t> logged = LogVectorStepsLocked(chunk, dest, rows, chunk_priorities);
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
    Prefetch(&store_.MetaAt(ahead.block, ahead.step_in_block));
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
  ForkJoin* fj = scratch->fork_join.get();
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
    ForkJoin::ForEachShare(fj, count, [&](int part, size_t begin, size_t end) {
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
  ForkJoin::ForEachShare(fj, count, [&](int part, size_t begin, size_t end) {
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

double TableImpl::NewItemPriorityLocked(const Trajectory& t, int64_t start, int64_t slot) const {
  const int64_t end = std::min(t.length, start + sequence_length_);
  switch (step_priority_) {
    case StepPriority::kItem:
      return store_.Meta(slot).step_priority;
    case StepPriority::kWindowMax: {
      double best = store_.StepPriorityAt(t, start);
      for (int64_t i = start + 1; i < end; ++i) best = std::max(best, store_.StepPriorityAt(t, i));
      return best;
    }
    case StepPriority::kWindowMean: {
      double sum = 0;
      for (int64_t i = start; i < end; ++i) sum += store_.StepPriorityAt(t, i);
      return sum / static_cast<double>(end - start);
    }
  }
  return store_.StepPriorityAt(t, start);
}

void TableImpl::CreateItemLocked(Trajectory& t, int64_t slot,
                                 std::vector<index::ItemRef>* selector_batch) {
  const int64_t start = t.items_created;
  if (slot < 0) slot = store_.SlotOf(t, start);
  ItemState& item = store_.Meta(slot).item;
  item.seq = next_item_seq_++;
  item.priority = NewItemPriorityLocked(t, start, slot);
  item.times_sampled = 0;
  ++t.items_created;
  ++items_inserted_;
  AddLiveItemLocked(t, start, item, slot, selector_batch);
  if (t.ranked && item.priority > t.best_priority) store_.Rank(t);
}

void TableImpl::AddLiveItemLocked(Trajectory& t, int64_t start, const ItemState& item,
                                  int64_t slot, std::vector<index::ItemRef>* selector_batch) {
  ++t.live_items;
  ++num_items_;
  sample_budget_ += DrawsLeft(item);
  if (slot < 0) slot = store_.SlotOf(t, start);
  if (tier_ && tier_->item_steps()) {
    tier_->NewItem(slot, std::min(sequence_length_, t.length - start));
  }
  const index::ItemRef ref{MakeItemKey(t.id, start), item.seq, item.priority, slot};
  if (selector_batch != nullptr) {
    selector_batch->push_back(ref);
  } else {
    selector_.Insert(ref);
  }
}

void TableImpl::DropItemLocked(Trajectory& t, int64_t start, const ItemState& item) {
  selector_.Remove({MakeItemKey(t.id, start), item.seq, item.priority, store_.SlotOf(t, start)});
  --t.live_items;
  --num_items_;
  ++items_removed_;
  limiter_.Delete(1);
  if (t.ranked && item.priority >= t.best_priority) store_.Rank(t);
}

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
    if (pending_free_blocks_ < headroom) victim = store_.PickVictim(t);
    if (pending_free_blocks_ > 0 && !victim) {
      if (deadline == Deadline::max()) {
        blocks_cv_.wait(lock);
      } else if (blocks_cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
                 pending_free_blocks_ > 0 && pool_.in_use() >= pool_.capacity_blocks()) {
        return Status::DeadlineExceeded(
            "table " + Quoted(name_) + ": timed out waiting for hot-tier blocks that " +
            (spill_queue_.empty() ? std::string("in-flight samples still read")
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
      tier_->SetBlockKey(block, MakeItemKey(t.id, static_cast<int64_t>(t.blocks.size()) *
                                                      layout_.block_steps));
    }
  }
  t.blocks.push_back(block);
}

void TableImpl::RemoveTrajectoryLocked(Trajectory& t, bool evicted) {
  if (log_ != nullptr && t.length > 0) {
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
  int64_t removed_items = max_times_sampled_ == 0 ? selector_.RemoveBlocks(t.blocks) : -1;
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
    for (int64_t i = 0; i < std::min(kAhead, steps); ++i) Prefetch(meta + i * TrajectoryStore::kMetaStride);
    for (int64_t i = 0; i < steps; ++i) {
      if (i + kAhead < steps) Prefetch(meta + (i + kAhead) * TrajectoryStore::kMetaStride);
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
  if (--t.pins > 0 || !t.removed || t.blocks.empty()) return;
  pending_free_blocks_ -= static_cast<int64_t>(t.blocks.size());
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

Status TableImpl::CheckSampleArgs(int64_t batch_size, const SampleOptions& options) const {
  if (batch_size < 1 || batch_size > kMaxBatchSize) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": batch_size is " +
                                   std::to_string(batch_size) + "; it must be between 1 and " +
                                   std::to_string(kMaxBatchSize));
  }
  if (std::isnan(options.importance_beta) || std::isinf(options.importance_beta)) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": importance_beta is " +
                                   std::to_string(options.importance_beta) +
                                   "; use a finite value (< 0 for no weights)");
  }
  return Status::OK();
}

int64_t TableImpl::SlotOf(const Window& w) const {
  const int64_t bs = layout_.block_steps;
  return w.trajectory->blocks[w.start / bs] * bs + w.start % bs;
}

int64_t TableImpl::TierSlotOf(const Window& w) const {
  return tier_->TierSlot(SlotOf(w), w.lane);
}

Status TableImpl::DrawLocked(std::unique_lock<std::mutex>& lock, int64_t batch,
                             const SampleOptions& options, SampleBatch* out,
                             std::vector<Window>* windows, int64_t* live_items) {
  const int64_t B = batch;
  const int64_t L = sequence_length_;
  const bool take = !options.peek;
  if (take) {
    const auto ready = [&] {
      return selector_.has_mass() && (max_times_sampled_ == 0 || sample_budget_ >= B);
    };
    REPLAYDB_RETURN_IF_ERROR(
        limiter_.AwaitSamples(lock, B, DeadlineAfter(options.timeout), ready));
  } else if (num_items_ == 0 || !selector_.has_mass()) {
    return Status::FailedPrecondition(
        "table " + Quoted(name_) + " has nothing to draw: " + std::to_string(num_items_) +
        " live items" + (num_items_ > 0 ? ", none with a priority above 0" : ""));
  }
  *live_items = num_items_;
  REPLAYDB_RETURN_IF_ERROR(draws_->PrepareHostDraws(B, options, store_,
                                                    tier_ ? tier_->stream() : nullptr));
  out->batch_size = B;
  out->sequence_length = L;
  out->keys.resize(B);
  out->probabilities.resize(B);
  out->priorities.resize(B);
  out->times_sampled.resize(B);
  out->mask.assign(static_cast<size_t>(B * L), 0);
  windows->clear();
  windows->reserve(B);
  std::vector<ItemKey> removed_keys;
  for (int64_t b = 0; b < B; ++b) {
    const index::Stratum stratum = options.stratified ? index::Stratum{b, B} : index::Stratum{};
    const index::Selection sel = draws_->HostDraw(b, rng_, stratum);
    const std::shared_ptr<Trajectory>& tp = store_.At(ItemKeyTrajectory(sel.key));
    Trajectory& t = *tp;
    const int64_t start = ItemKeyStart(sel.key);
    ItemState& item = store_.ItemAt(t, start);
    if (take) {
      ++item.times_sampled;
      ++items_sampled_;
      NoteSampledLocked(1);
      t.dirty = true;
    }
    out->keys[b] = sel.key;
    out->probabilities[b] = sel.probability;
    out->priorities[b] = item.priority;
    out->times_sampled[b] = item.times_sampled;
    if (take && max_times_sampled_ > 0) {
      --sample_budget_;
      if (item.times_sampled >= max_times_sampled_) {
        DropItemLocked(t, start, item);
        removed_keys.push_back(sel.key);
      }
    }
    const int64_t real = std::min(L, t.length - start);
    std::fill_n(out->mask.begin() + b * L, real, uint8_t{1});
    windows->push_back({tp, start, real, 0});
  }
  SpreadOverRowsLocked(rng_, live_items, out, windows);
  if (log_ != nullptr && !removed_keys.empty()) {
    record_.RemoveItems(table_id_, removed_keys);
    REPLAYDB_RETURN_IF_ERROR(LogLocked(wal::RecordType::kRemoveItems).status());
  }
  return Status::OK();
}

Status TableImpl::LookupLocked(std::span<const ItemKey> keys, SampleBatch* out,
                               std::vector<Window>* windows) const {
  const int64_t B = static_cast<int64_t>(keys.size());
  const int64_t L = sequence_length_;
  if (B < 1 || B > kMaxBatchSize) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": Lookup got " + std::to_string(B) +
                                   " keys; it takes between 1 and " +
                                   std::to_string(kMaxBatchSize));
  }
  out->batch_size = B;
  out->sequence_length = L;
  out->keys.assign(keys.begin(), keys.end());
  out->probabilities.assign(B, 0.0);
  out->priorities.resize(B);
  out->times_sampled.resize(B);
  out->weights.clear();
  out->mask.assign(static_cast<size_t>(B * L), 0);
  windows->clear();
  windows->reserve(B);
  for (int64_t b = 0; b < B; ++b) {
    const ItemKey key = keys[b];
    std::shared_ptr<Trajectory> tp = store_.FindShared(ItemKeyTrajectory(key));
    const ItemRow row = RowOf(key);
    const int64_t start = row.start;
    if (tp == nullptr || start >= tp->items_created ||
        !store_.ItemLive(store_.ItemAt(*tp, start))) {
      return Status::NotFound("table " + Quoted(name_) + ": key " + std::to_string(key) +
                              " (trajectory " + std::to_string(ItemKeyTrajectory(key)) + ", " +
                              RowText(row) + ", index " + std::to_string(b) +
                              ") is not a live item" +
                              (cold_.count(ItemKeyTrajectory(key)) != 0
                                   ? "; its trajectory is in the cold tier (Table::Load)"
                                   : ""));
    }
    const Trajectory& t = *tp;
    const ItemState& item = store_.ItemAt(t, start);
    out->priorities[b] = item.priority;
    out->times_sampled[b] = item.times_sampled;
    const int64_t real = std::min(L, t.length - start);
    std::fill_n(out->mask.begin() + b * L, real, uint8_t{1});
    windows->push_back({std::move(tp), start, real, row.lane});
  }
  return Status::OK();
}

Status TableImpl::GatherToHostLocked(std::unique_lock<std::mutex>& lock,
                                     std::vector<Window>& windows, SampleBatch* out) {
  const int64_t B = static_cast<int64_t>(windows.size());
  const int64_t L = sequence_length_;
  const int64_t bs = layout_.block_steps;
  out->columns.resize(item_columns_.size());
  for (size_t c = 0; c < item_columns_.size(); ++c) {
    out->columns[c].Reset(item_columns_[c].dtype, item_columns_[c].shape.Prepend(L).Prepend(B));
  }
  const auto release_consumed = [&] {
    // After the draws: a trajectory may appear several times in a batch.
    for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
  };
  if (!pool_.host_accessible()) {
    // Device memory: one gather kernel, then a copy to the host, all under
    // the lock (the tier is not thread-safe).
    std::vector<int64_t> slots(B);
    std::vector<uint32_t> steps(B);
    for (int64_t b = 0; b < B; ++b) {
      slots[b] = TierSlotOf(windows[b]);
      steps[b] = static_cast<uint32_t>(windows[b].real);
    }
    Status s = tier_->GatherToHost(slots, steps, &out->columns);
    release_consumed();
    return s.WithContext("table " + Quoted(name_));
  }
  // Host-readable blocks: memcpy outside the lock; pins keep the blocks.
  if (tier_) REPLAYDB_RETURN_IF_ERROR(tier_->AwaitScatters());
  // One contiguous run of a window inside one block.
  struct Segment {
    const std::byte* block;
    int64_t first_step;  // within the block
    int64_t count;
    int64_t out_step;  // within the window
    int64_t lane;      // the environment's row of each step (vector tables)
  };
  std::vector<Segment> segments;
  segments.reserve(B * (L / bs + 2));
  std::vector<size_t> first_segment(B + 1);
  for (int64_t b = 0; b < B; ++b) {
    const Window& w = windows[b];
    first_segment[b] = segments.size();
    for (int64_t step = 0; step < w.real;) {
      const int64_t pos = w.start + step;
      const int64_t in_block = pos % bs;
      const int64_t count = std::min(w.real - step, bs - in_block);
      segments.push_back(
          {pool_.address(w.trajectory->blocks[pos / bs]), in_block, count, step, w.lane});
      step += count;
    }
    ++w.trajectory->pins;
  }
  first_segment[B] = segments.size();
  release_consumed();
  lock.unlock();

  for (size_t c = 0; c < columns_.size(); ++c) {
    const size_t cb = layout_.column_bytes[c];        // a stored step's
    const size_t rb = item_columns_[c].step_bytes();  // an item's step's (cb / lanes)
    const size_t offset = layout_.column_offset[c];
    std::byte* base = out->columns[c].data();
    for (int64_t b = 0; b < B; ++b) {
      std::byte* window = base + static_cast<size_t>(b * L) * rb;
      int64_t written = 0;
      for (size_t i = first_segment[b]; i < first_segment[b + 1]; ++i) {
        const Segment& seg = segments[i];
        const std::byte* from = seg.block + offset + static_cast<size_t>(seg.first_step) * cb +
                                static_cast<size_t>(seg.lane) * rb;
        std::byte* to = window + static_cast<size_t>(seg.out_step) * rb;
        if (rb == cb) {
          std::memcpy(to, from, static_cast<size_t>(seg.count) * cb);
        } else {
          for (int64_t k = 0; k < seg.count; ++k) std::memcpy(to + k * rb, from + k * cb, rb);
        }
        written = seg.out_step + seg.count;
      }
      if (written < L) {
        std::memset(window + static_cast<size_t>(written) * rb, 0,
                    static_cast<size_t>(L - written) * rb);
      }
    }
  }

  lock.lock();
  for (const Window& w : windows) UnpinLocked(*w.trajectory);
  return Status::OK();
}

namespace {

// (N * P)^-beta, divided by the batch's largest weight.
void ImportanceWeights(const std::vector<double>& probabilities, int64_t live_items, double beta,
                       std::vector<double>* weights) {
  weights->resize(probabilities.size());
  double max_weight = 0;
  for (size_t b = 0; b < probabilities.size(); ++b) {
    const double w = std::pow(static_cast<double>(live_items) * probabilities[b], -beta);
    (*weights)[b] = w;
    max_weight = std::max(max_weight, w);
  }
  for (double& w : *weights) w /= max_weight;
}

}  // namespace

Status TableImpl::Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) {
  REPLAYDB_RETURN_IF_ERROR(CheckSampleArgs(batch_size, options));
  if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name_) + ": out is null");
  std::vector<Window> windows;
  int64_t live_items = 0;  // N in the importance weights
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(DrawLocked(lock, batch_size, options, out, &windows, &live_items));
  if (options.importance_beta >= 0) {
    ImportanceWeights(out->probabilities, live_items, options.importance_beta, &out->weights);
  } else {
    out->weights.clear();
  }
  if (!options.gather) {
    for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
    out->columns.clear();
    return Status::OK();
  }
  return GatherToHostLocked(lock, windows, out);
}

Status TableImpl::Lookup(std::span<const ItemKey> keys, SampleBatch* out) {
  if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name_) + ": out is null");
  std::vector<Window> windows;
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(LookupLocked(keys, out, &windows));
  return GatherToHostLocked(lock, windows, out);
}

Status TableImpl::NeedTierLocked(std::string_view what) const {
  if (tier_) return Status::OK();
  std::string why;
  CudaDeviceCount(&why);
  return Status::FailedPrecondition("table " + Quoted(name_) + ": " + std::string(what) +
                                    " needs a GPU that can address the hot tier, but it is in "
                                    "plain host memory" +
                                    (why.empty() ? std::string() : " (" + why + ")"));
}

Status TableImpl::CheckDeviceOutput(const DeviceSampleOutput& out, bool weights) const {
  if (out.keys == nullptr || (weights && out.weights == nullptr)) {
    return Status::InvalidArgument("table " + Quoted(name_) +
                                   ": a device sample needs device pointers for keys and "
                                   "probabilities (and weights when importance_beta >= 0)");
  }
  if (!out.columns.empty() && out.columns.size() != columns_.size()) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": DeviceSampleOutput has " +
                                   std::to_string(out.columns.size()) +
                                   " column pointers; the table has " +
                                   std::to_string(columns_.size()) + " columns (or give none)");
  }
  for (size_t c = 0; c < out.columns.size(); ++c) {
    if (out.columns[c] == nullptr) {
      return Status::InvalidArgument("table " + Quoted(name_) + ": DeviceSampleOutput column " +
                                     Quoted(columns_[c].name) + " is null");
    }
  }
  return Status::OK();
}

Status TableImpl::SampleToDevice(int64_t batch_size, const SampleOptions& options,
                                 const DeviceSampleOutput& out, void* stream) {
  if (options.peek) {
    return Status::InvalidArgument("table " + Quoted(name_) +
                                   ": SampleToDevice does not peek (SampleOptions::peek is for "
                                   "Table::Sample)");
  }
  REPLAYDB_RETURN_IF_ERROR(CheckSampleArgs(batch_size, options));
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceOutput(out, options.importance_beta >= 0));
  if (out.probabilities == nullptr) {
    return Status::InvalidArgument("table " + Quoted(name_) +
                                   ": SampleToDevice needs a device pointer for probabilities");
  }
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(NeedTierLocked("SampleToDevice"));
  if (draws_->draws_on_device()) {
    // Drawn and gathered on the device: nothing passes through the host.
    REPLAYDB_RETURN_IF_ERROR(draws_->status());
    const auto ready = [&] { return selector_.has_mass(); };
    REPLAYDB_RETURN_IF_ERROR(
        limiter_.AwaitSamples(lock, batch_size, DeadlineAfter(options.timeout), ready));
    const Status s = draws_->DrawAndGather(*tier_, batch_size, options, rng_, out, stream);
    if (!s.ok()) return s.WithContext("table " + Quoted(name_));
    items_sampled_ += batch_size;
    NoteSampledLocked(batch_size);
    return Status::OK();
  }
  SampleBatch meta;
  std::vector<Window> windows;
  int64_t live_items = 0;
  REPLAYDB_RETURN_IF_ERROR(DrawLocked(lock, batch_size, options, &meta, &windows, &live_items));
  std::vector<int64_t> slots(batch_size);
  std::vector<uint32_t> steps(batch_size);
  std::vector<float> probabilities(batch_size);
  std::vector<float> weights;
  for (int64_t b = 0; b < batch_size; ++b) {
    slots[b] = TierSlotOf(windows[b]);
    steps[b] = static_cast<uint32_t>(windows[b].real);
    probabilities[b] = static_cast<float>(meta.probabilities[b]);
  }
  if (options.importance_beta >= 0) {
    ImportanceWeights(meta.probabilities, live_items, options.importance_beta, &meta.weights);
    weights.assign(meta.weights.begin(), meta.weights.end());
  }
  DeviceTier::HostDraws draws{slots, steps, meta.keys, probabilities, weights};
  Status s = tier_->GatherHostDraws(draws, out, stream);
  // After the gather was queued: blocks of consumed trajectories wait for it.
  for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
  return s.WithContext("table " + Quoted(name_));
}

void TableImpl::SpreadOverRowsLocked(Random& /*rng*/, int64_t* /*live_items*/,
                                     SampleBatch* /*out*/, std::vector<Window>* /*windows*/) {}

TableImpl::ItemRow TableImpl::RowOf(ItemKey key) const { return {ItemKeyStart(key), 0}; }

std::string TableImpl::RowText(const ItemRow& row) const {
  return "step " + std::to_string(row.start);
}

Status TableImpl::SlotError(const Status& s, size_t slot) const {
  return s.WithContext("environment " + std::to_string(slot));
}

Status TableImpl::LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                                 void* stream) {
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceOutput(out, false));
  SampleBatch meta;
  std::vector<Window> windows;
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(NeedTierLocked("LookupToDevice"));
  REPLAYDB_RETURN_IF_ERROR(LookupLocked(keys, &meta, &windows));
  const size_t B = keys.size();
  std::vector<int64_t> slots(B);
  std::vector<uint32_t> steps(B);
  for (size_t b = 0; b < B; ++b) {
    slots[b] = TierSlotOf(windows[b]);
    steps[b] = static_cast<uint32_t>(windows[b].real);
  }
  DeviceTier::HostDraws draws{slots, steps, meta.keys, {}, {}};
  return tier_->GatherHostDraws(draws, out, stream).WithContext("table " + Quoted(name_));
}

Result<std::unique_ptr<DeviceSampler>> TableImpl::NewDeviceSampler(
    const DeviceSamplerOptions& options) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    REPLAYDB_RETURN_IF_ERROR(NeedTierLocked("NewDeviceSampler"));
  }
  return engine::NewDeviceSampler(shared_from_this(), options);
}

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

Status TableImpl::SetRateLimiter(const RateLimiterSpec& spec) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("SetRateLimiter"));
  REPLAYDB_RETURN_IF_ERROR(spec.Validate().WithContext("table " + Quoted(name_)));
  std::lock_guard<std::mutex> spec_lock(spec_mu_);
  TableSpec updated;
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    updated = spec_;
  }
  updated.rate_limiter = spec;
  if (persist_) REPLAYDB_RETURN_IF_ERROR(persist_(updated));
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  spec_.rate_limiter = spec;
  limiter_.SetSpec(spec);
  return Status::OK();
}

TableInfo TableImpl::Info() const {
  std::lock_guard<std::mutex> lock(mu_);
  TableInfo info;
  info.name = name_;
  info.num_steps = num_steps_;
  info.num_items = num_items_;
  info.num_trajectories = static_cast<int64_t>(store_.size());
  info.num_open_trajectories = info.num_trajectories - static_cast<int64_t>(store_.num_ended());
  info.blocks_used = pool_.in_use();
  info.blocks_capacity = pool_.capacity_blocks();
  info.placement = pool_.memory() == BlockMemory::kDevice
                       ? "device:" + std::to_string(pool_.device())
                       : std::string(BlockMemoryName(pool_.memory()));
  info.device = tier_ ? tier_->device() : -1;
  info.bytes_used = pool_.in_use() * static_cast<int64_t>(layout_.block_bytes);
  info.bytes_reserved = pool_.bytes_reserved();
  info.bytes_capacity = pool_.capacity_blocks() * static_cast<int64_t>(layout_.block_bytes);
  info.steps_inserted = steps_inserted_;
  info.items_inserted = items_inserted_;
  info.items_sampled = items_sampled_;
  info.items_removed = items_removed_;
  info.evicted_trajectories = evicted_trajectories_;
  info.evicted_items = evicted_items_;
  info.priority_updates = priority_updates_;
  info.priority_updates_skipped = priority_updates_skipped_;
  if (draws_->device_priorities() != nullptr && device_updates_ > 0) {
    // Reading the device's count synchronises with it.
    auto skipped = draws_->device_priorities()->SkippedUpdates();
    const int64_t device_skipped = skipped.ok() ? *skipped : 0;
    info.priority_updates += device_updates_ - device_skipped;
    info.priority_updates_skipped += device_skipped;
  }
  info.max_priority_seen = max_priority_seen_;
  info.rate_limiter = limiter_.Info();
  info.cold_trajectories = static_cast<int64_t>(cold_.size());
  info.cold_steps = cold_steps_;
  info.cold_bytes = cold_steps_ * static_cast<int64_t>(layout_.step_bytes);
  info.spilled_trajectories = spilled_trajectories_;
  info.spilled_bytes = spilled_bytes_;
  info.loaded_trajectories = loaded_trajectories_;
  info.rotations = rotations_;
  info.spill_queue = static_cast<int64_t>(spill_queue_.size());
  return info;
}

}  // namespace engine
}  // namespace replaydb
