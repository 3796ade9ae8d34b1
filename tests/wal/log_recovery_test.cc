// Replay's recovery modes against damaged logs: every truncation point,
// every single-bit flip, missing segments, unknown types, callback errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <cstring>
#include <vector>

#include "tests/test_util.h"
#include "tests/wal/wal_test_env.h"
#include "wal/log_reader.h"
#include "wal/log_writer.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TempDir;
using ::replaydb::testing_util::TestSeed;
using ::replaydb::testing_util::WalTestEnv;
using ::testing::HasSubstr;

constexpr RecoveryMode kModes[] = {RecoveryMode::kAbsoluteConsistency,
                                   RecoveryMode::kTolerateTornTail, RecoveryMode::kPointInTime};

struct Written {
  std::vector<std::vector<std::byte>> payloads;  // in order
  // Per segment (index 0 = segment 1): the file bytes and the records'
  // [start, end) offsets and global indices.
  struct Seg {
    std::string bytes;
    std::vector<std::pair<uint64_t, uint64_t>> records;
    size_t first_index = 0;
  };
  std::vector<Seg> segments;
};

// Writes `per_segment[i]` records of varied sizes into segment i + 1.
Written MakeLog(Env* env, const std::string& dir, const std::vector<int>& per_segment,
                uint64_t seed) {
  std::mt19937_64 rng(seed);
  Written w;
  WalOptions o;
  o.sync = WalSyncMode::kNone;
  auto log = LogWriter::Open(env, dir, o, 1);
  EXPECT_TRUE(log.ok());
  for (size_t s = 0; s < per_segment.size(); ++s) {
    if (s > 0) {
      EXPECT_TRUE((*log)->Roll().ok());
    }
    Written::Seg seg;
    seg.first_index = w.payloads.size();
    uint64_t offset = kSegmentHeaderBytes;
    for (int i = 0; i < per_segment[s]; ++i) {
      std::vector<std::byte> p(rng() % 40 + (i == 2 ? 0 : 1));
      if (i == 2) p.clear();  // one empty payload
      for (auto& b : p) b = static_cast<std::byte>(rng());
      EXPECT_TRUE((*log)->Append(RecordType::kAppendSteps, std::span<const std::byte>(p)).ok());
      seg.records.push_back({offset, offset + kRecordHeaderBytes + p.size()});
      offset += kRecordHeaderBytes + p.size();
      w.payloads.push_back(std::move(p));
    }
    w.segments.push_back(std::move(seg));
  }
  log->reset();
  for (size_t s = 0; s < per_segment.size(); ++s) {
    EXPECT_TRUE(env->ReadFileToString(dir + "/" + SegmentFileName(s + 1), &w.segments[s].bytes).ok());
  }
  return w;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

// Lays out `w` in `dir` with segment `s` replaced by `damaged`.
void Layout(const std::string& dir, const Written& w, size_t s, const std::string& damaged) {
  std::vector<std::string> names;
  (void)Env::Default()->GetChildren(dir, &names);
  for (auto& n : names) (void)Env::Default()->RemoveFile(dir + "/" + n);
  for (size_t i = 0; i < w.segments.size(); ++i) {
    WriteFile(dir + "/" + SegmentFileName(i + 1), i == s ? damaged : w.segments[i].bytes);
  }
}

struct Outcome {
  Status status;
  std::vector<std::vector<std::byte>> records;
  ReplayReport report;
};

Outcome ReplayAll(Env* env, const std::string& dir, RecoveryMode mode) {
  Outcome o;
  o.status = Replay(env, dir, 0, mode,
                    [&](RecordType, std::span<const std::byte> p) {
                      o.records.emplace_back(p.begin(), p.end());
                      return Status::OK();
                    },
                    &o.report);
  return o;
}

std::vector<std::vector<std::byte>> Prefix(const Written& w, size_t n) {
  return {w.payloads.begin(), w.payloads.begin() + static_cast<std::ptrdiff_t>(n)};
}

// After a recovery that dropped damage, a writer continuing at
// last_segment + 1 must leave a log that replays cleanly.
void ExpectCleanAfterRecovery(Env* env, const std::string& dir, const ReplayReport& report,
                              size_t kept) {
  WalOptions o;
  o.sync = WalSyncMode::kNone;
  {
    auto log = LogWriter::Open(env, dir, o, report.last_segment + 1);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    std::vector<std::byte> p(5, std::byte{0x5a});
    ASSERT_TRUE((*log)->Append(RecordType::kDropTable, std::span<const std::byte>(p)).ok());
  }
  Outcome again = ReplayAll(env, dir, RecoveryMode::kAbsoluteConsistency);
  ASSERT_TRUE(again.status.ok()) << again.status.ToString();
  EXPECT_EQ(again.records.size(), kept + 1);
}

// Every truncation point of every segment, in every mode.
void CheckEveryTruncation(const std::vector<int>& per_segment) {
  TempDir dir;
  WalTestEnv env;
  env.skip_syncs = true;
  const Written w = MakeLog(&env, dir.path(), per_segment, 42);
  const size_t nseg = w.segments.size();
  for (size_t s = 0; s < nseg; ++s) {
    const Written::Seg& seg = w.segments[s];
    const std::string path = dir.Sub(SegmentFileName(s + 1));
    uint64_t later_bytes = 0;
    for (size_t j = s + 1; j < nseg; ++j) later_bytes += w.segments[j].bytes.size();
    const size_t before = seg.first_index;
    const size_t after = w.payloads.size() - before - seg.records.size();
    for (uint64_t cut = 0; cut <= seg.bytes.size(); ++cut) {
      // The damage: where the cut lands.
      bool clean = cut >= kSegmentHeaderBytes;
      uint64_t damage = 0;
      size_t kept_in_seg = 0;
      for (const auto& [start, end] : seg.records) {
        if (end <= cut) {
          ++kept_in_seg;
        } else if (start < cut) {
          clean = false;
          damage = start;
        }
      }
      const bool last = s + 1 == nseg;
      for (RecoveryMode mode : kModes) {
        SCOPED_TRACE("segment " + std::to_string(s + 1) + " cut at " + std::to_string(cut) +
                     ", mode " + std::string(RecoveryModeName(mode)));
        Layout(dir.path(), w, s, seg.bytes.substr(0, cut));
        Outcome o = ReplayAll(&env, dir.path(), mode);
        if (clean) {
          ASSERT_TRUE(o.status.ok()) << o.status.ToString();
          // (A cut at a record boundary of an older segment is invisible.)
          std::vector<std::vector<std::byte>> want = Prefix(w, before + kept_in_seg);
          want.insert(want.end(), w.payloads.end() - static_cast<std::ptrdiff_t>(after), w.payloads.end());
          EXPECT_EQ(o.records, want);
          EXPECT_TRUE(o.report.dropped_file.empty());
          continue;
        }
        const bool drops = mode == RecoveryMode::kPointInTime ||
                           (mode == RecoveryMode::kTolerateTornTail && last);
        if (!drops) {
          ASSERT_EQ(o.status.code(), Status::Code::kCorruption) << o.status.ToString();
          EXPECT_THAT(o.status.message(), HasSubstr(path + ": offset " + std::to_string(damage) + ":"));
          continue;
        }
        ASSERT_TRUE(o.status.ok()) << o.status.ToString();
        EXPECT_EQ(o.records, Prefix(w, before + kept_in_seg));
        EXPECT_EQ(o.report.dropped_file, path);
        EXPECT_EQ(o.report.dropped_offset, damage);
        EXPECT_EQ(o.report.dropped_bytes, cut - damage + later_bytes);
        EXPECT_FALSE(o.report.dropped_reason.empty());
        EXPECT_EQ(o.report.last_segment, s + 1);
        uint64_t size = 0;
        ASSERT_OK(env.GetFileSize(path, &size));
        EXPECT_EQ(size, std::max<uint64_t>(damage, kSegmentHeaderBytes));
        std::vector<uint64_t> left;
        ASSERT_OK(ListSegments(&env, dir.path(), &left));
        EXPECT_EQ(left.size(), s + 1);
        ExpectCleanAfterRecovery(&env, dir.path(), o.report, before + kept_in_seg);
      }
    }
  }
}

TEST(LogRecoveryTest, EveryTruncationOfOneSegment) { CheckEveryTruncation({6}); }

TEST(LogRecoveryTest, EveryTruncationOfThreeSegments) { CheckEveryTruncation({3, 2, 3}); }

TEST(LogRecoveryTest, EverySingleBitFlip) {
  TempDir dir;
  WalTestEnv env;
  env.skip_syncs = true;
  const Written w = MakeLog(&env, dir.path(), {6}, 7);
  const Written::Seg& seg = w.segments[0];
  const std::string path = dir.Sub(SegmentFileName(1));
  const size_t n = seg.records.size();
  for (size_t byte = 0; byte < seg.bytes.size(); ++byte) {
    // Which record the flipped byte lies in (n: the segment header).
    size_t k = n;
    for (size_t r = 0; r < n; ++r) {
      if (byte >= seg.records[r].first && byte < seg.records[r].second) k = r;
    }
    const uint64_t damage = k == n ? 0 : seg.records[k].first;
    const size_t kept = k == n ? 0 : k;
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = seg.bytes;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      for (RecoveryMode mode : kModes) {
        SCOPED_TRACE("byte " + std::to_string(byte) + " bit " + std::to_string(bit) + ", mode " +
                     std::string(RecoveryModeName(mode)));
        Layout(dir.path(), w, 0, flipped);
        Outcome o = ReplayAll(&env, dir.path(), mode);
        const bool drops = mode == RecoveryMode::kPointInTime ||
                           (mode == RecoveryMode::kTolerateTornTail && k == n - 1);
        if (!drops) {
          ASSERT_EQ(o.status.code(), Status::Code::kCorruption) << o.status.ToString();
          EXPECT_THAT(o.status.message(), HasSubstr(path + ": offset " + std::to_string(damage) + ":"));
          continue;
        }
        ASSERT_TRUE(o.status.ok()) << o.status.ToString();
        EXPECT_EQ(o.records, Prefix(w, kept));
        EXPECT_EQ(o.report.dropped_file, path);
        EXPECT_EQ(o.report.dropped_offset, damage);
        EXPECT_EQ(o.report.dropped_bytes, seg.bytes.size() - damage);
      }
    }
  }
}

