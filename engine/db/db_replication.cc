// DBImpl's replication: a primary's log read by its replicas (ReadLog),
// and a replica applying what its primary shipped (ApplyShipped).
// docs/replication.md tells the whole picture.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "engine/db/catalog.h"
#include "engine/db/db_impl.h"
#include "engine/db/log_apply.h"
#include "util/format.h"
#include "wal/log_reader.h"
#include "wal/log_writer.h"
#include "wal/records.h"

namespace replaydb::engine {

using util::Quoted;

Result<wal::LogChunk> DBImpl::ReadLog(const std::string& replica, wal::LogPosition from,
                                      uint64_t hold_segment, size_t max_bytes,
                                      std::chrono::steady_clock::time_point until) {
  if (log_ == nullptr) {
    return Status::FailedPrecondition(path_ +
                                      " has no write-ahead log (DBOptions::wal.enabled "
                                      "is false): there is nothing to ship to a replica");
  }
  wal::LogPosition end = log_->end();
  if (from > end) {
    return Status::FailedPrecondition(
        "segment " + std::to_string(from.segment) + ", offset " + std::to_string(from.offset) +
        " is past the end of the log of " + path_ + " (segment " + std::to_string(end.segment) +
        ", offset " + std::to_string(end.offset) +
        "): the replica followed a log this primary does not have");
  }
  // The segments from the one the replica holds on to stay (the place it
  // saved, which may be behind the place it reads from: a replica
  // restarted goes on from there). Before the check below: a checkpoint
  // then cannot remove the log's beginning while a new replica starts.
  // (One line each in REPLICAS.)
  std::string name = replica;
  std::replace(name.begin(), name.end(), '\n', ' ');
  replicas_->Read(name, from, end,
                  std::min(hold_segment == 0 ? from.segment : hold_segment, from.segment));
  if (from.segment == 0) {
    // From the beginning: the log must still hold its first segment (a
    // database's log starts at segment 1, and a checkpoint removes segments
    // only after records were logged), and is read from there.
    std::vector<uint64_t> segments;
    REPLAYDB_RETURN_IF_ERROR(wal::ListSegments(env_, wal_dir_, &segments));
    if (segments.empty() || segments.front() != 1) {
      return Status::FailedPrecondition(
          "the log of " + path_ +
          " no longer starts at the database's beginning (a checkpoint "
          "holds its first records" +
          (segments.empty() ? std::string()
                            : "; the log starts at segment " + std::to_string(segments.front())) +
          "): " + std::string(kSnapshotNeeded));
    }
    from = wal::LogPosition{1, 0};
  }
  wal::LogChunk chunk;
  Status read = wal::ReadLogRange(env_, wal_dir_, from, end, max_bytes, &chunk);
  if (read.code() == Status::Code::kFailedPrecondition &&
      !env_->FileExists(wal_dir_ + "/" + wal::SegmentFileName(from.segment))) {
    // A checkpoint removed the replica's place.
    return Status::FailedPrecondition(read.message() + ": " + kSnapshotNeeded);
  }
  REPLAYDB_RETURN_IF_ERROR(read);
  if (chunk.count == 0 && std::chrono::steady_clock::now() < until) {
    // Nothing new: wait for the next record.
    const wal::LogPosition was = end;
    end = log_->WaitPast(was, until);
    if (end == was && std::chrono::steady_clock::now() < until) {
      // Woken early with nothing new: the log failed or is closing.
      return Status::Unavailable("the log of " + path_ +
                                 " takes no more records (it failed or is closing)");
    }
    REPLAYDB_RETURN_IF_ERROR(wal::ReadLogRange(env_, wal_dir_, from, end, max_bytes, &chunk));
  }
  return chunk;
}

Result<wal::LogPosition> DBImpl::MakeSnapshot(const std::string& replica, const std::string& dir) {
  if (log_ == nullptr) {
    return Status::FailedPrecondition(path_ +
                                      " has no write-ahead log (DBOptions::wal.enabled "
                                      "is false): a replica cannot follow it");
  }
  wal::LogPosition from;
  const Status s = CheckpointThen([&](uint64_t segment) -> Status {
    // Before the log before `segment` may go: it stays for the replica.
    replicas_->Hold(replica, segment);
    from = wal::LogPosition{segment, 0};
    REPLAYDB_RETURN_IF_ERROR(cold_->CopyTo(dir + "/cold"));
    // The catalog as of now: tables made or dropped since the checkpoint
    // are in the log from `segment` on too, and applying those records
    // again changes nothing (ApplyShippedRecord).
    std::string catalog;
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(env_->ReadFileToString(catalog_path_, &catalog));
    return env_->WriteFileAtomic(dir + "/CATALOG", catalog);
  });
  REPLAYDB_RETURN_IF_ERROR(s.WithContext("snapshot of " + path_ + " into " + dir));
  return from;
}

Status DBImpl::InstallSnapshot(Env* env, const std::string& dir, const std::string& staged,
                               const std::string& primary, wal::LogPosition from) {
  namespace fs = std::filesystem;
  const auto failed = [&](const std::string& what, const std::error_code& ec) {
    return Status::IOError("installing the snapshot of " + primary + " in " + dir + ": " + what +
                           ": " + ec.message());
  };
  std::error_code ec;
  fs::rename(staged + "/cold", dir + "/cold", ec);
  if (ec) return failed("moving " + staged + "/cold to " + dir + "/cold", ec);
  // A log that starts where the replica reads its primary's from (the
  // snapshot's checkpoint says replay starts there): one segment, its
  // header only.
  REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(dir + "/wal"));
  {
    WalOptions wal;
    wal.sync = WalSyncMode::kNone;
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<wal::LogWriter> log,
                              wal::LogWriter::Open(env, dir + "/wal", wal, from.segment));
  }
  REPLAYDB_RETURN_IF_ERROR(env->SyncDir(dir + "/wal"));
  REPLAYDB_RETURN_IF_ERROR(WriteReplicaFile(env, dir, primary, from));
  fs::rename(staged + "/CATALOG", dir + "/CATALOG", ec);
  if (ec) return failed("moving " + staged + "/CATALOG to " + dir + "/CATALOG", ec);
  REPLAYDB_RETURN_IF_ERROR(env->SyncDir(dir));
  fs::remove_all(staged, ec);
  if (ec) return failed("removing " + staged, ec);
  return Status::OK();
}

