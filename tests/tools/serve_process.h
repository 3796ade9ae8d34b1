// `replaydb serve ARGS...` (or another command) as a process of its own,
// for the tests that start servers (serve_test.cc, replication_test.cc):
// its stdout and stderr
// read through a pipe; killed and reaped when it goes.
#ifndef REPLAYDB_TESTS_TOOLS_SERVE_PROCESS_H_
#define REPLAYDB_TESTS_TOOLS_SERVE_PROCESS_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tools/replaydb/child_process.h"

#ifndef REPLAYDB_TOOL_PATH
#error "REPLAYDB_TOOL_PATH must name the replaydb binary (set by CMakeLists.txt)"
#endif

namespace replaydb::testing_util {

class ServeProcess {
 public:
  // `command`: another of the tool's commands (`replaydb promote ...`).
  // `prefix`: what runs the tool (`ip netns exec NS`); empty: itself.
  explicit ServeProcess(std::vector<std::string> args, const std::string& command = "serve",
                        std::vector<std::string> prefix = {}) {
    args.insert(args.begin(), {REPLAYDB_TOOL_PATH, command});
    args.insert(args.begin(), prefix.begin(), prefix.end());
    auto started = tools::ChildProcess::Start(std::move(args));
    EXPECT_OK(started.status());
    if (started.ok()) child_ = std::move(started).value();
  }
  // Reads output until `pattern` matches some of it (first group returned)
  // or `timeout` passes (empty).
  std::string WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout) {
    return child_ ? child_->WaitFor(pattern, timeout) : "";
  }
  // Waits for the exit (bounded), reading the rest of the output; the exit
  // status, or -1 when it did not exit in time.
  int Exit(std::chrono::milliseconds timeout) { return child_ ? child_->Wait(timeout) : -1; }
  pid_t pid() const { return child_ ? child_->pid() : -1; }
  std::string output() const { return child_ ? child_->output() : ""; }

 private:
  std::unique_ptr<tools::ChildProcess> child_;
};

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_TOOLS_SERVE_PROCESS_H_
