// Transport: messages between processes over UCX's UCP API (libucx), the
// layer that `replaydb serve`, remote clients, replication and shards are
// built on (../shared/DESIGN.md, "The network tier").
//
// One UCP context; W worker threads, each with one ucp_worker in
// serialized mode (behind a mutex: its thread, or a caller sending or
// driving progress, holds it) and the endpoints (connections) placed on it. A
// transport that listens has a listener on worker 0, which hands each
// connection request to the next worker in turn; that worker accepts it.
// A message is a header (small: a FlatBuffer of rdma/wire.fbs, later) and a
// payload (bulk bytes), sent as one UCP active message: eager when small,
// rendezvous when large (UCX picks); the receiver gets both whole.
//
// Workers never block in a handler: the message and close handlers run on
// the thread holding the worker (its own, or a caller in Send or Drive) and
// must return promptly (hand waits to an executor).
// Calls from other threads (Connect, Close) are queued to the worker and it
// is woken with ucp_worker_signal; a Send goes out on the calling thread
// when the worker is free (each UCP worker is in serialized mode, held by
// one thread at a time), queued otherwise. A worker spins on
// ucp_worker_progress for a short while after activity, then sleeps in
// ucp_worker_wait (pure spinning starves a 2-core machine).
//
// Errors: every endpoint uses UCP_ERR_HANDLING_MODE_PEER, so a peer that
// dies or a connection that fails is reported (the close handler, and the
// completion of sends in flight) and never hangs a call; a peer that stops
// answering (hung, stopped, cut off) is found by heartbeats. A Send's `done`
// runs exactly once, on the thread holding the worker then (possibly the
// sender's, within Send).
//
// Thread safety: every public method may be called from any thread,
// including from the handlers.
#ifndef REPLAYDB_RDMA_TRANSPORT_H_
#define REPLAYDB_RDMA_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::rdma {

// A connection's id within its transport; never reused. 0 is no connection.
// Unique within the process (across Transports), never reused.
using ConnectionId = uint64_t;

// Where a large payload goes (TransportOptions::place_large): pieces in
// order that add up to its length (else, or when empty, a buffer of the
// transport's own), valid until the message is delivered or its connection
// ends, and `keep`, which the transport holds until the payload has come or
// its fetch failed (never after: whatever `keep` guards may go then).
struct PayloadPlaces {
  std::vector<std::span<std::byte>> pieces;
  std::shared_ptr<void> keep;
};

struct TransportOptions {
  // Worker threads (>= 1).
  int workers = 1;
  // Listen on this address (a dotted IPv4 address or a host name) and
  // `listen_port` (0: any free port; see Transport::port). Empty: no
  // listener (a client).
  std::string listen_host;
  uint16_t listen_port = 0;
  // A message arrived on `from`: its header and payload, whole. Runs on the
  // connection's worker thread.
  std::function<void(ConnectionId from, std::string header, std::string payload)> on_message;
  // A message whose payload comes by rendezvous (a large one) is about to
  // be fetched: where its `length` bytes go (PayloadPlaces), or nothing for
  // a buffer of the transport's own. A placed message is delivered with an
  // empty payload. `queued_unplaced`: messages that came before it on the
  // connection wait to be delivered (a payload still coming), and some of
  // them are not placed. Runs where on_message runs; may be empty.
  std::function<PayloadPlaces(ConnectionId from, std::string_view header, size_t length,
                              bool queued_unplaced)>
      place_large;
  // A connection was accepted (listeners only), from `peer` (HOST:PORT).
  // Runs on its worker thread.
  std::function<void(ConnectionId, const std::string& peer)> on_accept;
  // A connection ended: closed by Close on this side, or failed or closed
  // by the peer (`why` says which). Once per connection, on its worker
  // thread; nothing more arrives from it.
  std::function<void(ConnectionId, const Status& why)> on_close;
  // How long a worker spins on progress after activity before it sleeps.
  std::chrono::microseconds spin{50};
  // Liveness: every connection carries a heartbeat each `heartbeat`
  // (0: none); one that hears nothing from its peer (no message, no
  // heartbeat) for `missed_heartbeats` of them ends, Unavailable. UCX alone
  // notices a peer that died, but not one that hangs or a network partition
  // (tens of seconds and more). Both ends must agree on the interval.
  // Ten missed (1 s at the default interval), as etcd's election timeout
  // is ten heartbeats: with three (300 ms), a live process the scheduler
  // held back that long on a loaded two-core machine (a parallel ctest)
  // lost its connections ("Connection reset by remote peer": its server
  // ended them as silent). Still well inside a coordinator's lease (2 s).
  std::chrono::milliseconds heartbeat{100};
  int missed_heartbeats = 10;
};

