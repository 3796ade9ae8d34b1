// Reading a log while it is written (wal/log_tail.h), as a primary ships
// records to its replicas: every record once, in order, across segments,
// with reads of any size; a segment that is gone and damaged bytes are
// named.
#include "wal/log_tail.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "wal/log_writer.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TempDir;
using ::replaydb::testing_util::TestSeed;
using ::testing::HasSubstr;

struct Rec {
  RecordType type;
  std::string bytes;
  bool operator==(const Rec&) const = default;
};

WalOptions Small() {
  WalOptions o;
  o.sync = WalSyncMode::kNone;
  o.segment_bytes = 64 << 10;
  return o;
}

Status Collect(const LogChunk& chunk, std::vector<Rec>* out) {
  return ForEachShippedRecord(
      chunk.records, "test", [&](RecordType t, std::span<const std::byte> p) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data()) % 16, 0u);
        out->push_back({t, std::string(reinterpret_cast<const char*>(p.data()), p.size())});
        return Status::OK();
      });
}

TEST(LogTailTest, ReadsOfALiveLogGiveEveryRecordOnceInOrder) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  Env* env = Env::Default();
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(env, dir.path(), Small(), 1));
  constexpr int kRecords = 400;
  std::vector<Rec> written;
  for (int i = 0; i < kRecords; ++i) {
    size_t n = rng() % 3000;
    if (rng() % 25 == 0) n = rng() % (150 << 10);  // past a segment
    Rec r{static_cast<RecordType>(1 + rng() % 8), std::string(n, '\0')};
    for (char& c : r.bytes) c = static_cast<char>(rng());
    written.push_back(std::move(r));
  }
  std::thread writer([&] {
    std::mt19937_64 pace(seed + 1);
    for (const Rec& r : written) {
      ASSERT_OK(log->Append(r.type, std::as_bytes(std::span(r.bytes))).status());
      if (pace() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(pace() % 300));
    }
  });
  std::vector<Rec> read;
  LogPosition at;  // the beginning
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int reads = 0;
  while (read.size() < written.size() && std::chrono::steady_clock::now() < until) {
    LogPosition end = log->end();
    LogChunk chunk;
    const size_t max_bytes = 1 + rng() % (200 << 10);
    ASSERT_OK(ReadLogRange(env, dir.path(), at, end, max_bytes, &chunk));
    ++reads;
    if (chunk.count == 0) {
      log->WaitPast(end, std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    } else if (chunk.count > 1) {
      EXPECT_LE(chunk.records.size(), max_bytes);  // at least one, else what fits
    }
    const size_t before = read.size();
    ASSERT_OK(Collect(chunk, &read));
    ASSERT_EQ(read.size() - before, chunk.count);
    EXPECT_GE(chunk.next, at);
    at = chunk.next;
  }
  writer.join();
  ASSERT_EQ(read.size(), written.size()) << "after " << reads << " reads";
  EXPECT_EQ(read, written);
  EXPECT_GT(at.segment, 3u);
  // At the end: nothing more, and the position stays.
  LogChunk last;
  ASSERT_OK(ReadLogRange(env, dir.path(), at, log->end(), 1 << 20, &last));
  EXPECT_EQ(last.count, 0u);
  EXPECT_EQ(last.next, at);
}

TEST(LogTailTest, AGoneSegmentAndDamagedRecordsAreNamed) {
  TempDir dir;
  Env* env = Env::Default();
  {
    LogChunk none;
    ASSERT_OK(ReadLogRange(env, dir.path(), {}, {}, 1 << 20, &none));
    EXPECT_EQ(none.count, 0u);
  }
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(env, dir.path(), Small(), 1));
  const std::string payload(1000, 'x');
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(log->Append(RecordType::kAppendSteps, std::as_bytes(std::span(payload))).status());
  }
  LogChunk chunk;
  ASSERT_OK(ReadLogRange(env, dir.path(), {}, log->end(), 1 << 20, &chunk));
  ASSERT_EQ(chunk.count, 3u);

  // Shipped bytes that do not check are refused, naming where.
  std::string damaged = chunk.records;
  damaged[damaged.size() - 10] ^= 1;
  std::vector<Rec> got;
  Status s = ForEachShippedRecord(damaged, "the log shipped by P", [&](RecordType t, auto p) {
    got.push_back({t, std::string(reinterpret_cast<const char*>(p.data()), p.size())});
    return Status::OK();
  });
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_THAT(s.message(),
              HasSubstr("the log shipped by P: offset " +
                        std::to_string(2 * (kRecordHeaderBytes + 1000)) + ": checksum mismatch"));
  EXPECT_EQ(got.size(), 2u) << "the records before the damage are passed on";
  s = ForEachShippedRecord(std::string_view(chunk.records).substr(0, chunk.records.size() - 1),
                           "the log shipped by P", [](RecordType, auto) { return Status::OK(); });
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_THAT(s.message(), HasSubstr("runs past the end"));

  // A segment a checkpoint removed.
  const LogPosition first = {1, kSegmentHeaderBytes};
  ASSERT_OK(log->Roll().status());
  ASSERT_OK(log->Append(RecordType::kAppendSteps, std::as_bytes(std::span(payload))).status());
  ASSERT_OK(log->DeleteSegmentsBefore(2));
  s = ReadLogRange(env, dir.path(), first, log->end(), 1 << 20, &chunk);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("no longer holds segment 1 (it starts at segment 2"));

  // A place past a segment's records (a log other than the one followed).
  s = ReadLogRange(env, dir.path(), {2, 1 << 20}, log->end(), 1 << 20, &chunk);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("segment 2, offset 1048576 is past the end of the log in"));
  ASSERT_OK(log->Roll().status());
  s = ReadLogRange(env, dir.path(), {2, 1 << 20}, log->end(), 1 << 20, &chunk);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(SegmentFileName(2) + ": offset 1048576 is past the end of "
                                                          "its records"));

  // Damage in a segment's file is named with the file and offset.
  const std::string path = dir.Sub(SegmentFileName(2));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(kSegmentHeaderBytes + kRecordHeaderBytes + 5));
    f.put('y');
  }
  s = ReadLogRange(env, dir.path(), {2, 0}, log->end(), 1 << 20, &chunk);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(path + ": offset " + std::to_string(kSegmentHeaderBytes) +
                                     ": checksum mismatch"));
}

}  // namespace
}  // namespace replaydb::wal
