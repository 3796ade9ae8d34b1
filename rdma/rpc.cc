#include "rdma/rpc.h"

#include <flatbuffers/flatbuffers.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "engine/rate_limiter/rate_limiter.h"
#include "util/interrupt.h"

namespace replaydb::rdma {
namespace {

namespace fb = wire::fb;
using Clock = std::chrono::steady_clock;

int64_t TimeoutMs(std::chrono::milliseconds timeout) {
  return timeout.count() < 0 ? -1 : timeout.count();
}

// When a request of `timeout_ms` (-1: none) ends: the engine's deadlines.
Clock::time_point DeadlineOf(int64_t timeout_ms) {
  return engine::DeadlineAfter(std::chrono::milliseconds(timeout_ms));
}

constexpr std::string_view kNoReply = " got no reply within ";

// How long a refused client (a wrong token, another protocol version) has
// to close its connection once told why, before the server ends it.
constexpr std::chrono::milliseconds kRefusedGrace{2000};

// A reply's pieces (Reply::parts) smaller than this in all are copied into
// one payload.
constexpr size_t kCopyReplyBelow = 64 << 10;

// Sends `reply` to `to` over `net`: small pieces copied into one payload.
void SendReplyOn(Transport* net, ConnectionId to, Reply reply) {
  size_t bytes = reply.payload.size();
  for (const auto& part : reply.parts) bytes += part.size();
  if (!reply.parts.empty() && bytes <= kCopyReplyBelow) {
    // Small: one contiguous payload costs less than pieces.
    for (const auto& part : reply.parts) {
      reply.payload.append(reinterpret_cast<const char*>(part.data()), part.size());
    }
    reply.parts.clear();
  }
  if (reply.parts.empty()) {
    net->Send(to, std::move(reply.header_bytes), std::move(reply.payload));
    return;
  }
  // The payload's first piece is `payload`, kept alive with the rest.
  struct Held {
    std::string payload;
    std::shared_ptr<const void> keep;
  };
  auto held = std::make_shared<Held>(Held{std::move(reply.payload), std::move(reply.keep)});
  std::vector<std::span<const std::byte>> parts;
  parts.reserve(reply.parts.size() + 1);
  parts.emplace_back(reinterpret_cast<const std::byte*>(held->payload.data()),
                     held->payload.size());
  parts.insert(parts.end(), reply.parts.begin(), reply.parts.end());
  net->SendParts(to, std::move(reply.header_bytes), std::move(parts), std::move(held));
}

}  // namespace

// Where a deferred reply goes (Request::Defer): the server's transport
// until the server stops. No lock is held while a reply is sent: a Send may
// run handlers on the calling thread (it holds the worker meanwhile), and
// those may send deferred replies of their own.
struct ReplySender {
  std::atomic<Transport*> net{nullptr};
  std::atomic<int> sending{0};  // responders between their load of net and the send's return
  // The transport is going: no responder sends on it once this returns.
  void Stop() {
    net.store(nullptr);
    while (sending.load() != 0) std::this_thread::yield();
  }
};

Request::Responder Request::Defer() {
  deferred = true;
  HeaderFields fields;
  fields.request_id = message.header()->request_id();
  fields.table_id = message.header()->table_id();
  return [sender = sender, to = connection, fields](Result<Reply> reply) {
    if (sender == nullptr) return;
    sender->sending.fetch_add(1);
    if (Transport* net = sender->net.load(); net != nullptr) {  // (null: the server stopped)
      if (reply.ok()) {
        SendReplyOn(net, to, std::move(*reply));
      } else {
        net->Send(to, EncodeFailure(fields, reply.status()), "");
      }
    }
    sender->sending.fetch_sub(1);
  };
}

bool IsNoReply(const Status& s) {
  return s.code() == Status::Code::kDeadlineExceeded &&
         s.message().find(kNoReply) != std::string::npos && s.message().rfind("request ", 0) == 0;
}

// ------------------------------------------------------------------ client

struct PendingCall {
  uint64_t id = 0;
  std::chrono::milliseconds timeout{0};
  Clock::time_point deadline;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Result<Message>> result;
  std::atomic<bool> ready{false};  // result is set
  Placement place;      // where a large reply's payload goes (may be empty)
  bool placed = false;  // it is going there: the call waits for it
  std::atomic<bool> sent{false};  // the request's send is done (or failed)
};

class RpcClient::Impl {
 public:
  explicit Impl(RpcClientOptions options) : options_(std::move(options)) {}

