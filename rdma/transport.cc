#include "rdma/transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <ucs/async/async_fwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace replaydb::rdma {
namespace {

// The active-message ids: messages (the header says what each is), and
// heartbeats (empty).
constexpr unsigned kMessageId = 1;
constexpr unsigned kHeartbeatId = 2;
// Several small messages to one peer in one active message (WIRE.md,
// "Batches"): replies that handlers send during one progress of a worker.
constexpr unsigned kBatchId = 3;
// A message this small (header and payload) sent from a handler waits for
// the end of the worker's progress to go out in a batch; a batch holds at
// most kBatchBytes.
constexpr size_t kBatchableBytes = 1024;
constexpr size_t kBatchBytes = 8192;
// Spinning loops read the clock once per this many turns: a clock read cost
// about 100 ns on a GPU host (its largest symbol in a profile of small calls
// over shared memory), a turn of progress over shared memory less.
constexpr int kTurnsPerClock = 8;
// Reads copied on the spot (shared memory) look at the clock, for the
// heartbeats, once per this many bytes: tens of microseconds of copying.
constexpr size_t kBytesPerClock = size_t{256} << 10;
// Before it ends connections as silent, a worker progresses until nothing
// more comes, for at most this long (Heartbeats).
constexpr std::chrono::milliseconds kDrainBeforeCheck{20};
// The longest a worker's thread first sleeps while a send is unfinished
// (Worker::sends_in_flight, Worker::pending_naps).
constexpr std::chrono::milliseconds kPendingSendSleep{1};

std::string UcsError(ucs_status_t s) { return ucs_status_string(s); }

// Holds UCX's async thread (one per process; it runs the socket handlers of
// every UCX context in it) in a handler of ours while it lives.
//
// Why: UCX 1.13 (Debian 12) frees a listener while connections it accepted
// may still wait for their client's first bytes. Those connections belong
// to the listener's worker until that worker is destroyed, and bytes that
// come in between make the async thread call into the freed listener (a
// crash, seen when a client connected to a server as it stopped). Destroying
// the listener and its worker while this holds leaves no such moment: the
// worker's destruction closes those connections first.
//
// A hold that the async thread does not take up within kTake (it is busy
// elsewhere) holds nothing: the destruction goes on regardless.
class AsyncThreadHold {
 public:
  AsyncThreadHold() {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0) return;
    if (ucs_async_set_event_handler(UCS_ASYNC_MODE_THREAD_SPINLOCK, fd_, UCS_EVENT_SET_EVREAD,
                                    &AsyncThreadHold::Held, this, nullptr) != UCS_OK) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    registered_ = true;
    const uint64_t one = 1;
    if (::write(fd_, &one, sizeof(one)) != sizeof(one)) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kTake, [&] { return held_; });
  }

  ~AsyncThreadHold() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    // Waits for the handler to return (spinning on UCX's counters, which
    // ThreadSanitizer does not see: the handler's own word, below, orders
    // its last touch of this object before the object goes).
    if (registered_) (void)ucs_async_remove_handler(fd_, /*sync=*/1);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return entered_ == exited_; });
    }
    if (fd_ >= 0) ::close(fd_);
  }

  AsyncThreadHold(const AsyncThreadHold&) = delete;
  AsyncThreadHold& operator=(const AsyncThreadHold&) = delete;

 private:
  static constexpr auto kTake = std::chrono::seconds(2);

  static void Held(int /*id*/, ucs_event_set_types_t /*events*/, void* arg) {
    auto* self = static_cast<AsyncThreadHold*>(arg);
    uint64_t value = 0;
    (void)::read(self->fd_, &value, sizeof(value));
    std::unique_lock<std::mutex> lock(self->mu_);
    ++self->entered_;
    self->held_ = true;
    self->cv_.notify_all();
    self->cv_.wait(lock, [&] { return self->released_; });
    self->held_ = false;
    ++self->exited_;
    self->cv_.notify_all();
  }

  int fd_ = -1;
  bool registered_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
  int entered_ = 0;  // the handler's runs begun and ended
  int exited_ = 0;
};

}  // namespace

bool SharedMemoryTransportsLoaded(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;  // UCX's default: all
  std::string_view list(tls);
  const bool excluding = list.front() == '^';
  if (excluding) list.remove_prefix(1);
  bool sysv = false, posix = false, all_memory = false;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (name == "sm" || name == "shm" || name == "mm") all_memory = true;
    if (name == "sysv") sysv = true;
    if (name == "posix") posix = true;
    if (!excluding && name == "all") return true;
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
  }
  return excluding ? !(all_memory || (sysv && posix)) : (all_memory || sysv || posix);
}

std::vector<std::pair<std::string, std::string>> UcxSettings() {
  std::vector<std::pair<std::string, std::string>> settings = {
      {"TCP_TX_SEG_SIZE", "256k"},
      {"TCP_RX_SEG_SIZE", "256k"},
      // No rendezvous lanes over TCP (large messages over TCP go as
      // active-message fragments instead, as fast here): with them, a
      // connection over shared memory kept TCP lanes beside its sysv
      // lane, and every progress of its worker paid an epoll_wait
      // (small calls 2.4 us where they took 3.4). RDMA lanes stay.
      {"TCP_PUT_ENABLE", "n"},
      // A listener may take its port while connections of an earlier one
      // on it wait out TIME_WAIT (a cluster node's server started again on
      // its port); a port that something listens on is still refused.
      {"TCP_CM_REUSEADDR", "y"}};
  // Processes of one host over shared memory (UCX warns about a setting of
  // a transport it does not load).
  if (SharedMemoryTransportsLoaded(std::getenv("UCX_TLS"))) {
    settings.emplace_back("MM_ERROR_HANDLING", "y");
  }
  return settings;
}

void AppendToBatch(std::string* batch, std::string_view header, std::string_view payload) {
  for (const size_t n : {header.size(), payload.size()}) {
    const auto v = static_cast<uint32_t>(n);
    const char b[4] = {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 24)};
    batch->append(b, 4);
  }
  batch->append(header);
  batch->append(payload);
}

Status ForEachInBatch(std::string_view batch, std::string_view from,
                      const std::function<bool(std::string_view, std::string_view)>& each) {
  const auto length = [&](size_t at) {
    const auto* b = reinterpret_cast<const unsigned char*>(batch.data() + at);
    return static_cast<size_t>(b[0]) | static_cast<size_t>(b[1]) << 8 |
           static_cast<size_t>(b[2]) << 16 | static_cast<size_t>(b[3]) << 24;
  };
  size_t at = 0;
  while (at < batch.size()) {
    if (batch.size() - at < 8 || length(at) > batch.size() - at - 8 ||
        length(at + 4) > batch.size() - at - 8 - length(at)) {
      return Status::Corruption("batch of messages from " + std::string(from) + " (" +
                                std::to_string(batch.size()) + " bytes) breaks at byte " +
                                std::to_string(at) + ": a length runs past its end");
    }
    const size_t h = length(at);
    const size_t n = length(at + 4);
    if (!each(batch.substr(at + 8, h), batch.substr(at + 8 + h, n))) return Status::OK();
    at += 8 + h + n;
  }
  return Status::OK();
}

