#include "engine/db/db_impl.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <chrono>

#include "engine/cold/cold_generated.h"
#include "engine/db/log_apply.h"
#include "wal/log_reader.h"
#include "util/format.h"

namespace replaydb {

using util::Quoted;

Result<std::unique_ptr<DB>> DB::Open(const DBOptions& options, const std::string& path) {
  // Before the directory is touched: an unknown enum value would sync or
  // recover as some other mode.
  REPLAYDB_RETURN_IF_ERROR(options.Validate().WithContext("DB::Open"));
  return engine::DBImpl::Open(options, path);
}

Result<ReplicationInfo> DB::Replication() const {
  return Status::NotSupported(path() + ": replication is not known here");
}

Result<uint64_t> DB::Promote(const PromoteOptions&) {
  return Status::NotSupported(path() +
                              ": only a served read replica is promoted (replaydb promote "
                              "ucx://HOST:PORT)");
}

Result<std::unique_ptr<DB>> DB::OpenReadOnly(const DBOptions& options, const std::string& path) {
  return engine::DBImpl::OpenReadOnly(options, path);
}

namespace engine {
namespace {

int64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

DBImpl::DBImpl(const DBOptions& options, Env* env, std::string path, std::unique_ptr<FileLock> lock)
    : options_(options),
      env_(env),
      path_(std::move(path)),
      catalog_path_(path_ + "/CATALOG"),
      wal_dir_(path_ + "/wal"),
      lock_(std::move(lock)),
      last_checkpoint_(std::chrono::steady_clock::now()),
      replicas_(std::make_shared<wal::ReplicaSet>(env_, path_)) {}

DBImpl::~DBImpl() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  // (Orphans not yet ended stay open in the log: the next opener's
  // recovery ends them.)
  if (orphans_thread_.joinable()) orphans_thread_.join();
  // Best effort: what the checkpoint misses stays in the log.
  if (options_.checkpoint.on_close && cold_ != nullptr && !read_only_) (void)Checkpoint();
  std::map<std::string, std::shared_ptr<TableImpl>, std::less<>> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tables.swap(tables_);
    by_id_.clear();
  }
  for (auto& [name, table] : tables) {
    table->CloseWithReason("closed (its database was closed)");
    table->SetLog(nullptr, table->id());
  }
  // A writer still syncing holds its own reference; the log closes after it.
  log_.reset();
}

namespace {

// What of a database's data is at `path` although its CATALOG is not: e.g.
// "a write-ahead log (wal/, 3 segments) and a cold store (cold/)"; empty
// when nothing is (a new database, or a creation that stopped early).
std::string DataWithoutCatalog(Env* env, const std::string& path) {
  std::vector<std::string> parts;
  std::vector<uint64_t> segments;
  if (env->FileExists(path + "/wal") && wal::ListSegments(env, path + "/wal", &segments).ok() &&
      !segments.empty()) {
    parts.push_back("a write-ahead log (wal/, " + std::to_string(segments.size()) +
                    (segments.size() == 1 ? " segment)" : " segments)"));
  }
  if (env->FileExists(path + "/cold/CURRENT")) parts.push_back("a cold store (cold/)");
  if (parts.empty()) return "";
  return parts.size() == 1 ? parts[0] : parts[0] + " and " + parts[1];
}

Status CatalogMissing(const std::string& path, const std::string& data) {
  return Status::Corruption("database " + path + ": " + path + "/CATALOG is missing, but " +
                            data + " " + (data.find(" and ") != std::string::npos ? "are" : "is") +
                            " there: the catalog was deleted or lost. Refusing to open (or "
                            "create a new, empty database over) it; restore CATALOG from a "
                            "copy, or move wal/ and cold/ away to start afresh");
}

// The catalog says a checkpoint was taken; cold/ must still be there.
Status CheckColdStorePresent(Env* env, const std::string& path, const CatalogContents& catalog) {
  if (!catalog.checkpointed || env->FileExists(path + "/cold/CURRENT")) return Status::OK();
  return Status::Corruption("database " + path + ": the cold store " + path +
                            "/cold is missing (no cold/CURRENT), but the catalog says a "
                            "checkpoint was taken: every checkpointed step would be lost. "
                            "Restore cold/ from a copy");
}

}  // namespace

Result<std::unique_ptr<DB>> DBImpl::Open(const DBOptions& options, const std::string& path,
                                         std::shared_ptr<SlabSource> host_slabs, bool replica) {
  if (path.empty()) return Status::InvalidArgument("DB::Open: the database path is empty");
  Env* env = options.env != nullptr ? options.env : Env::Default();
  const std::string catalog_path = path + "/CATALOG";

  if (!options.create_if_missing && !env->FileExists(catalog_path)) {
    const std::string data = DataWithoutCatalog(env, path);
    if (!data.empty()) return CatalogMissing(path, data);
    return Status::NotFound("no database at " + path + " (no " + catalog_path +
                            "; create_if_missing is false)");
  }
  REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(path));
  // The lock first, then the catalog: two openers creating one database
  // must not both find it missing and both write a new, empty catalog.
  std::unique_ptr<FileLock> lock;
  REPLAYDB_RETURN_IF_ERROR(env->LockFile(path + "/LOCK", &lock));

