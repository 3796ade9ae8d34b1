#include "engine/cold/cold_store.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "engine/cold/cold_generated.h"
#include "engine/cold/rocksdb_env.h"
#include "engine/cold/rocksdb_info_log.h"
#include "engine/cold/table_file_check.h"
#include "util/progress_reporter.h"

namespace replaydb::engine {
namespace {

// Keys: table id (u32 big-endian; 0 holds the checkpoint), a kind byte, then
// big-endian ids, so that one table's keys, and one trajectory's chunks, are
// contiguous and in order.
constexpr char kCheckpoint = 'C';
constexpr char kState = 'S';
constexpr char kMeta = 'M';
constexpr char kData = 'D';

void PutBE32(std::string* k, uint32_t v) {
  for (int i = 3; i >= 0; --i) k->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutBE64(std::string* k, uint64_t v) {
  for (int i = 7; i >= 0; --i) k->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t GetBE(std::string_view s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
  return v;
}

std::string Key(uint32_t table, char kind) {
  std::string k;
  PutBE32(&k, table);
  k.push_back(kind);
  return k;
}
std::string Key(uint32_t table, char kind, uint64_t a) {
  std::string k = Key(table, kind);
  PutBE64(&k, a);
  return k;
}
std::string Key(uint32_t table, char kind, uint64_t a, uint64_t b) {
  std::string k = Key(table, kind, a);
  PutBE64(&k, b);
  return k;
}

Status FromRocks(const rocksdb::Status& s, std::string_view what, const std::string& dir) {
  if (s.ok()) return Status::OK();
  std::string msg = "cold store " + dir + ": " + std::string(what) + ": " + s.ToString();
  if (s.IsNotFound()) return Status::NotFound(msg);
  if (s.IsCorruption()) return Status::Corruption(msg);
  return Status::IOError(msg);
}

// Visits keys starting with `prefix`.
Status Scan(rocksdb::DB* db, const std::string& dir, const std::string& prefix,
            const std::function<Status(std::string_view, std::string_view)>& fn) {
  // The upper bound keeps the iterator from reading the data block after the
  // prefix's last key just to find that key past the prefix: with step
  // chunks, a block as large as a trajectory.
  std::string upper = prefix;
  while (!upper.empty() && static_cast<unsigned char>(upper.back()) == 0xFF) upper.pop_back();
  if (!upper.empty()) upper.back() = static_cast<char>(static_cast<unsigned char>(upper.back()) + 1);
  const rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions options;
  if (!upper.empty()) options.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(options));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (!key.starts_with(prefix)) break;
    const rocksdb::Slice value = it->value();
    REPLAYDB_RETURN_IF_ERROR(fn(std::string_view(key.data(), key.size()),
                                std::string_view(value.data(), value.size())));
  }
  return FromRocks(it->status(), "scan", dir);
}

}  // namespace

// Reads every table file of `dir` with its checksums (only on the failure
// path of an open).
// What names the database's current state in `dir`: the MANIFEST that
// CURRENT names, and its size. A writer changes it before it deletes a file.
std::string ManifestState(const std::string& dir) {
  Env* env = Env::Default();
  std::string current;
  (void)env->ReadFileToString(dir + "/CURRENT", &current);
  while (!current.empty() && (current.back() == '\n' || current.back() == '\r')) current.pop_back();
  uint64_t size = 0;
  const bool sized = !current.empty() && env->GetFileSize(dir + "/" + current, &size).ok();
  return current + ":" + (sized ? std::to_string(size) : std::string("?"));
}

Status NameDamagedTableFiles(Status s, const std::string& dir) {
  if (s.code() != Status::Code::kCorruption || s.message().find(".sst") != std::string::npos) {
    return s;
  }
  std::error_code ec;
  std::vector<std::string> damaged;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".sst") continue;
    // One that would abort RocksDB's reader is named without it.
    const Status before = CheckTableFileBeforeRocksdb(e.path().string());
    if (!before.ok()) {
      damaged.push_back(e.path().filename().string() + " (" + before.ToString() + ")");
      continue;
    }
    rocksdb::SstFileReader reader{rocksdb::Options()};
    rocksdb::Status r = reader.Open(e.path().string());
    if (r.ok()) r = reader.VerifyChecksum();
    if (!r.ok()) damaged.push_back(e.path().filename().string() + " (" + r.ToString() + ")");
  }
  if (damaged.empty()) return s;
  std::string names;
  for (const std::string& d : damaged) names += (names.empty() ? "" : ", ") + d;
  return Status::Corruption(s.message() + "; damaged table file" +
                            (damaged.size() == 1 ? "" : "s") + ": " + names);
}

