// Tables, their writers and samples.
#ifndef REPLAYDB_TABLE_H_
#define REPLAYDB_TABLE_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/types.h"

namespace replaydb {

// How a trajectory ended.
enum class EndReason : uint8_t {
  kTerminal = 0,   // the episode reached a terminal state
  kTruncated = 1,  // cut short (time limit, actor stopped)
};
std::string_view EndReasonName(EndReason r);  // "terminal", "truncated"

// Where a trajectory is: in the hot tier (sampleable) or only in the cold
// tier (the database's RocksDB store; Table::Load brings it back).
enum class Tier : uint8_t { kHot = 0, kCold = 1 };
std::string_view TierName(Tier t);  // "hot", "cold"

// A trajectory as Table::ListTrajectories and ReadTrajectory describe it.
struct TrajectoryInfo {
  uint64_t id = 0;
  int64_t length = 0;  // steps
  bool ended = false;
  EndReason end_reason = EndReason::kTruncated;  // when ended
  Tier tier = Tier::kHot;
  // Live items: sampleable now (hot), or once loaded (cold).
  int64_t live_items = 0;
};

// Which trajectories Table::ListTrajectories returns.
struct TrajectoryFilter {
  // Only ids >= from. Default: 0.
  uint64_t from = 0;
  // At most this many (the lowest ids that match); 0: all. Default: 0.
  size_t limit = 0;
  // Only lengths in [min_length, max_length]. Default: any.
  int64_t min_length = 0;
  int64_t max_length = std::numeric_limits<int64_t>::max();
  // Only ended (true) or open (false) ones. Default: both.
  std::optional<bool> ended;
  // Only those in this tier. Default: both.
  std::optional<Tier> tier;
};

// Steps of one trajectory read by Table::ReadTrajectory, in host memory
// that belongs to this struct.
struct TrajectorySteps {
  TrajectoryInfo info;
  int64_t first = 0;  // the first step read
  // One per table column, in schema order: [steps read, column shape...].
  std::vector<Tensor> columns;
  // [steps read]: each step's priority as appended (TableSpec::step_priority
  // turns them into item priorities).
  std::vector<double> step_priorities;
};

// A batch of B items, each a window of L steps. All buffers live in host
// memory and belong to the batch.
struct SampleBatch {
  int64_t batch_size = 0;       // B
  int64_t sequence_length = 0;  // L
  // One per table column, in schema order: dtype of the column, shape
  // [B, L, column shape...]. Padded steps are zero.
  std::vector<Tensor> columns;
  std::vector<ItemKey> keys;             // [B]
  std::vector<double> probabilities;     // [B] the chance this draw had
  std::vector<double> priorities;        // [B] the items' priorities when drawn
  // [B] importance weights when SampleOptions::importance_beta >= 0, else
  // empty.
  std::vector<double> weights;
  std::vector<uint8_t> mask;             // [B * L] 1 = real step, 0 = padding
  std::vector<uint32_t> times_sampled;   // [B] counting this sample
  // [B] each item's place in its table's insertion order: larger is
  // inserted later. A FIFO, LIFO or heap table numbers its items from its
  // host's clock (nanoseconds since the epoch, ticking every millisecond),
  // so that the shards of one table compare (docs/sharding.md); others count
  // from 1. Empty where a GPU drew the batch.
  std::vector<uint64_t> insertion_order;
};

// Device pointers (memory of the table's GPU, see TableInfo::device) that
// Table::SampleToDevice and LookupToDevice write, each with room for
// batch_size values.
struct DeviceSampleOutput {
  uint64_t* keys = nullptr;
  float* probabilities = nullptr;
  // Written when SampleOptions::importance_beta >= 0; may be null otherwise.
  float* weights = nullptr;
  // Empty, or one pointer per table column in schema order, each with room
  // for [batch_size, L, column shape...] values of the column's dtype: the
  // windows' step data, padded steps zero. Empty gathers no step data.
  std::vector<void*> columns;
  // May be null; else [batch_size * L]: 1 = real step, 0 = padding.
  uint8_t* mask = nullptr;
};

// A batch in device memory that a DeviceSampler owns, lent to the caller
// from Next until Release.
struct DeviceBatch {
  int64_t batch_size = 0;       // B
  int64_t sequence_length = 0;  // L
  // One per column, in schema order: device pointer to [B, L, shape...].
  std::vector<void*> columns;
  uint64_t* keys = nullptr;           // [B]
  float* probabilities = nullptr;     // [B]
  float* weights = nullptr;           // [B] when importance_beta >= 0, else null
  uint8_t* mask = nullptr;            // [B * L]
  int64_t id = -1;                    // which of the sampler's buffers; for Release
};

struct DeviceSamplerOptions {
  // Items per batch. REQUIRES: 1 <= batch_size <= 2^24 (as Table::Sample),
  // and a batch's device memory (B x L steps of every column and the mask)
  // at most kMaxSampleBytes: NewDeviceSampler refuses others.
  int64_t batch_size = 256;
  // Batches gathered ahead of the learner (k). Default: 2.
  // REQUIRES: 1 <= in_flight <= 16.
  int in_flight = 2;
  // timeout applies to each draw the sampler makes in the background;
  // importance_beta and stratified to every batch. gather must be true.
  SampleOptions sample;
};

// Keeps `in_flight` batches sampled and gathered ahead of the learner, in
// buffers of its own, on a CUDA stream of its own, from a background
// thread. Not thread-safe (one learner thread); destroying it waits for its
// work and frees the buffers (batches not released are then invalid).
class DeviceSampler {
 public:
  virtual ~DeviceSampler() = default;