  const bool exists = env->FileExists(catalog_path);
  if (exists && options.error_if_exists) {
    return Status::AlreadyExists("database " + path + " already exists (error_if_exists is set)");
  }
  CatalogContents catalog;
  if (exists) {
    REPLAYDB_RETURN_IF_ERROR(LoadCatalog(env, catalog_path, &catalog));
  } else {
    if (!options.create_if_missing) {
      return Status::NotFound("no database at " + path + " (no " + catalog_path +
                              "; create_if_missing is false)");
    }
    const std::string data = DataWithoutCatalog(env, path);
    if (!data.empty()) return CatalogMissing(path, data);
    REPLAYDB_RETURN_IF_ERROR(SaveCatalog(env, catalog_path, catalog));
  }
  REPLAYDB_RETURN_IF_ERROR(CheckColdStorePresent(env, path, catalog));

  std::unique_ptr<DBImpl> db(new DBImpl(options, env, path, std::move(lock)));
  db->host_slabs_ = std::move(host_slabs);
  db->replica_.store(replica);
  db->next_table_id_ = catalog.next_table_id;
  db->checkpointed_ = catalog.checkpointed;
  for (const CatalogEntry& entry : catalog.tables) {
    const TableSpec& spec = entry.spec;
    Status s = spec.Validate();
    if (!s.ok()) {
      return Status::Corruption("catalog " + catalog_path + ": stored spec of table " +
                                Quoted(spec.name) + " is invalid: " + s.message());
    }
    if (db->specs_.count(spec.name) != 0) {
      return Status::Corruption("catalog " + catalog_path + ": table " + Quoted(spec.name) +
                                " appears twice");
    }
    REPLAYDB_ASSIGN_OR_RETURN(auto table, db->MakeTable(spec));
    table->SetLog(nullptr, entry.id);
    db->specs_.emplace(spec.name, Entry{entry.id, spec});
    db->by_id_.emplace(entry.id, table);
    db->tables_.emplace(spec.name, std::move(table));
  }
  REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(db->wal_dir_));
  REPLAYDB_ASSIGN_OR_RETURN(db->cold_,
                            ColdStore::Open(path + "/cold", env, options.cold_compression));
  for (auto& [id, table] : db->by_id_) table->SetColdStore(db->cold_);
  REPLAYDB_RETURN_IF_ERROR(db->Recover());
  db->replicas_->LoadHolds();
  if (options.wal.enabled) {
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<wal::LogWriter> log,
                              wal::LogWriter::Open(env, db->wal_dir_, options.wal,
                                                   db->next_segment_));
    db->log_ = std::move(log);
    for (auto& [id, table] : db->by_id_) table->SetLog(db->log_, id, db->replicas_);
    // The ends recovery made go to the log: its replicas end those
    // trajectories too (a later recovery finds them ended).
    for (const auto& [id, ids] : db->ended_at_recovery_) {
      REPLAYDB_RETURN_IF_ERROR(db->by_id_.at(id)->LogEnds(ids));
    }
  }
  db->ended_at_recovery_.clear();
  REPLAYDB_RETURN_IF_ERROR(db->LoadEpochs());
  // Everything recovered goes into a checkpoint, and the replayed log away:
  // in the background when automatic checkpoints run (the table serves at
  // once; until then the replayed segments stay, so a crash meanwhile just
  // replays them again), else before Open returns. With nothing recovered
  // onto an existing checkpoint there is nothing to save: opening to look
  // leaves the log where it was.
  const bool automatic =
      options.checkpoint.every_wal_bytes > 0 || options.checkpoint.every.count() > 0;
  const bool recovered = db->recovery_.wal_records > 0 || db->recovery_.trajectories_ended > 0;
  if (automatic && recovered) {
    db->checkpoint_requested_.store(true);
  } else if (recovered || !db->recovery_.checkpoint_found || !db->checkpointed_) {
    REPLAYDB_RETURN_IF_ERROR(db->Checkpoint());
  }
  if (automatic) {
    db->checkpoint_thread_ = std::thread([raw = db.get()] { raw->CheckpointLoop(); });
  }
  return std::unique_ptr<DB>(std::move(db));
}

