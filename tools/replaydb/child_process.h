// A child process with its stdout and stderr read through a pipe: what the
// remote benches (`replaydb serve`, ucx_perftest) and the serve tests start.
// A thread of its own reads the pipe as the child writes, so that a child
// that writes much while nobody waits for its output (a server logging its
// connections) never blocks on a full pipe.
//
// Thread safety: one thread at a time (the reader is internal).
#ifndef REPLAYDB_TOOLS_REPLAYDB_CHILD_PROCESS_H_
#define REPLAYDB_TOOLS_REPLAYDB_CHILD_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::tools {

// A TCP port free on 127.0.0.1 now (bound, read and closed; 0 when none
// could be had): for the servers the benches and tests start.
int FreeLoopbackPort();

class ChildProcess {
 public:
  // Runs `argv` (argv[0] found on PATH) with this process's environment,
  // its stdout and stderr into the pipe and no other descriptor of this
  // process's (posix_spawn: nothing of this process is copied, and its
  // other threads go on meanwhile). IOError naming argv[0] when it cannot
  // be started.
  static Result<std::unique_ptr<ChildProcess>> Start(std::vector<std::string> argv);
  // Killed (SIGKILL) and reaped if it has not exited.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads output until `pattern` matches (its first group, or all of it),
  // `timeout` passes or the output ends (then empty).
  std::string WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the exit, reading the rest of the output: the
  // exit status (128 + the signal when killed by one), or -1.
  int Wait(std::chrono::milliseconds timeout);
  void Signal(int sig);
  pid_t pid() const { return pid_; }
  // What it wrote so far.
  std::string output() const;

 private:
  ChildProcess(pid_t pid, int fd);
  // The reader thread: appends what comes until the pipe ends or stop_.
  void ReadLoop();
  pid_t pid_;
  int fd_;
  bool reaped_ = false;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;  // output_ grew, or the pipe ended
  std::string output_;          // guarded by mu_
  bool ended_ = false;          // guarded by mu_: the pipe's write ends all closed
  std::thread reader_;
};

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_CHILD_PROCESS_H_
