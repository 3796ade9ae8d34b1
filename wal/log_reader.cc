// Replay (wal/log_reader.h): reads segments in order, checks every record,
// and classifies damage for the recovery modes.
#include "wal/log_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "util/crc32c.h"

namespace replaydb::wal {

namespace {

bool KnownType(uint8_t type) {
  return (type >= static_cast<uint8_t>(RecordType::kCreateTable) &&
          type <= static_cast<uint8_t>(RecordType::kClearTable)) ||
         type == static_cast<uint8_t>(RecordType::kTableSpec) ||
         type == static_cast<uint8_t>(RecordType::kItemClock);
}

// Reads a SequentialFile front to back through a 64 KiB buffer; reads of a
// buffer or more go straight into the caller's memory.
class BufferedReader {
 public:
  explicit BufferedReader(SequentialFile* file)
      : file_(file), buf_(std::make_unique<char[]>(kBufferBytes)) {}

  // Reads `n` bytes into `dst`; *got < n only at the end of the file.
  Status Read(size_t n, char* dst, size_t* got) {
    *got = 0;
    while (*got < n) {
      if (pos_ < len_) {
        const size_t take = std::min(n - *got, len_ - pos_);
        std::memcpy(dst + *got, buf_.get() + pos_, take);
        pos_ += take;
        *got += take;
        continue;
      }
      if (eof_) break;
      const size_t want = n - *got;
      std::string_view result;
      if (want >= kBufferBytes) {
        REPLAYDB_RETURN_IF_ERROR(file_->Read(want, &result, dst + *got));
        if (result.data() != dst + *got) std::memmove(dst + *got, result.data(), result.size());
        *got += result.size();
        if (result.size() < want) eof_ = true;
      } else {
        REPLAYDB_RETURN_IF_ERROR(file_->Read(kBufferBytes, &result, buf_.get()));
        if (result.data() != buf_.get()) std::memmove(buf_.get(), result.data(), result.size());
        pos_ = 0;
        len_ = result.size();
        if (len_ < kBufferBytes) eof_ = true;
      }
    }
    return Status::OK();
  }

 private:
  static constexpr size_t kBufferBytes = 64 << 10;
  SequentialFile* file_;
  std::unique_ptr<char[]> buf_;
  size_t pos_ = 0;
  size_t len_ = 0;
  bool eof_ = false;
};

// A payload buffer whose start is 16-byte aligned (Decode needs 8; the
// AppendSteps data is 16-aligned within its payload).
class AlignedBuffer {
 public:
  // Room for n bytes, contents unspecified: not zeroed first (the read
  // fills it; zeroing was one more pass over every replayed payload).
  char* Reserve(size_t n) {
    if (n > capacity_) {
      capacity_ = std::max(n, capacity_ * 2);
      chunks_.reset(new Chunk[(capacity_ + sizeof(Chunk) - 1) / sizeof(Chunk)]);
    }
    return reinterpret_cast<char*>(chunks_.get());
  }