  // The oldest gathered batch, waiting up to `timeout` for one. `stream`
  // (a cudaStream_t of the table's device; nullptr: the default stream)
  // waits on the device for the batch's gather: the call does not wait for
  // the GPU. The batch stays valid until Release. DeadlineExceeded when no
  // batch came in time; a sampling error (the table closed, a rate-limiter
  // timeout in the background) is returned here. ResourceExhausted when all
  // in_flight batches are lent out and none was released.
  virtual Status Next(void* stream, DeviceBatch* out,
                      std::chrono::milliseconds timeout = kWaitForever) = 0;
  // Gives a batch back once the work queued on `stream` (which may still
  // read it) is done; the sampler then gathers a new batch into it. Does
  // not wait for the GPU.
  virtual Status Release(const DeviceBatch& batch, void* stream) = 0;
};

// What UpdatePriorities did.
struct PriorityUpdateResult {
  int64_t updated = 0;
  // Keys no longer present (evicted, removed, never created): skipped.
  int64_t skipped = 0;
};

struct RateLimiterInfo {
  RateLimiterSpec spec;
  int64_t inserts = 0;
  int64_t samples = 0;
  int64_t deletes = 0;
  int64_t blocked_inserts = 0;  // writer calls that had to wait
  int64_t blocked_samples = 0;  // sample calls that had to wait
};

// What a table's draws are proportional to (Table::Mass), for sampling
// several tables (shards) as one: draw n_s ~ Multinomial(B, M_s / sum M)
// from shard s; a draw from shard s picks an item with probability
// m / M_s, so over the shards with probability m / sum M.
struct SamplingMass {
  // Prioritized: the sum of priority^priority_exponent over the live items
  // (+inf where it overflows a double; 0 when every priority is 0, and the
  // host's draws are then uniform over `items`). Uniform: `items`.
  double total = 0;
  int64_t items = 0;  // live items
  // Prioritized: the smallest priority > 0 of a live item (0 when none has
  // one), what buffer-wide importance weights are measured against
  // (WeightNormalization::kBuffer); 0 too where the priorities live on a GPU
  // (TableSpec::priority_device). Uniform: 0.
  double smallest_priority = 0;
};

struct TableInfo {
  std::string name;
  int64_t num_steps = 0;              // steps held in the hot tier
  int64_t num_items = 0;              // live (sampleable) items
  int64_t num_trajectories = 0;       // trajectories in the hot tier
  int64_t num_open_trajectories = 0;  // of those, not yet ended
  // Where the hot tier is: "host", "pinned" (host memory mapped for the
  // GPUs) or "device:N".
  std::string placement;
  // The GPU the table's kernels run on (device placement, pinned memory, or
  // priorities on a device); -1 when it uses none.
  int32_t device = -1;
  int64_t bytes_used = 0;             // hot-tier bytes of blocks in use
  int64_t bytes_reserved = 0;         // hot-tier bytes obtained from the system
  int64_t bytes_capacity = 0;         // hot-tier capacity in bytes
  int64_t blocks_used = 0;
  int64_t blocks_capacity = 0;
  int64_t steps_inserted = 0;         // all steps ever appended
  int64_t items_inserted = 0;         // all items ever created
  int64_t items_sampled = 0;          // all draws ever made
  int64_t items_removed = 0;          // removed by max_times_sampled
  int64_t evicted_trajectories = 0;
  int64_t evicted_items = 0;
  int64_t priority_updates = 0;          // priorities changed by UpdatePriorities
  int64_t priority_updates_skipped = 0;  // keys that were no longer present
  // The largest priority given so far (1.0 before any): what steps appended
  // without a priority get.
  double max_priority_seen = 1.0;
  RateLimiterInfo rate_limiter;
  // The cold tier (TableSpec::spill): trajectories stored only in the
  // database's RocksDB store, their steps and step bytes.
  int64_t cold_trajectories = 0;
  int64_t cold_steps = 0;
  int64_t cold_bytes = 0;
  int64_t spilled_trajectories = 0;  // spilled by eviction or rotation (all time)
  int64_t spilled_bytes = 0;         // step bytes those spills wrote
  int64_t loaded_trajectories = 0;   // brought back by Load or rotation
  int64_t rotations = 0;             // rotations done
  // Trajectories waiting to be written out; their blocks come back after.
  int64_t spill_queue = 0;
};

// Appends the steps of one trajectory at a time. After End(), the next
// Append starts a new trajectory. Not thread-safe: use one writer per thread
// (any number of writers may run in parallel). Destroying a writer ends an
// open trajectory as kTruncated without waiting: padded items the rate
// limiter does not admit at once are not created.
//
// Eviction: when the hot tier is full, whole trajectories leave it, the
// oldest ended one first and the oldest open one only when none has ended.
// After its open trajectory was evicted, a writer's next Append or End
// returns FailedPrecondition naming it, and the Append after that starts a
// new trajectory.
class TrajectoryWriter {
 public:
  virtual ~TrajectoryWriter() = default;

