#include "engine/rate_limiter/rate_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "replaydb/interrupt.h"
#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr double kMax = std::numeric_limits<double>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Background calls wait at most this long, so a bug fails a test instead of
// hanging it.
constexpr std::chrono::milliseconds kLongTimeout = 30s;
// How long a call may take to return once it has been unblocked. Well below
// kLongTimeout: a waiter that was never woken re-checks its condition at its
// deadline and would then pass, hiding a missing notification.
constexpr std::chrono::milliseconds kUnblocked = 10s;
// How long a call must stay unfinished to count as still blocked.
constexpr std::chrono::milliseconds kStillBlocked = 50ms;

// Runs `fn` on its own thread; WaitDone() says whether it has returned.
class BackgroundCall {
 public:
  explicit BackgroundCall(std::function<Status()> fn)
      : thread_([this, fn = std::move(fn)] {
          Status status = fn();
          std::lock_guard<std::mutex> lock(mu_);
          status_ = std::move(status);
          done_ = true;
          cv_.notify_all();
        }) {}
  ~BackgroundCall() { thread_.join(); }

  bool WaitDone(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return done_; });
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  std::thread thread_;  // last: starts after the members it uses exist
};

class RateLimiterTest : public testing::Test {
 protected:
  void Reset(const RateLimiterSpec& spec, int64_t insert_weight = 1) {
    ASSERT_TRUE(spec.Validate().ok()) << spec.Validate().ToString();
    limiter_ = std::make_unique<RateLimiter>(spec, "atari", insert_weight);
  }

  // Reserves and commits n inserts without waiting.
  Status Insert(int64_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    Status s = limiter_->AwaitReserveInserts(lock, n, DeadlineAfter(0ms));
    if (s.ok()) limiter_->CommitInserts(n);
    return s;
  }
  // Samples n items without waiting.
  Status Sample(int64_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return limiter_->AwaitSamples(lock, n, DeadlineAfter(0ms), nullptr);
  }
  // The same, waiting up to kLongTimeout: for background threads.
  Status InsertWaiting(int64_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    Status s = limiter_->AwaitReserveInserts(lock, n, DeadlineAfter(kLongTimeout));
    if (s.ok()) limiter_->CommitInserts(n);
    return s;
  }
  Status SampleWaiting(int64_t n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return limiter_->AwaitSamples(lock, n, DeadlineAfter(kLongTimeout), nullptr);
  }

  RateLimiterInfo Info() {
    std::lock_guard<std::mutex> lock(mu_);
    return limiter_->Info();
  }
  // The largest n (up to 1000) for which CanInsert(n) / CanSample(n) hold.
  int64_t MaxInserts() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    while (n < 1000 && limiter_->CanInsert(n + 1)) ++n;
    return n;
  }
  int64_t MaxSamples() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    while (n < 1000 && limiter_->CanSample(n + 1)) ++n;
    return n;
  }

  // Returns once Info() counts the given blocked calls. A call is counted
  // under the mutex just before it waits, and the mutex is free again only
  // once it is inside the wait: seeing the count proves it is blocked.
  void AwaitBlocked(int64_t blocked_inserts, int64_t blocked_samples) {
    const auto give_up = Clock::now() + kLongTimeout;
    while (true) {
      const RateLimiterInfo info = Info();
      if (info.blocked_inserts == blocked_inserts && info.blocked_samples == blocked_samples) {
        return;
      }
      ASSERT_LT(Clock::now(), give_up) << "blocked_inserts=" << info.blocked_inserts
                                       << " blocked_samples=" << info.blocked_samples;
      std::this_thread::sleep_for(1ms);
    }
  }

  std::mutex mu_;  // the "table mutex"
  std::unique_ptr<RateLimiter> limiter_;
};

TEST_F(RateLimiterTest, InsertsNeverBlockBelowMinSize) {
  // max_diff (3) is far below the error reached at min size (10): inserts
  // are still free until the table holds min_size_to_sample items.
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 10, -5.0, 3.0));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Insert().ok()) << "insert " << i;
  EXPECT_EQ(Insert().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(Info().inserts, 10);
  EXPECT_EQ(Info().blocked_inserts, 1);
}

TEST_F(RateLimiterTest, MinSizeNeverBlocksInserts) {
  Reset(RateLimiterSpec::MinSize(3));
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Insert().ok());
  EXPECT_EQ(MaxInserts(), 1000);
  EXPECT_EQ(Info().blocked_inserts, 0);
}

TEST_F(RateLimiterTest, SamplesBlockBelowMinSizeAndUnblockOnInsert) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 2, -1.0, 1.0));
  BackgroundCall sampler([this] { return SampleWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));

  // One insert is not enough.
  ASSERT_TRUE(Insert().ok());
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));

  // The second reaches min size and unblocks the sample.
  ASSERT_TRUE(Insert().ok());
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_TRUE(sampler.status().ok()) << sampler.status().ToString();
  EXPECT_EQ(Info().samples, 1);
  EXPECT_EQ(Info().blocked_samples, 1);
}

TEST_F(RateLimiterTest, InsertsBlockAboveMaxDiffUntilASample) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.5, 2, -1.0, 3.0));
  ASSERT_TRUE(Insert().ok());  // error 1.5 (below min size)
  ASSERT_TRUE(Insert().ok());  // error 3.0 (at min size)
  ASSERT_TRUE(Sample().ok());  // error 2.0

  // Another insert would make the error 3.5 > max_diff.
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));

  ASSERT_TRUE(Sample().ok());  // error 1.0: room for one insert (2.5)
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok()) << inserter.status().ToString();
  EXPECT_EQ(Info().inserts, 3);
}

