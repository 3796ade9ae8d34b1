// The write-ahead log's on-disk constants, shared by LogWriter and LogReader.
// wal/FORMAT.md describes the format as a grammar; tests read a checked-in
// log (tests/data/wal_v1/) so the two cannot drift apart.
#ifndef REPLAYDB_WAL_FORMAT_H_
#define REPLAYDB_WAL_FORMAT_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace replaydb::wal {

// A segment file starts with kSegmentMagic, then the format version and the
// segment's number, both little-endian uint32/uint64 (20 bytes in all).
inline constexpr std::string_view kSegmentMagic{"RDBWAL\r\n", 8};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kSegmentHeaderBytes = 8 + 4 + 8;

// Every record: masked CRC32C (uint32), payload length (uint32), type
// (uint8), then the payload. The CRC covers the length, type and payload.
inline constexpr size_t kRecordHeaderBytes = 4 + 4 + 1;
// The largest payload a record may carry.
inline constexpr uint32_t kMaxPayloadBytes = uint32_t{1} << 30;

// Record types. A reader that meets a type it does not know skips the
// record when the type has kSafeToIgnore set, and reports Corruption
// otherwise. Values are never reused.
enum class RecordType : uint8_t {
  kCreateTable = 1,
  kDropTable = 2,
  kAppendSteps = 3,
  kEndTrajectory = 4,
  kUpdatePriorities = 5,
  kRemoveItems = 6,
  kRemoveTrajectory = 7,
  kClearTable = 8,
  // A table's spec changed (Table::SetRateLimiter): its whole spec after the
  // change, in CreateTable's payload. With kSafeToIgnore: a reader that does
  // not know it skips it (the catalog holds the change; a replica of an older
  // build keeps the spec it had).
  kTableSpec = 0x89,
  // A FIFO, LIFO or heap table's clock: items created after it (until the next)
  // are ordered from its time on, so that the shards of one table compare
  // their items' insertion orders (rdma/shards/, docs/sharding.md). With
  // kSafeToIgnore: a reader that does not know it numbers items 1, 2, ...
  // as before.
  kItemClock = 0x8a,
};
inline constexpr uint8_t kSafeToIgnore = 0x80;

// A place in the log: segment `segment`, byte `offset` of its file (the
// start of a record, or the end of the segment's records). Positions order
// as the log does.
struct LogPosition {
  uint64_t segment = 0;
  uint64_t offset = 0;
  auto operator<=>(const LogPosition&) const = default;
};

// The file name of segment `number` inside the WAL directory:
// 20 decimal digits and ".log", so names sort in segment order.
std::string SegmentFileName(uint64_t number);
// The number of a segment file name, or false if `name` is not one.
bool ParseSegmentFileName(std::string_view name, uint64_t* number);

// CRC masking, as LevelDB does it, so a CRC of bytes that embed CRCs stays
// strong: rotate right by 15 bits and add a constant.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

// The little-endian integers of headers.
inline uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
inline uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_FORMAT_H_