 private:
  struct alignas(16) Chunk {
    char bytes[16];
  };
  std::unique_ptr<Chunk[]> chunks_;
  size_t capacity_ = 0;
};

// Damage found in a segment: the offset of the damaged record (0 for the
// segment header) and why. `maybe_torn`: the kind of damage a torn write
// leaves (an incomplete or checksum-failing record, a short segment).
struct Damage {
  bool found = false;
  uint64_t offset = 0;
  std::string reason;
  bool maybe_torn = false;
};

// True if nothing valid could follow `offset` in `path`: the bytes from
// there on are all zero (a crash can leave allocated but unwritten blocks),
// or no offset after it starts a record whose checksum verifies. Scanning
// is bounded; past the bound the answer is the safe one (false).
bool NothingValidFollows(Env* env, const std::string& path, uint64_t offset) {
  std::string bytes;
  if (!env->ReadFileToString(path, &bytes).ok() || offset > bytes.size()) return false;
  const char* const begin = bytes.data();
  const char* const end = begin + bytes.size();
  if (std::all_of(begin + offset, end, [](char c) { return c == 0; })) return true;
  uint64_t budget = uint64_t{256} << 20;  // bytes checksummed at most
  for (const char* p = begin + offset + 1; p + kRecordHeaderBytes <= end; ++p) {
    const uint64_t len = GetU32(p + 4);
    if (len > kMaxPayloadBytes || len > static_cast<uint64_t>(end - p) - kRecordHeaderBytes) {
      continue;
    }
    if (len + 5 > budget) return false;
    budget -= len + 5;
    if (util::Crc32c(p + 4, len + 5) == UnmaskCrc(GetU32(p))) return false;
  }
  return true;
}

std::string OffsetContext(const std::string& path, uint64_t offset) {
  return path + ": offset " + std::to_string(offset);
}

// Replays one segment's records until the end or the first damage.
// Non-OK only for I/O errors and callback errors.
Status ReadSegment(Env* env, const std::string& path, uint64_t number, uint64_t size,
                   const std::function<Status(RecordType, std::span<const std::byte>)>& fn,
                   AlignedBuffer* payload_buf, ReplayReport* report, Damage* damage) {
  std::unique_ptr<SequentialFile> file;
  REPLAYDB_RETURN_IF_ERROR(env->NewSequentialFile(path, &file));
  BufferedReader reader(file.get());
  auto damaged = [damage](uint64_t offset, std::string reason, bool maybe_torn) {
    damage->found = true;
    damage->offset = offset;
    damage->reason = std::move(reason);
    damage->maybe_torn = maybe_torn;
    return Status::OK();
  };

  char header[kSegmentHeaderBytes];
  size_t got = 0;
  REPLAYDB_RETURN_IF_ERROR(reader.Read(sizeof(header), header, &got));
  if (got == 0) return damaged(0, "empty segment (no header)", true);
  if (got < sizeof(header)) {
    return damaged(0,
                   "segment of " + std::to_string(got) + " bytes is shorter than its " +
                       std::to_string(kSegmentHeaderBytes) + "-byte header",
                   true);
  }
  if (std::all_of(header, header + sizeof(header), [](char c) { return c == 0; })) {
    // A mapped segment preallocated by a writer that crashed before its
    // header landed: as good as empty.
    return damaged(0, "segment header never written (zeros)", true);
  }
  if (std::memcmp(header, kSegmentMagic.data(), kSegmentMagic.size()) != 0) {
    return damaged(0, "bad segment magic (not a replaydb WAL segment)", false);
  }
  const uint32_t version = GetU32(header + 8);
  if (version != kFormatVersion) {
    return damaged(0, "unsupported WAL format version " + std::to_string(version), false);
  }
  const uint64_t header_number = GetU64(header + 12);
  if (header_number != number) {
    return damaged(0,
                   "segment header says segment " + std::to_string(header_number) +
                       ", the file name says " + std::to_string(number),
                   false);
  }

  uint64_t offset = kSegmentHeaderBytes;
  while (true) {
    char rh[kRecordHeaderBytes];
    REPLAYDB_RETURN_IF_ERROR(reader.Read(sizeof(rh), rh, &got));
    if (got == 0) return Status::OK();  // the end
    if (got < sizeof(rh)) {
      return damaged(offset,
                     "incomplete record header (" + std::to_string(got) + " of " +
                         std::to_string(kRecordHeaderBytes) + " bytes)",
                     true);
    }
    if (std::all_of(rh, rh + sizeof(rh), [](char c) { return c == 0; })) {
      // No record starts with zeros (type 0 is not a type): this is the
      // preallocated tail of a mapped segment (env.h), the end of the data,
      // if zeros run to the end of the file.
      char zeros[4096];
      while (true) {
        REPLAYDB_RETURN_IF_ERROR(reader.Read(sizeof(zeros), zeros, &got));
        if (!std::all_of(zeros, zeros + got, [](char c) { return c == 0; })) {
          return damaged(offset, "zero record header followed by non-zero bytes", true);
        }
        if (got < sizeof(zeros)) return Status::OK();
      }
    }
    const uint32_t length = GetU32(rh + 4);
    const uint8_t type = static_cast<uint8_t>(rh[8]);
    const uint64_t left = size > offset + sizeof(rh) ? size - offset - sizeof(rh) : 0;
    if (length > kMaxPayloadBytes) {
      return damaged(offset,
                     "payload length " + std::to_string(length) + " exceeds the maximum " +
                         std::to_string(kMaxPayloadBytes),
                     true);
    }
    if (length > left) {
      return damaged(offset,
                     "record of " + std::to_string(length) +
                         " payload bytes runs past the end of the file (" +
                         std::to_string(left) + " left)",
                     true);
    }
    char* payload = payload_buf->Reserve(length);
    REPLAYDB_RETURN_IF_ERROR(reader.Read(length, payload, &got));
    if (got < length) {
      return damaged(offset,
                     "record of " + std::to_string(length) +
                         " payload bytes runs past the end of the file (" + std::to_string(got) +
                         " read)",
                     true);
    }
    const uint32_t crc = util::Crc32cExtend(util::Crc32c(rh + 4, 5), payload, length);
    if (crc != UnmaskCrc(GetU32(rh))) return damaged(offset, "checksum mismatch", true);
    if (KnownType(type)) {
      Status s = fn(static_cast<RecordType>(type),
                    std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload), length));
      if (!s.ok()) return s.WithContext(OffsetContext(path, offset));
      ++report->records;
      report->bytes += sizeof(rh) + length;
    } else if ((type & kSafeToIgnore) != 0) {
      ++report->skipped_records;
    } else {
      return damaged(offset, "unknown record type " + std::to_string(type), false);
    }
    offset += sizeof(rh) + length;
  }
}

