// DevicePriorityTable: item priorities in GPU memory, sampled and updated by
// CUDA kernels with no host round trip. Plain C++ header: host code includes
// this, never a CUDA header; streams are passed as void* (a cudaStream_t).
//
// Model: `capacity` slots, each empty or holding (item key, priority). The
// host side (a table's writers and evictions) changes the item set through
// Insert (or InsertAt)/Remove/SetPriority, which only stage the change in
// host memory; the next device call (Flush, Sample, UpdatePriorities)
// applies every staged change on the device first, in order. The learner's
// side samples and updates from device arrays on its own stream.
//
// Slots: by default the table chooses an item's slot (Insert). With
// Options::caller_slots the caller chooses it (InsertAt), so that a slot
// can mean something to the caller (the engine uses the item's first step
// position in the hot tier, block * block_steps + step-in-block: a kernel
// goes from a drawn slot, SampleParams::d_slots, straight to the window's
// block).
//
// Streams: every device call takes the caller's stream. The table works on an
// internal stream that first waits for the caller's stream (so inputs the
// caller produced are ready) and after the call's work the caller's stream
// waits for it (so outputs are ready for the caller's next kernel). No call
// synchronises the host with the device except where it says so.
//
// Sampling is exact to fp64 sums: priority^alpha is kept per slot, partial
// sums over fixed-size blocks of slots are fp64 and recomputed from their
// slots whenever one changes (never adjusted by deltas, so they cannot
// drift), and a draw never lands on a slot of priority 0.
//
// Thread safety: not thread-safe; the owning table serialises calls.
//
// Implementation notes (device_priority_table.cu, priority_*.cuh):
// - A slot holds priority^alpha as float (priority 0 -> 0; a positive
//   priority is kept within [smallest positive float, FLT_MAX], so it is
//   never drawn with probability 0 nor overflows); the priority itself is
//   kept as double for ReadPriorities. Sums are fp64 over segments of 1024
//   slots, then over segments of 1024 sums, until one level has at most
//   1024 entries; a draw is one warp descending that tree.
// - Memory per slot of capacity: 52-84 bytes of device memory (20 for key,
//   priority and value; 2-4 hash-table entries of 16 bytes; 1 more with
//   track_updates, the slot's marks), and on the host
//   5 bytes per slot (13 with caller_slots: each slot's key) plus 32-64 per
//   item (key -> slot map) plus 24 per change staged since the last device
//   call.
#ifndef REPLAYDB_KERNELS_PRIORITY_DEVICE_PRIORITY_TABLE_H_
#define REPLAYDB_KERNELS_PRIORITY_DEVICE_PRIORITY_TABLE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "replaydb/status.h"
#include "replaydb/types.h"

namespace replaydb::kernels {

class DevicePriorityTable {
 public:
  struct Options {
    int device = 0;
    // Most items held at once. REQUIRES: 1 <= capacity <= 2^31 - 1.
    int64_t capacity = 0;
    // Probability proportional to priority^alpha. REQUIRES: finite, >= 0.
    double alpha = 1.0;
    // Seed of the draws (Philox counter-based); every Sample call advances
    // the counter, so a table's sequence of batches is reproducible.
    uint64_t seed = 0;
    // false: the table chooses each item's slot; Insert places items and
    // InsertAt fails. true: the caller chooses it; InsertAt places items
    // and Insert fails (FailedPrecondition either way). Either way Remove,
    // SetPriority, UpdatePriorities and Sample work by key alike.
    // Default: false.
    bool caller_slots = false;
    // Marks every slot UpdatePriorities sets, for CollectUpdated (one more
    // byte of device memory per slot). Default: false.
    bool track_updates = false;
  };

  // The marks of Options::track_updates: UpdatePriorities sets both on
  // every slot it writes, and each is cleared by its own collection, so that
  // two readers (the engine's log and its checkpoints) each learn of every
  // update.
  static constexpr int kLogMark = 1;
  static constexpr int kCheckpointMark = 2;

  // Host memory that CollectUpdated fills (pinned, written by the device).
  class Updated {
   public:
    virtual ~Updated() = default;
    // Waits for the collection queued into it; then the accessors below
    // read it.
    virtual Status Wait() = 0;
    // Items collected, at most the max_items it was made with.
    virtual int64_t count() const = 0;
    // More were marked than fit: their marks stay, for the next collection.
    virtual bool more() const = 0;
    virtual const uint64_t* keys() const = 0;
    virtual const double* priorities() const = 0;
  };

  struct SampleParams {
    // >= 0: write importance weights (N * P(i))^-beta divided by the
    // largest: over the batch, or with table_weights over every item
    // present (see Sample).
    double beta = -1;
    // Divide weights by the largest weight any item present could get,
    // (N * P_min)^-beta with P_min the smallest probability of an item of
    // priority > 0 (prioritized replay's definition, the engine's
    // WeightNormalization::kBuffer), rather than by the batch's largest.
    // Costs one pass over the table's values per call. Default: false.
    bool table_weights = false;
    // One draw from each of `batch` equal strata of the probability mass.
    bool stratified = false;
    // Non-null: Sample also writes the slot of each draw, d_slots[batch]
    // (device memory); -1 for a draw that found no item (key UINT64_MAX,
    // probability 0; see Sample), which tells it apart from an item whose
    // key is UINT64_MAX. Default: nullptr (no slots written).
    int64_t* d_slots = nullptr;
  };

