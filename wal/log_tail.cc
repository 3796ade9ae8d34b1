#include "wal/log_tail.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "util/crc32c.h"
#include "wal/log_reader.h"

namespace replaydb::wal {

namespace {

std::string At(const std::string& source, uint64_t offset) {
  return source + ": offset " + std::to_string(offset) + ": ";
}

// Reads the records of one segment from `offset` to `limit` (or to the end
// of its records), while `out` has room. Sets *end_of_data when the
// segment's records ended before `limit` or the room did.
Status ReadSegmentRange(Env* env, const std::string& path, uint64_t offset, uint64_t limit,
                        size_t max_bytes, LogChunk* out, uint64_t* next_offset, bool* end_of_data) {
  *end_of_data = false;
  *next_offset = offset;
  std::unique_ptr<SequentialFile> file;
  REPLAYDB_RETURN_IF_ERROR(env->NewSequentialFile(path, &file));
  REPLAYDB_RETURN_IF_ERROR(file->Skip(offset));
  std::string_view got;
  while (offset < limit) {
    char header[kRecordHeaderBytes];
    if (limit - offset < kRecordHeaderBytes) break;
    REPLAYDB_RETURN_IF_ERROR(file->Read(sizeof(header), &got, header));
    if (got.size() < sizeof(header) ||
        std::all_of(header, header + sizeof(header), [](char c) { return c == 0; })) {
      *end_of_data = true;  // the end of a closed segment's records
      break;
    }
    const uint32_t length = GetU32(header + 4);
    const uint64_t record_bytes = kRecordHeaderBytes + uint64_t{length};
    if (length > kMaxPayloadBytes || offset + record_bytes > limit) {
      return Status::Corruption(At(path, offset) + "a record of " + std::to_string(length) +
                                " bytes runs past the log's end at " + std::to_string(limit));
    }
    if (out->count > 0 && out->records.size() + record_bytes > max_bytes) break;
    const size_t at = out->records.size();
    out->records.resize(at + record_bytes);
    char* rec = out->records.data() + at;
    std::memcpy(rec, header, sizeof(header));
    REPLAYDB_RETURN_IF_ERROR(file->Read(length, &got, rec + kRecordHeaderBytes));
    if (got.size() < length) {
      out->records.resize(at);
      return Status::Corruption(At(path, offset) + "the record is cut short");
    }
    if (got.data() != rec + kRecordHeaderBytes)
      std::memmove(rec + kRecordHeaderBytes, got.data(), length);
    if (UnmaskCrc(GetU32(rec)) != util::Crc32c(rec + 4, record_bytes - 4)) {
      out->records.resize(at);
      return Status::Corruption(At(path, offset) + "checksum mismatch");
    }
    ++out->count;
    offset += record_bytes;
    *next_offset = offset;
  }
  return Status::OK();
}

// FailedPrecondition: the log in `dir` no longer holds `segment` (the
// segments left are listed for the message only).
Status SegmentGone(Env* env, const std::string& dir, uint64_t segment) {
  std::vector<uint64_t> segments;
  (void)ListSegments(env, dir, &segments);
  return Status::FailedPrecondition(
      "the log of " + dir + " no longer holds segment " + std::to_string(segment) +
      (segments.empty() ? std::string(" (it holds none)")
                        : " (it starts at segment " + std::to_string(segments.front()) +
                              ": a checkpoint removed the ones before)"));
}

}  // namespace

Status ReadLogRange(Env* env, const std::string& dir, LogPosition from, LogPosition end,
                    size_t max_bytes, LogChunk* out) {
  out->records.clear();
  out->count = 0;
  out->next = from;
  out->end = end;
  if (from.segment == 0) {
    std::vector<uint64_t> segments;
    REPLAYDB_RETURN_IF_ERROR(ListSegments(env, dir, &segments));
    if (segments.empty()) return Status::OK();
    from = LogPosition{segments.front(), 0};
  }
  from.offset = std::max<uint64_t>(from.offset, kSegmentHeaderBytes);
  // At the end already (a replica that keeps up asks here after each
  // record): nothing to read, and no file to open.
  if (from == end) return Status::OK();
  if (from > end) {
    return Status::FailedPrecondition(
        "segment " + std::to_string(from.segment) + ", offset " + std::to_string(from.offset) +
        " is past the end of the log in " + dir + " (segment " + std::to_string(end.segment) +
        ", offset " + std::to_string(end.offset) + ")");
  }
  while (from <= end) {
    const std::string path = dir + "/" + SegmentFileName(from.segment);
    if (!env->FileExists(path)) {
      if (out->count > 0) break;  // what was read first; the next read says
      return SegmentGone(env, dir, from.segment);
    }
    const bool last = from.segment == end.segment;
    uint64_t limit = end.offset;
    if (!last) REPLAYDB_RETURN_IF_ERROR(env->GetFileSize(path, &limit));
    if (from.offset > limit) {
      return Status::FailedPrecondition(path + ": offset " + std::to_string(from.offset) +
                                        " is past the end of its records (" +
                                        std::to_string(limit) + " bytes)");
    }
    uint64_t next_offset = from.offset;
    bool end_of_data = false;
    REPLAYDB_RETURN_IF_ERROR(ReadSegmentRange(env, path, from.offset, limit, max_bytes, out,
                                              &next_offset, &end_of_data));
    out->next = LogPosition{from.segment, next_offset};
    const bool segment_done = !last && (end_of_data || next_offset >= limit);
    if (!segment_done) break;  // out of room, or at the writer's end
    // On to the next segment (numbers follow one another: a missing one is
    // records that are gone, which the check above reports).
    from = LogPosition{from.segment + 1, kSegmentHeaderBytes};
    out->next = from;
    if (out->records.size() >= max_bytes) break;
  }
  return Status::OK();
}

Status ForEachShippedRecord(
    std::string_view records, const std::string& source,
    const std::function<Status(RecordType, std::span<const std::byte>)>& fn) {
  struct alignas(16) Chunk {
    char bytes[16];
  };
  // Kept between calls: a fresh buffer for every shipped chunk would be
  // fresh pages each time.
  thread_local std::vector<Chunk> aligned;
  uint64_t offset = 0;
  while (offset < records.size()) {
    if (records.size() - offset < kRecordHeaderBytes) {
      return Status::Corruption(At(source, offset) + "an incomplete record header");
    }
    const char* rec = records.data() + offset;
    const uint32_t length = GetU32(rec + 4);
    const uint64_t record_bytes = kRecordHeaderBytes + uint64_t{length};
    if (record_bytes > records.size() - offset) {
      return Status::Corruption(At(source, offset) + "a record of " + std::to_string(length) +
                                " bytes runs past the end of the " +
                                std::to_string(records.size()) + " shipped");
    }
    if (UnmaskCrc(GetU32(rec)) != util::Crc32c(rec + 4, record_bytes - 4)) {
      return Status::Corruption(At(source, offset) + "checksum mismatch");
    }
    const char* payload = rec + kRecordHeaderBytes;
    if (reinterpret_cast<uintptr_t>(payload) % 16 != 0) {
      aligned.resize(std::max<size_t>(aligned.size(), (length + 15) / 16));
      std::memcpy(aligned.data(), payload, length);
      payload = aligned.data()->bytes;
    }
    const auto type = static_cast<RecordType>(static_cast<uint8_t>(rec[8]));
    REPLAYDB_RETURN_IF_ERROR(
        fn(type, std::span(reinterpret_cast<const std::byte*>(payload), length)));
    offset += record_bytes;
  }
  return Status::OK();
}

}  // namespace replaydb::wal