namespace {

// `host` (a dotted IPv4 address or a name) and `port` as a socket address.
Result<sockaddr_in> Resolve(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::InvalidArgument("cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  }
  addr.sin_addr = reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return addr;
}

std::string Address(const std::string& host, uint16_t port) {
  return host + ":" + std::to_string(port);
}

// Connection numbers are unique in the process, not only in one Transport:
// a server started again over the same service (rdma/db_service.h) must not
// see an old connection's id again.
uint64_t NextConnectionNumber() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

class Transport::Impl {
 public:
  struct Worker;

  // One message on its way out; freed when UCX is done with it.
  struct Outgoing {
    Worker* worker = nullptr;
    ConnectionId to = 0;
    std::string header;
    std::string payload;
    // Or the payload in pieces (not empty), which `keep` holds alive.
    std::vector<ucp_dt_iov_t> iov;
    std::shared_ptr<const void> keep;
    std::function<void(const Status&)> done;
  };
  // A message received, whole once `ready` (a rendezvous payload is
  // fetched first).
  struct Incoming {
    Worker* worker = nullptr;
    ConnectionId from = 0;
    std::string header;
    std::string payload;
    std::vector<ucp_dt_iov_t> iov;  // where a placed payload goes (empty: not placed)
    std::shared_ptr<void> keep;     // PayloadPlaces::keep, until the payload came
    bool ready = false;
    bool batch = false;  // the payload holds several messages (kBatchId)
  };
  struct Connection {
    ucp_ep_h ep = nullptr;
    std::string peer;  // for messages
    // Known to the user (accepted, or Connect returned it): on_close is due.
    bool announced = false;
    // When anything last came from the peer.
    std::chrono::steady_clock::time_point heard = std::chrono::steady_clock::now();
    // Messages in the order they arrived: each is delivered once it and
    // all before it are whole (a large one fetched by rendezvous must not
    // be overtaken by a small one sent after it).
    std::deque<std::shared_ptr<Incoming>> arrivals;
    // Peers' memory keys imported on this endpoint (ImportKey), by handle - 1.
    std::vector<ucp_rkey_h> rkeys;
    // Close(id, grace): when it ends unless the peer closed it first.
    std::chrono::steady_clock::time_point close_at = std::chrono::steady_clock::time_point::max();
  };
  // An endpoint's close in progress, and the keys to destroy once it is
  // done (reads in flight may still use them until then).
  struct Closing {
    ucs_status_ptr_t request = nullptr;
    std::vector<ucp_rkey_h> rkeys;
  };

  struct Worker {
    Impl* impl = nullptr;
    int index = 0;
    ucp_worker_h worker = nullptr;
    std::thread thread;
    // Work other threads hand over; run by whoever holds `progress` next.
    std::mutex mu;
    std::deque<std::function<void()>> queue;
    std::atomic<bool> queued{false};  // queue may hold work (read without mu)
    // The UCP worker (serialized mode) and what follows are used only by
    // the thread holding `progress`: the worker's own thread, a thread
    // sending directly (Send), or a caller driving progress (Drive).
    std::mutex progress;
    // Callers in Drive now: the worker's thread parks meanwhile (two
    // threads taking turns at one UCP worker would only slow both).
    std::atomic<int> drivers{0};
    std::mutex park_mu;
    std::condition_variable park_cv;
    std::unordered_map<ConnectionId, Connection> connections;
    std::unordered_map<ucp_ep_h, ConnectionId> by_ep;
    // Endpoint closes in progress.
    std::vector<Closing> closing;
    // While the worker progresses (Progress), small messages that handlers
    // send wait here, in order, to go out in batches when it returns.
    bool batching = false;
    // Inside a UCX call that may run our callbacks (a progress, a close):
    // a read made from one of them must not progress (UCX's calls are not
    // reentrant).
    int in_ucx = 0;
    std::vector<std::unique_ptr<Outgoing>> held;
    // The worker's event fd (ucp_worker_get_efd), to sleep with a timeout.
    int efd = -1;
    // When heartbeats next go out (any thread holding the worker sends them
    // when due), and when the worker's thread next looks for silent
    // connections.
    std::chrono::steady_clock::time_point next_heartbeat;
    std::chrono::steady_clock::time_point next_check;
    // When the worker's thread last looked, and whether that look ended
    // nothing because it came late (Heartbeats).
    std::chrono::steady_clock::time_point last_check = std::chrono::steady_clock::now();
    bool passed_over = false;
    // The earliest Connection::close_at of this worker's connections.
    std::chrono::steady_clock::time_point next_close = std::chrono::steady_clock::time_point::max();
    // Sends UCX has not finished (messages, batches, heartbeats): while
    // any is left, the worker's thread sleeps at most kPendingSendSleep. A
    // send that waits for room in a peer's shared-memory queue goes on when
    // this worker progresses, and no event wakes it for that: an idle
    // learner's heartbeats waited behind a server queue that its actors
    // kept full.
    int sends_in_flight = 0;
    // Sleeps in a row with a send unfinished and nothing done between: each
    // twice as long as the one before, from kPendingSendSleep up to 16 times
    // that (a send to a peer that fetches slowly, or not at all).
    int pending_naps = 0;
  };

  // The worker whose `progress` this thread holds (nullptr: none): a send
  // made from a handler or a callback goes out directly.
  static thread_local Worker* holding_;

  // Holds `w.progress` for the scope.
  class Hold {
   public:
    explicit Hold(Worker& w) : lock_(w.progress), previous_(holding_) { holding_ = &w; }
    ~Hold() { holding_ = previous_; }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    std::lock_guard<std::mutex> lock_;
    Worker* previous_;
  };

  explicit Impl(TransportOptions options) : options_(std::move(options)) {}

  Status Start() {
    if (options_.heartbeat.count() < 0 || options_.missed_heartbeats < 1) {
      return Status::InvalidArgument("transport: heartbeat must be >= 0 ms and missed_heartbeats "
                                     ">= 1, not " + std::to_string(options_.heartbeat.count()) +
                                     " ms and " + std::to_string(options_.missed_heartbeats));
    }
    if (options_.workers < 1 || options_.workers > 64) {
      return Status::InvalidArgument("transport: workers must be 1 to 64, not " +
                                     std::to_string(options_.workers));
    }
    // TCP moves data in segments of 8 KiB by default, and each costs a trip
    // through progress: large replies went at a third of what the socket
    // can carry. Larger segments unless the environment says otherwise
    // (UCX reads a transport's settings from the environment only, when it
    // opens the transport: ucp_config_modify does not reach them).
    // At every start, not once: whether shared memory is on depends on
    // UCX_TLS as it is now.
    {
      static std::mutex settings;
      std::lock_guard<std::mutex> lock(settings);
      for (const auto& [name, value] : UcxSettings()) {
        ::setenv(("UCX_" + name).c_str(), value.c_str(), /*overwrite=*/0);
      }
    }
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return Status::Internal("transport: ucp_config_read: " + UcsError(s));
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    // RMA: one-sided reads of SharedMemory (Transport::Read).
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA;
    // Shared: SharedMemory is mapped and unmapped from any thread (a table's
    // hot tier growing) while the workers run.
    params.mt_workers_shared = 1;
    ucp_context_h context = nullptr;
    s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (s != UCS_OK) return Status::Internal("transport: ucp_init: " + UcsError(s));
    // Cleaned up when the transport and every SharedMemory of it are gone
    // (a served table's slabs may go after the server).
    context_owner_ = std::shared_ptr<void>(context, [](void* c) {
      ucp_cleanup(static_cast<ucp_context_h>(c));
    });
    context_ = context;
    workers_.reserve(static_cast<size_t>(options_.workers));
    for (int i = 0; i < options_.workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->impl = this;
      w->index = i;
      ucp_worker_params_t wp{};
      wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
      wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
      s = ucp_worker_create(context_, &wp, &w->worker);
      if (s != UCS_OK) return Status::Internal("transport: ucp_worker_create: " + UcsError(s));
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG;
      hp.id = kMessageId;
      hp.cb = &Impl::OnMessage;
      hp.arg = w.get();
      s = ucp_worker_set_am_recv_handler(w->worker, &hp);
      if (s != UCS_OK) return Status::Internal("transport: am handler: " + UcsError(s));
      hp.id = kHeartbeatId;
      hp.cb = &Impl::OnHeartbeat;
      s = ucp_worker_set_am_recv_handler(w->worker, &hp);
      if (s != UCS_OK) return Status::Internal("transport: am handler: " + UcsError(s));
      hp.id = kBatchId;
      hp.cb = &Impl::OnBatch;
      s = ucp_worker_set_am_recv_handler(w->worker, &hp);
      if (s != UCS_OK) return Status::Internal("transport: am handler: " + UcsError(s));
      s = ucp_worker_get_efd(w->worker, &w->efd);
      if (s != UCS_OK) return Status::Internal("transport: ucp_worker_get_efd: " + UcsError(s));
      workers_.push_back(std::move(w));
    }
    if (!options_.listen_host.empty()) {
      REPLAYDB_ASSIGN_OR_RETURN(const sockaddr_in addr,
                                Resolve(options_.listen_host, options_.listen_port));
      ucp_listener_params_t lp{};
      lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
      lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
      lp.sockaddr.addrlen = sizeof(addr);
      lp.conn_handler.cb = &Impl::OnConnectionRequest;
      lp.conn_handler.arg = this;
      s = ucp_listener_create(workers_[0]->worker, &lp, &listener_);
      if (s != UCS_OK) {
        return Status::IOError("transport: cannot listen on " +
                               Address(options_.listen_host, options_.listen_port) + ": " +
                               UcsError(s));
      }
      ucp_listener_attr_t attr{};
      attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
      s = ucp_listener_query(listener_, &attr);
      if (s != UCS_OK) return Status::Internal("transport: ucp_listener_query: " + UcsError(s));
      port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
    }
    const auto first = std::chrono::steady_clock::now() + options_.heartbeat;
    for (auto& w : workers_) {
      w->next_heartbeat = w->next_check = first;
      w->last_check = std::chrono::steady_clock::now();
      w->thread = std::thread([this, p = w.get()] { Run(*p); });
    }
    return Status::OK();
  }

  ~Impl() {
    stopping_.store(true);
    for (auto& w : workers_) {
      if (w->worker != nullptr) ucp_worker_signal(w->worker);
    }
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
    // Work queued after a worker left fails as stopped.
    for (auto& w : workers_) {
      Hold hold(*w);
      RunQueued(*w);
    }
    // The listener's worker last: the connections it accepted belong to it
    // (the other workers' endpoints of them included).
    for (size_t i = workers_.size(); i-- > 1;) DestroyWorker(*workers_[i]);
    if (!workers_.empty()) {
      std::optional<AsyncThreadHold> hold;
      if (listener_ != nullptr) {
        hold.emplace();
        // Connection requests that came as the transport stopped are
        // refused only now, while nothing can be accepted: a refusal frees
        // its socket, and UCX 1.13 hands an event still pending for that
        // socket to whatever connection the listener accepts onto its
        // number next (an assertion in uct_tcp_sockcm_ep_progress_send that
        // aborted a server stopping while clients connected).
        // (The workers are joined: refused_ needs no lock here.)
        for (ucp_conn_request_h r : refused_) (void)ucp_listener_reject(listener_, r);
        ucp_listener_destroy(listener_);
      }
      DestroyWorker(*workers_[0]);
    }
    context_owner_.reset();
  }

  static void DestroyWorker(Worker& w) {
    // Closes still under way (one made after the worker's thread left, by
    // work run in ~Impl, or one that outlasted the thread's wait) get a
    // last bounded chance to finish. Those that do not are released:
    // ucp_worker_destroy asserts that a close whose flush is done and
    // whose disconnect waits in the progress queue was released by its
    // caller (UCX 1.13, ucp_ep.c: it aborted a server stopping while a
    // replica's connection closed). Their keys go before the worker.
    if (w.worker != nullptr) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      for (int i = 0; i < 100000 && SweepCloses(w) && std::chrono::steady_clock::now() < give_up;
           ++i) {
        ucp_worker_progress(w.worker);
      }
    }
    for (Closing& c : w.closing) {
      ucp_request_free(c.request);
      for (ucp_rkey_h k : c.rkeys) ucp_rkey_destroy(k);
      c.rkeys.clear();
    }
    w.closing.clear();
    if (w.worker != nullptr) ucp_worker_destroy(w.worker);
    w.worker = nullptr;
  }

  uint16_t port() const { return port_; }
  int open_connections() const { return open_.load(); }
  uint64_t batched_messages() const { return batched_.load(std::memory_order_relaxed); }

  // ucp_ep_print_info of the connection's endpoint.
  Result<std::string> EndpointInfo(ConnectionId id) {
    const Status not_found = Status::NotFound("transport: no connection " + std::to_string(id));
    Worker* w = WorkerOf(id);
    if (w == nullptr) return not_found;
    // Held already when called from a handler on this worker.
    std::optional<Hold> hold;
    if (holding_ != w) hold.emplace(*w);
    auto it = w->connections.find(id);
    if (it == w->connections.end() || it->second.ep == nullptr) return not_found;
    char* buffer = nullptr;
    size_t size = 0;
    FILE* stream = open_memstream(&buffer, &size);
    if (stream == nullptr) return Status::IOError("transport: open_memstream failed");
    ucp_ep_print_info(it->second.ep, stream);
    std::fclose(stream);
    std::string text(buffer, size);
    std::free(buffer);
    return text;
  }

  Result<std::string> Lanes(ConnectionId id) {
    // ucp_ep_print_info writes lines like
    //   "#   lane[0]:  3:sysv/memory.0 md[2]  -> md[2]/sysv/... am am_bw#0"
    // to a stream; the "NAME/DEVICE" after the resource number is wanted.
    REPLAYDB_ASSIGN_OR_RETURN(const std::string text, EndpointInfo(id));
    std::vector<std::string> lanes;
    for (size_t at = text.find("lane["); at != std::string::npos; at = text.find("lane[", at + 1)) {
      const size_t colon = text.find(':', at);
      if (colon == std::string::npos) break;
      size_t start = text.find_first_not_of(' ', colon + 1);
      if (start == std::string::npos) break;
      start = text.find(':', start);  // past the resource number
      if (start == std::string::npos) break;
      const size_t end = text.find_first_of(" \n", start + 1);
      std::string lane = text.substr(start + 1, end == std::string::npos ? end : end - start - 1);
      if (const size_t dot = lane.rfind('.'); dot != std::string::npos) lane.resize(dot);
      if (!lane.empty() && std::find(lanes.begin(), lanes.end(), lane) == lanes.end()) {
        lanes.push_back(std::move(lane));
      }
    }
    std::string out;
    for (const std::string& lane : lanes) out += (out.empty() ? "" : ", ") + lane;
    return out;
  }

  Result<bool> OneSided(ConnectionId id) {
    REPLAYDB_ASSIGN_OR_RETURN(const std::string info, EndpointInfo(id));
    // ucp_ep_print_info names the lanes that carry reads ("get[3]: 0..<bcopy>
    // ..(inf)" for lane 3, whose line is "lane[3]:  1:sysv/memory.0 md[2] ...").
    // None: UCX emulates reads with active messages the peer answers; and
    // TCP's are not one-sided either.
    std::unordered_map<std::string, std::string> lanes;  // "3" -> its line
    std::vector<std::string> readers;
    for (size_t at = 0; at < info.size();) {
      size_t end = info.find('\n', at);
      if (end == std::string::npos) end = info.size();
      const std::string line = info.substr(at, end - at);
      at = end + 1;
      for (const char* tag : {"lane[", "get["}) {
        const size_t open = line.find(tag);
        if (open == std::string::npos) continue;
        const size_t first = open + std::strlen(tag);
        const size_t close = line.find(']', first);
        if (close == std::string::npos) continue;
        std::string index = line.substr(first, close - first);
        if (tag[0] == 'l') {
          lanes[index] = line;
        } else {
          readers.push_back(std::move(index));
        }
      }
    }
    if (readers.empty()) return false;
    for (const std::string& lane : readers) {
      auto it = lanes.find(lane);
      if (it == lanes.end() || it->second.find("tcp/") != std::string::npos) return false;
    }
    return true;
  }

  Result<std::unique_ptr<SharedMemory>> AllocateShared(size_t bytes) {
    if (bytes == 0) return Status::InvalidArgument("transport: shared memory of 0 bytes");
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucp_mem_h memh = nullptr;
    ucs_status_t s = ucp_mem_map(context_, &mp, &memh);
    if (s != UCS_OK) {
      return Status::ResourceExhausted("transport: cannot map " + std::to_string(bytes) +
                                       " bytes of shared memory: " + UcsError(s));
    }
    std::unique_ptr<SharedMemory> m(new SharedMemory());
    m->context_ = context_owner_;
    m->handle_ = memh;
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    s = ucp_mem_query(memh, &attr);
    if (s != UCS_OK) return Status::Internal("transport: ucp_mem_query: " + UcsError(s));
    m->data_ = static_cast<std::byte*>(attr.address);
    m->size_ = bytes;
    void* packed = nullptr;
    size_t packed_size = 0;
    s = ucp_rkey_pack(context_, memh, &packed, &packed_size);
    if (s != UCS_OK) return Status::Internal("transport: ucp_rkey_pack: " + UcsError(s));
    m->key_.assign(static_cast<const char*>(packed), packed_size);
    ucp_rkey_buffer_release(packed);
    return m;
  }

  Result<uint64_t> ImportKey(ConnectionId id, std::string_view key) {
    Worker* w = WorkerOf(id);
    if (w == nullptr) return Status::NotFound("transport: no connection " + std::to_string(id));
    std::optional<Hold> hold;
    if (holding_ != w) hold.emplace(*w);
    auto it = w->connections.find(id);
    if (it == w->connections.end()) {
      return Status::Unavailable("transport: connection " + std::to_string(id) + " has ended");
    }
    ucp_rkey_h rkey = nullptr;
    const ucs_status_t s = ucp_ep_rkey_unpack(it->second.ep, key.data(), &rkey);
    if (s != UCS_OK) {
      return Status::InvalidArgument("transport: a memory key of " + std::to_string(key.size()) +
                                     " bytes from " + it->second.peer +
                                     " does not unpack: " + UcsError(s));
    }
    it->second.rkeys.push_back(rkey);
    return static_cast<uint64_t>(it->second.rkeys.size());
  }

  void ReadMany(ConnectionId id, std::vector<ReadPiece> pieces,
                std::function<void(const Status&)> done) {
    Worker* w = WorkerOf(id);
    if (w == nullptr) {
      done(Status::NotFound("transport: no connection " + std::to_string(id)));
      return;
    }
    StartOnWorker(*w, [this, w, id, pieces = std::move(pieces), done = std::move(done)]() mutable {
      return ReadNow(*w, id, std::move(pieces), std::move(done));
    });
  }

  Result<ConnectionId> Connect(const std::string& host, uint16_t port,
                               std::chrono::milliseconds timeout) {
    REPLAYDB_ASSIGN_OR_RETURN(const sockaddr_in addr, Resolve(host, port));
    const std::string peer = Address(host, port);
    Worker& w = NextWorker();
    const ConnectionId id = NewId(w);
    // The endpoint is made on the worker's thread; the connection is up once
    // a first message round trip would go through: UCX reports a refused or
    // unreachable peer through the error handler, so wait for a flush.
    auto promise = std::make_shared<std::promise<Status>>();
    std::future<Status> result = promise->get_future();
    Post(w, [this, &w, id, addr, peer, promise] {
      if (stopping_.load()) {
        promise->set_value(Status::Cancelled("transport: stopped while connecting to " + peer));
        return;
      }
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
      ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
      ep.sockaddr.addrlen = sizeof(addr);
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &Impl::OnEndpointError;
      ep.err_handler.arg = &w;
      ucp_ep_h handle = nullptr;
      const ucs_status_t s = ucp_ep_create(w.worker, &ep, &handle);
      if (s != UCS_OK) {
        promise->set_value(
            Status::Unavailable("transport: cannot connect to " + peer + ": " + UcsError(s)));
        return;
      }
      Added(w, id, handle, peer);
      Flush(w, id, promise);
    });
    if (result.wait_for(timeout) != std::future_status::ready) {
      CloseAndWait(id);
      return Status::Unavailable("transport: connecting to " + peer + " timed out after " +
                                 std::to_string(timeout.count()) + " ms");
    }
    Status s = result.get();
    if (!s.ok()) {
      CloseAndWait(id);
      return s;
    }
    return id;
  }

  void Send(ConnectionId to, std::string header, std::string payload,
            std::function<void(const Status&)> done) {
    std::unique_ptr<Outgoing> out = NewOutgoing(to, std::move(header), std::move(done));
    if (!out) return;
    out->payload = std::move(payload);
    Dispatch(std::move(out));
  }

  void SendParts(ConnectionId to, std::string header,
                 std::vector<std::span<const std::byte>> parts, std::shared_ptr<const void> keep,
                 std::function<void(const Status&)> done) {
    std::unique_ptr<Outgoing> out = NewOutgoing(to, std::move(header), std::move(done));
    if (!out) return;
    for (const auto& part : parts) {
      if (part.empty()) continue;
      out->iov.push_back(ucp_dt_iov_t{const_cast<std::byte*>(part.data()), part.size()});
    }
    out->keep = std::move(keep);
    Dispatch(std::move(out));
  }

  // A message for `to` with `header` and `done`; nullptr (`done` run with
  // NotFound) for a connection this transport never had.
  std::unique_ptr<Outgoing> NewOutgoing(ConnectionId to, std::string header,
                                        std::function<void(const Status&)> done) {
    Worker* w = WorkerOf(to);
    if (w == nullptr) {
      if (done) done(Status::NotFound("transport: no connection " + std::to_string(to)));
      return nullptr;
    }
    auto out = std::make_unique<Outgoing>();
    out->worker = w;
    out->to = to;
    out->header = std::move(header);
    out->done = std::move(done);
    return out;
  }

  void Dispatch(std::unique_ptr<Outgoing> out) {
    Worker* w = out->worker;
    StartOnWorker(*w, [this, out = out.release()] { return SendNow(std::unique_ptr<Outgoing>(out)); });
  }

  // Runs `start` (a send or reads; true when what it started is still in
  // flight) on `w`: directly when this thread holds the worker (a handler, a
  // callback) or it is free, queued to its holder otherwise. Work queued
  // before runs first: messages on a connection keep their order. A caller
  // that runs it sends the heartbeats when due (it may hold the worker again
  // and again) and wakes the worker's thread for what is still in flight.
  void StartOnWorker(Worker& w, std::function<bool()> start) {
    if (holding_ == &w) {
      (void)start();
      return;
    }
    std::unique_lock<std::mutex> free(w.progress, std::try_to_lock);
    if (free.owns_lock()) {
      Worker* previous = holding_;
      holding_ = &w;
      RunQueued(w);
      const bool in_flight = start();
      BeatIfDue(w);
      holding_ = previous;
      free.unlock();
      // Its completion needs progress: the worker's thread may be asleep.
      // (A read over shared memory is done at once: no system call for it.)
      if (in_flight) ucp_worker_signal(w.worker);
      return;
    }
    Post(w, [start = std::move(start)]() mutable { (void)start(); });
  }

  bool Drive(ConnectionId id, const std::function<bool()>& done,
             std::chrono::microseconds budget) {
    Worker* w = WorkerOf(id);
    if (w == nullptr || holding_ == w || budget.count() <= 0) return done();
    w->drivers.fetch_add(1, std::memory_order_acq_rel);
    const auto until = std::chrono::steady_clock::now() + budget;
    bool finished = done();
    int turn = 0;
    while (!finished && !stopping_.load(std::memory_order_relaxed)) {
      bool clock = false;
      {
        Hold hold(*w);
        const bool ran = RunQueued(*w);
        const bool progressed = Progress(*w) != 0;
        // The clock, and the heartbeats it may make due, after a turn that
        // did work (it may have taken long), else every few turns.
        clock = ran || progressed || ++turn % kTurnsPerClock == 0;
        if (clock) BeatIfDue(*w);
      }
      finished = done();
      if (clock && std::chrono::steady_clock::now() >= until) break;
    }
    if (w->drivers.fetch_sub(1, std::memory_order_acq_rel) == 1 && !finished) {
      // The caller goes to sleep: the worker's thread takes over at once.
      std::lock_guard<std::mutex> lock(w->park_mu);
      w->park_cv.notify_all();
    }
    return finished;
  }

  // Close, returning once the connection is gone from its worker (a failed
  // Connect leaves nothing open behind it).
  void CloseAndWait(ConnectionId id) {
    Worker* w = WorkerOf(id);
    if (w == nullptr) return;
    auto gone = std::make_shared<std::promise<void>>();
    std::future<void> f = gone->get_future();
    Post(*w, [this, w, id, gone] {
      Closed(*w, id, Status::OK(), /*by_us=*/false);
      gone->set_value();
    });
    (void)f.wait_for(std::chrono::seconds(10));
  }

  void Close(ConnectionId id, std::chrono::milliseconds grace) {
    Worker* w = WorkerOf(id);
    if (w == nullptr) return;
    if (grace.count() <= 0) {
      Post(*w, [this, w, id] { Closed(*w, id, Status::OK(), /*by_us=*/true); });
      return;
    }
    Post(*w, [w, id, grace] {
      auto it = w->connections.find(id);
      if (it == w->connections.end()) return;
      it->second.close_at = std::min(it->second.close_at, std::chrono::steady_clock::now() + grace);
      w->next_close = std::min(w->next_close, it->second.close_at);
    });
  }

  // The worker's thread (holding `w`): connections whose grace (Close) is
  // over end.
  void CloseDue(Worker& w, std::chrono::steady_clock::time_point now) {
    if (now < w.next_close) return;
    std::vector<ConnectionId> due;
    w.next_close = std::chrono::steady_clock::time_point::max();
    for (const auto& [id, c] : w.connections) {
      if (c.close_at <= now) {
        due.push_back(id);
      } else {
        w.next_close = std::min(w.next_close, c.close_at);
      }
    }
    for (const ConnectionId id : due) Closed(w, id, Status::OK(), /*by_us=*/true);
  }

  // A buffer of `length` bytes for a payload (contents unspecified): a
  // recycled one when one is big enough (one of that very size first: its
  // resize writes nothing), else a new one.
  std::string PayloadBuffer(size_t length) {
    std::string buffer;
    if (length >= Transport::kMinSpareBytes) {
      std::lock_guard<std::mutex> lock(spare_mu_);
      size_t best = spare_.size();  // none yet
      for (size_t i = 0; i < spare_.size(); ++i) {
        if (spare_[i].capacity() < length) continue;
        if (spare_[i].size() == length) {
          best = i;
          break;
        }
        if (best == spare_.size() || spare_[i].capacity() < spare_[best].capacity()) best = i;
      }
      if (best != spare_.size()) {
        buffer = std::move(spare_[best]);
        spare_[best] = std::move(spare_.back());
        spare_.pop_back();
        spare_bytes_ -= buffer.capacity();
        reused_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    buffer.resize(length);
    return buffer;
  }
  std::string PayloadCopy(const void* data, size_t length) {
    if (length < Transport::kMinSpareBytes) return std::string(static_cast<const char*>(data), length);
    std::string buffer = PayloadBuffer(length);
    std::memcpy(buffer.data(), data, length);
    return buffer;
  }
  void Recycle(std::string buffer) {
    const size_t bytes = buffer.capacity();
    if (bytes < Transport::kMinSpareBytes || bytes > Transport::kMaxSpareBytes) return;
    std::lock_guard<std::mutex> lock(spare_mu_);
    if (spare_bytes_ + bytes > Transport::kMaxSpareTotal) return;  // freed (after the lock)
    spare_bytes_ += bytes;
    spare_.push_back(std::move(buffer));
  }
  uint64_t reused_buffers() const { return reused_.load(std::memory_order_relaxed); }

 private:
  Worker& NextWorker() {
    const size_t i = next_worker_.fetch_add(1) % workers_.size();
    return *workers_[i];
  }
  // Ids carry their worker's index in the low 8 bits.
  ConnectionId NewId(const Worker& w) {
    return (NextConnectionNumber() << 8) | static_cast<ConnectionId>(w.index);
  }
  Worker* WorkerOf(ConnectionId id) {
    if (id == 0) return nullptr;
    const size_t i = id & 0xFF;
    return i < workers_.size() ? workers_[i].get() : nullptr;
  }

  // Runs `fn` on `w`'s thread. After the stop, work is dropped (a Send's
  // done is run with Cancelled by the drain in Run).
  void Post(Worker& w, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(w.mu);
      w.queue.push_back(std::move(fn));
      w.queued.store(true, std::memory_order_release);
    }
    ucp_worker_signal(w.worker);
  }

  void Added(Worker& w, ConnectionId id, ucp_ep_h ep, std::string peer) {
    w.connections[id] = Connection{ep, std::move(peer)};
    w.by_ep[ep] = id;
    open_.fetch_add(1);
  }

  // Completes `promise` once everything sent on `id` so far has reached the
  // peer (for Connect: the connection is up), or with the failure.
  void Flush(Worker& w, ConnectionId id, std::shared_ptr<std::promise<Status>> promise) {
    auto it = w.connections.find(id);
    if (it == w.connections.end()) {
      promise->set_value(Status::Unavailable("transport: the connection ended"));
      return;
    }
    struct Flushing {
      std::shared_ptr<std::promise<Status>> promise;
      std::string peer;
      Worker* worker;
      ConnectionId id;
    };
    auto* f = new Flushing{std::move(promise), it->second.peer, &w, id};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = [](void* request, ucs_status_t status, void* user) {
      auto* f = static_cast<Flushing*>(user);
      if (status == UCS_OK) f->worker->impl->Announce(*f->worker, f->id);
      f->promise->set_value(status == UCS_OK ? Status::OK()
                                             : Status::Unavailable("transport: cannot connect to " +
                                                                   f->peer + ": " +
                                                                   UcsError(status)));
      delete f;
      ucp_request_free(request);
    };
    p.user_data = f;
    ucs_status_ptr_t r = ucp_ep_flush_nbx(it->second.ep, &p);
    if (r == nullptr) {
      Announce(w, id);
      f->promise->set_value(Status::OK());
      delete f;
    } else if (UCS_PTR_IS_ERR(r)) {
      f->promise->set_value(Status::Unavailable("transport: cannot connect to " + f->peer + ": " +
                                                UcsError(UCS_PTR_STATUS(r))));
      delete f;
    }
  }

  void Announce(Worker& w, ConnectionId id) {
    auto it = w.connections.find(id);
    if (it != w.connections.end()) it->second.announced = true;
  }

  // Sends `out` on its worker (held); true when it is still in flight.
  bool SendNow(std::unique_ptr<Outgoing> out) {
    Worker& w = *out->worker;
    if (stopping_.load()) {
      if (out->done) out->done(Status::Cancelled("transport: stopped before the message was sent"));
      return false;
    }
    auto it = w.connections.find(out->to);
    if (it == w.connections.end()) {
      if (out->done) {
        out->done(Status::Unavailable("transport: connection " + std::to_string(out->to) +
                                      " has ended"));
      }
      return false;
    }
    if (w.batching && out->iov.empty() &&
        out->header.size() + out->payload.size() <= kBatchableBytes) {
      w.held.push_back(std::move(out));
      return false;
    }
    // What waits goes first: messages on a connection keep their order.
    if (!w.held.empty()) SendHeld(w);
    return SendOne(std::move(out));
  }

  // Sends `out` (its connection open on its worker, held) as one message.
  bool SendOne(std::unique_ptr<Outgoing> out) {
    Worker& w = *out->worker;
    auto it = w.connections.find(out->to);
    if (it == w.connections.end()) {
      Sent(*out, UCS_ERR_CONNECTION_RESET);
      return false;
    }
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.cb.send = [](void* request, ucs_status_t status, void* user) {
      std::unique_ptr<Outgoing> out(static_cast<Outgoing*>(user));
      --out->worker->sends_in_flight;
      Sent(*out, status);
      ucp_request_free(request);
    };
    Outgoing* raw = out.get();
    p.user_data = raw;
    const void* data = raw->payload.data();
    size_t count = raw->payload.size();
    if (!raw->iov.empty()) {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      data = raw->iov.data();
      count = raw->iov.size();
    }
    ucs_status_ptr_t r = ucp_am_send_nbx(it->second.ep, kMessageId, raw->header.data(),
                                         raw->header.size(), data, count, &p);
    if (r == nullptr) {
      Sent(*out, UCS_OK);
      return false;
    }
    if (UCS_PTR_IS_ERR(r)) {
      Sent(*out, UCS_PTR_STATUS(r));
      return false;
    }
    ++w.sends_in_flight;
    (void)out.release();  // the callback owns it now
    return true;
  }

  // Several messages to one connection sent as one (kBatchId); done when
  // the batch is.
  struct Batch {
    Worker* worker = nullptr;
    std::string bytes;
    std::vector<std::unique_ptr<Outgoing>> messages;
  };

  // Sends what handlers sent during a progress of `w` (held): per
  // connection in order, runs of two or more messages in batches of at
  // most kBatchBytes (AppendToBatch), a message alone as itself.
  void SendHeld(Worker& w) {
    std::vector<std::unique_ptr<Outgoing>> held;
    held.swap(w.held);
    // Each connection's messages together, in the order they were sent.
    std::stable_sort(held.begin(), held.end(),
                     [](const auto& a, const auto& b) { return a->to < b->to; });
    const auto framed = [](const Outgoing& out) {
      return 8 + out.header.size() + out.payload.size();
    };
    for (size_t i = 0; i < held.size();) {
      size_t end = i + 1;
      size_t bytes = framed(*held[i]);
      while (end < held.size() && held[end]->to == held[i]->to &&
             bytes + framed(*held[end]) <= kBatchBytes) {
        bytes += framed(*held[end++]);
      }
      if (end - i == 1) {
        (void)SendOne(std::move(held[i]));
      } else {
        const ConnectionId to = held[i]->to;
        auto batch = std::make_unique<Batch>();
        batch->bytes.reserve(bytes);
        for (size_t k = i; k < end; ++k) {
          AppendToBatch(&batch->bytes, held[k]->header, held[k]->payload);
          batch->messages.push_back(std::move(held[k]));
        }
        SendBatch(w, to, std::move(batch));
      }
      i = end;
    }
  }

  // Each message of a batch done with `status`.
  static void Finish(Batch& b, ucs_status_t status) {
    for (auto& out : b.messages) Sent(*out, status);
  }

  void SendBatch(Worker& w, ConnectionId to, std::unique_ptr<Batch> batch) {
    auto it = w.connections.find(to);
    if (it == w.connections.end()) {
      Finish(*batch, UCS_ERR_CONNECTION_RESET);
      return;
    }
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    p.cb.send = [](void* request, ucs_status_t status, void* user) {
      std::unique_ptr<Batch> b(static_cast<Batch*>(user));
      --b->worker->sends_in_flight;
      Finish(*b, status);
      ucp_request_free(request);
    };
    p.user_data = batch.get();
    batch->worker = &w;
    ucs_status_ptr_t r = ucp_am_send_nbx(it->second.ep, kBatchId, nullptr, 0, batch->bytes.data(),
                                         batch->bytes.size(), &p);
    if (UCS_PTR_IS_ERR(r)) {
      Finish(*batch, UCS_PTR_STATUS(r));
      return;
    }
    batched_.fetch_add(batch->messages.size(), std::memory_order_relaxed);
    if (r == nullptr) {
      Finish(*batch, UCS_OK);
      return;
    }
    ++w.sends_in_flight;
    (void)batch.release();  // the callback owns it now
  }

  // ucp_worker_progress on `w` (held), the replies its handlers send going
  // out in batches after it.
  unsigned Progress(Worker& w) {
    w.batching = true;
    ++w.in_ucx;
    const unsigned n = ucp_worker_progress(w.worker);
    --w.in_ucx;
    w.batching = false;
    if (!w.held.empty()) SendHeld(w);
    return n;
  }

  // Starts the reads of a ReadMany on `w` (held); true when some are still
  // in flight (`done` runs once the last is done).
  bool ReadNow(Worker& w, ConnectionId id, std::vector<ReadPiece> pieces,
               std::function<void(const Status&)> done) {
    if (stopping_.load()) {
      done(Status::Cancelled("transport: stopped before the read was made"));
      return false;
    }
    auto it = w.connections.find(id);
    if (it == w.connections.end()) {
      done(Status::Unavailable("transport: connection " + std::to_string(id) + " has ended"));
      return false;
    }
    for (const ReadPiece& p : pieces) {
      if (p.key == 0 || p.key > it->second.rkeys.size()) {
        done(Status::InvalidArgument("transport: connection " + std::to_string(id) +
                                     " has no memory key " + std::to_string(p.key)));
        return false;
      }
    }
    // What the reads in flight share; the last one done reports. One more
    // than the reads until all are made.
    struct Reading {
      ConnectionId id;
      size_t left;
      ucs_status_t failed = UCS_OK;
      std::function<void(const Status&)> done;
      // Counts one read (or the making of them) done; true when it was the last.
      bool Done(ucs_status_t status) {
        if (status != UCS_OK && failed == UCS_OK) failed = status;
        return --left == 0;
      }
    };
    auto* r = new Reading{id, pieces.size() + 1, UCS_OK, std::move(done)};
    auto finish = [](Reading* r) {
      std::unique_ptr<Reading> owned(r);
      owned->done(ReadStatus(owned->id, owned->failed));
    };
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = [](void* request, ucs_status_t status, void* user) {
      auto* r = static_cast<Reading*>(user);
      ucp_request_free(request);
      if (r->Done(status)) {
        std::unique_ptr<Reading> owned(r);
        owned->done(ReadStatus(owned->id, owned->failed));
      }
    };
    param.user_data = r;
    // Over shared memory each read is copied here and now, with the worker
    // held: a learner's 8 MiB sample, read into fresh pages on a loaded
    // two-core machine, took 300 ms, and its server ended the connection as
    // silent. So when a heartbeat falls due meanwhile the worker progresses
    // (unless this runs inside a UCX call: Worker::in_ucx), which sends what
    // waited for room in the peer's queue and hears what came, and the
    // heartbeat goes out.
    size_t since_clock = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const ReadPiece& p = pieces[i];
      if (p.into.empty()) {
        (void)r->Done(UCS_OK);
        continue;
      }
      ucs_status_ptr_t q = ucp_get_nbx(it->second.ep, p.into.data(), p.into.size(), p.address,
                                       it->second.rkeys[p.key - 1], &param);
      // Done at once (NULL) or failed; else its callback counts it.
      if (q == nullptr || UCS_PTR_IS_ERR(q)) (void)r->Done(q == nullptr ? UCS_OK : UCS_PTR_STATUS(q));
      since_clock += p.into.size();
      if (since_clock < kBytesPerClock || options_.heartbeat.count() <= 0) continue;
      since_clock = 0;
      if (w.in_ucx == 0 && std::chrono::steady_clock::now() >= w.next_heartbeat) {
        Progress(w);
        it = w.connections.find(id);
        if (it == w.connections.end()) {  // ended meanwhile: the rest fail
          for (size_t k = i + 1; k < pieces.size(); ++k) (void)r->Done(UCS_ERR_CONNECTION_RESET);
          break;
        }
      }
      BeatIfDue(w);
    }
    if (r->Done(UCS_OK)) {
      finish(r);
      return false;
    }
    return true;
  }

  static Status ReadStatus(ConnectionId id, ucs_status_t status) {
    if (status == UCS_OK) return Status::OK();
    return Status::Unavailable("transport: a read on connection " + std::to_string(id) +
                               " failed: " + UcsError(status));
  }

  static void Sent(Outgoing& out, ucs_status_t status) {
    if (!out.done) return;
    if (status == UCS_OK) {
      out.done(Status::OK());
    } else {
      out.done(Status::Unavailable("transport: sending on connection " + std::to_string(out.to) +
                                   " failed: " + UcsError(status)));
    }
  }

  // The connection ends (at most once): handlers told, endpoint closed.
  void Closed(Worker& w, ConnectionId id, const Status& why, bool by_us) {
    auto it = w.connections.find(id);
    if (it == w.connections.end()) return;
    const ucp_ep_h ep = it->second.ep;
    const bool announced = it->second.announced;
    std::vector<ucp_rkey_h> rkeys = std::move(it->second.rkeys);
    w.by_ep.erase(ep);
    w.connections.erase(it);
    open_.fetch_sub(1);
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A failed endpoint can only be closed by force; ours flushes first.
    p.flags = by_us ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    // (A close by force cancels the endpoint's sends and reads, running
    // their callbacks here.)
    ++w.in_ucx;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    --w.in_ucx;
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
      w.closing.push_back(Closing{r, std::move(rkeys)});
    } else {
      for (ucp_rkey_h k : rkeys) ucp_rkey_destroy(k);
    }
    if (announced && options_.on_close) options_.on_close(id, why);
  }

  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* w = static_cast<Worker*>(arg);
    auto it = w->by_ep.find(ep);
    if (it == w->by_ep.end()) return;
    const ConnectionId id = it->second;
    const std::string peer = w->connections[id].peer;
    w->impl->Closed(*w, id,
                    Status::Unavailable("transport: connection " + std::to_string(id) + " to " +
                                        peer + " ended: " + UcsError(status)),
                    /*by_us=*/false);
  }

  static void OnConnectionRequest(ucp_conn_request_h request, void* arg) {
    auto* impl = static_cast<Impl*>(arg);
    std::string peer = "?";
    ucp_conn_request_attr_t attr{};
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(request, &attr) == UCS_OK &&
        attr.client_address.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&attr.client_address);
      char ip[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
      peer = Address(ip, ntohs(in->sin_port));
    }
    Worker& w = impl->NextWorker();
    const ConnectionId id = impl->NewId(w);
    impl->Post(w, [impl, &w, id, request, peer] {
      if (impl->stopping_.load()) {  // refused as the listener goes (~Impl)
        std::lock_guard<std::mutex> lock(impl->refused_mu_);
        impl->refused_.push_back(request);
        return;
      }
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.conn_request = request;
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &Impl::OnEndpointError;
      ep.err_handler.arg = &w;
      ucp_ep_h handle = nullptr;
      if (ucp_ep_create(w.worker, &ep, &handle) != UCS_OK) return;
      impl->Added(w, id, handle, peer);
      impl->Announce(w, id);
      if (impl->options_.on_accept) impl->options_.on_accept(id, peer);
    });
  }

  static ucs_status_t OnBatch(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
    return Arrived(arg, header, header_length, data, length, param, /*batch=*/true);
  }

  static ucs_status_t OnMessage(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param) {
    return Arrived(arg, header, header_length, data, length, param, /*batch=*/false);
  }

  static ucs_status_t Arrived(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param, bool batch) {
    auto* w = static_cast<Worker*>(arg);
    ConnectionId from = 0;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) {
      auto it = w->by_ep.find(param->reply_ep);
      if (it != w->by_ep.end()) from = it->second;
    }
    if (from == 0) return UCS_OK;  // from a connection already closed here: dropped
    Connection& c = w->connections[from];
    c.heard = std::chrono::steady_clock::now();
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0 && c.arrivals.empty()) {
      // Whole, and nothing before it waits: delivered at once.
      if (batch) {
        (void)w->impl->DeliverBatch(*w, from,
                                    std::string_view(static_cast<const char*>(data), length));
      } else {
        w->impl->Deliver(from, std::string(static_cast<const char*>(header), header_length),
                         w->impl->PayloadCopy(data, length));
      }
      return UCS_OK;
    }
    auto in = std::make_shared<Incoming>();
    in->worker = w;
    in->from = from;
    in->batch = batch;
    in->header.assign(static_cast<const char*>(header), header_length);
    c.arrivals.push_back(in);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
      in->payload = batch ? std::string(static_cast<const char*>(data), length)
                          : w->impl->PayloadCopy(data, length);
      in->ready = true;
      w->impl->DeliverArrived(*w, from);
      return UCS_OK;
    }
    // Rendezvous: fetch the payload where the receiver places it, or into
    // a buffer of our own.
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    void* buffer = nullptr;
    size_t count = length;
    if (w->impl->options_.place_large && !batch) {
      // Whether some message waiting ahead of this one (the last arrival)
      // is not placed.
      const bool queued_unplaced =
          std::any_of(c.arrivals.begin(), c.arrivals.end() - 1,
                      [](const std::shared_ptr<Incoming>& before) { return before->iov.empty(); });
      PayloadPlaces places =
          w->impl->options_.place_large(from, std::string_view(in->header), length, queued_unplaced);
      size_t placed = 0;
      for (const std::span<std::byte>& piece : places.pieces) {
        if (piece.empty()) continue;
        in->iov.push_back(ucp_dt_iov_t{piece.data(), piece.size()});
        placed += piece.size();
      }
      if (placed != length) in->iov.clear();  // (the receiver's mistake: our own buffer)
      in->keep = std::move(places.keep);
    }
    if (!in->iov.empty()) {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = ucp_dt_make_iov();
      buffer = in->iov.data();
      count = in->iov.size();
    } else {
      in->payload = w->impl->PayloadBuffer(length);
      buffer = in->payload.data();
    }
    p.cb.recv_am = [](void* request, ucs_status_t status, size_t, void* user) {
      std::unique_ptr<std::shared_ptr<Incoming>> in(static_cast<std::shared_ptr<Incoming>*>(user));
      (*in)->ready = true;
      (*in)->keep.reset();  // the payload is in (or will never come)
      if (status != UCS_OK) (*in)->header.clear(), (*in)->from = 0;  // lost with its connection
      (*in)->worker->impl->DeliverArrived(*(*in)->worker, (*in)->from);
      ucp_request_free(request);
    };
    auto* hold = new std::shared_ptr<Incoming>(in);
    p.user_data = hold;
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(w->worker, data, buffer, count, &p);
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
      delete hold;
      in->ready = true;
      in->keep.reset();
      if (r != nullptr) in->from = 0;
      w->impl->DeliverArrived(*w, from);
    }
    return UCS_OK;
  }

  static ucs_status_t OnHeartbeat(void* arg, const void*, size_t, void*, size_t,
                                  const ucp_am_recv_param_t* param) {
    auto* w = static_cast<Worker*>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) return UCS_OK;
    auto it = w->by_ep.find(param->reply_ep);
    if (it == w->by_ep.end()) return UCS_OK;
    w->connections[it->second].heard = std::chrono::steady_clock::now();
    return UCS_OK;
  }

  // Each heartbeat interval: a heartbeat on every connection, and the end
  // of those whose peer has been silent for missed_heartbeats intervals.
  // Sends each connection of `w` (held) its heartbeat.
  void Beat(Worker& w, std::chrono::steady_clock::time_point now) {
    for (auto& [id, c] : w.connections) {
      if (!c.announced) continue;
      ucp_request_param_t p{};
      p.op_attr_mask =
          UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_AM_SEND_FLAG_REPLY;
      p.user_data = &w;
      p.cb.send = [](void* request, ucs_status_t, void* user) {
        --static_cast<Worker*>(user)->sends_in_flight;
        ucp_request_free(request);
      };
      ucs_status_ptr_t r = ucp_am_send_nbx(c.ep, kHeartbeatId, nullptr, 0, nullptr, 0, &p);
      // Done at once, or freed by the callback; a failure shows as an ep error.
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) ++w.sends_in_flight;
    }
    w.next_heartbeat = now + options_.heartbeat;
  }

  // Beat, when it is due, from a caller that holds `w` (a send or read made
  // on the caller's thread, Drive): a caller that takes the worker again
  // and again can keep its thread from it for long, and the peer must still
  // hear from us. (Only the worker's thread ends silent connections, after
  // it has progressed: a caller may not have read what came.)
  void BeatIfDue(Worker& w) {
    if (options_.heartbeat.count() <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= w.next_heartbeat) Beat(w, now);
  }

  // The worker's thread (holding `w`): connections silent too long end;
  // heartbeats go out when due. It progresses first, in the same hold: the
  // thread may have waited long for the worker (a caller holding it), and
  // what came meanwhile must count as heard.
  //
  // One progress takes a bounded number of arrivals (a shared-memory
  // queue's poll count): after this worker was held or starved, a peer's
  // heartbeats can still wait behind others' messages, so it progresses
  // until nothing more comes (bounded). And a check that comes more than
  // two intervals late ends nothing: the silence may be this worker's own;
  // the next check, an interval later, judges (one check in a row at most
  // is passed over, so a dead peer is still found).
  void Heartbeats(Worker& w, std::chrono::steady_clock::time_point now) {
    if (now >= w.next_check) {
      const auto drain_until = now + kDrainBeforeCheck;
      while (Progress(w) != 0 && std::chrono::steady_clock::now() < drain_until) {
      }
      const auto checked = std::chrono::steady_clock::now();
      const bool late = checked - w.last_check > 2 * options_.heartbeat;
      if (!late || w.passed_over) {
        EndSilent(w, checked);
        w.passed_over = false;
      } else {
        w.passed_over = true;
      }
      w.last_check = checked;
      w.next_check = now + options_.heartbeat;
    }
    if (now >= w.next_heartbeat) Beat(w, now);
  }

  // Ends the connections of `w` (held) that heard nothing for
  // missed_heartbeats heartbeats.
  void EndSilent(Worker& w, std::chrono::steady_clock::time_point now) {
    const auto silence = options_.heartbeat * options_.missed_heartbeats;
    std::vector<ConnectionId> silent;
    for (auto& [id, c] : w.connections) {
      if (c.announced && now - c.heard > silence) silent.push_back(id);
    }
    for (const ConnectionId id : silent) {
      const std::string peer = w.connections[id].peer;
      Closed(w, id,
             Status::Unavailable("transport: connection " + std::to_string(id) + " to " + peer +
                                 ": nothing heard for " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    silence)
                                                    .count()) +
                                 " ms (" + std::to_string(options_.missed_heartbeats) +
                                 " heartbeats missed)"),
             /*by_us=*/false);
    }
  }

  // Delivers the whole messages at the front of `from`'s arrivals.
  void DeliverArrived(Worker& w, ConnectionId from) {
    auto it = w.connections.find(from);
    if (it == w.connections.end()) return;
    auto& arrivals = it->second.arrivals;
    while (!arrivals.empty() && arrivals.front()->ready) {
      std::shared_ptr<Incoming> in = std::move(arrivals.front());
      arrivals.pop_front();
      if (in->from != 0 && in->batch) {
        if (!DeliverBatch(w, in->from, in->payload)) return;
      } else if (in->from != 0) {
        Deliver(in->from, std::move(in->header), std::move(in->payload));
      }
      // The handler may have closed the connection.
      it = w.connections.find(from);
      if (it == w.connections.end()) return;
    }
  }

  // Delivers each message of a batch in order; false when the connection
  // ended (a batch that does not parse ends it: its peer cannot be trusted).
  bool DeliverBatch(Worker& w, ConnectionId from, std::string_view batch) {
    bool open = true;
    const Status parsed = ForEachInBatch(batch, "connection " + std::to_string(from),
                                         [&](std::string_view header, std::string_view payload) {
                                           Deliver(from, std::string(header), std::string(payload));
                                           open = w.connections.find(from) != w.connections.end();
                                           return open;
                                         });
    if (!parsed.ok() && open) {
      Closed(w, from, parsed, /*by_us=*/true);
      return false;
    }
    return open;
  }

  void Deliver(ConnectionId from, std::string header, std::string payload) {
    if (options_.on_message) options_.on_message(from, std::move(header), std::move(payload));
  }

  // Frees the endpoint closes that finished; true if some are in progress.
  static bool SweepCloses(Worker& w) {
    std::vector<Closing> pending;
    for (Closing& c : w.closing) {
      if (ucp_request_check_status(c.request) == UCS_INPROGRESS) {
        pending.push_back(std::move(c));
      } else {
        ucp_request_free(c.request);
        for (ucp_rkey_h k : c.rkeys) ucp_rkey_destroy(k);
      }
    }
    w.closing.swap(pending);
    return !w.closing.empty();
  }

  // Runs the work queued for `w`; true if there was some.
  static bool RunQueued(Worker& w) {
    if (!w.queued.load(std::memory_order_acquire)) return false;
    std::unique_lock<std::mutex> lock(w.mu);
    w.queued.store(false, std::memory_order_relaxed);
    if (w.queue.empty()) return false;
    std::deque<std::function<void()>> work;
    work.swap(w.queue);
    lock.unlock();
    for (auto& fn : work) fn();
    return !work.empty();
  }

  // A worker's thread: queued work, progress, heartbeats, then sleep when
  // idle (until an event, a signal, or the next heartbeat). While callers
  // drive progress themselves (Drive) it parks, waking each millisecond for
  // the heartbeats and to see whether they left.
  void Run(Worker& w) {
    using Clock = std::chrono::steady_clock;
    const bool beating = options_.heartbeat.count() > 0;
    while (!stopping_.load()) {
      if (w.drivers.load(std::memory_order_acquire) > 0) {
        {
          std::unique_lock<std::mutex> lock(w.park_mu);
          w.park_cv.wait_for(lock, std::chrono::milliseconds(1), [&] {
            return w.drivers.load(std::memory_order_acquire) == 0 || stopping_.load();
          });
        }
        Hold hold(w);
        const Clock::time_point now = Clock::now();
        if (beating) Heartbeats(w, now);
        continue;
      }
      bool active = false;
      {
        Hold hold(w);
        active = RunQueued(w);
      }
      // Spin: the clock after a turn that did work (it may have taken long:
      // the heartbeats below must not wait for several such), else every
      // few turns.
      const Clock::time_point spin_until = Clock::now() + options_.spin;
      int turn = 0;
      bool check = false;
      do {
        Hold hold(w);
        const bool worked = Progress(w) != 0;
        if (worked) active = true;
        check = worked || ++turn % kTurnsPerClock == 0;
      } while ((!check || Clock::now() < spin_until) &&
               w.drivers.load(std::memory_order_relaxed) == 0);
      {
        Hold hold(w);
        if (!w.closing.empty()) SweepCloses(w);
        const Clock::time_point now = Clock::now();
        if (beating) Heartbeats(w, now);
        CloseDue(w, now);
      }
      if (active) {
        w.pending_naps = 0;
        continue;
      }
      ucs_status_t armed = UCS_OK;
      Clock::time_point wake;
      bool sending = false;
      {
        Hold hold(w);
        armed = ucp_worker_arm(w.worker);
        wake = w.next_close;
        if (beating) wake = std::min({wake, w.next_heartbeat, w.next_check});
        sending = w.sends_in_flight > 0;
      }
      if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile
      {
        std::lock_guard<std::mutex> lock(w.mu);
        if (!w.queue.empty() || stopping_.load()) continue;
      }
      if (armed != UCS_OK) continue;
      if (w.drivers.load(std::memory_order_acquire) > 0) continue;
      int timeout_ms = -1;
      if (wake != Clock::time_point::max()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now());
        timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()) + 1);
      }
      if (!sending) {
        w.pending_naps = 0;
      } else {
        const int nap = static_cast<int>(kPendingSendSleep.count())
                        << std::min(w.pending_naps++, 4);
        if (timeout_ms < 0 || timeout_ms > nap) timeout_ms = nap;
      }
      pollfd fd{w.efd, POLLIN, 0};
      (void)::poll(&fd, 1, timeout_ms);
    }
    // Stopping: what was queued runs (sends and connects fail as stopped),
    // every connection of this worker ends, and their closes finish.
    Hold hold(w);
    RunQueued(w);
    std::vector<ConnectionId> ids;
    for (const auto& [id, c] : w.connections) ids.push_back(id);
    for (const ConnectionId id : ids) {
      Closed(w, id, Status::Cancelled("transport: stopped"), /*by_us=*/true);
    }
    const Clock::time_point give_up = Clock::now() + std::chrono::seconds(2);
    while (SweepCloses(w) && Clock::now() < give_up) {
      ucp_worker_progress(w.worker);
      RunQueued(w);
    }
    RunQueued(w);
  }

  TransportOptions options_;
  ucp_context_h context_ = nullptr;
  std::shared_ptr<void> context_owner_;  // the context; SharedMemory holds it too
  ucp_listener_h listener_ = nullptr;
  // Connection requests that came after stopping_, refused in ~Impl.
  std::mutex refused_mu_;
  std::vector<ucp_conn_request_h> refused_;
  std::vector<std::unique_ptr<Worker>> workers_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> next_worker_{0};
  std::atomic<int> open_{0};
  std::atomic<uint64_t> batched_{0};
  // Recycled payload buffers (Recycle), spare_bytes_ of capacity in all.
  std::mutex spare_mu_;
  std::vector<std::string> spare_;
  size_t spare_bytes_ = 0;
  std::atomic<uint64_t> reused_{0};
};