TEST(LogRecoveryTest, RandomGarbageNeverCrashes) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  WalTestEnv env;
  env.skip_syncs = true;
  const Written w = MakeLog(&env, dir.path(), {6}, 9);
  for (int i = 0; i < 300; ++i) {
    std::string bytes = w.segments[0].bytes;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = kSegmentHeaderBytes + rng() % (bytes.size() - kSegmentHeaderBytes);
      bytes[at] = static_cast<char>(rng());
    }
    for (RecoveryMode mode : kModes) {
      Layout(dir.path(), w, 0, bytes);
      Outcome o = ReplayAll(&env, dir.path(), mode);
      if (o.status.ok()) {
        ASSERT_LE(o.records.size(), w.payloads.size());
        EXPECT_EQ(o.records, Prefix(w, o.records.size()));
      } else {
        EXPECT_EQ(o.status.code(), Status::Code::kCorruption);
        EXPECT_THAT(o.status.message(), HasSubstr(SegmentFileName(1) + ": offset "));
      }
    }
  }
}

// A mapped segment ends in zeros until it is closed, and after a crash
// (FORMAT.md): zeros from a record boundary to the end are the end of the
// data in every mode, in any segment; zeros followed by data are damage.
TEST(LogRecoveryTest, ZeroFilledTailIsTheEndOfTheData) {
  TempDir dir;
  WalTestEnv env;
  env.skip_syncs = true;
  const Written w = MakeLog(&env, dir.path(), {4, 2}, 3);
  for (RecoveryMode mode : kModes) {
    SCOPED_TRACE(RecoveryModeName(mode));
    Layout(dir.path(), w, 0, w.segments[0].bytes + std::string(4096, '\0'));
    Outcome o = ReplayAll(&env, dir.path(), mode);
    ASSERT_OK(o.status);
    EXPECT_EQ(o.records, w.payloads);
    EXPECT_TRUE(o.report.dropped_file.empty());
    EXPECT_EQ(o.report.dropped_bytes, 0u);
  }
  const std::string path = dir.Sub(SegmentFileName(2));
  std::string tail(4096, '\0');
  tail[1000] = 1;
  Layout(dir.path(), w, 1, w.segments[1].bytes + tail);
  Outcome abs = ReplayAll(&env, dir.path(), RecoveryMode::kAbsoluteConsistency);
  EXPECT_EQ(abs.status.code(), Status::Code::kCorruption);
  EXPECT_THAT(abs.status.message(),
              HasSubstr(path + ": offset " + std::to_string(w.segments[1].bytes.size()) +
                        ": zero record header followed by non-zero bytes"));
  // Nothing that verifies follows, so in the last segment it is a torn tail.
  Outcome tol = ReplayAll(&env, dir.path(), RecoveryMode::kTolerateTornTail);
  ASSERT_OK(tol.status);
  EXPECT_EQ(tol.records, w.payloads);
  EXPECT_EQ(tol.report.dropped_offset, w.segments[1].bytes.size());
  EXPECT_EQ(tol.report.dropped_bytes, 4096u);
}