  ~Impl() {
    // The transport's workers call into this object: they stop first.
    transport_.reset();
  }

  Status Start(const std::string& host, uint16_t port) {
    address_ = host + ":" + std::to_string(port);
    TransportOptions t = options_.transport;
    t.listen_host.clear();
    t.on_message = [this](ConnectionId, std::string header, std::string payload) {
      OnReply(std::move(header), std::move(payload));
    };
    t.on_close = [this](ConnectionId, const Status& why) {
      Fail(why.ok() ? Status::Unavailable("connection to " + address_ + " closed") : why);
    };
    t.place_large = [this](ConnectionId, std::string_view header, size_t length, bool) {
      return PayloadPlaces{Place(header, length), nullptr};
    };
    t.on_accept = nullptr;
    REPLAYDB_ASSIGN_OR_RETURN(transport_, Transport::Start(std::move(t)));
    net_ = transport_.get();
    REPLAYDB_ASSIGN_OR_RETURN(connection_,
                              net_->Connect(host, port, options_.connect_timeout));
    const uint32_t version = options_.protocol_version;
    const std::string name = options_.client_name;
    Result<Message> welcome = Call(
        [&](const HeaderFields& f) { return EncodeHello(f, name, version); },
        "", options_.connect_timeout, 0);
    if (!welcome.ok()) {
      if (welcome.status().code() == Status::Code::kDeadlineExceeded) {
        return Status::Unavailable("server " + address_ + " did not answer Hello within " +
                                   std::to_string(options_.connect_timeout.count()) + " ms");
      }
      return welcome.status();
    }
    const fb::Header* h = welcome->header();
    if (h->body_type() == fb::Body::Challenge) {
      if (options_.token.empty()) {
        return Status::FailedPrecondition("server " + address_ + " requires a token, and this "
                                          "client has none (ConnectOptions::token_file)");
      }
      const auto* c = h->body_as_Challenge()->challenge();
      const std::string proof = TokenProof(
          options_.token, c == nullptr ? std::string_view()
                                       : std::string_view(
                                             reinterpret_cast<const char*>(c->data()), c->size()));
      welcome = Call(
          [&](const HeaderFields& f) {
            flatbuffers::FlatBufferBuilder b(128);
            b.ForceDefaults(true);
            const auto v =
                b.CreateVector(reinterpret_cast<const uint8_t*>(proof.data()), proof.size());
            return EncodeHeader(b, f, fb::Body::Proof, fb::CreateProof(b, v));
          },
          "", options_.connect_timeout, 0);
      if (!welcome.ok()) return welcome.status();
      h = welcome->header();
    }
    if (h->body_type() != fb::Body::Welcome) {
      return Status::Corruption("server " + address_ + " answered Hello with body kind " +
                                std::to_string(static_cast<int>(h->body_type())));
    }
    const fb::Welcome* w = h->body_as_Welcome();
    server_name_ = w->server_name() != nullptr ? w->server_name()->str() : "";
    read_only_ = w->read_only();
    return Status::OK();
  }

  std::shared_ptr<PendingCall> Start(
      const std::function<std::string(const HeaderFields&)>& encode, std::string payload,
      std::chrono::milliseconds timeout, uint32_t table_id, Placement place = {}) {
    return Begin(encode, timeout, table_id, std::move(place),
                 [&](std::string header, std::function<void(const Status&)> done) {
                   net_->Send(connection_, std::move(header), std::move(payload), std::move(done));
                 });
  }

  std::shared_ptr<PendingCall> Start(
      const std::function<std::string(const HeaderFields&)>& encode,
      std::vector<std::span<const std::byte>> parts, std::shared_ptr<const void> keep,
      std::chrono::milliseconds timeout, uint32_t table_id, std::function<void()> on_sent) {
    return Begin(
        encode, timeout, table_id, {},
        [&](std::string header, std::function<void(const Status&)> done) {
          net_->SendParts(connection_, std::move(header), std::move(parts), std::move(keep),
                          std::move(done));
        },
        std::move(on_sent));
  }

