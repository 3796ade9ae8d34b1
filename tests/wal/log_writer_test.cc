// LogWriter: framing round trips, segments, sync modes, group commit and
// failure handling.
#include "wal/log_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"
#include "tests/wal/wal_test_env.h"
#include "wal/log_reader.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TempDir;
using ::replaydb::testing_util::TestSeed;
using ::replaydb::testing_util::WalTestEnv;
using ::testing::HasSubstr;

struct Rec {
  RecordType type;
  std::vector<std::byte> bytes;
  bool operator==(const Rec&) const = default;
};

std::span<const std::byte> Span(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

// Every record of `dir` from `first`, in order; the replay must succeed.
std::vector<Rec> ReadAll(Env* env, const std::string& dir, uint64_t first = 0,
                         RecoveryMode mode = RecoveryMode::kAbsoluteConsistency,
                         ReplayReport* report = nullptr) {
  std::vector<Rec> out;
  Status s = Replay(env, dir, first, mode,
                    [&](RecordType t, std::span<const std::byte> p) {
                      EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data()) % 16, 0u);
                      out.push_back({t, std::vector<std::byte>(p.begin(), p.end())});
                      return Status::OK();
                    },
                    report);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

std::vector<std::byte> Bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> b(n);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  return b;
}

WalOptions Options(WalSyncMode mode, uint64_t segment_bytes = uint64_t{64} << 20) {
  WalOptions o;
  o.sync = mode;
  o.segment_bytes = segment_bytes;
  return o;
}

TEST(LogWriterTest, RandomRecordsRoundTripAcrossSegments) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  Env* env = Env::Default();
  const uint64_t segment_bytes = 64 << 10;
  std::vector<Rec> written;
  {
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(env, dir.path(), Options(WalSyncMode::kNone, segment_bytes), 1));
    for (int i = 0; i < 300; ++i) {
      size_t n = rng() % 2000;
      if (rng() % 20 == 0) n = rng() % (200 << 10);  // some past a segment and the read buffer
      if (rng() % 30 == 0) n = 0;
      Rec r{static_cast<RecordType>(1 + rng() % 7), Bytes(rng, n)};
      // Three ways to give a payload: whole, in pieces, or filled in place.
      Result<uint64_t> appended = uint64_t{0};
      switch (rng() % 3) {
        case 0:
          appended = log->Append(r.type, Span(r.bytes));
          break;
        case 1: {
          std::vector<std::span<const std::byte>> pieces;
          size_t at = 0;
          for (int k = static_cast<int>(rng() % 12); k > 0 && at < n; --k) {
            const size_t len = rng() % 3 == 0 ? 0 : rng() % (n - at + 1);
            pieces.push_back(Span(r.bytes).subspan(at, len));
            at += len;
          }
          pieces.push_back(Span(r.bytes).subspan(at));
          appended = log->AppendV(r.type, pieces);
          break;
        }
        default:
          appended = log->Append(r.type, n, [&r](std::byte* out) {
            std::memcpy(out, r.bytes.data(), r.bytes.size());
          });
      }
      ASSERT_OK_AND_ASSIGN(uint64_t seq, std::move(appended));
      ASSERT_EQ(seq, static_cast<uint64_t>(i + 1));
      written.push_back(std::move(r));
    }
    EXPECT_EQ(log->stats().records, 300u);
    EXPECT_GT(log->stats().segment, 3u);
  }
  std::vector<uint64_t> segments;
  ASSERT_OK(ListSegments(env, dir.path(), &segments));
  ASSERT_GT(segments.size(), 3u);
  for (size_t i = 0; i < segments.size(); ++i) EXPECT_EQ(segments[i], i + 1);
  // Records never span segments: a segment past segment_bytes holds one record.
  for (uint64_t n : segments) {
    uint64_t size = 0;
    ASSERT_OK(env->GetFileSize(dir.Sub(SegmentFileName(n)), &size));
    if (size > segment_bytes) {
      EXPECT_EQ(ReadAll(env, dir.path(), n).size() - ReadAll(env, dir.path(), n + 1).size(), 1u)
          << "segment " << n << " of " << size << " bytes";
    }
  }
  ReplayReport report;
  EXPECT_EQ(ReadAll(env, dir.path(), 0, RecoveryMode::kAbsoluteConsistency, &report), written);
  EXPECT_EQ(report.records, 300u);
  EXPECT_EQ(report.segments, segments.size());
  EXPECT_EQ(report.last_segment, segments.back());
  EXPECT_TRUE(report.dropped_file.empty());
}