Status DBImpl::ReadReplicaFile(Env* env, const std::string& dir, std::string* primary,
                               wal::LogPosition* position) {
  const std::string path = dir + "/" + kReplicaFile;
  std::string text;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &text));
  char address[256] = {0};
  unsigned long long segment = 0, offset = 0;
  int version = 0;
  if (std::sscanf(text.c_str(), "replaydb replica %d\nprimary %255s\nsegment %llu\noffset %llu",
                  &version, address, &segment, &offset) != 4 ||
      version != 1) {
    return Status::Corruption(path +
                              " does not parse as a replica's place (\"replaydb "
                              "replica 1\", then the primary, segment and offset, a line each)");
  }
  *primary = address;
  *position = wal::LogPosition{segment, offset};
  return Status::OK();
}

Status DBImpl::WriteReplicaFile(Env* env, const std::string& dir, const std::string& primary,
                                wal::LogPosition position) {
  return env->WriteFileAtomic(dir + "/" + kReplicaFile,
                              "replaydb replica 1\nprimary " + primary + "\nsegment " +
                                  std::to_string(position.segment) + "\noffset " +
                                  std::to_string(position.offset) + "\n");
}

namespace {

Status ReadFencedFile(Env* env, const std::string& dir, uint64_t* epoch, std::string* primary) {
  const std::string path = dir + "/" + DBImpl::kFencedFile;
  std::string text;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &text));
  char address[256] = {0};
  unsigned long long e = 0;
  int version = 0;
  if (std::sscanf(text.c_str(), "replaydb fenced %d\nepoch %llu\nprimary %255s", &version, &e,
                  address) != 3 ||
      version != 1) {
    return Status::Corruption(path +
                              " does not parse as a fence (\"replaydb fenced 1\", then the epoch "
                              "and its primary, a line each)");
  }
  *epoch = e;
  *primary = address;
  return Status::OK();
}

std::string EpochsText(const std::vector<EpochStart>& epochs) {
  std::string text = "replaydb epochs 1\n";
  for (const EpochStart& e : epochs) {
    text += std::to_string(e.epoch) + " " + std::to_string(e.segment) + " " +
            std::to_string(e.offset) + "\n";
  }
  return text;
}

