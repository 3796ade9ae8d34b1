// TableImpl: creation, writers, validation, the rate limiter's spec and
// TableInfo. The other files of engine/table/ hold the rest of the class by
// concern (see table_impl.h).
#include "engine/table/table_impl.h"

#include <cmath>
#include <new>
#include <string>

#include "engine/table/vector_table.h"
#include "engine/table/writers.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

Result<std::shared_ptr<TableImpl>> TableImpl::Create(const TableSpec& spec,
                                                     PersistSpecFn persist,
                                                     std::shared_ptr<SlabSource> host_slabs) {
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
  if (memory == BlockMemory::kDevice) host_slabs = nullptr;
  if (spec.lanes > 1) {
    return std::shared_ptr<TableImpl>(std::make_shared<VectorTableImpl>(
        spec, std::move(persist), std::move(draws), memory, std::move(tier),
        std::move(host_slabs)));
  }
  return std::make_shared<TableImpl>(spec, std::move(persist), std::move(draws), memory,
                                     std::move(tier), std::move(host_slabs));
}

TableImpl::TableImpl(const TableSpec& spec, PersistSpecFn persist,
                     std::unique_ptr<DrawStrategy> draws, BlockMemory memory,
                     std::unique_ptr<DeviceTier> tier, std::shared_ptr<SlabSource> host_slabs)
    : name_(spec.name),
      columns_(StoredColumns(spec)),
      item_columns_(spec.columns),
      layout_(TableLayout::For(spec)),
      sequence_length_(spec.sequence_length),
      one_lane_(spec.lanes == 1),
      padding_(spec.padding),
      max_times_sampled_(static_cast<uint32_t>(spec.max_times_sampled)),
      ordered_(spec.selector == SelectorKind::kFifo || spec.selector == SelectorKind::kLifo ||
               spec.selector == SelectorKind::kMaxHeap || spec.selector == SelectorKind::kMinHeap),
      step_priority_(spec.step_priority),
      spill_(spec.spill),
      rotation_fraction_(spec.rotation_fraction),
      rotation_every_samples_(spec.rotation_every_samples),
      persist_(std::move(persist)),
      spec_(spec),
      pool_(layout_.block_bytes, layout_.num_blocks, memory, tier ? tier->device() : 0,
            std::move(host_slabs)),
      tier_(std::move(tier)),
      limiter_(spec.rate_limiter, spec.name, spec.lanes),
      draws_(std::move(draws)),
      selector_(draws_->selector()),
      rng_(util::Random::FromEntropy()),
      store_({layout_.block_steps, static_cast<uint32_t>(spec.max_times_sampled), spec.eviction}) {}

TableImpl::~TableImpl() { CloseWithReason("closed"); }

TableSpec TableImpl::spec() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spec_;
}

void TableImpl::CloseWithReason(const std::string& reason) {
  // Priorities set on the GPU and not yet logged go into the log first.
  StopDeviceLog();
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
  if (t.cleared) {
    return Status::FailedPrecondition(
        "table " + Quoted(name_) + ": trajectory " + std::to_string(t.id) +
        " was removed while open, with its " + std::to_string(t.length) +
        " steps, by a Clear of the table; the writer's next step starts a new trajectory");
  }
  return Status::FailedPrecondition(
      "table " + Quoted(name_) + ": trajectory " + std::to_string(t.id) +
      " was evicted from the hot tier while open (it had " + std::to_string(t.length) +
      " steps; the tier holds " + std::to_string(layout_.num_blocks * layout_.block_steps) +
      " steps); the writer's next step starts a new trajectory");
}

Status TableImpl::CheckNewWriter(const WriterOptions& options) const {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("NewWriter"));
  REPLAYDB_RETURN_IF_ERROR(ValidateAcks(options.acks, "table " + Quoted(name_) + ": NewWriter"));
  std::lock_guard<std::mutex> lock(mu_);
  return CheckOpenLocked();
}

Result<std::unique_ptr<TrajectoryWriter>> TableImpl::NewWriter(const WriterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckNewWriter(options));
  return std::unique_ptr<TrajectoryWriter>(
      std::make_unique<TrajectoryWriterImpl>(shared_from_this(), options));
}