TEST(LogWriterTest, FillCallbackWritesPayloadInPlace) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(Env::Default(), dir.path(), Options(WalSyncMode::kNone), 7));
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, 5, [](std::byte* out) {
    std::memcpy(out, "hello", 5);
  }));
  EXPECT_EQ(seq, 1u);
  EXPECT_FALSE(log->Append(RecordType::kDropTable, size_t{kMaxPayloadBytes} + 1, [](std::byte*) {}).ok());
  log.reset();
  auto recs = ReadAll(Env::Default(), dir.path());
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(recs[0].bytes.data()), 5), "hello");
}

TEST(LogWriterTest, OpenTakesOverAHeaderOnlySegmentButNeverOneWithRecords) {
  TempDir dir;
  // Closed with nothing logged: just its header, taken over by the next Open.
  { ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(Env::Default(), dir.path(), Options(WalSyncMode::kNone), 3)); }
  std::vector<std::byte> p(10, std::byte{7});
  {
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(Env::Default(), dir.path(), Options(WalSyncMode::kNone), 3));
    ASSERT_OK(log->Append(RecordType::kRemoveItems, Span(p)).status());
    // Roll(only_if_records) moves on only from a segment holding records.
    ASSERT_OK_AND_ASSIGN(uint64_t next, log->Roll(/*only_if_records=*/true));
    EXPECT_EQ(next, 4u);
    ASSERT_OK_AND_ASSIGN(uint64_t same, log->Roll(/*only_if_records=*/true));
    EXPECT_EQ(same, 4u);
  }
  std::vector<RecordType> types;
  ASSERT_OK(Replay(Env::Default(), dir.path(), 3, RecoveryMode::kAbsoluteConsistency,
                   [&](RecordType t, std::span<const std::byte>) {
                     types.push_back(t);
                     return Status::OK();
                   },
                   nullptr));
  EXPECT_EQ(types, std::vector<RecordType>{RecordType::kRemoveItems});
  auto again = LogWriter::Open(Env::Default(), dir.path(), Options(WalSyncMode::kNone), 3);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr(SegmentFileName(3)));
}

TEST(LogWriterTest, RollAndDeleteSegmentsBefore) {
  TempDir dir;
  Env* env = Env::Default();
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(env, dir.path(), Options(WalSyncMode::kBatch), 1));
  std::vector<std::byte> p(10, std::byte{1});
  for (int i = 0; i < 3; ++i) ASSERT_OK(log->Append(RecordType::kRemoveItems, Span(p)).status());
  EXPECT_EQ(log->stats().records_since_roll, 3u);
  ASSERT_OK_AND_ASSIGN(uint64_t second, log->Roll());
  EXPECT_EQ(second, 2u);
  EXPECT_EQ(log->stats().segment, 2u);
  EXPECT_EQ(log->stats().records_since_roll, 0u);
  EXPECT_EQ(log->stats().bytes_since_roll, 0u);
  EXPECT_GE(log->stats().syncs, 1u);  // Roll synced segment 1
  for (int i = 0; i < 2; ++i) ASSERT_OK(log->Append(RecordType::kDropTable, Span(p)).status());
  ASSERT_OK_AND_ASSIGN(uint64_t third, log->Roll());
  EXPECT_EQ(third, 3u);
  ASSERT_OK(log->Append(RecordType::kEndTrajectory, Span(p)).status());
  EXPECT_EQ(ReadAll(env, dir.path(), 2).size(), 3u);
  EXPECT_EQ(ReadAll(env, dir.path(), 3).size(), 1u);
  ASSERT_OK(log->DeleteSegmentsBefore(3));
  std::vector<uint64_t> segments;
  ASSERT_OK(ListSegments(env, dir.path(), &segments));
  EXPECT_EQ(segments, std::vector<uint64_t>{3});
  // Never the current segment.
  ASSERT_OK(log->DeleteSegmentsBefore(100));
  ASSERT_OK(ListSegments(env, dir.path(), &segments));
  EXPECT_EQ(segments, std::vector<uint64_t>{3});
  ASSERT_OK(log->Append(RecordType::kEndTrajectory, Span(p)).status());
  log.reset();
  auto recs = ReadAll(env, dir.path());
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].type, RecordType::kEndTrajectory);
}