bool ReadStepChunk(std::string_view bytes, StepChunkView* out) {
  const auto* buf = reinterpret_cast<const uint8_t*>(bytes.data());
  flatbuffers::Verifier::Options options;
  options.check_alignment = false;
  flatbuffers::Verifier verifier(buf, bytes.size(), options);
  if (!verifier.VerifyBuffer<fb::StepChunk>(nullptr)) return false;
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(
      buf + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(buf));
  out->first_step = table->GetField<int64_t>(fb::StepChunk::VT_FIRST_STEP, 0);
  out->count = table->GetField<int64_t>(fb::StepChunk::VT_COUNT, 0);
  out->step_bytes = table->GetField<uint32_t>(fb::StepChunk::VT_STEP_BYTES, 0);
  const uint8_t* vec = table->GetPointer<const uint8_t*>(fb::StepChunk::VT_DATA);
  out->data = nullptr;
  out->data_bytes = 0;
  if (vec != nullptr) {
    out->data_bytes = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vec);
    out->data = reinterpret_cast<const std::byte*>(vec + sizeof(flatbuffers::uoffset_t));
  }
  return true;
}

ColdStore::Batch::Batch(size_t reserved_bytes)
    : batch_(std::make_unique<rocksdb::WriteBatch>(reserved_bytes)) {}
ColdStore::Batch::~Batch() = default;

void ColdStore::Batch::PutCheckpoint(std::string_view value) {
  (void)batch_->Put(Key(0, kCheckpoint), rocksdb::Slice(value.data(), value.size()));
}
void ColdStore::Batch::PutTableState(uint32_t table, std::string_view value) {
  (void)batch_->Put(Key(table, kState), rocksdb::Slice(value.data(), value.size()));
}
void ColdStore::Batch::PutTrajectory(uint32_t table, uint64_t trajectory, std::string_view meta) {
  (void)batch_->Put(Key(table, kMeta, trajectory), rocksdb::Slice(meta.data(), meta.size()));
}
void ColdStore::Batch::PutSteps(uint32_t table, uint64_t trajectory, int64_t first_step,
                                std::string_view chunk) {
  (void)batch_->Put(Key(table, kData, trajectory, static_cast<uint64_t>(first_step)),
                    rocksdb::Slice(chunk.data(), chunk.size()));
}
void ColdStore::Batch::DeleteTrajectory(uint32_t table, uint64_t trajectory) {
  (void)batch_->Delete(Key(table, kMeta, trajectory));
  (void)batch_->DeleteRange(Key(table, kData, trajectory), Key(table, kData, trajectory + 1));
}
void ColdStore::Batch::DeleteTable(uint32_t table) {
  (void)batch_->DeleteRange(Key(table, '\0'), Key(table + 1, '\0'));
}
size_t ColdStore::Batch::bytes() const { return batch_->GetDataSize(); }

ColdStore::ColdStore(std::string dir, std::unique_ptr<rocksdb::Env> env,
                     std::shared_ptr<rocksdb::Logger> info_log, rocksdb::DB* db,
                     ColdCompression compression)
    : dir_(std::move(dir)),
      env_(std::move(env)),
      info_log_(std::move(info_log)),
      db_(db),
      compression_(compression) {}

ColdStore::~ColdStore() {
  if (db_) (void)db_->Close();
  db_.reset();
  if (!secondary_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(secondary_dir_, ec);
  }
}