// A vector table's limiter: every insert, reserved, committed, released,
// forced or deleted, counts as `weight` items; samples count one each.
TEST_F(RateLimiterTest, InsertWeightCountsEachInsertAsThatManyItems) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const int64_t weight = 2 + static_cast<int64_t>(rng() % 50);
  // min size: two weighted inserts; then samples_per_insert 1 per item and
  // an error of at most 3 * weight.
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 2 * weight, -1.0, 3.0 * weight), weight);
  ASSERT_OK(Insert());
  EXPECT_EQ(Info().inserts, weight);
  EXPECT_EQ(MaxSamples(), 0) << "below min size: " << weight << " items";
  ASSERT_OK(Insert());
  EXPECT_EQ(Info().inserts, 2 * weight);
  // Error 2 * weight: every item may be sampled once more than the buffer.
  EXPECT_EQ(MaxSamples(), std::min<int64_t>(1000, 2 * weight + 1));
  // One more weighted insert makes the error 3 * weight (allowed), two 4 *.
  EXPECT_EQ(MaxInserts(), 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(limiter_->TryReserveUpTo(5), 1);
    limiter_->ReleaseInserts(1);
    limiter_->ForceInserts(2);
    limiter_->Delete(1);
  }
  EXPECT_EQ(Info().inserts, 4 * weight);
  EXPECT_EQ(Info().deletes, weight);
  ASSERT_OK(Sample(weight));
  EXPECT_EQ(Info().samples, weight);
}

// samples_per_insert = 1.5, min size 2, error buffer 1.5: error must stay in
// [1.5, 4.5] once the table holds 2 items. Counts of allowed calls per step.
TEST_F(RateLimiterTest, SampleToInsertRatioAllowsExactCounts) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.5, 2, 1.5));
  EXPECT_EQ(Info().spec.min_diff, 1.5);
  EXPECT_EQ(Info().spec.max_diff, 4.5);

  // Empty: 2 free inserts, plus a third (4.5 <= 4.5); no samples.
  EXPECT_EQ(MaxInserts(), 3);
  EXPECT_EQ(MaxSamples(), 0);
  EXPECT_EQ(Sample().code(), Status::Code::kDeadlineExceeded);

  // (One insert at a time: a reservation of two, a rise of 3, could wait
  // forever beside one-item samples at error 2, CheckInsertBatch.)
  ASSERT_TRUE(Insert().ok());
  ASSERT_TRUE(Insert().ok());  // error 3
  EXPECT_EQ(MaxInserts(), 1);   // 4.5 ok, 6 not
  EXPECT_EQ(MaxSamples(), 1);   // 2 ok, 1 < 1.5 not

  ASSERT_TRUE(Sample().ok());  // error 2
  EXPECT_EQ(MaxInserts(), 1);  // 3.5 ok, 5 not
  EXPECT_EQ(MaxSamples(), 0);  // 1 < 1.5
  EXPECT_EQ(Sample().code(), Status::Code::kDeadlineExceeded);

  ASSERT_TRUE(Insert().ok());  // error 3.5
  EXPECT_EQ(MaxInserts(), 0);  // 5 > 4.5
  EXPECT_EQ(MaxSamples(), 2);  // 1.5 ok
  EXPECT_EQ(Insert().code(), Status::Code::kDeadlineExceeded);

  ASSERT_TRUE(Sample(2).ok());  // error 1.5
  EXPECT_EQ(MaxInserts(), 2);   // 3, 4.5
  EXPECT_EQ(MaxSamples(), 0);

  ASSERT_TRUE(Insert().ok());
  ASSERT_TRUE(Insert().ok());  // error 4.5
  EXPECT_EQ(MaxInserts(), 0);
  EXPECT_EQ(MaxSamples(), 3);  // 1.5 ok (CanSample; CheckSampleBatch allows 2)

  const RateLimiterInfo info = Info();
  EXPECT_EQ(info.inserts, 5);
  EXPECT_EQ(info.samples, 3);
  EXPECT_EQ(info.deletes, 0);
  EXPECT_EQ(info.blocked_inserts, 1);
  EXPECT_EQ(info.blocked_samples, 2);
}

TEST_F(RateLimiterTest, SampleSizeCountsAgainstMinDiff) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 1, -1.0, 1.0));
  ASSERT_TRUE(Insert().ok());  // error 1
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_TRUE(limiter_->CanSample(1));   // 0
  EXPECT_TRUE(limiter_->CanSample(2));   // -1
  EXPECT_FALSE(limiter_->CanSample(3));  // -2
}

TEST_F(RateLimiterTest, InsertTimeoutReturnsDeadlineExceededNamingTheState) {
  Reset(RateLimiterSpec::Queue(10));
  ASSERT_TRUE(Insert(10).ok());
  std::unique_lock<std::mutex> lock(mu_);
  const auto start = Clock::now();
  const Status s = limiter_->AwaitReserveInserts(lock, 1, DeadlineAfter(50ms));
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "table 'atari': timed out after waiting for the rate limiter to allow 1 insert "
            "(inserts=10, samples=0, deletes=0, size=10, samples_per_insert=1, "
            "min_size_to_sample=1, max_diff=10)");
  EXPECT_EQ(limiter_->Info().blocked_inserts, 1);
  EXPECT_EQ(limiter_->Info().inserts, 10);
}

