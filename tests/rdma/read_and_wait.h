// Test helpers: Transport reads, waited for by driving their connection, and
// shared memory between transports for a scope.
#ifndef REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_
#define REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "rdma/transport.h"
#include "replaydb/status.h"

namespace replaydb::rdma::testing_read {

// Reads `into.size()` bytes at `address` through `key` on `to` (or, when
// `pieces` is given, a ReadMany of them), driving the connection until the
// read is done, at most 30 s: its status.
inline Status ReadAndWait(Transport& client, ConnectionId to, uint64_t key, uint64_t address,
                          std::span<std::byte> into,
                          std::vector<Transport::ReadPiece>* pieces = nullptr) {
  if (pieces != nullptr) {
    return client.ReadAll(to, std::move(*pieces), std::chrono::seconds(30));
  }
  return client.ReadAll(to, {{key, address, into}}, std::chrono::seconds(30));
}

// Sets an environment variable for the scope, or unsets it (value
// nullptr): this process's transports and the server process, which
// inherits it, read it when they start.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Shared memory between transports made in the scope, whatever the
// environment says (UCX_TLS=sm,tcp, UCX_MM_ERROR_HANDLING=y: the transport's
// default, rdma/transport.h): their reads are one-sided (over TCP UCX would
// emulate them, and UCX 1.13 aborts a process whose answer to such a read
// cannot go out).
class SharedMemoryOn {
 private:
  ScopedEnv tls_{"UCX_TLS", "sm,tcp"};
  ScopedEnv errors_{"UCX_MM_ERROR_HANDLING", "y"};
};

}  // namespace replaydb::rdma::testing_read

#endif  // REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_