// UCX settings every Transport uses (NAME, VALUE): TCP segments of 256 KiB,
// not 8 KiB, no rendezvous over TCP's PUT (which kept TCP lanes, and their
// polling, on connections over shared memory), and shared memory between
// processes of one host: MM_ERROR_HANDLING=y, where UCX_TLS loads sysv or
// posix (SharedMemoryTransportsLoaded). UCX 1.13's sysv and posix transports
// offer the peer failure handling our endpoints require
// (UCP_ERR_HANDLING_MODE_PEER) only with it; without it two local processes
// talk over TCP on loopback (a small call 6x slower). Each Transport, as it
// starts, sets UCX_NAME in the environment to VALUE where it is not set
// already (UCX reads them from there): UCX_MM_ERROR_HANDLING=n keeps local
// processes on TCP. A ceiling measured with ucx_perftest runs with the same.
std::vector<std::pair<std::string, std::string>> UcxSettings();
// Whether UCX_TLS `tls` (nullptr or empty: UCX's default, every transport)
// loads a shared-memory transport between processes (sysv or posix: "sm",
// "shm", "mm", "sysv", "posix", "all"; a list that starts with ^ excludes).
bool SharedMemoryTransportsLoaded(const char* tls);

// Batches (WIRE.md, "Batches"): several messages to one peer in one active
// message, each a 4-byte header length and a 4-byte payload length
// (little-endian), then the header and the payload.
void AppendToBatch(std::string* batch, std::string_view header, std::string_view payload);
// Calls `each` with every message of `batch` in order until it returns
// false. Corruption naming `from` and the byte where the batch breaks when
// a length runs past its end (the messages before it were given to `each`).
Status ForEachInBatch(
    std::string_view batch, std::string_view from,
    const std::function<bool(std::string_view header, std::string_view payload)>& each);

// Memory that peers read without this process's help (Transport::Read):
// allocated and registered by UCX (ucp_mem_map with UCP_MEM_MAP_ALLOCATE:
// System V shared memory by default, posix with UCX_ALLOC_PRIO=md:posix),
// which UCX 1.13 reads zero-copy only where UCX allocated it (not from
// memory the process allocated itself; docs/status.md, issue 33). Unmapped
// when destroyed; may outlive its Transport (it keeps the UCP context).
class SharedMemory {
 public:
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // What a peer needs to read it: the packed remote key (ucp_rkey_pack),
  // for Transport::ImportKey, and the address reads name (data()).
  const std::string& key() const { return key_; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }

 private:
  friend class Transport;
  SharedMemory() = default;
  std::shared_ptr<void> context_;  // ucp_context_h, cleaned up by its last holder
  void* handle_ = nullptr;   // ucp_mem_h
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string key_;
};

class Transport {
 public:
  // Starts the workers (and the listener). IOError naming the address when
  // it cannot listen (in use, not local); InvalidArgument for bad options.
  static Result<std::unique_ptr<Transport>> Start(TransportOptions options);
  // Closes every connection (peers see them end) and stops the workers.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // The port the listener listens on (the one picked when listen_port was
  // 0); 0 without a listener.
  uint16_t port() const;

  // Connects to a listener at `host`:`port`, waiting until the connection
  // is up or `timeout` passes. Unavailable naming the address when nothing
  // answers there (refused, unreachable) or the time ran out.
  Result<ConnectionId> Connect(const std::string& host, uint16_t port,
                               std::chrono::milliseconds timeout);

  // Sends one message on `to`; `done` (may be empty) runs once it has been
  // sent (the buffers are the transport's from the call on) or failed:
  // Unavailable once the connection has ended, NotFound for an id this
  // transport never had or closed. Messages on one connection arrive in the
  // order they were sent.
  void Send(ConnectionId to, std::string header, std::string payload,
            std::function<void(const Status&)> done = {});

  // Send, with the payload in pieces sent in order without copying them
  // (the receiver gets them as one payload): `keep` holds them alive until
  // the send is done.
  void SendParts(ConnectionId to, std::string header, std::vector<std::span<const std::byte>> parts,
                 std::shared_ptr<const void> keep, std::function<void(const Status&)> done = {});

