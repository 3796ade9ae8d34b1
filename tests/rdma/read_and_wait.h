// Test helper: a Transport read, waited for by driving its connection.
#ifndef REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_
#define REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
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
  struct State {
    std::mutex mu;
    std::optional<Status> status;
  };
  auto state = std::make_shared<State>();
  auto done = [state](const Status& s) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->status = s;
  };
  if (pieces != nullptr) {
    client.ReadMany(to, std::move(*pieces), done);
  } else {
    client.Read(to, key, address, into, done);
  }
  auto finished = [&] {
    std::lock_guard<std::mutex> lock(state->mu);
    return state->status.has_value();
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!client.Drive(to, finished, std::chrono::milliseconds(10)) &&
         std::chrono::steady_clock::now() < give_up) {
  }
  std::lock_guard<std::mutex> lock(state->mu);
  return state->status.value_or(Status::DeadlineExceeded("the read never finished"));
}

}  // namespace replaydb::rdma::testing_read

#endif  // REPLAYDB_TESTS_RDMA_READ_AND_WAIT_H_
