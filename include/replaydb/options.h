// Options and specs: what a database, table, writer and sample call are
// configured with. Every field states its default.
#ifndef REPLAYDB_OPTIONS_H_
#define REPLAYDB_OPTIONS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/status.h"
#include "replaydb/types.h"

namespace replaydb {

class Env;

// Negative timeouts mean "wait as long as it takes".
inline constexpr std::chrono::milliseconds kWaitForever{-1};

// When the write-ahead log's bytes become durable (survive a machine crash).
// In every mode a record is handed to the operating system before the call
// that wrote it returns, so a crash of the process alone loses nothing that
// was acknowledged.
enum class WalSyncMode : uint8_t {
  // Never fsync (the OS writes back when it likes; checkpoints still sync).
  kNone = 0,
  // A background thread fsyncs every WalOptions::batch_interval, or sooner
  // once batch_bytes are unsynced. A writer with WriterOptions::sync waits
  // for the fsync that covers its record; others do not wait.
  kBatch = 1,
  // Every write waits for an fsync covering its record. Concurrent writers
  // share fsyncs (group commit).
  kAlways = 2,
};

// What DB::Open does with a damaged write-ahead log.
enum class RecoveryMode : uint8_t {
  // An incomplete or corrupt record at the very end of the newest segment
  // (a write torn by a crash) is dropped, and the dropped bytes reported in
  // DB::recovery_info(). Damage anywhere else fails Open with Corruption
  // naming the file and offset.
  kTolerateTornTail = 0,
  // Any incomplete or corrupt record fails Open with Corruption naming the
  // file and offset.
  kAbsoluteConsistency = 1,
  // Replay stops at the first incomplete or corrupt record wherever it is:
  // the database opens as of the last valid record before it; everything
  // after it, in later segments too, is dropped and reported.
  kPointInTime = 2,
};

std::string_view WalSyncModeName(WalSyncMode mode);  // "none", "batch", "always"
// "tolerate_torn_tail", "absolute_consistency", "point_in_time"
std::string_view RecoveryModeName(RecoveryMode mode);

struct WalOptions {
  // Log every change, so reopening after a crash restores it. Without the
  // log only checkpoints (DB::Checkpoint, or taken on close) are restored.
  // Default: true.
  bool enabled = true;
  // Default: kBatch.
  WalSyncMode sync = WalSyncMode::kBatch;
  // kBatch: the longest time a record stays unsynced. Default: 100 ms.
  std::chrono::milliseconds batch_interval{100};
  // kBatch: unsynced bytes that trigger an fsync early. Default: 4 MiB.
  uint64_t batch_bytes = uint64_t{4} << 20;
  // A segment file is closed and a new one started past this size.
  // Default: 64 MiB.
  uint64_t segment_bytes = uint64_t{64} << 20;
  // Default: kTolerateTornTail.
  RecoveryMode recovery = RecoveryMode::kTolerateTornTail;
};

struct CheckpointOptions {
  // Take a checkpoint once the log has grown by this many bytes since the
  // last one; 0 turns this trigger off. Default: 256 MiB.
  uint64_t every_wal_bytes = uint64_t{256} << 20;
  // Take a checkpoint this long after the last one if anything changed;
  // 0 turns this trigger off. Default: 300 s.
  std::chrono::seconds every{300};
  // Take one when the DB is closed (destroyed), so the next open replays
  // nothing. Default: true.
  bool on_close = true;
  // After recovery (the checkpoint restored, the log replayed), restart
  // rate limiters as for a fresh table given the recovered items: inserts =
  // items, deletes = 0, samples = 0 or the fewest that keep the error
  // within max_diff. Otherwise their counters are the checkpoint's plus
  // what the log replays, made to agree with the items recovered
  // (docs/durability.md, "Recovery"). Default: false.
  bool reset_rate_limiters_on_restore = false;
};

// How the cold store (RocksDB) compresses its files.
enum class ColdCompression : uint8_t {
  kNone = 0,
  kZstd = 1,
  kLz4 = 2,
};

struct DBOptions {
  // Create the directory and an empty catalog if `path` holds no database.
  // Default: true.
  bool create_if_missing = true;
  // Fail with AlreadyExists if `path` already holds a database. Default: false.
  bool error_if_exists = false;
  // All file I/O goes through this. Must outlive the DB. Default: nullptr,
  // meaning Env::Default(), the POSIX file system.
  Env* env = nullptr;
  // The write-ahead log (see WalOptions).
  WalOptions wal;
  // Incremental checkpoints into the cold store (see CheckpointOptions).
  CheckpointOptions checkpoint;
  // Compression of the cold store's files (checkpoints, spilled trajectories,
  // datasets), for files written from this open on. Default: kZstd.
  ColdCompression cold_compression = ColdCompression::kZstd;
  // A replica promoted to primary keeps the trajectories its old primary
  // had open for this long, so that their remote writers, following the
  // cluster to it, resume them where the replica has them (docs/
  // replication.md, "Writers through a failover"); then it ends those left
  // as truncated. 0: at once. Default: 10 s.
  std::chrono::milliseconds writer_resume_window{10000};