// A crash between preallocating a segment and writing its header leaves
// only zeros: an empty segment, torn when it is the last.
TEST(LogRecoveryTest, ZeroFilledLastSegmentIsTorn) {
  TempDir dir;
  WalTestEnv env;
  const Written w = MakeLog(&env, dir.path(), {2}, 3);
  WriteFile(dir.Sub(SegmentFileName(2)), std::string(8192, '\0'));
  Outcome abs = ReplayAll(&env, dir.path(), RecoveryMode::kAbsoluteConsistency);
  EXPECT_EQ(abs.status.code(), Status::Code::kCorruption);
  EXPECT_THAT(abs.status.message(),
              HasSubstr(SegmentFileName(2) + ": offset 0: segment header never written"));
  Outcome tol = ReplayAll(&env, dir.path(), RecoveryMode::kTolerateTornTail);
  ASSERT_OK(tol.status);
  EXPECT_EQ(tol.records, w.payloads);
  EXPECT_EQ(tol.report.dropped_bytes, 8192u);
}

TEST(LogRecoveryTest, MissingSegmentIsCorruptionNamingItExceptAtPointInTime) {
  TempDir dir;
  WalTestEnv env;
  const Written w = MakeLog(&env, dir.path(), {1, 1, 1, 1}, 3);
  ASSERT_OK(env.RemoveFile(dir.Sub(SegmentFileName(3))));
  for (RecoveryMode mode : {RecoveryMode::kTolerateTornTail, RecoveryMode::kAbsoluteConsistency}) {
    Outcome o = ReplayAll(&env, dir.path(), mode);
    EXPECT_EQ(o.status.code(), Status::Code::kCorruption);
    EXPECT_THAT(o.status.message(), HasSubstr(dir.Sub(SegmentFileName(3)) +
                                              ": WAL segment missing (segments 2 and 4 exist)"));
    EXPECT_TRUE(env.FileExists(dir.Sub(SegmentFileName(4)))) << "a failed replay changes nothing";
  }
  {
    // Point in time: the records before the gap; the rest dropped, durably.
    TempDir copy;
    std::filesystem::copy(dir.path(), copy.path(), std::filesystem::copy_options::recursive);
    Outcome pit = ReplayAll(&env, copy.path(), RecoveryMode::kPointInTime);
    ASSERT_OK(pit.status);
    EXPECT_EQ(pit.records, Prefix(w, 2));
    EXPECT_EQ(pit.report.last_segment, 2u);
    EXPECT_EQ(pit.report.dropped_file, copy.Sub(SegmentFileName(3)));
    EXPECT_THAT(pit.report.dropped_reason, HasSubstr("WAL segment missing"));
    EXPECT_GT(pit.report.dropped_bytes, 0u);
    EXPECT_FALSE(env.FileExists(copy.Sub(SegmentFileName(4))));
    Outcome again = ReplayAll(&env, copy.path(), RecoveryMode::kAbsoluteConsistency);
    ASSERT_OK(again.status);
    EXPECT_EQ(again.records, Prefix(w, 2));
  }
  // Starting past the gap is fine.
  Outcome o;
  o.status = Replay(&env, dir.path(), 4, RecoveryMode::kAbsoluteConsistency,
                    [](RecordType, std::span<const std::byte>) { return Status::OK(); }, &o.report);
  ASSERT_OK(o.status);
  EXPECT_EQ(o.report.records, 1u);
}

