// TableImpl: a table (include/replaydb/table.h). It holds trajectories in
// hot-tier blocks, creates items as windows complete, samples them under a
// rate limiter, and evicts whole trajectories when the tier is full. Its
// collaborators, each with its own files and tests:
//
//   index::TrajectoryStore  the trajectories, their per-slot step and item
//                           metadata, ids, and the eviction order
//                           (index/trajectory_store.h)
//   DrawStrategy            where draws happen: the host's selector, a GPU
//                           priority table, or uniform draws in the gather
//                           kernel (draw_strategy.h, engine/gpu/device_draws.h)
//   BlockPool, DeviceTier   the blocks' memory and the GPU's view of them
//                           (engine/hot/, engine/gpu/)
//   RateLimiter             inserts against samples (engine/rate_limiter/)
//   VectorTableImpl         the table of vector steps, a subclass that
//                           overrides what differs (vector_table.h)
//
// The class's own code is split by concern over engine/table/:
//   table_impl.cc           creation, writers, validation, Info
//   table_write.cc          appends of one trajectory, ends
//   table_vector_write.cc   vector steps (every environment in one pass)
//   table_items.h           item bookkeeping shared by every path (inline)
//   table_eviction.cc       blocks, eviction, removing trajectories
//   table_sample.cc         Sample, Lookup and their device forms
//   table_priorities.cc     priority updates, host and device
//   table_durability.cc     logging and checkpoints
//   table_apply.cc          logged changes applied again (recovery, replicas)
//   table_cold.cc           spill, load and rotation through the cold tier
//   table_inspect.cc        ListTrajectories, ReadTrajectory, ItemPriorities, Mass
//   table_verify.cc         DB::Verify's part
//   device_output.h         device-sample argument checks, shared with remote tables
//
// Concurrency: one mutex (mu_) guards all metadata, the collaborators'
// included. Bulk bytes are copied outside it: a writer copies a large step
// into the unpublished slot after its trajectory's last published step
// (small steps are copied under the lock, which is cheaper than a second
// round trip), and a sampler copies published steps. Both pin the
// trajectory while they copy, so an eviction that happens meanwhile defers
// returning its blocks to the pool until the last pin goes.
#ifndef REPLAYDB_ENGINE_TABLE_TABLE_IMPL_H_
#define REPLAYDB_ENGINE_TABLE_TABLE_IMPL_H_

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/cold/cold_store.h"
#include "engine/gpu/device_tier.h"
#include "engine/hot/block_pool.h"
#include "engine/rate_limiter/rate_limiter.h"
#include "engine/table/draw_strategy.h"
#include "engine/table/table_layout.h"
#include "engine/table/writer_state.h"
#include "index/selectors/selector.h"
#include "index/trajectory_store.h"
#include "kernels/priority/device_priority_table.h"
#include "replaydb/db.h"
#include "replaydb/device.h"
#include "replaydb/table.h"
#include "util/fork_join.h"
#include "util/huge_page_allocator.h"
#include "util/progress_reporter.h"
#include "util/random.h"
#include "wal/log_writer.h"
#include "wal/records.h"
#include "wal/replica_set.h"

namespace replaydb::engine {

// InvalidArgument naming table `table` and `what` unless `priority` is
// finite and >= 0 (a remote writer checks its steps' priorities with it
// before they are sent, as a local writer does).
Status ValidatePriorityOf(std::string_view table, double priority, std::string_view what);
// ValidatePriorityOf for each of `priorities`, the i-th named "`what` step i".
Status ValidatePrioritiesOf(std::string_view table, std::span<const double> priorities,
                            std::string_view what);

using index::ItemState;
using index::kDeletedItem;
using index::SlotMeta;
using index::Trajectory;
using index::TrajectoryStore;

// A trajectory as stored in the cold store, read back (engine/table/table_cold.cc).
struct StoredTrajectory {
  uint64_t id = 0;
  int64_t length = 0;
  bool ended = false;
  EndReason end_reason = EndReason::kTruncated;
  bool cold = false;
  std::vector<double> step_priorities;
  std::vector<ItemState> items;
  std::vector<bool> live;
  std::string steps;  // length steps, step-major (the WAL's layout)
};

// One window of a sample or lookup: its trajectory (kept alive) and steps.
struct Window {
  std::shared_ptr<Trajectory> trajectory;
  int64_t start = 0;
  int64_t real = 0;  // real steps, 1..L
  int64_t lane = 0;  // the environment, in a vector table
};

// One contiguous run of a window inside one block, as GatherToHostLocked
// copies it.
struct GatherSegment {
  const std::byte* block;
  int64_t first_step;  // within the block
  int64_t count;
  int64_t out_step;  // within the window
  int64_t lane;      // the environment's row of each step (vector tables)
};

// What a sample or lookup into host memory works in. Sized by
// TableImpl::PrepareHostBatch before anything is drawn, so that the draw and
// the gather allocate nothing (an allocation that failed after the draw
// would lose what it counted and consumed).
struct HostBatchScratch {
  std::vector<Window> windows;
  std::vector<GatherSegment> segments;
  std::vector<size_t> first_segment;
  // Device blocks: each window's tier slot and real steps.
  std::vector<int64_t> slots;
  std::vector<uint32_t> steps;
};

// A sample's windows where they lie in the hot tier (TableImpl::SampleInPlace),
// for a reader that copies them itself (a client reading a served table's
// slabs one-sidedly). A segment is one contiguous run of a window's steps
// in one block: the block lies at `block_offset` of slab `slab`; the run's
// steps of column c start at block_offset + column_offset[c] + first_step *
// column_step_bytes[c] and go on for `count` steps.
struct InPlaceSegment {
  uint32_t item = 0;      // the window, in the batch
  uint32_t out_step = 0;  // where the run goes in the window
  uint32_t count = 0;     // steps
  uint32_t slab = 0;      // BlockPool::place (0 without a slab source)
  uint64_t block_offset = 0;
  uint64_t first_step = 0;  // within the block
  const std::byte* block = nullptr;  // the block's address in this process
};
class TableImpl;
// Holds a sample's trajectories (their blocks are neither freed nor used
// again) until destroyed; the table may go first.
class BlockPins {
 public:
  BlockPins(std::weak_ptr<TableImpl> table, std::vector<std::shared_ptr<Trajectory>> held)
      : table_(std::move(table)), held_(std::move(held)) {}
  ~BlockPins();
  BlockPins(const BlockPins&) = delete;
  BlockPins& operator=(const BlockPins&) = delete;

 private:
  std::weak_ptr<TableImpl> table_;
  std::vector<std::shared_ptr<Trajectory>> held_;
};
struct InPlaceSample {
  std::vector<InPlaceSegment> segments;  // window by window, in order
  std::vector<uint64_t> column_offset;   // per column, within a block
  std::vector<uint64_t> column_step_bytes;
  std::unique_ptr<BlockPins> pins;
};
// A slab of a table's hot tier: its start and size.
struct SlabSpan {
  const std::byte* data = nullptr;
  size_t bytes = 0;
};

// While one is alive on a thread, the tables log nothing that thread
// changes: a replica logs each record its primary shipped itself, then
// applies it (DBImpl::ApplyShipped), and the apply must not log it again.
class ScopedNoTableLog {
 public:
  ScopedNoTableLog();
  ~ScopedNoTableLog();
  ScopedNoTableLog(const ScopedNoTableLog&) = delete;
  ScopedNoTableLog& operator=(const ScopedNoTableLog&) = delete;
  static bool active();

