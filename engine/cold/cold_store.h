// ColdStore: the RocksDB database under DIR/cold that holds checkpoints:
// trajectories' steps and metadata, tables' counters, and the checkpoint's
// WAL position. Keys and values: engine/cold/COLD.md (values engine/cold/cold.fbs).
//
// Thread safety: every method may be called concurrently (RocksDB is).
#ifndef REPLAYDB_ENGINE_COLD_COLD_STORE_H_
#define REPLAYDB_ENGINE_COLD_COLD_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include <flatbuffers/flatbuffers.h>

#include "replaydb/env.h"
#include "replaydb/options.h"
#include "replaydb/status.h"

namespace rocksdb {
class DB;
class Env;
class Logger;
class WriteBatch;
}  // namespace rocksdb

namespace replaydb::engine {

// The verified root table of a cold value, or null when `bytes` do not
// verify. The bytes are copied to `*aligned` first (FlatBuffers reads
// scalars in place); the result points into it.
template <typename T>
const T* VerifiedValue(std::string_view bytes, std::string* aligned) {
  aligned->assign(bytes.data(), bytes.size());
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(aligned->data()),
                                 aligned->size());
  if (!verifier.VerifyBuffer<T>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<T>(aligned->data());
}

// A StepChunk value (engine/cold/cold.fbs) read in place, without a copy: the
// step bytes point into the value. Chunks are as large as trajectories, and
// RocksDB hands values over at any alignment, so ReadStepChunk neither
// copies nor uses the generated accessors (which load some scalars with
// aligned loads): it verifies the buffer without the alignment check and
// reads every scalar with flatbuffers::ReadScalar, which allows unaligned
// addresses.
struct StepChunkView {
  int64_t first_step = 0;
  int64_t count = 0;
  uint32_t step_bytes = 0;
  const std::byte* data = nullptr;  // null when the chunk has no data vector
  size_t data_bytes = 0;
};
// False when `bytes` are not a valid StepChunk.
bool ReadStepChunk(std::string_view bytes, StepChunkView* out);

// `s`, with the table files (*.sst) of `dir` that fail their checksums named
// when `s` is a Corruption that names none: RocksDB reports some damage to a
// table file against the MANIFEST that lists it.
Status NameDamagedTableFiles(Status s, const std::string& dir);

class ColdStore {
 public:
  // Opens (creating if missing) the store in directory `dir`. RocksDB writes
  // its files through `env` (engine/cold/rocksdb_env.h), its info log `dir`/LOG
  // included (engine/cold/rocksdb_info_log.h); `env` must outlive the store.
  // `compression` applies to the files it writes from now on.
  static Result<std::unique_ptr<ColdStore>> Open(const std::string& dir, Env* env,
                                                 ColdCompression compression =
                                                     ColdCompression::kZstd);
  // Opens the store in `dir` read-only, as a RocksDB secondary instance
  // beside a read-write opener that may be writing it: it sees the state
  // as of the open (checkpoints, and spills in RocksDB's log). RocksDB keeps
  // its own files in a fresh temporary directory, removed on close. Writes
  // fail with FailedPrecondition. Corruption naming the file when one that
  // the MANIFEST lists is missing or has another size (as the read-write
  // open reports).
  static Result<std::unique_ptr<ColdStore>> OpenReadOnly(const std::string& dir);
  ~ColdStore();
  bool read_only() const { return !secondary_dir_.empty(); }
  ColdStore(const ColdStore&) = delete;
  ColdStore& operator=(const ColdStore&) = delete;

  // Writes collected by a checkpoint, applied atomically by Write.
  class Batch {
   public:
    // `reserved_bytes`: room made at once for what the batch will hold.
    explicit Batch(size_t reserved_bytes = 0);
    ~Batch();
    void PutCheckpoint(std::string_view value);
    void PutTableState(uint32_t table, std::string_view value);
    void PutTrajectory(uint32_t table, uint64_t trajectory, std::string_view meta);
    void PutSteps(uint32_t table, uint64_t trajectory, int64_t first_step, std::string_view chunk);
    // Removes the trajectory's metadata and steps.
    void DeleteTrajectory(uint32_t table, uint64_t trajectory);
    // Removes everything of the table.
    void DeleteTable(uint32_t table);
    size_t bytes() const;