TEST(LogRecoveryTest, EmptyLastSegmentIsTornElsewhereCorruption) {
  TempDir dir;
  WalTestEnv env;
  const Written w = MakeLog(&env, dir.path(), {2}, 3);
  WriteFile(dir.Sub(SegmentFileName(2)), "");
  Outcome abs = ReplayAll(&env, dir.path(), RecoveryMode::kAbsoluteConsistency);
  EXPECT_EQ(abs.status.code(), Status::Code::kCorruption);
  EXPECT_THAT(abs.status.message(), HasSubstr(SegmentFileName(2) + ": offset 0: empty segment"));
  Outcome tol = ReplayAll(&env, dir.path(), RecoveryMode::kTolerateTornTail);
  ASSERT_OK(tol.status);
  EXPECT_EQ(tol.records.size(), 2u);
  EXPECT_EQ(tol.report.last_segment, 2u);
  // The empty file became a valid empty segment; a writer continues at 3.
  ExpectCleanAfterRecovery(&env, dir.path(), tol.report, 2);
  // Empty in the middle: not a torn tail.
  WriteFile(dir.Sub(SegmentFileName(2)), "");
  Outcome mid = ReplayAll(&env, dir.path(), RecoveryMode::kTolerateTornTail);
  EXPECT_EQ(mid.status.code(), Status::Code::kCorruption);
  EXPECT_THAT(mid.status.message(), HasSubstr(SegmentFileName(2) + ": offset 0:"));
}

