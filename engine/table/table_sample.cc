// TableImpl's reads: Sample and Lookup (draws under the rate limiter, the
// windows' steps copied to the host or gathered on the GPU) and
// SampleToDevice, LookupToDevice and NewDeviceSampler. Where the draws
// happen is the DrawStrategy's (draw_strategy.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include <unistd.h>

#include "engine/gpu/device_sampler.h"
#include "engine/table/device_output.h"
#include "engine/table/table_impl.h"
#include "engine/table/table_items.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace replaydb {

using util::Quoted;

Result<SampleBatch> Table::Sample(int64_t batch_size, const SampleOptions& options) {
  SampleBatch batch;
  REPLAYDB_RETURN_IF_ERROR(Sample(batch_size, options, &batch));
  return batch;
}

namespace engine {

namespace {

// The machine's physical memory in bytes; 0 when unknown.
uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return util::SaturatingMul<uint64_t>(static_cast<uint64_t>(pages),
                                       static_cast<uint64_t>(page_size));
}

// (N * P)^-beta, divided by the batch's largest weight (kBatch).
void BatchImportanceWeights(const std::vector<double>& probabilities, int64_t live_items,
                            double beta, std::vector<double>* weights) {
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
  if (WeightNormalizationName(options.weight_normalization) == "invalid") {
    return Status::InvalidArgument(
        "table " + Quoted(name_) + ": weight_normalization is " +
        std::to_string(static_cast<int>(options.weight_normalization)) +
        "; use WeightNormalization::kBuffer (0) or kBatch (1)");
  }
  return Status::OK();
}

void TableImpl::FinishWeightsLocked(const SampleOptions& options, int64_t live_items,
                                    SampleBatch* out) const {
  if (options.importance_beta < 0) {
    out->weights.clear();
  } else if (options.weight_normalization == WeightNormalization::kBatch) {
    BatchImportanceWeights(out->probabilities, live_items, options.importance_beta,
                           &out->weights);
  }
  // kBuffer: DrawLocked computed them draw by draw.
}

Status TableImpl::PrepareHostBatch(int64_t B, bool gather, bool weights, SampleBatch* out,
                                   HostBatchScratch* scratch) const {
  const int64_t L = sequence_length_;
  // Per step: the mask's byte and (gathered) an item's step of every
  // column; per item: key, probability, priority, weight, times_sampled.
  uint64_t step_bytes = 1;
  if (gather) {
    for (const ColumnSpec& c : item_columns_) step_bytes += c.step_bytes();
  }
  constexpr uint64_t kItemBytes = sizeof(ItemKey) + 3 * sizeof(double) + sizeof(uint32_t);
  uint64_t steps = 0, bytes = 0;
  const bool fits = util::CheckedMul(B, L, &steps) && util::CheckedMul(steps, step_bytes, &bytes) &&
                    util::CheckedAdd(bytes, static_cast<uint64_t>(B) * kItemBytes, &bytes);
  const std::string batch = "table " + Quoted(name_) + ": a batch of " + std::to_string(B) +
                            " items of " + std::to_string(L) + " steps";
  if (!fits || bytes > kMaxSampleBytes) {
    return Status::ResourceExhausted(
        batch + " needs " + (fits ? std::to_string(bytes) : "more than 2^64") +
        " bytes of host memory, more than the limit of " + std::to_string(kMaxSampleBytes) +
        " (kMaxSampleBytes)");
  }
  // The allocator maps more than there is (jemalloc overcommits) and the
  // zero-filling would then end the process: refuse what the machine
  // cannot hold at all.
  if (const uint64_t memory = PhysicalMemoryBytes(); memory > 0 && bytes > memory) {
    return Status::ResourceExhausted(batch + " needs " + std::to_string(bytes) +
                                     " bytes of host memory, more than this machine's " +
                                     std::to_string(memory) + " bytes of memory");
  }
  // A window touches at most min(L, L / block_steps + 2) blocks.
  const int64_t bs = layout_.block_steps;
  const size_t segments = static_cast<size_t>(B) * static_cast<size_t>(std::min(L, L / bs + 2));
  try {
    out->keys.resize(B);
    out->probabilities.resize(B);
    out->priorities.resize(B);
    out->times_sampled.resize(B);
    if (weights) out->weights.reserve(B);
    out->mask.resize(static_cast<size_t>(steps));
    if (gather) {
      out->columns.resize(item_columns_.size());
      for (size_t c = 0; c < item_columns_.size(); ++c) {
        out->columns[c].Reset(item_columns_[c].dtype,
                              item_columns_[c].shape.Prepend(L).Prepend(B));
      }
    }
    scratch->windows.reserve(B);
    if (gather && pool_.host_accessible()) {
      scratch->segments.reserve(segments);
      scratch->first_segment.reserve(B + 1);
    } else if (gather) {
      scratch->slots.reserve(B);
      scratch->steps.reserve(B);
    }
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted(batch + ": its " + std::to_string(bytes) +
                                     " bytes of host memory (and " +
                                     std::to_string(segments * sizeof(GatherSegment)) +
                                     " bytes to gather them) could not be allocated");
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
    return Status::FailedPrecondition("table " + Quoted(name_) + " has nothing to draw: " +
                                      std::to_string(num_items_) + " live items");
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
  out->insertion_order.resize(B);
  out->mask.assign(static_cast<size_t>(B * L), 0);
  // Buffer-wide importance weights, draw by draw: P_min is the selector's
  // as the draw is made, before its item may leave.
  const bool buffer_weights = options.importance_beta >= 0 &&
                              options.weight_normalization == WeightNormalization::kBuffer;
  if (buffer_weights) out->weights.resize(B);
  windows->clear();
  windows->reserve(B);
  const auto stratum_of = [&](int64_t b) {
    return options.stratified ? index::Stratum{b, B} : index::Stratum{};
  };
  // Where no draw can remove an item (max_times_sampled), the draws do not
  // depend on what the loop below does with them: all are made first, in the
  // same order (the same random numbers), and each stage of finding their
  // items runs over the whole batch, prefetching the next stage's lines, so
  // that the draws' cache misses overlap instead of following each other
  // (a draw from a large table is a chain of them: the trajectory's index
  // entry, the trajectory, its block list, the item's metadata).
  const bool removes = take && max_times_sampled_ > 0;
  if (!removes) {
    draw_sels_.resize(static_cast<size_t>(B));
    draw_trajectories_.resize(static_cast<size_t>(B));
    draws_->HostDrawMany(rng_, options.stratified, draw_sels_);
    for (int64_t b = 0; b < B; ++b) store_.PrefetchId(ItemKeyTrajectory(draw_sels_[b].key));
    for (int64_t b = 0; b < B; ++b) {
      draw_trajectories_[b] = &store_.At(ItemKeyTrajectory(draw_sels_[b].key));
      __builtin_prefetch(draw_trajectories_[b]->get());
    }
    const int64_t bs = layout_.block_steps;
    for (int64_t b = 0; b < B; ++b) {
      const Trajectory& t = **draw_trajectories_[b];
      __builtin_prefetch(&t.blocks[static_cast<size_t>(ItemKeyStart(draw_sels_[b].key) / bs)]);
    }
    for (int64_t b = 0; b < B; ++b) {
      __builtin_prefetch(&store_.ItemAt(**draw_trajectories_[b], ItemKeyStart(draw_sels_[b].key)));
    }
  }
  std::vector<ItemKey> removed_keys;
  for (int64_t b = 0; b < B; ++b) {
    const index::Selection sel =
        removes ? draws_->HostDraw(b, rng_, stratum_of(b)) : draw_sels_[b];
    const std::shared_ptr<Trajectory>& tp =
        removes ? store_.At(ItemKeyTrajectory(sel.key)) : *draw_trajectories_[b];
    Trajectory& t = *tp;
    const int64_t start = ItemKeyStart(sel.key);
    ItemState& item = store_.ItemAt(t, start);
    if (take) {
      if (item.times_sampled < kDeletedItem - 1) ++item.times_sampled;
      ++items_sampled_;
      NoteSampledLocked(1);
      t.dirty = true;
    }
    out->keys[b] = sel.key;
    out->probabilities[b] = sel.probability;
    out->priorities[b] = item.priority;
    if (buffer_weights) {
      out->weights[b] = draws_->HostDrawBufferWeight(b, options.importance_beta, item.priority);
    }
    out->times_sampled[b] = item.times_sampled;
    out->insertion_order[b] = item.seq;
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
  out->insertion_order.resize(B);
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
    out->insertion_order[b] = item.seq;
    const int64_t real = std::min(L, t.length - start);
    std::fill_n(out->mask.begin() + b * L, real, uint8_t{1});
    windows->push_back({std::move(tp), start, real, row.lane});
  }
  return Status::OK();
}

Status TableImpl::GatherToHostLocked(std::unique_lock<std::mutex>& lock, HostBatchScratch& scratch,
                                     SampleBatch* out) {
  std::vector<Window>& windows = scratch.windows;
  const int64_t B = static_cast<int64_t>(windows.size());
  const int64_t L = sequence_length_;
  const int64_t bs = layout_.block_steps;
  // Sized by PrepareHostBatch: these allocate nothing.
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
    std::vector<int64_t>& slots = scratch.slots;
    std::vector<uint32_t>& steps = scratch.steps;
    slots.resize(B);
    steps.resize(B);
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
  using Segment = GatherSegment;
  std::vector<Segment>& segments = scratch.segments;
  segments.clear();
  std::vector<size_t>& first_segment = scratch.first_segment;
  first_segment.resize(B + 1);
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

Status TableImpl::Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) {
  REPLAYDB_RETURN_IF_ERROR(CheckSampleArgs(batch_size, options));
  if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name_) + ": out is null");
  HostBatchScratch scratch;
  REPLAYDB_RETURN_IF_ERROR(PrepareHostBatch(batch_size, options.gather,
                                            options.importance_beta >= 0, out, &scratch));
  std::vector<Window>& windows = scratch.windows;
  int64_t live_items = 0;  // N in the importance weights
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(DrawLocked(lock, batch_size, options, out, &windows, &live_items));
  FinishWeightsLocked(options, live_items, out);
  if (!options.gather) {
    for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
    out->columns.clear();
    return Status::OK();
  }
  return GatherToHostLocked(lock, scratch, out);
}