TEST(LogWriterTest, ConcurrentAppendersGroupCommitWithAlways) {
  TempDir dir;
  WalTestEnv env;
  env.sync_delay_us = 300;  // so that syncs overlap appends, as on a real disk
  constexpr int kThreads = 8;
  constexpr int kPerThread = 60;
  {
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kAlways, 2 << 10), 1));
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          uint32_t v[2] = {static_cast<uint32_t>(t), static_cast<uint32_t>(i)};
          auto seq = log->Append(RecordType::kAppendSteps, sizeof(v),
                                 [&](std::byte* out) { std::memcpy(out, v, sizeof(v)); });
          if (!seq.ok() || !log->Sync(*seq, /*wait=*/true).ok()) ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    const LogWriterStats st = log->stats();
    EXPECT_EQ(st.records, uint64_t{kThreads * kPerThread});
    EXPECT_GT(st.segment, 1u);  // the segment switch raced with syncs too
    EXPECT_LT(st.syncs, st.records) << "group commit did not group any fsyncs";
    EXPECT_EQ(static_cast<uint64_t>(env.file_syncs.load()), st.syncs);
  }
  std::vector<int> next(kThreads, 0);
  auto recs = ReadAll(&env, dir.path());
  ASSERT_EQ(recs.size(), size_t{kThreads * kPerThread});
  for (const Rec& r : recs) {
    ASSERT_EQ(r.bytes.size(), 8u);
    uint32_t v[2];
    std::memcpy(v, r.bytes.data(), 8);
    ASSERT_LT(v[0], uint32_t{kThreads});
    EXPECT_EQ(v[1], static_cast<uint32_t>(next[v[0]])) << "thread " << v[0];
    ++next[v[0]];
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
}

TEST(LogWriterTest, BatchSyncWaitsForTheBackgroundSync) {
  TempDir dir;
  WalTestEnv env;
  WalOptions o = Options(WalSyncMode::kBatch);
  o.batch_interval = std::chrono::milliseconds(20);
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), o, 1));
  std::vector<std::byte> p(100, std::byte{7});
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, Span(p)));
  EXPECT_OK(log->Sync(seq, /*wait=*/false));  // returns at once
  ASSERT_OK(log->Sync(seq, /*wait=*/true));
  EXPECT_GE(env.file_syncs.load(), 1);
  EXPECT_GE(log->stats().syncs, 1u);
  // Without anyone waiting, the background thread syncs within the interval.
  const int before = env.file_syncs.load();
  ASSERT_OK(log->Append(RecordType::kDropTable, Span(p)).status());
  // (Bounded far past the interval: a loaded machine's fsync can stall.)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (env.file_syncs.load() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GT(env.file_syncs.load(), before) << "no background sync";
}

TEST(LogWriterTest, BatchBytesTriggerAnEarlySync) {
  TempDir dir;
  WalTestEnv env;
  WalOptions o = Options(WalSyncMode::kBatch);
  o.batch_interval = std::chrono::hours(1);
  o.batch_bytes = 1000;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), o, 1));
  std::vector<std::byte> p(600, std::byte{7});
  ASSERT_OK(log->Append(RecordType::kDropTable, Span(p)).status());
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, Span(p)));
  ASSERT_OK(log->Sync(seq, /*wait=*/true));  // would take an hour without the byte trigger
  EXPECT_GE(env.file_syncs.load(), 1);
}

TEST(LogWriterTest, NoneNeverSyncsUnlessForced) {
  TempDir dir;
  WalTestEnv env;
  std::vector<std::byte> p(300, std::byte{3});
  {
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kNone, 1024), 1));
    uint64_t seq = 0;
    for (int i = 0; i < 20; ++i) {
      ASSERT_OK_AND_ASSIGN(seq, log->Append(RecordType::kDropTable, Span(p)));
      ASSERT_OK(log->Sync(seq, /*wait=*/true));
    }
    ASSERT_OK(log->Roll().status());
    EXPECT_EQ(env.file_syncs.load(), 0);
    EXPECT_EQ(log->stats().syncs, 0u);
    EXPECT_GT(log->stats().segment, 3u);
  }
  EXPECT_EQ(env.file_syncs.load(), 0);
  EXPECT_EQ(ReadAll(&env, dir.path()).size(), 20u);
}

