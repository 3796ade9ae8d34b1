// ProbeTransportReads (replaydb/server.h): one-sided reads between two
// transports of this process over 127.0.0.1.
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "rdma/transport.h"
#include "replaydb/server.h"

namespace replaydb {

Result<TransportReadProbe> ProbeTransportReads(size_t shared_bytes, size_t read_bytes, int reads,
                                               std::chrono::milliseconds duration) {
  using Clock = std::chrono::steady_clock;
  if (read_bytes == 0 || reads <= 0 || read_bytes > shared_bytes) {
    return Status::InvalidArgument(
        "read probe: " + std::to_string(reads) + " reads of " + std::to_string(read_bytes) +
        " bytes do not fit " + std::to_string(shared_bytes) + " bytes of shared memory");
  }
  // The probe measures reads, not liveness: its connection tolerates 10 s
  // of silence (3 missed beats of 100 ms, the default then, ended it on a loaded
  // two-core machine under ThreadSanitizer: "connection 256 has ended").
  rdma::TransportOptions co;
  co.heartbeat = std::chrono::seconds(1);
  co.missed_heartbeats = 10;
  rdma::TransportOptions so = co;
  so.listen_host = "127.0.0.1";
  REPLAYDB_ASSIGN_OR_RETURN(auto server, rdma::Transport::Start(so));
  REPLAYDB_ASSIGN_OR_RETURN(auto shared, server->AllocateShared(shared_bytes));
  std::mt19937_64 rng(17);
  for (size_t i = 0; i < shared_bytes; i += 4096) shared->data()[i] = static_cast<std::byte>(rng());
  REPLAYDB_ASSIGN_OR_RETURN(auto client, rdma::Transport::Start(co));
  REPLAYDB_ASSIGN_OR_RETURN(const rdma::ConnectionId to,
                            client->Connect("127.0.0.1", server->port(), std::chrono::seconds(10)));
  REPLAYDB_ASSIGN_OR_RETURN(const uint64_t key, client->ImportKey(to, shared->key()));
  TransportReadProbe probe;
  REPLAYDB_ASSIGN_OR_RETURN(probe.one_sided, client->OneSided(to));
  if (!probe.one_sided) {
    // UCX 1.13 emulates such reads with messages the peer's worker answers,
    // and aborts the peer's process when an answer cannot go out (seen:
    // "ucp_get_req_handler ... Fatal: unexpected error: Endpoint timeout"
    // under ThreadSanitizer): nothing replaydb would use, nothing to measure.
    REPLAYDB_ASSIGN_OR_RETURN(const std::string lanes, client->Lanes(to));
    return Status::NotSupported("read probe: reads between transports of this host would be "
                                "emulated by UCX, not one-sided (lanes " + lanes +
                                "; shared memory needs UCX_MM_ERROR_HANDLING=y)");
  }
  std::vector<std::byte> into(read_bytes * static_cast<size_t>(reads));
  // A batch's reads; what they report is shared with their callback, which
  // a batch given up on may still run later.
  struct Reads {
    std::atomic<bool> done{false};
    std::mutex mu;
    Status status;
  };
  auto batch = [&]() -> Status {
    auto state = std::make_shared<Reads>();
    std::vector<rdma::Transport::ReadPiece> pieces;
    pieces.reserve(static_cast<size_t>(reads));
    for (int i = 0; i < reads; ++i) {
      const uint64_t at = rng() % (shared_bytes - read_bytes + 1) / 64 * 64;
      pieces.push_back({key, shared->address() + at,
                        std::span(into.data() + static_cast<size_t>(i) * read_bytes, read_bytes)});
    }
    client->ReadMany(to, std::move(pieces), [state](const Status& s) {
      {
        std::lock_guard<std::mutex> lock(state->mu);
        state->status = s;
      }
      state->done.store(true, std::memory_order_release);
    });
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    while (!client->Drive(to, [&] { return state->done.load(std::memory_order_acquire); },
                          std::chrono::milliseconds(10)) &&
           Clock::now() < give_up) {
    }
    if (!state->done.load()) {
      client.reset();  // ends the reads still in flight into `into` before it goes
      return Status::Unavailable("read probe: reads did not finish in 30 s");
    }
    std::lock_guard<std::mutex> lock(state->mu);
    return state->status;
  };
  REPLAYDB_RETURN_IF_ERROR(batch());  // warm-up: pages mapped, keys resolved
  int64_t batches = 0;
  const auto start = Clock::now();
  do {
    REPLAYDB_RETURN_IF_ERROR(batch());
    ++batches;
  } while (Clock::now() - start < duration);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  probe.bytes_per_second =
      static_cast<double>(batches) * static_cast<double>(into.size()) / seconds;
  return probe;
}

}  // namespace replaydb
