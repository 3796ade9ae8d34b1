#include "engine/gpu/device_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "util/host_buffers.h"

namespace replaydb::engine {
namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Where each array of a staging entry starts, for B windows.
struct StagingLayout {
  size_t slots, keys, steps, probabilities, weights, bytes;
  explicit StagingLayout(size_t b) {
    slots = 0;
    keys = slots + b * sizeof(int64_t);
    steps = keys + b * sizeof(uint64_t);
    probabilities = RoundUp(steps + b * sizeof(uint32_t), 16);
    weights = RoundUp(probabilities + b * sizeof(float), 16);
    bytes = RoundUp(weights + b * sizeof(float), 256);
  }
};

// Batches sampled to the host from a GPU table get their large buffers
// page-locked (once per kept buffer, util/host_buffers.h), so that the copy
// out of the device runs at pinned speed.
const util::HostPinner kPinner = {
    [](void* p, size_t bytes) { return kernels::RegisterHost(p, bytes).ok(); },
    [](void* p) { kernels::UnregisterHost(p); },
};

}  // namespace

Result<std::unique_ptr<DeviceTier>> DeviceTier::Create(const Options& options) {
  static std::once_flag pinner_installed;
  std::call_once(pinner_installed, [] {
    util::SetHostPinner(&kPinner);
    // Runs before the CUDA runtime's own teardown, registered earlier.
    std::atexit([] { util::ReleaseKeptHostBuffers(); });
  });
  std::unique_ptr<DeviceTier> tier(new DeviceTier(options));
  kernels::DeviceBlockIndex::Options index;
  index.device = options.device;
  if (options.lanes < 1 || (options.lanes > 1 && options.sequence_length != 1)) {
    return Status::InvalidArgument("DeviceTier: lanes " + std::to_string(options.lanes) +
                                   " with sequence_length " +
                                   std::to_string(options.sequence_length));
  }
  index.num_blocks = options.layout.num_blocks;
  index.block_steps = options.layout.block_steps * options.lanes;
  index.item_steps = options.item_steps;
  index.uniform_draws = options.uniform_draws;
  REPLAYDB_ASSIGN_OR_RETURN(tier->index_, kernels::DeviceBlockIndex::Create(index));
  REPLAYDB_ASSIGN_OR_RETURN(tier->write_stream_, DeviceStream::Create(options.device));
  REPLAYDB_ASSIGN_OR_RETURN(tier->writes_done_, kernels::DeviceEvent::Create(options.device));
  return tier;
}

DeviceTier::~DeviceTier() {
  epochs_.WaitAll();
  (void)write_stream_.Synchronize();
  for (Staging& s : ring_) kernels::FreePinned(s.pinned);
}

void DeviceTier::NewBlock(int64_t block, const void* address) {
  index_->SetBlockAddress(block, address);
  index_->SetNext(block, -1);
}

void DeviceTier::Link(int64_t block, int64_t next) { index_->SetNext(block, next); }

void DeviceTier::NewItem(int64_t slot, int64_t steps) {
  // A vector table's rows share their step's item steps, read at lane 0.
  index_->SetItemSteps(TierSlot(slot, 0), static_cast<uint32_t>(steps));
}

void DeviceTier::SetBlockKey(int64_t block, uint64_t key) { index_->SetBlockKey(block, key); }

void DeviceTier::PlaceLive(size_t position, int64_t slot) {
  index_->SetLive(static_cast<int64_t>(position), TierSlot(slot, 0));
}

Status DeviceTier::WaitFor(uint64_t epoch) { return epochs_.WaitFor(epoch); }

Result<uint64_t> DeviceTier::BeforeAccess(void* stream) {
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t stream_id, kernels::StreamId(stream));
  if (index_->dirty()) {
    REPLAYDB_RETURN_IF_ERROR(writes_done_.MakeStreamWait(write_stream_.handle()));
    // Queued gathers may still read entries the flush rewrites (a live
    // position that a removal refills): the flush waits for them on the
    // device, on every stream that has some in flight.
    REPLAYDB_RETURN_IF_ERROR(epochs_.ForLastOfEachStream(
        [&](const kernels::DeviceEvent& e) { return e.MakeStreamWait(write_stream_.handle()); }));
    REPLAYDB_RETURN_IF_ERROR(index_->Flush(write_stream_.handle()));
    REPLAYDB_RETURN_IF_ERROR(RecordWrites(write_stream_.handle()));
  }
  // A stream that already waits for the last record needs no second wait.
  if (stream_id != waited_stream_ || writes_recorded_ != waited_record_) {
    REPLAYDB_RETURN_IF_ERROR(writes_done_.MakeStreamWait(stream));
    waited_stream_ = stream_id;
    waited_record_ = writes_recorded_;
  }
  return stream_id;
}