  // OK, or InvalidArgument naming a field that holds a value its enum does
  // not have (wal.sync, wal.recovery, cold_compression), or a negative
  // writer_resume_window. DB::Open checks this before it touches the
  // directory.
  Status Validate() const;
};

// The most bytes one step of one column may hold, and one step of all of a
// table's columns together (in a vector table: of all its environments):
// 256 MiB. TableSpec::Validate refuses larger shapes, and shapes whose byte
// size overflows 64 bits, naming the column.
inline constexpr size_t kMaxStepBytes = size_t{256} << 20;

// One column of a table: every step holds one value of `shape` per column.
struct ColumnSpec {
  // Non-empty, at most 128 characters of [A-Za-z0-9_.-], unique in its table.
  std::string name;
  DType dtype = DType::kF32;
  // Per-step shape; {} is a scalar. Every dim >= 1, and the step's bytes
  // (the dims' product times the dtype's size) at most kMaxStepBytes.
  Shape shape;

  // Bytes one step of this column occupies; SIZE_MAX when the shape is
  // invalid or the product overflows (Validate rejects such a column).
  size_t step_bytes() const;
  bool operator==(const ColumnSpec&) const = default;
};

// What to do with windows that would run past the end of a trajectory.
enum class Padding : uint8_t {
  // Only windows of `sequence_length` real steps are items. A trajectory
  // shorter than sequence_length has no items.
  kNone = 0,
  // Additionally, when a trajectory ends, every remaining start step becomes
  // an item whose window is padded with zeros after the trajectory's last
  // step; SampleBatch::mask marks the padded steps 0.
  kTail = 1,
};

// How items are picked for a sample.
enum class SelectorKind : uint8_t {
  kUniform = 0,  // every live item with equal probability, with replacement
  kFifo = 1,     // the oldest live item (probability 1)
  kLifo = 2,     // the newest live item (probability 1)
  // Probability proportional to priority^priority_exponent, with
  // replacement, over the whole double range of priorities (no mass
  // underflows or overflows); items of priority 0 are never drawn, unless
  // every live item has priority 0: then every live item is drawn with
  // equal probability (as Reverb does). A table drawing on a GPU
  // (TableSpec::priority_device) differs in two ways: with every priority
  // 0 a sample fails at once with FailedPrecondition; and it keeps
  // priority^priority_exponent as a float clamped to [1.4e-45, 3.4e38], so
  // its probabilities follow the definition only inside that range.
  kPrioritized = 3,
  kMinHeap = 4,  // the item of lowest priority; ties: the oldest
  kMaxHeap = 5,  // the item of highest priority; ties: the oldest
};

// Which trajectories leave the hot tier when it is full. Open trajectories
// leave only when no ended one is left, oldest first, under either policy.
enum class EvictionPolicy : uint8_t {
  // Whole ended trajectories in the order they were started.
  kOldestFirst = 0,
  // The ended trajectory whose best live item has the lowest priority (a
  // trajectory without live items first); ties: the oldest.
  kLowestPriority = 1,
};

// What the priority given with an appended step means.
enum class StepPriority : uint8_t {
  // It is the priority of the item that starts at that step.
  kItem = 0,
  // The item's priority is the maximum of its window's step priorities.
  kWindowMax = 1,
  // The item's priority is the mean of its window's step priorities.
  kWindowMean = 2,
};
// Steps appended without a priority count as the largest priority seen in
// the table so far (1.0 before any): new experience is sampled eagerly.

// Whether a table's changes go to the database's write-ahead log
// (docs/durability.md). Without the log a table is durable as of its last
// checkpoint; nothing is logged anyway when DBOptions::wal is disabled.
enum class TableLogging : uint8_t {
  // Logged, unless the hot tier is in device memory (placement device:N, or
  // auto on a machine with a GPU): GPU-fed tables then keep the pure device
  // path of VectorWriter::AppendFromDevice, whose logging copies every step
  // through the host.
  kDefault = 0,
  kOn = 1,
  kOff = 2,
};

// What a writer's appends and ends wait for before they return: their
// acknowledgment (docs/replication.md, with the equivalents in Kafka,
// PostgreSQL, MongoDB and Redis). A table has one (TableSpec::acks), a
// writer may say another (WriterOptions::acks). Other changes (priority
// updates, deletes) are acknowledged as kLeader's.
enum class AckMode : uint8_t {
  // WriterOptions only: the table's TableSpec::acks.
  kTable = 0,
  // Once the primary applied it; never held back for replicas.
  kNone = 1,
  // Once the primary applied it; appends wait while a replica reading the
  // log lags more than TableSpec::max_lag_ms behind it.
  kLeader = 2,
  // kLeader, and once the primary's log synced it (as WriterOptions::sync).
  kLeaderDurable = 3,
  // kLeader, and once Acks::replicas replicas applied it (and synced it,
  // where their logs sync kAlways). An append that finds fewer replicas in
  // sync fails Unavailable with nothing stored; one whose replicas fall
  // out of sync while it waits fails Unavailable, stored on the primary.
  kReplicated = 4,
};

struct Acks {
  AckMode mode = AckMode::kTable;
  // kReplicated: how many replicas, 1 to kMaxAckReplicas; 0 otherwise.
  int replicas = 0;
  static Acks Replicated(int k) { return Acks{AckMode::kReplicated, k}; }
  bool operator==(const Acks&) const = default;
};
inline constexpr int kMaxAckReplicas = 16;
// "table", "none", "leader", "leader_durable", "replicated(K)".
std::string AcksName(const Acks& acks);
// AcksName's words back; InvalidArgument naming the text and the choices.
Result<Acks> ParseAcks(std::string_view text);
// OK, or InvalidArgument naming `where` (replicas out of range, or given
// to a mode that counts none).
Status ValidateAcks(const Acks& acks, const std::string& where);

std::string_view PaddingName(Padding p);            // "none", "tail"
std::string_view SelectorKindName(SelectorKind s);  // "uniform", "fifo", "lifo", "prioritized",
                                                    // "min_heap", "max_heap"
std::string_view EvictionPolicyName(EvictionPolicy e);  // "oldest_first", "lowest_priority"
std::string_view StepPriorityName(StepPriority p);      // "item", "window_max", "window_mean"
std::string_view TableLoggingName(TableLogging l);      // "default", "on", "off"

// Reverb's rate limiter. An insert is one item becoming sampleable; a sample
// is one item drawn into a batch; a delete is one item leaving the table
// (eviction, max_times_sampled). With
//   size  = inserts - deletes
//   error = inserts * samples_per_insert - samples
// an insert blocks while size has reached min_size_to_sample and the insert
// would make error > max_diff; a sample of B items blocks while
// size < min_size_to_sample or error - B < min_diff.
//
// A sample's B items are admitted all at once (Reverb admits them one by
// one). A B so large that, at some error the limiter can reach, the sample
// and an insert are both refused would wait forever there (the learner for
// room, the writers for samples): such a Sample fails at once with
// InvalidArgument naming B, the range and the largest B allowed, about
// max_diff - min_diff - samples_per_insert (exactly: the range must hold B
// and one insert at every error the counters can take; Queue(n) allows
// B = n). Likewise a vector table's step (TableSpec::lanes items at once)
// that such a range cannot hold beside a one-item sample fails its append,
// and SetRateLimiter refuses the spec. After a crash the counters are made
// to agree with the items recovered (docs/durability.md, "Recovery").
struct RateLimiterSpec {
  // Default: 1.0. REQUIRES: > 0.
  double samples_per_insert = 1.0;
  // Default: 1. REQUIRES: >= 1.
  int64_t min_size_to_sample = 1;
  // Default: -inf (no lower bound). REQUIRES: min_diff <= max_diff.
  double min_diff = -std::numeric_limits<double>::max();
  // Default: +inf (no upper bound).
  double max_diff = std::numeric_limits<double>::max();

