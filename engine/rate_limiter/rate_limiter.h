// The table's rate limiter (Reverb semantics; see RateLimiterSpec in
// replaydb/options.h for the rules).
//
// Thread safety: not internally locked. Every method REQUIRES the owning
// table's mutex to be held; the Await* methods take the caller's unique_lock
// on that mutex and release it while they wait.
#ifndef REPLAYDB_ENGINE_RATE_LIMITER_RATE_LIMITER_H_
#define REPLAYDB_ENGINE_RATE_LIMITER_RATE_LIMITER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb::engine {

using Clock = std::chrono::steady_clock;
// Clock::time_point::max() means no deadline.
using Deadline = Clock::time_point;
// The deadline `timeout` from now; negative timeouts give no deadline.
// Under a ScopedNoWait: now, whatever the timeout.
Deadline DeadlineAfter(std::chrono::milliseconds timeout);

// While one is alive on a thread, the engine's calls on that thread do not
// wait: one that would (the rate limiter, hot-tier blocks still being read)
// returns DeadlineExceeded at once, as with a timeout of 0. A thread that
// must not block (a network worker, rdma/rpc.h) serves calls this way and
// hands those that would wait to one that may.
class ScopedNoWait {
 public:
  ScopedNoWait();
  ~ScopedNoWait();
  ScopedNoWait(const ScopedNoWait&) = delete;
  ScopedNoWait& operator=(const ScopedNoWait&) = delete;

 private:
  bool previous_;
};

class RateLimiter {
 public:
  // REQUIRES: spec.Validate().ok(), insert_weight >= 1. `table_name`
  // appears in messages. Every insert and delete the methods below take
  // counts as `insert_weight` items (a vector table's vector step holds one
  // item per environment, TableSpec::lanes); samples count one each.
  RateLimiter(const RateLimiterSpec& spec, std::string table_name, int64_t insert_weight = 1);

  // Batches are admitted all or nothing. A batch so large that, at some
  // error the limiter can reach, it is refused while the other side's
  // smallest move is refused too would wait forever there (a learner
  // waiting for room to sample B while writers wait for samples), so these
  // refuse it outright:
  //  - a sample of n items, against one insert (samples_per_insert *
  //    insert_weight);
  //  - an insert of n (n * insert_weight items), against a one-item sample.
  // Roughly, the batch and that move together must fit in max_diff -
  // min_diff; exactly, no error the limiter can take (a multiple of the
  // greatest common divisor of the two moves) may lie where both are
  // refused (Fits). So Queue(10) admits Sample(10) and not Sample(11), and
  // SampleToInsertRatio(1, 1000, 100) (range [900, 1100]) Sample(200), not
  // Sample(201). OK, or InvalidArgument naming the batch, the range and
  // the largest batch allowed.
  Status CheckSampleBatch(int64_t n) const;
  Status CheckInsertBatch(int64_t n) const;
  // The largest sample CheckSampleBatch allows (INT64_MAX when the range
  // is unbounded).
  int64_t MaxSampleBatch() const;

  // Waits until n more inserts are allowed, then reserves them: reserved
  // inserts count against max_diff for other inserters but are not yet
  // visible to samplers. Follow with CommitInserts(n) or ReleaseInserts(n).
  // DeadlineExceeded (with the limiter's state in the message) when
  // `deadline` passes; Cancelled after Cancel(); InvalidArgument if n < 1
  // or CheckInsertBatch(n) fails (checked again when the spec changes).
  // A call that finds the limiter closed counts once in blocked_inserts.
  Status AwaitReserveInserts(std::unique_lock<std::mutex>& lock, int64_t n, Deadline deadline);
  // Reserves n more inserts if they are allowed now, without waiting: true
  // if it did (follow as after AwaitReserveInserts), false otherwise
  // (including once cancelled, and when CheckInsertBatch(n) fails).
  // REQUIRES: n >= 1
  bool TryReserveInserts(int64_t n);
  // Reserves as many inserts, up to n, as are allowed now without waiting,
  // and returns how many (0 once cancelled, or when CheckInsertBatch(1)
  // fails). The same as calling TryReserveInserts(1) until it fails or n
  // succeeded. REQUIRES: n >= 0
  int64_t TryReserveUpTo(int64_t n);
  // The reserved inserts happened; wakes samplers.
  // REQUIRES: 0 <= n <= inserts reserved and not yet committed or released.
  void CommitInserts(int64_t n);
  // The reserved inserts will not happen; wakes inserters.
  // REQUIRES: as for CommitInserts.
  void ReleaseInserts(int64_t n);

  // Waits until a sample of n items is allowed and `ready()` (an extra
  // condition of the caller's, e.g. enough items left; may be empty) holds,
  // then counts the n samples and wakes inserters. Errors as for
  // AwaitReserveInserts (InvalidArgument when CheckSampleBatch(n) fails); a
  // call that had to wait counts once in blocked_samples.
  Status AwaitSamples(std::unique_lock<std::mutex>& lock, int64_t n, Deadline deadline,
                      const std::function<bool()>& ready);

