// DBImpl: the database directory, its lock, its catalog, open tables, the
// write-ahead log and checkpoints into the cold store.
#ifndef REPLAYDB_ENGINE_DB_DB_IMPL_H_
#define REPLAYDB_ENGINE_DB_DB_IMPL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/cold/cold_store.h"
#include "engine/db/catalog.h"
#include "engine/table/table_impl.h"
#include "replaydb/db.h"
#include "replaydb/env.h"
#include "util/progress_reporter.h"
#include "wal/log_tail.h"
#include "wal/log_writer.h"
#include "wal/records.h"
#include "wal/replica_set.h"

namespace replaydb::engine {

class DBImpl final : public DB {
 public:
  // `host_slabs`, when set, provides the hot tiers of tables whose blocks
  // lie in plain host memory (a served database's, which clients read
  // one-sidedly: rdma/shared_slabs.h).
  // `replica`: the database of a read replica (docs/replication.md),
  // whose primary goes on writing the trajectories open when it stopped:
  // recovery leaves them open (else it ends them, truncated).
  static Result<std::unique_ptr<DB>> Open(const DBOptions& options, const std::string& path,
                                          std::shared_ptr<SlabSource> host_slabs = nullptr,
                                          bool replica = false);
  static Result<std::unique_ptr<DB>> OpenReadOnly(const DBOptions& options,
                                                  const std::string& path);
  ~DBImpl() override;

  Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) override;
  Result<std::shared_ptr<Table>> GetTable(std::string_view name) override;
  Status DropTable(std::string_view name) override;
  std::vector<std::string> ListTables() const override;
  // The name of the table with id `id` (the log's records name tables by
  // id); empty when there is none.
  std::string TableName(uint32_t id) const;
  const std::string& path() const override { return path_; }
  Status Checkpoint() override;
  RecoveryInfo recovery_info() const override { return recovery_; }
  bool read_only() const override { return read_only_; }
  Status ExportTable(std::string_view table, const std::string& dir,
                     const LongOperationOptions& options) override;
  Result<std::shared_ptr<Table>> ImportTable(const std::string& source_dir,
                                             std::string_view source_table,
                                             std::string_view name,
                                             const LongOperationOptions& options) override;
  Result<WalInfo> Wal() const override;
  Result<VerifyReport> Verify(const LongOperationOptions& options) override;
  Status Compact(const LongOperationOptions& options) override;

  // Replication (engine/db/db_replication.cc, docs/replication.md).
  //
  // A primary's side: the log's records from `from` on
  // (wal::ReadLogRange), waiting until `until` for one to be written when
  // there is none yet. `replica` names the reader: checkpoints keep the
  // segments from `hold_segment` on (the place it saved; 0: `from`'s)
  // until it has not read for wal::ReplicaSet::kHoldTime. FailedPrecondition when
  // this database has no log, when `from` is past its end, or when `from`
  // is its beginning (segment 0) and a checkpoint has removed its first
  // records (a replica then needs a snapshot); Unavailable when the log
  // fails or closes while the read waits.
  Result<wal::LogChunk> ReadLog(const std::string& replica, wal::LogPosition from,
                                uint64_t hold_segment, size_t max_bytes,
                                std::chrono::steady_clock::time_point until);
  // Waits until the log ends past `position` or `until` passes
  // (LogWriter::WaitPast); where it ends then.
  wal::LogPosition WaitForLogPast(wal::LogPosition position,
                                  std::chrono::steady_clock::time_point until) const {
    if (log_ == nullptr) {
      std::this_thread::sleep_until(until);
      return {};
    }
    return log_->WaitPast(position, until);
  }
  // Where the log ends now (nothing without a log).
  wal::LogPosition LogEnd() const { return log_ != nullptr ? log_->end() : wal::LogPosition{}; }
  // The replicas reading this database's log.
  wal::ReplicaSet* replica_set() const { return replicas_.get(); }
  // A primary's side of a new replica's start (docs/replication.md,
  // "Snapshots"): a checkpoint, then a copy of the database as of it in
  // `dir` (which must not exist; inside this database's directory, so
  // that the cold store's files are hard links): CATALOG, and cold/ as
  // RocksDB's checkpoint. The replica applies this log from the returned
  // position on; its segments from there stay for replica `replica`
  // (wal::ReplicaSet::Hold). FailedPrecondition when this database has no
  // log.
  Result<wal::LogPosition> MakeSnapshot(const std::string& replica, const std::string& dir);
  // A replica's side: makes `dir` a database as of the snapshot whose
  // files were copied to `staged` (MakeSnapshot's; a folder inside `dir`),
  // replicating `primary` from `from` on: cold/ moved into place, a log
  // that starts at from's segment, REPLICA, and the CATALOG last (a
  // directory without one is not a database yet: a replica's start then
  // installs its snapshot afresh); `staged` is removed. REQUIRES: `dir`
  // holds no database, and nothing has it open.
  static Status InstallSnapshot(Env* env, const std::string& dir, const std::string& staged,
                                const std::string& primary, wal::LogPosition from);
  // A replica's side: applies records its primary shipped (ReadLog's),
  // each logged here first, then applied as recovery applies it
  // (ApplyLogRecord: idempotent, so records applied again change nothing);
  // a CreateTable record's table is made with the primary's id and spec, a
  // DropTable record's table dropped. `source` names the primary for
  // messages. One caller at a time.
  Status ApplyShipped(std::string_view records, const std::string& source);
  // Makes everything logged so far durable (an fsync whatever the sync
  // mode): a replica does before it records where it is.
  Status SyncLog();
  // Whether this database's log syncs every write (WalSyncMode::kAlways):
  // a replica then syncs what it applied before it reads on, as its
  // primary's acks replicated(k) count on.
  bool log_syncs_always() const {
    return log_ != nullptr && log_->sync_mode() == WalSyncMode::kAlways;
  }
  // Whether it has no log, or one that never syncs (WalSyncMode::kNone):
  // a sync writer's appends then wait for no fsync.
  bool log_never_syncs() const {
    return log_ == nullptr || log_->sync_mode() == WalSyncMode::kNone;
  }
  Result<ReplicationInfo> Replication() const override;

