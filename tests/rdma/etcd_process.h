// A real etcd (Debian's etcd-server, /usr/bin/etcd) as a process of the
// test's own, on free loopback ports, its data in a directory the test
// gives: for the coordinator's tests (coord_test.cc) and the failover tests
// (tests/tools/failover_test.cc). Killed and reaped when it goes.
#ifndef REPLAYDB_TESTS_RDMA_ETCD_PROCESS_H_
#define REPLAYDB_TESTS_RDMA_ETCD_PROCESS_H_

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tools/replaydb/child_process.h"

namespace replaydb::testing_util {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

inline uint16_t FreePort() {
  return static_cast<uint16_t>(tools::FreeLoopbackPort());
}

class EtcdProcess {
 public:
  // Why etcd cannot run here (empty: it can).
  static std::string Missing() {
    return std::filesystem::exists(kEtcdBinary)
               ? ""
               : std::string(kEtcdBinary) +
                     " is not installed (Debian's etcd-server; tools/scripts/install-deps.sh "
                     "--tests installs it)";
  }
  // Started on two loopback ports free at the time; tests that run at once
  // may take a port between its choice and etcd's bind: then again, on
  // other ports (5 tries). On `host`'s address (a test's network
  // namespace's) rather than 127.0.0.1 where given.
  explicit EtcdProcess(std::string dir, std::string host = "127.0.0.1")
      : dir_(std::move(dir)), host_(std::move(host)) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      client_port_ = FreePort();
      peer_port_ = FreePort();
      if (Launch()) return;
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    ADD_FAILURE() << "etcd did not start on free ports in 5 tries";
  }
  ~EtcdProcess() { Kill(); }
  // HOST:PORT of its client API.
  std::string endpoint() const { return host_ + ":" + std::to_string(client_port_); }
  // SIGSTOP (returning once the process is stopped: kill() returns before
  // a running thread of it stops), SIGCONT.
  void Signal(int signal) {
    if (!child_) return;
    ::kill(child_->pid(), signal);
    if (signal != SIGSTOP) return;
    const std::string stat = "/proc/" + std::to_string(child_->pid()) + "/stat";
    for (int i = 0; i < 200; ++i) {  // 2 s at most
      std::ifstream in(stat);
      std::string line;
      std::getline(in, line);
      const size_t paren = line.rfind(')');
      if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  void Kill() {
    if (!child_) return;
    ::kill(child_->pid(), SIGKILL);
    child_->Wait(std::chrono::seconds(30));
    child_.reset();
  }
  // Started again on the same ports and data (after Kill); a port another
  // test took meanwhile is waited for (5 s at most).
  void Start() {
    for (int attempt = 0; attempt < 25; ++attempt) {
      if (Launch()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "etcd did not start again on " << endpoint();
  }

 private:
  // Starts etcd and waits until it serves: false (and no process) when a
  // port was in use; a test failure when it did not start otherwise.
  bool Launch() {
    const std::string client = "http://" + endpoint();
    const std::string peer = "http://" + host_ + ":" + std::to_string(peer_port_);
    auto started = tools::ChildProcess::Start(
        {kEtcdBinary, "--name", "test", "--data-dir", dir_, "--listen-client-urls", client,
         "--advertise-client-urls", client, "--listen-peer-urls", peer,
         "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=" + peer});
    if (!started.ok()) {
      ADD_FAILURE() << started.status().ToString();
      return true;
    }
    child_ = std::move(started).value();
    const std::string said =
        child_->WaitFor(std::regex("(ready to serve client requests|address already in use)"),
                        std::chrono::seconds(30));
    if (said == "address already in use") {
      Kill();
      return false;
    }
    EXPECT_FALSE(said.empty()) << "etcd did not start; its output:\n" << child_->output();
    return true;
  }

  std::string dir_;
  std::string host_;
  uint16_t client_port_ = 0;
  uint16_t peer_port_ = 0;
  std::unique_ptr<tools::ChildProcess> child_;
};

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_RDMA_ETCD_PROCESS_H_