thread_local Transport::Impl::Worker* Transport::Impl::holding_ = nullptr;

Result<std::unique_ptr<Transport>> Transport::Start(TransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  REPLAYDB_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Transport::~Transport() = default;

uint16_t Transport::port() const { return impl_->port(); }

Result<ConnectionId> Transport::Connect(const std::string& host, uint16_t port,
                                        std::chrono::milliseconds timeout) {
  return impl_->Connect(host, port, timeout);
}

void Transport::Send(ConnectionId to, std::string header, std::string payload,
                     std::function<void(const Status&)> done) {
  impl_->Send(to, std::move(header), std::move(payload), std::move(done));
}

void Transport::SendParts(ConnectionId to, std::string header,
                          std::vector<std::span<const std::byte>> parts,
                          std::shared_ptr<const void> keep,
                          std::function<void(const Status&)> done) {
  impl_->SendParts(to, std::move(header), std::move(parts), std::move(keep), std::move(done));
}

void Transport::Close(ConnectionId connection, std::chrono::milliseconds grace) {
  impl_->Close(connection, grace);
}

bool Transport::Drive(ConnectionId connection, const std::function<bool()>& done,
                      std::chrono::microseconds budget) {
  return impl_->Drive(connection, done, budget);
}

int Transport::open_connections() const { return impl_->open_connections(); }
uint64_t Transport::batched_messages() const {
  return impl_->batched_messages();
}
void Transport::Recycle(std::string buffer) { impl_->Recycle(std::move(buffer)); }
uint64_t Transport::reused_buffers() const { return impl_->reused_buffers(); }

Result<std::string> Transport::Lanes(ConnectionId connection) { return impl_->Lanes(connection); }

Result<bool> Transport::OneSided(ConnectionId connection) { return impl_->OneSided(connection); }

Result<std::unique_ptr<SharedMemory>> Transport::AllocateShared(size_t bytes) {
  return impl_->AllocateShared(bytes);
}

Result<uint64_t> Transport::ImportKey(ConnectionId connection, std::string_view key) {
  return impl_->ImportKey(connection, key);
}

void Transport::ReadMany(ConnectionId connection, std::vector<ReadPiece> pieces,
                         std::function<void(const Status&)> done) {
  impl_->ReadMany(connection, std::move(pieces), std::move(done));
}

Status Transport::ReadAll(ConnectionId connection, std::vector<ReadPiece> pieces,
                          std::chrono::milliseconds timeout, std::shared_ptr<const void> keep) {
  struct State {
    std::mutex mu;
    std::optional<Status> status;
  };
  auto state = std::make_shared<State>();
  ReadMany(connection, std::move(pieces), [state, keep = std::move(keep)](const Status& s) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->status = s;
  });
  auto finished = [&] {
    std::lock_guard<std::mutex> lock(state->mu);
    return state->status.has_value();
  };
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (!Drive(connection, finished, std::chrono::milliseconds(10)) &&
         std::chrono::steady_clock::now() < give_up) {
  }
  std::lock_guard<std::mutex> lock(state->mu);
  return state->status.value_or(Status::DeadlineExceeded(
      "transport: reads on connection " + std::to_string(connection) + " not done after " +
      std::to_string(timeout.count()) + " ms"));
}

SharedMemory::~SharedMemory() {
  if (handle_ != nullptr) {
    (void)ucp_mem_unmap(static_cast<ucp_context_h>(context_.get()),
                        static_cast<ucp_mem_h>(handle_));
  }
}

}  // namespace replaydb::rdma
