// LaunchFaults: makes Gather and Scatter launches fail on purpose, for tests
// of what the engine does after a failed launch (nothing from outside can
// make a launch fail on demand). Process-wide and off unless a test arms
// it; when off, a launch pays one relaxed atomic load. Plain C++, so that
// tests built without CUDA compile against it too.
#ifndef REPLAYDB_KERNELS_RUNTIME_LAUNCH_FAULTS_H_
#define REPLAYDB_KERNELS_RUNTIME_LAUNCH_FAULTS_H_

#include <atomic>
#include <mutex>

namespace replaydb::kernels {

class LaunchFaults {
 public:
  // The launches after the next `after` ones (counting every Gather and
  // Scatter launch, one per 16 columns) fail, `count` of them; then
  // launches work again. Replaces an earlier arming.
  static void Arm(int after, int count) {
    std::lock_guard<std::mutex> lock(mu_);
    skip_ = after;
    fail_ = count;
    armed_.store(count > 0, std::memory_order_relaxed);
  }
  static void Disarm() { Arm(0, 0); }
  // Called before each launch: true when this one is to fail (instead of
  // launching).
  static bool Take() {
    if (!armed_.load(std::memory_order_relaxed)) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_ == 0) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    if (--fail_ == 0) armed_.store(false, std::memory_order_relaxed);
    return true;
  }

 private:
  static inline std::atomic<bool> armed_{false};
  static inline std::mutex mu_;
  static inline int skip_ = 0;  // guarded by mu_
  static inline int fail_ = 0;  // guarded by mu_
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_RUNTIME_LAUNCH_FAULTS_H_
