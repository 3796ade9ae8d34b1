// A primary's view of its replicas (wal/replica_set.h): a waiter for
// replicated(k) is answered once k replicas read past its position, fails
// when too few stay in sync or its deadline passes, and is cancelled when
// the set closes; a replica lagging more than max_lag holds `leader`
// acknowledgments until it catches up; held segments survive in REPLICAS;
// a new replica's snapshot holds its segment without counting as in sync.
#include "wal/replica_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "tests/test_util.h"

namespace replaydb::wal {
namespace {

using ::replaydb::testing_util::TempDir;
using ::replaydb::testing_util::TestSeed;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = ReplicaSet::Clock;

// A waiter's outcome, once it comes.
struct Outcome {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  std::function<void(Status)> done() {
    return [this](Status s) { promise.set_value(std::move(s)); };
  }
  bool ready() { return future.wait_for(0s) == std::future_status::ready; }
  Status get() {
    return future.wait_for(10s) == std::future_status::ready
               ? future.get()
               : Status::Internal("no outcome within 10 s");
  }
};

TEST(ReplicaSetTest, AReplicatedWaitIsAnsweredOnceKReplicasReadPastIt) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ReplicaSet set(Env::Default(), dir.path());
  const LogPosition end{1, 1000 + rng() % 1000};
  set.Read("a", {1, 0}, end, 1);
  set.Read("b", {1, 0}, end, 1);
  Outcome two;
  set.WhenReplicated(end, 2, Clock::time_point::max(), "t", two.done());
  EXPECT_FALSE(two.ready());
  set.Read("a", {1, end.offset - 1}, end, 1);  // one byte short
  EXPECT_FALSE(two.ready());
  set.Read("a", end, end, 1);
  EXPECT_FALSE(two.ready());  // one replica of two
  set.Read("b", {1, end.offset + rng() % 100}, {1, end.offset + 100}, 1);
  ASSERT_TRUE(two.ready());
  EXPECT_OK(two.get());
  // Already there: answered at once.
  Outcome now;
  set.WhenReplicated({1, 10}, 1, Clock::time_point::max(), "t", now.done());
  ASSERT_TRUE(now.ready());
  EXPECT_OK(now.get());
  const auto progress = set.Progress();
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress[0].name, "a");
  EXPECT_EQ(progress[0].applied_offset, end.offset);
  EXPECT_TRUE(progress[0].in_sync);
  EXPECT_LT(progress[0].lag_seconds, 1.0);
}

TEST(ReplicaSetTest, WithTooFewReplicasInSyncAWriteIsRefusedNamingThem) {
  TempDir dir;
  ReplicaSet set(Env::Default(), dir.path());
  Status s = set.CheckInSync(1, "experience");
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(s.message(),
            "table 'experience': acks replicated(1) needs 1 in-sync replica; 0 are in sync "
            "(none): nothing was appended; try again once replicas follow");
  set.Read("host:/r1", {1, 0}, {1, 0}, 1);
  EXPECT_OK(set.CheckInSync(1, "experience"));
  s = set.CheckInSync(2, "experience");
  EXPECT_EQ(s.message(),
            "table 'experience': acks replicated(2) needs 2 in-sync replicas; 1 is in sync "
            "(host:/r1): nothing was appended; try again once replicas follow");
}

TEST(ReplicaSetTest, AWaitFailsOnceItsReplicasStopReadingOrItsDeadlinePasses) {
  TempDir dir;
  ReplicaSet set(Env::Default(), dir.path());
  set.Read("r", {1, 0}, {1, 500}, 1);
  // The deadline first.
  Outcome soon;
  const auto start = Clock::now();
  set.WhenReplicated({1, 500}, 1, start + 100ms, "t", soon.done());
  Status s = soon.get();
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("table 't': an append waiting for replicated(1) (segment 1, "
                                     "offset 500) timed out with 0 replicas applying it; it is "
                                     "stored on the primary"));
  EXPECT_GE(Clock::now() - start, 100ms);
  // Then the replica going silent: out of sync after kLiveTime.
  Outcome never;
  set.WhenReplicated({1, 500}, 1, Clock::time_point::max(), "t", never.done());
  s = never.get();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("has 0 replicas with it and 0 more in sync (none): it is "
                                     "stored on the primary, not acknowledged by 1"));
  EXPECT_GE(Clock::now() - start, ReplicaSet::kLiveTime);
}