TEST(LogWriterTest, ForcedSyncInNoneAlsoSyncsClosedSegments) {
  TempDir dir;
  WalTestEnv env;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kNone), 1));
  std::vector<std::byte> p(10, std::byte{3});
  ASSERT_OK(log->Append(RecordType::kDropTable, Span(p)).status());
  ASSERT_OK(log->Roll().status());
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, Span(p)));
  ASSERT_OK(log->Sync(seq, /*wait=*/false, /*force=*/true));
  EXPECT_EQ(env.file_syncs.load(), 2);  // segment 1 (reopened) and segment 2
  ASSERT_OK(log->Sync(seq, false, true));
  EXPECT_EQ(env.file_syncs.load(), 2);  // already durable
}

TEST(LogWriterTest, FailedWriteIsCutBackAndTheWriterStaysUsable) {
  TempDir dir;
  WalTestEnv env;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kAlways), 1));
  std::vector<std::byte> p(100, std::byte{9});
  ASSERT_OK(log->Append(RecordType::kDropTable, Span(p)).status());
  const std::string path = dir.Sub(SegmentFileName(1));
  // The data's end (the mapped file is longer on disk, zero-filled).
  const uint64_t before = kSegmentHeaderBytes + kRecordHeaderBytes + p.size();
  env.fail_appends = 1;
  auto failed = log->Append(RecordType::kDropTable, Span(p));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kIOError);
  EXPECT_THAT(failed.status().message(), HasSubstr(path));
  EXPECT_THAT(failed.status().message(), HasSubstr("offset " + std::to_string(before)));
  EXPECT_THAT(failed.status().message(), HasSubstr("injected write failure"));
  // The half-written record was cut back: nothing but zeros after `before`.
  std::string bytes;
  ASSERT_OK(env.ReadFileToString(path, &bytes));
  ASSERT_GE(bytes.size(), before);
  EXPECT_EQ(bytes.find_first_not_of('\0', before), std::string::npos);
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kEndTrajectory, Span(p)));
  EXPECT_EQ(seq, 2u);
  ASSERT_OK(log->Sync(seq, true));
  log.reset();
  ReplayReport report;
  auto recs = ReadAll(&env, dir.path(), 0, RecoveryMode::kAbsoluteConsistency, &report);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].type, RecordType::kEndTrajectory);
  EXPECT_TRUE(report.dropped_file.empty());
}

TEST(LogWriterTest, FailedWriteAndFailedCutBackMakeTheWriterUnusable) {
  TempDir dir;
  WalTestEnv env;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kNone), 1));
  std::vector<std::byte> p(100, std::byte{9});
  env.fail_appends = 1;
  env.fail_truncates = 1;
  auto failed = log->Append(RecordType::kDropTable, Span(p));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("must be reopened"));
  EXPECT_THAT(failed.status().message(), HasSubstr("injected truncate failure"));
  auto later = log->Append(RecordType::kDropTable, Span(p));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.status(), failed.status());
}

TEST(LogWriterTest, FailedFsyncIsSticky) {
  TempDir dir;
  WalTestEnv env;
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(WalSyncMode::kAlways), 1));
  std::vector<std::byte> p(100, std::byte{9});
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, Span(p)));
  env.fail_syncs = 1;
  Status s = log->Sync(seq, true);
  ASSERT_EQ(s.code(), Status::Code::kIOError);
  for (const Status& later : {log->Append(RecordType::kDropTable, Span(p)).status(),
                              log->Sync(seq, true), log->Sync(seq, false, true),
                              log->Roll().status()}) {
    EXPECT_EQ(later.code(), Status::Code::kIOError);
    EXPECT_THAT(later.message(), HasSubstr("unusable after the earlier fsync failure"));
    EXPECT_THAT(later.message(), HasSubstr("must be reopened"));
    EXPECT_THAT(later.message(), HasSubstr("injected fsync failure"));
    EXPECT_THAT(later.message(), HasSubstr(SegmentFileName(1)));
  }
}

TEST(LogWriterTest, FailedBackgroundFsyncIsSticky) {
  TempDir dir;
  WalTestEnv env;
  WalOptions o = Options(WalSyncMode::kBatch);
  o.batch_interval = std::chrono::milliseconds(5);
  ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), o, 1));
  std::vector<std::byte> p(100, std::byte{9});
  env.fail_syncs = 1;
  ASSERT_OK_AND_ASSIGN(uint64_t seq, log->Append(RecordType::kDropTable, Span(p)));
  Status s = log->Sync(seq, /*wait=*/true);
  EXPECT_THAT(s.message(), HasSubstr("unusable after the earlier fsync failure"));
  EXPECT_FALSE(log->Append(RecordType::kDropTable, Span(p)).ok());
}