// The one table's spec a shipped CreateTable or TableSpec record (`kind`)
// holds, with its table id.
Result<TableSpec> ShippedSpec(std::span<const std::byte> payload, const std::string& kind,
                              const std::string& source, uint32_t* table_id) {
  wal::CreateTableRecord r;
  REPLAYDB_RETURN_IF_ERROR(wal::Decode(payload, &r));
  const std::string what = "a " + kind + " record shipped by " + source;
  CatalogContents one;
  REPLAYDB_RETURN_IF_ERROR(DecodeCatalog(r.spec, what, &one));
  if (one.tables.size() != 1) {
    return Status::Corruption(what + " holds " + std::to_string(one.tables.size()) +
                              " tables, not 1");
  }
  *table_id = r.table_id;
  return one.tables[0].spec;
}

}  // namespace

Status DBImpl::ReadEpochs(Env* env, const std::string& dir, std::vector<EpochStart>* epochs) {
  const std::string path = dir + "/" + kEpochsFile;
  std::string text;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &text));
  epochs->clear();
  const auto bad = [&](const std::string& why) {
    return Status::Corruption(path +
                              " does not parse as an epoch history (\"replaydb epochs 1\", "
                              "then \"EPOCH SEGMENT OFFSET\" a line each, epochs rising): " +
                              why);
  };
  size_t at = 0;
  bool first = true;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (first) {
      if (line != "replaydb epochs 1") return bad("its first line is '" + line + "'");
      first = false;
      continue;
    }
    unsigned long long e = 0, segment = 0, offset = 0;
    char extra = 0;
    if (std::sscanf(line.c_str(), "%llu %llu %llu %c", &e, &segment, &offset, &extra) != 3) {
      return bad("line '" + line + "'");
    }
    if (!epochs->empty() && e <= epochs->back().epoch) {
      return bad("epoch " + std::to_string(e) + " after epoch " +
                 std::to_string(epochs->back().epoch));
    }
    epochs->push_back(EpochStart{e, segment, offset});
  }
  if (first) return bad("it is empty");
  return Status::OK();
}

Status DBImpl::LoadEpochs() {
  std::vector<EpochStart> epochs;
  Status s = ReadEpochs(env_, path_, &epochs);
  if (!s.ok() && s.code() != Status::Code::kNotFound) return s;
  uint64_t fenced_epoch = 0;
  std::string fenced_by;
  s = ReadFencedFile(env_, path_, &fenced_epoch, &fenced_by);
  if (!s.ok() && s.code() != Status::Code::kNotFound) return s;
  std::lock_guard<std::mutex> lock(epochs_mu_);
  epochs_ = std::move(epochs);
  epoch_.store(epochs_.empty() ? 0 : epochs_.back().epoch, std::memory_order_release);
  fenced_by_ = fenced_by;
  fenced_epoch_ = fenced_epoch;
  fenced_.store(!fenced_by_.empty(), std::memory_order_release);
  if (!fenced_by_.empty() && log_ != nullptr) {
    log_->Seal(FencedStatus(fenced_epoch_, fenced_by_));
  }
  return Status::OK();
}

Status DBImpl::FencedStatus(uint64_t epoch, const std::string& primary) const {
  return Status::FailedPrecondition("database " + path_ + " is no longer the primary: epoch " +
                                    std::to_string(epoch) + "'s primary is " + primary +
                                    " (it was promoted, and fenced this one): writes go there");
}

Status DBImpl::BeginEpoch(uint64_t epoch) {
  std::lock_guard<std::mutex> lock(epochs_mu_);
  const uint64_t now = epoch_.load(std::memory_order_relaxed);
  if (epoch <= now) {
    return Status::FailedPrecondition("epoch " + std::to_string(epoch) + " is not past epoch " +
                                      std::to_string(now) + " of " + path_);
  }
  const wal::LogPosition at = LogEnd();
  std::vector<EpochStart> epochs = epochs_;
  epochs.push_back(EpochStart{epoch, at.segment, at.offset});
  REPLAYDB_RETURN_IF_ERROR(env_->WriteFileAtomic(path_ + "/" + kEpochsFile, EpochsText(epochs)));
  epochs_ = std::move(epochs);
  epoch_.store(epoch, std::memory_order_release);
  return Status::OK();
}