Status TableImpl::SampleInPlace(int64_t batch_size, const SampleOptions& options,
                                SampleBatch* out, InPlaceSample* where) {
  REPLAYDB_RETURN_IF_ERROR(CheckSampleArgs(batch_size, options));
  if (out == nullptr || where == nullptr) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": out is null");
  }
  if (!samples_by_address()) {
    return Status::NotSupported("table " + Quoted(name_) +
                                ": samples in place need a one-lane table whose hot tier lies "
                                "in host memory");
  }
  const bool slabs = pool_.has_source();
  HostBatchScratch scratch;
  REPLAYDB_RETURN_IF_ERROR(PrepareHostBatch(batch_size, /*gather=*/false,
                                            options.importance_beta >= 0, out, &scratch));
  std::vector<Window>& windows = scratch.windows;
  const int64_t bs = layout_.block_steps;
  where->segments.clear();
  where->segments.reserve(static_cast<size_t>(batch_size) *
                          static_cast<size_t>(sequence_length_ / bs + 2));
  std::vector<std::shared_ptr<Trajectory>> held;
  held.reserve(static_cast<size_t>(batch_size));
  int64_t live_items = 0;
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(DrawLocked(lock, batch_size, options, out, &windows, &live_items));
  FinishWeightsLocked(options, live_items, out);
  // Steps scattered in by the GPU land before anyone reads them.
  if (tier_) REPLAYDB_RETURN_IF_ERROR(tier_->AwaitScatters());
  for (size_t b = 0; b < windows.size(); ++b) {
    const Window& w = windows[b];
    for (int64_t step = 0; step < w.real;) {
      const int64_t pos = w.start + step;
      const int64_t in_block = pos % bs;
      const int64_t count = std::min(w.real - step, bs - in_block);
      const int64_t block = w.trajectory->blocks[pos / bs];
      const BlockPool::SlabPlace p = slabs ? pool_.place(block) : BlockPool::SlabPlace{};
      where->segments.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(step),
                                 static_cast<uint32_t>(count), static_cast<uint32_t>(p.slab),
                                 p.offset, static_cast<uint64_t>(in_block),
                                 pool_.address(block)});
      step += count;
    }
    ++w.trajectory->pins;
    ++w.trajectory->leases;
    held.push_back(w.trajectory);
  }
  for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
  lock.unlock();
  out->columns.clear();
  where->column_offset.assign(layout_.column_offset.begin(), layout_.column_offset.end());
  where->column_step_bytes.assign(layout_.column_bytes.begin(), layout_.column_bytes.end());
  where->pins = std::make_unique<BlockPins>(weak_from_this(), std::move(held));
  return Status::OK();
}