Result<std::unique_ptr<DB>> DBImpl::OpenReadOnly(const DBOptions& options,
                                                 const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("DB::OpenReadOnly: the database path is empty");
  Env* env = options.env != nullptr ? options.env : Env::Default();
  const std::string catalog_path = path + "/CATALOG";
  if (!env->FileExists(catalog_path)) {
    const std::string data = DataWithoutCatalog(env, path);
    if (!data.empty()) return CatalogMissing(path, data);
    return Status::NotFound("no database at " + path + " (no " + catalog_path + ")");
  }
  CatalogContents catalog;
  REPLAYDB_RETURN_IF_ERROR(LoadCatalog(env, catalog_path, &catalog));
  REPLAYDB_RETURN_IF_ERROR(CheckColdStorePresent(env, path, catalog));
  std::unique_ptr<DBImpl> db(new DBImpl(options, env, path, nullptr));
  db->read_only_ = true;
  db->next_table_id_ = catalog.next_table_id;
  db->checkpointed_ = catalog.checkpointed;
  REPLAYDB_ASSIGN_OR_RETURN(db->cold_, ColdStore::OpenReadOnly(path + "/cold"));
  std::string value;
  Status s = db->cold_->GetCheckpoint(&value);
  if (s.ok()) {
    std::string aligned;
    const auto* meta = VerifiedValue<fb::CheckpointMeta>(value, &aligned);
    if (meta == nullptr) {
      return Status::Corruption("cold store " + db->cold_->dir() +
                                ": the checkpoint record fails verification");
    }
    db->recovery_.checkpoint_found = true;
    db->recovery_.checkpoint_sequence = meta->sequence();
    db->checkpoint_sequence_ = meta->sequence();
    db->checkpoint_segment_ = meta->wal_segment();
    db->checkpoint_wal_continues_ = meta->wal_continues();
  } else if (s.code() != Status::Code::kNotFound) {
    return s;
  } else if (catalog.checkpointed) {
    return db->NoCheckpoint();
  }
  REPLAYDB_RETURN_IF_ERROR(db->LoadEpochs());
  for (const CatalogEntry& entry : catalog.tables) {
    const TableSpec& spec = entry.spec;
    s = spec.Validate();
    if (!s.ok()) {
      return Status::Corruption("catalog " + catalog_path + ": stored spec of table " +
                                Quoted(spec.name) + " is invalid: " + s.message());
    }
    REPLAYDB_ASSIGN_OR_RETURN(auto table, db->MakeTable(spec));
    table->SetLog(nullptr, entry.id);
    table->SetReadOnly();
    table->SetColdStore(db->cold_);
    REPLAYDB_RETURN_IF_ERROR(
        table->Restore(*db->cold_, options.checkpoint.reset_rate_limiters_on_restore));
    db->specs_.emplace(spec.name, Entry{entry.id, spec});
    db->by_id_.emplace(entry.id, table);
    db->tables_.emplace(spec.name, std::move(table));
  }
  return std::unique_ptr<DB>(std::move(db));
}

Status DBImpl::NoCheckpoint() const {
  return Status::Corruption("database " + path_ + ": the cold store " + cold_->dir() +
                            " holds no checkpoint, but the catalog says one was taken (cold/ "
                            "emptied or replaced?): every checkpointed step would be lost. "
                            "Restore cold/ from a copy");
}

Status DBImpl::CheckWritable(std::string_view what) const {
  if (!read_only_) return Status::OK();
  return Status::FailedPrecondition(std::string(what) + ": database " + path_ +
                                    " was opened read-only (DB::OpenReadOnly)");
}