TEST_F(RateLimiterTest, InsertTimeoutMessageShowsReservedInserts) {
  Reset(RateLimiterSpec::Queue(10));
  std::unique_lock<std::mutex> lock(mu_);
  ASSERT_TRUE(limiter_->AwaitReserveInserts(lock, 10, DeadlineAfter(0ms)).ok());
  const Status s = limiter_->AwaitReserveInserts(lock, 2, DeadlineAfter(1ms));
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("to allow 2 inserts (inserts=0, reserved_inserts=10, "));
}

TEST_F(RateLimiterTest, SampleTimeoutReturnsDeadlineExceededNamingTheState) {
  Reset(RateLimiterSpec::MinSize(5));
  ASSERT_TRUE(Insert(2).ok());
  std::unique_lock<std::mutex> lock(mu_);
  const auto start = Clock::now();
  const Status s = limiter_->AwaitSamples(lock, 4, DeadlineAfter(50ms), nullptr);
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(s.message(),
            "table 'atari': timed out after waiting for the rate limiter to allow a sample of 4 "
            "items (inserts=2, samples=0, deletes=0, size=2, samples_per_insert=1, "
            "min_size_to_sample=5, min_diff=-inf)");
  EXPECT_EQ(limiter_->Info().samples, 0);
  EXPECT_EQ(limiter_->Info().blocked_samples, 1);
}

TEST_F(RateLimiterTest, SampleTimeoutWhileNotReadySaysTheLimiterAllowedIt) {
  Reset(RateLimiterSpec::MinSize(1));
  ASSERT_TRUE(Insert(3).ok());
  std::unique_lock<std::mutex> lock(mu_);
  const Status s = limiter_->AwaitSamples(lock, 2, DeadlineAfter(10ms), [] { return false; });
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("table 'atari': timed out after waiting to sample 2 items; "
                                     "the rate limiter allowed it"));
  EXPECT_EQ(limiter_->Info().samples, 0);
}

TEST_F(RateLimiterTest, ZeroTimeoutSucceedsWhenAllowedAndFailsAtOnceWhenNot) {
  Reset(RateLimiterSpec::Queue(1));
  ASSERT_TRUE(Insert().ok());
  EXPECT_EQ(Info().blocked_inserts, 0);
  const auto start = Clock::now();
  EXPECT_EQ(Insert().code(), Status::Code::kDeadlineExceeded);
  EXPECT_LT(Clock::now() - start, 1s);
}

// A thread's interrupt check (replaydb/interrupt.h) ends its own waits,
// polled about every 100 ms; another thread's waits go on to their deadline.
TEST_F(RateLimiterTest, AThreadsInterruptCheckEndsItsWaitsOnly) {
  Reset(RateLimiterSpec::Queue(2));
  ASSERT_TRUE(Insert(2).ok());
  struct Polls {
    std::atomic<int> calls{0};
    int stop_at = 0;
  };
  const auto check = [](void* arg) {
    auto* polls = static_cast<Polls*>(arg);
    return ++polls->calls >= polls->stop_at;
  };
  std::mt19937_64 rng(testing_util::TestSeed());
  Polls inserts;
  inserts.stop_at = 2 + static_cast<int>(rng() % 3);
  Polls samples;
  samples.stop_at = 1;
  BackgroundCall other([this] {
    std::unique_lock<std::mutex> lock(mu_);
    return limiter_->AwaitReserveInserts(lock, 1, DeadlineAfter(600ms));
  });
  SetThreadInterruptCheck(check, &inserts);
  const auto start = Clock::now();
  const Status s = InsertWaiting();
  const auto waited = Clock::now() - start;
  EXPECT_EQ(s.code(), Status::Code::kCancelled) << s.ToString();
  EXPECT_EQ(s.message(),
            "table 'atari': interrupted while waiting for the rate limiter to allow 1 insert");
  EXPECT_EQ(inserts.calls.load(), inserts.stop_at);
  EXPECT_GE(waited, 100ms * (inserts.stop_at - 1));
  EXPECT_LT(waited, kUnblocked);
  // Nothing was reserved by the interrupted call.
  EXPECT_EQ(Info().inserts, 2);
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(limiter_->AwaitSamples(lock, 2, DeadlineAfter(0ms), nullptr).ok());
  }
  // The queue is empty: a sample waits, and the check ends it.
  SetThreadInterruptCheck(check, &samples);
  const Status sampled = SampleWaiting(1);
  EXPECT_EQ(sampled.code(), Status::Code::kCancelled) << sampled.ToString();
  EXPECT_EQ(sampled.message(), "table 'atari': interrupted while waiting to sample 1 item");
  SetThreadInterruptCheck(nullptr, nullptr);
  // The other thread, without a check, was unaffected: it got its insert
  // once the samples made room, or timed out.
  ASSERT_TRUE(other.WaitDone(kUnblocked));
  EXPECT_TRUE(other.status().ok() || other.status().code() == Status::Code::kDeadlineExceeded)
      << other.status().ToString();
  // Cleared: a wait runs to its deadline.
  EXPECT_EQ(Sample(1).code(), Status::Code::kDeadlineExceeded);
}

