// ProgressReporter: counts the work of one long operation (an export, an
// import, a verify, a compaction) and reports it to the caller's
// LongOperationOptions::progress callback (include/replaydb/options.h):
//
//   - once when constructed (done 0),
//   - from Add, at most once every kReportInterval,
//   - once from Finish (or the destructor), with finished = true, however
//     recently the last report went out.
//
// Nothing is drawn here and nothing touches a terminal: the tools turn the
// reports into bars (tools/replaydb/progress_bar.h).
//
// Thread safety: Add may be called from any number of threads at once; a
// relaxed atomic counts, and the thread whose Add finds the interval over
// wins (compare-and-swap) the right to report, the others return at once.
// Reports are made under one mutex, so the callback is never called twice
// at a time, and each report reads the count under it, so `done` never goes
// down from one report to the next. Finish and the destructor are safe
// against concurrent Adds; Adds after Finish are counted and not reported.
#ifndef REPLAYDB_UTIL_PROGRESS_REPORTER_H_
#define REPLAYDB_UTIL_PROGRESS_REPORTER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "replaydb/options.h"

namespace replaydb::util {

class ProgressReporter {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr std::chrono::milliseconds kReportInterval{100};

  // Reports `operation` ("export hopper") of `total` `unit`s (total <= 0:
  // unknown, reported as 0) to `callback`, which may be empty (then the
  // reporter only counts). Reports the start (done 0) before returning.
  // REQUIRES: `callback` outlives the reporter.
  ProgressReporter(std::string operation, int64_t total, std::string unit,
                   const ProgressCallback& callback);
  // The same with `now` in place of Clock::now, for tests.
  ProgressReporter(std::string operation, int64_t total, std::string unit,
                   const ProgressCallback& callback, std::function<Clock::time_point()> now);
  // Calls Finish().
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // Counts n more done; reports when kReportInterval has passed since the
  // last report. REQUIRES: n >= 0.
  void Add(int64_t n);
  // Reports the count with finished = true. Idempotent: only the first
  // call reports.
  void Finish();

  int64_t done() const { return done_.load(std::memory_order_relaxed); }

 private:
  // Calls the callback with the count as it is now. REQUIRES: mu_ held.
  void ReportLocked(bool finished);

  const std::string operation_;
  const int64_t total_;
  const std::string unit_;
  const ProgressCallback& callback_;
  const std::function<Clock::time_point()> now_;
  const Clock::time_point start_;
  std::atomic<int64_t> done_{0};
  // When the next Add may report, in Clock ticks since start_.
  std::atomic<int64_t> next_report_{0};

  std::mutex mu_;  // held while the callback runs; guards finished_
  bool finished_ = false;
};

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_PROGRESS_REPORTER_H_
