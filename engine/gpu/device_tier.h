// DeviceTier: the GPU side of a table whose hot tier a GPU can address
// (blocks in device memory or in pinned host memory) or whose priorities
// live on a GPU. It keeps the device's copy of the block index, launches
// gathers and scatters, and tracks when the GPU is done with blocks.
//
// Ordering, without host syncs on the hot path:
// - Writes (index flushes, scatters) are chained through one event,
//   writes_done: each write first waits for it and then re-records it, so it
//   always covers every write queued so far. Every gather's stream waits for
//   it before the gather.
// - Every launch that reads or writes blocks (gather, scatter) records an
//   access epoch. A trajectory's blocks that leave the tier while accesses
//   are in flight are freed only once Completed() reaches the epoch at
//   their removal (the table defers them), so a block is never reused
//   before the GPU is done with it. AccessEpochs keeps the events and polls
//   as few of them as it can.
// - Host-drawn windows reach the gather kernel through a ring of pinned
//   staging buffers that the kernel reads directly; an entry is reused only
//   after the gather that read it completed.
//
// Thread safety: not thread-safe; the owning table calls it under its mutex.
#ifndef REPLAYDB_ENGINE_GPU_DEVICE_TIER_H_
#define REPLAYDB_ENGINE_GPU_DEVICE_TIER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/gpu/access_epochs.h"
#include "engine/table/table_layout.h"
#include "kernels/gather/block_gather.h"
#include "kernels/runtime/device_memory.h"
#include "kernels/priority/device_priority_table.h"
#include "replaydb/device.h"
#include "replaydb/table.h"

namespace replaydb::engine {

class DeviceTier {
 public:
  struct Options {
    int device = 0;
    TableLayout layout;
    int64_t sequence_length = 1;
    // Keep each item's real window length on the device (windows drawn on
    // the device, whose lengths the host never sees).
    bool item_steps = false;
    // Keep the live items' slots densely on the device, for uniform draws
    // inside the gather kernel (DrawUniformAndGather). REQUIRES: item_steps.
    bool uniform_draws = false;
    // A vector table's environments (layout: its stored layout, a step
    // being every environment's row). The device sees each block as
    // layout.block_steps * lanes steps of one row: lane n of the table's
    // slot `slot` is the tier slot slot * lanes + n (TierSlot), which is
    // what gathers take. Uniform draws pick a live item, then one of its
    // lanes (each row is an item). REQUIRES: lanes == 1 unless
    // sequence_length == 1.
    int64_t lanes = 1;
  };

  static Result<std::unique_ptr<DeviceTier>> Create(const Options& options);
  // Waits for the GPU to finish what this tier queued.
  ~DeviceTier();

  int device() const { return options_.device; }
  // The tier slot of lane `lane` of the table's slot `slot` (see lanes).
  int64_t TierSlot(int64_t slot, int64_t lane) const { return slot * options_.lanes + lane; }
  // The tier's own stream (index flushes, host-path gathers and draws).
  void* stream() const { return write_stream_.handle(); }

  // ---- the device's block index (staged until the next device call) ----
  void NewBlock(int64_t block, const void* address);
  void Link(int64_t block, int64_t next);
  // REQUIRES: options.item_steps
  void NewItem(int64_t slot, int64_t steps);
  // REQUIRES: options.uniform_draws. The key of `block`'s first step.
  void SetBlockKey(int64_t block, uint64_t key);
  // REQUIRES: options.uniform_draws. Live item `position` starts at `slot`.
  void PlaceLive(size_t position, int64_t slot);
  bool item_steps() const { return options_.item_steps; }
  bool uniform_draws() const { return options_.uniform_draws; }

  // ---- device accesses to blocks ----
  // Epoch of the last access launched; 0 before any.
  uint64_t launched() const { return epochs_.launched(); }
  // The latest epoch known complete, as of the last poll (no CUDA call).
  uint64_t completed() const { return epochs_.completed(); }
  // The latest epoch known complete; polls, never blocks.
  uint64_t Completed() { return epochs_.Completed(); }
  // Blocks the host until `epoch` is complete.
  Status WaitFor(uint64_t epoch);