 private:
  bool previous_;
};

// What a writer's appends and ends wait for before they return: its
// WriterOptions::acks (and ::sync) with its table's TableSpec::acks
// (docs/replication.md).
struct WriteAck {
  bool sync = false;  // the primary's log synced them (leader_durable)
  int replicas = 0;   // replicated(k): k replicas applied them
  // > 0: while a live replica lags more, they wait for it (not kNone).
  std::chrono::milliseconds max_lag{0};
  std::chrono::milliseconds timeout = kWaitForever;  // the writer's
};
WriteAck ResolveAck(const TableSpec& spec, const WriterOptions& options);

class TableImpl : public Table, public std::enable_shared_from_this<TableImpl> {
 public:
  // Writes a changed spec to the catalog. Called without the table's mutex.
  using PersistSpecFn = std::function<Status(const TableSpec&)>;

  // REQUIRES: spec.Validate().ok(). NotSupported when the spec's
  // placement or priority_device needs a GPU that cannot be used. A spec
  // with lanes > 1 makes a VectorTableImpl (engine/table/vector_table.h).
  // `host_slabs`, when set, provides the blocks of a table whose blocks lie
  // in host memory, plain or pinned (a served database's:
  // rdma/shared_slabs.h).
  static Result<std::shared_ptr<TableImpl>> Create(const TableSpec& spec, PersistSpecFn persist,
                                                   std::shared_ptr<SlabSource> host_slabs = nullptr);

  // Use Create. `tier` is set when a GPU can address the blocks or draws
  // the items.
  TableImpl(const TableSpec& spec, PersistSpecFn persist, std::unique_ptr<DrawStrategy> draws,
            BlockMemory memory, std::unique_ptr<DeviceTier> tier,
            std::shared_ptr<SlabSource> host_slabs = nullptr);
  ~TableImpl() override;

