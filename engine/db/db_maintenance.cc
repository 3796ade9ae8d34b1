// DB's maintenance calls: Wal (the log as it is now), Verify (read and check
// everything) and Compact (the cold store). The replaydb shell's wal, verify
// and compact commands call them.
#include <string>
#include <vector>

#include "engine/db/db_impl.h"
#include "wal/format.h"
#include "wal/log_reader.h"

namespace replaydb::engine {

Result<WalInfo> DBImpl::Wal() const {
  WalInfo info;
  info.dir = wal_dir_;
  info.enabled = options_.wal.enabled || read_only_;
  info.sync = std::string(WalSyncModeName(options_.wal.sync));
  // No checkpoint deletes segments while they are read.
  std::lock_guard<std::mutex> checkpoint_lock(checkpoint_mu_);
  info.checkpoint_sequence = checkpoint_sequence_;
  info.checkpoint_segment = checkpoint_segment_;
  if (!env_->FileExists(wal_dir_)) return info;
  std::vector<uint64_t> segments;
  REPLAYDB_RETURN_IF_ERROR(wal::ListSegments(env_, wal_dir_, &segments));
  info.segments = segments.size();
  if (!segments.empty()) {
    info.first_segment = segments.front();
    info.last_segment = segments.back();
  }
  for (uint64_t n : segments) {
    uint64_t size = 0;
    REPLAYDB_RETURN_IF_ERROR(env_->GetFileSize(wal_dir_ + "/" + wal::SegmentFileName(n), &size));
    info.bytes += size;
  }
  wal::ReplayReport report;
  const Status s = wal::Replay(
      env_, wal_dir_, checkpoint_segment_, RecoveryMode::kAbsoluteConsistency,
      [&](wal::RecordType, std::span<const std::byte> payload) {
        ++info.records_since_checkpoint;
        info.bytes_since_checkpoint += payload.size() + wal::kRecordHeaderBytes;
        return Status::OK();
      },
      &report, checkpoint_wal_continues_);
  if (!s.ok()) {
    info.note = "counted up to " + s.message() +
                (read_only_ ? " (the writer may be appending there)" : "");
  }
  return info;
}

Result<VerifyReport> DBImpl::Verify(const LongOperationOptions& options) {
  VerifyReport report;
  // Stored steps stay as they are while they are compared.
  std::unique_lock<std::mutex> checkpoint_lock(checkpoint_mu_);
  REPLAYDB_RETURN_IF_ERROR(cold_->VerifyChecksums().WithContext("verify"));
  std::vector<std::pair<std::string, std::shared_ptr<TableImpl>>> tables;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tables_) tables.emplace_back(name, t);
  }
  for (const auto& [name, t] : tables) {
    const TableInfo info = t->Info();
    total += info.num_steps + info.cold_steps;
  }
  util::ProgressReporter progress("verify " + path_, total, "steps", options.progress);
  for (const auto& [name, t] : tables) {
    ++report.tables;
    REPLAYDB_RETURN_IF_ERROR(t->Verify(*cold_, options.cancel, progress, &report));
  }
  // kAbsoluteConsistency changes nothing: it reports damage, never cuts it.
  const Status s = wal::Replay(
      env_, wal_dir_, checkpoint_segment_, RecoveryMode::kAbsoluteConsistency,
      [&](wal::RecordType, std::span<const std::byte>) {
        ++report.wal_records;
        return Status::OK();
      },
      nullptr, checkpoint_wal_continues_);
  if (!s.ok() && s.code() != Status::Code::kNotFound) report.problems.push_back("log: " + s.message());
  if (!recovery_.dropped_file.empty()) {
    // Gone from the files now, but damage all the same.
    report.problems.push_back(
        "log: recovery at open dropped " + std::to_string(recovery_.dropped_bytes) +
        " bytes from " + recovery_.dropped_file + " at offset " +
        std::to_string(recovery_.dropped_offset) + ": " + recovery_.dropped_reason);
  }
  return report;
}

Status DBImpl::Compact(const LongOperationOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("Compact"));
  return cold_->Compact(options.cancel, options.progress);
}

}  // namespace replaydb::engine