Status DeviceTier::RecordWrites(void* stream) {
  REPLAYDB_RETURN_IF_ERROR(writes_done_.Record(stream));
  ++writes_recorded_;
  return Status::OK();
}

Result<uint64_t> DeviceTier::RecordAccess(void* stream, uint64_t stream_id) {
  kernels::DeviceEvent event;
  if (epochs_.has_spare()) {
    event = epochs_.TakeSpare();
  } else {
    REPLAYDB_ASSIGN_OR_RETURN(event, kernels::DeviceEvent::Create(options_.device));
  }
  REPLAYDB_RETURN_IF_ERROR(event.Record(stream));
  const uint64_t epoch = epochs_.Push(stream_id, std::move(event));
  // A path that never polls otherwise (samples drawn on the device) would
  // grow the queue without bound.
  if (++records_since_poll_ >= kPollEvery) {
    records_since_poll_ = 0;
    epochs_.Completed();
  }
  return epoch;
}

Result<DeviceTier::Staging*> DeviceTier::AcquireStaging(size_t bytes) {
  Staging& s = ring_[ring_next_];
  ring_next_ = (ring_next_ + 1) % kRing;
  if (s.epoch > epochs_.completed() && s.epoch > Completed()) {
    REPLAYDB_RETURN_IF_ERROR(WaitFor(s.epoch));
  }
  if (s.pinned_bytes < bytes) {
    kernels::FreePinned(s.pinned);
    s.pinned = nullptr;
    s.pinned_bytes = 0;
    const size_t want = std::max<size_t>(bytes, 4096);
    REPLAYDB_RETURN_IF_ERROR(kernels::AllocatePinned(want, &s.pinned));
    s.pinned_bytes = want;
  }
  return &s;
}

std::vector<kernels::GatherColumn> DeviceTier::GatherColumns(const DeviceSampleOutput& out) const {
  std::vector<kernels::GatherColumn> columns(out.columns.size());
  for (size_t c = 0; c < out.columns.size(); ++c) {
    columns[c].step_bytes = RowBytes(c);
    columns[c].block_offset = options_.layout.column_offset[c];
    columns[c].d_out = out.columns[c];
  }
  return columns;
}

Status DeviceTier::GatherHostDraws(const HostDraws& draws, const DeviceSampleOutput& out,
                                   void* stream) {
  const size_t b = draws.slots.size();
  const StagingLayout at(b);
  REPLAYDB_ASSIGN_OR_RETURN(Staging * s, AcquireStaging(at.bytes));
  auto* base = static_cast<std::byte*>(s->pinned);
  std::memcpy(base + at.slots, draws.slots.data(), b * sizeof(int64_t));
  std::memcpy(base + at.steps, draws.steps.data(), b * sizeof(uint32_t));
  kernels::SmallCopy copies[3];
  size_t n_copies = 0;
  if (out.keys != nullptr) {
    std::memcpy(base + at.keys, draws.keys.data(), b * sizeof(uint64_t));
    copies[n_copies++] = {base + at.keys, out.keys, b * sizeof(uint64_t)};
  }
  if (out.probabilities != nullptr) {
    if (draws.probabilities.empty()) {
      std::memset(base + at.probabilities, 0, b * sizeof(float));
    } else {
      std::memcpy(base + at.probabilities, draws.probabilities.data(), b * sizeof(float));
    }
    copies[n_copies++] = {base + at.probabilities, out.probabilities, b * sizeof(float)};
  }
  if (out.weights != nullptr && !draws.weights.empty()) {
    std::memcpy(base + at.weights, draws.weights.data(), b * sizeof(float));
    copies[n_copies++] = {base + at.weights, out.weights, b * sizeof(float)};
  }
  const std::vector<kernels::GatherColumn> columns = GatherColumns(out);
  kernels::GatherRequest request;
  request.batch = static_cast<int64_t>(b);
  request.sequence_length = options_.sequence_length;
  request.slots = reinterpret_cast<const int64_t*>(base + at.slots);
  request.steps = reinterpret_cast<const uint32_t*>(base + at.steps);
  request.columns = columns;
  request.d_mask = out.mask;
  request.copies = std::span<const kernels::SmallCopy>(copies, n_copies);
  // Slots and steps come from pinned memory the host wrote; the index is
  // flushed on write_stream_ (only a gather on that stream follows the
  // flush directly).
  request.overlap_prior = stream != write_stream_.handle();
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t stream_id, BeforeAccess(stream));
  request.early_reads = EarlyReads(stream_id);
  return Accessed(kernels::Gather(*index_, request, stream), stream, stream_id, &s->epoch);
}

