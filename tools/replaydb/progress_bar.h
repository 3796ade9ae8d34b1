// ProgressBar: draws the progress of the engine's long operations
// (LongOperationOptions::progress, include/replaydb/options.h) as a
// one-line bar redrawn in place with '\r':
//
//   import hopper [#########.....................]  31% 312000/1000000 steps 1.52M steps/s 0:21
//
// With an unknown total (0) the bar and percent are left out:
//
//   export atari 312000 steps 1.52M steps/s 0:21
//
// The rate and the elapsed time count from the operation's first update.
// Each update is drawn (the engine sends at most one per 100 ms, plus the
// last); the finished update ends the line with a newline, and an update
// after it starts a new line (a new operation). The shell's export, import,
// import-d4rl, verify and compact draw through one (tools/replaydb/shell/).
//
// Thread safety: Update may be called from any number of threads; draws
// are serialized.
#ifndef REPLAYDB_TOOLS_REPLAYDB_PROGRESS_BAR_H_
#define REPLAYDB_TOOLS_REPLAYDB_PROGRESS_BAR_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "replaydb/options.h"

namespace replaydb::tools {

class ProgressBar {
 public:
  static constexpr int kBarWidth = 30;

  // Draws on stderr when stderr is a terminal; otherwise draws nothing.
  ProgressBar();
  // Draws on `out` (which must outlive the ProgressBar) only when
  // `enabled`; when not, nothing at all is written to `out`.
  ProgressBar(FILE* out, bool enabled);
  // Ends a line that no finished update ended.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Draws `update`: '\r' and its line, padded over a longer previous one;
  // a newline after it when update.finished.
  void Update(const ProgressUpdate& update);
  // A callback for LongOperationOptions::progress that calls Update.
  // REQUIRES: this ProgressBar outlives every call of it.
  ProgressCallback Callback();

  // The line for `update` after `elapsed` (without '\r').
  static std::string Line(const ProgressUpdate& update,
                          std::chrono::steady_clock::duration elapsed);

 private:
  using Clock = std::chrono::steady_clock;

  FILE* const out_;
  const bool enabled_;

  std::mutex mu_;            // guards the fields below and writes to out_
  bool drawing_ = false;     // a line is drawn and not yet ended
  Clock::time_point start_;  // of the line being drawn
  size_t last_width_ = 0;
};

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_PROGRESS_BAR_H_