  // Appends one step: `step` holds one tensor per column, in schema order,
  // each of the column's dtype and shape. `priority` (finite, >= 0) is the
  // step's priority, which TableSpec::step_priority turns into item
  // priorities; without one the step counts as TableInfo::max_priority_seen.
  // May block on the rate limiter (for the item this step completes) up to
  // WriterOptions::timeout. On any error nothing is stored.
  virtual Status Append(std::span<const ConstTensor> step,
                        std::optional<double> priority = std::nullopt) = 0;

  // Appends n steps: each tensor is [n, column shape...]; `priorities` is
  // empty or holds n step priorities. Equivalent to n calls of Append; on an
  // error the steps before the failing one stay.
  // Into a table in device memory (Append too): the rows are copied into
  // pinned host memory the writer keeps (up to 16 MiB, or one row if
  // larger, in each of two sets that calls use by turns, so that a call
  // does not wait for the previous one's kernel) and a kernel scatters them
  // from there into their blocks, one launch for as many steps as the rate
  // limiter and the free blocks admit at once; the inputs may be reused
  // once the call returns, and every later sample sees the steps.
  virtual Status AppendMany(std::span<const ConstTensor> steps,
                            std::span<const double> priorities = {}) = 0;

  // Ends the current trajectory. With Padding::kTail this creates the padded
  // items of its last steps, which may block on the rate limiter; after a
  // DeadlineExceeded the trajectory is ended and calling End again creates
  // the items still missing. Ending an empty trajectory is a no-op. A
  // `reason` that is not an EndReason value is InvalidArgument naming it,
  // and the trajectory stays open.
  virtual Status End(EndReason reason) = 0;