   private:
    friend class ColdStore;
    std::unique_ptr<rocksdb::WriteBatch> batch_;
  };

  // Applies `batch` atomically, then flushes the memtable so the batch is
  // on disk in SST files (the store runs without RocksDB's own WAL: the
  // checkpoint's WAL position is only advanced once this returns OK). After
  // a failed write, flush or compaction (full disk, failed fsync), also one
  // RocksDB ran in the background, RocksDB stops writing; the next Write or
  // Compact first reopens it (waiting for calls in progress), so a later
  // checkpoint succeeds once the cause is gone. IOError naming the store,
  // the step ("write", "flush", "reopening after a failed write") and the
  // file RocksDB could not write.
  Status Write(Batch& batch);
  // Applies `batch` atomically through RocksDB's own log, unsynced and
  // without a flush (spills: a crash of the process loses nothing written,
  // and the next checkpoint's flush makes the log obsolete). Failures as for
  // Write.
  Status WriteLogged(Batch& batch);

  // NotFound when no checkpoint was taken yet.
  Status GetCheckpoint(std::string* value);
  Status GetTableState(uint32_t table, std::string* value);
  // NotFound when the store has no such trajectory.
  Status GetTrajectory(uint32_t table, uint64_t trajectory, std::string* value);
  // Calls fn(trajectory id, metadata value) for every trajectory of the
  // table, in id order.
  Status ForEachTrajectory(uint32_t table,
                           const std::function<Status(uint64_t, std::string_view)>& fn);
  // Calls fn(chunk value) with the step chunk of the trajectory that starts
  // at `first_step`, read in place (pinned in RocksDB's block cache, no copy;
  // the value lives only for the call). NotFound when there is none.
  Status WithChunk(uint32_t table, uint64_t trajectory, int64_t first_step,
                   const std::function<Status(std::string_view)>& fn);
  // Table ids that have any key.
  Status ListTables(std::vector<uint32_t>* tables);
  // Reads every file of the store and checks RocksDB's block checksums.
  Status VerifyChecksums();
  // Compacts the whole key space, one table's range at a time; Cancelled
  // when *cancel (may be null) becomes true. Failures as for Write. Reports to `progress` (may be
  // empty) as "compact DIR", in bytes.
  Status Compact(const std::atomic<bool>* cancel, const ProgressCallback& progress);

  // A copy of the store as it is now in `dir` (which must not exist; on
  // the same file system its files are hard links): RocksDB's checkpoint,
  // memtable flushed first. A replica's snapshot (DBImpl::MakeSnapshot).
  Status CopyTo(const std::string& dir);

  const std::string& dir() const { return dir_; }

 private:
  ColdStore(std::string dir, std::unique_ptr<rocksdb::Env> env,
            std::shared_ptr<rocksdb::Logger> info_log, rocksdb::DB* db,
            ColdCompression compression);
  // Reopens RocksDB if a failed write, or a failed background job, left it
  // stopped.
  Status ReopenIfNeeded();
  // IOError while db_ is null (a reopen failed). REQUIRES: mu_ held.
  Status Usable() const;
  Status WriteWith(Batch& batch, bool logged);
  const std::string dir_;
  const std::unique_ptr<rocksdb::Env> env_;  // outlives db_
  // RocksDB's info log (engine/cold/rocksdb_info_log.h); outlives db_.
  const std::shared_ptr<rocksdb::Logger> info_log_;
  // Shared by every call; exclusive while Write reopens db_.
  mutable std::shared_mutex mu_;
  std::unique_ptr<rocksdb::DB> db_;
  std::atomic<bool> needs_reopen_{false};
  const ColdCompression compression_;
  std::string secondary_dir_;  // OpenReadOnly: RocksDB's own files
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_COLD_COLD_STORE_H_