TEST_F(RateLimiterTest, CancelWakesBlockedInserterAndSampler) {
  Reset(RateLimiterSpec::Queue(2));
  // Two reserved inserts fill the queue for inserters while samplers still
  // see an empty table: both kinds of call block.
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(limiter_->AwaitReserveInserts(lock, 2, DeadlineAfter(0ms)).ok());
  }
  BackgroundCall inserter([this] { return InsertWaiting(); });
  BackgroundCall sampler([this] { return SampleWaiting(2); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 1));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));

  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->Cancel();
  }
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_EQ(inserter.status().code(), Status::Code::kCancelled);
  EXPECT_EQ(inserter.status().message(), "table 'atari' was closed while waiting to insert 1 item");
  EXPECT_EQ(sampler.status().code(), Status::Code::kCancelled);
  EXPECT_EQ(sampler.status().message(), "table 'atari' was closed while waiting to sample 2 items");
  EXPECT_EQ(Info().samples, 0);
}

TEST_F(RateLimiterTest, AfterCancelEveryWaitFailsEvenWhenAllowed) {
  Reset(RateLimiterSpec::MinSize(1));
  ASSERT_TRUE(Insert().ok());
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_TRUE(limiter_->CanInsert(1));
    ASSERT_TRUE(limiter_->CanSample(1));
    limiter_->Cancel();
  }
  EXPECT_EQ(Insert().code(), Status::Code::kCancelled);
  EXPECT_EQ(Sample().code(), Status::Code::kCancelled);
  EXPECT_EQ(Info().inserts, 1);
  EXPECT_EQ(Info().samples, 0);
}

TEST_F(RateLimiterTest, SetSpecUnblocksAWaitingSampler) {
  Reset(RateLimiterSpec::MinSize(5));
  ASSERT_TRUE(Insert(2).ok());
  BackgroundCall sampler([this] { return SampleWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->SetSpec(RateLimiterSpec::MinSize(2));
  }
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_TRUE(sampler.status().ok()) << sampler.status().ToString();
  const RateLimiterInfo info = Info();
  EXPECT_EQ(info.spec, RateLimiterSpec::MinSize(2));
  EXPECT_EQ(info.inserts, 2);  // counters kept
  EXPECT_EQ(info.samples, 1);
}

TEST_F(RateLimiterTest, SetSpecUnblocksAWaitingInserter) {
  Reset(RateLimiterSpec::Queue(3));
  ASSERT_TRUE(Insert(3).ok());
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->SetSpec(RateLimiterSpec::Queue(4));
  }
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok()) << inserter.status().ToString();
  EXPECT_EQ(Info().inserts, 4);
  EXPECT_EQ(MaxInserts(), 0);  // the new bound holds
}

TEST_F(RateLimiterTest, QueueEleventhInsertBlocksUntilASample) {
  Reset(RateLimiterSpec::Queue(10));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Insert().ok()) << "insert " << i;
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));
  EXPECT_EQ(Info().inserts, 10);

  ASSERT_TRUE(Sample().ok());
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok()) << inserter.status().ToString();
  EXPECT_EQ(Info().inserts, 11);
  EXPECT_EQ(MaxInserts(), 0);  // full again
  EXPECT_EQ(MaxSamples(), 10);
}

TEST_F(RateLimiterTest, StackHasTheSameBounds) {
  Reset(RateLimiterSpec::Stack(2));
  ASSERT_TRUE(Insert(2).ok());
  EXPECT_EQ(Insert().code(), Status::Code::kDeadlineExceeded);
  ASSERT_TRUE(Sample(2).ok());
  EXPECT_EQ(Sample().code(), Status::Code::kDeadlineExceeded);
  EXPECT_EQ(MaxInserts(), 2);
}

TEST_F(RateLimiterTest, ReservedInsertsCountForInsertersButNotForSamplers) {
  Reset(RateLimiterSpec::Queue(2));
  std::unique_lock<std::mutex> lock(mu_);
  ASSERT_TRUE(limiter_->AwaitReserveInserts(lock, 2, DeadlineAfter(0ms)).ok());
  EXPECT_FALSE(limiter_->CanInsert(1));  // the reservations fill the queue
  EXPECT_FALSE(limiter_->CanSample(1));  // nothing committed yet
  EXPECT_EQ(limiter_->Info().inserts, 0);

  limiter_->CommitInserts(1);
  EXPECT_EQ(limiter_->Info().inserts, 1);
  EXPECT_TRUE(limiter_->CanSample(1));
  EXPECT_FALSE(limiter_->CanSample(2));
  EXPECT_FALSE(limiter_->CanInsert(1));

  limiter_->ReleaseInserts(1);
  EXPECT_EQ(limiter_->Info().inserts, 1);  // a release never counts
  EXPECT_TRUE(limiter_->CanInsert(1));
  EXPECT_FALSE(limiter_->CanInsert(2));
  EXPECT_FALSE(limiter_->CanSample(2));
}

TEST_F(RateLimiterTest, CommitNotReservationUnblocksASampler) {
  Reset(RateLimiterSpec::MinSize(1));
  BackgroundCall sampler([this] { return SampleWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(limiter_->AwaitReserveInserts(lock, 1, DeadlineAfter(0ms)).ok());
  }
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->CommitInserts(1);
  }
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_TRUE(sampler.status().ok()) << sampler.status().ToString();
}

TEST_F(RateLimiterTest, ReleaseUnblocksAnInserter) {
  Reset(RateLimiterSpec::Queue(1));
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(limiter_->AwaitReserveInserts(lock, 1, DeadlineAfter(0ms)).ok());
  }
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->ReleaseInserts(1);
  }
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok()) << inserter.status().ToString();
  EXPECT_EQ(Info().inserts, 1);
}