  // Id of the current trajectory; 0 before its first step.
  virtual uint64_t trajectory_id() const = 0;
  // Steps appended to the current trajectory.
  virtual int64_t num_steps() const = 0;
};

// Appends one step for each of N environments at once; environment i writes
// its own trajectory. Not thread-safe (one thread at a time).
class VectorWriter {
 public:
  virtual ~VectorWriter() = default;

  // Appends one step to each environment's trajectory: each tensor is
  // [N, column shape...]. Validation errors store nothing. Any other failure
  // for one environment (a rate-limiter timeout, its trajectory evicted)
  // does not stop the others: the call returns the first such error, naming
  // the environment, and that environment alone lacks the step.
  // `priorities` is empty or holds one step priority per environment.
  // Into a table in device memory, the rows are copied into pinned host
  // memory the writer keeps (up to 16 MiB, or one row if larger) and a
  // kernel scatters them from there into their blocks, 16 MiB at a time;
  // the inputs may be reused once the call returns, and every later sample
  // sees the steps.
  virtual Status Append(std::span<const ConstTensor> steps,
                        std::span<const double> priorities = {}) = 0;
  // Ends environment `env`'s trajectory; its next step starts a new one.
  // A `reason` that is not an EndReason value is InvalidArgument (here and
  // in EndMany), and nothing is ended.
  virtual Status End(size_t env, EndReason reason) = 0;
  // End of every environment in `envs` (a simulator's done environments),
  // with one hold of the table's lock and one log sync rather than one per
  // environment. Repeats, and environments whose trajectory already ended,
  // are no-ops. An environment out of range is InvalidArgument naming it,
  // and nothing is ended. One environment's error (its trajectory evicted)
  // does not stop the others: the first is returned, naming the environment.
  virtual Status EndMany(std::span<const size_t> envs, EndReason reason) = 0;

  virtual size_t num_envs() const = 0;
  // Id of environment env's current trajectory; 0 before its first step.
  virtual uint64_t trajectory_id(size_t env) const = 0;
  // The threads each append's work is split over: WriterOptions::threads,
  // or when that is 0 the automatic count (one per 512 environments, up to 8
  // and half the hardware threads); never more than the environments of a
  // vector writer of single trajectories. 1: the caller's thread alone.
  virtual int threads() const = 0;

  // Append from device memory (a GPU simulator's arrays): each tensor's data
  // is a device pointer of the table's GPU ([N, column shape...]); `stream`
  // (a cudaStream_t) orders the read after the work that produced them. One
  // kernel writes the step into device blocks, or into pinned host blocks
  // over PCIe; no host copy is made. Returns once the work is queued: the
  // inputs may be overwritten by work queued on `stream` afterwards, and
  // every later sample sees the steps. Tables whose hot tier a GPU cannot
  // address (plain host memory): FailedPrecondition. Otherwise as Append.
  virtual Status AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                                  std::span<const double> priorities = {}) = 0;
};

// Table::NewVectorWriter's num_envs at most.
inline constexpr size_t kMaxVectorWriterEnvs = size_t{1} << 24;
// The largest batch one Sample, SampleToDevice or DeviceSampler takes.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 24;
// The most host memory one Sample or Lookup may need for its batch: B x L
// steps of every column and the mask, and B keys, probabilities,
// priorities, weights and sample counts. 1 TiB.
inline constexpr uint64_t kMaxSampleBytes = uint64_t{1} << 40;

// A named table of trajectories. Obtained from DB; thread-safe. A handle
// stays valid after DropTable or DB close, but calls then fail with
// FailedPrecondition (or Cancelled while waiting).
class Table {
 public:
  virtual ~Table() = default;

  // The current spec (a copy: SetRateLimiter may change it concurrently).
  virtual TableSpec spec() const = 0;
  virtual const std::string& name() const = 0;

