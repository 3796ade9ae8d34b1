// Reading the log while it is written, for replicas: a primary ships its
// records as they lie in its segments (DBImpl::ReadLog), and a replica
// checks and takes them apart (ForEachShippedRecord) before applying them.
//
// Thread safety: functions; a segment may be appended to while it is read
// (up to `end`, which the writer published).
#ifndef REPLAYDB_WAL_LOG_TAIL_H_
#define REPLAYDB_WAL_LOG_TAIL_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "replaydb/env.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::wal {

// Whole records, framed as in a segment (wal/FORMAT.md: CRC, length, type,
// payload, one after another), and where the next read starts.
struct LogChunk {
  std::string records;
  uint32_t count = 0;
  LogPosition next;
  LogPosition end;  // the log's end it was read up to
};

// Reads the records of `dir`'s log from `from` up to `end` (LogWriter::end
// of its writer), as many as fit in `max_bytes` (at least one), moving on
// to the next segment at a segment's end. `from` of segment 0 means the
// first segment there is; an offset inside the segment header means its
// first record. Nothing to read: an empty chunk, `next` = `from`.
// FailedPrecondition naming the segment when the log no longer holds
// `from` (a checkpoint removed it); Corruption naming the file and offset
// for a record that does not check.
Status ReadLogRange(Env* env, const std::string& dir, LogPosition from, LogPosition end,
                    size_t max_bytes, LogChunk* out);

// Calls `fn(type, payload)` for each record of `records` (a LogChunk's), in
// order, each payload 16-byte aligned (as Decode needs). Corruption naming
// `source` and the record's offset for a record whose length runs past the
// end or whose CRC does not check (nothing after it is passed on); an
// error from `fn` stops the walk and is returned.
Status ForEachShippedRecord(
    std::string_view records, const std::string& source,
    const std::function<Status(RecordType, std::span<const std::byte>)>& fn);

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_LOG_TAIL_H_