TEST_F(RateLimiterTest, DeleteBelowMinSizeUnblocksAnInserter) {
  Reset(RateLimiterSpec::SampleToInsertRatio(2.0, 2, 0.0, 4.0));
  ASSERT_TRUE(Insert(2).ok());  // error 4
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));

  ASSERT_TRUE(Sample().ok());  // error 3: an insert would make it 5 > 4
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));

  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->Delete(1);  // size 1 < min size: inserts are free again
  }
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok()) << inserter.status().ToString();
  EXPECT_EQ(Info().deletes, 1);
}

TEST_F(RateLimiterTest, DeleteBelowMinSizeBlocksSamples) {
  Reset(RateLimiterSpec::SampleToInsertRatio(2.0, 2, 0.0, 4.0));
  ASSERT_TRUE(Insert(2).ok());
  ASSERT_TRUE(Sample().ok());
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->Delete(1);
  }
  EXPECT_EQ(MaxSamples(), 0);
  BackgroundCall sampler([this] { return SampleWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));
  ASSERT_TRUE(Insert().ok());  // size back to 2
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_TRUE(sampler.status().ok()) << sampler.status().ToString();
}

TEST_F(RateLimiterTest, ReadyConditionGatesSamplesAndNotifyAllRechecksIt) {
  Reset(RateLimiterSpec::MinSize(1));
  ASSERT_TRUE(Insert().ok());
  bool ready = false;  // guarded by mu_
  int ready_calls = 0;
  BackgroundCall sampler([&] {
    std::unique_lock<std::mutex> lock(mu_);
    return limiter_->AwaitSamples(lock, 1, DeadlineAfter(kLongTimeout), [&] {
      ++ready_calls;
      return ready;
    });
  });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  EXPECT_FALSE(sampler.WaitDone(kStillBlocked));
  EXPECT_EQ(Info().samples, 0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready = true;
    limiter_->NotifyAll();
  }
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_TRUE(sampler.status().ok()) << sampler.status().ToString();
  EXPECT_EQ(Info().samples, 1);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_GE(ready_calls, 2);
}

TEST_F(RateLimiterTest, BlockedCountersCountCallsNotWakeups) {
  Reset(RateLimiterSpec::Queue(1));
  ASSERT_TRUE(Insert().ok());
  BackgroundCall inserter([this] { return InsertWaiting(); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(1, 0));
  // Wake the waiter repeatedly without making room.
  for (int i = 0; i < 5; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      limiter_->NotifyAll();
      limiter_->SetSpec(RateLimiterSpec::Queue(1));
    }
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_FALSE(inserter.WaitDone(kStillBlocked));
  ASSERT_TRUE(Sample().ok());
  ASSERT_TRUE(inserter.WaitDone(kUnblocked));
  EXPECT_TRUE(inserter.status().ok());
  EXPECT_EQ(Info().blocked_inserts, 1);
  EXPECT_EQ(Info().blocked_samples, 0);
}

TEST_F(RateLimiterTest, RejectsCallsForNoItems) {
  Reset(RateLimiterSpec::MinSize(1));
  std::unique_lock<std::mutex> lock(mu_);
  const Status insert = limiter_->AwaitReserveInserts(lock, 0, DeadlineAfter(0ms));
  EXPECT_EQ(insert.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(insert.message(), HasSubstr("table 'atari'"));
  const Status sample = limiter_->AwaitSamples(lock, -1, DeadlineAfter(0ms), nullptr);
  EXPECT_EQ(sample.code(), Status::Code::kInvalidArgument);
}

TEST_F(RateLimiterTest, RefusesASampleLargerThanTheRangeAdmits) {
  // Reverb's SampleToInsertRatio(1, 1000, buffer 100): error in [900, 1100].
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 1000, 100.0));
  for (int i = 0; i < 1100; ++i) ASSERT_OK(Insert());  // error 1100, inserts now wait
  EXPECT_EQ(Insert().code(), Status::Code::kDeadlineExceeded);
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(limiter_->MaxSampleBatch(), 200);
    EXPECT_OK(limiter_->CheckSampleBatch(200));
  }
  // 256 would wait for an error of 1156 that inserts never reach.
  const Status s = SampleWaiting(256);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 'atari': a sample of 256 items can never be admitted"));
  EXPECT_THAT(s.message(), HasSubstr("max_diff - min_diff = 200"));
  EXPECT_THAT(s.message(), HasSubstr("sample at most 200 items per call"));
  EXPECT_EQ(Info().samples, 0);
  EXPECT_EQ(Info().blocked_samples, 0);
  ASSERT_OK(Sample(200));
  EXPECT_EQ(Sample(201).code(), Status::Code::kInvalidArgument);
}

TEST_F(RateLimiterTest, QueueAdmitsASampleOfItsSizeAndNoMore) {
  Reset(RateLimiterSpec::Queue(10));
  ASSERT_OK(Insert(10));
  const Status s = Sample(11);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sample at most 10 items per call"));
  ASSERT_OK(Sample(10));
}