TEST(ReplicaSetTest, ALaggingReplicaHoldsAcknowledgmentsUntilItCatchesUp) {
  TempDir dir;
  ReplicaSet set(Env::Default(), dir.path());
  EXPECT_FALSE(set.Lagging(1ms));  // no replica
  set.Read("slow", {1, 0}, {1, 4000}, 1);
  std::this_thread::sleep_for(60ms);
  // Behind where the log ended at its last read: not caught up since.
  set.Read("slow", {1, 1000}, {1, 8000}, 1);
  EXPECT_TRUE(set.Lagging(50ms));
  EXPECT_FALSE(set.Lagging(10s));
  Outcome held;
  set.WhenCaughtUp(50ms, Clock::time_point::max(), "t", held.done());
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(held.ready());
  set.Read("slow", {1, 8000}, {1, 8000}, 1);  // at the end
  ASSERT_TRUE(held.ready());
  EXPECT_OK(held.get());
  EXPECT_FALSE(set.Lagging(50ms));
  // A lagging replica's wait times out naming it.
  set.Read("slow", {1, 8000}, {1, 9000}, 1);
  std::this_thread::sleep_for(60ms);
  set.Read("slow", {1, 8500}, {1, 9900}, 1);
  Outcome late;
  set.WhenCaughtUp(50ms, Clock::now() + 50ms, "t", late.done());
  const Status s = late.get();
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("table 't': timed out waiting for replica slow, "));
  EXPECT_THAT(s.message(), HasSubstr(" behind the primary (max_lag_ms 50)"));
}

TEST(ReplicaSetTest, ClosingCancelsWaitersAndHeldSegmentsSurviveInTheFile) {
  TempDir dir;
  Outcome left;
  {
    ReplicaSet set(Env::Default(), dir.path());
    set.Read("r one", {7, 0}, {7, 100}, 5);
    set.WhenReplicated({7, 100}, 1, Clock::time_point::max(), "t", left.done());
    EXPECT_EQ(set.SegmentNeeded(), 5u);
    set.SaveHolds();
  }
  const Status s = left.get();
  EXPECT_EQ(s.code(), Status::Code::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("the database closed while an append waited"));
  ReplicaSet again(Env::Default(), dir.path());
  again.LoadHolds();
  EXPECT_EQ(again.SegmentNeeded(), 5u);
  const auto saved = again.SavedProgress();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].name, "r one");
  // Loaded holds are not replicas in sync.
  EXPECT_FALSE(again.Progress()[0].in_sync);
  EXPECT_EQ(again.CheckInSync(1, "t").code(), Status::Code::kUnavailable);
}

TEST(ReplicaSetTest, ASnapshotsHoldKeepsItsSegmentWithoutCountingAsInSync) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ReplicaSet set(Env::Default(), dir.path());
  const uint64_t segment = 2 + rng() % 100;
  set.Hold("new", segment);
  EXPECT_EQ(set.SegmentNeeded(), segment);
  // Not live: no acknowledgment counts on it, and it holds none back.
  const Status refused = set.CheckInSync(1, "t");
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable);
  EXPECT_THAT(refused.message(), HasSubstr("0 are in sync (none)"));
  EXPECT_FALSE(set.Lagging(1ms));
  // Its first read takes over from where the snapshot left it.
  set.Read("new", {segment, 0}, {segment, 100}, segment);
  EXPECT_OK(set.CheckInSync(1, "t"));
  EXPECT_EQ(set.SegmentNeeded(), segment);
  set.SaveHolds();
  ReplicaSet again(Env::Default(), dir.path());
  again.LoadHolds();
  EXPECT_EQ(again.SegmentNeeded(), segment);
}

TEST(ReplicaSetTest, ManyWaitersAndReadersAtOnceEachGetOneAnswer) {
  TempDir dir;
  ReplicaSet set(Env::Default(), dir.path());
  constexpr int kWaiters = 400;
  std::atomic<uint64_t> end{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      while (!stop.load()) {
        const uint64_t at = end.load();
        set.Read("r" + std::to_string(r), {1, at}, {1, at}, 1);
        std::this_thread::sleep_for(100us);
      }
    });
  }
  // (replicated(3) waits for all three to be in sync; before, it fails.)
  for (auto until = Clock::now() + 10s; set.Progress().size() < 3 && Clock::now() < until;) {
    std::this_thread::sleep_for(1ms);
  }
  std::atomic<int> answered{0}, ok{0};
  for (int i = 0; i < kWaiters; ++i) {
    const uint64_t at = end.fetch_add(1) + 1;
    set.WhenReplicated({1, at}, 1 + i % 3, Clock::now() + 20s, "t", [&](Status s) {
      ok += s.ok() ? 1 : 0;
      ++answered;
    });
  }
  for (auto until = Clock::now() + 20s; answered.load() < kWaiters && Clock::now() < until;) {
    std::this_thread::sleep_for(1ms);
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(answered.load(), kWaiters);
  EXPECT_EQ(ok.load(), kWaiters);
}

}  // namespace
}  // namespace replaydb::wal
