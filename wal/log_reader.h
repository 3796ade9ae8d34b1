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
  uint64_t last_segment = 0;    // the highest segment number seen (0: none)
  // Damage dropped by kTolerateTornTail or kPointInTime: where it began and
  // how many bytes (in all segments) were not replayed. Empty when none.
  std::string dropped_file;
  uint64_t dropped_offset = 0;
  uint64_t dropped_bytes = 0;
  std::string dropped_reason;   // e.g. "checksum mismatch"
};

// Calls `fn(type, payload)` for every record in the segments of `dir`
// numbered `first_segment` or higher, in order. A gap in the segment
// numbers is Corruption naming the missing file. Damage (a bad header,
// checksum, length past the end, unknown type without kSafeToIgnore) is
// handled as `mode` says; Corruption messages name the file and the byte
// offset of the damaged record. An error from `fn` stops the replay and is
// returned with the file and offset added. The payload span is valid only
// during the call. With kTolerateTornTail or kPointInTime the torn or
// corrupt tail is also cut off the file (TruncateFile), so later records
// can follow the valid ones; where several segments follow a damage in
// kPointInTime, they are removed.
Status Replay(Env* env, const std::string& dir, uint64_t first_segment, RecoveryMode mode,
              const std::function<Status(RecordType, std::span<const std::byte>)>& fn,
              ReplayReport* report);

// The segment numbers present in `dir`, sorted.
Status ListSegments(Env* env, const std::string& dir, std::vector<uint64_t>* segments);

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_LOG_READER_H_
