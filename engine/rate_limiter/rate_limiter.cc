#include "engine/rate_limiter/rate_limiter.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "util/format.h"
#include "util/interrupt.h"

namespace replaydb::engine {

using util::FormatDouble;

namespace {

// "1 item", "4 items".
std::string Items(int64_t n) {
  return std::to_string(n) + (n == 1 ? " item" : " items");
}

}  // namespace

namespace {
thread_local bool no_wait = false;
}  // namespace

ScopedNoWait::ScopedNoWait() : previous_(no_wait) { no_wait = true; }
ScopedNoWait::~ScopedNoWait() { no_wait = previous_; }

Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  if (no_wait) return Clock::now();
  if (timeout < std::chrono::milliseconds::zero()) return Deadline::max();
  const Clock::time_point now = Clock::now();
  // Compare in milliseconds: converting a huge timeout to the clock's
  // nanoseconds would overflow.
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now);
  if (timeout >= room) return Deadline::max();
  return now + timeout;
}

RateLimiter::RateLimiter(const RateLimiterSpec& spec, std::string table_name, int64_t insert_weight)
    : spec_(spec), table_name_(std::move(table_name)), insert_weight_(insert_weight) {
  assert(spec.Validate().ok());
  assert(insert_weight >= 1);
  one_insert_fits_ = CheckInsertBatch(1).ok();
}

bool RateLimiter::CanInsert(int64_t n) const {
  const int64_t inserts = inserts_ + reserved_inserts_ + n * insert_weight_;
  // Until the table reaches its minimum size, inserts are free.
  if (inserts - deletes_ <= spec_.min_size_to_sample) return true;
  const double error =
      static_cast<double>(inserts) * spec_.samples_per_insert - static_cast<double>(samples_);
  return error <= spec_.max_diff;
}

bool RateLimiter::CanSample(int64_t n) const {
  if (inserts_ - deletes_ < spec_.min_size_to_sample) return false;
  const double error = static_cast<double>(inserts_) * spec_.samples_per_insert -
                       static_cast<double>(samples_) - static_cast<double>(n);
  return error >= spec_.min_diff;
}

std::string RateLimiter::StateString(bool for_insert) const {
  std::string out = "(inserts=" + std::to_string(inserts_);
  if (reserved_inserts_ != 0) out += ", reserved_inserts=" + std::to_string(reserved_inserts_);
  out += ", samples=" + std::to_string(samples_);
  out += ", deletes=" + std::to_string(deletes_);
  out += ", size=" + std::to_string(inserts_ - deletes_);
  out += ", samples_per_insert=" + FormatDouble(spec_.samples_per_insert);
  out += ", min_size_to_sample=" + std::to_string(spec_.min_size_to_sample);
  if (for_insert) {
    out += ", max_diff=" + FormatDouble(spec_.max_diff);
  } else {
    out += ", min_diff=" + FormatDouble(spec_.min_diff);
  }
  out += ")";
  return out;
}

bool RateLimiter::Fits(double rise, double drop, double* most_drop) const {
  // Inserts are blocked at an error e with e + rise > max_diff, samples at
  // one with e - drop < min_diff: both at once for e in the open interval
  // (max_diff - rise, min_diff + drop). The error moves by
  // samples_per_insert * insert_weight per insert and by 1 per item
  // sampled, so from 0 it only takes multiples of their greatest common
  // divisor g = 1/q (q the smallest denominator of the insert's move, when
  // it is a fraction with q <= 1024; else the moves are taken as
  // continuous). The batch fits when no multiple of g lies in the interval.
  const double unit = spec_.samples_per_insert * static_cast<double>(insert_weight_);
  const auto whole = [](double v) { return std::isfinite(v) && std::floor(v) == v; };
  double g = 0;
  for (int q = 1; q <= 1024; ++q) {
    if (whole(unit * q)) {
      g = 1.0 / q;
      break;
    }
  }
  // The smallest error at which inserts of `rise` are blocked.
  double blocked_from = spec_.max_diff - rise;  // exclusive, when continuous
  if (g > 0 && std::isfinite(blocked_from)) {
    blocked_from = (std::floor(blocked_from / g) + 1) * g;
  }
  const double room = blocked_from - spec_.min_diff;  // inf when a side is unbounded
  if (most_drop != nullptr) *most_drop = room;
  return drop <= room;
}