  // n items left the table (evicted or removed); wakes inserters (a smaller
  // size can only make room for inserts, never allow a sample; if `ready()`
  // depends on the items, NotifyAll is the caller's). REQUIRES: n >= 0
  void Delete(int64_t n);
  // Wakes every waiter so it re-checks its condition (the caller changed
  // something `ready()` depends on).
  void NotifyAll();

  // Replaces the parameters, keeps the counters, wakes every waiter.
  // REQUIRES: spec.Validate().ok()
  void SetSpec(const RateLimiterSpec& spec);

  // Every current and future wait returns Cancelled.
  void Cancel();

  // Starts the counters afresh (Table::Clear): inserts, samples and deletes
  // 0, as for a new table; reserved inserts stay reserved. Wakes every
  // waiter.
  void Reset();

  // Whether n more inserts (n * insert_weight items), on top of those
  // committed and reserved, are allowed now.
  bool CanInsert(int64_t n) const;
  // Whether a sample of n items is allowed now (the rate limiter's rule only;
  // committed inserts count, reserved ones do not).
  bool CanSample(int64_t n) const;
  RateLimiterInfo Info() const;

  // The counters a checkpoint saves.
  struct Counters {
    int64_t inserts = 0;
    int64_t samples = 0;
    int64_t deletes = 0;
  };
  Counters counters() const { return {inserts_, samples_, deletes_}; }
  // Sets the counters (restoring a checkpoint) and remembers them for
  // SettleAfterRecovery. REQUIRES: nothing reserved.
  void Restore(const Counters& c);
  // Counts n inserts without waiting or reserving (replaying the log: the
  // inserts were admitted when they were first made).
  void ForceInserts(int64_t n);
  // Counts n samples without waiting (replaying the log: an item removed
  // for reaching max_times_sampled was sampled that many times, n of them
  // after the checkpoint). REQUIRES: n >= 0
  void ForceSamples(int64_t n);

  // Recovery's last step, after Restore and the log's replay: makes the
  // counters agree with the `items` the table holds (each counts
  // insert_weight, as an insert does). The log records inserts and
  // removals but not samples, so replayed counters lack the samples made
  // after the checkpoint that removed no item, and the error they give
  // (inserts * samples_per_insert - samples) is too high by as many. The
  // rule:
  //  - deletes = inserts - items, so that size = items (items left in the
  //    cold store, which no longer fit the hot tier, count as deleted);
  //  - with `reset` (CheckpointOptions::reset_rate_limiters_on_restore):
  //    inserts = items, deletes = 0, samples = 0, as for a fresh table
  //    that was given the items;
  //  - then, if the error is above `bound`, samples are added (the fewest,
  //    rounded up) to bring it down to `bound`, where bound = max_diff with
  //    `reset`, and otherwise the larger of max_diff and the error Restore
  //    set (a clean close, which replays nothing, changes no counter). A
  //    running limiter keeps the error at or below max_diff (except while
  //    inserts are free below min_size_to_sample), so this assumes the
  //    fewest lost samples consistent with that: writers are never left
  //    owing the learner more samples than the limiter's range allows, and
  //    the learner may draw up to the range, never less than it could
  //    before the crash.
  // A table whose every sample removes the item it draws (max_times_sampled
  // 1: Queue, Stack) thus comes back exactly as it was. REQUIRES: nothing
  // reserved; items >= 0.
  void SettleAfterRecovery(int64_t items, bool reset);

 private:
  // "(inserts=.., samples=.., deletes=.., size=.., samples_per_insert=..,
  // min_size_to_sample=.., max_diff=..)"; min_diff instead of max_diff when
  // !for_insert; reserved_inserts after inserts when there are any.
  std::string StateString(bool for_insert) const;
  // Whether an insert that raises the error by `rise` and a sample that
  // lowers it by `drop` are never refused at the same error (see
  // CheckSampleBatch); *most_drop (may be null) gets the largest drop that
  // fits beside `rise`.
  bool Fits(double rise, double drop, double* most_drop) const;
  // "(min_diff=.., max_diff=.., samples_per_insert=..)".
  std::string RangeString() const;

  RateLimiterSpec spec_;
  const std::string table_name_;
  const int64_t insert_weight_;
  int64_t inserts_ = 0;
  int64_t reserved_inserts_ = 0;
  int64_t samples_ = 0;
  int64_t deletes_ = 0;
  // CheckInsertBatch(1).ok() under spec_ (TryReserveInserts' hot path).
  bool one_insert_fits_ = true;
  // The counters Restore set (zero if it never ran).
  Counters restored_;
  int64_t blocked_inserts_ = 0;
  int64_t blocked_samples_ = 0;
  bool cancelled_ = false;
  std::condition_variable can_insert_cv_;
  std::condition_variable can_sample_cv_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_RATE_LIMITER_RATE_LIMITER_H_