Status DeviceTier::DrawAndGather(kernels::DevicePriorityTable& table, int64_t batch,
                                 kernels::DevicePriorityTable::SampleParams params,
                                 const DeviceSampleOutput& out, void* stream) {
  REPLAYDB_ASSIGN_OR_RETURN(Staging * s, AcquireStaging(0));
  const size_t slot_bytes = static_cast<size_t>(batch) * sizeof(int64_t);
  if (s->d_slots.size() < slot_bytes) {
    s->d_slots = DeviceBuffer();
    REPLAYDB_ASSIGN_OR_RETURN(s->d_slots, DeviceBuffer::Allocate(options_.device, slot_bytes));
  }
  params.d_slots = s->d_slots.as<int64_t>();
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t stream_id, BeforeAccess(stream));
  (void)EarlyReads(stream_id);  // no overlap: the gather reads what the draw writes
  Status launched = table.Sample(batch, params, out.keys, out.probabilities, out.weights, stream);
  if (launched.ok() && (!out.columns.empty() || out.mask != nullptr)) {
    const std::vector<kernels::GatherColumn> columns = GatherColumns(out);
    kernels::GatherRequest request;
    request.batch = batch;
    request.sequence_length = options_.sequence_length;
    request.slots = s->d_slots.as<int64_t>();
    request.steps = nullptr;  // the index's item_steps
    request.columns = columns;
    request.d_mask = out.mask;
    launched = kernels::Gather(*index_, request, stream);
  }
  return Accessed(launched, stream, stream_id, &s->epoch);
}

Status DeviceTier::DrawUniformAndGather(int64_t live, uint64_t seed, int64_t batch,
                                        const DeviceSampleOutput& out, void* stream) {
  const std::vector<kernels::GatherColumn> columns = GatherColumns(out);
  kernels::GatherRequest request;
  request.batch = batch;
  request.sequence_length = options_.sequence_length;
  request.slots = nullptr;  // drawn in the kernel
  request.steps = nullptr;  // the index's item_steps
  request.columns = columns;
  request.d_mask = out.mask;
  request.draw.live = live;
  request.draw.lanes = options_.lanes;
  request.draw.seed = seed;
  request.draw.d_keys = out.keys;
  request.draw.d_probabilities = out.probabilities;
  request.draw.d_weights = out.weights;
  request.overlap_prior = stream != write_stream_.handle();
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t stream_id, BeforeAccess(stream));
  request.early_reads = EarlyReads(stream_id);
  return Accessed(kernels::Gather(*index_, request, stream), stream, stream_id, nullptr);
}