  virtual Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& options = {}) = 0;
  // InvalidArgument unless 1 <= num_envs <= kMaxVectorWriterEnvs;
  // ResourceExhausted, naming the count, when the writer's per-environment
  // state cannot be allocated.
  virtual Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t num_envs,
                                                                const WriterOptions& options = {}) = 0;

  // Draws batch_size items with the table's selector into `out`, reusing
  // its buffers when the shapes match. Blocks on the rate limiter up to
  // options.timeout. A window never crosses a trajectory boundary.
  // ResourceExhausted, naming the bytes, when the batch would need more than
  // kMaxSampleBytes of host memory, more than the machine's physical memory,
  // or its buffers cannot be allocated: the buffers are sized before
  // anything is drawn, so nothing is then drawn.
  virtual Status Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) = 0;
  Result<SampleBatch> Sample(int64_t batch_size, const SampleOptions& options = {});

  // Sets the priorities of the items `keys` (finite, >= 0), in order, so the
  // last of repeated keys wins. Keys no longer present are skipped and
  // counted, never applied to another item. A bad priority or a size
  // mismatch is InvalidArgument and nothing is applied. `result` may be null.
  virtual Status UpdatePriorities(std::span<const ItemKey> keys,
                                  std::span<const double> priorities,
                                  PriorityUpdateResult* result = nullptr) = 0;

  // Reads the items `keys` (for example to compare or re-read what a sample
  // returned) into `out` as Sample would, without drawing: nothing is
  // counted, probabilities are 0 and weights empty. NotFound naming the
  // first key that is not a live item; ResourceExhausted as Sample.
  virtual Status Lookup(std::span<const ItemKey> keys, SampleBatch* out) = 0;

  // ---- samples in GPU memory ----
  // For tables whose hot tier a GPU can address (TableInfo::device >= 0):
  // `stream` is a cudaStream_t of that device (nullptr: the default stream).
  // The calls queue device work and return without waiting for it; the
  // outputs are ready for the caller's next work on `stream`. Other tables:
  // FailedPrecondition.

  // Draws batch_size items and gathers their windows into `out` (columns
  // and mask when given), with options as in Sample (gather is ignored:
  // out.columns decides). With priorities on the device (priority_device
  // >= 0) the draw runs on the device too and no data passes through the
  // host: times_sampled is then not counted per item. Otherwise the host
  // draws as Sample does and one kernel copies keys, probabilities and
  // windows. A kernel that cannot be launched fails the call (Internal,
  // naming it); draws the host made count all the same (times_sampled, the
  // rate limiter's samples, max_times_sampled removals), as for a batch the
  // caller drops.
  virtual Status SampleToDevice(int64_t batch_size, const SampleOptions& options,
                                const DeviceSampleOutput& out, void* stream) = 0;
  // Lookup into device memory; out.probabilities may be null (zeros are
  // written when it is not).
  virtual Status LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                                void* stream) = 0;
  // A sampler that keeps batches gathered ahead on the device.
  virtual Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(
      const DeviceSamplerOptions& options) = 0;

  // ---- tables with TableSpec::priority_device >= 0 ----
  // Sets priorities from device arrays (e.g. TD errors the learner computed)
  // with no host copy. Keys no longer present, and negative or non-finite
  // priorities, are skipped and counted (TableInfo::priority_updates_skipped)
  // rather than rejected, since checking them on the host would need a copy.
  virtual Status UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities,
                                            int64_t n, void* stream) = 0;

  // Replaces the rate limiter's parameters, keeping its counters, records
  // them in the catalog, and wakes every waiter to re-check.
  virtual Status SetRateLimiter(const RateLimiterSpec& spec) = 0;

  // Seeds the generator the table's draws use (host selectors, and the seeds
  // it hands the GPU's uniform draw kernels): the same table contents, the
  // same seed and the same calls give the same draws. Tables start from
  // entropy. Prefetching samplers draw from it too, in their own order.
  // NotSupported for a table whose priorities live on a GPU
  // (priority_device): its priority table draws with a generator of its own.
  virtual Status Seed(uint64_t seed) = 0;

  // Deletes the items `keys`, durably (logged like any change): they are
  // never drawn or looked up again, their priorities leave the totals, the
  // rate limiter counts them as deletes (Reverb's), and a trajectory whose
  // items are all gone leaves the table once it has ended. Keys of items
  // that are not live (gone already, never made, of another table) are
  // skipped, as Reverb skips them; *deleted (optional) gets how many were
  // deleted. Cold items are loaded first. InvalidArgument for a vector
  // table (lanes > 1: its rows are not separate items to delete) and for a
  // table that draws uniformly on a GPU over whole blocks.
  virtual Status DeleteItems(std::span<const ItemKey> keys, int64_t* deleted = nullptr) = 0;

  // Empties the table, durably and at once (one logged change: a crash
  // leaves the table either as it was or empty): every trajectory, hot and
  // cold, leaves it with its items, and the rate limiter's counters start
  // afresh (Reverb's Reset). The table keeps its name, spec and id, and
  // every handle of it goes on working: a writer whose trajectory was open
  // gets FailedPrecondition from its next call, naming the clear, and the
  // call after that starts a new trajectory. Lifetime counters (steps and
  // items inserted, ...) keep counting. Waits for spills and loads in flight
  // to finish first. FailedPrecondition for a read-only table.
  virtual Status Clear() = 0;

  // Brings cold trajectories (spilled, rotated out, imported) back into the
  // hot tier, evicting others by the table's policy (and spilling them) when
  // it is full; their items become sampleable again with the priorities and
  // sample counts they left with, and count as inserts for the rate limiter.
  // Ids already hot are skipped. NotFound naming the id when one is neither
  // hot nor cold (nothing is loaded then); ResourceExhausted when one does
  // not fit in the hot tier at all; Corruption naming the trajectory and
  // step when its stored steps are damaged (it stays cold, the ones before
  // it stay loaded, and what was evicted to make room for it stays cold).
  virtual Status Load(std::span<const uint64_t> trajectory_ids) = 0;
  // Every cold trajectory with first <= id <= last, in id order.
  virtual Status LoadRange(uint64_t first, uint64_t last) = 0;
  // Ids of the cold trajectories, in order, at most `limit` (0: all) from
  // the first >= `from`, into *ids. A local table's never fails; a remote
  // one's fails with the call (Unavailable, DeadlineExceeded, ...).
  virtual Status ColdTrajectories(uint64_t from, size_t limit, std::vector<uint64_t>* ids) const = 0;
  // The same, returned: {} where the call above fails (only a remote
  // table's can: use that form for those).
  std::vector<uint64_t> ColdTrajectories(uint64_t from = 0, size_t limit = 0) const;

  // ---- inspection (the replaydb shell uses these) ----

  // The trajectories of both tiers that match `filter`, in id order, into
  // *out. One being spilled counts as cold. Changes nothing. Fails only for
  // a remote table (the call's Status).
  virtual Status ListTrajectories(const TrajectoryFilter& filter,
                                  std::vector<TrajectoryInfo>* out) const = 0;
  // The same, returned: {} where the call above fails (only a remote
  // table's can: use that form for those).
  std::vector<TrajectoryInfo> ListTrajectories(const TrajectoryFilter& filter = {}) const;
  // Reads steps [first, first + count) of trajectory `id`, clipped to its
  // length, hot or cold, into `out` (a cold one stays cold). Changes
  // nothing. NotFound naming the table and id when it has no such
  // trajectory; InvalidArgument when first < 0, first > its length or
  // count < 0; Corruption (as Load) when its stored steps are damaged.
  virtual Status ReadTrajectory(uint64_t id, int64_t first, int64_t count,
                                TrajectorySteps* out) = 0;
  // Every live item of the hot tier and its priority, in key order. With
  // priorities on a device (priority_device >= 0) they are read from it, so
  // UpdatePrioritiesFromDevice's changes show.
  virtual Status ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) = 0;

  virtual TableInfo Info() const = 0;

  // The table's sampling mass now (SamplingMass): exact for the items
  // present at the call, including priorities set from a device (it then
  // synchronises with the GPU's priority table, a copy of at most 8 KiB).
  // NotSupported, naming the table and its selector, for FIFO, LIFO and
  // heap tables (their draws are certain, not proportional to a mass). A
  // vector table's counts an item per environment, as TableInfo does. A
  // remote table's is its server's (served since
  // protocol 6); a sharded table's the sum of its shards' (docs/sharding.md).
  virtual Result<SamplingMass> Mass();

  // Wakes every blocked writer and sampler with Cancelled; later calls fail.
  virtual void Close() = 0;
};

}  // namespace replaydb

#endif  // REPLAYDB_TABLE_H_