  void WaitSent(PendingCall& pending) {
    const auto sent = [&] { return pending.sent.load(std::memory_order_acquire); };
    while (!sent()) {
      const auto start = Clock::now();
      // (Drive returns at once where the connection is gone from its
      // worker: its sends' callbacks are on their way.)
      if (!net_->Drive(connection_, sent, std::chrono::microseconds(1000)) &&
          Clock::now() - start < std::chrono::microseconds(100)) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }

  // Registers a call and sends its request through `send` (given the
  // encoded header and what to run when the send is done).
  std::shared_ptr<PendingCall> Begin(
      const std::function<std::string(const HeaderFields&)>& encode,
      std::chrono::milliseconds timeout, uint32_t table_id, Placement place,
      const std::function<void(std::string, std::function<void(const Status&)>)>& send,
      std::function<void()> on_sent = {}) {
    auto pending = std::make_shared<PendingCall>();
    pending->place = std::move(place);
    HeaderFields fields;
    fields.timeout_ms = TimeoutMs(timeout);
    fields.table_id = table_id;
    pending->timeout = timeout;
    pending->deadline = DeadlineOf(fields.timeout_ms);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!closed_.ok()) {
        pending->result = closed_;
        pending->ready.store(true, std::memory_order_release);
        pending->sent.store(true, std::memory_order_release);  // (never sent)
        return pending;
      }
      fields.request_id = next_request_++;
      pending_[fields.request_id] = pending;
    }
    pending->id = fields.request_id;
    const uint64_t id = fields.request_id;
    send(encode(fields), [this, id, pending, on_sent = std::move(on_sent)](const Status& s) {
      if (!s.ok()) Complete(id, s);
      pending->sent.store(true, std::memory_order_release);
      if (on_sent) on_sent();
    });
    return pending;
  }

  // Waits for `pending`'s reply until `until`, holding `lock` (on
  // pending.mu) once it returns. The reply of a quick call is seen on this
  // thread, progressing the connection itself; a slow one's after a sleep,
  // interruptible (the thread's interrupt check, replaydb/interrupt.h:
  // Ctrl-C in a Python client ends a remote wait as it ends a local one).
  util::WaitEnd WaitReply(PendingCall& pending, Clock::time_point until,
                          std::unique_lock<std::mutex>* lock) {
    if (!pending.ready.load(std::memory_order_acquire)) {
      (void)net_->Drive(
          connection_, [&] { return pending.ready.load(std::memory_order_acquire); },
          options_.drive);
    }
    *lock = std::unique_lock<std::mutex>(pending.mu);
    util::WaitEnd end = util::WaitEnd::kWoken;
    while (!pending.result.has_value() && end == util::WaitEnd::kWoken) {
      end = util::WaitInterruptibly(pending.cv, *lock, until);
    }
    return end;
  }

  bool WaitFor(PendingCall& pending, Clock::time_point until) {
    std::unique_lock<std::mutex> lock;
    (void)WaitReply(pending, until, &lock);
    return pending.result.has_value();
  }

  Result<Message> Await(PendingCall& pending) {
    std::unique_lock<std::mutex> lock;
    const util::WaitEnd end = WaitReply(pending, pending.deadline, &lock);
    if (!pending.result.has_value()) {
      lock.unlock();
      bool placing = false;
      {
        std::lock_guard<std::mutex> l(mu_);
        std::lock_guard<std::mutex> p(pending.mu);
        placing = pending.placed && !pending.result.has_value();
        if (!placing) pending_.erase(pending.id);
      }
      if (placing) {
        // Its payload is coming into the caller's buffers: they must not be
        // given back before it is whole (or its connection ends).
        lock.lock();
        pending.cv.wait(lock, [&] { return pending.result.has_value(); });
      }
    }
    if (!pending.result.has_value()) {
      if (end == util::WaitEnd::kInterrupted) {
        return Status::Cancelled("request " + std::to_string(pending.id) + " to server " +
                                 address_ + ": interrupted while waiting for its reply");
      }
      return Status::DeadlineExceeded("request " + std::to_string(pending.id) + " to server " +
                                      address_ + std::string(kNoReply) +
                                      std::to_string(pending.timeout.count()) + " ms");
    }
    Result<Message> out = std::move(*pending.result);
    pending.result = Status::FailedPrecondition("request " + std::to_string(pending.id) +
                                                "'s reply was taken already");
    return out;
  }

  Result<Message> Call(const std::function<std::string(const HeaderFields&)>& encode,
                       std::string payload, std::chrono::milliseconds timeout,
                       uint32_t table_id, Placement place = {}) {
    return Await(*Start(encode, std::move(payload), timeout, table_id, std::move(place)));
  }