  // NotSupported without a usable GPU (the reason in the message);
  // InvalidArgument for bad options; ResourceExhausted when device memory
  // runs out (naming the bytes asked for).
  static Result<std::unique_ptr<DevicePriorityTable>> Create(const Options& options);
  virtual ~DevicePriorityTable() = default;

  // ---- host-side changes, staged until the next device call ----

  // AlreadyExists if `key` is present; ResourceExhausted when all slots are
  // taken; InvalidArgument for a negative or non-finite priority;
  // FailedPrecondition with options.caller_slots (use InsertAt). A key
  // removed earlier may be inserted again; it is then a new item. Every
  // 64-bit value is a valid key.
  virtual Status Insert(ItemKey key, double priority) = 0;
  // Insert at the caller's `slot`. FailedPrecondition unless
  // options.caller_slots. InvalidArgument when slot is outside [0, capacity)
  // or for a negative or non-finite priority; AlreadyExists if `key` is
  // present; FailedPrecondition when `slot` holds another item (the message
  // names its key). A slot is free again as soon as Remove of its key
  // returns: a Remove and an InsertAt into the same slot may be staged
  // together and apply in order.
  virtual Status InsertAt(ItemKey key, double priority, int64_t slot) = 0;
  // NotFound if absent. Frees the item's slot.
  virtual Status Remove(ItemKey key) = 0;
  // NotFound if absent; InvalidArgument for a bad priority.
  virtual Status SetPriority(ItemKey key, double priority) = 0;
  // Items present counting staged changes.
  virtual int64_t size() const = 0;

  // ---- device calls ----

  // Applies staged changes on `stream`.
  virtual Status Flush(void* stream) = 0;

  // Draws `batch` items with probability proportional to priority^alpha and
  // writes d_keys[batch], d_probabilities[batch], when params.beta >= 0
  // d_weights[batch] (else d_weights may be null) and, when params.d_slots
  // is non-null, the draws' slots there. FailedPrecondition when
  // the table has no item of priority > 0 (checked on the host from the
  // staged state; no device sync).
  //
  // Details: the probability is value / total in fp64, written as float (it
  // underflows to 0 only below about 1e-45). N in the weights is the number
  // of items present; it cancels in the normalisation, so a weight is
  // (P_min / P(i))^beta with P_min the batch's smallest probability, or
  // with params.table_weights the smallest of any item present (weights
  // are capped at 1).
  // Stratum i covers [i, i+1) / batch of the mass in slot order (the
  // caller's order with caller_slots). The host's FailedPrecondition check
  // sees Insert/InsertAt/Remove/SetPriority but not UpdatePriorities: if
  // device-side updates have set every priority to 0, the call succeeds and
  // every draw gets key UINT64_MAX, probability 0, weight 0 and slot -1.
  // REQUIRES: batch <= 2^31 - 1.
  virtual Status Sample(int64_t batch, const SampleParams& params, uint64_t* d_keys,
                        float* d_probabilities, float* d_weights, void* stream) = 0;

  // Sets the priorities of n items given by key, from device arrays. Keys
  // not present are skipped and counted (SkippedUpdates). When a key
  // appears more than once, the last occurrence wins. Negative or
  // non-finite priorities are skipped and counted too (the data is on the
  // device; the host cannot reject it without a copy). Work is O(n log n +
  // n * block size), never proportional to capacity.
  //
  // Details: skipped entries are dropped before duplicates are resolved, so
  // the last *valid* occurrence of a key wins (a bad value does not undo an
  // earlier good one in the same call). Up to 65536 updates run as one
  // cooperative kernel (last occurrence by atomicMax on the key's hash
  // entry; O(n + n * block size)); more are sorted by slot with
  // cub::DeviceRadixSort. REQUIRES: n <= 2^31 - 1.
  virtual Status UpdatePriorities(const uint64_t* d_keys, const float* d_priorities, int64_t n,
                                  void* stream) = 0;

  // Updates skipped so far (unknown keys, bad values). Synchronises.
  virtual Result<int64_t> SkippedUpdates() = 0;

  // Room for collections of up to max_items (>= 1) items.
  virtual Result<std::unique_ptr<Updated>> NewUpdated(int64_t max_items) = 0;
  // Queues on the table's stream, after every call made before it, the
  // collection into *into of the items whose priority UpdatePriorities set
  // since the last collection of `mark` (kLogMark or kCheckpointMark): each
  // item's key and current priority, once, however often it was set; their
  // marks are cleared. Returns without waiting: into->Wait() does. `into`
  // (from this table's NewUpdated) must not be collected into again before
  // that. FailedPrecondition without Options::track_updates. O(capacity)
  // device work, none per update.
  virtual Status CollectUpdated(int mark, Updated* into) = 0;

  // The table's probability mass: the sum of priority^alpha over the items
  // present, after applying staged changes and every device call made
  // before (the sum of the top level of sums, as Sample draws against).
  // Several tables sampled as one (shards) draw from each in proportion to
  // it. Synchronises the table's stream (one copy of at most 8 KiB).
  virtual Result<double> Mass() = 0;

  // For tests and tools: the priority held for each key in `keys` (-1 when
  // absent), after applying staged changes. Synchronises.
  virtual Result<std::vector<double>> ReadPriorities(const std::vector<ItemKey>& keys) = 0;
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_PRIORITY_DEVICE_PRIORITY_TABLE_H_
