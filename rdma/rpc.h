// Requests and replies over a Transport (rdma/transport.h) in the wire
// protocol (rdma/WIRE.md): a client's calls matched to their replies by
// request id and bounded by their timeouts; a server whose handlers run on
// an executor, off the transport's workers, so that a call that waits (the
// rate limiter, a full hot tier) never holds up a worker.
//
// A connection starts with Hello (the client's protocol version and name)
// and Welcome; a client of another protocol version is refused with a
// Failure naming both versions, and the connection ends.
//
// Thread safety: every method may be called from any thread.
#ifndef REPLAYDB_RDMA_RPC_H_
#define REPLAYDB_RDMA_RPC_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdma/token.h"
#include "rdma/transport.h"
#include "rdma/wire.h"
#include "replaydb/status.h"

namespace replaydb::rdma {

// A message received: its header's bytes (verified) and its payload.
struct Message {
  std::string header_bytes;
  std::string payload;
  // The payload went where the call's Placement put it (payload is empty).
  bool placed = false;
  const wire::fb::Header* header() const {
    return wire::fb::GetHeader(header_bytes.data());
  }
};

// A request sent and its reply still to come (RpcClient::Start).
struct PendingCall;

// Where a call's reply payload goes when it comes by rendezvous (a large
// one): given the reply's header (verified) and the payload's length, the
// pieces that add up to it (they must stay valid until the call returns),
// or nothing for a buffer of the client's own (Message::payload). Runs on
// whichever thread progresses the connection, while the caller waits.
using Placement = std::function<std::vector<std::span<std::byte>>(const wire::fb::Header& reply,
                                                                  size_t length)>;

struct RpcClientOptions {
  std::string client_name = "client";
  // For the connection and the handshake.
  std::chrono::milliseconds connect_timeout{10000};
  TransportOptions transport;  // its handlers are the client's own
  // How long a caller progresses the connection itself waiting for a reply
  // (Transport::Drive) before it sleeps until the reply comes: quick calls
  // then take no thread switch. 0: always sleep.
  std::chrono::microseconds drive{200};
  // Tests only: the protocol version the Hello claims.
  uint32_t protocol_version = kProtocolVersion;
  // The secret to prove when the server asks for a token (rdma/token.h);
  // empty: none (a server that requires one refuses the client).
  std::string token;
};

class RpcClient {
 public:
  // Connects to a server at `host`:`port` and says Hello. Unavailable when
  // nothing answers in time; FailedPrecondition, with the server's words,
  // when it refuses the client (another protocol version).
  static Result<std::unique_ptr<RpcClient>> Connect(const std::string& host, uint16_t port,
                                                    RpcClientOptions options = {});
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Sends a request and waits for its reply. `encode` builds the request's
  // header from the request id it is given (and `fields`' other values);
  // the timeout is sent along (the server gives up on a request that waited
  // that long) and bounds the wait here: DeadlineExceeded naming the server
  // when it passes (a late reply is dropped); Cancelled when the calling
  // thread's interrupt check (replaydb/interrupt.h) says so. A Failure reply is returned as
  // its Status; Unavailable when the connection ends first.
  Result<Message> Call(const std::function<std::string(const HeaderFields&)>& encode,
                       std::string payload, std::chrono::milliseconds timeout,
                       uint32_t table_id = 0, Placement place = {});

  // Call in two halves, for requests sent ahead of their replies: Start
  // sends (a call that cannot be sent completes at once with why), Await
  // waits for the reply as Call does (once per call), and Ready says
  // whether it has come. Replies may come in any order.
  std::shared_ptr<PendingCall> Start(
      const std::function<std::string(const HeaderFields&)>& encode, std::string payload,
      std::chrono::milliseconds timeout, uint32_t table_id = 0, Placement place = {});
  // Start with a payload sent without a copy, in pieces sent in order
  // (the server gets them as one payload): `keep` holds their bytes alive
  // until the send is done (WaitSent). `on_sent` (may be empty) runs once
  // the send is done or failed, after WaitSent would return, on whichever
  // thread progresses the connection (not for a call refused at once);
  // it may start calls.
  std::shared_ptr<PendingCall> Start(
      const std::function<std::string(const HeaderFields&)>& encode,
      std::vector<std::span<const std::byte>> parts, std::shared_ptr<const void> keep,
      std::chrono::milliseconds timeout, uint32_t table_id = 0,
      std::function<void()> on_sent = {});
  // Whether `call`'s send is done (or failed, or never made).
  static bool Sent(const PendingCall& call);
  // Waits until `call`'s request has been sent, or failed (its bytes are
  // then no longer read: memory that `keep` did not own may be reused), with
  // no time limit: a send ends when the peer has its bytes or the connection
  // ends (heartbeats bound that).
  void WaitSent(PendingCall& call);
  Result<Message> Await(PendingCall& call);
  static bool Ready(const PendingCall& call);
  // Waits until `call`'s reply has come (true) or `until` passes (false;
  // the call stays pending). Interruptible as Call.
  bool WaitFor(PendingCall& call, std::chrono::steady_clock::time_point until);