  // Progresses `connection`'s worker on the calling thread until `done()`
  // is true or `budget` passes; returns done(). A caller that waits for a
  // reply this way takes no thread switch to see it (the worker's thread
  // parks meanwhile); one whose reply takes longer sleeps after the budget
  // and the worker's thread takes over. `done` runs on this thread; the
  // handlers may run here too. Returns done() at once from a handler.
  bool Drive(ConnectionId connection, const std::function<bool()>& done,
             std::chrono::microseconds budget);

  // Ends the connection (the peer sees it end); on_close follows. A no-op
  // for an id already closed. With a `grace`, it ends that much later
  // unless the peer closes it first: a peer told why it is turned away
  // (a refused token) closes itself once it has read that, and an end by
  // us could reach it first (over shared memory, the end comes by another
  // path than the messages before it). What arrives meanwhile is still
  // delivered.
  void Close(ConnectionId connection,
             std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  // A payload that on_message handed over, given back once its receiver is
  // done with it: a large payload that arrives later is received into it,
  // without a fresh buffer's allocation, page faults and zero-filling (a
  // 1 MiB append cost all three on every call). Buffers of less than
  // kMinSpareBytes or more than kMaxSpareBytes are freed, as are those
  // past kMaxSpareTotal bytes kept. Any thread.
  void Recycle(std::string buffer);
  static constexpr size_t kMinSpareBytes = size_t{4} << 10;
  static constexpr size_t kMaxSpareBytes = size_t{16} << 20;
  static constexpr size_t kMaxSpareTotal = size_t{64} << 20;
  // Payloads received into a recycled buffer so far (for tests).
  uint64_t reused_buffers() const;

  // The number of connections open now (for tests and the server's log).
  int open_connections() const;
  // Messages sent so far inside batches (several small messages that
  // handlers sent during one progress of a worker, to one peer, as one
  // active message; WIRE.md, "Batches").
  uint64_t batched_messages() const;

  // The UCX transports that carry `connection`, e.g. "sysv/memory,
  // tcp/lo" (each lane's transport and device, once, in UCX's lane order),
  // as UCX configured the endpoint so far (a connection just made may not
  // have all its lanes yet). NotFound for a connection this transport does
  // not have.
  Result<std::string> Lanes(ConnectionId connection);

  // One-sided reads (GEAR's path: a learner reads a server's memory
  // without the server's CPU).
  //
  // `bytes` (> 0) of SharedMemory that peers may read; ResourceExhausted
  // naming the size when UCX cannot map it.
  Result<std::unique_ptr<SharedMemory>> AllocateShared(size_t bytes);
  // A peer's SharedMemory::key() made usable on `connection` (unpacked on
  // its endpoint): a handle for ReadMany, valid until the connection ends.
  // UCX cannot check a key: one that is not a peer's key() may crash the
  // process (keys come only from the server a client trusts). NotFound or
  // Unavailable as Send.
  Result<uint64_t> ImportKey(ConnectionId connection, std::string_view key);
  // Reads on one connection, made at once (a sample's windows): each
  // piece's into.size() bytes at `address` of the peer's memory whose key
  // is `key` (from ImportKey on this connection) into `into`. `done` runs
  // once when all are done, with the first failure if any failed
  // (Unavailable when the connection ended; InvalidArgument, and none is
  // made, when one names a key this connection never imported). Over TCP
  // UCX emulates such reads with messages that the peer's worker must
  // answer (OneSided says whether it need not). Reads over shared memory
  // are copied by the thread that makes them (the caller's, when the worker
  // is free); one that copies long progresses the worker when a heartbeat
  // falls due, so handlers (on_message, on_close, completions) may then run
  // on the caller's thread, as they do in Drive.
  struct ReadPiece {
    uint64_t key = 0;
    uint64_t address = 0;
    std::span<std::byte> into;
  };
  void ReadMany(ConnectionId connection, std::vector<ReadPiece> pieces,
                std::function<void(const Status&)> done);
  // Whether reads on `connection` are one-sided: every lane that reads
  // runs over shared memory or RDMA hardware, none over TCP. NotFound for
  // a connection this transport does not have.
  Result<bool> OneSided(ConnectionId connection);
  // ReadMany, then drives the connection until the reads are done or
  // `timeout` passes (DeadlineExceeded). The reads may land after a
  // timeout: `keep`, which should own the pieces' memory then, is held until
  // they are done or failed.
  Status ReadAll(ConnectionId connection, std::vector<ReadPiece> pieces,
                 std::chrono::milliseconds timeout, std::shared_ptr<const void> keep = nullptr);

 private:
  class Impl;
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_TRANSPORT_H_