Status DBImpl::Recover() {
  uint64_t first_segment = 0;
  bool first_segment_must_exist = false;
  std::string value;
  Status s = cold_->GetCheckpoint(&value);
  if (s.ok()) {
    std::string aligned;
    const auto* meta = VerifiedValue<fb::CheckpointMeta>(value, &aligned);
    if (meta == nullptr) {
      return Status::Corruption("cold store " + cold_->dir() +
                                ": the checkpoint record fails verification");
    }
    first_segment = meta->wal_segment();
    first_segment_must_exist = meta->wal_continues();
    checkpoint_wal_continues_ = first_segment_must_exist;
    checkpoint_segment_ = first_segment;
    checkpoint_sequence_ = meta->sequence();
    recovery_.checkpoint_found = true;
    recovery_.checkpoint_sequence = meta->sequence();
  } else if (s.code() != Status::Code::kNotFound) {
    return s;
  } else if (checkpointed_) {
    return NoCheckpoint();
  }
  // Keys of tables the catalog no longer has (dropped before a crash).
  std::vector<uint32_t> stored;
  REPLAYDB_RETURN_IF_ERROR(cold_->ListTables(&stored));
  ColdStore::Batch orphans;
  bool any_orphan = false;
  for (uint32_t id : stored) {
    if (by_id_.count(id) == 0) {
      orphans.DeleteTable(id);
      any_orphan = true;
    }
  }
  if (any_orphan) REPLAYDB_RETURN_IF_ERROR(cold_->Write(orphans));

  for (auto& [id, table] : by_id_) {
    REPLAYDB_RETURN_IF_ERROR(
        table->Restore(*cold_, options_.checkpoint.reset_rate_limiters_on_restore));
  }
  wal::ReplayReport report;
  REPLAYDB_RETURN_IF_ERROR(wal::Replay(
      env_, wal_dir_, first_segment, options_.wal.recovery,
      [this](wal::RecordType type, std::span<const std::byte> payload) {
        return ApplyLogRecord(type, payload, [this](uint32_t id) -> TableImpl* {
          auto it = by_id_.find(id);
          return it == by_id_.end() ? nullptr : it->second.get();
        });
      },
      &report, first_segment_must_exist));
  recovery_.wal_segments = report.segments;
  recovery_.wal_records = report.records;
  recovery_.wal_bytes = report.bytes;
  recovery_.dropped_file = report.dropped_file;
  recovery_.dropped_offset = report.dropped_offset;
  recovery_.dropped_bytes = report.dropped_bytes;
  recovery_.dropped_reason = report.dropped_reason;
  next_segment_ = std::max<uint64_t>(report.last_segment + 1, std::max<uint64_t>(first_segment, 1));
  // A last segment holding only its header (a writer closed with nothing
  // logged, e.g. after opening to look) is taken over, not followed by a
  // new one: opening and closing leaves the log where it was.
  if (report.last_segment > 0) {
    uint64_t size = 0;
    const std::string last = wal_dir_ + "/" + wal::SegmentFileName(report.last_segment);
    if (env_->GetFileSize(last, &size).ok() && size == wal::kSegmentHeaderBytes) {
      next_segment_ = report.last_segment;
    }
  }
  for (auto& [id, table] : by_id_) {
    if (!replica_.load()) {
      std::vector<uint64_t> ended = table->EndOpenTrajectories();
      recovery_.trajectories_ended += static_cast<int64_t>(ended.size());
      if (!ended.empty()) ended_at_recovery_.emplace(id, std::move(ended));
    }
    table->SettleRateLimiter(options_.checkpoint.reset_rate_limiters_on_restore);
  }
  return Status::OK();
}

std::vector<std::shared_ptr<TableImpl>> DBImpl::OpenTables() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<TableImpl>> out;
  for (const auto& [id, t] : by_id_) out.push_back(t);
  return out;
}

Status DBImpl::Checkpoint() {
  return CheckpointThen(nullptr);
}