TEST_F(RateLimiterTest, RefusesAnInsertOfMoreItemsThanTheRangeAdmits) {
  // One insert is 8 items (a vector step of 8 environments); the range
  // [-3, 3] cannot hold 8 beside a one-item sample. Refused even while the
  // table is below min_size (where inserts are free), so it never stores
  // some steps and then waits forever.
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 8, -3.0, 3.0), 8);
  const Status s = InsertWaiting();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 'atari': an insert of 8 items (one vector step of 8 "
                                     "environments) can never be admitted"));
  EXPECT_THAT(s.message(), HasSubstr("max_diff - min_diff = 6"));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_FALSE(limiter_->TryReserveInserts(1));
  EXPECT_EQ(limiter_->TryReserveUpTo(3), 0);
  EXPECT_EQ(limiter_->Info().inserts, 0);
  // A range that holds 8 and one sample.
  limiter_->SetSpec(RateLimiterSpec::SampleToInsertRatio(1.0, 8, -4.0, 4.0));
  EXPECT_OK(limiter_->CheckInsertBatch(1));
  EXPECT_TRUE(limiter_->TryReserveInserts(1));
  limiter_->CommitInserts(1);
}

TEST_F(RateLimiterTest, RefusesAWeightedInsertThatPassesMinSizeAboveMaxDiff) {
  // Steps of 3 items fill freely to 0 (3 would pass min_size 1); the first
  // insert then makes the error 4.5 > 4 while nothing can be sampled.
  Reset(RateLimiterSpec::SampleToInsertRatio(1.5, 1, 2.5), 3);
  const Status s = InsertWaiting();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("an insert of 3 items (one vector step of 3 environments) "
                                     "can never be admitted: the table fills freely to 0 items, "
                                     "below min_size_to_sample = 1"));
  EXPECT_THAT(s.message(), HasSubstr("error to 4.5, above max_diff = 4"));
  // min_size 3: the first step is free, samples then run.
  Reset(RateLimiterSpec::SampleToInsertRatio(1.5, 3, 2.5), 3);
  EXPECT_OK(Insert());
  EXPECT_OK(Sample());
}

TEST_F(RateLimiterTest, ANarrowedRangeFailsAWaitingSampleItNoLongerAdmits) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 1, -10.0, 10.0));
  BackgroundCall sampler([this] { return SampleWaiting(15); });
  ASSERT_NO_FATAL_FAILURE(AwaitBlocked(0, 1));
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->SetSpec(RateLimiterSpec::SampleToInsertRatio(1.0, 1, -5.0, 5.0));
  }
  ASSERT_TRUE(sampler.WaitDone(kUnblocked));
  EXPECT_EQ(sampler.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(sampler.status().message(), HasSubstr("a sample of 15 items"));
}

// The rule is exact: for random limiters, insert weights and batch sizes,
// CheckSampleBatch(B) allows B exactly when no error reachable by inserts
// and samples (of one item, or of B) leaves both an insert and a sample of
// B refused; and CheckInsertBatch(1) likewise against one-item samples.
TEST(RateLimiterBatchTest, RefusesExactlyTheBatchesThatCanWaitForever) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const double spis[] = {0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 8.0};
  for (int round = 0; round < 300; ++round) {
    const double spi = spis[rng() % std::size(spis)];
    const int64_t min_size = 1 + static_cast<int64_t>(rng() % 4);
    const double least = std::max(1.0, spi);
    const double buffer = least + static_cast<double>(rng() % 40) / 4.0;
    const RateLimiterSpec spec = RateLimiterSpec::SampleToInsertRatio(spi, min_size, buffer);
    ASSERT_OK(spec.Validate());
    const int64_t weight = rng() % 3 == 0 ? 1 + static_cast<int64_t>(rng() % 4) : 1;
    const int64_t batch = 1 + static_cast<int64_t>(rng() % 30);
    RateLimiter limiter(spec, "t", weight);
    const bool sample_ok = limiter.CheckSampleBatch(batch).ok();
    const bool insert_ok = limiter.CheckInsertBatch(1).ok();
    // Breadth-first over the states (inserts, samples) reachable from a
    // fresh limiter; once past min_size only the error matters.
    struct State {
      int64_t inserts, samples;
    };
    std::vector<State> queue{{0, 0}};
    std::set<std::pair<int64_t, double>> seen;
    bool sample_stuck = false, insert_stuck = false;
    for (size_t i = 0; i < queue.size() && queue.size() < 20000; ++i) {
      const State st = queue[i];
      RateLimiter probe(spec, "t", weight);
      probe.Restore({st.inserts, st.samples, 0});
      const bool can_insert = probe.CanInsert(1);
      if (!can_insert && !probe.CanSample(batch)) sample_stuck = true;
      if (!can_insert && !probe.CanSample(1)) insert_stuck = true;
      const auto visit = [&](State next) {
        const double error = static_cast<double>(next.inserts) * spi -
                             static_cast<double>(next.samples);
        if (seen.insert({std::min(next.inserts, (min_size + 1) * weight), error}).second) {
          queue.push_back(next);
        }
      };
      if (can_insert) visit({st.inserts + weight, st.samples});
      if (probe.CanSample(1)) visit({st.inserts, st.samples + 1});
      if (probe.CanSample(batch)) visit({st.inserts, st.samples + batch});
    }
    const std::string what = "spi " + std::to_string(spi) + " min_size " +
                             std::to_string(min_size) + " buffer " + std::to_string(buffer) +
                             " weight " + std::to_string(weight) + " batch " +
                             std::to_string(batch);
    EXPECT_EQ(insert_ok, !insert_stuck) << what;
    // (A limiter that refuses every insert leaves samples nothing to wait
    // for: their rule assumes inserts can run.)
    if (insert_ok) {
      EXPECT_EQ(sample_ok, !sample_stuck) << what;
    }
  }
}

