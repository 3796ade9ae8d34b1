// ProgressReporter: counting and throttled reports.
#include "util/progress_reporter.h"

#include <algorithm>
#include <utility>

namespace replaydb::util {

ProgressReporter::ProgressReporter(std::string operation, int64_t total, std::string unit,
                                   const ProgressCallback& callback)
    : ProgressReporter(std::move(operation), total, std::move(unit), callback, &Clock::now) {}

ProgressReporter::ProgressReporter(std::string operation, int64_t total, std::string unit,
                                   const ProgressCallback& callback,
                                   std::function<Clock::time_point()> now)
    : operation_(std::move(operation)),
      total_(std::max<int64_t>(total, 0)),
      unit_(std::move(unit)),
      callback_(callback),
      now_(std::move(now)),
      start_(now_()) {
  if (!callback_) return;
  next_report_.store(std::chrono::duration_cast<Clock::duration>(kReportInterval).count(),
                     std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  ReportLocked(/*finished=*/false);
}

ProgressReporter::~ProgressReporter() {
  Finish();
}

void ProgressReporter::Add(int64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  if (!callback_) return;
  const int64_t ticks = (now_() - start_).count();
  int64_t next = next_report_.load(std::memory_order_relaxed);
  if (ticks < next) return;
  // One thread wins the right to report this interval; the others return.
  const int64_t after =
      ticks + std::chrono::duration_cast<Clock::duration>(kReportInterval).count();
  if (!next_report_.compare_exchange_strong(next, after, std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) ReportLocked(/*finished=*/false);
}

void ProgressReporter::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (callback_) ReportLocked(/*finished=*/true);
}

void ProgressReporter::ReportLocked(bool finished) {
  ProgressUpdate update;
  update.operation = operation_;
  update.done = done_.load(std::memory_order_relaxed);
  update.total = total_;
  update.unit = unit_;
  update.finished = finished;
  callback_(update);
}

}  // namespace replaydb::util