BlockPins::~BlockPins() {
  std::shared_ptr<TableImpl> table = table_.lock();
  if (!table) return;
  std::lock_guard<std::mutex> lock(table->mu_);
  for (const std::shared_ptr<Trajectory>& t : held_) table->UnleaseLocked(*t);
}

std::vector<SlabSpan> TableImpl::Slabs(int64_t first) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SlabSpan> out;
  for (int64_t i = std::max<int64_t>(first, 0); i < pool_.slabs(); ++i) {
    out.push_back({pool_.slab(i), pool_.slab_bytes(i)});
  }
  return out;
}

Status TableImpl::Lookup(std::span<const ItemKey> keys, SampleBatch* out) {
  if (out == nullptr) return Status::InvalidArgument("table " + Quoted(name_) + ": out is null");
  const int64_t B = static_cast<int64_t>(keys.size());
  if (B < 1 || B > kMaxBatchSize) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": Lookup got " + std::to_string(B) +
                                   " keys; it takes between 1 and " +
                                   std::to_string(kMaxBatchSize));
  }
  HostBatchScratch scratch;
  REPLAYDB_RETURN_IF_ERROR(PrepareHostBatch(B, /*gather=*/true, /*weights=*/false, out, &scratch));
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  REPLAYDB_RETURN_IF_ERROR(LookupLocked(keys, out, &scratch.windows));
  return GatherToHostLocked(lock, scratch, out);
}