  const std::string& server_name() const { return server_name_; }
  const std::string& address() const { return address_; }
  bool read_only() const { return read_only_; }
  Transport& transport() const { return *net_; }
  ConnectionId connection() const { return connection_; }

  // Ends the connection: calls in flight and later ones fail with `why`.
  void Close(const Status& why) {
    Fail(why);
    net_->Close(connection_);
  }
  bool connected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_.ok();
  }

 private:
  void OnReply(std::string header, std::string payload) {
    auto decoded = DecodeHeader(header, [this] { return "server " + address_; });
    if (!decoded.ok()) {
      // A reply we cannot read: its request cannot be told; the connection
      // is no longer trustworthy.
      net_->Close(connection_);
      Fail(decoded.status());
      return;
    }
    const fb::Header* h = *decoded;
    const uint64_t id = h->request_id();
    if (h->body_type() == fb::Body::Failure) {
      Complete(id, FailureStatus(*h->body_as_Failure()));
      return;
    }
    Complete(id, Message{std::move(header), std::move(payload)});
  }

  void Complete(uint64_t id, Result<Message> result) {
    std::shared_ptr<PendingCall> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;  // timed out, or never ours
      pending = std::move(it->second);
      pending_.erase(it);
    }
    std::lock_guard<std::mutex> lock(pending->mu);
    if (result.ok()) result->placed = pending->placed;
    pending->result = std::move(result);
    pending->ready.store(true, std::memory_order_release);
    pending->cv.notify_all();
  }

  // A large reply's payload is about to be fetched: its call's Placement.
  std::vector<std::span<std::byte>> Place(std::string_view header, size_t length) {
    auto decoded = DecodeHeader(header, [this] { return "server " + address_; });
    if (!decoded.ok()) return {};  // OnReply refuses it
    const fb::Header* h = *decoded;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(h->request_id());
    if (it == pending_.end()) return {};
    PendingCall& p = *it->second;
    std::lock_guard<std::mutex> l(p.mu);
    if (!p.place || p.result.has_value()) return {};
    std::vector<std::span<std::byte>> pieces = p.place(*h, length);
    size_t total = 0;
    for (const auto& piece : pieces) total += piece.size();
    if (total != length) return {};
    p.placed = true;
    return pieces;
  }

  // The connection ended: every call in flight, and every later one, fails.
  void Fail(const Status& why) {
    std::map<uint64_t, std::shared_ptr<PendingCall>> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_.ok()) closed_ = why;
      pending.swap(pending_);
    }
    for (auto& [id, p] : pending) {
      std::lock_guard<std::mutex> lock(p->mu);
      p->result = why;
      p->ready.store(true, std::memory_order_release);
      p->cv.notify_all();
    }
  }

  RpcClientOptions options_;
  std::string address_;
  std::string server_name_;
  bool read_only_ = false;
  ConnectionId connection_ = 0;
  mutable std::mutex mu_;
  uint64_t next_request_ = 1;
  std::map<uint64_t, std::shared_ptr<PendingCall>> pending_;
  Status closed_;  // OK while connected
  std::unique_ptr<Transport> transport_;
  // The transport, for the handlers: set once at the start and never
  // changed, so that a handler running while transport_ is being reset
  // (its destructor joins the workers) still reaches it.
  Transport* net_ = nullptr;
};

Result<std::unique_ptr<RpcClient>> RpcClient::Connect(const std::string& host, uint16_t port,
                                                      RpcClientOptions options) {
  auto impl = std::make_shared<Impl>(std::move(options));
  REPLAYDB_RETURN_IF_ERROR(impl->Start(host, port));
  return std::unique_ptr<RpcClient>(new RpcClient(std::move(impl)));
}

RpcClient::RpcClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcClient::~RpcClient() = default;

Result<Message> RpcClient::Call(const std::function<std::string(const HeaderFields&)>& encode,
                                std::string payload, std::chrono::milliseconds timeout,
                                uint32_t table_id, Placement place) {
  return impl_->Call(encode, std::move(payload), timeout, table_id, std::move(place));
}

std::shared_ptr<PendingCall> RpcClient::Start(
    const std::function<std::string(const HeaderFields&)>& encode, std::string payload,
    std::chrono::milliseconds timeout, uint32_t table_id, Placement place) {
  return impl_->Start(encode, std::move(payload), timeout, table_id, std::move(place));
}

