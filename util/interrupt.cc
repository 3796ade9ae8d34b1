#include "util/interrupt.h"

#include "replaydb/interrupt.h"

namespace replaydb::util {
namespace {

struct ThreadCheck {
  InterruptCheck check = nullptr;
  void* arg = nullptr;
};
thread_local ThreadCheck this_thread_check;

constexpr std::chrono::milliseconds kPoll{100};

void SetCheck(InterruptCheck check, void* arg) { this_thread_check = ThreadCheck{check, arg}; }

}  // namespace

WaitEnd WaitInterruptibly(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  const ThreadCheck mine = this_thread_check;
  if (mine.check == nullptr) {
    if (deadline == Clock::time_point::max()) {
      cv.wait(lock);
      return WaitEnd::kWoken;
    }
    return cv.wait_until(lock, deadline) == std::cv_status::no_timeout ? WaitEnd::kWoken
                                                                        : WaitEnd::kTimedOut;
  }
  const Clock::time_point now = Clock::now();
  const Clock::time_point slice = deadline - now > kPoll ? now + kPoll : deadline;
  if (cv.wait_until(lock, slice) == std::cv_status::no_timeout) return WaitEnd::kWoken;
  // The check runs without the caller's lock: it may take time (a Python
  // callback takes the interpreter's lock) and must not hold up others.
  lock.unlock();
  const bool interrupted = mine.check(mine.arg);
  lock.lock();
  if (interrupted) return WaitEnd::kInterrupted;
  return slice == deadline ? WaitEnd::kTimedOut : WaitEnd::kWoken;
}

}  // namespace replaydb::util

namespace replaydb {
void SetThreadInterruptCheck(InterruptCheck check, void* arg) { util::SetCheck(check, arg); }
}  // namespace replaydb
