// The database: a directory holding the catalog of tables, the write-ahead
// log and the cold store (layout at DB::Open).
//
//   auto db = replaydb::DB::Open({}, "/data/replay");
//   auto table = (*db)->CreateTable(spec);
#ifndef REPLAYDB_DB_H_
#define REPLAYDB_DB_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb {

// What DB::Open recovered (see docs/durability.md).
struct RecoveryInfo {
  bool checkpoint_found = false;   // a checkpoint was restored
  uint64_t checkpoint_sequence = 0;
  uint64_t wal_segments = 0;       // log segments replayed
  uint64_t wal_records = 0;        // log records replayed
  uint64_t wal_bytes = 0;
  // Damage or a gap in the log that RecoveryMode dropped (dropped_file
  // empty: none; wal/FORMAT.md, Recovery). For a missing segment
  // dropped_file names it and dropped_bytes counts the later segments'
  // bytes that were dropped (what the missing file held is unknown).
  std::string dropped_file;
  uint64_t dropped_offset = 0;
  uint64_t dropped_bytes = 0;
  std::string dropped_reason;
  // Trajectories open at the crash, ended (as truncated) by recovery.
  int64_t trajectories_ended = 0;
};

// The write-ahead log (DB::Wal).
// A replica's reads as its primary remembers them (ReplicationInfo).
struct ReplicaProgress {
  std::string name;      // the replica's (its directory, unless told)
  uint64_t segment = 0;  // the segment it holds (0: the log's beginning)
  double seconds_since_read = 0;
  // Since the primary opened (0 and false before its first read there):
  // where it has applied the primary's log up to, how long since it last
  // caught up with it, and whether it is in sync (docs/replication.md).
  uint64_t applied_segment = 0;
  uint64_t applied_offset = 0;
  double lag_seconds = 0;
  bool in_sync = false;
};

// Where a database stands in replication (docs/replication.md).
// Where an epoch began in a database's log (ReplicationInfo::epochs).
struct EpochStart {
  uint64_t epoch = 0;
  uint64_t segment = 0;
  uint64_t offset = 0;
};

// DB::Promote's options.
struct PromoteOptions {
  // The old primary cannot be reached and is known to be dead (its machine
  // or process is gone for good): promote without fencing it. Default:
  // false, and a promotion whose old primary cannot be reached is refused
  // (it may only be cut off, and still take writes).
  bool old_primary_dead = false;
};

struct ReplicationInfo {
  // "replica": it follows a primary's log; "primary": it does not (its log
  // may be shipped to replicas, listed below; none is fine).
  std::string role;
  // A replica's primary (its address).
  std::string primary;
  // A primary: its log's end. A replica: where it has applied its
  // primary's log up to (segment, byte offset in the primary's log).
  uint64_t segment = 0;
  uint64_t offset = 0;
  // A replica: its primary's log's end when it last read (0: not known).
  uint64_t primary_segment = 0;
  uint64_t primary_offset = 0;
  // A replica served by a server: whether it is connected to its primary
  // now, and its last failure (empty after a good read).
  bool connected = false;
  std::string last_error;
  // A primary: the replicas that read in the last
  // kReplicaHoldTime (10 minutes).
  std::vector<ReplicaProgress> replicas;
  // The epoch this database is in (0 until a promotion; a replica's is its
  // primary's) and each epoch's start in its own log (DIR/EPOCHS;
  // docs/replication.md, "Failover").
  uint64_t epoch = 0;
  std::vector<EpochStart> epochs;
  // A primary deposed by a promotion (DB::Promote): the new primary's
  // address (and fenced_epoch, its epoch); it refuses writes. Empty: not
  // fenced.
  std::string fenced_by;
  uint64_t fenced_epoch = 0;
};

struct WalInfo {
  bool enabled = false;     // a read-only opener: whether the writer logs
  std::string dir;          // path/wal
  std::string sync;         // "none", "batch" or "always" (this opener's)
  uint64_t segments = 0;    // segment files in dir
  uint64_t first_segment = 0;  // their numbers (0 when none)
  uint64_t last_segment = 0;
  uint64_t bytes = 0;          // their total size
  uint64_t checkpoint_sequence = 0;  // the last checkpoint's (0: none yet)
  uint64_t checkpoint_segment = 0;   // replay starts at this segment
  // What a crash now would replay: records and bytes (headers included)
  // logged since the last checkpoint.
  uint64_t records_since_checkpoint = 0;
  uint64_t bytes_since_checkpoint = 0;
  std::string note;  // empty, or why the counts may be short
};