Result<std::unique_ptr<ColdStore>> ColdStore::OpenReadOnly(const std::string& dir) {
  // RocksDB must not see a table file that aborts its reader.
  REPLAYDB_RETURN_IF_ERROR(CheckTableFilesBeforeRocksdb(dir));
  const char* tmp = std::getenv("TMPDIR");
  std::string secondary = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/replaydb-reader-XXXXXX";
  if (::mkdtemp(secondary.data()) == nullptr) {
    return Status::IOError("cold store " + dir + ": cannot make a temporary directory for a " +
                           "read-only opener (" + secondary + "): " + std::strerror(errno));
  }
  rocksdb::Options options;
  options.max_open_files = -1;  // a secondary instance needs every file open
  // Its info log goes into its own directory, through a logger that cannot
  // abort the process when that disk fills (engine/cold/rocksdb_info_log.h).
  std::shared_ptr<rocksdb::Logger> info_log = NewRocksdbInfoLog(Env::Default(), secondary + "/LOG");
  options.info_log = info_log;
  rocksdb::DB* db = nullptr;
  Status s = FromRocks(rocksdb::DB::OpenAsSecondary(options, dir, secondary, &db),
                       "open read-only", dir);
  if (s.ok()) s = FromRocks(db->TryCatchUpWithPrimary(), "catch up with the writer", dir);
  if (!s.ok()) {
    delete db;
    std::error_code ec;
    std::filesystem::remove_all(secondary, ec);
    return s;
  }
  // A secondary instance takes a missing or damaged table file for one the
  // writer deleted, and reads its keys as absent. Check the files as the
  // read-write open does: a plain read-only instance opening every file the
  // MANIFEST lists (table footers and index blocks read). A writer beside
  // us may compact a file away meanwhile; it records that in the MANIFEST
  // before it deletes the file. So a failure while the MANIFEST moved is
  // tried again (for up to 20 s, or 1000 tries, of a writer that never
  // stops); one with the MANIFEST unchanged is damage.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int attempt = 0;; ++attempt) {
    const std::string before = ManifestState(dir);
    rocksdb::Options check;
    check.max_open_files = -1;
    check.paranoid_checks = true;
    check.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
    rocksdb::DB* checker = nullptr;
    s = FromRocks(rocksdb::DB::OpenForReadOnly(check, dir, &checker), "open read-only", dir);
    delete checker;
    if (s.ok() || ManifestState(dir) == before || attempt == 999 ||
        std::chrono::steady_clock::now() > give_up) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + attempt, 20)));
  }
  // The files this view holds passed; what the writer checkpointed since
  // (and the compactions that replaced files the secondary instance found
  // gone) comes with one more catch-up.
  if (s.ok()) s = FromRocks(db->TryCatchUpWithPrimary(), "catch up with the writer", dir);
  if (!s.ok()) {
    delete db;
    std::error_code ec;
    std::filesystem::remove_all(secondary, ec);
    return NameDamagedTableFiles(s, dir);
  }
  std::unique_ptr<ColdStore> store(
      new ColdStore(dir, nullptr, std::move(info_log), db, ColdCompression::kZstd));
  store->secondary_dir_ = secondary;
  return store;
}

namespace {

rocksdb::CompressionType RocksCompression(ColdCompression c) {
  switch (c) {
    case ColdCompression::kNone: return rocksdb::kNoCompression;
    case ColdCompression::kLz4: return rocksdb::kLZ4Compression;
    case ColdCompression::kZstd: break;
  }
  return rocksdb::kZSTD;
}

Status OpenRocks(const std::string& dir, rocksdb::Env* env,
                 const std::shared_ptr<rocksdb::Logger>& info_log, ColdCompression compression,
                 rocksdb::DB** db) {
  // RocksDB must not see a table file that aborts its reader (files it
  // writes from now on are its own; those it opens lazily are checked here).
  REPLAYDB_RETURN_IF_ERROR(CheckTableFilesBeforeRocksdb(dir));
  rocksdb::Options options;
  options.env = env;
  options.info_log = info_log;
  options.create_if_missing = true;
  options.compression = RocksCompression(compression);
  // Checkpoints are written in one batch and flushed, without RocksDB's own
  // log; spills go through it (WriteLogged) until the next flush.
  options.avoid_flush_during_shutdown = false;
  options.max_open_files = 256;
  return NameDamagedTableFiles(FromRocks(rocksdb::DB::Open(options, dir, db), "open", dir), dir);
}

}  // namespace

Result<std::unique_ptr<ColdStore>> ColdStore::Open(const std::string& dir, Env* env,
                                                   ColdCompression compression) {
  std::unique_ptr<rocksdb::Env> rocks_env = NewRocksdbEnv(env);
  // The directory first, so that the info log's first lines have a place.
  REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(dir));
  std::shared_ptr<rocksdb::Logger> info_log = NewRocksdbInfoLog(env, dir + "/LOG");
  rocksdb::DB* db = nullptr;
  REPLAYDB_RETURN_IF_ERROR(OpenRocks(dir, rocks_env.get(), info_log, compression, &db));
  return std::unique_ptr<ColdStore>(
      new ColdStore(dir, std::move(rocks_env), std::move(info_log), db, compression));
}

