// ForkJoin: a few threads that run the parts of one loop together with the
// calling thread, for loops of tens of microseconds whose time goes to
// memory latency (a vector append's pass over thousands of environments,
// each in its own cache lines): more threads keep more cache misses in
// flight.
//
// Run hands part 0 to the calling thread and parts 1.. to the workers,
// and returns once every part has returned (what the parts wrote is then
// visible to the caller). Between runs a worker spins for a short while
// (kSpinMicros), so that back-to-back runs start at once, then sleeps on a
// futex until the next run. Not thread-safe: one caller at a time (a
// vector writer's).
#ifndef REPLAYDB_UTIL_FORK_JOIN_H_
#define REPLAYDB_UTIL_FORK_JOIN_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace replaydb::util {

class ForkJoin {
 public:
  // How long a worker spins for the next run before it sleeps.
  static constexpr int64_t kSpinMicros = 100;

  // REQUIRES: parts >= 1 (1: Run calls its function on the caller alone).
  explicit ForkJoin(int parts);
  ~ForkJoin();
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  int parts() const { return parts_; }

  // Calls fn(part) for every part in [0, parts()), part 0 on this thread,
  // and returns when all have returned. fn must not throw.
  template <typename F>
  void Run(F& fn) {
    call_ = [](void* f, int part) { (*static_cast<F*>(f))(part); };
    context_ = &fn;
    RunParts();
  }

  // Part `part` of `parts` equal shares of [0, n): [*begin, *end).
  static void Share(size_t n, int part, int parts, size_t* begin, size_t* end) {
    *begin = n * static_cast<size_t>(part) / static_cast<size_t>(parts);
    *end = n * static_cast<size_t>(part + 1) / static_cast<size_t>(parts);
  }

  // fn(part, begin, end) for every part's Share of [0, n), as Run does;
  // with a null `fork_join`, fn(0, 0, n) on the caller.
  template <typename F>
  static void ForEachShare(ForkJoin* fork_join, size_t n, F&& fn) {
    if (fork_join == nullptr) {
      fn(0, size_t{0}, n);
      return;
    }
    const int parts = fork_join->parts_;
    auto part_fn = [&](int part) {
      size_t begin = 0;
      size_t end = 0;
      Share(n, part, parts, &begin, &end);
      fn(part, begin, end);
    };
    fork_join->Run(part_fn);
  }

 private:
  void RunParts();
  void WorkerLoop(int part);

  const int parts_;
  void (*call_)(void*, int) = nullptr;
  void* context_ = nullptr;
  // Bumped by each run (and by the destructor, with stop_ set).
  alignas(64) std::atomic<uint32_t> generation_{0};
  // Workers still running the current run's parts.
  alignas(64) std::atomic<int32_t> pending_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// How many parts a vector writer of `num_envs` environments splits its
// appends into when WriterOptions::threads is 0 (automatic): 1 below
// kMinEnvsPerPart * 2 environments, else up to kMaxAutoParts, at most half
// the machine's hardware threads (the other half is the simulator's).
int AutoParts(size_t num_envs);
inline constexpr size_t kMinEnvsPerPart = 512;
inline constexpr int kMaxAutoParts = 8;

// The parts of a vector writer of `num_envs` environments whose
// WriterOptions::threads is `threads`: threads, or AutoParts when 0.
inline int WriterParts(int threads, size_t num_envs) {
  return threads == 0 ? AutoParts(num_envs) : threads;
}

// One contiguous copy of CopyRanges: `bytes` from `src` to `dst`.
struct CopyRange {
  std::byte* dst;
  const std::byte* src;
  size_t bytes;
};

// Copies every range (they must not overlap each other's destinations),
// splitting their bytes together into equal shares over `fork_join`'s parts
// and cutting a range where a share ends, so that a single large range uses
// every part. On the caller alone when `fork_join` is null or the ranges
// total less than kMinCopyBytesPerPart * 2.
void CopyRanges(ForkJoin* fork_join, std::span<const CopyRange> ranges);
inline constexpr size_t kMinCopyBytesPerPart = size_t{256} << 10;

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_FORK_JOIN_H_