std::string RateLimiter::RangeString() const {
  return "(min_diff=" + FormatDouble(spec_.min_diff) + ", max_diff=" +
         FormatDouble(spec_.max_diff) +
         ", samples_per_insert=" + FormatDouble(spec_.samples_per_insert) + ")";
}

int64_t RateLimiter::MaxSampleBatch() const {
  double most = 0;
  Fits(spec_.samples_per_insert * static_cast<double>(insert_weight_), 1, &most);
  constexpr double kUnbounded = 0x1p62;
  if (!(most < kUnbounded)) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, static_cast<int64_t>(std::floor(most)));
}

Status RateLimiter::CheckSampleBatch(int64_t n) const {
  const double rise = spec_.samples_per_insert * static_cast<double>(insert_weight_);
  if (Fits(rise, static_cast<double>(n), nullptr)) return Status::OK();
  const int64_t most = MaxSampleBatch();
  return Status::InvalidArgument(
      "table '" + table_name_ + "': a sample of " + Items(n) +
      " can never be admitted: the rate limiter's range max_diff - min_diff = " +
      FormatDouble(spec_.max_diff - spec_.min_diff) + " " + RangeString() +
      " must hold the batch and one insert (" + FormatDouble(rise) +
      "), or the learner waits for room while writers wait for samples; sample at most " +
      std::to_string(most) + " items per call, or widen the range");
}

Status RateLimiter::CheckInsertBatch(int64_t n) const {
  const int64_t items = n * insert_weight_;
  const double rise = spec_.samples_per_insert * static_cast<double>(items);
  const std::string what =
      "table '" + table_name_ + "': an insert of " + Items(items) +
      (insert_weight_ > 1 ? " (one vector step of " + std::to_string(insert_weight_) +
                                " environments)"
                          : std::string());
  // Inserts are free while they leave the table at or below
  // min_size_to_sample; the free fill stops at the largest multiple of the
  // insert's items. If that is below min_size_to_sample no sample can run
  // there, so the insert that passes it must fit under max_diff at once.
  const int64_t filled = spec_.min_size_to_sample / items * items;
  if (filled < spec_.min_size_to_sample) {
    const double error = spec_.samples_per_insert * static_cast<double>(filled + items);
    if (error > spec_.max_diff) {
      return Status::InvalidArgument(
          what + " can never be admitted: the table fills freely to " + Items(filled) +
          ", below min_size_to_sample = " + std::to_string(spec_.min_size_to_sample) +
          " where no sample runs, and the next insert would raise the rate limiter's error to " +
          FormatDouble(error) + ", above max_diff = " + FormatDouble(spec_.max_diff) +
          "; raise max_diff or make min_size_to_sample a multiple of " + std::to_string(items));
    }
  }
  if (Fits(rise, 1.0, nullptr)) return Status::OK();
  return Status::InvalidArgument(
      what + " can never be admitted: it raises the rate limiter's error by " + FormatDouble(rise) +
      ", and the range max_diff - min_diff = " + FormatDouble(spec_.max_diff - spec_.min_diff) +
      " " + RangeString() +
      " must hold that and a one-item sample, or writers wait for samples while the learner "
      "waits for inserts; widen the range");
}

