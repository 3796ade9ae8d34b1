// LogWriter: appends records to the write-ahead log's segment files, with
// group commit and the sync modes of WalOptions.
//
//   REPLAYDB_ASSIGN_OR_RETURN(auto log, LogWriter::Open(env, dir, options, next_segment));
//   REPLAYDB_ASSIGN_OR_RETURN(uint64_t seq, log->Append(RecordType::kAppendSteps, payload));
//   REPLAYDB_RETURN_IF_ERROR(log->Sync(seq, /*wait=*/true));
//
// Thread safety: all methods may be called concurrently (except the
// destructor). Appends are serialised by one mutex; an fsync runs outside it,
// so appends continue while a sync is in flight. Sequence numbers are
// assigned in file order: seq a < seq b means a precedes b in the log.
#ifndef REPLAYDB_WAL_LOG_WRITER_H_
#define REPLAYDB_WAL_LOG_WRITER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <type_traits>

#include "replaydb/env.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::wal {

struct LogWriterStats {
  uint64_t segment = 0;            // the segment being written
  uint64_t records = 0;            // appended since Open
  uint64_t bytes = 0;              // appended since Open, headers included
  uint64_t syncs = 0;              // WritableFile::Sync calls that succeeded
  uint64_t bytes_since_roll = 0;   // appended since the last Roll (or Open)
  uint64_t records_since_roll = 0;
};

class LogWriter {
 public:
  // Creates segment `first_segment` in `dir` (which must exist): the file,
  // its header (fsynced unless kNone), and SyncDir(dir) so its entry is
  // durable; then writes records
  // there, moving to the next segment before a record that would take a
  // segment holding records past options.segment_bytes (a record never spans
  // segments; one larger than segment_bytes gets a segment of its own).
  // AlreadyExists if that segment (or a later one it moves to) already holds
  // bytes other than its own header: it is never overwritten (one holding
  // just its header, no records, is taken over). With kBatch, starts the background
  // syncing thread. `env` must outlive the writer.
  static Result<std::unique_ptr<LogWriter>> Open(Env* env, std::string dir,
                                                 const WalOptions& options,
                                                 uint64_t first_segment);
  // Stops the kBatch thread, syncs (unless kNone or failed) and closes the
  // current segment. REQUIRES: no other call is in progress.
  ~LogWriter();

  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Appends one record, handing it to the OS (WritableFile::Append) before
  // returning its sequence number (1, 2, ... since Open). The payload
  // is built by `fill`, called with exactly `payload_bytes` bytes to write
  // (so large payloads are not copied twice); it is not called when
  // payload_bytes is 0. `fill` runs under the writer's mutex: it must not
  // call this LogWriter, and should only copy. One WritableFile::Append
  // writes the whole record. On a failed write the segment is cut back to
  // the previous record and IOError (naming the file and offset) returned;
  // the writer stays usable. If the cut back fails too, or after a failed
  // fsync, every later Append/Sync/Roll returns the same IOError ("...
  // unusable after the earlier fsync failure; the database must be
  // reopened: <original error>"): the log's state on disk is unknown.
  // InvalidArgument if payload_bytes > kMaxPayloadBytes.
  template <typename Fill>
  Result<uint64_t> Append(RecordType type, size_t payload_bytes, Fill&& fill);
  // The record whose payload is `pieces` one after another: the same
  // bytes on disk as Append of their concatenation, written by one vectored
  // write without first copying them together.
  Result<uint64_t> AppendV(RecordType type, std::span<const std::span<const std::byte>> pieces);
  Result<uint64_t> Append(RecordType type, std::span<const std::byte> payload);

  // Makes record `seq` durable as the sync mode says: kAlways fsyncs (one
  // fsync serves every record appended before it: group commit); kBatch
  // waits for the background fsync when `wait`, else returns at once; kNone
  // returns at once (unless `force`, which fsyncs in every mode). kAlways
  // and `force` fsync even when `wait` is false. `seq` past the last
  // appended record means the last one. OK at once if `seq` is already
  // durable. Cancelled if the writer is destroyed while waiting.
  Status Sync(uint64_t seq, bool wait, bool force = false);

  // Syncs (unless kNone) and closes the current segment and starts the next
  // one; returns the new segment's number. Records appended after Roll
  // returns are in that segment or later ones; records whose Append returned
  // before Roll was called are in earlier ones. Resets the *_since_roll
  // stats (an automatic move past segment_bytes does not). With
  // `only_if_records`, a current segment that holds no records (none
  // appended since the last Roll or Open) stays, and its number is returned.
  // If the next segment cannot be created (a full disk), IOError naming it,
  // and nothing changed: the writer stays usable in the current segment
  // (likewise for an Append that needed the next segment).
  Result<uint64_t> Roll(bool only_if_records = false);

  // Takes no more records: every later Append returns `why` (which must
  // not be OK); Sync and Roll go on (a checkpoint still rolls). Returns
  // where the log ends: every record appended before is before it. A
  // second Seal keeps the first one's `why`.
  LogPosition Seal(Status why);

  // Removes the segment files numbered below `segment` (never the current
  // one), then syncs the directory.
  Status DeleteSegmentsBefore(uint64_t segment);

  // Where the log ends now: the segment being written and the end of its
  // last record (each appended record is in the file by then: a reader of
  // the segment sees it).
  LogPosition end() const;
  // Waits until the log ends past `position`, `until` passes, or the writer
  // fails or closes; returns end() then.
  LogPosition WaitPast(LogPosition position, std::chrono::steady_clock::time_point until) const;

  WalSyncMode sync_mode() const { return options_.sync; }
  LogWriterStats stats() const;
  const std::string& dir() const { return dir_; }

 private:
  LogWriter(Env* env, std::string dir, const WalOptions& options);
  // The payload comes from `fill` (into the writer's buffer), or, where
  // fill is null, from `pieces`.
  Result<uint64_t> AppendRaw(RecordType type, size_t payload_bytes,
                             void (*fill)(void* ctx, std::byte* out), void* ctx,
                             std::span<const std::span<const std::byte>> pieces = {});

  // Implementation state and helpers (owned by wal/log_writer.cc).
  struct State;
  friend struct LogWriterInternal;
  Env* const env_;
  const std::string dir_;
  const WalOptions options_;
  std::unique_ptr<State> state_;
};

template <typename Fill>
Result<uint64_t> LogWriter::Append(RecordType type, size_t payload_bytes, Fill&& fill) {
  using F = std::remove_reference_t<Fill>;
  return AppendRaw(
      type, payload_bytes,
      [](void* ctx, std::byte* out) { (*static_cast<F*>(ctx))(out); },
      const_cast<void*>(static_cast<const void*>(&fill)));
}

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_LOG_WRITER_H_