Result<wal::LogPosition> DBImpl::Fence(uint64_t epoch, const std::string& primary) {
  std::lock_guard<std::mutex> lock(epochs_mu_);
  const uint64_t now = epoch_.load(std::memory_order_relaxed);
  if (epoch <= now || epoch < fenced_epoch_) {
    return Status::FailedPrecondition(
        "a fence for epoch " + std::to_string(epoch) + " by " + primary + " refused: " + path_ +
        " is in epoch " + std::to_string(now) +
        (fenced_by_.empty() ? std::string()
                            : ", fenced already by epoch " + std::to_string(fenced_epoch_) +
                                  "'s primary " + fenced_by_));
  }
  REPLAYDB_RETURN_IF_ERROR(env_->WriteFileAtomic(
      path_ + "/" + kFencedFile,
      "replaydb fenced 1\nepoch " + std::to_string(epoch) + "\nprimary " + primary + "\n"));
  fenced_by_ = primary;
  fenced_epoch_ = epoch;
  fenced_.store(true, std::memory_order_release);
  if (log_ == nullptr) return wal::LogPosition{};
  // (A second fence keeps the first one's message: the same fence, asked
  // again, or a later one.)
  return log_->Seal(FencedStatus(epoch, primary));
}

std::string DBImpl::fenced_by(uint64_t* epoch) const {
  std::lock_guard<std::mutex> lock(epochs_mu_);
  if (epoch != nullptr) *epoch = fenced_epoch_;
  return fenced_by_;
}

Result<wal::LogPosition> DBImpl::BecomePrimary(uint64_t epoch) {
  {
    std::lock_guard<std::mutex> lock(epochs_mu_);
    if (!fenced_by_.empty()) return FencedStatus(fenced_epoch_, fenced_by_);
  }
  const Status removed = env_->RemoveFile(path_ + "/" + kReplicaFile);
  if (!removed.ok() && removed.code() != Status::Code::kNotFound) return removed;
  replica_.store(false);
  REPLAYDB_RETURN_IF_ERROR(BeginEpoch(epoch));
  // The trajectories its primary had open stay open for their writers to
  // resume for DBOptions::writer_resume_window; then those left are ended,
  // in the new epoch's log (its replicas end them too).
  size_t orphans = 0;
  for (const auto& table : OpenTables()) orphans += table->KeepOrphans();
  if (orphans > 0) {
    if (options_.writer_resume_window.count() == 0) {
      REPLAYDB_RETURN_IF_ERROR(EndOrphans());
    } else {
      std::lock_guard<std::mutex> lock(loop_mu_);
      orphans_due_ = std::chrono::steady_clock::now() + options_.writer_resume_window;
      if (!orphans_thread_.joinable()) {
        orphans_thread_ = std::thread([this] { OrphansLoop(); });
      }
      loop_cv_.notify_all();
    }
  }
  return LogEnd();
}

Status DBImpl::EndOrphans() {
  Status first;
  for (const auto& table : OpenTables()) {
    const Status s = table->EndOrphans();
    if (first.ok()) first = s;
  }
  return first;
}

void DBImpl::OrphansLoop() {
  std::unique_lock<std::mutex> lock(loop_mu_);
  while (!stop_) {
    if (orphans_due_ == std::chrono::steady_clock::time_point::max()) {
      loop_cv_.wait(lock);
    } else if (std::chrono::steady_clock::now() < orphans_due_) {
      loop_cv_.wait_until(lock, orphans_due_);
    } else {
      orphans_due_ = std::chrono::steady_clock::time_point::max();
      lock.unlock();
      // (A failure, a sealed log: the ends are logged by the next opener's
      // recovery, which ends open trajectories.)
      (void)EndOrphans();
      lock.lock();
    }
  }
}