TEST_F(RateLimiterTest, InfoReportsSpecAndCounters) {
  Reset(RateLimiterSpec::SampleToInsertRatio(1.0, 1, -10.0, 10.0));
  ASSERT_TRUE(Insert(3).ok());
  ASSERT_TRUE(Sample(2).ok());
  {
    std::lock_guard<std::mutex> lock(mu_);
    limiter_->Delete(2);
  }
  const RateLimiterInfo info = Info();
  EXPECT_EQ(info.spec, RateLimiterSpec::SampleToInsertRatio(1.0, 1, -10.0, 10.0));
  EXPECT_EQ(info.inserts, 3);
  EXPECT_EQ(info.samples, 2);
  EXPECT_EQ(info.deletes, 2);
  EXPECT_EQ(info.blocked_inserts, 0);
  EXPECT_EQ(info.blocked_samples, 0);
}

TEST(DeadlineAfterTest, NegativeMeansNoDeadline) {
  EXPECT_EQ(DeadlineAfter(kWaitForever), Deadline::max());
  EXPECT_EQ(DeadlineAfter(-5ms), Deadline::max());
}

TEST(DeadlineAfterTest, HugeTimeoutsDoNotOverflow) {
  EXPECT_EQ(DeadlineAfter(std::chrono::milliseconds::max()), Deadline::max());
  const Deadline year = DeadlineAfter(std::chrono::hours(24 * 365));
  EXPECT_GT(year, Clock::now() + std::chrono::hours(24 * 364));
  EXPECT_LT(year, Deadline::max());
}

TEST(DeadlineAfterTest, IsTimeoutFromNow) {
  const auto before = Clock::now();
  const Deadline d = DeadlineAfter(100ms);
  const auto after = Clock::now();
  EXPECT_GE(d, before + 100ms);
  EXPECT_LE(d, after + 100ms);
  const Deadline zero = DeadlineAfter(0ms);
  EXPECT_LE(zero, Clock::now());
}

// RateLimiterSpec factories and Validate().

TEST(RateLimiterSpecTest, MinSize) {
  const RateLimiterSpec spec = RateLimiterSpec::MinSize(7);
  EXPECT_EQ(spec.samples_per_insert, 1.0);
  EXPECT_EQ(spec.min_size_to_sample, 7);
  EXPECT_EQ(spec.min_diff, -kMax);
  EXPECT_EQ(spec.max_diff, kMax);
  EXPECT_TRUE(spec.Validate().ok());
  EXPECT_EQ(RateLimiterSpec{}, RateLimiterSpec::MinSize(1));
}

TEST(RateLimiterSpecTest, SampleToInsertRatioCentresTheBufferOnTheOffset) {
  const RateLimiterSpec spec = RateLimiterSpec::SampleToInsertRatio(1.5, 10, 2.0);
  EXPECT_EQ(spec.samples_per_insert, 1.5);
  EXPECT_EQ(spec.min_size_to_sample, 10);
  EXPECT_EQ(spec.min_diff, 13.0);  // 1.5 * 10 - 2
  EXPECT_EQ(spec.max_diff, 17.0);
  EXPECT_TRUE(spec.Validate().ok());
}

TEST(RateLimiterSpecTest, SampleToInsertRatioWithExplicitRangeHasNoOffset) {
  const RateLimiterSpec spec = RateLimiterSpec::SampleToInsertRatio(2.0, 3, -4.0, 8.0);
  EXPECT_EQ(spec.samples_per_insert, 2.0);
  EXPECT_EQ(spec.min_size_to_sample, 3);
  EXPECT_EQ(spec.min_diff, -4.0);
  EXPECT_EQ(spec.max_diff, 8.0);
  EXPECT_TRUE(spec.Validate().ok());
}

TEST(RateLimiterSpecTest, QueueAndStack) {
  for (const RateLimiterSpec& spec : {RateLimiterSpec::Queue(10), RateLimiterSpec::Stack(10)}) {
    EXPECT_EQ(spec.samples_per_insert, 1.0);
    EXPECT_EQ(spec.min_size_to_sample, 1);
    EXPECT_EQ(spec.min_diff, 0.0);
    EXPECT_EQ(spec.max_diff, 10.0);
    EXPECT_TRUE(spec.Validate().ok());
  }
  // A one-slot queue is valid: with whole numbers a width of 1 always leaves
  // an insert or a sample possible.
  EXPECT_TRUE(RateLimiterSpec::Queue(1).Validate().ok());
  EXPECT_TRUE(RateLimiterSpec::Stack(1).Validate().ok());
}

TEST(RateLimiterSpecTest, AcceptsBuffersOfAtLeastMaxOneSamplesPerInsert) {
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(1.5, 10, 1.5).Validate().ok());
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(1.0, 1, 1.0).Validate().ok());
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(0.5, 1, 1.0).Validate().ok());
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(4.0, 100, 1000.0).Validate().ok());
  // One-sided ranges are unbounded on the other side.
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(1.5, 1, -kMax, 3.0).Validate().ok());
  EXPECT_TRUE(RateLimiterSpec::SampleToInsertRatio(1.5, 1, 0.0, kInf).Validate().ok());
}

Status Validate(double spi, int64_t min_size, double min_diff, double max_diff) {
  return RateLimiterSpec::SampleToInsertRatio(spi, min_size, min_diff, max_diff).Validate();
}

MATCHER_P(IsInvalidArgument, substring, "") {
  if (arg.code() != Status::Code::kInvalidArgument) {
    *result_listener << "status is " << arg.ToString();
    return false;
  }
  return testing::ExplainMatchResult(HasSubstr(substring), arg.message(), result_listener);
}