  // ---- device work ----
  struct HostDraws {
    std::span<const int64_t> slots;    // tier slots (TierSlot); < 0: no item
    std::span<const uint32_t> steps;   // real steps per window
    std::span<const uint64_t> keys;
    std::span<const float> probabilities;  // empty: write zeros if out has room
    std::span<const float> weights;        // empty: none
  };
  // Gathers host-drawn windows into `out` on `stream`.
  Status GatherHostDraws(const HostDraws& draws, const DeviceSampleOutput& out, void* stream);
  // Draws `batch` items with `table` on the device and gathers their
  // windows into `out` on `stream`. REQUIRES: options.item_steps
  Status DrawAndGather(kernels::DevicePriorityTable& table, int64_t batch,
                       kernels::DevicePriorityTable::SampleParams params,
                       const DeviceSampleOutput& out, void* stream);
  // Draws `batch` items uniformly from the first `live` placed ones and
  // gathers them, in one kernel, into `out` on `stream`; probabilities are
  // 1 / live and weights (when out.weights is set) 1.
  // REQUIRES: options.uniform_draws, live >= 1.
  Status DrawUniformAndGather(int64_t live, uint64_t seed, int64_t batch,
                              const DeviceSampleOutput& out, void* stream);
  // Gathers host-drawn windows (tier slots) of a device-memory tier into
  // host tensors (SampleBatch::columns, already shaped) and waits for them.
  Status GatherToHost(std::span<const int64_t> slots, std::span<const uint32_t> steps,
                      std::vector<Tensor>* columns);
  // Writes step i of every column of `steps` (device arrays [n, ...] of the
  // stored layout's steps) to the table's slot slots[i] (< 0: skip) on
  // `stream`.
  Status Scatter(std::span<const int64_t> slots, std::span<const ConstTensor> steps,
                 void* stream);
  // Copies host bytes into a device-memory block; complete on return.
  Status WriteFromHost(std::byte* dst, const void* src, size_t bytes);
  // Blocks the host until every scatter queued so far has landed (for host
  // readers of pinned blocks). Cheap when there were none.
  Status AwaitScatters();

 private:
  struct Staging {
    void* pinned = nullptr;
    size_t pinned_bytes = 0;
    DeviceBuffer d_slots;  // slots drawn on the device
    uint64_t epoch = 0;    // the access that last used it
  };
  static constexpr int kRing = 16;
  // RecordAccess polls for completed accesses once per this many records,
  // so that spare events come back without a poll per launch.
  static constexpr int kPollEvery = 32;

  explicit DeviceTier(const Options& options) : options_(options) {}
  // Flushes staged index changes, then makes `stream` wait for all writes.
  // Returns the stream's id (kernels::StreamId).
  Result<uint64_t> BeforeAccess(void* stream);
  // Records writes_done_ on `stream`, behind every write queued so far.
  Status RecordWrites(void* stream);
  // Records an access on `stream`; returns its epoch.
  Result<uint64_t> RecordAccess(void* stream, uint64_t stream_id);
  // After queueing kernels that access the blocks on `stream`, `launched`
  // being how that went: records the access (its epoch to *epoch, which may
  // be null) even when it failed, since a failed call may have queued some
  // launches (one per 16 columns, or a draw before a gather) before the one
  // that failed, and neither the blocks nor staging may be reused under
  // those. Returns the launch's error, else the record's.
  Status Accessed(const Status& launched, void* stream, uint64_t stream_id, uint64_t* epoch);
  // Whether a gather about to be queued on stream `stream_id` may load
  // block bytes before the kernel before it is done
  // (kernels::GatherRequest::early_reads): not when that kernel is a
  // scatter, which writes blocks. The gather, once queued, is the kernel
  // before the next one, so the stream leaves scatter_streams_.
  bool EarlyReads(uint64_t stream_id);
  // The next staging entry with at least `bytes` of pinned memory, waiting
  // for its last access if needed.
  Result<Staging*> AcquireStaging(size_t bytes);
  std::vector<kernels::GatherColumn> GatherColumns(const DeviceSampleOutput& out) const;
  // Bytes of one tier slot of column c: one lane's row of a stored step.
  size_t RowBytes(size_t c) const {
    return options_.layout.column_bytes[c] / static_cast<size_t>(options_.lanes);
  }

  const Options options_;
  std::unique_ptr<kernels::DeviceBlockIndex> index_;
  DeviceStream write_stream_;
  kernels::DeviceEvent writes_done_;
  bool scattered_ = false;  // a scatter was queued since the last AwaitScatters
  // Streams (ids) whose last kernel from this tier is a scatter.
  std::vector<uint64_t> scatter_streams_;
  AccessEpochs<kernels::DeviceEvent> epochs_;
  int records_since_poll_ = 0;
  // Records of writes_done_ so far, and the stream that last waited for
  // one (its id) with the record it waited for.
  uint64_t writes_recorded_ = 0;
  uint64_t waited_stream_ = 0;
  uint64_t waited_record_ = 0;
  Staging ring_[kRing];
  int ring_next_ = 0;
  // GatherToHost's device outputs, one per column.
  std::vector<DeviceBuffer> host_scratch_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_DEVICE_TIER_H_