  // Samples block until the table holds min_size items; nothing else blocks.
  static RateLimiterSpec MinSize(int64_t min_size);
  // Keeps error within [offset - error_buffer, offset + error_buffer] where
  // offset = samples_per_insert * min_size_to_sample, so the ratio counts
  // only what happens after the table reached its minimum size. Validate()
  // rejects an error_buffer smaller than max(1, samples_per_insert), which
  // could block inserts and samples forever.
  static RateLimiterSpec SampleToInsertRatio(double samples_per_insert, int64_t min_size_to_sample,
                                             double error_buffer);
  // The same with an explicit [min_diff, max_diff] range, no offset.
  static RateLimiterSpec SampleToInsertRatio(double samples_per_insert, int64_t min_size_to_sample,
                                             double min_diff, double max_diff);
  // A queue of at most `size` items: use with SelectorKind::kFifo and
  // max_times_sampled = 1 (TableSpec::Queue does all three).
  static RateLimiterSpec Queue(int64_t size);
  // A stack of at most `size` items: use with SelectorKind::kLifo and
  // max_times_sampled = 1 (TableSpec::Stack does all three).
  static RateLimiterSpec Stack(int64_t size);

  // OK, or InvalidArgument naming the bad field and its value.
  Status Validate() const;
  bool operator==(const RateLimiterSpec&) const = default;
};

// Where a table's hot tier (its blocks of step data) lives.
struct Placement {
  enum class Kind : uint8_t {
    // Host memory: pinned (page-locked) and mapped into the GPUs' address
    // space when a GPU can be used, so gather kernels read it directly
    // (zero-copy); plain host memory otherwise.
    kHost = 0,
    // The memory (HBM) of CUDA device `device` (cudaMalloc, never managed
    // memory). Creating or opening such a table where that device cannot be
    // used fails with NotSupported.
    kDevice = 1,
    // Device 0 when a GPU can be used, host memory otherwise; decided each
    // time the table is created or opened.
    kAuto = 2,
  };
  Kind kind = Kind::kHost;
  int32_t device = 0;  // kDevice only