// A full disk when the next segment is due (Roll, or an append past
// segment_bytes) fails that call, naming the segment, and changes nothing:
// appends go on into the current segment, and once there is room the switch
// works. Nothing appended before or after is lost.
TEST(LogWriterTest, SegmentThatCannotBeCreatedLeavesTheWriterUsable) {
  for (WalSyncMode mode : {WalSyncMode::kNone, WalSyncMode::kBatch, WalSyncMode::kAlways}) {
    SCOPED_TRACE(static_cast<int>(mode));
    TempDir dir;
    testing_util::FaultInjectionEnv env;
    ASSERT_OK_AND_ASSIGN(auto log, LogWriter::Open(&env, dir.path(), Options(mode, 1000), 1));
    std::vector<Rec> written;
    std::mt19937_64 rng(TestSeed());
    const auto append = [&]() -> Status {
      Rec r{RecordType::kDropTable, Bytes(rng, 300)};
      Result<uint64_t> seq = log->Append(r.type, Span(r.bytes));
      if (seq.ok()) written.push_back(std::move(r));
      return seq.status();
    };
    ASSERT_OK(append());
    env.SetSpaceLimit(env.bytes_written());
    Result<uint64_t> rolled = log->Roll();
    ASSERT_FALSE(rolled.ok());
    EXPECT_EQ(rolled.status().code(), Status::Code::kIOError);
    EXPECT_THAT(rolled.status().message(),
                HasSubstr("creating WAL segment " + dir.Sub(SegmentFileName(2))));
    EXPECT_THAT(rolled.status().message(), HasSubstr("No space left on device"));
    EXPECT_EQ(log->stats().segment, 1u);
    env.ClearSpaceLimit();
    ASSERT_OK(append());  // not sticky: still segment 1
    ASSERT_OK(append());
    EXPECT_EQ(log->stats().segment, 1u);
    // The next append needs segment 2 (segment_bytes): the disk is full.
    env.SetSpaceLimit(env.bytes_written());
    const Status full = append();
    EXPECT_EQ(full.code(), Status::Code::kIOError);
    EXPECT_THAT(full.message(), HasSubstr("creating WAL segment " + dir.Sub(SegmentFileName(2))));
    env.ClearSpaceLimit();
    ASSERT_OK(append());
    EXPECT_EQ(log->stats().segment, 2u);
    ASSERT_OK_AND_ASSIGN(uint64_t third, log->Roll());
    EXPECT_EQ(third, 3u);
    ASSERT_OK(append());
    log.reset();
    EXPECT_EQ(ReadAll(&env, dir.path()), written);
  }
}

}  // namespace
}  // namespace replaydb::wal

namespace replaydb::wal {
namespace {

// Seal (a fenced primary's log): appends after it fail with its reason,
// what came before stays and ends where Seal said; rolls and syncs go on.
TEST(LogWriterTest, ASealedLogTakesNoMoreRecordsAndEndsWhereSealSaid) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ASSERT_OK_AND_ASSIGN(
      auto log, LogWriter::Open(Env::Default(), dir.path(), Options(WalSyncMode::kBatch), 1));
  std::vector<Rec> want;
  const int n = 1 + static_cast<int>(rng() % 20);
  for (int i = 0; i < n; ++i) {
    want.push_back({RecordType::kAppendSteps, Bytes(rng, 1 + rng() % 300)});
    ASSERT_OK(log->Append(want.back().type, Span(want.back().bytes)).status());
  }
  const LogPosition end = log->Seal(Status::FailedPrecondition("fenced by epoch 2"));
  EXPECT_EQ(end, log->end());
  const std::vector<std::byte> more = Bytes(rng, 10);
  Result<uint64_t> refused = log->Append(RecordType::kAppendSteps, Span(more));
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), "fenced by epoch 2");
  // A second seal keeps the first reason.
  EXPECT_EQ(log->Seal(Status::FailedPrecondition("again")), end);
  EXPECT_EQ(log->Append(RecordType::kAppendSteps, Span(more)).status().message(),
            "fenced by epoch 2");
  EXPECT_OK(log->Sync(~uint64_t{0}, /*wait=*/true, /*force=*/true));
  ASSERT_OK_AND_ASSIGN(const uint64_t next, log->Roll());
  EXPECT_EQ(next, end.segment + 1);
  log.reset();
  EXPECT_EQ(ReadAll(Env::Default(), dir.path()), want);
}

}  // namespace
}  // namespace replaydb::wal
