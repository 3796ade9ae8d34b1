// LogReader: replays the write-ahead log's segments in order, obeying a
// RecoveryMode.
//
// Thread safety: a function; call it from one thread per directory.
#ifndef REPLAYDB_WAL_LOG_READER_H_
#define REPLAYDB_WAL_LOG_READER_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "replaydb/env.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::wal {

struct ReplayReport {
  uint64_t segments = 0;        // segment files read
  uint64_t records = 0;         // records passed to the callback
  uint64_t bytes = 0;           // bytes of those records, headers included
  uint64_t skipped_records = 0; // unknown types marked kSafeToIgnore
  // The highest segment number left in the directory after the replay (0:
  // none): a writer continues at last_segment + 1.
  uint64_t last_segment = 0;
  // Damage dropped by kTolerateTornTail or kPointInTime: where it began and
  // how many bytes (in all segments) were not replayed. Empty when none.
  std::string dropped_file;
  uint64_t dropped_offset = 0;
  uint64_t dropped_bytes = 0;
  std::string dropped_reason;   // e.g. "checksum mismatch"
};

// Calls `fn(type, payload)` for every record in the segments of `dir`
// numbered `first_segment` or higher, in order.
//
// The log must continue from `first_segment` (a checkpoint's position): if
// segment `first_segment` is missing while later ones exist (or, with
// `first_segment_must_exist`, while none exist: the checkpoint says its
// writer created it), or a segment is missing between two present, that is
// a gap. kAbsoluteConsistency fails with Corruption naming the missing file;
// kTolerateTornTail too, unless nothing follows the gap (a missing head and
// no later segment: the log ends there, so the replay ends there, reported);
// kPointInTime replays up to the gap and drops what follows it, reported
// with the missing file as `dropped_file`.
// Damage (a bad segment header, checksum, length past the end, unknown type
// without kSafeToIgnore) is handled as `mode` says; Corruption messages read
// "<file>: offset <N>: <reason>", N being the byte offset of the damaged
// record (0 for the segment header). Records of unknown types with
// kSafeToIgnore are skipped (counted in skipped_records).
//
// A torn tail is damage in the LAST segment that a crash during a write can
// leave: a segment shorter than its header (or empty), or an incomplete or
// checksum-failing record after which nothing valid could follow (no later
// offset of the segment starts a record whose checksum verifies, or only
// zero bytes follow). kTolerateTornTail drops a torn tail and fails on other
// damage; kPointInTime drops everything from the first damage on, in later
// segments too; kAbsoluteConsistency fails on any damage. Dropped damage is
// reported in `report` and cut off durably: the damaged segment is
// truncated at the damage (rewritten as an empty segment when the damage is
// in its header) and later segments removed, so a writer continuing at
// report->last_segment + 1 produces a clean log.
//
// An error from `fn` stops the replay and is returned with "<file>: offset
// <N>" prefixed. The payload span is valid only during the call and starts
// 16-byte aligned (as Decode requires). Memory use is bounded by the
// largest record (never by a length field alone) and, when classifying
// damage in kTolerateTornTail, by the last segment's size. Never crashes on
// any file contents. `report` may be null.
Status Replay(Env* env, const std::string& dir, uint64_t first_segment, RecoveryMode mode,
              const std::function<Status(RecordType, std::span<const std::byte>)>& fn,
              ReplayReport* report, bool first_segment_must_exist = false);

// The segment numbers present in `dir`, sorted.
Status ListSegments(Env* env, const std::string& dir, std::vector<uint64_t>* segments);

// Removes the segment files in `dir` numbered below `segment` and, if it
// removed any, syncs the directory. Missing files are not an error.
Status RemoveSegmentsBefore(Env* env, const std::string& dir, uint64_t segment);

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_LOG_READER_H_