Status RateLimiter::AwaitReserveInserts(std::unique_lock<std::mutex>& lock, int64_t n,
                                        Deadline deadline) {
  assert(lock.owns_lock());
  if (n < 1) {
    return Status::InvalidArgument("table '" + table_name_ + "': cannot reserve " +
                                   std::to_string(n) + " inserts; need at least 1");
  }
  const int64_t items = n * insert_weight_;
  bool blocked = false;
  while (true) {
    if (cancelled_) {
      return Status::Cancelled("table '" + table_name_ + "' was closed while waiting to insert " +
                               Items(items));
    }
    // Checked on every wake: SetSpec may have narrowed the range.
    REPLAYDB_RETURN_IF_ERROR(CheckInsertBatch(n));
    if (CanInsert(n)) break;
    if (!blocked) {
      blocked = true;
      ++blocked_inserts_;
    }
    const util::WaitEnd end =
        Clock::now() >= deadline ? util::WaitEnd::kTimedOut
                                 : util::WaitInterruptibly(can_insert_cv_, lock, deadline);
    if (end == util::WaitEnd::kInterrupted) {
      return Status::Cancelled("table '" + table_name_ + "': interrupted while waiting for the " +
                               "rate limiter to allow " + std::to_string(items) +
                               (items == 1 ? " insert" : " inserts"));
    }
    if (end == util::WaitEnd::kTimedOut) {
      // Woken by the deadline: the state may have changed while this thread
      // waited for the mutex, so re-check before giving up.
      if (cancelled_ || CanInsert(n) || !CheckInsertBatch(n).ok()) continue;
      return Status::DeadlineExceeded(
          "table '" + table_name_ + "': timed out after waiting for the rate limiter to allow " +
          std::to_string(items) + (items == 1 ? " insert " : " inserts ") +
          StateString(/*for_insert=*/true));
    }
  }
  reserved_inserts_ += items;
  // A reservation only makes other inserts harder and is invisible to
  // samplers: nobody to wake.
  return Status::OK();
}

bool RateLimiter::TryReserveInserts(int64_t n) {
  assert(n >= 1);
  if (cancelled_ || !CanInsert(n)) return false;
  if (n == 1 ? !one_insert_fits_ : !CheckInsertBatch(n).ok()) return false;
  reserved_inserts_ += n * insert_weight_;
  return true;
}

int64_t RateLimiter::TryReserveUpTo(int64_t n) {
  assert(n >= 0);
  if (cancelled_ || n == 0 || !one_insert_fits_) return 0;
  int64_t k = n;
  if (!CanInsert(k)) {
    // CanInsert(k) holds for every k up to some bound: find the largest.
    int64_t lo = 0;  // allowed (0 always is)
    int64_t hi = n;  // not allowed
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (CanInsert(mid) ? lo : hi) = mid;
    }
    k = lo;
  }
  reserved_inserts_ += k * insert_weight_;
  return k;
}

void RateLimiter::CommitInserts(int64_t n) {
  const int64_t items = n * insert_weight_;
  assert(n >= 0 && items <= reserved_inserts_);
  reserved_inserts_ -= items;
  inserts_ += items;
  // inserts + reserved is unchanged, so CanInsert is too; size and error
  // grew, so samples may now run.
  can_sample_cv_.notify_all();
}

void RateLimiter::ReleaseInserts(int64_t n) {
  assert(n >= 0 && n * insert_weight_ <= reserved_inserts_);
  reserved_inserts_ -= n * insert_weight_;
  // Samplers never saw the reservation.
  can_insert_cv_.notify_all();
}

Status RateLimiter::AwaitSamples(std::unique_lock<std::mutex>& lock, int64_t n, Deadline deadline,
                                 const std::function<bool()>& ready) {
  assert(lock.owns_lock());
  if (n < 1) {
    return Status::InvalidArgument("table '" + table_name_ + "': cannot sample " +
                                   std::to_string(n) + " items; need at least 1");
  }
  const auto allowed = [&] { return CanSample(n) && (!ready || ready()); };
  bool blocked = false;
  while (true) {
    if (cancelled_) {
      return Status::Cancelled("table '" + table_name_ + "' was closed while waiting to sample " +
                               Items(n));
    }
    // Checked on every wake: SetSpec may have narrowed the range.
    REPLAYDB_RETURN_IF_ERROR(CheckSampleBatch(n));
    if (allowed()) break;
    if (!blocked) {
      blocked = true;
      ++blocked_samples_;
    }
    const util::WaitEnd end =
        Clock::now() >= deadline ? util::WaitEnd::kTimedOut
                                 : util::WaitInterruptibly(can_sample_cv_, lock, deadline);
    if (end == util::WaitEnd::kInterrupted) {
      return Status::Cancelled("table '" + table_name_ + "': interrupted while waiting to " +
                               "sample " + Items(n));
    }
    if (end == util::WaitEnd::kTimedOut) {
      if (cancelled_ || allowed() || !CheckSampleBatch(n).ok()) continue;
      if (CanSample(n)) {
        return Status::DeadlineExceeded(
            "table '" + table_name_ + "': timed out after waiting to sample " + Items(n) +
            "; the rate limiter allowed it but the table could not serve it " +
            StateString(/*for_insert=*/false));
      }
      return Status::DeadlineExceeded("table '" + table_name_ +
                                      "': timed out after waiting for the rate limiter to allow "
                                      "a sample of " +
                                      Items(n) + " " + StateString(/*for_insert=*/false));
    }
  }
  samples_ += n;
  // A sample lowers the error: room for inserts. Other samplers only lost.
  can_insert_cv_.notify_all();
  return Status::OK();
}