  TableSpec spec() const override;
  const std::string& name() const override { return name_; }
  Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& options) override;
  Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t num_envs,
                                                        const WriterOptions& options) override;
  using Table::Sample;
  Status Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) override;
  Status UpdatePriorities(std::span<const ItemKey> keys, std::span<const double> priorities,
                          PriorityUpdateResult* result) override;
  Status Lookup(std::span<const ItemKey> keys, SampleBatch* out) override;
  // Sample without gathering (out gets the items' fields and the mask, no
  // columns), saying where each window's steps lie (their blocks'
  // addresses; with a SlabSource, their slabs and offsets too) and holding
  // their blocks until `where->pins` goes. NotSupported unless the table's
  // blocks are host memory (plain or pinned) and it has one lane.
  Status SampleInPlace(int64_t batch_size, const SampleOptions& options, SampleBatch* out,
                       InPlaceSample* where);
  // Whether SampleInPlace can serve this table, and whether its segments
  // name slabs of a SlabSource (which peers may read one-sidedly).
  bool samples_by_address() const { return pool_.host_accessible() && one_lane_; }
  bool samples_in_place() const { return pool_.has_source() && one_lane_; }
  // The hot tier's slabs so far, from slab `first` on.
  std::vector<SlabSpan> Slabs(int64_t first) const;
  Status SampleToDevice(int64_t batch_size, const SampleOptions& options,
                        const DeviceSampleOutput& out, void* stream) override;
  Status LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                        void* stream) override;
  Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(
      const DeviceSamplerOptions& options) override;
  Status UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities, int64_t n,
                                    void* stream) override;
  Status SetRateLimiter(const RateLimiterSpec& spec) override;
  // SetRateLimiter without the check that this database takes writes: a
  // replica applying its primary's change (a shipped TableSpec record).
  Status ApplyRateLimiter(const RateLimiterSpec& spec);
  Status Seed(uint64_t seed) override;
  Status DeleteItems(std::span<const ItemKey> keys, int64_t* deleted) override;
  Status Clear() override;
  // DeleteItems' work, also replay's (kRemoveItems with deleted): the live
  // items of `keys` deleted, their keys appended to *gone (may be null).
  void DeleteItemsLocked(std::span<const ItemKey> keys, std::vector<ItemKey>* gone);
  TableInfo Info() const override;
  void Close() override { CloseWithReason("closed"); }

  // Closes the table; later calls fail with "table 'x' is <reason>".
  void CloseWithReason(const std::string& reason);

  // ---- logging (engine/table/table_durability.cc) ----

  // Logs every change to `log` as table `id` from now on; null stops
  // logging (while the log is replayed, and once the DB closes). A table
  // whose TableSpec::logging says no (TableLogging) keeps no log whatever
  // `log` is.
  // `replicas` (when not null; set once) are those reading `log`, which
  // writers' acknowledgments wait for (AckLog).
  void SetLog(std::shared_ptr<wal::LogWriter> log, uint32_t id,
              std::shared_ptr<wal::ReplicaSet> replicas = nullptr);
  uint32_t id() const { return table_id_; }
  // Makes log record `seq` (0: none) durable as the sync mode says; `wait`
  // is WriterOptions::sync.
  Status SyncLog(uint64_t seq, bool wait);
  // A writer's acknowledgment of the records up to `seq` (0: none): synced
  // as `ack` says, then (when replicas read the log) replicated to
  // ack.replicas of them and no replica lagging more than ack.max_lag,
  // waiting at most ack.timeout (the records stay stored either way).
  Status AckLog(uint64_t seq, const WriteAck& ack);
  // Before a writer stores anything under replicated(k): Unavailable when
  // fewer than k replicas are in sync (or none can read this table's log).
  Status CheckAck(const WriteAck& ack) const {
    return ack.replicas == 0 ? Status::OK() : CheckReplicas(ack.replicas);
  }

  // ---- applying logged changes (engine/table/table_apply.cc) ----

  // Applies one logged change again (recovery, and replicas; callers go
  // through ApplyLogRecord, engine/db/log_apply.h). Idempotent against the
  // checkpoint the records are applied onto: steps and ends already there
  // are skipped. Corruption (naming the table) when a record contradicts
  // the table: a step that does not follow its trajectory, a step size that
  // is not the schema's, an unknown end reason, an invalid priority.
  Status Apply(const wal::AppendStepsRecord& r);
  Status Apply(const wal::EndTrajectoryRecord& r);
  Status Apply(const wal::RemoveTrajectoryRecord& r);
  Status Apply(const wal::RemoveItemsRecord& r);
  Status Apply(const wal::UpdatePrioritiesRecord& r);
  Status Apply(const wal::ClearTableRecord& r);
  Status Apply(const wal::ItemClockRecord& r);
  // Ends, as truncated, every trajectory still open after recovery (no
  // writer can continue it), creating its tail-padded items, and drops what
  // applying kept (apply_rows_). Returns the ids it ended.
  std::vector<uint64_t> EndOpenTrajectories();
  // Logs those ends (as truncated; nothing without a log): the log's
  // readers, replicas, end them too.
  Status LogEnds(std::span<const uint64_t> ids);

  // A replica promoted to primary: the trajectories its old primary had
  // open stay open, as orphans, for their remote writers to resume (Adopt)
  // until EndOrphans; drops what applying kept. Returns how many.
  size_t KeepOrphans();
  // Ends, as truncated, the orphans no writer adopted, and logs the ends.
  Status EndOrphans();
  // Where a resuming writer's trajectory stands here: open (handed to it:
  // no longer an orphan), ended, or not here (never reached this node).
  struct Adopted {
    enum class State : uint8_t { kNone = 0, kOpen = 1, kEnded = 2 };
    State state = State::kNone;
    uint64_t trajectory_id = 0;
    int64_t num_steps = 0;
    EndReason end_reason = EndReason::kTruncated;  // kEnded's
    std::shared_ptr<Trajectory> trajectory;        // kOpen's
  };
  // The trajectory a remote writer of key `key` resumes: `trajectory_id`
  // where it knows it (not 0), else the one its steps went to last (an
  // orphan, or one ended since); not here unless it carries the key
  // (Trajectory::writer_key). FailedPrecondition when it is open and no
  // orphan (another writer holds it).
  Result<Adopted> Adopt(uint64_t key, uint64_t trajectory_id);
  // The key of the remote writer whose steps trajectory `id` holds
  // (Trajectory::writer_key), and the trajectory a key's steps went to
  // last: 0 where there is none (written here by no such writer, or not
  // since this process opened the table: checkpoints keep no keys).
  uint64_t WriterKeyOf(uint64_t id) const;
  uint64_t TrajectoryOfWriterKey(uint64_t key) const;
  // An adopted trajectory given back (a resuming writer that could not be
  // opened after all): an orphan again while it is open.
  void Unadopt(const std::shared_ptr<Trajectory>& t);
  // The steps of `slot`'s trajectory while it is open (0: none, or it
  // ended, was evicted or removed: the slot's next step begins another).
  int64_t OpenLength(const WriterSlot& slot) const;

  // ---- checkpoints (engine/table/table_durability.cc) ----

  // Adds what changed since the last checkpoint to `batch`: new steps,
  // dirty trajectories' metadata, removed trajectories, the counters.
  // Runs beside writers and samplers (holds the table's mutex only to take
  // the snapshot). Call CheckpointDone with the outcome.
  Status CollectCheckpoint(ColdStore::Batch* batch);
  void CheckpointDone(bool ok);
  // Loads the table's checkpointed state. REQUIRES: the table is new and
  // unused. Trajectories stored as cold, and any that do not fit, stay in
  // the cold tier. The rate limiter's counters are the checkpoint's, made
  // to agree with the items restored (RateLimiter::SettleAfterRecovery;
  // `reset_limiter`: CheckpointOptions::reset_rate_limiters_on_restore).
  Status Restore(ColdStore& store, bool reset_limiter);
  // After the log's replay (and EndOpenTrajectories): makes the rate
  // limiter's counters agree with the items recovered, with the samples
  // the log does not record estimated (RateLimiter::SettleAfterRecovery).
  void SettleRateLimiter(bool reset_limiter);

  // ---- cold tier (engine/table/table_cold.cc) ----

  // The store spilled trajectories go to and loads read from; starts the
  // thread that spills and rotates. Call once, before Restore.
  void SetColdStore(std::shared_ptr<ColdStore> store);
  // Opened by DB::OpenReadOnly: writers, priority updates and spec changes
  // fail; eviction and rotation drop trajectories to the cold index
  // without writing (everything hot came from the store). Call before
  // SetColdStore.
  void SetReadOnly() { read_only_.store(true); }
  Status Load(std::span<const uint64_t> trajectory_ids) override;
  Status LoadRange(uint64_t first, uint64_t last) override;
  using Table::ColdTrajectories;
  Status ColdTrajectories(uint64_t from, size_t limit, std::vector<uint64_t>* ids) const override;
  // Imports: stores `t` (its id kept, its steps in t.steps) straight into
  // the cold tier of this new table; an open one is stored ended
  // (truncated). InvalidArgument when the table already has its id.
  Status ImportStored(StoredTrajectory& t);
  // Loads cold trajectories in id order while free blocks hold them.
  Status FillHot();
  // Reads one trajectory (metadata and steps) of table `table_id` in `store`.
  static Status ReadStoredFrom(ColdStore& store, uint32_t table_id, size_t step_bytes,
                               uint64_t id, StoredTrajectory* out);

  // ---- inspection (engine/table/table_inspect.cc, table_verify.cc) ----

  using Table::ListTrajectories;
  Status ListTrajectories(const TrajectoryFilter& filter,
                          std::vector<TrajectoryInfo>* out) const override;
  Status ReadTrajectory(uint64_t id, int64_t first, int64_t count,
                        TrajectorySteps* out) override;
  Status ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) override;
  Result<SamplingMass> Mass() override;
  // DB::Verify's part for this table (engine/table/table_verify.cc): checks the
  // index under the lock, compares each hot trajectory's stored steps with
  // its blocks and reads every cold one through `store`, appending what is
  // wrong to report->problems and counting what it read. Cancelled when
  // *cancel becomes true. REQUIRES: no checkpoint runs meanwhile.
  Status Verify(ColdStore& store, const std::atomic<bool>* cancel, util::ProgressReporter& progress,
                VerifyReport* report);

  // ---- used by the writers (engine/table/writers.h, vector_table.h) ----

  const TableLayout& layout() const { return layout_; }
  // Whether the hot tier's blocks are in device memory (the host cannot
  // address them).
  bool device_blocks() const { return !pool_.host_accessible(); }
  // The columns of a stored step (a vector table's: [lanes, shape...]).
  const std::vector<ColumnSpec>& columns() const { return columns_; }
  // The columns of one item's step (the table spec's).
  const std::vector<ColumnSpec>& item_columns() const { return item_columns_; }

  // Checks that `tensors` match the schema: one per column, the column's
  // dtype, shape [leading, column shape...] (or the column shape when
  // leading < 0), and byte count. `what` names the call in messages.
  Status ValidateTensors(std::span<const ConstTensor> tensors, int64_t leading,
                         std::string_view what) const;

  // InvalidArgument unless `priority` is finite and >= 0.
  Status ValidatePriority(double priority, std::string_view what) const;

  // Appends one step to slot's trajectory (starting one if needed), in a
  // table whose blocks the host can address: row `index` of `rows`.
  // `priority` (validated) may be null: the step then counts as
  // max_priority_seen_. `*log_seq` (may be null) gets the step's log record
  // (for SyncLog).
  Status AppendStep(WriterSlot& slot, HostRows rows, int64_t index, const double* priority,
                    Deadline deadline, uint64_t* log_seq = nullptr);
  // Steps [0, n) of `rows` appended to slot's trajectory in runs: each run
  // of steps reserved without waiting (ReserveRunLocked) is copied into its
  // blocks (host blocks: outside the mutex when large, the trajectory
  // pinned) or scattered (device blocks: staged in `staged`, pinned host
  // memory the writer keeps, StagedRows::kMaxBytes at a time, one scatter
  // kernel per run), then logged as one record and published. `priorities`:
  // null or n validated values. `record` (may be empty): these n rows'
  // own AppendSteps record (a remote writer's, its data being `rows`),
  // logged as it is, with the trajectory id and step numbers filled in,
  // where one run holds all n rows (else each run is logged as the engine
  // encodes it). On an error the steps before the failing one stay
  // (*appended counts the stored steps).
  Status AppendSteps(WriterSlot& slot, HostRows rows, int64_t n, const double* priorities,
                     Deadline deadline, StagedRows* staged, std::span<std::byte> record,
                     uint64_t* log_seq, int64_t* appended);
  // Steps that a transport receives straight into their blocks (a served
  // writer's append, rdma/db_service.cc), in a table of host blocks that
  // is not logged (a logged append is logged as its record came, so it
  // lands in a buffer first). PlaceSteps reserves slot's next `n` steps
  // after the `ahead` ones placed before and not yet published, all or
  // none and without waiting, pins the trajectory, and gives the places of
  // the steps' bytes in a record's order (each step's columns in turn;
  // places that follow each other in memory as one). Nothing placed (and
  // OK) where that cannot be done now: the table is logged, its blocks are
  // on a device, the rate limiter or a full hot tier would make it wait,
  // the trajectory is ended or evicted, ahead > 0 without one; the caller
  // copies the steps in as AppendSteps does. PublishPlaced publishes them
  // once their bytes are there (in order: `placed.first` must be the
  // trajectory's length then; `priorities` null or n validated values);
  // AbandonPlaced gives them up. Either unpins.
  void PlaceSteps(WriterSlot& slot, int64_t ahead, int64_t n, PlacedSteps* placed,
                  std::vector<std::span<std::byte>>* pieces);
  Status PublishPlaced(WriterSlot& slot, PlacedSteps& placed, const double* priorities);
  void AbandonPlaced(WriterSlot& slot, PlacedSteps& placed);
  // Ends slot's trajectory (see TrajectoryWriter::End).
  Status EndTrajectory(WriterSlot& slot, EndReason reason, Deadline deadline,
                       uint64_t* log_seq = nullptr);
  // EndTrajectory for slots[env] of every env in `envs` (each < slots.size()),
  // under one hold of the mutex (VectorWriter::EndMany). One environment's
  // error does not stop the others: the first is returned, naming the
  // environment. `*log_seq` (may be null) gets the last log record.
  Status EndTrajectories(std::span<WriterSlot> slots, std::span<const size_t> envs,
                         EndReason reason, Deadline deadline, uint64_t* log_seq = nullptr);
  // VectorWriter::Append and AppendFromDevice for `slots` (one per
  // environment; steps and priorities validated, priorities empty or one per
  // environment). One pass under the mutex: the rate limiter admits every
  // environment's item at once when it can; environments are then walked in
  // order (trajectories started, blocks taken, evicting as needed), the
  // rows copied (host) or scattered by one kernel (device), logged as one
  // record, and published. Where the rate limiter would make an environment
  // wait, the environments before it are finished first (copied, logged,
  // published and committed), so a waiting writer never holds back items
  // that samplers need. Errors of one environment (a rate-limiter timeout,
  // its trajectory evicted) do not stop the others: the first one is
  // returned, naming the environment; a failed copy, scatter or log record
  // fails the environments it carried and ends the call. `*log_seq` (may be
  // null) gets the last log record.
  // `record` (may be empty): the step's own AppendSteps record (a remote
  // vector writer's, one entry per environment, its data being `steps`),
  // logged as it is, with each environment's trajectory id and step number
  // filled in, where every environment goes in at once (else the engine
  // encodes the record of those that did).
  Status AppendVectorStep(std::span<WriterSlot> slots, const VectorSteps& steps,
                          std::span<const double> priorities, Deadline deadline,
                          VectorScratch* scratch, uint64_t* log_seq = nullptr,
                          std::span<std::byte> record = {});

 protected:
  // ---- what a vector table (engine/table/vector_table.h) does differently

  // Where an item's key points inside a stored step: the step its window
  // starts at and the row (environment) of that step.
  struct ItemRow {
    int64_t start = 0;
    int64_t lane = 0;
  };
  // After the draws of a sample: a table whose stored steps hold several
  // items each (a vector table's environments) spreads each draw (whose key,
  // probability and window are the stored step's) over them, and counts
  // them in *live_items. Does nothing here.
  virtual void SpreadOverRowsLocked(util::Random& rng, int64_t* live_items, SampleBatch* out,
                                    std::vector<Window>* windows);
  // The row `key` names (Lookup), and how messages name it ("step 3").
  virtual ItemRow RowOf(ItemKey key) const;
  virtual std::string RowText(const ItemRow& row) const;
  // `s`, an error of a vector writer's slot `slot`, naming its environment.
  virtual Status SlotError(const Status& s, size_t slot) const;

  // FailedPrecondition naming `what` when the table is read-only.
  Status CheckWritable(std::string_view what) const;
  // NewWriter's and NewVectorWriter's checks (read-only, closed, the
  // options).
  Status CheckNewWriter(const WriterOptions& options) const;
  Status CheckNewVectorWriter(size_t num_envs, const WriterOptions& options) const;

 private:
  Status CheckOpenLocked() const;
  // CheckAck's: k replicas in sync.
  Status CheckReplicas(int k) const;

  // ---- appends of one trajectory and ends (table_write.cc)

  // Makes room for one more step of slot's trajectory: reserves the item
  // the step completes with the rate limiter, starts the trajectory if
  // needed, gives it a new block if needed. On error nothing is left behind.
  // When the rate limiter does not admit the item at once and `may_wait`
  // is false, sets *would_wait and returns OK having changed nothing.
  // `*credit` (may be null): inserts already reserved with the rate
  // limiter, of which the step's item takes one first.
  Status ReserveStepLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot,
                           Deadline deadline, StepReservation* r, bool may_wait = true,
                           bool* would_wait = nullptr, int64_t* credit = nullptr);
  // Undoes reservation `r` of slot's step after a failure: the rate
  // limiter's insert, and a trajectory the step would have started.
  void AbandonStepLocked(WriterSlot& slot, const StepReservation& r);
  // After a copy outside the lock: OK, or the error that undoes `r`.
  Status CheckAfterCopyLocked(WriterSlot& slot, const StepReservation& r);
  // AppendSteps' runs: *run gets the reservations of up to `count` steps
  // of slot's trajectory, the first by ReserveStepLocked (which may wait,
  // start the trajectory, or evict), the next ones while none would wait for
  // the rate limiter, take a block from a full pool or pass
  // kMaxTrajectorySteps (a block taken for a later step stays with the
  // trajectory). AbandonRunLocked undoes a run's reservations after a
  // failed copy or log record; PublishRunLocked publishes it (priorities:
  // null or one per step).
  Status ReserveRunLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot, Deadline deadline,
                          int64_t count, std::vector<StepReservation>* run);
  // Appends to `run` the reservations of t's steps [first, first + count)
  // taken without waiting for anything but `deadline`'s new blocks, stopping
  // (OK) at the first that cannot be: the trajectory's step limit, a full
  // hot tier, the rate limiter, a block not had (ReserveRunLocked's steps
  // after its first, and placed steps after those still to be published).
  void ExtendRunLocked(std::unique_lock<std::mutex>& lock, Trajectory& t, int64_t first,
                       int64_t count, Deadline deadline, std::vector<StepReservation>* run);
  void AbandonRunLocked(WriterSlot& slot, std::span<const StepReservation> run);
  // Releases placed steps' reservations (PlaceSteps; the trajectory
  // unpinned already) and clears `placed`.
  void ReleasePlacedLocked(WriterSlot& slot, PlacedSteps& placed);
  void PublishRunLocked(Trajectory& t, std::span<const StepReservation> run,
                        const double* priorities);
  Status EvictedError(const Trajectory& t) const;
  Status ResetWriterIfEndedLocked(WriterSlot& slot);
  // Publishes the reserved step (copied into place) with its priority,
  // creating the item it completes. Returns whether it did: the caller
  // commits that insert with the rate limiter.
  bool PublishStepLocked(Trajectory& t, const StepReservation& r, const double* priority);
  // EndTrajectory's work, the mutex held (and released while padding items
  // wait for the rate limiter).
  Status EndTrajectoryLocked(std::unique_lock<std::mutex>& lock, WriterSlot& slot, EndReason reason,
                             Deadline deadline, uint64_t* log_seq);

  // ---- vector steps (table_vector_write.cc)

  // A vector append's environment loses the step it reserved: undoes the
  // reservation, sets its *dest to -1, and clears scratch->items_tallied.
  void DropVectorStepLocked(WriterSlot& slot, const StepReservation& r, int64_t* dest,
                            VectorScratch* scratch);
  // A vector append's common case for `slot`: an open trajectory whose last
  // block has room for the step. Fills `r` and returns true, or returns
  // false (ReserveStepLocked's work). Reserves nothing with the rate
  // limiter: the caller counts r->completes_item. Changes nothing else, so
  // the parts of a ForkJoin may call it for different slots.
  bool FastReserveLocked(const WriterSlot& slot, StepReservation* r) const;
  // FastReserveLocked for every environment of `slots`, split over
  // scratch->fork_join's parts: scratch->dest gets each one's slot, or
  // kReserveLater. Returns the items the reserved steps complete, and in
  // *later the environments left to reserve.
  int64_t SharedFastReserveLocked(std::span<WriterSlot> slots, VectorScratch* scratch,
                                  size_t* later);
  // The one-step items' publish of FinishVectorChunkLocked split over
  // scratch->fork_join's parts. Returns the new items, in environment order
  // (in scratch->items).
  std::span<const index::ItemRef> SharedPublishLocked(std::span<WriterSlot> chunk,
                                                      std::span<const int64_t> dest,
                                                      std::span<const StepReservation> reserved,
                                                      std::span<const double> priorities,
                                                      VectorScratch* scratch);
  // The publish's pieces, per environment (PublishVectorStepsLocked and
  // SharedPublishLocked): asks for the SlotMeta of the step kPrefetchAhead
  // after i (below end); gives step r of t its priority and t its length
  // (*step: the step's index), returning the step's SlotMeta; makes the
  // item of one step at `meta` (CreateItemLocked's work for L = 1).
  void PrefetchMetaAhead(std::span<const int64_t> dest, std::span<const StepReservation> reserved,
                         size_t i, size_t end) const;
  SlotMeta& PublishStepLocked(Trajectory& t, const StepReservation& r, double priority,
                              int64_t* step);
  index::ItemRef NewOneStepItemLocked(Trajectory& t, SlotMeta& meta, int64_t step, int64_t slot,
                                      uint64_t seq, double priority);
  // FinishVectorChunkLocked's publish, one environment after another: each
  // reserved step's priority, its length, and the item it completes (to
  // *items, for the selector).
  void PublishVectorStepsLocked(std::span<WriterSlot> chunk, std::span<const int64_t> dest,
                                std::span<const StepReservation> reserved,
                                std::span<const double> chunk_priorities, bool one_step_items,
                                std::vector<index::ItemRef>* items);
  // Copies host rows [first_row, first_row + count) of every column of
  // `rows` into the writer's pinned rows (scratch->device_rows, split over
  // its parts; first waiting for the scatter that read them last) and
  // prepares them for a scatter on `device` (StagedRows). Needs no
  // lock: it reads only the table's immutable layout.
  Status StageVectorRows(int device, const VectorSteps& rows, size_t first_row, size_t count,
                         VectorScratch* scratch) const;
  // AppendVectorStep's work for environments [begin, end) of `slots`,
  // reserved (scratch->dest[env] >= 0 for those that got room): copies or
  // scatters, logs and publishes them. An environment that fails alone
  // (evicted while its row was copied outside the lock) goes to
  // *first_error if that is OK. Returns a copy's, scatter's or log's error
  // (every environment of the chunk then fails).
  Status FinishVectorChunkLocked(std::unique_lock<std::mutex>& lock, std::span<WriterSlot> slots,
                                 size_t begin, size_t end, const VectorSteps& steps,
                                 std::span<const double> priorities, VectorScratch* scratch,
                                 uint64_t* log_seq, Status* first_error,
                                 std::span<std::byte> record);

  // ---- items (table_items.h, inline)

  // Creates t's next item (at start t.items_created, whose hot-tier slot is
  // `slot`, or -1 to look it up). With `selector_batch`, its ItemRef is
  // appended there for the caller to insert into the selector (in order).
  void CreateItemLocked(Trajectory& t, int64_t slot = -1,
                        std::vector<index::ItemRef>* selector_batch = nullptr);
  // Makes item `start` of `t` (already at ItemAt(t, start); slot as for
  // CreateItemLocked) live: counts, the device tier's item index, the
  // selector (or `selector_batch`).
  void AddLiveItemLocked(Trajectory& t, int64_t start, const ItemState& item, int64_t slot = -1,
                         std::vector<index::ItemRef>* selector_batch = nullptr);
  // Takes live item `start` of `t` out (sampled max_times_sampled times):
  // the selector, counts, the rate limiter, the trajectory's rank.
  void DropItemLocked(Trajectory& t, int64_t start, const ItemState& item);
  // The priority of a new item at `start` (hot-tier slot `slot`), from its
  // window's step priorities.
  double NewItemPriorityLocked(const Trajectory& t, int64_t start, int64_t slot) const;
  // The draws a live item still allows when max_times_sampled > 0. An item
  // of priority 0 under kPrioritized counts too: once every item with a
  // positive priority is sampled away, draws pick such items uniformly.
  int64_t DrawsLeft(const ItemState& item) const {
    if (max_times_sampled_ == 0) return 0;
    return max_times_sampled_ - item.times_sampled;
  }

  // ---- blocks and eviction (table_eviction.cc)

  // Returns blocks to the pool, or defers them while the GPU may still
  // access them; clears `blocks`.
  void ReleaseBlocksLocked(std::vector<int64_t>* blocks);
  // Frees deferred blocks the GPU is done with; true if any were freed.
  bool ReclaimDeferredLocked();
  // Gives `t` a new block, evicting or waiting for pinned blocks as needed.
  Status AddBlockLocked(std::unique_lock<std::mutex>& lock, Trajectory& t, Deadline deadline);
  // Appends pool block `block` (just allocated) to t's blocks.
  void TakeBlockLocked(Trajectory& t, int64_t block);
  // Takes `t` out of the hot tier: its items leave the selector; its blocks
  // return to the pool now, or when its last pin goes. `log`: a
  // RemoveTrajectory record is logged (Clear logs one record for all).
  void RemoveTrajectoryLocked(Trajectory& t, bool evicted, bool log = true);
  // Clear's work (and its replay's): every trajectory with an id below
  // `below`, hot or cold, leaves the table; the rate limiter starts afresh.
  void ClearLocked(uint64_t below);
  // Waits until no spill (and with `loads`, no load) is in flight, so that
  // nothing reaches the cold store or the hot tier behind a checkpoint's or
  // Clear's back. IOError when spills keep failing (a full disk). Returns
  // at once when the table closes (the caller checks closed_).
  Status AwaitColdIdleLocked(std::unique_lock<std::mutex>& lock, bool loads);
  void UnpinLocked(Trajectory& t);
  // A lease's pin (BlockPins) goes.
  void UnleaseLocked(Trajectory& t);
  friend class BlockPins;
  // Takes t's live items out of the selector one by one (RemoveMany),
  // giving back their draws (sample_budget_); returns how many.
  int64_t RemoveItemsOneByOneLocked(Trajectory& t);
  // Removes an ended trajectory all of whose items were sampled away.
  void MaybeReleaseConsumedLocked(Trajectory& t);
  // Blocks the hot tier needs for a trajectory of `length` steps.
  int64_t BlocksFor(int64_t length) const {
    return (length + layout_.block_steps - 1) / layout_.block_steps;
  }

  // ---- samples and lookups (table_sample.cc)

  // Draws `batch` items for a sample: fills out's keys, probabilities,
  // priorities, times_sampled and mask, and `windows`.
  Status DrawLocked(std::unique_lock<std::mutex>& lock, int64_t batch,
                    const SampleOptions& options, SampleBatch* out, std::vector<Window>* windows,
                    int64_t* live_items);
  // Resolves keys to windows for a lookup (fills keys, priorities,
  // times_sampled, mask; probabilities 0).
  Status LookupLocked(std::span<const ItemKey> keys, SampleBatch* out,
                      std::vector<Window>* windows) const;
  // Sizes out's buffers (columns only when `gather`; weights when
  // `weights`) and *scratch for a batch of B items of sequence_length_
  // steps. ResourceExhausted naming the bytes when they overflow, exceed
  // kMaxSampleBytes or cannot be allocated. Called without the lock.
  Status PrepareHostBatch(int64_t B, bool gather, bool weights, SampleBatch* out,
                          HostBatchScratch* scratch) const;
  // Copies the windows' steps (scratch->windows) into out->columns, sized
  // by PrepareHostBatch. Called with the lock held; may release and retake
  // it. Releases consumed trajectories.
  Status GatherToHostLocked(std::unique_lock<std::mutex>& lock, HostBatchScratch& scratch,
                            SampleBatch* out);
  // The hot-tier slot where window w starts.
  int64_t SlotOf(const Window& w) const;
  // The window's slot as the device tier sees it (DeviceTier::TierSlot).
  // REQUIRES: tier_
  int64_t TierSlotOf(const Window& w) const;
  Status NeedTierLocked(std::string_view what) const;
  Status CheckSampleArgs(int64_t batch_size, const SampleOptions& options) const;
  // After DrawLocked: out->weights as options say (kBatch from the
  // probabilities; kBuffer's DrawLocked made; none without beta).
  void FinishWeightsLocked(const SampleOptions& options, int64_t live_items,
                           SampleBatch* out) const;

  // ---- logging (table_durability.cc)

  // Appends the record in record_ to log_; 0 when not logging.
  Result<uint64_t> LogLocked(wal::RecordType type);
  // The same for a record whose payload is `pieces` one after another.
  Result<uint64_t> LogLocked(wal::RecordType type,
                             std::span<const std::span<const std::byte>> pieces);
  // A FIFO, LIFO or heap table's item clock: where kItemClockTick has passed
  // since the last tick (by CLOCK_REALTIME), logs an ItemClock record of
  // the time now and numbers the items created from then on from it
  // (next_item_seq_ = max(next_item_seq_, now)), so that the shards of one
  // table compare their items' insertion orders (a heap's ties go to the
  // oldest). Called before a record
  // that may create items is built (it uses record_), never while applying
  // records (ScopedNoTableLog): replaying the log gives every item the
  // insertion order it had. Other tables: nothing.
  Status TickItemClockLocked();
  // Logs `count` steps of t from host memory (one record), as its steps
  // t.length on: rows index.. of `rows`; `priorities` null or one per step.
  Result<uint64_t> LogStepsLocked(uint64_t writer_key, const Trajectory& t, HostRows rows,
                                  int64_t index, int64_t count, const double* priorities);
  // Logs an AppendSteps record built elsewhere (a remote writer's) as the
  // steps of t from t.length on, its ids and step numbers filled in first.
  Result<uint64_t> LogStepsRecordLocked(const Trajectory& t, std::span<std::byte> record);
  // device_log_thread_'s loop: LogDevicePriorities every kDeviceLogPeriod
  // while the GPU has priorities the log lacks.
  void DeviceLogLoop();
  // Stops it and logs what the GPU still has (the caller holds no lock).
  void StopDeviceLog();
  // Logs, in one record per collection, the items whose priority
  // UpdatePrioritiesFromDevice set since the last collection (the device
  // table's log mark). The caller holds no lock.
  Status LogDevicePriorities();
  // The checkpoint's part (mu_ and device_log_mu_ held): logs what the log
  // lacks, as LogDevicePriorities does, and sets the items' host priorities
  // to what the GPU holds for every item updated there since the last
  // checkpoint (the checkpoint mark), marking their trajectories dirty.
  Status CollectDevicePrioritiesLocked();
  // Queues the collection of `mark` into *buffer (made on first use).
  Status QueueDeviceCollectLocked(int mark,
                                  std::unique_ptr<kernels::DevicePriorityTable::Updated>* buffer);
  // Appends a collection to `log` as one UpdatePriorities record
  // (device_log_mu_ held: device_record_ is its).
  Result<uint64_t> AppendDeviceRecord(wal::LogWriter& log, uint32_t table_id,
                                      const kernels::DevicePriorityTable::Updated& got);
  // Logs keys and their new priorities (one record) and syncs it, after
  // releasing `lock`.
  Status LogPrioritiesLocked(std::unique_lock<std::mutex>& lock, std::span<const uint64_t> keys,
                             std::span<const double> priorities);
  // Logs the vector steps of the environments with dest >= 0 (one record);
  // `slots`, `dest`, `columns` and `priorities` (empty or one per
  // environment) cover the same environments. Device rows are copied to the
  // host first. `record` (may be empty): the steps' own record, logged as
  // it is (ids and step numbers filled in) when every environment has
  // dest >= 0.
  Result<uint64_t> LogVectorStepsLocked(std::span<WriterSlot> slots, std::span<const int64_t> dest,
                                        const VectorSteps& steps,
                                        std::span<const double> priorities,
                                        std::span<std::byte> record = {});
  // Copies steps [from, to) of a trajectory whose blocks are at `blocks`
  // (its block addresses, taken under the lock; the trajectory pinned) to
  // `out`, step-major (the WAL's layout). Called without the lock.
  Status ReadSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                   std::string* out) const;
  // The same into `out`, which holds (to - from) * step_bytes bytes.
  Status ReadSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                   std::byte* out) const;
  // Builds in `fbb` (cleared first) the cold store's StepChunk of steps
  // [from, to), read from `blocks` as ReadSteps does straight into the
  // chunk's data vector. Called without the lock.
  Status BuildStepChunk(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                        flatbuffers::FlatBufferBuilder* fbb) const;

  // ---- applying logged changes (table_apply.cc)

  // Cold trajectories among `ids` loaded before a replayed record uses them.
  Status LoadBeforeApply(std::vector<uint64_t> ids);
  // The hot-tier slot of t's next step, giving t a new block if needed.
  Result<int64_t> NextSlotLocked(Trajectory& t);
  // Copies one step (step-major bytes) into t's next position in blocks the
  // host can address, giving t a new block if needed; does not publish it.
  Status CopyStepInLocked(Trajectory& t, const std::byte* step);
  // Appends one step (Apply): copy, publish, item.
  Status PutStepLocked(Trajectory& t, const std::byte* step, const double* priority);
  // PutStepLocked after the copy: publish, item.
  void PublishPutStepLocked(Trajectory& t, const double* priority);
  // Applying into device blocks (Apply): record rows `rows` of `r`
  // (step-major) to slots `slots`, staged in apply_rows_ and scattered
  // together. Empties both.
  Status FlushApplyRowsLocked(const wal::AppendStepsRecord& r, std::vector<size_t>* rows,
                               std::vector<int64_t>* slots);

  // ---- the cold tier (table_cold.cc)

  // t's step priorities and items (with whether each is live) as a stored
  // trajectory's (no steps). REQUIRES: t holds its blocks.
  void StoredMetaLocked(const Trajectory& t, StoredTrajectory* out) const;
  struct ColdEntry {
    int64_t length = 0;
    bool spilling = false;  // queued or being written; its blocks are held
    // As ListTrajectories shows it (a spilled trajectory is ended).
    bool ended = true;
    EndReason end_reason = EndReason::kTruncated;
    int64_t live_items = 0;  // live once loaded
  };
  // The cold index entry of `t` (leaving the hot tier, or imported).
  ColdEntry ColdEntryOf(const Trajectory& t, bool spilling) const;
  // The cold index entry of a trajectory read from the store.
  ColdEntry ColdEntryOf(const StoredTrajectory& stored) const;
  // A trajectory evicted with spill on, to be written to the cold store.
  struct SpillJob {
    std::shared_ptr<Trajectory> t;
    std::vector<std::byte*> blocks;  // its block addresses
    std::string meta;                // TrajectoryMeta as of the eviction (cold)
    bool pinned = false;             // holds t's blocks until written
  };
  // Queues `t`, which is leaving the hot tier by eviction, for spilling.
  void SpillLocked(Trajectory& t);
  // The thread: spills queued trajectories, runs due rotations.
  void ColdLoop();
  // Writes the front job's meta and unstored steps; called with `lock` held,
  // releases it while writing.
  void RunSpillLocked(std::unique_lock<std::mutex>& lock);
  // Takes rotation_fraction of the hot tier out and as many cold
  // trajectories in.
  void RotateLocked(std::unique_lock<std::mutex>& lock);
  // Loads cold `ids` (already checked) one by one.
  Status LoadIds(std::span<const uint64_t> ids);
  // Loads one cold trajectory; OK without doing anything if it is hot.
  // `evict`: as in AddBlocksLocked.
  Status LoadOne(uint64_t id, bool evict);
  // Reads trajectory `id`'s metadata, and its steps when `steps`, verified.
  Status ReadStored(ColdStore& store, uint64_t id, bool steps, StoredTrajectory* out) const;
  // Gives `t` (not yet in the store) blocks for `length` steps: with
  // `evict`, as a writer gets them (evicting, waiting); otherwise only free
  // ones (ResourceExhausted when there are too few; t keeps none).
  Status AddBlocksLocked(std::unique_lock<std::mutex>& lock, Trajectory& t, int64_t length,
                         bool evict);
  // Publishes a stored trajectory whose steps are in `tp`'s blocks; `loaded`:
  // by Load or rotation (counted, an insert for the rate limiter), not by
  // Restore.
  void InstallLocked(const std::shared_ptr<Trajectory>& tp, StoredTrajectory& stored,
                     bool loaded);
  // Parses a TrajectoryMeta value into `out` (no steps); Corruption naming
  // `where` when it does not verify.
  static Status ParseMeta(std::string_view bytes, uint64_t id, const std::string& where,
                          StoredTrajectory* out);
  // Calls fn(first, count, steps) with each of trajectory `id`'s step chunks
  // (table `table_id`, steps of `step_bytes`, step-major) in order, checking
  // they tile [0, length); Corruption naming `where` when not. `steps`
  // points into RocksDB's block and lives only for the call.
  using ChunkVisitor = std::function<Status(int64_t first, int64_t count, const std::byte* steps)>;
  static Status ForEachStoredChunk(ColdStore& store, uint32_t table_id, uint64_t id,
                                   int64_t length, size_t step_bytes, const std::string& where,
                                   const ChunkVisitor& fn);
  // Reads out->id's step chunks into out->steps (ForEachStoredChunk).
  static Status ReadChunks(ColdStore& store, uint32_t table_id, size_t step_bytes,
                           const std::string& where, StoredTrajectory* out);
  // Writes stored.id's step chunks of this table straight into `blocks`
  // (sized for stored.length), with no intermediate copy.
  Status ReadChunksInto(ColdStore& store, const StoredTrajectory& stored,
                        std::span<std::byte* const> blocks, const std::string& where) const;
  // "cold store DIR: table 'NAME' (id N) trajectory ID", for messages.
  std::string StoredWhere(const ColdStore& store, uint64_t id) const;
  // Copies step-major `steps` [from, to) into blocks (ReadSteps' inverse).
  Status WriteSteps(std::span<std::byte* const> blocks, int64_t from, int64_t to,
                    const std::byte* steps) const;
  // Counts n items sampled towards the next rotation.
  void NoteSampledLocked(int64_t n) {
    if (rotation_every_samples_ == 0) return;
    samples_since_rotation_ += n;
    if (samples_since_rotation_ >= rotation_every_samples_) {
      samples_since_rotation_ = 0;
      rotation_due_ = true;
      cold_cv_.notify_all();
    }
  }
  // TrajectoryMeta of `t` into `fbb`. REQUIRES: t holds its blocks.
  void BuildMetaLocked(const Trajectory& t, bool cold, flatbuffers::FlatBufferBuilder* fbb) const;
  // TrajectoryMeta of `stored` (its live flags as given) into `fbb`.
  static void BuildMeta(const StoredTrajectory& stored, bool cold,
                        flatbuffers::FlatBufferBuilder* fbb);

  // ---- the table's configuration (from its spec; never changes)

  const std::string name_;
  // What a step stores: the spec's columns, or [lanes, shape...] each in a
  // vector table (StoredColumns).
  const std::vector<ColumnSpec> columns_;
  // What an item holds per step: the spec's columns.
  const std::vector<ColumnSpec> item_columns_;
  const TableLayout layout_;
  const int64_t sequence_length_;
  const bool one_lane_;  // spec.lanes == 1
  const Padding padding_;
  const uint32_t max_times_sampled_;
  // FIFO, LIFO and heap tables: the item clock ticks (TickItemClockLocked).
  const bool ordered_;
  const StepPriority step_priority_;
  // TableSpec::spill, rotation_fraction, rotation_every_samples.
  const bool spill_;
  const double rotation_fraction_;
  const int64_t rotation_every_samples_;

  // Serialises SetRateLimiter (persist, then apply) against Close.
  std::mutex spec_mu_;
  PersistSpecFn persist_;  // guarded by spec_mu_; cleared on close

  // ---- everything below is guarded by mu_ unless said otherwise

  mutable std::mutex mu_;
  TableSpec spec_;  // the rate limiter may change
  bool closed_ = false;
  std::string closed_reason_;

  // The hot tier's blocks. blocks_cv_: pinned blocks went back to the pool.
  std::condition_variable blocks_cv_;
  BlockPool pool_;
  // Set when a GPU can address the blocks or draws the items.
  std::unique_ptr<DeviceTier> tier_;
  int64_t blocks_seen_ = 0;  // pool ids whose address the tier has
  // Blocks of removed trajectories the GPU may still access, with the access
  // epoch they wait for (see DeviceTier).
  std::deque<std::pair<uint64_t, std::vector<int64_t>>> deferred_;
  // Blocks of removed trajectories not yet back in the pool: pinned by host
  // copies, or deferred for the GPU.
  int64_t pending_free_blocks_ = 0;
  // Of those, the blocks of trajectories only leases hold (samples read in
  // place, held until their readers are done: possibly long). A writer
  // evicts more rather than wait for them.
  int64_t leased_free_blocks_ = 0;

  RateLimiter limiter_;
  // Where draws happen (on the host, or on a GPU), with the selector.
  const std::unique_ptr<DrawStrategy> draws_;
  index::Selector& selector_;  // draws_'s
  util::Random rng_;
  // The trajectories in the hot tier, their steps' and items' metadata, and
  // the eviction order.
  TrajectoryStore store_;
  // RemoveTrajectoryLocked's items for the selector (kept for its capacity).
  std::vector<index::ItemRef> removing_;

  // Items and steps now, and the sequence of the next item (its insertion
  // order, SampleBatch::insertion_order).
  uint64_t next_item_seq_ = 1;
  // The item clock's last tick (ns since the epoch; 0: none since open).
  uint64_t item_clock_ns_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_items_ = 0;
  double max_priority_seen_ = 1.0;
  // Sum of DrawsLeft over live items: a batch of B is served only when it
  // is >= B, so no draw can find the selector without mass.
  int64_t sample_budget_ = 0;
  // Counters (TableInfo; checkpointed in the table's state).
  int64_t steps_inserted_ = 0;
  int64_t items_inserted_ = 0;
  int64_t items_sampled_ = 0;
  int64_t items_removed_ = 0;
  int64_t evicted_trajectories_ = 0;
  int64_t evicted_items_ = 0;
  // Clears so far: a vector append that released the lock checks its
  // reservations again when this moved (as for evictions).
  uint64_t clears_ = 0;
  int64_t priority_updates_ = 0;
  int64_t priority_updates_skipped_ = 0;
  int64_t device_updates_ = 0;  // priorities sent by UpdatePrioritiesFromDevice

  // The log.
  std::shared_ptr<wal::LogWriter> log_;
  // The replicas reading log_ (SetLog): set once, then read without mu_.
  std::shared_ptr<wal::ReplicaSet> replica_set_;
  std::atomic<wal::ReplicaSet*> replicas_{nullptr};
  // log_'s WalSyncMode as an int, -1 without a log: read by SyncLog without mu_.
  std::atomic<int> log_sync_{-1};
  uint32_t table_id_ = 0;
  // DrawLocked's batch of draws and their trajectories, kept between calls.
  std::vector<index::Selection> draw_sels_;
  std::vector<const std::shared_ptr<Trajectory>*> draw_trajectories_;
  wal::RecordBuilder record_;
  // Open trajectories a promotion kept for their writers (KeepOrphans).
  std::vector<uint64_t> orphans_;
  // Ends `t` with `reason` as its logged end does (Apply), unless ended.
  void EndAppliedLocked(Trajectory& t, EndReason reason);
  // LogStepsLocked's lists for record_, kept between calls.
  std::vector<uint64_t> log_ids_;
  std::vector<int64_t> log_steps_;
  std::vector<double> log_priorities_;
  // Pinned host memory that device vector steps are copied into for the
  // log (LogVectorStepsLocked); grows as needed.
  PinnedBuffer log_staging_;
  // Applying into device blocks: staged rows (FlushApplyRowsLocked); made
  // on first use, dropped once recovery is over (EndOpenTrajectories).
  std::unique_ptr<StagedRows> apply_rows_;

  // Checkpoints. Trajectories that may be in the cold store and left the
  // table since the last checkpoint.
  std::vector<uint64_t> removed_since_checkpoint_;
  // A checkpoint in progress: what it took, to undo on failure.
  struct CheckpointTicket {
    std::vector<std::pair<std::shared_ptr<Trajectory>, int64_t>> persisted;  // (t, new steps)
    std::vector<std::shared_ptr<Trajectory>> cleaned;  // dirty flags cleared
    std::vector<uint64_t> removed;
  };
  CheckpointTicket ticket_;
  bool checkpointing_ = false;  // between CollectCheckpoint and CheckpointDone

  // The cold tier.
  std::shared_ptr<ColdStore> cold_store_;
  std::atomic<bool> read_only_{false};  // read without mu_
  std::map<uint64_t, ColdEntry> cold_;
  int64_t cold_steps_ = 0;
  std::deque<SpillJob> spill_queue_;
  bool spill_running_ = false;  // the front job is being written
  bool rotation_due_ = false;
  int64_t samples_since_rotation_ = 0;
  uint64_t rotation_cursor_ = 0;  // the last trajectory id rotation loaded
  std::set<uint64_t> loading_;    // ids a Load is bringing in
  std::string spill_error_;       // the last failed spill's error, "" after a success
  int64_t spilled_trajectories_ = 0;
  int64_t spilled_bytes_ = 0;
  int64_t loaded_trajectories_ = 0;
  int64_t rotations_ = 0;
  std::condition_variable cold_cv_;  // spill queue, rotation, loads
  bool cold_stop_ = false;
  std::thread cold_thread_;

  // Priorities set on the GPU (UpdatePrioritiesFromDevice) never cost the
  // caller more than the device update: the device table marks the items it
  // updates; device_log_thread_ (logged tables) collects the log's marks
  // every kDeviceLogPeriod and logs each item's latest priority once; a
  // checkpoint collects its own marks into the items
  // (docs/durability.md, "Priorities set on the GPU"). device_log_mu_,
  // taken before mu_, keeps one collection and its append at a time, so
  // that records reach the log in the order of their collections.
  std::mutex device_log_mu_;
  // Under device_log_mu_:
  std::unique_ptr<kernels::DevicePriorityTable::Updated> device_log_buffer_;
  std::unique_ptr<kernels::DevicePriorityTable::Updated> device_checkpoint_buffer_;
  wal::RecordBuilder device_record_;
  // Under mu_:
  std::thread device_log_thread_;
  std::condition_variable device_log_cv_;
  uint64_t device_update_calls_ = 0;         // UpdatePrioritiesFromDevice calls that updated
  uint64_t device_update_calls_logged_ = 0;  // ... of them, logged
  bool device_log_stop_ = false;
  Status device_log_error_;  // the first failure there, for the next call
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_TABLE_IMPL_H_