Status TableImpl::SampleToDevice(int64_t batch_size, const SampleOptions& options,
                                 const DeviceSampleOutput& out, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(CheckSampleArgs(batch_size, options));
  REPLAYDB_RETURN_IF_ERROR(CheckSampleToDevice(name_, item_columns_, options, out));
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
  FinishWeightsLocked(options, live_items, &meta);
  weights.assign(meta.weights.begin(), meta.weights.end());
  DeviceTier::HostDraws draws{slots, steps, meta.keys, probabilities, weights};
  Status s = tier_->GatherHostDraws(draws, out, stream);
  // After the gather was queued: blocks of consumed trajectories wait for it.
  for (const Window& w : windows) MaybeReleaseConsumedLocked(*w.trajectory);
  return s.WithContext("table " + Quoted(name_));
}

void TableImpl::SpreadOverRowsLocked(util::Random& /*rng*/, int64_t* /*live_items*/,
                                     SampleBatch* /*out*/, std::vector<Window>* /*windows*/) {}

TableImpl::ItemRow TableImpl::RowOf(ItemKey key) const { return {ItemKeyStart(key), 0}; }

std::string TableImpl::RowText(const ItemRow& row) const {
  return "step " + std::to_string(row.start);
}

Status TableImpl::LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                                 void* stream) {
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceOutput(name_, item_columns_, out, /*weights=*/false));
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
  SamplerSource source{shared_from_this(), std::nullopt, sequence_length_, item_columns_};
  // Bad options are refused before the table looks for a GPU.
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceSampler(source, options));
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    REPLAYDB_RETURN_IF_ERROR(NeedTierLocked("NewDeviceSampler"));
  }
  source.device = Info().device;
  return engine::NewDeviceSampler(std::move(source), options);
}

}  // namespace engine
}  // namespace replaydb
