// Progress: a one-line progress bar for long imports and exports, redrawn in
// place with '\r':
//
//   import hopper [#########.....................]  31% 312000/1000000 steps 1.52M steps/s 0:21
//
// With an unknown total (0) the bar and percent are left out:
//
//   export atari 312000 steps 1.52M steps/s 0:21
//
// Thread safety: Add may be called from any number of threads at once;
// Finish and the destructor are also safe against concurrent Adds (Adds
// after Finish are counted and not drawn).
#ifndef REPLAYDB_UTIL_PROGRESS_H_
#define REPLAYDB_UTIL_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace replaydb {

class Progress {
 public:
  // Draws on stderr when stderr is a terminal. `total` <= 0: unknown, the
  // line shows a count without bar or percent.
  Progress(std::string label, int64_t total, std::string unit = "steps");
  // Draws on `out` (which must outlive the Progress) only when `enabled`;
  // when not, nothing at all is written to `out`.
  Progress(std::string label, int64_t total, std::string unit, FILE* out, bool enabled);
  // Calls Finish().
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Counts n more done; redraws at most every kRedrawInterval.
  void Add(int64_t n);
  // Draws the final line (whatever was counted, however recently the last
  // draw was) and ends it with a newline. Idempotent.
  void Finish();

  int64_t done() const { return done_.load(std::memory_order_relaxed); }

  static constexpr std::chrono::milliseconds kRedrawInterval{100};
  static constexpr int kBarWidth = 30;

 private:
  using Clock = std::chrono::steady_clock;

  // The line for `done` steps after `elapsed` (without '\r').
  std::string Line(int64_t done, Clock::duration elapsed) const;
  // Writes '\r' and the line, padded over a longer previous one.
  void DrawLocked(Clock::time_point now);

  const std::string label_;
  const int64_t total_;
  const std::string unit_;
  FILE* const out_;
  const bool enabled_;
  const Clock::time_point start_;
  std::atomic<int64_t> done_{0};
  // When the next Add may redraw, in Clock ticks since start_.
  std::atomic<int64_t> next_draw_{0};

  std::mutex mu_;  // guards the fields below and writes to out_
  bool finished_ = false;
  size_t last_width_ = 0;
};

}  // namespace replaydb

#endif  // REPLAYDB_UTIL_PROGRESS_H_