Status DeviceTier::GatherToHost(std::span<const int64_t> slots, std::span<const uint32_t> steps,
                                std::vector<Tensor>* columns) {
  // Columns in page-locked memory (the large ones, util/host_buffers.h) are
  // written by the gather kernel itself, over PCIe; the others go through
  // device scratch and a copy after it.
  const size_t n = columns->size();
  if (host_scratch_.size() < n) host_scratch_.resize(n);
  DeviceSampleOutput out;
  out.columns.resize(n);
  std::vector<size_t> copied;
  for (size_t c = 0; c < n; ++c) {
    Tensor& t = (*columns)[c];
    const size_t bytes = t.size_bytes();
    if (util::PinHostBuffer(t.data(), bytes)) {
      Result<void*> mapped = kernels::HostMemoryOnDevice(t.data());
      if (mapped.ok()) {
        out.columns[c] = *mapped;
        continue;
      }
    }
    if (host_scratch_[c].size() < bytes) {
      host_scratch_[c] = DeviceBuffer();
      REPLAYDB_ASSIGN_OR_RETURN(host_scratch_[c], DeviceBuffer::Allocate(options_.device, bytes));
    }
    out.columns[c] = host_scratch_[c].data();
    copied.push_back(c);
  }
  HostDraws draws;
  draws.slots = slots;
  draws.steps = steps;
  REPLAYDB_RETURN_IF_ERROR(GatherHostDraws(draws, out, write_stream_.handle()));
  REPLAYDB_RETURN_IF_ERROR(write_stream_.Synchronize());
  for (const size_t c : copied) {
    Tensor& t = (*columns)[c];
    REPLAYDB_RETURN_IF_ERROR(
        kernels::CopyFromDevice(options_.device, t.data(), out.columns[c], t.size_bytes()));
  }
  return Status::OK();
}

Status DeviceTier::Scatter(std::span<const int64_t> slots, std::span<const ConstTensor> steps,
                           void* stream) {
  const size_t n = slots.size();
  REPLAYDB_ASSIGN_OR_RETURN(Staging * s, AcquireStaging(RoundUp(n * sizeof(int64_t), 256)));
  const int64_t lanes = options_.lanes;
  if (lanes == 1) {
    std::memcpy(s->pinned, slots.data(), n * sizeof(int64_t));
  } else {
    // A vector table's step: its lanes' rows, at the step's first lane.
    auto* tier_slots = static_cast<int64_t*>(s->pinned);
    for (size_t i = 0; i < n; ++i) tier_slots[i] = slots[i] < 0 ? -1 : TierSlot(slots[i], 0);
  }
  std::vector<kernels::ScatterColumn> columns(steps.size());
  for (size_t c = 0; c < steps.size(); ++c) {
    columns[c].step_bytes = RowBytes(c);  // a scatter entry is `lanes` rows
    columns[c].block_offset = options_.layout.column_offset[c];
    columns[c].d_src = steps[c].data;
  }
  kernels::ScatterRequest request;
  request.n = static_cast<int64_t>(n);
  request.slots = static_cast<const int64_t*>(s->pinned);
  request.columns = columns;
  request.rows = lanes;
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t stream_id, BeforeAccess(stream));
  const Status launched = kernels::Scatter(*index_, request, stream);
  if (std::find(scatter_streams_.begin(), scatter_streams_.end(), stream_id) ==
      scatter_streams_.end()) {
    scatter_streams_.push_back(stream_id);
  }
  // Even after a failed launch: later gathers wait for what was queued.
  const Status writes = RecordWrites(stream);
  // The stream is ordered after its own record (its work before the record
  // waited for every earlier one): its next access needs no wait.
  if (writes.ok()) {
    waited_stream_ = stream_id;
    waited_record_ = writes_recorded_;
  }
  scattered_ = true;
  REPLAYDB_RETURN_IF_ERROR(Accessed(launched, stream, stream_id, &s->epoch));
  return writes;
}

bool DeviceTier::EarlyReads(uint64_t stream_id) {
  auto it = std::find(scatter_streams_.begin(), scatter_streams_.end(), stream_id);
  if (it == scatter_streams_.end()) return true;
  scatter_streams_.erase(it);
  return false;
}

Status DeviceTier::Accessed(const Status& launched, void* stream, uint64_t stream_id,
                            uint64_t* epoch) {
  Result<uint64_t> recorded = RecordAccess(stream, stream_id);
  if (recorded.ok() && epoch != nullptr) *epoch = *recorded;
  if (!launched.ok()) return launched;
  return recorded.status();
}

Status DeviceTier::WriteFromHost(std::byte* dst, const void* src, size_t bytes) {
  return kernels::CopyToDevice(options_.device, dst, src, bytes);
}

Status DeviceTier::AwaitScatters() {
  if (!scattered_) return Status::OK();
  REPLAYDB_RETURN_IF_ERROR(writes_done_.Synchronize());
  scattered_ = false;
  return Status::OK();
}

}  // namespace replaydb::engine