Status ColdStore::ReopenIfNeeded() {
  if (!needs_reopen_.load()) {
    // A background job (a compaction, or a flush RocksDB started itself)
    // that failed leaves RocksDB refusing writes with that old error, even
    // once the disk has room again: reopen rather than fail with it.
    std::shared_lock<std::shared_mutex> lock(mu_);
    uint64_t errors = 0;
    if (db_ && db_->GetIntProperty(rocksdb::DB::Properties::kBackgroundErrors, &errors) &&
        errors > 0) {
      needs_reopen_.store(true);
    }
  }
  if (needs_reopen_.load()) {
    // RocksDB stops writing for good after a failed flush (a background
    // error it takes as fatal); reopening drops the failed batch's memtable
    // and starts afresh from what its MANIFEST says is on disk.
    std::unique_lock<std::shared_mutex> lock(mu_);
    if (needs_reopen_.load()) {
      // db_ is null after a reopen that failed (the disk still full).
      if (db_) (void)db_->Close();
      db_.reset();
      rocksdb::DB* db = nullptr;
      REPLAYDB_RETURN_IF_ERROR(OpenRocks(dir_, env_.get(), info_log_, compression_, &db)
                                   .WithContext("reopening after a failed write"));
      db_.reset(db);
      needs_reopen_.store(false);
    }
  }
  return Status::OK();
}

Status ColdStore::Usable() const {
  if (db_) return Status::OK();
  return Status::IOError("cold store " + dir_ +
                         " is closed: reopening it after a failed write failed; the next write "
                         "tries again");
}

Status ColdStore::Write(Batch& batch) { return WriteWith(batch, /*logged=*/false); }

Status ColdStore::WriteLogged(Batch& batch) { return WriteWith(batch, /*logged=*/true); }

Status ColdStore::WriteWith(Batch& batch, bool logged) {
  if (read_only()) {
    return Status::FailedPrecondition("cold store " + dir_ + " is open read-only");
  }
  // Twice at most: a background job that failed while the disk was full
  // can record its error after ReopenIfNeeded looked, and RocksDB then
  // refuses this write with that old error although there is room now. A
  // reopen clears it; the batch (puts and deletes) may be written again.
  Status s;
  for (int attempt = 0; attempt < 2; ++attempt) {
    REPLAYDB_RETURN_IF_ERROR(ReopenIfNeeded());
    std::shared_lock<std::shared_mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(Usable());
    rocksdb::WriteOptions wo;
    wo.disableWAL = !logged;
    s = FromRocks(db_->Write(wo, batch.batch_.get()), "write", dir_);
    if (s.ok() && !logged) {
      rocksdb::FlushOptions fo;
      fo.wait = true;
      s = FromRocks(db_->Flush(fo), "flush", dir_);
    }
    if (s.ok()) return s;
    needs_reopen_.store(true);
  }
  return s;
}

Status ColdStore::GetCheckpoint(std::string* value) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  return FromRocks(db_->Get(rocksdb::ReadOptions(), Key(0, kCheckpoint), value),
                   "read the checkpoint record", dir_);
}

Status ColdStore::GetTableState(uint32_t table, std::string* value) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  return FromRocks(db_->Get(rocksdb::ReadOptions(), Key(table, kState), value),
                   "read the state of table id " + std::to_string(table), dir_);
}

Status ColdStore::GetTrajectory(uint32_t table, uint64_t trajectory, std::string* value) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  return FromRocks(db_->Get(rocksdb::ReadOptions(), Key(table, kMeta, trajectory), value),
                   "read trajectory " + std::to_string(trajectory) + " of table id " +
                       std::to_string(table),
                   dir_);
}

Status ColdStore::ForEachTrajectory(
    uint32_t table, const std::function<Status(uint64_t, std::string_view)>& fn) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  return Scan(db_.get(), dir_, Key(table, kMeta), [&](std::string_view key, std::string_view v) {
    if (key.size() != 13) {
      return Status::Corruption("cold store " + dir_ + ": malformed trajectory key of table id " +
                                std::to_string(table));
    }
    return fn(GetBE(key, 5, 8), v);
  });
}