Status DBImpl::CheckpointThen(const std::function<Status(uint64_t segment)>& then) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("Checkpoint"));
  std::lock_guard<std::mutex> checkpoint_lock(checkpoint_mu_);
  // Everything logged from here on is in `segment` or later, and replayed
  // onto this checkpoint (replay skips what the checkpoint already has).
  uint64_t segment = next_segment_;
  if (log_ != nullptr) {
    // Nothing logged in the current segment: it is where replay starts.
    // (A shipped record is logged and applied under ship_mu_: every one
    // logged before the roll is in its table before the tables are read.)
    std::lock_guard<std::mutex> ship_lock(ship_mu_);
    REPLAYDB_ASSIGN_OR_RETURN(const uint64_t rolled, log_->Roll(/*only_if_records=*/true));
    segment = rolled;
  }
  const std::vector<std::shared_ptr<TableImpl>> tables = OpenTables();
  // The batch holds about what was logged since the last checkpoint: made
  // that big at once, it is not copied again as it grows (nor are the pages
  // of each larger copy faulted in anew).
  constexpr uint64_t kMaxReservedBytes = uint64_t{1} << 30;
  const uint64_t logged = log_ != nullptr ? log_->stats().bytes - log_bytes_at_checkpoint_ : 0;
  ColdStore::Batch batch(
      static_cast<size_t>(std::min(logged + (uint64_t{64} << 10), kMaxReservedBytes)));
  Status s;
  for (const auto& table : tables) {
    s = table->CollectCheckpoint(&batch);
    if (!s.ok()) break;
  }
  if (s.ok()) {
    flatbuffers::FlatBufferBuilder fbb(64);
    fbb.Finish(fb::CreateCheckpointMeta(fbb, segment, checkpoint_sequence_ + 1, UnixMicros(),
                                        /*wal_continues=*/log_ != nullptr));
    batch.PutCheckpoint(
        std::string_view(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize()));
    s = cold_->Write(batch);
  }
  for (const auto& table : tables) table->CheckpointDone(s.ok());
  REPLAYDB_RETURN_IF_ERROR(s.WithContext("checkpoint of " + path_));
  ++checkpoint_sequence_;
  last_checkpoint_ = std::chrono::steady_clock::now();
  {
    // From the first checkpoint on, Open requires one in cold/.
    std::lock_guard<std::mutex> lock(mu_);
    if (!checkpointed_) {
      checkpointed_ = true;
      const Status saved = SaveCatalogLocked(specs_, next_table_id_);
      if (!saved.ok()) {
        checkpointed_ = false;  // the next checkpoint tries again
        return saved.WithContext("checkpoint of " + path_);
      }
    }
  }
  checkpoint_segment_ = segment;
  checkpoint_wal_continues_ = log_ != nullptr;
  if (then) REPLAYDB_RETURN_IF_ERROR(then(segment));
  if (log_ != nullptr) {
    log_bytes_at_checkpoint_ = log_->stats().bytes;
    // Segments a replica has still to read stay (also after a restart).
    replicas_->SaveHolds();
    return log_->DeleteSegmentsBefore(std::min(segment, replicas_->SegmentNeeded()));
  }
  return wal::RemoveSegmentsBefore(env_, wal_dir_, segment);
}

void DBImpl::CheckpointLoop() {
  const CheckpointOptions& o = options_.checkpoint;
  std::unique_lock<std::mutex> lock(loop_mu_);
  while (!stop_) {
    if (!checkpoint_requested_.load()) loop_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_) break;
    lock.unlock();
    const bool requested = checkpoint_requested_.exchange(false);
    bool due = requested;
    {
      std::lock_guard<std::mutex> cl(checkpoint_mu_);
      const uint64_t bytes = log_ != nullptr ? log_->stats().bytes : 0;
      const uint64_t grown = bytes - log_bytes_at_checkpoint_;
      due = due || (o.every_wal_bytes > 0 && grown >= o.every_wal_bytes) ||
            (o.every.count() > 0 && grown > 0 &&
             std::chrono::steady_clock::now() - last_checkpoint_ >= o.every);
    }
    // A failed automatic checkpoint is retried at the next trigger (the log
    // still holds everything); a requested one at the next tick.
    if (due && !Checkpoint().ok() && requested) {
      checkpoint_requested_.store(true);
      lock.lock();
      loop_cv_.wait_for(lock, std::chrono::milliseconds(100));
      continue;
    }
    lock.lock();
  }
}

Result<std::shared_ptr<TableImpl>> DBImpl::MakeTable(const TableSpec& spec) {
  return TableImpl::Create(
      spec, [this](const TableSpec& s) { return PersistSpec(s); }, host_slabs_);
}

