// Waits that the calling thread's interrupt check (replaydb/interrupt.h)
// can end.
#ifndef REPLAYDB_UTIL_INTERRUPT_H_
#define REPLAYDB_UTIL_INTERRUPT_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace replaydb::util {

enum class WaitEnd {
  kWoken,        // notified, spuriously woken, or a poll of the check passed
  kTimedOut,     // `deadline` passed
  kInterrupted,  // the thread's interrupt check returned true
};

// Waits on `cv` (releasing `lock`) until notified or `deadline`
// (time_point::max(): none); with an interrupt check set for this thread,
// at most 100 ms at a time, then asks the check. Callers re-check their
// condition after kWoken, as after any condition-variable wait.
WaitEnd WaitInterruptibly(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          std::chrono::steady_clock::time_point deadline);

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_INTERRUPT_H_
