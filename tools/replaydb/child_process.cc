#include "tools/replaydb/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace replaydb::tools {

using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<ChildProcess>> ChildProcess::Start(std::vector<std::string> argv) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return Status::IOError("pipe2: " + std::string(std::strerror(errno)));
  }
  // posix_spawn, not fork: the child shares this process's memory until it
  // execs (glibc's clone with CLONE_VM | CLONE_VFORK), so no page table is
  // copied and only the calling thread waits. A fork of a large process
  // (a test binary under a sanitizer: gigabytes of shadow memory) held up
  // its other threads, whose connections' heartbeats then stopped long
  // enough for their servers to end them.
  posix_spawn_file_actions_t actions;
  int e = ::posix_spawn_file_actions_init(&actions);
  if (e == 0) e = ::posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  if (e == 0) e = ::posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  // Nothing else of this process's: a listening socket inherited would
  // hold its port for as long as the child lives (UCX opens its sockets
  // without close-on-exec).
  if (e == 0) e = ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  if (e == 0) e = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (e != 0) {
    ::close(out[0]);
    return Status::IOError("starting " + argv[0] + ": " + std::string(std::strerror(e)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out[0]));
}

ChildProcess::ChildProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {
  reader_ = std::thread([this] { ReadLoop(); });
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // (A process the child started may still hold the pipe: the reader stops
  // by its flag, within one poll.)
  stop_.store(true);
  reader_.join();
  ::close(fd_);
}

void ChildProcess::ReadLoop() {
  char buf[4096];
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;
    const ssize_t n = ready > 0 ? ::read(fd_, buf, sizeof(buf)) : -1;
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (n <= 0) {
      ended_ = true;
      cv_.notify_all();
      return;
    }
    output_.append(buf, static_cast<size_t>(n));
    cv_.notify_all();
  }
}

std::string ChildProcess::output() const {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

std::string ChildProcess::WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  std::string found;
  const auto matches = [&] {
    std::smatch m;
    if (!std::regex_search(output_, m, pattern)) return false;
    found = m.size() > 1 ? m[1].str() : m[0].str();
    return true;
  };
  // (Each wake-up searches again what came so far.)
  cv_.wait_until(lock, until, [&] { return matches() || ended_; });
  return found;
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      // The rest of its output (bounded: a process it started may hold the
      // pipe open).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return ended_; });
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

void ChildProcess::Signal(int sig) { ::kill(pid_, sig); }

// A TCP port free on 127.0.0.1 now (0 when none could be had).
int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace replaydb::tools