// Makes `path` end at `offset` durably; below the header, it becomes a valid
// empty segment `number` (so no empty or headerless file is left behind for
// a later replay to trip on).
Status CutSegment(Env* env, const std::string& path, uint64_t number, uint64_t offset) {
  std::unique_ptr<WritableFile> file;
  if (offset < kSegmentHeaderBytes) {
    REPLAYDB_RETURN_IF_ERROR(env->NewWritableFile(path, /*truncate=*/true, &file));
    std::string header(kSegmentHeaderBytes, '\0');
    std::memcpy(header.data(), kSegmentMagic.data(), kSegmentMagic.size());
    for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<char>(kFormatVersion >> (8 * i));
    for (int i = 0; i < 8; ++i) header[12 + i] = static_cast<char>(number >> (8 * i));
    REPLAYDB_RETURN_IF_ERROR(file->Append(header));
  } else {
    REPLAYDB_RETURN_IF_ERROR(env->TruncateFile(path, offset));
    REPLAYDB_RETURN_IF_ERROR(env->NewWritableFile(path, /*truncate=*/false, &file));
  }
  REPLAYDB_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace

Status ListSegments(Env* env, const std::string& dir, std::vector<uint64_t>* segments) {
  segments->clear();
  std::vector<std::string> names;
  REPLAYDB_RETURN_IF_ERROR(env->GetChildren(dir, &names));
  for (const std::string& name : names) {
    uint64_t n = 0;
    if (ParseSegmentFileName(name, &n)) segments->push_back(n);
  }
  std::sort(segments->begin(), segments->end());
  return Status::OK();
}

Status RemoveSegmentsBefore(Env* env, const std::string& dir, uint64_t segment) {
  std::vector<uint64_t> segments;
  REPLAYDB_RETURN_IF_ERROR(ListSegments(env, dir, &segments));
  bool removed = false;
  for (uint64_t n : segments) {
    if (n >= segment) break;
    Status s = env->RemoveFile(dir + "/" + SegmentFileName(n));
    if (!s.ok() && s.code() != Status::Code::kNotFound) return s;
    removed = true;
  }
  if (removed) REPLAYDB_RETURN_IF_ERROR(env->SyncDir(dir));
  return Status::OK();
}

Status Replay(Env* env, const std::string& dir, uint64_t first_segment, RecoveryMode mode,
              const std::function<Status(RecordType, std::span<const std::byte>)>& fn,
              ReplayReport* report, bool first_segment_must_exist) {
  ReplayReport local;
  if (report == nullptr) report = &local;
  *report = ReplayReport{};

  std::vector<uint64_t> all;
  REPLAYDB_RETURN_IF_ERROR(ListSegments(env, dir, &all));
  std::vector<uint64_t> segments;
  for (uint64_t n : all) {
    if (n >= first_segment) segments.push_back(n);
  }
  auto path_of = [&dir](uint64_t n) { return dir + "/" + SegmentFileName(n); };

  // Drops segments[from..] (the first of them from `offset` on, unless
  // `missing` names a segment file that is not there, before them) durably,
  // and reports it.
  auto drop = [&](size_t from, uint64_t offset, const std::string& damaged_file,
                  std::string reason, bool missing) -> Status {
    uint64_t dropped = 0;
    for (size_t j = from; j < segments.size(); ++j) {
      uint64_t size = 0;
      REPLAYDB_RETURN_IF_ERROR(env->GetFileSize(path_of(segments[j]), &size));
      dropped += j == from && !missing ? (size > offset ? size - offset : 0) : size;
    }
    size_t first_removed = from;
    if (!missing && from < segments.size()) {
      REPLAYDB_RETURN_IF_ERROR(CutSegment(env, path_of(segments[from]), segments[from], offset));
      first_removed = from + 1;
    }
    for (size_t j = first_removed; j < segments.size(); ++j) {
      REPLAYDB_RETURN_IF_ERROR(env->RemoveFile(path_of(segments[j])));
    }
    if (from < segments.size()) REPLAYDB_RETURN_IF_ERROR(env->SyncDir(dir));
    report->dropped_file = damaged_file;
    report->dropped_offset = offset;
    report->dropped_bytes = dropped;
    report->dropped_reason = std::move(reason);
    return Status::OK();
  };

  // The log must continue from `first_segment` (the checkpoint's position):
  // a missing head is a gap before everything that follows.
  if (first_segment > 0 && (first_segment_must_exist || !segments.empty()) &&
      (segments.empty() || segments.front() != first_segment)) {
    const std::string missing = path_of(first_segment);
    const std::string reason =
        "WAL segment missing: the log continues from the last checkpoint in segment " +
        std::to_string(first_segment) +
        (segments.empty() ? std::string(", and no segment at or after it exists")
                          : ", and segments " + std::to_string(segments.front()) + " to " +
                                std::to_string(segments.back()) + " exist after the gap");
    if (mode == RecoveryMode::kAbsoluteConsistency ||
        (mode == RecoveryMode::kTolerateTornTail && !segments.empty())) {
      return Status::Corruption(
          missing + ": " + reason +
          (segments.empty() ? "" : " (recovery mode point_in_time opens as of the checkpoint)"));
    }
    // kPointInTime, or kTolerateTornTail with nothing after the gap: open
    // as of the checkpoint, reporting the gap.
    report->last_segment = 0;
    return drop(0, 0, missing, reason, /*missing=*/true);
  }
  // A gap between segments present.
  size_t end = segments.size();
  for (size_t i = 1; i < segments.size(); ++i) {
    if (segments[i] != segments[i - 1] + 1) {
      end = i;
      break;
    }
  }
  std::string gap_reason;
  if (end < segments.size()) {
    gap_reason = "WAL segment missing (segments " + std::to_string(segments[end - 1]) + " and " +
                 std::to_string(segments[end]) + " exist)";
    if (mode != RecoveryMode::kPointInTime) {
      return Status::Corruption(path_of(segments[end - 1] + 1) + ": " + gap_reason +
                                " (recovery mode point_in_time opens at the last record before it)");
    }
  }

  AlignedBuffer payload;
  for (size_t i = 0; i < end; ++i) {
    const uint64_t number = segments[i];
    const bool last = i + 1 == segments.size();
    const std::string path = path_of(number);
    uint64_t size = 0;
    REPLAYDB_RETURN_IF_ERROR(env->GetFileSize(path, &size));
    ++report->segments;
    Damage damage;
    REPLAYDB_RETURN_IF_ERROR(
        ReadSegment(env, path, number, size, fn, &payload, report, &damage));
    report->last_segment = number;
    if (!damage.found) continue;

    const std::string where = OffsetContext(path, damage.offset) + ": " + damage.reason;
    if (mode == RecoveryMode::kAbsoluteConsistency) return Status::Corruption(where);
    if (mode == RecoveryMode::kTolerateTornTail) {
      const bool torn = last && damage.maybe_torn &&
                        (damage.offset < kSegmentHeaderBytes ||
                         NothingValidFollows(env, path, damage.offset));
      if (!torn) {
        return Status::Corruption(where + (last ? " (valid records follow it)"
                                                : " (not in the last segment)"));
      }
    }
    // Drop the damaged record and everything after it.
    return drop(i, damage.offset, path, damage.reason, /*missing=*/false);
  }
  if (end < segments.size()) {
    // kPointInTime: replayed up to the gap; what follows it goes.
    return drop(end, 0, path_of(segments[end - 1] + 1), gap_reason, /*missing=*/true);
  }
  return Status::OK();
}

}  // namespace replaydb::wal