  // The server's name and address, for messages.
  const std::string& server_name() const;
  const std::string& address() const;
  // False once the connection has ended (every call then fails Unavailable).
  bool connected() const;
  // Whether the server grants this client reads only (its token's).
  bool read_only() const;
  // Ends the connection now: calls in flight and every later one fail with
  // `why`.
  void Close(const Status& why);
  // The client's transport and its connection to the server (one-sided
  // reads of the server's memory: Transport::ReadMany).
  Transport& transport() const;
  ConnectionId connection() const;

 private:
  class Impl;
  explicit RpcClient(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// Whether `s` is RpcClient::Call's own DeadlineExceeded (no reply came in
// time), not one the server sent: a call that may have been served must
// not simply be sent again.
bool IsNoReply(const Status& s);

// Builds the reply to `request`: a header made with its request id (and
// table id) and a payload; a non-OK Status is sent as a Failure.
struct Reply {
  std::string header_bytes;
  std::string payload;
  // More of the payload, after `payload`: pieces sent without a copy, which
  // `keep` holds alive until they are sent.
  std::vector<std::span<const std::byte>> parts;
  std::shared_ptr<const void> keep;
};
struct ReplySender;

// A request as a server's handler sees it.
struct Request {
  ConnectionId connection = 0;
  Message message;
  // When the request's timeout passes (time_point::max(): none).
  std::chrono::steady_clock::time_point deadline;
  // The connection's token grants reads only.
  bool read_only = false;
  // Set for RpcServerOptions::try_inline's attempt: the handler must not
  // wait (a call that would, returns DeadlineExceeded at once).
  bool no_wait = false;
  // Its strand (RpcServerOptions::strand_of; 0: none).
  uint64_t strand = 0;
  // Set by a handler whose request is not done (it waited as long as one
  // run may, and its deadline has not passed): the request runs again
  // later, still first in its strand, and nothing is replied this time.
  // `progress` is the handler's own, kept between runs (e.g. rows taken).
  bool requeue = false;
  int64_t progress = 0;
  // When its first run began.
  std::chrono::steady_clock::time_point started{};
  // Its payload went where RpcServerOptions::place_request put it (the
  // payload is empty): what that returned as `keep`.
  std::shared_ptr<void> placed;

  // For a handler that replies later (once what the reply says has
  // happened): Defer returns the function that sends the reply (call it
  // once, from any thread; a reply for a connection or server gone by then
  // goes nowhere), and the server then sends nothing for this run, whatever
  // the handler returns. The request's strand goes on at once.
  using Responder = std::function<void(Result<Reply>)>;
  Responder Defer();
  bool deferred = false;
  std::shared_ptr<ReplySender> sender;  // set by the server
};

using RequestHandler = std::function<Result<Reply>(Request& request)>;
// Serves a request on the transport's worker, without a thread switch:
// a reply (or a Failure's Status), or nullopt for a request that goes to
// the executor (it would wait, or take long). Must return promptly.
using InlineHandler = std::function<std::optional<Result<Reply>>(Request& request)>;

struct RpcServerOptions {
  std::string server_name = "replaydb";
  // Executor threads for requests (handlers may wait).
  int threads = 4;
  // Requests waiting for an executor thread, at most: beyond that a request
  // is refused at once, ResourceExhausted (backpressure, not an unbounded
  // queue).
  size_t max_queued = 1024;
  TransportOptions transport;  // listen_host/port, workers; handlers are the server's own
  // A connection ended: run on the executor (not a transport worker) after
  // the requests already queued, so that the server can drop what the
  // connection held (its writers). May be empty.
  std::function<void(ConnectionId)> on_disconnect;
  // When not empty, a client must prove one of these tokens (challenge and
  // response, rdma/token.h) before its requests are served; what the token
  // grants comes with each request (Request::read_only).
  std::vector<Token> tokens;
  // A line for the server's log: connections accepted (with the client's
  // name once it said Hello), refused and ended. May be empty; called from
  // the server's threads, several at once.
  std::function<void(const std::string& line)> log;
  // When set, tried first for every request after the handshake, on the
  // worker that received it (see InlineHandler); a request of a strand only
  // when none of its strand's is queued or running. May be empty.
  InlineHandler try_inline;
  // Requests of one connection with the same strand (not 0) run one at a
  // time, in the order they came: a client may send them ahead of their
  // replies (a writer's appends). Other requests run in any order, several
  // at once. May be empty (no strands).
  std::function<uint64_t(const wire::fb::Header&)> strand_of;
  // A request's large payload is about to be fetched: where it goes
  // (TransportOptions::place_large), asked only of a greeted connection's
  // request whose strand has nothing queued or running and behind nothing
  // unplaced. The request then comes with an empty payload and
  // Request::placed holding PayloadPlaces::keep (which also stays held
  // until the payload came). May be empty.
  std::function<PayloadPlaces(ConnectionId from, const wire::fb::Header& request, size_t length)>
      place_request;
};

class RpcServer {
 public:
  // Starts listening. `handler` runs on the executor for every request
  // after the handshake (Ping is answered by the server itself).
  static Result<std::unique_ptr<RpcServer>> Start(RpcServerOptions options,
                                                  RequestHandler handler);
  // Stops taking requests, ends every connection, waits for the handlers
  // running.
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  uint16_t port() const;
  int open_connections() const;
  // The server's transport (its memory for one-sided reads: AllocateShared).
  Transport& transport() const;

 private:
  class Impl;
  explicit RpcServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_RPC_H_