  static Placement Host() { return {}; }
  static Placement Device(int32_t device) { return {Kind::kDevice, device}; }
  static Placement Auto() { return {Kind::kAuto, 0}; }
  // "host", "device:N" or "auto"; InvalidArgument naming `text` otherwise.
  static Result<Placement> Parse(std::string_view text);
  // The Parse form.
  std::string ToString() const;
  bool operator==(const Placement& o) const {
    return kind == o.kind && (kind != Kind::kDevice || device == o.device);
  }
};

// Everything that defines a table. Stored in the catalog; a reopened database
// gives back the same spec.
struct TableSpec {
  // Non-empty, at most 128 characters of [A-Za-z0-9_.-], unique in the DB.
  std::string name;
  // At least one column.
  std::vector<ColumnSpec> columns;

  // Hot-tier capacity. If capacity_steps > 0 the tier holds that many steps
  // (rounded up to whole blocks); otherwise capacity_bytes of step data
  // (rounded down to whole blocks, at least one). At most 2^28 blocks.
  // Default: 0 steps, 1 GiB.
  int64_t capacity_steps = 0;
  int64_t capacity_bytes = int64_t{1} << 30;
  // Steps per hot-tier block; a trajectory occupies whole blocks.
  // Default: 64. REQUIRES: 1 <= block_steps <= 65536, and a block's bytes
  // (block_steps x step_bytes() x lanes) at most 1 GiB.
  int64_t block_steps = 64;

  // Steps per item (window length L). Default: 1 (items are transitions).
  // REQUIRES: 1 <= sequence_length <= capacity in steps.
  int64_t sequence_length = 1;
  // Default: kNone.
  Padding padding = Padding::kNone;