TEST(LogRecoveryTest, UnknownTypes) {
  TempDir dir;
  WalTestEnv env;
  std::vector<std::byte> p(3, std::byte{1});
  {
    WalOptions o;
    o.sync = WalSyncMode::kNone;
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), o, 1));
    ASSERT_OK(log->Append(RecordType::kDropTable, std::span<const std::byte>(p)).status());
    ASSERT_OK(
        log->Append(static_cast<RecordType>(kSafeToIgnore | 0x3f), std::span<const std::byte>(p))
            .status());
    ASSERT_OK(log->Append(RecordType::kDropTable, std::span<const std::byte>(p)).status());
  }
  Outcome ok = ReplayAll(&env, dir.path(), RecoveryMode::kAbsoluteConsistency);
  ASSERT_OK(ok.status);
  EXPECT_EQ(ok.records.size(), 2u);
  EXPECT_EQ(ok.report.skipped_records, 1u);
  {
    WalOptions o;
    o.sync = WalSyncMode::kNone;
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), o, 2));
    ASSERT_OK(log->Append(static_cast<RecordType>(42), std::span<const std::byte>(p)).status());
  }
  const std::string path = dir.Sub(SegmentFileName(2));
  for (RecoveryMode mode : {RecoveryMode::kAbsoluteConsistency, RecoveryMode::kTolerateTornTail}) {
    Outcome bad = ReplayAll(&env, dir.path(), mode);
    EXPECT_EQ(bad.status.code(), Status::Code::kCorruption);
    EXPECT_THAT(bad.status.message(), HasSubstr(path + ": offset 20: unknown record type 42"));
  }
  Outcome pit = ReplayAll(&env, dir.path(), RecoveryMode::kPointInTime);
  ASSERT_OK(pit.status);
  EXPECT_EQ(pit.records.size(), 2u);
  EXPECT_EQ(pit.report.dropped_file, path);
}

TEST(LogRecoveryTest, CallbackErrorsNameFileAndOffset) {
  TempDir dir;
  WalTestEnv env;
  const Written w = MakeLog(&env, dir.path(), {3}, 3);
  int calls = 0;
  Status s = Replay(&env, dir.path(), 0, RecoveryMode::kAbsoluteConsistency,
                    [&](RecordType, std::span<const std::byte>) {
                      return ++calls == 2 ? Status::InvalidArgument("no such table 7") : Status::OK();
                    },
                    nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), dir.Sub(SegmentFileName(1)) + ": offset " +
                             std::to_string(w.segments[0].records[1].first) + ": no such table 7");
}