Status DBImpl::SaveCatalogLocked(const Specs& specs, uint32_t next_table_id) {
  CatalogContents catalog;
  catalog.next_table_id = next_table_id;
  catalog.checkpointed = checkpointed_;
  for (const auto& [name, entry] : specs) catalog.tables.push_back({entry.id, entry.spec});
  std::sort(catalog.tables.begin(), catalog.tables.end(),
            [](const CatalogEntry& a, const CatalogEntry& b) { return a.id < b.id; });
  return SaveCatalog(env_, catalog_path_, catalog);
}

Result<std::shared_ptr<Table>> DBImpl::CreateTable(const TableSpec& spec) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("CreateTable"));
  REPLAYDB_RETURN_IF_ERROR(spec.Validate());
  std::lock_guard<std::mutex> lock(mu_);
  return CreateTableLocked(spec, next_table_id_);
}

Result<std::shared_ptr<Table>> DBImpl::CreateTableLocked(const TableSpec& spec, uint32_t id) {
  if (specs_.count(spec.name) != 0) {
    return Status::AlreadyExists("table " + Quoted(spec.name) + " already exists in " + path_);
  }
  // The table is made (it may need a GPU), then the catalog written: if
  // either fails, nothing changed.
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<TableImpl> table, MakeTable(spec));
  const uint32_t next_id = std::max(next_table_id_, id + 1);
  auto specs = specs_;
  specs.emplace(spec.name, Entry{id, spec});
  REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs, next_id));
  specs_.swap(specs);
  next_table_id_ = next_id;
  if (log_ != nullptr) {
    CatalogContents one;
    one.next_table_id = next_id;
    one.tables.push_back({id, spec});
    record_.CreateTable({id, EncodeCatalog(one)});
    // The catalog already has the table: a lost record loses nothing.
    (void)log_->Append(wal::RecordType::kCreateTable, record_.payload());
  }
  table->SetLog(log_, id, replicas_);
  table->SetColdStore(cold_);
  tables_.emplace(spec.name, table);
  by_id_.emplace(id, table);
  return std::shared_ptr<Table>(table);
}

Result<std::shared_ptr<Table>> DBImpl::GetTable(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    return Status::NotFound("no table named " + Quoted(name) + " in " + path_);
  }
  return std::shared_ptr<Table>(it->second);
}

Status DBImpl::DropTable(std::string_view name) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("DropTable"));
  std::shared_ptr<TableImpl> table;
  uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tables_.find(name);
    if (it == tables_.end()) return Status::NotFound("no table named " + Quoted(name) + " in " + path_);
    auto specs = specs_;
    auto entry = specs.find(name);
    id = entry->second.id;
    specs.erase(entry);
    REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs, next_table_id_));
    specs_.swap(specs);
    table = std::move(it->second);
    tables_.erase(it);
    by_id_.erase(id);
    if (log_ != nullptr) {
      record_.DropTable({id});
      (void)log_->Append(wal::RecordType::kDropTable, record_.payload());
    }
  }
  // Outside mu_: closing takes the table's locks, which SetRateLimiter holds
  // while it calls back into PersistSpec.
  table->CloseWithReason("dropped");
  table->SetLog(nullptr, id);
  // The catalog no longer has it; a failure here leaves keys that the next
  // open removes.
  ColdStore::Batch batch;
  batch.DeleteTable(id);
  (void)cold_->Write(batch);
  return Status::OK();
}

std::vector<std::string> DBImpl::ListTables() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(specs_.size());
  for (const auto& [name, entry] : specs_) names.push_back(name);
  return names;
}

Status DBImpl::PersistSpec(const TableSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = specs_.find(spec.name);
  if (it == specs_.end()) {
    return Status::FailedPrecondition("table " + Quoted(spec.name) + " was dropped");
  }
  auto specs = specs_;
  specs[spec.name].spec = spec;
  REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs, next_table_id_));
  specs_.swap(specs);
  if (log_ != nullptr) {
    // For the log's readers, replicas (recovery skips it: the catalog has
    // the change already, so a lost record loses nothing here).
    CatalogContents one;
    one.next_table_id = next_table_id_;
    one.tables.push_back({it->second.id, spec});
    record_.CreateTable({it->second.id, EncodeCatalog(one)});
    (void)log_->Append(wal::RecordType::kTableSpec, record_.payload());
  }
  return Status::OK();
}

}  // namespace engine
}  // namespace replaydb