TEST(RateLimiterSpecTest, RejectsBadSamplesPerInsert) {
  EXPECT_THAT(Validate(0.0, 1, -kMax, kMax),
              IsInvalidArgument("rate limiter: samples_per_insert must be finite and > 0, got 0"));
  EXPECT_THAT(Validate(-1.5, 1, -kMax, kMax),
              IsInvalidArgument("samples_per_insert must be finite and > 0, got -1.5"));
  EXPECT_THAT(Validate(kNaN, 1, -kMax, kMax),
              IsInvalidArgument("samples_per_insert must be finite and > 0, got nan"));
  EXPECT_THAT(Validate(kInf, 1, -kMax, kMax),
              IsInvalidArgument("samples_per_insert must be finite and > 0, got inf"));
}

TEST(RateLimiterSpecTest, RejectsMinSizeBelowOne) {
  EXPECT_THAT(RateLimiterSpec::MinSize(0).Validate(),
              IsInvalidArgument("rate limiter: min_size_to_sample must be >= 1, got 0"));
  EXPECT_THAT(RateLimiterSpec::MinSize(-3).Validate(),
              IsInvalidArgument("min_size_to_sample must be >= 1, got -3"));
}

TEST(RateLimiterSpecTest, RejectsNaNDiffs) {
  EXPECT_THAT(Validate(1.0, 1, kNaN, 5.0),
              IsInvalidArgument("rate limiter: min_diff must be a number, got nan"));
  EXPECT_THAT(Validate(1.0, 1, 0.0, kNaN),
              IsInvalidArgument("rate limiter: max_diff must be a number, got nan"));
}

TEST(RateLimiterSpecTest, RejectsMinDiffAboveMaxDiff) {
  EXPECT_THAT(Validate(1.0, 1, 5.0, 4.0),
              IsInvalidArgument("rate limiter: min_diff (5) must be <= max_diff (4)"));
  // A negative error_buffer inverts the range.
  EXPECT_THAT(RateLimiterSpec::SampleToInsertRatio(1.0, 10, -2.0).Validate(),
              IsInvalidArgument("min_diff (12) must be <= max_diff (8)"));
  // Queue(0) and Stack(-1) have no room at all.
  EXPECT_THAT(RateLimiterSpec::Stack(-1).Validate(),
              IsInvalidArgument("min_diff (0) must be <= max_diff (-1)"));
}

TEST(RateLimiterSpecTest, RejectsUnboundedMinDiffOrMaxDiffOnTheWrongSide) {
  EXPECT_THAT(Validate(1.0, 1, kInf, kInf),
              IsInvalidArgument("rate limiter: min_diff must be below inf, got inf; samples "
                                "would block forever"));
  EXPECT_THAT(Validate(1.0, 1, -kMax, -kMax),
              IsInvalidArgument("rate limiter: max_diff must be above -inf, got -inf; inserts "
                                "would block forever"));
}

TEST(RateLimiterSpecTest, RejectsTooSmallErrorBuffer) {
  EXPECT_THAT(RateLimiterSpec::SampleToInsertRatio(1.5, 10, 1.4).Validate(),
              IsInvalidArgument("rate limiter: error_buffer (max_diff - min_diff) / 2 = 1.4 must "
                                "be >= max(1, samples_per_insert) = 1.5; smaller values can "
                                "block inserts and samples forever (min_diff=13.6, "
                                "max_diff=16.4)"));
  EXPECT_THAT(RateLimiterSpec::SampleToInsertRatio(0.5, 4, 0.75).Validate(),
              IsInvalidArgument("error_buffer (max_diff - min_diff) / 2 = 0.75 must be >= "
                                "max(1, samples_per_insert) = 1;"));
  EXPECT_THAT(RateLimiterSpec::SampleToInsertRatio(1.0, 5, 0.5).Validate(),
              IsInvalidArgument("error_buffer (max_diff - min_diff) / 2 = 0.5 must be >= "
                                "max(1, samples_per_insert) = 1;"));
  EXPECT_THAT(Validate(3.0, 1, 0.0, 5.0),
              IsInvalidArgument("= 2.5 must be >= max(1, samples_per_insert) = 3;"));
  // Whole-number specs with samples_per_insert 1 need a width of 1.
  EXPECT_THAT(Validate(1.0, 5, 3.0, 3.0),
              IsInvalidArgument("rate limiter: max_diff - min_diff = 0 must be >= 1"));
  EXPECT_THAT(RateLimiterSpec::Queue(0).Validate(),
              IsInvalidArgument("max_diff - min_diff = 0 must be >= 1"));
}

TEST(RateLimiterSpecTest, RejectsMinDiffAboveTheErrorAtMinSize) {
  EXPECT_THAT(Validate(1.0, 2, 5.0, 20.0),
              IsInvalidArgument("rate limiter: min_diff (5) must be <= samples_per_insert * "
                                "min_size_to_sample = 2; otherwise samples stay blocked once "
                                "the table reaches min_size_to_sample items"));
  EXPECT_THAT(Validate(1.5, 4, 6.5, 20.0),
              IsInvalidArgument("min_diff (6.5) must be <= samples_per_insert * "
                                "min_size_to_sample = 6;"));
  EXPECT_TRUE(Validate(1.5, 4, 6.0, 20.0).ok());
}

}  // namespace
}  // namespace replaydb::engine