TEST(LogRecoveryTest, BadSegmentHeaders) {
  TempDir dir;
  WalTestEnv env;
  const Written w = MakeLog(&env, dir.path(), {1}, 3);
  // The header's number disagrees with the file name.
  ASSERT_OK(env.RemoveFile(dir.Sub(SegmentFileName(1))));
  WriteFile(dir.Sub(SegmentFileName(5)), w.segments[0].bytes);
  Outcome o = ReplayAll(&env, dir.path(), RecoveryMode::kTolerateTornTail);
  EXPECT_EQ(o.status.code(), Status::Code::kCorruption);
  EXPECT_THAT(o.status.message(), HasSubstr(SegmentFileName(5) + ": offset 0: segment header says segment 1"));
}

// The payload of record `i` of the log below: `size` bytes, a function of
// (seed, i), so that a replay can check each without the log kept in memory.
std::vector<std::byte> SeededPayload(uint64_t seed, size_t i, size_t size) {
  std::vector<std::byte> p(size);
  std::mt19937_64 rng(seed ^ (i * 0x9e3779b97f4a7c15ull));
  for (size_t k = 0; k < size; k += 8) {
    const uint64_t v = rng();
    std::memcpy(p.data() + k, &v, std::min<size_t>(8, size - k));
  }
  return p;
}

// Thousands of small records and a few larger than the reader's 64 KiB
// buffer (read straight into the payload), over three segments: every record
// arrives once, whole and in order, and the report counts them; an error
// from the callback ends the replay at its record, naming it.
TEST(LogRecoveryTest, LargeAndSmallRecordsArriveWholeAndInOrder) {
  TempDir dir;
  WalTestEnv env;
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  std::vector<size_t> sizes;
  for (int i = 0; i < 9000; ++i) sizes.push_back(rng() % 200);
  for (size_t at : {size_t{100}, size_t{5000}, size_t{8000}}) {
    sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(at), (size_t{3} << 20) + rng() % 4096);
  }
  sizes.insert(sizes.begin() + 7000, (size_t{64} << 10) + 3);
  {
    WalOptions o;
    o.sync = WalSyncMode::kNone;
    auto log = LogWriter::Open(&env, dir.path(), o, 1);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (i == 4000 || i == 8500) {
        ASSERT_TRUE((*log)->Roll().ok());
      }
      const std::vector<std::byte> p = SeededPayload(seed, i, sizes[i]);
      ASSERT_TRUE((*log)->Append(RecordType::kAppendSteps, std::span<const std::byte>(p)).ok());
    }
  }
  uint64_t bytes = 0;
  for (size_t size : sizes) bytes += kRecordHeaderBytes + size;

  size_t next = 0;
  size_t wrong = 0;
  ReplayReport report;
  Status s = Replay(&env, dir.path(), 0, RecoveryMode::kAbsoluteConsistency,
                    [&](RecordType, std::span<const std::byte> p) {
                      const size_t i = next++;
                      if (i >= sizes.size() || p.size() != sizes[i] ||
                          std::vector<std::byte>(p.begin(), p.end()) != SeededPayload(seed, i, sizes[i])) {
                        ++wrong;
                      }
                      return Status::OK();
                    },
                    &report);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(next, sizes.size());
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(report.records, sizes.size());
  EXPECT_EQ(report.bytes, bytes);
  EXPECT_EQ(report.segments, 3u);
  EXPECT_EQ(report.last_segment, 3u);

  // The callback fails on a record past the first large one: the replay
  // ends there, naming it.
  const size_t failing = 1234;
  uint64_t offset = kSegmentHeaderBytes;
  for (size_t i = 0; i < failing; ++i) offset += kRecordHeaderBytes + sizes[i];
  next = 0;
  s = Replay(&env, dir.path(), 0, RecoveryMode::kAbsoluteConsistency,
             [&](RecordType, std::span<const std::byte>) {
               return next++ == failing ? Status::InvalidArgument("refused") : Status::OK();
             },
             &report);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), dir.Sub(SegmentFileName(1)) + ": offset " + std::to_string(offset) + ": refused");
  EXPECT_EQ(next, failing + 1);
  EXPECT_EQ(report.records, failing);
}

}  // namespace
}  // namespace replaydb::wal