  // Default: kUniform.
  SelectorKind selector = SelectorKind::kUniform;
  // Default: kOldestFirst.
  EvictionPolicy eviction = EvictionPolicy::kOldestFirst;
  // kPrioritized: probability proportional to priority^priority_exponent
  // (alpha). Default: 1.0. REQUIRES: finite, >= 0.
  double priority_exponent = 1.0;
  // How step priorities become item priorities. Default: kItem.
  StepPriority step_priority = StepPriority::kItem;
  // Where Table::SampleToDevice draws: -1 on the host; N on CUDA device N,
  // with no host round trip. A kPrioritized table then keeps its priorities
  // on device N (a CPU sum tree otherwise), where
  // Table::UpdatePrioritiesFromDevice updates them; a kUniform table keeps a
  // dense copy of its live items there and draws inside the gather kernel.
  // A device table needs max_times_sampled = 0 (its draws never reach the
  // host, so they are not counted per item) and kOldestFirst eviction
  // (device-side updates are not seen by the host). Creating or opening one
  // where that device cannot be used fails with NotSupported. Default: -1.
  int32_t priority_device = -1;
  // Where the hot tier's blocks live. A table whose priorities are on device
  // N (priority_device) may be placed in host memory or on device N.
  // Default: Placement::Host().
  Placement placement;
  // An item is removed once it has been sampled this many times; 0 means
  // never. Default: 0.
  int64_t max_times_sampled = 0;
  // Default: MinSize(1).
  RateLimiterSpec rate_limiter = RateLimiterSpec::MinSize(1);
  // Whether changes are logged (see TableLogging). Default: kDefault.
  TableLogging logging = TableLogging::kDefault;

  // The cold tier (docs/cold_tier.md). With spill, eviction moves a
  // trajectory into the database's RocksDB store instead of dropping it: it
  // stays in the table (TableInfo::cold_trajectories), its items are not
  // sampled until Table::Load (or rotation) brings it back. Spilling runs in
  // the background; writers wait only when the trajectories still being
  // written out hold more than an eighth of the hot tier. Default: false.
  bool spill = false;
  // Rotation, for datasets larger than the hot tier (needs spill): after
  // every `rotation_every_samples` items sampled, the trajectories holding
  // `rotation_fraction` of the hot tier's blocks that were loaded longest
  // ago leave it and as many cold ones come in, in trajectory id order,
  // wrapping around, so every trajectory is eventually sampled. Runs in the
  // background. Default: 0 and 0 (off). REQUIRES: both > 0 or both 0;
  // rotation_fraction <= 1.
  double rotation_fraction = 0;
  int64_t rotation_every_samples = 0;

  // What writers' appends wait for (AckMode); not kTable. Default: kLeader.
  Acks acks{AckMode::kLeader, 0};
  // kLeader and stronger: how far (in time) a replica may fall behind the
  // primary's log before appends wait for it. Default: 10000. REQUIRES: >= 1.
  int64_t max_lag_ms = 10000;

  // A vector table (docs/vector_tables.md) when > 1: every step holds one
  // row of each column (of the shape above) for each of `lanes`
  // environments, as one vector step, and each environment's row is an item
  // of its own, keyed MakeItemKey(trajectory, step * lanes + environment).
  // Only a vector writer of `lanes` environments writes it; its trajectories
  // are segments of block_steps vector steps that the writer starts and ends
  // itself. Capacities count vector steps and their bytes. A vector table
  // needs sequence_length 1, the uniform selector, max_times_sampled 0,
  // kOldestFirst eviction, no spill, and block_steps * lanes <=
  // kMaxTrajectorySteps; priority_device >= 0 makes SampleToDevice draw
  // inside the gather launch (docs/vector_tables.md). Default: 1 (an
  // ordinary table).
  int64_t lanes = 1;

  // A FIFO queue of at most `size` items, each sampled once.
  static TableSpec Queue(std::string name, std::vector<ColumnSpec> columns, int64_t size);
  // A LIFO stack of at most `size` items, each sampled once.
  static TableSpec Stack(std::string name, std::vector<ColumnSpec> columns, int64_t size);