Status ColdStore::WithChunk(uint32_t table, uint64_t trajectory, int64_t first_step,
                           const std::function<Status(std::string_view)>& fn) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  rocksdb::PinnableSlice value;
  REPLAYDB_RETURN_IF_ERROR(FromRocks(
      db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(),
               Key(table, kData, trajectory, static_cast<uint64_t>(first_step)), &value),
      "read the step chunk at step " + std::to_string(first_step) + " of trajectory " +
          std::to_string(trajectory) + " of table id " + std::to_string(table),
      dir_));
  return fn(std::string_view(value.data(), value.size()));
}

Status ColdStore::ListTables(std::vector<uint32_t>* tables) {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  tables->clear();
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  it->Seek(Key(1, '\0'));
  while (it->Valid()) {
    const rocksdb::Slice key = it->key();
    if (key.size() < 4) break;
    const uint32_t id = static_cast<uint32_t>(GetBE(std::string_view(key.data(), key.size()), 0, 4));
    tables->push_back(id);
    if (id == UINT32_MAX) break;
    it->Seek(Key(id + 1, '\0'));
  }
  return FromRocks(it->status(), "list tables", dir_);
}

Status ColdStore::VerifyChecksums() {
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  return FromRocks(db_->VerifyChecksum(), "verify checksums", dir_);
}

Status ColdStore::CopyTo(const std::string& dir) {
  REPLAYDB_RETURN_IF_ERROR(ReopenIfNeeded());
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  rocksdb::Checkpoint* raw = nullptr;
  REPLAYDB_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "copy", dir_));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  return FromRocks(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0), "copy to " + dir,
                   dir_);
}

Status ColdStore::Compact(const std::atomic<bool>* cancel,
                          const ProgressCallback& progress_callback) {
  if (read_only()) {
    return Status::FailedPrecondition("cold store " + dir_ + " is open read-only");
  }
  REPLAYDB_RETURN_IF_ERROR(ReopenIfNeeded());
  std::vector<uint32_t> tables;
  REPLAYDB_RETURN_IF_ERROR(ListTables(&tables));
  std::shared_lock<std::shared_mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(Usable());
  // One piece per table (the checkpoint's key goes with the first), so the
  // progress moves and Ctrl-C is seen between pieces; the first and
  // last pieces are open-ended, so together they cover every key.
  std::vector<std::string> bounds;
  for (uint32_t t : tables) bounds.push_back(Key(t, '\0'));
  if (!bounds.empty()) bounds.erase(bounds.begin());
  const size_t pieces = bounds.size() + 1;
  std::vector<uint64_t> sizes(pieces, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < pieces; ++i) {
    const rocksdb::Slice begin(i == 0 ? std::string_view() : bounds[i - 1]);
    const std::string last(8, '\xff');
    const rocksdb::Slice end(i + 1 == pieces ? std::string_view(last) : bounds[i]);
    rocksdb::Range range(begin, end);
    rocksdb::SizeApproximationOptions size_options;
    size_options.include_memtables = true;
    size_options.include_files = true;
    (void)db_->GetApproximateSizes(size_options, db_->DefaultColumnFamily(), &range, 1, &sizes[i]);
    total += sizes[i];
  }
  util::ProgressReporter progress("compact " + dir_, static_cast<int64_t>(total), "bytes",
                                  progress_callback);
  rocksdb::CompactRangeOptions options;
  // RocksDB only reads the flag.
  options.canceled = const_cast<std::atomic<bool>*>(cancel);
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  for (size_t i = 0; i < pieces; ++i) {
    if (cancel != nullptr && cancel->load()) {
      return Status::Cancelled("cold store " + dir_ + ": compaction interrupted");
    }
    const rocksdb::Slice begin(i == 0 ? std::string_view() : bounds[i - 1]);
    const rocksdb::Slice end(i + 1 == pieces ? std::string_view() : bounds[i]);
    const rocksdb::Status s =
        db_->CompactRange(options, i == 0 ? nullptr : &begin, i + 1 == pieces ? nullptr : &end);
    if (s.IsManualCompactionPaused() || (cancel != nullptr && cancel->load() && !s.ok())) {
      return Status::Cancelled("cold store " + dir_ + ": compaction interrupted");
    }
    if (!s.ok()) {
      // As after a failed write: RocksDB refuses writes until reopened.
      needs_reopen_.store(true);
      return FromRocks(s, "compact", dir_);
    }
    progress.Add(static_cast<int64_t>(sizes[i]));
  }
  return Status::OK();
}

}  // namespace replaydb::engine