void RateLimiter::Reset() {
  inserts_ = 0;
  samples_ = 0;
  deletes_ = 0;
  restored_ = {};
  can_insert_cv_.notify_all();
  can_sample_cv_.notify_all();
}

void RateLimiter::Restore(const Counters& c) {
  assert(reserved_inserts_ == 0);
  restored_ = c;
  inserts_ = c.inserts;
  samples_ = c.samples;
  deletes_ = c.deletes;
  can_insert_cv_.notify_all();
  can_sample_cv_.notify_all();
}

void RateLimiter::ForceInserts(int64_t n) {
  assert(n >= 0);
  inserts_ += n * insert_weight_;
  can_sample_cv_.notify_all();
}

void RateLimiter::ForceSamples(int64_t n) {
  assert(n >= 0);
  samples_ += n;
  can_insert_cv_.notify_all();
}

void RateLimiter::SettleAfterRecovery(int64_t items, bool reset) {
  assert(reserved_inserts_ == 0);
  assert(items >= 0);
  const int64_t size = items * insert_weight_;
  double bound = spec_.max_diff;
  if (reset) {
    inserts_ = size;
    samples_ = 0;
    deletes_ = 0;
  } else {
    bound = std::max(bound, static_cast<double>(restored_.inserts) * spec_.samples_per_insert -
                                static_cast<double>(restored_.samples));
    if (inserts_ >= size) {
      deletes_ = inserts_ - size;
    } else {
      // Never seen: more items than inserts counted. Count them inserted.
      inserts_ = size;
      deletes_ = 0;
    }
  }
  const double excess =
      static_cast<double>(inserts_) * spec_.samples_per_insert - static_cast<double>(samples_) -
      bound;
  if (excess > 0) {
    // At most 2^62 more (a limit no real history reaches).
    constexpr double kMost = 0x1p62;
    samples_ += static_cast<int64_t>(std::min(std::ceil(excess), kMost));
  }
  NotifyAll();
}

void RateLimiter::Delete(int64_t n) {
  assert(n >= 0);
  deletes_ += n * insert_weight_;
  // A smaller size can only let inserts through (below min_size_to_sample
  // they are free); it never lets a sample through, and `ready()` conditions
  // that depend on the table's items are the caller's to signal.
  can_insert_cv_.notify_all();
}

void RateLimiter::NotifyAll() {
  can_insert_cv_.notify_all();
  can_sample_cv_.notify_all();
}

void RateLimiter::SetSpec(const RateLimiterSpec& spec) {
  assert(spec.Validate().ok());
  spec_ = spec;
  one_insert_fits_ = CheckInsertBatch(1).ok();
  NotifyAll();
}

void RateLimiter::Cancel() {
  cancelled_ = true;
  NotifyAll();
}

RateLimiterInfo RateLimiter::Info() const {
  RateLimiterInfo info;
  info.spec = spec_;
  info.inserts = inserts_;
  info.samples = samples_;
  info.deletes = deletes_;
  info.blocked_inserts = blocked_inserts_;
  info.blocked_samples = blocked_samples_;
  return info;
}

}  // namespace replaydb::engine