  // Bytes of one step over all columns (of one environment in a vector
  // table); SIZE_MAX when the sum overflows.
  size_t step_bytes() const;
  // OK, or InvalidArgument naming the table, the field and the values.
  Status Validate() const;
  bool operator==(const TableSpec&) const = default;
};

struct WriterOptions {
  // How long Append and End may wait for the rate limiter (or for hot-tier
  // blocks that an in-flight sample still reads) before returning
  // DeadlineExceeded. Default: forever.
  std::chrono::milliseconds timeout = kWaitForever;
  // With WalSyncMode::kBatch, Append and End return only once their log
  // record is durable (they wait for the batch's fsync). kAlways always
  // waits and kNone never does. A remote writer (DB::Connect) with sync
  // waits for each append's acknowledgment instead of sending appends ahead.
  // Default: false.
  bool sync = false;
  // What this writer's appends and ends wait for (AckMode). Default:
  // kTable (the table's TableSpec::acks; kLeaderDurable where `sync`).
  Acks acks;
  // VectorWriter only: how many threads an append splits its work over the
  // environments between (the caller's thread and threads - 1 the writer
  // starts; they spin briefly after each append, then sleep); in a vector
  // table (TableSpec::lanes), the copy of the step's bytes. 0: automatic,
  // one per 512 environments up to 8, at most half the machine's hardware
  // threads (1 below 1024 environments). 1: the caller's thread alone.
  // At most kMaxWriterThreads. Default: 0.
  int threads = 0;
};

// WriterOptions::threads at most.
inline constexpr int kMaxWriterThreads = 64;

// What importance weights (SampleOptions::importance_beta) are divided by.
enum class WeightNormalization : uint8_t {
  // The largest weight any live item could get, (N * P_min)^-beta with
  // P_min the smallest probability a draw has of picking a live item it
  // can pick: w_i = (P_min / P(i))^beta, in (0, 1]. Prioritized experience
  // replay's definition (also TorchRL's and OpenAI baselines'): a weight
  // does not depend on what else the batch drew. P_min is that of the
  // draw's moment (an item sampled away earlier in the batch no longer
  // counts). Selectors that give every item they can draw the same
  // probability (uniform, FIFO, LIFO, heaps, and prioritized draws when
  // every priority is 0) give weight 1. On the host P_min is kept in
  // O(log n) per priority change; a table drawing on a GPU
  // (TableSpec::priority_device) finds it with one pass over its device
  // priorities per sample.
  kBuffer = 0,
  // The batch's largest weight: the batch's least likely draw gets 1.
  kBatch = 1,
};
std::string_view WeightNormalizationName(WeightNormalization w);  // "buffer", "batch"

struct SampleOptions {
  // How long Sample may wait for the rate limiter before returning
  // DeadlineExceeded. Default: forever.
  std::chrono::milliseconds timeout = kWaitForever;
  // When >= 0, SampleBatch::weights gets importance weights
  // (N * P(i))^-beta, where N is the number of live items, divided as
  // weight_normalization says. Default: -1 (no weights).
  double importance_beta = -1;
  // Default: kBuffer (PER's definition).
  WeightNormalization weight_normalization = WeightNormalization::kBuffer;
  // Split the probability mass into batch_size equal strata and draw one
  // item from each (prioritized selector only; others ignore it).
  // Default: false.
  bool stratified = false;
  // Copy the windows' step data into SampleBatch::columns. false draws keys,
  // probabilities and weights only (columns are left empty). Default: true.
  bool gather = true;
  // Draw without taking (to look, as the replaydb shell's sample does): the
  // rate limiter is neither waited for nor counted, no times_sampled or
  // TableInfo counter changes, no item is removed and no rotation comes
  // due. FailedPrecondition when nothing can be drawn now. Table::Sample
  // only: SampleToDevice and DeviceSampler reject it. Default: false.
  bool peek = false;
};

// ---- long operations: DB::ExportTable, ImportTable, Verify, Compact, and
// ImportD4rl (replaydb/utilities/d4rl.h)

// How far a long operation has come, as LongOperationOptions::progress is
// told. The string_views point into the engine's memory and are valid only
// during the call: copy them to keep them.
struct ProgressUpdate {
  // What runs, on what; the same in every update of one call: "export
  // TABLE" (ExportTable), "import NAME" (ImportTable: the new table's
  // name), "import PATH" (ImportD4rl: the file), "verify DIR" (Verify; DIR
  // is the database's directory) or "compact DIR/cold" (Compact: the cold
  // store's directory).
  std::string_view operation;
  // Units done so far: >= 0, and never less than in the update before.
  int64_t done = 0;
  // Units the whole operation is expected to take, counted as it starts; 0
  // when unknown. The data may change meanwhile (a verify reads what
  // writers added since), so `done` may end below or above it.
  int64_t total = 0;
  // What `done` and `total` count: "steps" (exports, imports, verify) or
  // "bytes" (compact: the cold store's estimated size of each piece
  // compacted).
  std::string_view unit;
  // True in the last update of the call, which is always sent, whether the
  // operation succeeded, failed or was cancelled (`done` then tells how far
  // it got).
  bool finished = false;
};

// Called with a long operation's progress (LongOperationOptions::progress).
using ProgressCallback = std::function<void(const ProgressUpdate&)>;

// Options of the long calls: DB::ExportTable, ImportTable, Verify, Compact,
// and ImportD4rl (replaydb/utilities/d4rl.h). The engine draws nothing
// itself (the replaydb shell draws bars from `progress` on a terminal).
struct LongOperationOptions {
  // When not null, the operation checks *cancel between pieces of work
  // (trajectories, tables, compaction ranges) and stops with Cancelled once
  // it is true, e.g. set from a SIGINT handler; an export or import then
  // leaves nothing behind, as on any error. Must outlive the call.
  // Default: nullptr (runs to the end).
  const std::atomic<bool>* cancel = nullptr;
  // When set, called with the operation's progress: once as the work starts
  // (done 0), then at most once every 100 ms as it advances, then once more
  // with finished = true (also after an error or a cancel), all before the
  // call returns. A call that fails before its work starts (a bad argument,
  // an unknown table) may make no report at all. Calls never overlap: they
  // come one at a time, from the calling thread or from a thread working
  // for the operation. The callback runs while the engine holds locks: it
  // must return quickly, must not throw, and must not call into the DB or
  // its tables (that may deadlock). Must outlive the call.
  // Default: empty (no reports).
  ProgressCallback progress;
};

// ---- remote databases: DB::Connect

struct ConnectOptions {
  // Who is calling, for the server's log ("actor 3", a host name).
  // Default: "replaydb client".
  std::string client_name = "replaydb client";
  // How long Connect may take (the connection and the handshake) before
  // Unavailable. Default: 10 s.
  std::chrono::milliseconds connect_timeout{10000};
  // How long a call waits for its reply beyond its own wait (a sample's or
  // a writer's timeout for the rate limiter) before DeadlineExceeded: the
  // transfer and the server's work. Calls that do not wait (Info, priority
  // updates, CreateTable, Checkpoint) wait this long. Default: 60 s.
  std::chrono::milliseconds call_timeout{60000};
  // A token file (replaydb/server.h's format; its first token is used) for
  // a server that requires a token. Empty: none. Default: empty.
  std::string token_file;
  // Liveness: the connection carries a heartbeat this often, and ends
  // (Unavailable) after ten intervals in which nothing came from the
  // server (1 s at the default). Must equal the server's interval (ServerOptions::heartbeat;
  // `replaydb serve` uses the default): 0 (none) only where the server's is
  // 0 too, or the server ends the silent connection. Default: 100 ms.
  // Connect refuses values below 0, and timeouts of 0 or less
  // (InvalidArgument naming the option).
  std::chrono::milliseconds heartbeat{100};
  // Samples read in place: where the server shares its hot tier (a server
  // that opened its database, Server::Open) and reads on the connection
  // are one-sided (shared memory, RDMA), a sample's windows are read
  // straight from the server's memory (Transport::ReadMany) instead of
  // coming in its reply. Elsewhere samples come by message whatever this
  // says. Default: true.
  bool read_in_place = true;
  // Samples of fewer bytes than this (batch x sequence length x a step's
  // bytes) come by message even so: a read is a round trip of its own,
  // which costs more than carrying a small batch in the reply. Default:
  // 64 KiB.
  size_t read_in_place_min_bytes = size_t{64} << 10;
  // Sharded databases ("A+B+...", docs/sharding.md) only: a sample leaves
  // out the shards that are Unavailable (a server down or unreachable) and
  // draws from the others, its probabilities and importance weights those
  // of the shards that answered (as if the table were theirs alone). false:
  // such a sample fails Unavailable, naming the shard. Other calls that need
  // a down shard fail either way. Default: false.
  bool skip_unavailable_shards = false;
};

}  // namespace replaydb

#endif  // REPLAYDB_OPTIONS_H_