  // Epochs and fencing (docs/replication.md, "Failover").
  //
  // DIR/EPOCHS: "replaydb epochs 1", then a line per epoch, "EPOCH SEGMENT
  // OFFSET": where in this database's log it began. None: epoch 0.
  // NotFound when there is none; Corruption naming the file.
  static constexpr const char* kEpochsFile = "EPOCHS";
  static Status ReadEpochs(Env* env, const std::string& dir, std::vector<EpochStart>* epochs);
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Epoch `epoch` begins where the log ends now (DIR/EPOCHS gains its
  // line). FailedPrecondition unless it is past epoch().
  Status BeginEpoch(uint64_t epoch);
  // DIR/FENCED: "replaydb fenced 1", "epoch N", "primary ADDR". A fenced
  // database takes no more logged writes (its log is sealed, also when it
  // is opened again): epoch N's primary is ADDR.
  static constexpr const char* kFencedFile = "FENCED";
  // Fences this database for epoch `epoch`, whose primary is `primary`;
  // returns where its log ends (everything acknowledged is before it).
  // FailedPrecondition unless `epoch` is past epoch() and not below an
  // earlier fence's.
  Result<wal::LogPosition> Fence(uint64_t epoch, const std::string& primary);
  // The primary that fenced this database ("" when none), and its epoch.
  std::string fenced_by(uint64_t* epoch = nullptr) const;
  bool fenced() const { return fenced_.load(std::memory_order_acquire); }
  // What a fenced database answers writes with.
  Status FencedStatus(uint64_t epoch, const std::string& primary) const;
  // A promoted replica's side: no longer a replica (REPLICA removed), epoch
  // `epoch` begun, and the trajectories left open kept for their writers
  // to resume (TableImpl::KeepOrphans) for DBOptions::writer_resume_window,
  // then ended (truncated, logged). Returns where the epoch began.
  Result<wal::LogPosition> BecomePrimary(uint64_t epoch);
  // A replica's place in its primary's log, DIR/REPLICA ("replaydb replica
  // 1", then the primary's address, segment and offset, a line each).
  // Read: NotFound when there is none, Corruption naming the file when it
  // does not parse.
  static constexpr const char* kReplicaFile = "REPLICA";
  // How ReadLog's FailedPrecondition ends where the log no longer holds
  // the replica's place: the replica copies a new snapshot when its server
  // is opened again (rdma::CopySnapshotIfNew; Server::NeedsSnapshot).
  // Replicas recognise the refusal by kSnapshotNeededMarker, its first
  // words (the hint after them may change).
  static constexpr const char* kSnapshotNeeded =
      "the replica needs a new snapshot of the primary (its server copies one when opened "
      "again)";
  static constexpr const char* kSnapshotNeededMarker =
      "the replica needs a new snapshot of the primary";
  static Status ReadReplicaFile(Env* env, const std::string& dir, std::string* primary,
                                wal::LogPosition* position);
  static Status WriteReplicaFile(Env* env, const std::string& dir, const std::string& primary,
                                 wal::LogPosition position);

 private:
  struct Entry {
    uint32_t id = 0;
    TableSpec spec;
  };
  using Specs = std::map<std::string, Entry, std::less<>>;

  DBImpl(const DBOptions& options, Env* env, std::string path, std::unique_ptr<FileLock> lock);

  Result<std::shared_ptr<TableImpl>> MakeTable(const TableSpec& spec);
  // CreateTable with table id `id`. REQUIRES: mu_ held.
  Result<std::shared_ptr<Table>> CreateTableLocked(const TableSpec& spec, uint32_t id);
  // A shipped record applied (ApplyShipped).
  Status ApplyShippedRecord(wal::RecordType type, std::span<const std::byte> payload,
                            const std::string& source);
  std::shared_ptr<SlabSource> host_slabs_;  // set before any table is made
  // Writes the catalog of `specs`. REQUIRES: mu_ held.
  Status SaveCatalogLocked(const Specs& specs, uint32_t next_table_id);
  // Records a table's changed spec (SetRateLimiter).
  Status PersistSpec(const TableSpec& spec);
  // Restores the checkpoint, replays the log, ends open trajectories.
  Status Recover();
  // Copies every trajectory of table `table_id` in `store` into `dst` (new,
  // empty) through TableImpl::ImportStored, counting steps on `progress`.
  static Status CopyTrajectories(ColdStore& store, uint32_t table_id, TableImpl& dst,
                                 util::ProgressReporter& progress, const std::atomic<bool>* cancel);
  // The table and its id, or NotFound.
  Result<std::pair<std::shared_ptr<TableImpl>, uint32_t>> FindTable(std::string_view name) const;
  // Drops a table an import created, keeping `error`.
  Status AbandonImport(const std::string& name, const Status& error);
  void CheckpointLoop();
  // Ends the trajectories a promotion kept for their writers (BecomePrimary)
  // that no writer resumed: at once (EndOrphans), or once
  // writer_resume_window has passed (OrphansLoop, its own thread).
  Status EndOrphans();
  void OrphansLoop();
  // Reads DIR/EPOCHS and DIR/FENCED (sealing the log when fenced), at
  // Open and OpenReadOnly.
  Status LoadEpochs();
  // Checkpoint, calling `then` (when set) with the segment replay starts
  // at once the checkpoint is written, before the log before it goes
  // (checkpoints held off meanwhile).
  Status CheckpointThen(const std::function<Status(uint64_t segment)>& then);
  std::vector<std::shared_ptr<TableImpl>> OpenTables() const;

  // Corruption: the catalog says a checkpoint was taken, cold/ has none.
  Status NoCheckpoint() const;
  // FailedPrecondition naming `what` when read-only.
  Status CheckWritable(std::string_view what) const;

  const DBOptions options_;
  bool read_only_ = false;
  std::atomic<bool> replica_{false};  // set by Open before Recover; Promote clears it
  // DIR/EPOCHS and DIR/FENCED as loaded and changed since. Guarded by
  // epochs_mu_ (epoch_ also read without it).
  mutable std::mutex epochs_mu_;
  std::vector<EpochStart> epochs_;
  std::atomic<uint64_t> epoch_{0};
  std::string fenced_by_;
  uint64_t fenced_epoch_ = 0;
  std::atomic<bool> fenced_{false};
  Env* const env_;
  const std::string path_;
  const std::string catalog_path_;
  const std::string wal_dir_;
  std::unique_ptr<FileLock> lock_;
  std::shared_ptr<ColdStore> cold_;  // shared with the tables, which spill into it
  std::shared_ptr<wal::LogWriter> log_;  // null when options_.wal.enabled is false
  RecoveryInfo recovery_;
  // The trajectories recovery ended, by table id: logged once the log is
  // open (Open).
  std::map<uint32_t, std::vector<uint64_t>> ended_at_recovery_;
  uint64_t next_segment_ = 1;  // the first segment a LogWriter may create
  // The log segment replay starts at after the last checkpoint (as of open
  // for a read-only opener).
  uint64_t checkpoint_segment_ = 0;  // guarded by checkpoint_mu_
  // The last checkpoint says its writer created checkpoint_segment_.
  bool checkpoint_wal_continues_ = false;  // guarded by checkpoint_mu_

  mutable std::mutex mu_;
  Specs specs_;
  uint32_t next_table_id_ = 1;
  // The catalog says cold/ holds a checkpoint (set by the first one).
  bool checkpointed_ = false;  // guarded by mu_
  std::map<std::string, std::shared_ptr<TableImpl>, std::less<>> tables_;
  std::map<uint32_t, std::shared_ptr<TableImpl>> by_id_;  // for replay
  wal::RecordBuilder record_;  // guarded by mu_

  // Checkpoints: one at a time.
  mutable std::mutex checkpoint_mu_;
  uint64_t checkpoint_sequence_ = 0;     // guarded by checkpoint_mu_
  uint64_t log_bytes_at_checkpoint_ = 0;  // guarded by checkpoint_mu_
  std::chrono::steady_clock::time_point last_checkpoint_;  // guarded by checkpoint_mu_
  // Set by Open when the checkpoint of what it recovered is left to the
  // checkpoint thread; that thread retries it until it succeeds.
  std::atomic<bool> checkpoint_requested_{false};
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stop_ = false;  // guarded by loop_mu_
  std::thread checkpoint_thread_;
  // When OrphansLoop ends the orphans (max: none waiting). Guarded by loop_mu_.
  std::chrono::steady_clock::time_point orphans_due_ = std::chrono::steady_clock::time_point::max();
  std::thread orphans_thread_;
  // Held while a shipped record is logged and applied, and by Checkpoint
  // while it rolls the log.
  std::mutex ship_mu_;
  // The replicas that read the log.
  const std::shared_ptr<wal::ReplicaSet> replicas_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_DB_DB_IMPL_H_