std::shared_ptr<PendingCall> RpcClient::Start(
    const std::function<std::string(const HeaderFields&)>& encode,
    std::vector<std::span<const std::byte>> parts, std::shared_ptr<const void> keep,
    std::chrono::milliseconds timeout, uint32_t table_id, std::function<void()> on_sent) {
  return impl_->Start(encode, std::move(parts), std::move(keep), timeout, table_id,
                      std::move(on_sent));
}

bool RpcClient::Sent(const PendingCall& call) { return call.sent.load(std::memory_order_acquire); }

void RpcClient::WaitSent(PendingCall& call) { impl_->WaitSent(call); }

Result<Message> RpcClient::Await(PendingCall& call) { return impl_->Await(call); }

bool RpcClient::WaitFor(PendingCall& call, std::chrono::steady_clock::time_point until) {
  return impl_->WaitFor(call, until);
}

bool RpcClient::Ready(const PendingCall& call) {
  return call.ready.load(std::memory_order_acquire);
}

const std::string& RpcClient::server_name() const { return impl_->server_name(); }
const std::string& RpcClient::address() const { return impl_->address(); }
bool RpcClient::connected() const { return impl_->connected(); }
bool RpcClient::read_only() const { return impl_->read_only(); }
void RpcClient::Close(const Status& why) { impl_->Close(why); }
Transport& RpcClient::transport() const { return impl_->transport(); }
ConnectionId RpcClient::connection() const { return impl_->connection(); }

// ------------------------------------------------------------------ server