Status TableImpl::CheckNewVectorWriter(size_t num_envs, const WriterOptions& options) const {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("NewVectorWriter"));
  REPLAYDB_RETURN_IF_ERROR(
      ValidateAcks(options.acks, "table " + Quoted(name_) + ": NewVectorWriter"));
  if (num_envs == 0) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": a vector writer needs num_envs >= 1");
  }
  if (num_envs > kMaxVectorWriterEnvs) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": a vector writer of " +
                                   std::to_string(num_envs) +
                                   " environments is more than the limit of " +
                                   std::to_string(kMaxVectorWriterEnvs) + " (kMaxVectorWriterEnvs)");
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
  // Every environment keeps a trajectory open, in a block of its own: with
  // fewer blocks than environments the first append would evict open ones.
  const int64_t blocks = pool_.capacity_blocks();
  if (num_envs > static_cast<uint64_t>(blocks)) {
    return Status::InvalidArgument(
        "table " + Quoted(name_) + ": a vector writer of " + std::to_string(num_envs) +
        " environments keeps " + std::to_string(num_envs) +
        " trajectories open, each in a block of its own; the table has " +
        std::to_string(blocks) + " block" + (blocks == 1 ? "" : "s") + " of " +
        std::to_string(layout_.block_steps) + " steps: give capacity_steps >= " +
        std::to_string(num_envs * layout_.block_steps) + ", or block_steps <= " +
        std::to_string(std::max<int64_t>(1, blocks * layout_.block_steps /
                                                static_cast<int64_t>(num_envs))));
  }
  // Its state grows with num_envs, which the caller chose.
  try {
    return std::unique_ptr<VectorWriter>(
        std::make_unique<VectorWriterImpl>(shared_from_this(), num_envs, options));
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("table " + Quoted(name_) + ": a vector writer of " +
                                     std::to_string(num_envs) +
                                     " environments: its per-environment state could not be "
                                     "allocated");
  }
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
    size_t bytes = 0;
    if (!util::CheckedMul(layout_.column_bytes[c], leading < 0 ? int64_t{1} : leading, &bytes)) {
      // Wrapped, the size could match a small size_bytes.
      return Status::InvalidArgument(where() + ": " + std::to_string(leading) + " rows of " +
                                     std::to_string(layout_.column_bytes[c]) +
                                     " bytes overflow 64 bits");
    }
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

Status ValidatePriorityOf(std::string_view table, double priority, std::string_view what) {
  if (std::isfinite(priority) && priority >= 0) return Status::OK();
  return Status::InvalidArgument("table " + Quoted(table) + ": " + std::string(what) + " priority " +
                                 std::to_string(priority) + " is invalid; priorities must be " +
                                 "finite and >= 0");
}

Status ValidatePrioritiesOf(std::string_view table, std::span<const double> priorities,
                            std::string_view what) {
  for (size_t i = 0; i < priorities.size(); ++i) {
    REPLAYDB_RETURN_IF_ERROR(ValidatePriorityOf(table, priorities[i],
                                                std::string(what) + " step " + std::to_string(i)));
  }
  return Status::OK();
}

Status TableImpl::ValidatePriority(double priority, std::string_view what) const {
  return ValidatePriorityOf(name_, priority, what);
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

Status TableImpl::Seed(uint64_t seed) {
  if (spec().priority_device >= 0) {
    return Status::NotSupported(
        "table " + Quoted(name_) + ": Seed: its priorities live on GPU " +
        std::to_string(spec().priority_device) +
        " (priority_device), whose priority table draws with a generator of its own");
  }
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  rng_ = util::Random(seed);
  return Status::OK();
}

Status TableImpl::SetRateLimiter(const RateLimiterSpec& spec) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("SetRateLimiter"));
  return ApplyRateLimiter(spec);
}

Status TableImpl::ApplyRateLimiter(const RateLimiterSpec& spec) {
  REPLAYDB_RETURN_IF_ERROR(spec.Validate().WithContext("table " + Quoted(name_)));
  // A vector table's step is `lanes` items at once: a range too narrow for
  // one would block its writers for good.
  REPLAYDB_RETURN_IF_ERROR(RateLimiter(spec, name_, spec_.lanes).CheckInsertBatch(1));
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

}  // namespace replaydb::engine