Result<ReplicationInfo> DBImpl::Replication() const {
  ReplicationInfo info;
  {
    std::lock_guard<std::mutex> lock(epochs_mu_);
    info.epochs = epochs_;
    info.epoch = epoch_.load(std::memory_order_relaxed);
    info.fenced_by = fenced_by_;
    info.fenced_epoch = fenced_epoch_;
  }
  wal::LogPosition at;
  const Status replica = ReadReplicaFile(env_, path_, &info.primary, &at);
  if (replica.ok() || replica_.load()) {
    info.role = "replica";
    info.segment = at.segment;
    info.offset = at.offset;
    return info;
  }
  if (replica.code() != Status::Code::kNotFound) return replica;
  info.role = "primary";
  if (log_ != nullptr) {
    const wal::LogPosition end = log_->end();
    info.segment = end.segment;
    info.offset = end.offset;
  } else {
    std::vector<uint64_t> segments;
    if (wal::ListSegments(env_, wal_dir_, &segments).ok() && !segments.empty()) {
      info.segment = segments.back();
      (void)env_->GetFileSize(wal_dir_ + "/" + wal::SegmentFileName(info.segment), &info.offset);
    }
  }
  info.replicas = read_only_ ? replicas_->SavedProgress() : replicas_->Progress();
  return info;
}

Status DBImpl::SyncLog() {
  if (log_ == nullptr) return Status::OK();
  return log_->Sync(std::numeric_limits<uint64_t>::max(), /*wait=*/true, /*force=*/true);
}

Status DBImpl::ApplyShipped(std::string_view records, const std::string& source) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("applying a primary's log"));
  return wal::ForEachShippedRecord(records, "the log shipped by " + source,
                                   [&](wal::RecordType type, std::span<const std::byte> payload) {
                                     return ApplyShippedRecord(type, payload, source);
                                   });
}

Status DBImpl::ApplyShippedRecord(wal::RecordType type, std::span<const std::byte> payload,
                                  const std::string& source) {
  switch (type) {
    case wal::RecordType::kCreateTable: {
      wal::CreateTableRecord r;
      REPLAYDB_ASSIGN_OR_RETURN(const TableSpec spec,
                                ShippedSpec(payload, "CreateTable", source, &r.table_id));
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = specs_.find(spec.name); it != specs_.end()) {
        // Applied before; or an older table of that name, dropped later in
        // the log (a primary's table ids only grow), applied again.
        if (it->second.id >= r.table_id) return Status::OK();
        return Status::FailedPrecondition(
            "table " + Quoted(spec.name) + " of " + path_ + " has id " +
            std::to_string(it->second.id) + ", and " + source + " created it with id " +
            std::to_string(r.table_id) + ": this directory is not a replica of " + source);
      }
      if (r.table_id < next_table_id_ && by_id_.count(r.table_id) == 0) {
        return Status::OK();  // made and dropped before: applied again
      }
      if (by_id_.count(r.table_id) != 0) {
        return Status::FailedPrecondition("table id " + std::to_string(r.table_id) + " of " +
                                          path_ + " names another table than " + source + "'s " +
                                          Quoted(spec.name));
      }
      return CreateTableLocked(spec, r.table_id).status();
    }
    case wal::RecordType::kDropTable: {
      wal::DropTableRecord r;
      REPLAYDB_RETURN_IF_ERROR(wal::Decode(payload, &r));
      std::string name;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [n, entry] : specs_) {
          if (entry.id == r.table_id) name = n;
        }
      }
      if (name.empty()) return Status::OK();  // dropped before
      return DropTable(name);
    }
    case wal::RecordType::kTableSpec: {
      uint32_t id = 0;
      REPLAYDB_ASSIGN_OR_RETURN(const TableSpec spec, ShippedSpec(payload, "TableSpec", source, &id));
      std::shared_ptr<TableImpl> table;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = by_id_.find(id); it != by_id_.end()) table = it->second;
      }
      if (table == nullptr) return Status::OK();  // dropped later in the log
      // (Its catalog, and its own log for its readers, through PersistSpec.)
      return table->ApplyRateLimiter(spec.rate_limiter)
          .WithContext("a TableSpec record shipped by " + source);
    }
    default:
      break;
  }
  // A type of a later build that older ones may skip (as recovery does).
  // (ItemClock is applied: a replica's items keep the primary's order.)
  if ((static_cast<uint8_t>(type) & wal::kSafeToIgnore) != 0 &&
      type != wal::RecordType::kItemClock) {
    return Status::OK();
  }
  std::lock_guard<std::mutex> ship_lock(ship_mu_);
  if (log_ != nullptr) REPLAYDB_RETURN_IF_ERROR(log_->Append(type, payload).status());
  const ScopedNoTableLog logged_above;  // (an applied update would log itself again)
  return ApplyLogRecord(type, payload, [this](uint32_t id) -> TableImpl* {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second.get();
  });
}

}  // namespace replaydb::engine