class RpcServer::Impl {
 public:
  Impl(RpcServerOptions options, RequestHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)) {}

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    // What the connections held goes too (their writers end truncated).
    if (options_.on_disconnect) {
      for (Request& r : queue_) {
        if (r.message.header_bytes.empty()) options_.on_disconnect(r.connection);
      }
      std::set<ConnectionId> open;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [id, peer] : peers_) {
          if (peer.stage == Peer::Stage::kGreeted) open.insert(id);
        }
      }
      for (const ConnectionId id : open) options_.on_disconnect(id);
    }
    sender_->Stop();  // replies deferred past this point go nowhere
    // Then the connections end and the workers stop (they call into this
    // object, which they must not outlive).
    transport_.reset();
  }

  Status Start() {
    if (options_.threads < 1) {
      return Status::InvalidArgument("rpc server: threads must be >= 1, not " +
                                     std::to_string(options_.threads));
    }
    TransportOptions t = options_.transport;
    if (t.listen_host.empty()) t.listen_host = "127.0.0.1";
    t.on_message = [this](ConnectionId from, std::string header, std::string payload) {
      AwaitStarted();
      OnRequest(from, std::move(header), std::move(payload));
    };
    t.on_close = [this](ConnectionId id, const Status& why) {
      std::vector<std::shared_ptr<void>> unplaced;  // let go outside the lock
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_.erase(id);
        for (auto it = placed_.lower_bound({id, 0}); it != placed_.end() && it->first.first == id;) {
          unplaced.push_back(std::move(it->second));
          it = placed_.erase(it);
        }
      }
      Log("connection " + std::to_string(id) + " ended" +
          (why.ok() ? std::string(" (closed here)") : ": " + why.message()));
      if (options_.on_disconnect) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!stopping_) {
          Request gone;
          gone.connection = id;  // no message: the connection ended
          queue_.push_back(std::move(gone));
          cv_.notify_one();
        }
      }
    };
    t.on_accept = [this](ConnectionId id, const std::string& peer) {
      Log("connection " + std::to_string(id) + " from " + peer);
    };
    if (options_.place_request) {
      t.place_large = [this](ConnectionId from, std::string_view header, size_t length,
                             bool queued_unplaced) {
        AwaitStarted();
        return PlaceRequest(from, header, length, queued_unplaced);
      };
    }
    REPLAYDB_ASSIGN_OR_RETURN(transport_, Transport::Start(std::move(t)));
    net_ = transport_.get();
    sender_->net.store(net_);
    {
      std::lock_guard<std::mutex> lock(started_mu_);
      started_.store(true, std::memory_order_release);
    }
    started_cv_.notify_all();
    for (int i = 0; i < options_.threads; ++i) threads_.emplace_back([this] { Serve(); });
    return Status::OK();
  }

  uint16_t port() const { return net_->port(); }
  int open_connections() const { return net_->open_connections(); }
  Transport& transport() const { return *net_; }

 private:
  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }

  // A client may connect and send the moment the transport listens, before
  // Start has set net_ (ThreadSanitizer saw OnRequest read it): the
  // transport's handlers wait for Start first.
  void AwaitStarted() {
    if (started_.load(std::memory_order_acquire)) return;
    std::unique_lock<std::mutex> lock(started_mu_);
    started_cv_.wait(lock, [&] { return started_.load(std::memory_order_acquire); });
  }

  void SendReply(ConnectionId to, Reply reply) { SendReplyOn(net_, to, std::move(reply)); }

  void Fail(ConnectionId to, const HeaderFields& fields, const Status& why) {
    net_->Send(to, EncodeFailure(fields, why), "");
  }

  // Refuses a connection in its handshake: `why` sent, nothing more read
  // from it, the connection closed.
  void Refuse(ConnectionId to, const HeaderFields& fields, const Status& why) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      peers_[to] = Peer{Peer::Stage::kRefused, false, {}};
    }
    Fail(to, fields, why);
    // The client closes once it has read why; an end by us first could
    // overtake that answer (over shared memory it takes another path).
    net_->Close(to, kRefusedGrace);
  }

  // On a transport worker: where a request's large payload goes
  // (RpcServerOptions::place_request), or nothing.
  PayloadPlaces PlaceRequest(ConnectionId from, std::string_view header, size_t length,
                             bool queued_unplaced) {
    if (queued_unplaced) return {};
    auto decoded = DecodeHeader(header, [from] { return "connection " + std::to_string(from); });
    if (!decoded.ok()) return {};  // OnRequest refuses it
    const fb::Header* h = *decoded;
    const uint64_t strand = options_.strand_of ? options_.strand_of(*h) : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto peer = peers_.find(from);
      if (peer == peers_.end() || peer->second.stage != Peer::Stage::kGreeted) return {};
      if (strand != 0 && strands_.count({from, strand}) != 0) return {};
      if (placed_.count({from, h->request_id()}) != 0) return {};  // (an id sent twice)
    }
    PayloadPlaces places = options_.place_request(from, *h, length);
    if (places.keep == nullptr || places.pieces.empty()) return {};
    std::lock_guard<std::mutex> lock(mu_);
    placed_[{from, h->request_id()}] = places.keep;
    return places;
  }

  // On a transport worker: the handshake and Ping here, the rest queued.
  void OnRequest(ConnectionId from, std::string header, std::string payload) {
    auto decoded = DecodeHeader(header, [from] { return "connection " + std::to_string(from); });
    if (!decoded.ok()) {
      // Unreadable: refuse it (request id 0: no request to name) and end
      // the connection; nothing it sends can be trusted after this.
      Fail(from, {}, decoded.status());
      net_->Close(from);
      return;
    }
    const fb::Header* h = *decoded;
    HeaderFields reply;
    reply.request_id = h->request_id();
    reply.table_id = h->table_id();
    bool greeted = false;
    bool read_only = false;
    std::string challenge;
    std::shared_ptr<void> placed;  // where its payload went (PlaceRequest), if anywhere
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!placed_.empty()) {
        if (auto it = placed_.find({from, h->request_id()}); it != placed_.end()) {
          placed = std::move(it->second);
          placed_.erase(it);
        }
      }
      // Refused: whatever else it sent before its close takes effect is
      // dropped unread.
      if (auto it = peers_.find(from); it != peers_.end()) {
        if (it->second.stage == Peer::Stage::kRefused) return;
        greeted = it->second.stage == Peer::Stage::kGreeted;
        read_only = it->second.read_only;
        if (it->second.stage == Peer::Stage::kChallenged) challenge = it->second.challenge;
      }
    }
    if (!greeted && !challenge.empty()) {
      // The answer to our Challenge: the token's proof, or the end.
      const fb::Proof* proof = h->body_as_Proof();
      const auto* bytes = proof == nullptr ? nullptr : proof->proof();
      bool grants_read_only = false;
      if (bytes == nullptr ||
          !CheckProof(options_.tokens, challenge,
                      std::string_view(reinterpret_cast<const char*>(bytes->data()),
                                       bytes->size()),
                      &grants_read_only)) {
        const bool no_proof = proof == nullptr;
        const Status refused = Status::FailedPrecondition(
            "server '" + options_.server_name + "' refused the client" +
            (no_proof ? ": it answered the token's challenge with '" +
                            std::string(fb::EnumNameBody(h->body_type())) + "', not a Proof"
                      : "'s token: it matches none of the server's tokens"));
        Log("connection " + std::to_string(from) + " refused: " +
            (no_proof ? "no proof of a token" : "wrong token"));
        Refuse(from, reply, refused);
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_[from] = Peer{Peer::Stage::kGreeted, grants_read_only, {}};
      }
      Log("connection " + std::to_string(from) + " proved a " +
          (grants_read_only ? "read-only" : "read-write") + " token");
      net_->Send(from, EncodeWelcome(reply, options_.server_name, grants_read_only), "");
      return;
    }
    if (!greeted) {
      const fb::Hello* hello = h->body_as_Hello();
      if (hello == nullptr) {
        Refuse(from, reply,
               Status::FailedPrecondition("the first message on a connection must be Hello"));
        return;
      }
      if (hello->protocol_version() != kProtocolVersion) {
        const Status refused = Status::FailedPrecondition(
            "server '" + options_.server_name + "' speaks protocol version " +
            std::to_string(kProtocolVersion) + ", the client " +
            std::to_string(hello->protocol_version()));
        Log("connection " + std::to_string(from) + " refused: " + refused.message());
        Refuse(from, reply, refused);
        return;
      }
      // The lanes are settled once a message came through.
      Result<std::string> lanes = net_->Lanes(from);
      Log("connection " + std::to_string(from) + " is '" +
          (hello->client_name() != nullptr ? hello->client_name()->str() : std::string()) + "'" +
          (lanes.ok() && !lanes->empty() ? " (over " + *lanes + ")" : std::string()));
      if (!options_.tokens.empty()) {
        Result<std::string> fresh = NewChallenge();
        if (!fresh.ok()) {
          Fail(from, reply, fresh.status());
          net_->Close(from);
          return;
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          peers_[from] = Peer{Peer::Stage::kChallenged, false, *fresh};
        }
        flatbuffers::FlatBufferBuilder b(128);
        b.ForceDefaults(true);
        const auto v =
            b.CreateVector(reinterpret_cast<const uint8_t*>(fresh->data()), fresh->size());
        net_->Send(from, EncodeHeader(b, reply, fb::Body::Challenge,
                                            fb::CreateChallenge(b, v)),
                         "");
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_[from] = Peer{Peer::Stage::kGreeted, false, {}};
      }
      net_->Send(from, EncodeWelcome(reply, options_.server_name), "");
      return;
    }
    if (h->body_type() == fb::Body::Ping) {
      net_->Send(from, EncodePong(reply), std::move(payload));
      return;
    }
    Request request;
    // (A payload that came whole after all: its places are given up.)
    if (payload.empty()) request.placed = std::move(placed);
    request.connection = from;
    request.deadline = DeadlineOf(h->timeout_ms());
    request.read_only = read_only;
    request.message = Message{std::move(header), std::move(payload)};
    if (options_.strand_of) request.strand = options_.strand_of(*h);
    bool idle = true;  // none of its strand's requests is queued or running
    if (request.strand != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      idle = strands_.count({from, request.strand}) == 0;
    }
    request.sender = sender_;
    if (options_.try_inline && idle) {
      request.no_wait = true;
      std::optional<Result<Reply>> served = options_.try_inline(request);
      request.no_wait = false;
      if (served.has_value()) {
        net_->Recycle(std::move(request.message.payload));
        if (request.deferred) {
          // (Its reply goes later.)
        } else if (served->ok()) {
          SendReply(from, std::move(**served));
        } else {
          Fail(from, reply, served->status());
        }
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_ && queued_ < options_.max_queued) {
        ++queued_;
        if (request.strand != 0) {
          // Behind the strand's earlier requests, if any are waiting or
          // running; at the executor's queue otherwise.
          Strand& strand = strands_[{from, request.strand}];
          if (strand.busy) {
            strand.waiting.push_back(std::move(request));
            return;
          }
          strand.busy = true;
        }
        queue_.push_back(std::move(request));
        cv_.notify_one();
        return;
      }
    }
    Fail(from, reply,
         Status::ResourceExhausted("server '" + options_.server_name + "' has " +
                                   std::to_string(options_.max_queued) +
                                   " requests waiting: try again later"));
  }

  // `done` has run: the next of its strand (if any) goes to the executor.
  void Next(const Request& done) {
    if (done.strand == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = strands_.find({done.connection, done.strand});
    if (it == strands_.end()) return;  // its connection ended
    if (it->second.waiting.empty()) {
      strands_.erase(it);
      return;
    }
    queue_.push_back(std::move(it->second.waiting.front()));
    it->second.waiting.pop_front();
    cv_.notify_one();
  }

  // An executor thread: requests in turn, each answered.
  void Serve() {
    while (true) {
      Request request;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        request = std::move(queue_.front());
        queue_.pop_front();
        if (!request.message.header_bytes.empty() && !request.requeue) --queued_;
      }
      if (request.message.header_bytes.empty()) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          // Its strands' waiting requests go unanswered: nobody is there.
          auto it = strands_.lower_bound({request.connection, 0});
          while (it != strands_.end() && it->first.first == request.connection) {
            queued_ -= it->second.waiting.size();
            it = strands_.erase(it);
          }
        }
        options_.on_disconnect(request.connection);
        continue;
      }
      const fb::Header* h = request.message.header();
      HeaderFields fields;
      fields.request_id = h->request_id();
      fields.table_id = h->table_id();
      Result<Reply> reply = Status::DeadlineExceeded(
          "request " + std::to_string(fields.request_id) + " waited in server '" +
          options_.server_name + "''s queue past its timeout of " +
          std::to_string(h->timeout_ms()) + " ms");
      request.requeue = false;
      // A request of timeout 0 (the caller waits for nothing: the engine's
      // own timeout 0) runs once whenever it comes; others while their time
      // lasts.
      const bool first = request.started == Clock::time_point{};
      if (first) request.started = Clock::now();
      if (Clock::now() < request.deadline || (first && h->timeout_ms() == 0)) {
        reply = handler_(request);
      }
      if (request.requeue) {
        // Not done: again later, after what is queued now.
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(request));
        cv_.notify_one();
        continue;
      }
      Next(request);
      net_->Recycle(std::move(request.message.payload));
      if (request.deferred) {
        // (Its reply goes later.)
      } else if (reply.ok()) {
        SendReply(request.connection, std::move(*reply));
      } else {
        Fail(request.connection, fields, reply.status());
      }
    }
  }

  RpcServerOptions options_;
  RequestHandler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Request> queue_;
  // Requests taken and not yet started (queue_'s and the strands'
  // waiting), at most max_queued.
  size_t queued_ = 0;
  // A strand's requests after the one queued or running.
  struct Strand {
    bool busy = false;
    std::deque<Request> waiting;
  };
  std::map<std::pair<ConnectionId, uint64_t>, Strand> strands_;
  // Where each connection's handshake stands (none yet: no entry).
  struct Peer {
    enum class Stage {
      kChallenged,  // sent a token challenge, not yet answered
      kGreeted,     // welcomed: its requests are served
      kRefused,     // closing: its messages are dropped unread
    };
    Stage stage;
    bool read_only;         // greeted with a read-only token
    std::string challenge;  // kChallenged: the one sent
  };
  std::map<ConnectionId, Peer> peers_;
  // Requests whose payloads are placed (PlaceRequest), by connection and
  // request id, until they come (OnRequest) or their connection ends.
  std::map<std::pair<ConnectionId, uint64_t>, std::shared_ptr<void>> placed_;
  std::vector<std::thread> threads_;
  std::unique_ptr<Transport> transport_;
  // The transport, for the handlers: set once at the start and never
  // changed, so that a handler running while transport_ is being reset
  // (its destructor joins the workers) still reaches it.
  Transport* net_ = nullptr;
  std::atomic<bool> started_{false};  // net_ is set (AwaitStarted)
  std::mutex started_mu_;
  std::condition_variable started_cv_;
  // For replies sent later (Request::Defer).
  const std::shared_ptr<ReplySender> sender_ = std::make_shared<ReplySender>();
};

Result<std::unique_ptr<RpcServer>> RpcServer::Start(RpcServerOptions options,
                                                    RequestHandler handler) {
  auto impl = std::make_shared<Impl>(std::move(options), std::move(handler));
  REPLAYDB_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<RpcServer>(new RpcServer(std::move(impl)));
}

RpcServer::RpcServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
RpcServer::~RpcServer() = default;

uint16_t RpcServer::port() const { return impl_->port(); }
int RpcServer::open_connections() const { return impl_->open_connections(); }
Transport& RpcServer::transport() const { return impl_->transport(); }

}  // namespace replaydb::rdma