// What DB::Verify read and found.
struct VerifyReport {
  int64_t tables = 0;
  int64_t hot_trajectories = 0;
  int64_t cold_trajectories = 0;
  int64_t steps = 0;            // steps read (hot and cold)
  int64_t bytes = 0;            // step bytes read
  uint64_t wal_records = 0;     // log records read after the last checkpoint
  std::vector<std::string> problems;  // one line each; empty: all is well
};

// Thread-safe. Only one read-write opener per directory at a time, across
// processes and within one: a second Open fails with Busy. Destroying the DB
// closes every table (waiters get Cancelled) and releases the lock.
class DB {
 public:
  // Opens or (with options.create_if_missing) creates the database in
  // directory `path`. Directory layout:
  //   path/LOCK     held (flock) by the read-write opener; holds its pid
  //   path/CATALOG  FlatBuffers catalog of tables, replaced atomically
  //   path/wal/      write-ahead log segments (wal/FORMAT.md)
  //   path/cold/     RocksDB: checkpoints (engine/cold/COLD.md)
  // Opening restores the last checkpoint and replays the log after it.
  // InvalidArgument, before anything in `path` is touched, when
  // options.Validate() fails.
  static Result<std::unique_ptr<DB>> Open(const DBOptions& options, const std::string& path);
  // Opens the database in `path` read-only: any number of such openers, in
  // any processes, also while a read-write opener is writing. Each sees the
  // database as of its open: the writer's last checkpoint (and trajectories
  // spilled since), not the log after it. Tables sample and load; writers,
  // priority updates, CreateTable, DropTable and Checkpoint fail with
  // FailedPrecondition. Takes no lock and writes nothing in `path`.
  // NotFound when there is no database there. Uses options.env only to read
  // the catalog.
  static Result<std::unique_ptr<DB>> OpenReadOnly(const DBOptions& options,
                                                  const std::string& path);

  // Connects to a database that `replaydb serve` (replaydb/server.h) hosts
  // at `address`, ucx://HOST:PORT, or the primary of a cluster, as its
  // coordinator names it: etcd://HOST:PORT/CLUSTER or file://PATH
  // (replaydb/cluster.h); or to several such databases as the shards of
  // one, their addresses joined by '+' (docs/sharding.md: each table spans
  // every shard and samples with exact global probabilities). A cluster's connection follows its
  // primary: a call made while none answers waits for one (up to options.connect_timeout, then
  // Unavailable); a call the server refused because it is no longer the primary is made again on
  // the one named now; a call in flight when the primary went fails Unavailable; a trajectory
  // writer follows too, resuming its trajectory on the new primary (each
  // step stored once; docs/replication.md, "Writers through a failover"),
  // and so does a vector writer, each environment's trajectory (one of a
  // vector table, lanes > 1: its segment). path()
  // is then the cluster's address. Returns it as a DB whose tables and
  // writers run every call on the server: what a local table would do,
  // byte for byte (a seeded sample draws the same items). What a remote
  // table does not do yet is NotSupported, naming the call (rdma/README.md
  // lists them). InvalidArgument naming a malformed address; Unavailable
  // when nothing answers within options.connect_timeout; FailedPrecondition
  // with the server's words when it refuses the client. Once the server is
  // gone, every call returns Unavailable (within its deadline).
  // One difference by design: a remote trajectory writer sends its appends
  // ahead of their acknowledgments (at most 64 calls or 8 MiB of steps);
  // End, trajectory_id() and the writer's destructor wait for them, and a
  // failure comes back from a later call of the writer, saying how many
  // steps after it were dropped. WriterOptions::sync makes each Append wait
  // for its own (rdma/remote_db.cc, RemoteWriter).
  static Result<std::unique_ptr<DB>> Connect(const std::string& address,
                                             const ConnectOptions& options = {});

  virtual ~DB() = default;

  // Validates `spec`, records it in the catalog (durably, before returning)
  // and returns the new, empty table. AlreadyExists if the name is taken.
  virtual Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) = 0;
  // NotFound if no table has that name.
  virtual Result<std::shared_ptr<Table>> GetTable(std::string_view name) = 0;
  // Removes the table from the catalog and closes it. NotFound if unknown.
  virtual Status DropTable(std::string_view name) = 0;
  // Names of all tables, sorted.
  virtual std::vector<std::string> ListTables() const = 0;

  virtual const std::string& path() const = 0;

  // Takes an incremental checkpoint now: what changed since the last one
  // goes into the cold store, which is flushed; log segments before it are
  // deleted. Writers and samplers keep running. Checkpoints also happen
  // automatically (CheckpointOptions).
  virtual Status Checkpoint() = 0;

  // What Open recovered.
  virtual RecoveryInfo recovery_info() const = 0;

  // Whether this opener is read-only (OpenReadOnly).
  virtual bool read_only() const = 0;

  // ---- datasets (docs/cold_tier.md) ----
  // The long calls below (and Verify, Compact) draw nothing: they report
  // progress to options.progress and stop early on options.cancel
  // (LongOperationOptions).

  // Copies table `table`, as of now, into a new database created in `dir`
  // (AlreadyExists if one is there): its spec and every trajectory, hot and
  // cold, with ids, priorities and sample counts; open trajectories arrive
  // ended (truncated). A read-write database takes a checkpoint first. On
  // error the new database is removed.
  //
  // Export, import, Verify and Compact stop early with Cancelled when
  // *options.cancel becomes true, e.g. from a SIGINT handler; an export or
  // import then leaves nothing behind, as on any error. Progress: "export
  // TABLE", in steps.
  virtual Status ExportTable(std::string_view table, const std::string& dir,
                             const LongOperationOptions& options = {}) = 0;
  // Imports table `source_table` of the database in `source_dir` (opened
  // read-only, so a writer may be using it: its last checkpoint is what
  // comes) as a new table `name` (empty: the source's name) with the
  // source's spec. Trajectories go to the cold tier, then as many as fit
  // into the hot tier. AlreadyExists if `name` is taken; on any error the
  // new table is dropped, so nothing half-imported stays. Progress: "import
  // NAME" (the new table's), in steps.
  virtual Result<std::shared_ptr<Table>> ImportTable(const std::string& source_dir,
                                                     std::string_view source_table,
                                                     std::string_view name = {},
                                                     const LongOperationOptions& options = {}) = 0;
  // An HDF5 file in the D4RL layout is imported by ImportD4rl of
  // replaydb/utilities/d4rl.h, an optional library (replaydb_d4rl).

  // ---- maintenance (the replaydb shell's wal, verify and compact) ----

  // The write-ahead log as it is now. A read-only opener reads the segment
  // files, so a record the writer is appending at that moment may be left
  // out (WalInfo::note then says where counting stopped).
  virtual Result<WalInfo> Wal() const = 0;
  // Where the database stands in replication (the shell's `replication`):
  // a served one's as its server knows it (a replica's follower state
  // included); a directory's from its log and its REPLICA and REPLICAS
  // files. The default: NotSupported.
  virtual Result<ReplicationInfo> Replication() const;
  // Manual failover (docs/replication.md, "Failover"): a served read
  // replica becomes the primary of the next epoch. Its server first fences
  // the old primary (which then refuses writes, also after a restart, and
  // says where they go), applies its log to the end it had when fenced,
  // stops following, keeps the trajectories left open for their writers
  // to resume (DBOptions::writer_resume_window; then ends them truncated)
  // and takes writes. Returns the new epoch. FailedPrecondition on a server
  // that is no replica; Unavailable naming the old primary when it cannot
  // be reached, unless options.old_primary_dead. The default (a local
  // database): NotSupported.
  virtual Result<uint64_t> Promote(const PromoteOptions& options = {});
  // Reads everything: each table's index is checked for consistency, every
  // trajectory is read from the cold store (FlatBuffers verified, RocksDB
  // block checksums checked) and a hot trajectory's stored steps are
  // compared with its blocks; RocksDB's files are checksummed whole; the log
  // after the last checkpoint is read with its record checksums (and must
  // continue from the checkpoint's segment). Damage that recovery dropped
  // when this opener opened (RecoveryInfo::dropped_file) is a problem too:
  // it is gone from the files, but it was damage. What is wrong goes into
  // VerifyReport::problems (an error Status only when the check itself
  // cannot run). Changes nothing (`replaydb DIR -c verify` opens read-only,
  // so recovery changes nothing either). Stops with Cancelled when
  // *options.cancel becomes true. Progress: "verify PATH" (the database's
  // directory), in steps read.
  virtual Result<VerifyReport> Verify(const LongOperationOptions& options = {}) = 0;
  // Compacts the cold store (RocksDB): space of dropped tables, rewritten
  // metadata and loaded trajectories is given back, table by table.
  // FailedPrecondition on a read-only opener. Stops with Cancelled when
  // *options.cancel becomes true. Progress: "compact PATH/cold", in bytes
  // (the store's size estimates).
  virtual Status Compact(const LongOperationOptions& options = {}) = 0;
};

}  // namespace replaydb

#endif  // REPLAYDB_DB_H_
