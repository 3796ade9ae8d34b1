#include "rdma/remote_db.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>

#include "engine/db/catalog.h"
#include "engine/gpu/device_sampler.h"
#include "engine/rate_limiter/rate_limiter.h"
#include "engine/table/device_output.h"
#include "engine/table/table_impl.h"
#include "kernels/runtime/device_memory.h"
#include "rdma/coord/coordinator.h"
#include "rdma/db_service.h"
#include "rdma/shards/sharded_db.h"
#include "rdma/through_host.h"
#include "rdma/token.h"
#include "replaydb/device.h"
#include "wal/records.h"

namespace replaydb {

Result<std::unique_ptr<DB>> DB::Connect(const std::string& address, const ConnectOptions& options) {
  if (rdma::IsShardedAddress(address)) {
    REPLAYDB_ASSIGN_OR_RETURN(auto sharded, rdma::ShardedDB::Connect(address, options));
    return std::unique_ptr<DB>(std::move(sharded));
  }
  REPLAYDB_ASSIGN_OR_RETURN(auto db, rdma::RemoteDB::Connect(address, options));
  return std::unique_ptr<DB>(std::move(db));
}

namespace rdma {
namespace {

namespace fb = wire::fb;
using std::chrono::milliseconds;

// The reply's body, checked to be of `kind`.
// `what` names the call: a string, or a callable that returns one (built
// only when the body is wrong, off the path of calls that succeed).
template <typename What>
Status ExpectBody(const Message& m, fb::Body kind, const What& what) {
  if (m.header()->body_type() != kind) {
    std::string named;
    if constexpr (std::is_invocable_v<const What&>) {
      named = what();
    } else {
      named = what;
    }
    return Status::Corruption(named + ": the server answered with a body of kind '" +
                              std::string(fb::EnumNameBody(m.header()->body_type())) + "', not '" +
                              fb::EnumNameBody(kind) + "'");
  }
  return Status::OK();
}

// A request's encoder: `build` makes its body in the builder it is given.
template <typename Build>
std::function<std::string(const HeaderFields&)> Encoder(fb::Body kind, Build build,
                                                        int64_t timeout_ms = -1) {
  return [kind, build, timeout_ms](const HeaderFields& f) {
    flatbuffers::FlatBufferBuilder b(128);
    b.ForceDefaults(true);
    HeaderFields g = f;
    g.timeout_ms = timeout_ms;
    return EncodeHeader(b, g, kind, build(b));
  };
}

// How long to wait for the reply of a call that itself may wait `wait`
// (the rate limiter's): that, and `margin` for the transfer and the work.
milliseconds ReplyWait(milliseconds wait, milliseconds margin) {
  return wait.count() < 0 ? milliseconds(-1) : wait + margin;
}

// Runs `call` (a request that may wait for the rate limiter, given the wait
// it may take) in slices of at most kMaxServedWait, the longest a server
// waits, again while the server answers DeadlineExceeded and `wait` (the
// caller's timeout; kWaitForever: none) has not passed. A reply that never
// came (RpcClient's own DeadlineExceeded) is not sent again.
Result<Message> CallWaiting(milliseconds wait,
                            const std::function<Result<Message>(milliseconds slice)>& call) {
  const auto until = engine::DeadlineAfter(wait);
  // What is left of `wait`, at most kMaxServedWait (a slice of 0 asks once
  // without waiting: the caller's own timeout 0).
  const auto left = [&] {
    if (until == std::chrono::steady_clock::time_point::max()) return kMaxServedWait;
    return std::clamp(
        std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now()),
        milliseconds(0), kMaxServedWait);
  };
  Result<Message> m = call(left());
  while (!m.ok() && m.status().code() == Status::Code::kDeadlineExceeded &&
         !IsNoReply(m.status())) {
    // Again only with a wait of its own left: a last slice of 0 would be
    // answered by the server's queue, not by the table that waited.
    const milliseconds slice = left();
    if (slice.count() == 0) break;
    m = call(slice);
  }
  return m;
}

template <typename T>
void Put(std::string* out, std::span<const T> v) {
  if (!v.empty()) out->append(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}

// The tensors of `step` checked against the table's columns (one row, or
// `rows` rows as [rows, column shape...] when rows >= 0); InvalidArgument
// naming the column otherwise, before anything is sent.
Status CheckRows(const TableSpec& spec, std::span<const ConstTensor> step, int64_t rows,
                 const std::string& what) {
  if (step.size() != spec.columns.size()) {
    return Status::InvalidArgument("table '" + spec.name + "': " + what + " has " +
                                   std::to_string(step.size()) + " tensors, the table " +
                                   std::to_string(spec.columns.size()) + " columns");
  }
  for (size_t c = 0; c < step.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    Shape want = col.shape;
    if (rows >= 0) {
      std::vector<int64_t> dims = {rows};
      for (const int64_t d : col.shape.dims()) dims.push_back(d);
      want = Shape::FromSpan(dims);
    }
    const size_t bytes = col.step_bytes() * static_cast<size_t>(rows < 0 ? 1 : rows);
    if (step[c].dtype != col.dtype || !(step[c].shape == want) || step[c].size_bytes != bytes ||
        (bytes > 0 && step[c].data == nullptr)) {
      return Status::InvalidArgument(
          "table '" + spec.name + "': " + what + ", column '" + col.name + "' expects dtype " +
          std::string(DTypeName(col.dtype)) + " and shape " + want.ToString() + ", got " +
          std::string(DTypeName(step[c].dtype)) + " " + step[c].shape.ToString());
    }
  }
  return Status::OK();
}

// Log records a remote writer builds (each an AppendSteps of
// wal/wal.fbs, the payload of an AppendStep), kept for the next ones once
// the transport is done with them: a builder keeps its buffer, so a
// writer's appends allocate nothing once it has grown.
class RecordBuilders : public std::enable_shared_from_this<RecordBuilders> {
 public:
  static constexpr size_t kKept = 8;

  // A builder, and what keeps it out of the pool until it is dropped.
  std::shared_ptr<wal::RecordBuilder> Get() {
    std::unique_ptr<wal::RecordBuilder> b;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!kept_.empty()) {
        b = std::move(kept_.back());
        kept_.pop_back();
      }
    }
    if (b == nullptr) b = std::make_unique<wal::RecordBuilder>();
    std::weak_ptr<RecordBuilders> pool = weak_from_this();
    return std::shared_ptr<wal::RecordBuilder>(b.release(), [pool](wal::RecordBuilder* p) {
      std::unique_ptr<wal::RecordBuilder> back(p);
      if (auto keeper = pool.lock()) {
        std::lock_guard<std::mutex> lock(keeper->mu_);
        if (keeper->kept_.size() < kKept) keeper->kept_.push_back(std::move(back));
      }
    });
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<wal::RecordBuilder>> kept_;
};

// Writes `n` rows of `step` (checked: one tensor per column, each [n, ...]
// or one step) into `data` as a record lays them out: row by row, each
// row's columns in turn.
void CopyRows(const TableSpec& spec, std::span<const ConstTensor> step, size_t n,
              std::byte* data) {
  if (step.size() == 1) {
    const size_t bytes = n * spec.columns[0].step_bytes();
    if (bytes > 0) std::memcpy(data, step[0].data, bytes);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t c = 0; c < step.size(); ++c) {
      const size_t cb = spec.columns[c].step_bytes();
      if (cb > 0) std::memcpy(data, static_cast<const std::byte*>(step[c].data) + i * cb, cb);
      data += cb;
    }
  }
}

// `rows` rows of `step` (checked by CheckRows; rows < 0: one step, its
// tensors of the columns' shapes) as an AppendSteps record of table
// `table_id` into `b`: each row's columns side by side, zero trajectory ids
// and step numbers (the server fills them in).
// (copy_data false: the record's data is left unwritten, for a caller that
// sends the rows from their own memory in its place.)
std::span<const std::byte> BuildRecord(const TableSpec& spec, uint32_t table_id,
                                       std::span<const ConstTensor> step, int64_t rows,
                                       std::span<const double> priorities, wal::RecordBuilder* b,
                                       size_t* data_offset = nullptr, bool copy_data = true,
                                       uint64_t writer_key = 0,
                                       std::span<const uint64_t> writer_keys = {}) {
  const size_t n = static_cast<size_t>(rows < 0 ? 1 : rows);
  size_t step_bytes = 0;
  for (const ColumnSpec& c : spec.columns) step_bytes += c.step_bytes();
  const std::vector<uint64_t> ids(n);
  const std::vector<int64_t> steps(n);
  std::byte* data = b->AppendSteps(table_id, static_cast<uint32_t>(step_bytes), ids, steps,
                                   priorities, writer_key, writer_keys);
  if (data_offset != nullptr) *data_offset = static_cast<size_t>(data - b->payload().data());
  if (copy_data) CopyRows(spec, step, n, data);
  return b->payload();
}

// A record built without its data (BuildRecord's copy_data false) sent in
// three pieces: its bytes before the data, `rows` from where they lie, its
// bytes after.
std::vector<std::span<const std::byte>> AroundRows(std::span<const std::byte> record,
                                                   size_t data_offset,
                                                   std::span<const std::byte> rows) {
  return {record.first(data_offset), rows, record.subspan(data_offset + rows.size())};
}

}  // namespace

// The connection a RemoteDB and its tables share: an RpcClient, made again
// when it has ended and a call comes.
//
// - To one server (ucx://HOST:PORT): no sooner than a backoff allows (50 ms,
//   doubling to 5 s while attempts fail).
// - To a cluster (etcd://... or file://...): to the primary its coordinator
//   names then, asked every 50 ms until one is named and answers, for at
//   most the connect timeout (a call during a failover waits for it). A
//   call the server refused (FailedPrecondition, Unavailable) while the
//   coordinator names another primary is made once more there: the server
//   was a deposed or fenced primary, or a replica, and did not run it.
//
// Writers keep the client they were opened on: the server ended their
// trajectories with it.
class Connection {
 public:
  Connection(std::string address, RpcClientOptions options, milliseconds call_timeout,
             std::shared_ptr<RpcClient> first, std::unique_ptr<coord::Coordinator> cluster)
      : options_(std::move(options)),
        call_timeout_(call_timeout),
        cluster_(std::move(cluster)),
        address_(std::move(address)),
        client_(std::move(first)) {}

  // The primary `cluster` names, connected: asked every 50 ms until one is
  // named and answers, until `until` (then Unavailable saying why), or
  // until `closed` says a status other than OK.
  static Result<std::pair<std::string, std::unique_ptr<RpcClient>>> ConnectToPrimary(
      coord::Coordinator& cluster, const RpcClientOptions& options,
      std::chrono::steady_clock::time_point until, const std::function<Status()>& closed) {
    std::string last;
    for (int attempt = 0; attempt < 100000; ++attempt) {
      REPLAYDB_RETURN_IF_ERROR(closed());
      Result<std::optional<coord::LeaderState>> leader = cluster.Leader();
      if (!leader.ok()) {
        last = leader.status().message();
      } else if (!leader->has_value()) {
        last = "no primary is elected now";
      } else {
        const std::string& address = (*leader)->address;
        std::string host;
        uint16_t port = 0;
        Status parsed = ParseAddress(address, &host, &port);
        if (!parsed.ok()) return parsed.WithContext("the primary the cluster names");
        const auto left =
            std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
        if (attempt > 0 && left < milliseconds(100)) break;
        RpcClientOptions o = options;
        o.connect_timeout = std::max(milliseconds(100), std::min(options.connect_timeout, left));
        Result<std::unique_ptr<RpcClient>> client = RpcClient::Connect(host, port, o);
        if (client.ok()) return std::make_pair(address, std::move(client).value());
        const Status::Code code = client.status().code();
        if (code != Status::Code::kUnavailable && code != Status::Code::kDeadlineExceeded) {
          // Refused (no token, a wrong one): asking again changes nothing.
          return client.status().WithContext("the primary " + address + " of " + cluster.address());
        }
        last = "its primary " + address + ": " + client.status().message();
      }
      if (std::chrono::steady_clock::now() + milliseconds(50) >= until) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return Status::Unavailable("the cluster of " + cluster.address() +
                               " has no primary that answers (" + last +
                               "); an election may be under way: try again");
  }

  // The live client, a new one, or why there is none.
  Result<std::shared_ptr<RpcClient>> Get() {
    if (cluster_ != nullptr) return Follow();
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_.ok()) return closed_;
    if (client_->connected()) return client_;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_try_) {
      return Status::Unavailable(
          "server " + address_ + " is not connected (" + last_error_ + "); the next attempt in " +
          std::to_string(std::chrono::duration_cast<milliseconds>(next_try_ - now).count()) +
          " ms");
    }
    std::string host;
    uint16_t port = 0;
    REPLAYDB_RETURN_IF_ERROR(ParseAddress(address_, &host, &port));
    Result<std::unique_ptr<RpcClient>> fresh = RpcClient::Connect(host, port, options_);
    if (!fresh.ok()) {
      last_error_ = fresh.status().message();
      backoff_ = std::min(backoff_ * 2, milliseconds(5000));
      next_try_ = std::chrono::steady_clock::now() + backoff_;
      return fresh.status();
    }
    backoff_ = milliseconds(50);
    client_ = std::shared_ptr<RpcClient>(std::move(fresh).value());
    return client_;
  }

  // A call on the live client (`used`, where not null, gets it).
  Result<Message> Call(const std::function<std::string(const HeaderFields&)>& encode,
                       std::string payload, milliseconds timeout, Placement place = {},
                       std::shared_ptr<RpcClient>* used = nullptr) {
    REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<RpcClient> client, Get());
    if (cluster_ == nullptr) {
      if (used != nullptr) *used = client;
      return client->Call(encode, std::move(payload), timeout, 0, std::move(place));
    }
    Result<Message> m = client->Call(encode, payload, timeout, 0, place);
    if (!m.ok() && client->connected() &&
        (m.status().code() == Status::Code::kFailedPrecondition ||
         m.status().code() == Status::Code::kUnavailable) &&
        Moved(client)) {
      REPLAYDB_ASSIGN_OR_RETURN(client, Get());
      m = client->Call(encode, std::move(payload), timeout, 0, std::move(place));
    }
    if (used != nullptr) *used = client;
    return m;
  }

  // A call that does not wait for the rate limiter: its body built by
  // `build`, its reply awaited for ConnectOptions::call_timeout.
  template <typename Build>
  Result<Message> Ask(fb::Body kind, Build build, std::string payload = {},
                      Placement place = {}) {
    return Call(Encoder(kind, build), std::move(payload), call_timeout_, std::move(place));
  }

  // Ask for a request answered with Done; `what` names it in a failure.
  template <typename Build>
  Status AskDone(fb::Body kind, Build build, const std::string& what) {
    REPLAYDB_ASSIGN_OR_RETURN(Message m, Ask(kind, build));
    return ExpectBody(m, fb::Body::Done, what);
  }

  bool read_only() const {
    std::lock_guard<std::mutex> lock(mu_);
    return client_->read_only();
  }

  // Whether it follows a cluster's primary.
  bool follows() const { return cluster_ != nullptr; }

  // A cluster's: after `client` failed a call, the client of the primary
  // named now when `client`'s server is no longer it (its connection
  // ended, or the coordinator names another), waiting for one as a call
  // does; null when the server is still the primary (or no cluster).
  Result<std::shared_ptr<RpcClient>> Elsewhere(const std::shared_ptr<RpcClient>& client) {
    if (cluster_ == nullptr || (client->connected() && !Moved(client))) {
      return std::shared_ptr<RpcClient>();
    }
    return Follow();
  }

  // No more calls, no more attempts: every call fails with `why`.
  void Close(const Status& why) {
    std::shared_ptr<RpcClient> client;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = why;
      client = client_;
    }
    client->Close(why);
  }

 private:
  // A cluster's: the live client, or one to the primary named now.
  Result<std::shared_ptr<RpcClient>> Follow() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!closed_.ok()) return closed_;
      if (client_->connected() && !stale_) return client_;
    }
    std::lock_guard<std::mutex> one(follow_mu_);  // one attempt at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (client_->connected() && !stale_) return client_;  // another made it
    }
    Result<std::pair<std::string, std::unique_ptr<RpcClient>>> primary = ConnectToPrimary(
        *cluster_, options_, std::chrono::steady_clock::now() + options_.connect_timeout, [&] {
          std::lock_guard<std::mutex> lock(mu_);
          return closed_;
        });
    if (!primary.ok()) return primary.status();
    std::shared_ptr<RpcClient> old;  // the ended client, released after the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_.ok()) {
      primary->second->Close(closed_);
      return closed_;
    }
    old = std::move(client_);
    client_ = std::shared_ptr<RpcClient>(std::move(primary->second));
    address_ = primary->first;
    stale_ = false;
    return client_;
  }

  // Whether the coordinator names a primary other than `client`'s server
  // (which is then left for it at the next call).
  bool Moved(const std::shared_ptr<RpcClient>& client) {
    std::string address;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (client_ != client) return true;  // another call moved on already
      address = address_;
    }
    std::lock_guard<std::mutex> one(follow_mu_);
    Result<std::optional<coord::LeaderState>> leader = cluster_->Leader();
    if (!leader.ok() || !leader->has_value() || (*leader)->address == address) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (client_ == client) stale_ = true;
    return true;
  }

  const RpcClientOptions options_;
  const milliseconds call_timeout_;
  // A cluster's coordinator (null: one server's connection). Used under
  // follow_mu_.
  const std::unique_ptr<coord::Coordinator> cluster_;
  std::mutex follow_mu_;
  mutable std::mutex mu_;
  std::string address_;  // the server's now, ucx://HOST:PORT
  std::shared_ptr<RpcClient> client_;
  bool stale_ = false;  // a cluster's: its server is no longer the primary
  Status closed_;       // OK until Close
  milliseconds backoff_{50};
  std::chrono::steady_clock::time_point next_try_;
  std::string last_error_;
};

namespace {

// What every remote call shares: the connection and the table's spec.
struct Remote {
  std::shared_ptr<Connection> connection;
  std::string address;  // ucx://HOST:PORT, for messages
  TableSpec spec;
  ConnectOptions options;
  std::atomic<bool> closed{false};
  // Set when the RemoteDB goes (its tables and writers are closed with it).
  std::shared_ptr<const std::atomic<bool>> db_closed;

  Status Closed() const {
    if (db_closed->load(std::memory_order_acquire)) {
      return Status::FailedPrecondition("table '" + spec.name + "' of " + address +
                                        " is closed (its database was closed)");
    }
    if (closed.load(std::memory_order_acquire)) {
      return Status::FailedPrecondition("table '" + spec.name + "' of " + address + " is closed");
    }
    return Status::OK();
  }
  Status NotServed(const std::string& call) const {
    return Status::NotSupported("table '" + spec.name + "' of " + address + ": " + call +
                                " is not served over a remote connection yet");
  }

  // Samples read in place (WIRE.md, "A sample in place"): the server's
  // slabs as imported on `reader`'s connection, and the leases this side
  // is done with, sent with the next sample.
  struct Slab {
    uint64_t key = 0;  // Transport::ImportKey's
    uint64_t address = 0;
    uint64_t bytes = 0;
  };
  struct InPlace {
    std::mutex mu;
    std::weak_ptr<RpcClient> reader;
    bool refused = false;  // on reader's connection
    std::vector<Slab> slabs;
    std::vector<uint64_t> release;
  };
  std::shared_ptr<InPlace> in_place = std::make_shared<InPlace>();
};

// Ends writer `id` on the server (its open trajectories truncated), without
// waiting long: a connection that is gone has ended it already.
void CloseWriterOn(RpcClient& client, uint64_t id) {
  (void)client.Call(
      Encoder(fb::Body::CloseWriter,
              [id](flatbuffers::FlatBufferBuilder& b) { return fb::CreateCloseWriter(b, id); }),
      "", milliseconds(10000));
}

// A random writer key, never 0 (rdma/WIRE.md, "Resuming a writer").
uint64_t NewWriterKey() {
  std::random_device device;
  uint64_t key = 0;
  while (key == 0) key = (uint64_t{device()} << 32) ^ device();
  return key;
}

// fb::WriterOpened::resumed's values.
constexpr uint8_t kResumedNone = 0;
constexpr uint8_t kResumedOpen = 1;
constexpr uint8_t kResumedEnded = 2;
// Failovers a writer follows in a row without an acknowledgment between
// them.
constexpr int kMaxResumes = 4;

// A resuming writer's trajectory on the server it opened on
// (fb::WriterOpened's resumed, trajectory_id, num_steps, end_reason).
struct ResumedTrajectory {
  uint8_t resumed = 0;
  uint64_t trajectory_id = 0;
  int64_t num_steps = 0;
  uint8_t end_reason = 0;
};

// A writer opened on the server: its id there, the connection it belongs
// to, the table's id, and a resuming writer's trajectory there (a vector
// writer's: one for each environment, in `envs`).
struct OpenedWriter : ResumedTrajectory {
  uint64_t writer = 0;
  std::shared_ptr<RpcClient> client;
  uint32_t table_id = 0;
  std::vector<ResumedTrajectory> envs;
};

// Opens a writer of `remote`'s table with `options` (`envs` 0: a trajectory
// writer; N: a vector writer), on the live connection, or on `on` where it
// is set; a resuming trajectory writer's key and trajectory id (0, 0: a
// new writer), a resuming vector writer's for each environment (empty: a
// new writer).
Result<OpenedWriter> OpenWriterOf(Remote& remote, const WriterOptions& options, size_t envs,
                                  uint64_t resume_key = 0, uint64_t resume_trajectory = 0,
                                  std::shared_ptr<RpcClient> on = nullptr,
                                  std::span<const uint64_t> resume_keys = {},
                                  std::span<const uint64_t> resume_trajectories = {}) {
  REPLAYDB_RETURN_IF_ERROR(remote.Closed());
  const std::string& table = remote.spec.name;
  const auto encode = Encoder(fb::Body::NewWriter, [&](flatbuffers::FlatBufferBuilder& b) {
    const auto t = b.CreateString(table);
    flatbuffers::Offset<flatbuffers::Vector<uint64_t>> keys, ids;
    if (!resume_keys.empty()) {
      keys = b.CreateVector(resume_keys.data(), resume_keys.size());
      ids = b.CreateVector(resume_trajectories.data(), resume_trajectories.size());
    }
    return fb::CreateNewWriter(b, t, options.timeout.count() < 0 ? -1 : options.timeout.count(),
                               options.sync, envs, static_cast<uint8_t>(options.acks.mode),
                               options.acks.replicas, resume_key, resume_trajectory, keys, ids);
  });
  std::shared_ptr<RpcClient> client = on;
  Result<Message> m =
      on != nullptr ? on->Call(encode, "", remote.options.call_timeout)
                    : remote.connection->Call(encode, "", remote.options.call_timeout, {}, &client);
  if (!m.ok()) return m.status();
  REPLAYDB_RETURN_IF_ERROR(
      ExpectBody(*m, fb::Body::WriterOpened, "a writer of table '" + table + "'"));
  const fb::WriterOpened* w = m->header()->body_as_WriterOpened();
  OpenedWriter out;
  out.writer = w->writer();
  out.client = std::move(client);
  out.table_id = w->table_id();
  out.resumed = w->resumed();
  out.trajectory_id = w->trajectory_id();
  out.num_steps = w->num_steps();
  out.end_reason = w->end_reason();
  if (!resume_keys.empty()) {
    const size_t n = resume_keys.size();
    const auto size = [](const auto* v) { return v == nullptr ? size_t{0} : size_t{v->size()}; };
    if (size(w->envs_resumed()) != n || size(w->envs_trajectory_id()) != n ||
        size(w->envs_num_steps()) != n || size(w->envs_end_reason()) != n) {
      // (A server of an earlier build: it opened a new writer instead.)
      CloseWriterOn(*out.client, out.writer);
      return Status::FailedPrecondition(
          "table '" + table +
          "': the server did not resume the vector writer (no state for each "
          "of its " +
          std::to_string(n) + " environments): it cannot resume vector writers");
    }
    for (size_t e = 0; e < n; ++e) {
      out.envs.push_back(
          ResumedTrajectory{w->envs_resumed()->Get(e), w->envs_trajectory_id()->Get(e),
                            w->envs_num_steps()->Get(e), w->envs_end_reason()->Get(e)});
    }
  }
  return out;
}

// OpenWriterOf for a writer that resumes after a failover, on `to` (the
// primary named now). That primary may not take writers yet (still taking
// over): asked again every 50 ms, up to the connect timeout, going to
// another primary where the coordinator names one meanwhile.
Result<OpenedWriter> OpenResumed(Remote& remote, const WriterOptions& options, size_t envs,
                                 uint64_t key, uint64_t trajectory, std::shared_ptr<RpcClient> to,
                                 std::span<const uint64_t> keys = {},
                                 std::span<const uint64_t> trajectories = {}) {
  const auto give_up = engine::DeadlineAfter(remote.options.connect_timeout);
  Result<OpenedWriter> opened =
      OpenWriterOf(remote, options, envs, key, trajectory, to, keys, trajectories);
  for (int attempt = 0; attempt < 100000 && !opened.ok() &&
                        (opened.status().code() == Status::Code::kUnavailable ||
                         opened.status().code() == Status::Code::kFailedPrecondition) &&
                        std::chrono::steady_clock::now() < give_up;
       ++attempt) {
    std::this_thread::sleep_for(milliseconds(50));
    Result<std::shared_ptr<RpcClient>> other = remote.connection->Elsewhere(to);
    if (other.ok() && *other != nullptr) to = *other;
    opened = OpenWriterOf(remote, options, envs, key, trajectory, to, keys, trajectories);
  }
  return opened;
}

// A trajectory writer of a served table. Appends are sent ahead: Append
// returns once its step is on its way, and the server's acknowledgments
// (each given once the server holds the step as durably as a local append)
// are collected as they come; at most kAheadCalls appends or kAheadBytes of
// steps go unacknowledged, and a call that would exceed that first waits,
// up to WriterOptions::timeout, for the oldest (DeadlineExceeded then, its
// own step not sent: a retry sends it once). End, trajectory_id() and the
// destructor wait for all of them. Steps (up to kWaitingBytes) appended
// while the writer's previous append is still being sent wait, and go out
// together as one append once that send is done (Waiting), even if the
// caller makes no further call. A step's priority is checked before it is
// sent, as a local writer checks it. With WriterOptions::sync each Append
// waits for its own acknowledgment. The server runs a writer's requests in
// order; when one fails (not the rate limiter: an append sent ahead waits
// for it without bound), the server refuses the rest of its epoch, and the
// writer's next call returns the failure, saying how many steps were sent
// after it and dropped; num_steps() then says what the trajectory holds.
class RemoteWriter final : public TrajectoryWriter {
 public:
  static constexpr size_t kAheadCalls = 64;
  static constexpr size_t kAheadBytes = size_t{8} << 20;
  // Appends of one column of at least this many bytes are sent from the
  // caller's memory: below it, a copy into the record costs less than
  // waiting for the send.
  static constexpr size_t kSendFromCallerBytes = size_t{256} << 10;

  RemoteWriter(std::shared_ptr<Remote> remote, std::shared_ptr<RpcClient> client, uint64_t id,
               uint32_t table_id, WriterOptions options)
      : remote_(std::move(remote)),
        client_(std::move(client)),
        id_(id),
        table_id_(table_id),
        options_(options) {}

  // Ends the writer on the server (its open trajectory truncated) once the
  // appends in flight are acknowledged, as a local writer's destructor keeps
  // every step appended; after 10 s of waiting for them (the rate limiter
  // holding them) it gives up on those left. A connection that is gone has
  // ended the writer already.
  ~RemoteWriter() override {
    (void)Settle(milliseconds(10000));
    CloseWriterOn(*client_, id_);
  }

  Status Append(std::span<const ConstTensor> step, std::optional<double> priority) override {
    REPLAYDB_RETURN_IF_ERROR(CheckRows(remote_->spec, step, -1, "step"));
    // Checked here, as a local writer does (a bad one sent would take down
    // the steps sent with it: Waiting).
    if (priority) {
      REPLAYDB_RETURN_IF_ERROR(engine::ValidatePriorityOf(remote_->spec.name, *priority, "step"));
    }
    const double p = priority.value_or(0);
    return Send(step, -1, priority ? std::span<const double>(&p, 1) : std::span<const double>());
  }

  Status AppendMany(std::span<const ConstTensor> steps,
                    std::span<const double> priorities) override {
    // n rows: the first tensor's leading dimension (each is [n, column shape...]).
    const int64_t n =
        !steps.empty() && !steps[0].shape.dims().empty() ? steps[0].shape.dims()[0] : 0;
    REPLAYDB_RETURN_IF_ERROR(CheckRows(remote_->spec, steps, n, "steps"));
    if (!priorities.empty() && priorities.size() != static_cast<size_t>(n)) {
      return Status::InvalidArgument("table '" + remote_->spec.name +
                                     "': " + std::to_string(priorities.size()) +
                                     " priorities for " + std::to_string(n) + " steps");
    }
    REPLAYDB_RETURN_IF_ERROR(
        engine::ValidatePrioritiesOf(remote_->spec.name, priorities, "AppendMany"));
    if (n == 0) return Status::OK();
    return Send(steps, n, priorities);
  }

  Status End(EndReason reason) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    REPLAYDB_RETURN_IF_ERROR(broken_);
    REPLAYDB_RETURN_IF_ERROR(Settle(options_.timeout));
    Status ended = EndOn(reason);
    if (!ended.ok()) {
      // The primary gone: ended on the next one (once: where it ended
      // there already, as the End reached it before its reply was lost).
      if (std::optional<Status> resumed = Resume(ended, Ahead{})) {
        REPLAYDB_RETURN_IF_ERROR(*resumed);
        ended = resumed_ == kResumedOpen ? EndOn(reason) : Status::OK();
        if (resumed_ == kResumedEnded && resumed_reason_ != reason) {
          ended = Status::FailedPrecondition(
              "table '" + remote_->spec.name + "': trajectory " + std::to_string(current_id_) +
              " was ended " + std::string(EndReasonName(resumed_reason_)) +
              " on the new primary (its writer's connection ended, or no writer resumed it "
              "within DBOptions::writer_resume_window) before this End (" +
              std::string(EndReasonName(reason)) + ") reached it");
        }
      }
    }
    REPLAYDB_RETURN_IF_ERROR(ended);
    num_steps_ = 0;
    next_step_ = 0;
    current_id_ = 0;
    if (key_ != 0) {
      // Each trajectory its own key: a resume by key finds this one's
      // successor, never this one.
      key_ = NewWriterKey();
      std::lock_guard<std::mutex> lock(waiting_->mu);
      waiting_->key = key_;
    }
    return Status::OK();
  }

  // (Waits for the appends in flight: the server names trajectories.)
  uint64_t trajectory_id() const override {
    (void)const_cast<RemoteWriter*>(this)->Settle(remote_->options.call_timeout);
    return trajectory_id_;
  }
  int64_t num_steps() const override { return num_steps_; }

 private:
  // The EndTrajectory call on the writer's server.
  Status EndOn(EndReason reason) {
    const uint64_t id = id_;
    // The server waits up to the writer's timeout (in runs of at most
    // kMaxServedWait); after a DeadlineExceeded the trajectory is ended, and
    // End again creates the padded items still missing, as a local writer's.
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m, client_->Call(Encoder(fb::Body::EndTrajectory,
                                         [&](flatbuffers::FlatBufferBuilder& b) {
                                           return fb::CreateEndTrajectory(
                                               b, id, static_cast<uint8_t>(reason));
                                         }),
                                 "", ReplyWait(options_.timeout, remote_->options.call_timeout)));
    return ExpectBody(m, fb::Body::Done,
                      [&] { return "ending a trajectory of '" + remote_->spec.name + "'"; });
  }

  struct Ahead {
    std::shared_ptr<PendingCall> call;
    int64_t steps = 0;
    size_t bytes = 0;
    uint32_t epoch = 0;
    // A writer that follows a cluster keeps what it sent until it is
    // acknowledged, to send it again to the next primary (Resume): the
    // payload's pieces, what holds their bytes, where its data starts, and
    // the trajectory's step its first row is (-1: not kept).
    std::shared_ptr<const void> hold;
    std::vector<std::span<const std::byte>> parts;
    size_t data_offset = 0;
    int64_t first_step = -1;

    void Retain(std::shared_ptr<const void> h, const std::vector<std::span<const std::byte>>& p,
                size_t offset, int64_t first) {
      hold = std::move(h);
      parts = p;
      data_offset = offset;
      first_step = first;
    }
  };

  // Steps appended while the writer's previous append is still being sent
  // (Nagle's rule; Kafka's producer batches so): they wait here, copied as
  // a record lays rows out, and go out together as one append once that
  // send is done, from whichever thread sees it done (the transport's, or
  // the caller's next call). Shared with the sends' callbacks, which may
  // outlive the writer: it holds copies of what a send needs.
  struct Waiting {
    std::mutex mu;
    std::string rows;                // `steps` rows
    std::vector<double> priorities;  // one a row, or none
    int64_t steps = 0;
    bool busy = false;                  // a thread is sending what it took
    std::condition_variable idle;       // busy went false
    std::shared_ptr<PendingCall> last;  // the latest append sent from here
    std::vector<Ahead> sent;            // sent from here, for ahead_
    uint32_t epoch = 1;                 // the writer's epoch_
    // A writer that follows a cluster: its key (0: it does not), and the
    // trajectory's step of the first row that waits.
    uint64_t key = 0;
    int64_t first_step = 0;
    TableSpec spec;
    uint32_t table_id = 0;
    uint64_t id = 0;
    std::weak_ptr<RpcClient> client;
    std::shared_ptr<RecordBuilders> builders;
  };
  std::shared_ptr<Waiting> NewWaiting() const {
    auto w = std::make_shared<Waiting>();
    w->spec = remote_->spec;
    w->table_id = table_id_;
    w->id = id_;
    w->client = client_;
    w->builders = builders_;
    w->key = key_;
    return w;
  }

  // The most bytes that wait (more: the caller first waits for them to go).
  static constexpr size_t kWaitingBytes = size_t{1} << 20;

  // Sends what waits where nothing of the writer is being sent, until
  // nothing waits or a send is under way. Any thread.
  static void Pump(const std::shared_ptr<Waiting>& w) {
    std::unique_lock<std::mutex> lock(w->mu);
    while (!w->busy && w->steps > 0 && (w->last == nullptr || RpcClient::Sent(*w->last))) {
      const std::shared_ptr<RpcClient> client = w->client.lock();
      if (client == nullptr) return;
      struct Held {
        std::string rows;
        std::shared_ptr<wal::RecordBuilder> builder;
      };
      auto held = std::make_shared<Held>();
      held->rows.swap(w->rows);
      std::vector<double> priorities;
      priorities.swap(w->priorities);
      const int64_t steps = w->steps;
      w->steps = 0;
      const uint32_t epoch = w->epoch;
      const uint64_t id = w->id;
      const int64_t first_step = w->key != 0 ? w->first_step : -1;
      w->busy = true;
      lock.unlock();
      held->builder = w->builders->Get();
      size_t data_offset = 0;
      const std::span<const std::byte> record =
          BuildRecord(w->spec, w->table_id, {}, steps, priorities, held->builder.get(),
                      &data_offset, /*copy_data=*/false, w->key);
      std::vector<std::span<const std::byte>> parts = AroundRows(
          record, data_offset, std::as_bytes(std::span(held->rows.data(), held->rows.size())));
      std::weak_ptr<Waiting> weak = w;
      Ahead ahead{nullptr, steps, record.size(), epoch};
      if (w->key != 0) ahead.Retain(held, parts, data_offset, first_step);
      ahead.call = client->Start(Encoder(fb::Body::AppendStep,
                                         [&](flatbuffers::FlatBufferBuilder& b) {
                                           return fb::CreateAppendStep(
                                               b, id, false, 0, steps, 0, epoch,
                                               /*ahead=*/true, data_offset, first_step);
                                         }),
                                 std::move(parts), held, milliseconds(-1), 0, [weak] {
                                   if (const std::shared_ptr<Waiting> again = weak.lock())
                                     Pump(again);
                                 });
      lock.lock();
      w->busy = false;
      w->last = ahead.call;
      w->sent.push_back(std::move(ahead));
      w->idle.notify_all();
    }
  }

  // Sends `rows` rows of `tensors` (checked; rows < 0: one step) as their
  // log record: rows that fit wait for the send before them (Waiting),
  // the rest go at once, after what waits.
  Status Send(std::span<const ConstTensor> tensors, int64_t rows,
              std::span<const double> priorities) {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    REPLAYDB_RETURN_IF_ERROR(broken_);
    // Failures that came meanwhile first; then room for this call.
    REPLAYDB_RETURN_IF_ERROR(CollectArrived());
    const int64_t steps = rows < 0 ? 1 : rows;
    const size_t bytes = static_cast<size_t>(steps) * remote_->spec.step_bytes();
    // A large single-column append goes from the caller's memory (no copy
    // into the record), and returns once it is sent; not a writer that
    // keeps what it sent to send it again.
    const bool from_caller =
        key_ == 0 && tensors.size() == 1 && tensors[0].size_bytes >= kSendFromCallerBytes;
    if (!options_.sync && !from_caller && bytes <= kWaitingBytes) {
      return Wait(tensors, steps, priorities, bytes);
    }
    REPLAYDB_RETURN_IF_ERROR(SendWaiting());
    std::shared_ptr<wal::RecordBuilder> builder = builders_->Get();
    size_t data_offset = 0;
    const std::span<const std::byte> record =
        BuildRecord(remote_->spec, table_id_, tensors, rows, priorities, builder.get(),
                    &data_offset, /*copy_data=*/!from_caller, key_);
    const auto until = engine::DeadlineAfter(options_.timeout);
    REPLAYDB_RETURN_IF_ERROR(MakeRoom(record.size(), until));
    const uint64_t id = id_;
    const bool wait = options_.sync;
    const uint32_t epoch = epoch_;
    std::vector<std::span<const std::byte>> parts = {record};
    if (from_caller) {
      parts = AroundRows(record, data_offset,
                         {static_cast<const std::byte*>(tensors[0].data), tensors[0].size_bytes});
    }
    const int64_t first_step = key_ != 0 ? next_step_ : -1;
    next_step_ += steps;
    Ahead kept;
    if (key_ != 0) kept.Retain(builder, parts, data_offset, first_step);
    std::shared_ptr<PendingCall> call = client_->Start(
        Encoder(fb::Body::AppendStep,
                [&](flatbuffers::FlatBufferBuilder& b) {
                  return fb::CreateAppendStep(b, id, false, 0, steps, 0, epoch, /*ahead=*/!wait,
                                              data_offset, first_step);
                }),
        std::move(parts), std::move(builder),
        wait ? ReplyWait(options_.timeout, remote_->options.call_timeout) : milliseconds(-1));
    {
      std::lock_guard<std::mutex> lock(waiting_->mu);
      waiting_->last = call;  // what waits next goes after it
    }
    // The caller's rows are theirs again once sent.
    if (from_caller) client_->WaitSent(*call);
    if (wait) {
      Result<Message> got = client_->Await(*call);
      if (!got.ok() && key_ != 0) {
        // The primary gone: sent again to the next one, and waited for.
        kept.call = std::move(call);
        kept.steps = steps;
        kept.bytes = record.size();
        kept.epoch = epoch;
        if (std::optional<Status> resumed = Resume(got.status(), std::move(kept))) {
          REPLAYDB_RETURN_IF_ERROR(*resumed);
          return Settle(options_.timeout);
        }
      }
      if (!got.ok()) return got.status();
      const Message& m = *got;
      REPLAYDB_ASSIGN_OR_RETURN(const int64_t taken, Acknowledged(m));
      next_step_ = num_steps_;  // (the server's count: rows it did not take go again)
      if (taken >= 0 && taken < steps) {
        return Status::DeadlineExceeded(
            "table '" + remote_->spec.name + "' of " + remote_->address +
            ": timed out after waiting for the rate limiter; the first " +
            std::to_string(taken) + " of " + std::to_string(steps) + " steps were appended");
      }
      return Status::OK();
    }
    kept.call = std::move(call);
    kept.steps = steps;
    kept.bytes = record.size();
    kept.epoch = epoch;
    ahead_.push_back(std::move(kept));
    ahead_bytes_ += record.size();
    num_steps_ += steps;
    // Replies already here (one refused at once: the connection has ended).
    return CollectArrived();
  }

  // Rows that fit Waiting: copied there, sent now when nothing of the
  // writer is being sent.
  Status Wait(std::span<const ConstTensor> tensors, int64_t steps,
              std::span<const double> priorities, size_t bytes) {
    bool fits = false;
    {
      std::lock_guard<std::mutex> lock(waiting_->mu);
      // (Rows with priorities and rows without are records of their own.)
      fits = waiting_->steps == 0 ||
             (waiting_->rows.size() + bytes <= kWaitingBytes &&
              waiting_->priorities.empty() == priorities.empty());
    }
    if (!fits) REPLAYDB_RETURN_IF_ERROR(SendWaiting());
    const auto until = engine::DeadlineAfter(options_.timeout);
    REPLAYDB_RETURN_IF_ERROR(MakeRoom(bytes, until));
    {
      std::lock_guard<std::mutex> lock(waiting_->mu);
      if (waiting_->steps == 0) waiting_->first_step = next_step_;
      const size_t at = waiting_->rows.size();
      waiting_->rows.resize(at + bytes);
      CopyRows(remote_->spec, tensors, static_cast<size_t>(steps),
               reinterpret_cast<std::byte*>(waiting_->rows.data() + at));
      waiting_->priorities.insert(waiting_->priorities.end(), priorities.begin(),
                                  priorities.end());
      waiting_->steps += steps;
    }
    num_steps_ += steps;
    next_step_ += steps;
    Pump(waiting_);
    return CollectArrived();
  }

  // Until what waits has been handed to the transport (sent, or on its
  // way: later sends go after it).
  Status SendWaiting() {
    for (;;) {
      Pump(waiting_);
      std::shared_ptr<PendingCall> last;
      {
        // (Another thread sending what it took: until it has.)
        std::unique_lock<std::mutex> lock(waiting_->mu);
        waiting_->idle.wait(lock, [&] { return !waiting_->busy; });
        if (waiting_->steps == 0) break;
        last = waiting_->last;
      }
      if (last != nullptr) client_->WaitSent(*last);
    }
    TakeSent();
    return Status::OK();
  }

  // The appends sent from Waiting, into ahead_.
  void TakeSent() {
    std::lock_guard<std::mutex> lock(waiting_->mu);
    for (Ahead& a : waiting_->sent) {
      ahead_bytes_ += a.bytes;
      ahead_.push_back(std::move(a));
    }
    waiting_->sent.clear();
  }

  // Waits (until `until`) for the oldest acknowledgments while the appends
  // in flight and `bytes` more would pass kAheadCalls or kAheadBytes.
  Status MakeRoom(size_t bytes, std::chrono::steady_clock::time_point until) {
    TakeSent();
    while (!ahead_.empty() &&
           (ahead_.size() >= kAheadCalls || ahead_bytes_ + bytes > kAheadBytes)) {
      if (!WaitOldest(until)) return Unacknowledged(options_.timeout, "; this one was not sent");
      REPLAYDB_RETURN_IF_ERROR(CollectOldest());
    }
    return Status::OK();
  }

  // The acknowledgments that have come, oldest first, up to a failure.
  Status CollectArrived() {
    TakeSent();
    while (!ahead_.empty() && RpcClient::Ready(*ahead_.front().call)) {
      REPLAYDB_RETURN_IF_ERROR(CollectOldest());
    }
    return Status::OK();
  }

  // Waits for the oldest acknowledgment until `until`; false when it has
  // not come by then.
  bool WaitOldest(std::chrono::steady_clock::time_point until) {
    return client_->WaitFor(*ahead_.front().call, until);
  }

  // DeadlineExceeded: appends still unacknowledged after `wait`, then `more`.
  Status Unacknowledged(milliseconds wait, const std::string& more) const {
    return Status::DeadlineExceeded(
        "table '" + remote_->spec.name + "' of " + remote_->address + ": " +
        std::to_string(ahead_.size()) + " appends were still unacknowledged after " +
        std::to_string(wait.count()) + " ms (the rate limiter holds them)" + more);
  }

  // The trajectory's state from an Appended reply: its id and steps; the
  // rows it took (-1: all).
  Result<int64_t> Acknowledged(const Message& m) {
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(
        m, fb::Body::Appended, [&] { return "an append to '" + remote_->spec.name + "'"; }));
    const fb::Appended* a = m.header()->body_as_Appended();
    trajectory_id_ = a->trajectory_id();
    current_id_ = trajectory_id_;
    num_steps_ = a->num_steps();
    return a->rows_taken();
  }

  // The oldest append in flight's acknowledgment (waiting for it). Its
  // failure ends the epoch: the rest in flight are refused by the server,
  // the writer's state is asked for, and the failure returned.
  Status CollectOldest() {
    Ahead a = std::move(ahead_.front());
    ahead_.pop_front();
    ahead_bytes_ -= a.bytes;
    Result<Message> m = client_->Await(*a.call);
    if (a.epoch != epoch_) return Status::OK();  // refused with its epoch
    if (m.ok()) {
      const fb::Appended* r = m->header()->body_type() == fb::Body::Appended
                                  ? m->header()->body_as_Appended()
                                  : nullptr;
      if (r != nullptr) trajectory_id_ = current_id_ = r->trajectory_id();
      resumes_ = 0;
      return Status::OK();
    }
    if (std::optional<Status> resumed = Resume(m.status(), std::move(a))) return *resumed;
    ++epoch_;
    int64_t dropped = 0;
    {
      // What waits, and what is being sent from there, went after it too.
      std::unique_lock<std::mutex> lock(waiting_->mu);
      waiting_->idle.wait(lock, [&] { return !waiting_->busy; });
      dropped += waiting_->steps;
      waiting_->rows.clear();
      waiting_->priorities.clear();
      waiting_->steps = 0;
      waiting_->epoch = epoch_;
    }
    TakeSent();
    for (const Ahead& later : ahead_) dropped += later.steps;
    while (!ahead_.empty()) {
      (void)client_->Await(*ahead_.front().call);
      ahead_.pop_front();
    }
    ahead_bytes_ = 0;
    // The server's word on what the trajectory holds (after the failed
    // one, in its strand).
    const uint64_t id = id_;
    const uint32_t epoch = epoch_;
    Result<Message> state = client_->Call(
        Encoder(fb::Body::AppendStep,
                [&](flatbuffers::FlatBufferBuilder& b) {
                  return fb::CreateAppendStep(b, id, false, 0, 0, 0, epoch, false);
                }),
        "", remote_->options.call_timeout);
    if (state.ok() && Acknowledged(*state).ok()) next_step_ = num_steps_;
    if (dropped == 0) return m.status();
    return m.status().WithContext(
        "an append sent ahead failed, and the " + std::to_string(dropped) +
        " steps appended after it were dropped (num_steps() says what the trajectory holds)");
  }

  // Every append in flight acknowledged (or `wait` passed: DeadlineExceeded).
  Status Settle(milliseconds wait) {
    const auto until = engine::DeadlineAfter(wait);
    Status first = SendWaiting();
    while (!ahead_.empty()) {
      if (!WaitOldest(until)) return Unacknowledged(wait, "");
      const Status s = CollectOldest();
      if (first.ok()) first = s;
    }
    return first;
  }

  // After `failure` of a call on the writer's server: where the writer
  // follows a cluster and that server is no longer the primary, opens the
  // writer again on the primary named now, resuming its trajectory there
  // (rdma/WIRE.md, "Resuming a writer"), and sends `failed` (the append
  // that failed; none where its call is null) and every later append not
  // yet acknowledged to it again, each saying its first step, so that the
  // new primary stores each row once. What waits goes there next.
  // nullopt: not a failover (the failure stands, as for any writer);
  // otherwise OK, or why the writer cannot go on.
  std::optional<Status> Resume(const Status& failure, Ahead failed) {
    if (key_ == 0 || (failure.code() != Status::Code::kUnavailable &&
                      failure.code() != Status::Code::kFailedPrecondition)) {
      return std::nullopt;
    }
    const std::string table = "table '" + remote_->spec.name + "'";
    Result<std::shared_ptr<RpcClient>> next = remote_->connection->Elsewhere(client_);
    if (next.ok() && *next == nullptr) return std::nullopt;  // still the primary
    if (!next.ok() || ++resumes_ > kMaxResumes) {
      const Status why =
          next.ok() ? Status::Unavailable("the primary changed " + std::to_string(kMaxResumes) +
                                          " times without an acknowledgment")
                    : next.status();
      return why.WithContext(table +
                             ": its writer could not follow the cluster to a new primary "
                             "after \"" +
                             failure.message() + "\"");
    }
    // What is in flight, oldest first (refused by a fenced server, or
    // failed with its connection; acknowledged ones are sent again too,
    // and skipped there).
    std::vector<Ahead> again;
    if (failed.call != nullptr) again.push_back(std::move(failed));
    {
      // Nothing more goes from Waiting to the old server (Pump finds no
      // client): what waits stays for the new one.
      std::unique_lock<std::mutex> lock(waiting_->mu);
      waiting_->client.reset();
      waiting_->idle.wait(lock, [&] { return !waiting_->busy; });
    }
    TakeSent();
    const auto until = engine::DeadlineAfter(remote_->options.call_timeout);
    for (Ahead& a : ahead_) {
      if (client_->WaitFor(*a.call, until)) {
        // (An acknowledgment that came names the trajectory.)
        Result<Message> m = client_->Await(*a.call);
        if (m.ok() && m->header()->body_type() == fb::Body::Appended) {
          trajectory_id_ = current_id_ = m->header()->body_as_Appended()->trajectory_id();
        }
      }
      again.push_back(std::move(a));
    }
    ahead_.clear();
    ahead_bytes_ = 0;
    int64_t first = next_step_;  // the first step not acknowledged
    bool rows_wait = false;
    {
      std::lock_guard<std::mutex> lock(waiting_->mu);
      rows_wait = waiting_->steps > 0;
      if (rows_wait) first = waiting_->first_step;
    }
    if (!again.empty()) first = again.front().first_step;
    // Failed to resume: the writer is done (what it had not yet had
    // acknowledged is not stored), every later call says why.
    const auto stay = [&](const Status& why) {
      {
        std::lock_guard<std::mutex> lock(waiting_->mu);
        waiting_->client = client_;
      }
      broken_ = why;
      return why;
    };
    Result<OpenedWriter> opened = OpenResumed(*remote_, options_, 0, key_, current_id_, *next);
    if (!opened.ok()) {
      return stay(opened.status().WithContext(table +
                                              ": its writer could not resume on the "
                                              "new primary after \"" +
                                              failure.message() + "\""));
    }
    OpenedWriter& w = *opened;
    const int64_t holds = w.num_steps;
    std::string lost;
    if (w.resumed == kResumedOpen && holds < first) {
      lost = "it holds " + std::to_string(holds) + " steps there; steps " + std::to_string(holds) +
             " to " + std::to_string(first - 1) + " were acknowledged by the primary that went";
    } else if (w.resumed == kResumedEnded && (!again.empty() || rows_wait || holds < first)) {
      lost = "it was ended there (" +
             std::string(EndReasonName(static_cast<EndReason>(w.end_reason))) + ") with " +
             std::to_string(holds) +
             " steps (its writer's connection ended, or no writer resumed it within "
             "DBOptions::writer_resume_window); the " +
             std::to_string(next_step_ - std::min(holds, next_step_)) +
             " steps after those were not stored";
    } else if (w.resumed == kResumedNone && first > 0) {
      lost = "it is not there; its first " + std::to_string(first) +
             " steps were acknowledged by the primary that went";
    }
    if (!lost.empty()) {
      CloseWriterOn(*w.client, w.writer);
      return stay(Status::FailedPrecondition(
          table + ": its writer could not resume trajectory " +
          std::to_string(w.trajectory_id != 0 ? w.trajectory_id : current_id_) +
          " on the new primary after \"" + failure.message() + "\": " + lost));
    }
    client_ = std::move(w.client);
    id_ = w.writer;
    ++epoch_;
    resumed_ = w.resumed;
    resumed_reason_ = static_cast<EndReason>(w.end_reason);
    if (w.resumed != kResumedNone) trajectory_id_ = current_id_ = w.trajectory_id;
    {
      std::lock_guard<std::mutex> lock(waiting_->mu);
      waiting_->client = client_;
      waiting_->id = id_;
      waiting_->epoch = epoch_;
      waiting_->last = nullptr;
    }
    for (Ahead& a : again) {
      const uint64_t id = id_;
      a.epoch = epoch_;
      const Ahead& r = a;
      a.call = client_->Start(Encoder(fb::Body::AppendStep,
                                      [&](flatbuffers::FlatBufferBuilder& b) {
                                        return fb::CreateAppendStep(
                                            b, id, false, 0, r.steps, 0, r.epoch,
                                            /*ahead=*/true, r.data_offset, r.first_step);
                                      }),
                              a.parts, a.hold, milliseconds(-1));
      ahead_bytes_ += a.bytes;
      ahead_.push_back(std::move(a));
    }
    Pump(waiting_);
    return Status::OK();
  }

  std::shared_ptr<Remote> remote_;
  std::shared_ptr<RpcClient> client_;  // the connection it was opened on
  uint64_t id_;
  uint32_t table_id_;  // the table's id on the server, which records name
  WriterOptions options_;
  // A writer that follows a cluster (its connection's coordinator) keeps
  // what it sends until acknowledged, under this random key, which its
  // records carry (0: it does not follow).
  // A new key for each trajectory.
  uint64_t key_ = remote_->connection->follows() ? NewWriterKey() : 0;
  // The current trajectory: its id once an acknowledgment named it (0:
  // none yet), and how many of its steps were handed on (the next
  // append's first step).
  uint64_t current_id_ = 0;
  int64_t next_step_ = 0;
  int resumes_ = 0;                 // Resume's in a row
  uint8_t resumed_ = kResumedNone;  // the last Resume's
  EndReason resumed_reason_ = EndReason::kTruncated;
  Status broken_;  // a failed Resume's: the writer cannot go on
  uint64_t trajectory_id_ = 0;
  int64_t num_steps_ = 0;
  std::shared_ptr<RecordBuilders> builders_ = std::make_shared<RecordBuilders>();
  std::shared_ptr<Waiting> waiting_ = NewWaiting();
  std::deque<Ahead> ahead_;  // sent, not yet acknowledged, oldest first
  size_t ahead_bytes_ = 0;
  uint32_t epoch_ = 1;
};

// A vector writer of a served table: each Append and End waits for its
// reply. Where its connection follows a cluster, it follows the primary
// through a failover (docs/replication.md, "Writers through a failover"):
// each environment's trajectory has its own random key, which the step's
// record carries (one per entry); a call that failed because the primary
// went opens the writer again on the primary named now, resuming each
// environment's trajectory there, and the step is sent again unless it is
// already there for every environment (the server skips those that hold
// it). A vector table's writer (lanes > 1) has one key for the segment its
// environments write (a new one for each segment), which its record's one
// entry carries; it resumes that segment, whose step is there whole or
// not at all.
class RemoteVectorWriter final : public VectorWriter {
 public:
  RemoteVectorWriter(std::shared_ptr<Remote> remote, std::shared_ptr<RpcClient> client, uint64_t id,
                     uint32_t table_id, size_t envs, WriterOptions options)
      : remote_(std::move(remote)),
        client_(std::move(client)),
        id_(id),
        table_id_(table_id),
        options_(options),
        ids_(envs, 0) {
    if (remote_->connection->follows()) {
      keys_.resize(lanes() ? 1 : envs);
      for (uint64_t& key : keys_) key = NewWriterKey();
      acked_.assign(keys_.size(), 0);
    }
  }

  ~RemoteVectorWriter() override { CloseWriterOn(*client_, id_); }

  Status Append(std::span<const ConstTensor> steps, std::span<const double> priorities) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    REPLAYDB_RETURN_IF_ERROR(broken_);
    const auto n = static_cast<int64_t>(ids_.size());
    REPLAYDB_RETURN_IF_ERROR(CheckRows(remote_->spec, steps, n, "vector step"));
    if (!priorities.empty() && priorities.size() != ids_.size()) {
      return Status::InvalidArgument("table '" + remote_->spec.name +
                                     "': " + std::to_string(priorities.size()) +
                                     " priorities for " + std::to_string(n) + " environments");
    }
    // The step's log record: one entry per environment, or a vector
    // table's one entry of the whole step (its columns one after another),
    // with its segment's key. Built again where a failover changed that
    // key (the segment ended there short: the step begins the next).
    std::shared_ptr<wal::RecordBuilder> builder;
    std::span<const std::byte> record;
    uint64_t record_key = 0;
    const auto build = [&] {
      builder = std::make_shared<wal::RecordBuilder>();
      if (lanes()) {
        size_t bytes = 0;
        for (const ConstTensor& t : steps) bytes += t.size_bytes;
        const uint64_t zero_id = 0;
        const int64_t zero_step = 0;
        record_key = keys_.empty() ? 0 : keys_[0];
        std::byte* data = builder->AppendSteps(
            table_id_, static_cast<uint32_t>(bytes), std::span<const uint64_t>(&zero_id, 1),
            std::span<const int64_t>(&zero_step, 1), priorities, 0,
            std::span<const uint64_t>(keys_.data(), keys_.empty() ? 0 : 1));
        for (const ConstTensor& t : steps) {
          if (t.size_bytes > 0) std::memcpy(data, t.data, t.size_bytes);
          data += t.size_bytes;
        }
        record = builder->payload();
      } else {
        record = BuildRecord(remote_->spec, table_id_, steps, n, priorities, builder.get(), nullptr,
                             true, 0, keys_);
      }
    };
    build();
    // After a failover that the step may have reached in part: each
    // environment's row is this step of its trajectory (the server skips
    // the environments that hold it).
    std::vector<int64_t> resend_from;
    for (;;) {
      const uint64_t id = id_;
      std::shared_ptr<PendingCall> call = client_->Start(
          Encoder(fb::Body::AppendStep,
                  [&](flatbuffers::FlatBufferBuilder& b) {
                    flatbuffers::Offset<flatbuffers::Vector<int64_t>> from;
                    if (!resend_from.empty()) from = b.CreateVector(resend_from);
                    return fb::CreateAppendStep(b, id, false, 0, n, 0, 0, false, 0, -1, from);
                  }),
          std::vector<std::span<const std::byte>>{record}, builder,
          ReplyWait(options_.timeout, remote_->options.call_timeout));
      Result<Message> m = client_->Await(*call);
      if (!m.ok()) {
        bool stored = false;
        std::optional<Status> resumed =
            Resume(m.status(), /*appending=*/true, {}, EndReason::kTruncated, &stored);
        if (!resumed.has_value()) {
          Refresh();  // (some environments may have taken the step)
          return m.status();
        }
        REPLAYDB_RETURN_IF_ERROR(*resumed);
        if (stored) return Status::OK();
        // (A vector table's step is one entry: there whole or not at all.)
        if (!lanes()) resend_from = acked_;
        if (lanes() && !keys_.empty() && keys_[0] != record_key) build();
        continue;  // sent again, to the writer opened there
      }
      REPLAYDB_RETURN_IF_ERROR(ExpectBody(*m, fb::Body::Appended, [&] {
        return "a vector append to '" + remote_->spec.name + "'";
      }));
      const auto* ids = m->header()->body_as_Appended()->trajectory_ids();
      if (ids == nullptr || ids->size() != ids_.size()) {
        return Status::Corruption("a vector append to '" + remote_->spec.name + "' of " +
                                  remote_->address +
                                  ": the reply does not hold one trajectory id per environment");
      }
      Take(*m->header()->body_as_Appended(), /*appended=*/true);
      resumes_ = 0;
      return Status::OK();
    }
  }

  Status End(size_t env, EndReason reason) override {
    const size_t envs[] = {env};
    return EndMany(envs, reason);
  }

  Status EndMany(std::span<const size_t> envs, EndReason reason) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    REPLAYDB_RETURN_IF_ERROR(broken_);
    std::vector<uint64_t> list(envs.begin(), envs.end());
    while (!list.empty()) {
      const uint64_t id = id_;
      Result<Message> m = client_->Call(
          Encoder(fb::Body::EndTrajectory,
                  [&](flatbuffers::FlatBufferBuilder& b) {
                    const auto v = b.CreateVector(list);
                    return fb::CreateEndTrajectory(b, id, static_cast<uint8_t>(reason), v);
                  }),
          "", ReplyWait(options_.timeout, remote_->options.call_timeout));
      if (!m.ok()) {
        std::optional<Status> resumed =
            Resume(m.status(), /*appending=*/false, envs, reason, nullptr);
        if (!resumed.has_value()) {
          Refresh();  // (some environments may have ended)
          return m.status();
        }
        REPLAYDB_RETURN_IF_ERROR(*resumed);
        // (Those found ended there need no End again.)
        list.erase(
            std::remove_if(list.begin(), list.end(),
                           [&](uint64_t e) { return e < ended_there_.size() && ended_there_[e]; }),
            list.end());
        continue;
      }
      REPLAYDB_RETURN_IF_ERROR(
          ExpectBody(*m, fb::Body::Done, "ending trajectories of '" + remote_->spec.name + "'"));
      break;
    }
    // Each environment's next trajectory has a key of its own (a vector
    // table's segment goes on: its End changes nothing).
    for (const size_t e : envs) {
      if (!lanes() && e < acked_.size()) {
        acked_[e] = 0;
        keys_[e] = NewWriterKey();
      }
    }
    resumes_ = 0;
    return Status::OK();
  }

  size_t num_envs() const override { return ids_.size(); }
  uint64_t trajectory_id(size_t env) const override { return env < ids_.size() ? ids_[env] : 0; }
  // The server's writer splits the work; this side sends one message.
  int threads() const override { return 1; }
  // The step's device arrays are copied to this host (after the work queued
  // on `stream`), then sent as Append sends them.
  Status AppendFromDevice(std::span<const ConstTensor> steps, void* stream,
                          std::span<const double> priorities) override {
    std::vector<std::vector<std::byte>> host(steps.size());
    std::vector<ConstTensor> tensors(steps.begin(), steps.end());
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].data == nullptr && steps[i].size_bytes > 0) {
        return Status::InvalidArgument("table '" + remote_->spec.name +
                                       "': AppendFromDevice: column " + std::to_string(i) +
                                       " has no data");
      }
      host[i].resize(steps[i].size_bytes);
      REPLAYDB_RETURN_IF_ERROR(
          CopyDeviceToHost(host[i].data(), steps[i].data, steps[i].size_bytes, stream)
              .WithContext("table '" + remote_->spec.name + "': AppendFromDevice"));
      tensors[i].data = host[i].data();
    }
    return Append(tensors, priorities);
  }

 private:
  // Takes an Appended reply's trajectory ids and, where the writer follows
  // a cluster, the steps each environment's open trajectory holds (a
  // server that does not say: one more each, when `appended`).
  void Take(const fb::Appended& a, bool appended) {
    const auto* ids = a.trajectory_ids();
    if (ids != nullptr && ids->size() == ids_.size()) ids_.assign(ids->begin(), ids->end());
    if (acked_.empty()) return;
    const auto* steps = a.envs_num_steps();
    if (lanes()) {
      // Every environment's is the segment's; 0 once it ended (full), and
      // the next step begins another, of a new key.
      if (steps != nullptr && steps->size() == ids_.size() && !ids_.empty()) {
        acked_[0] = steps->Get(0);
        acked_known_ = true;
      } else if (appended) {
        ++acked_[0];
      }
      if (acked_[0] == 0) NextSegment();
      return;
    }
    if (steps != nullptr && steps->size() == acked_.size()) {
      acked_.assign(steps->begin(), steps->end());
      acked_known_ = true;
    } else if (appended) {
      for (int64_t& s : acked_) ++s;
    }
  }

  // A vector table's writer (lanes > 1, one segment for every environment).
  bool lanes() const { return remote_->spec.lanes > 1; }
  // A vector table's writer: its next step begins a segment, of a new key.
  void NextSegment() {
    acked_[0] = 0;
    keys_[0] = NewWriterKey();
  }

  // After a call that failed for another reason than a failover (an
  // environment's trajectory evicted, the rate limiter's timeout): the
  // server's view of each environment's trajectory (an AppendStep of no
  // rows), so that a later failover compares against what is stored.
  void Refresh() {
    if (acked_.empty()) return;
    const uint64_t id = id_;
    Result<Message> m = client_->Call(Encoder(fb::Body::AppendStep,
                                              [&](flatbuffers::FlatBufferBuilder& b) {
                                                return fb::CreateAppendStep(b, id, false, 0, 0);
                                              }),
                                      "", remote_->options.call_timeout);
    if (m.ok() && m->header()->body_type() == fb::Body::Appended) {
      Take(*m->header()->body_as_Appended(), /*appended=*/false);
    } else {
      acked_known_ = false;  // (until a reply says them)
    }
  }

  // After `failure` of a call (an append when `appending`, else an End of
  // `ending` with `reason`): where the writer follows a cluster and its
  // server is no longer the primary, opens the writer again on the primary
  // named now, resuming each environment's trajectory there. An append:
  // *stored says whether its step is there already for every environment.
  // An End: ended_there_ says which of `ending` are ended there already.
  // nullopt: not a failover (the failure stands); otherwise OK, or why the
  // writer cannot go on (every later call then says so).
  std::optional<Status> Resume(const Status& failure, bool appending,
                               std::span<const size_t> ending, EndReason reason, bool* stored) {
    if (keys_.empty() || (failure.code() != Status::Code::kUnavailable &&
                          failure.code() != Status::Code::kFailedPrecondition)) {
      return std::nullopt;
    }
    const std::string table = "table '" + remote_->spec.name + "'";
    Result<std::shared_ptr<RpcClient>> next = remote_->connection->Elsewhere(client_);
    if (next.ok() && *next == nullptr) return std::nullopt;  // still the primary
    const std::string after = " after \"" + failure.message() + "\"";
    if (!next.ok() || ++resumes_ > kMaxResumes) {
      const Status why =
          next.ok() ? Status::Unavailable("the primary changed " + std::to_string(kMaxResumes) +
                                          " times without an acknowledgment")
                    : next.status();
      return why.WithContext(
          table + ": its vector writer could not follow the cluster to a new primary" + after);
    }
    const size_t n = keys_.size();
    // The trajectories each environment's acknowledged steps went to (a
    // vector table's: its segment).
    std::vector<uint64_t> known(n);
    for (size_t e = 0; e < n; ++e) known[e] = acked_[e] > 0 ? ids_[e] : 0;
    Result<OpenedWriter> opened =
        OpenResumed(*remote_, options_, ids_.size(), 0, 0, *next, keys_, known);
    if (!opened.ok()) {
      broken_ = opened.status().WithContext(
          table + ": its vector writer could not resume on the new primary" + after);
      return broken_;
    }
    if (lanes()) return ResumeSegment(*opened, known[0], appending, stored, after);
    std::vector<bool> is_ending(n, false);
    for (const size_t e : ending) {
      if (e < n) is_ending[e] = true;
    }
    // What the new primary holds of each environment's trajectory, against
    // the steps acknowledged; the step of an append in flight is there for
    // every environment, for none, or (logged in parts: the old primary's
    // rate limiter let some environments in first) for some, and is then
    // sent again for the others.
    int there = 0, missing = 0;
    std::string lost;
    ended_there_.assign(n, false);
    for (size_t e = 0; e < n && lost.empty(); ++e) {
      const ResumedTrajectory& t = opened->envs[e];
      const int64_t acked = acked_[e];
      const std::string which =
          "environment " + std::to_string(e) + "'s trajectory" +
          (t.trajectory_id != 0 || known[e] != 0
               ? " " + std::to_string(t.trajectory_id != 0 ? t.trajectory_id : known[e])
               : std::string());
      if ((t.resumed == kResumedOpen && t.num_steps == acked) ||
          (t.resumed == kResumedNone && acked == 0)) {
        ++missing;
      } else if (appending && t.resumed == kResumedOpen && t.num_steps == acked + 1) {
        ++there;
      } else if (!appending && is_ending[e] && t.resumed == kResumedEnded && t.num_steps == acked &&
                 t.end_reason == static_cast<uint8_t>(reason)) {
        ended_there_[e] = true;
      } else if (t.resumed == kResumedNone) {
        lost = which + " is not there; its first " + std::to_string(acked) +
               " steps were acknowledged by the primary that went";
      } else if (t.resumed == kResumedEnded) {
        lost = which + " was ended there (" +
               std::string(EndReasonName(static_cast<EndReason>(t.end_reason))) + ") with " +
               std::to_string(t.num_steps) +
               " steps (its writer's connection ended, or no writer resumed it within "
               "DBOptions::writer_resume_window)" +
               (appending ? "; the step appended after its " + std::to_string(acked) +
                                " acknowledged ones was not stored"
                          : std::string());
      } else if (t.num_steps < acked) {
        lost = which + " holds " + std::to_string(t.num_steps) + " steps there; steps " +
               std::to_string(t.num_steps) + " to " + std::to_string(acked - 1) +
               " were acknowledged by the primary that went";
      } else {
        lost = which + " holds " + std::to_string(t.num_steps) + " steps there, more than the " +
               std::to_string(acked + (appending ? 1 : 0)) + " its writer sent";
      }
    }
    if (lost.empty() && there > 0 && !acked_known_) {
      // (A step there could be the failed call's as well as this one's.)
      lost =
          "the writer does not know what its last failed call stored (asking the server "
          "failed too), so it cannot tell whether the steps there are this call's";
    }
    if (!lost.empty()) {
      CloseWriterOn(*opened->client, opened->writer);
      broken_ = Status::FailedPrecondition(table + ": its vector writer could not resume on the " +
                                           "new primary" + after + ": " + lost);
      return broken_;
    }
    client_ = std::move(opened->client);
    id_ = opened->writer;
    for (size_t e = 0; e < n; ++e) {
      if (opened->envs[e].resumed != kResumedNone) ids_[e] = opened->envs[e].trajectory_id;
    }
    if (stored != nullptr) {
      *stored = missing == 0 && there > 0;
      if (*stored) {
        for (int64_t& s : acked_) ++s;
        resumes_ = 0;
      }
    }
    return Status::OK();
  }

  // Resume's work for a vector table's writer, whose segment the new
  // primary holds as `opened` says (`known`: its id, where the writer knows
  // it). The step of an append in flight (one entry) is there whole or not
  // at all; a segment ended there (full, or short by the resume window)
  // loses nothing acknowledged: the next step begins another. An End
  // changes nothing on a vector table, and is not sent again.
  Status ResumeSegment(OpenedWriter& opened, uint64_t known, bool appending, bool* stored,
                       const std::string& after) {
    const ResumedTrajectory& t = opened.envs[0];
    const int64_t acked = acked_[0];
    const uint64_t id = t.trajectory_id != 0 ? t.trajectory_id : known;
    const std::string which = "the segment" + (id != 0 ? " " + std::to_string(id) : std::string()) +
                              " of its " + std::to_string(ids_.size()) + " environments";
    std::string lost;
    bool there = false;
    if (t.resumed == kResumedNone) {
      if (acked > 0) {
        lost = which + " is not there; its first " + std::to_string(acked) +
               " steps were acknowledged by the primary that went";
      }
    } else if (t.num_steps < acked) {
      lost = which + " holds " + std::to_string(t.num_steps) + " steps there; steps " +
             std::to_string(t.num_steps) + " to " + std::to_string(acked - 1) +
             " were acknowledged by the primary that went";
    } else if (appending && t.num_steps == acked + 1) {
      there = true;
    } else if (t.num_steps != acked) {
      lost = which + " holds " + std::to_string(t.num_steps) + " steps there, more than the " +
             std::to_string(acked + (appending ? 1 : 0)) + " its writer sent";
    }
    if (lost.empty() && there && !acked_known_) {
      lost =
          "the writer does not know what its last failed call stored (asking the server "
          "failed too), so it cannot tell whether the step there is this call's";
    }
    if (!lost.empty()) {
      CloseWriterOn(*opened.client, opened.writer);
      broken_ = Status::FailedPrecondition("table '" + remote_->spec.name +
                                           "': its vector writer could not resume on the new "
                                           "primary" +
                                           after + ": " + lost);
      return broken_;
    }
    client_ = std::move(opened.client);
    id_ = opened.writer;
    if (t.resumed != kResumedNone) ids_.assign(ids_.size(), t.trajectory_id);
    if (there) acked_[0] = t.num_steps;
    if (t.resumed == kResumedEnded) NextSegment();
    if (stored != nullptr) *stored = there;
    ended_there_.assign(ids_.size(), true);  // (an End: nothing to send again)
    if (there) resumes_ = 0;
    return Status::OK();
  }

  std::shared_ptr<Remote> remote_;
  std::shared_ptr<RpcClient> client_;  // the connection it was opened on
  uint64_t id_;
  uint32_t table_id_;  // the table's id on the server, which records name
  WriterOptions options_;
  std::vector<uint64_t> ids_;
  // A writer that follows a cluster: each environment's trajectory's key
  // (a new one for each trajectory) and the steps its open trajectory
  // holds as of the last reply (empty: it does not follow).
  std::vector<uint64_t> keys_;
  std::vector<int64_t> acked_;
  // Whether acked_ is what the server said last: false after a failed call
  // whose Refresh failed too, until a reply says the steps again.
  bool acked_known_ = true;
  std::vector<bool> ended_there_;  // the last Resume's, of an End
  int resumes_ = 0;                // Resume's in a row
  Status broken_;                  // a failed Resume's: the writer cannot go on
};

class RemoteTable final : public Table, public std::enable_shared_from_this<RemoteTable> {
 public:
  RemoteTable(std::shared_ptr<Connection> connection, std::string address, TableSpec spec,
              ConnectOptions options, std::shared_ptr<const std::atomic<bool>> db_closed)
      : remote_(std::make_shared<Remote>()) {
    remote_->connection = std::move(connection);
    remote_->address = std::move(address);
    remote_->db_closed = std::move(db_closed);
    remote_->spec = std::move(spec);
    remote_->options = options;
  }

  TableSpec spec() const override { return remote_->spec; }
  const std::string& name() const override { return remote_->spec.name; }

  Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& options) override {
    REPLAYDB_ASSIGN_OR_RETURN(auto opened, OpenWriterOf(*remote_, options, 0));
    return std::unique_ptr<TrajectoryWriter>(new RemoteWriter(
        remote_, std::move(opened.client), opened.writer, opened.table_id, options));
  }

  Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t num_envs,
                                                        const WriterOptions& options) override {
    if (num_envs == 0 || num_envs > kMaxVectorWriterEnvs) {
      return Status::InvalidArgument("table '" + name() + "': a vector writer of " +
                                     std::to_string(num_envs) + " environments (1 to " +
                                     std::to_string(kMaxVectorWriterEnvs) + ")");
    }
    REPLAYDB_ASSIGN_OR_RETURN(auto opened, OpenWriterOf(*remote_, options, num_envs));
    return std::unique_ptr<VectorWriter>(
        new RemoteVectorWriter(remote_, std::move(opened.client), opened.writer, opened.table_id,
                               num_envs, options));
  }

  Status Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    if (options.gather && remote_->options.read_in_place && remote_->spec.lanes == 1 &&
        out != nullptr && batch_size > 0 &&
        remote_->spec.step_bytes() *
                static_cast<uint64_t>(std::max<int64_t>(remote_->spec.sequence_length, 1)) >=
            remote_->options.read_in_place_min_bytes / static_cast<uint64_t>(batch_size)) {
      std::optional<Status> in_place = SampleInPlace(batch_size, options, out);
      if (in_place) return *in_place;
    }
    const std::string table = name();
    std::string items;
    REPLAYDB_ASSIGN_OR_RETURN(Message m, CallWaiting(options.timeout, [&](milliseconds slice) {
                                return remote_->connection->Call(
                                    Encoder(
                                        fb::Body::Sample,
                                        [&](flatbuffers::FlatBufferBuilder& b) {
                                          const auto t = b.CreateString(table);
                                          return fb::CreateSample(
                                              b, t, batch_size, options.importance_beta,
                                              static_cast<uint8_t>(options.weight_normalization),
                                              options.stratified, options.peek, options.gather,
                                              /*in_place=*/false, /*release=*/0,
                                              /*insertion_order=*/true);
                                        },
                                        slice.count()),
                                    "", ReplyWait(slice, remote_->options.call_timeout),
                                    Landing(out, &items));
                              }));
    return DecodeSampled(m, "sample of table '" + table + "' from " + address(), items, out);
  }

  Status UpdatePriorities(std::span<const ItemKey> keys, std::span<const double> priorities,
                          PriorityUpdateResult* result) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    if (keys.size() != priorities.size()) {
      return Status::InvalidArgument("table '" + name() + "': " + std::to_string(keys.size()) +
                                     " keys and " + std::to_string(priorities.size()) +
                                     " priorities");
    }
    std::string payload;
    payload.reserve(keys.size_bytes() + priorities.size_bytes());
    Put(&payload, keys);
    Put(&payload, priorities);
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::UpdatePriorities,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateUpdatePriorities(
                                                   b, b.CreateString(table));
                                             },
                                             std::move(payload)));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::PrioritiesUpdated, [&] {
      return "a priority update of table '" + table + "'";
    }));
    if (result != nullptr) {
      result->updated = m.header()->body_as_PrioritiesUpdated()->updated();
      result->skipped = m.header()->body_as_PrioritiesUpdated()->skipped();
    }
    return Status::OK();
  }

  Status Lookup(std::span<const ItemKey> keys, SampleBatch* out) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    std::string payload;
    Put(&payload, keys);
    const std::string table = name();
    std::string items;
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::Lookup,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateLookup(b, b.CreateString(table),
                                                                       /*insertion_order=*/true);
                                             },
                                             std::move(payload), Landing(out, &items)));
    return DecodeSampled(m, "lookup in table '" + table + "' from " + address(), items, out);
  }

  // GPU calls go through this host's memory (through_host.h): the served
  // host call, and copies to or from the caller's device arrays.
  Status SampleToDevice(int64_t batch_size, const SampleOptions& options,
                        const DeviceSampleOutput& out, void* stream) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    return SampleToDeviceThroughHost(*this, remote_->spec, batch_size, options, out, stream);
  }
  Status LookupToDevice(std::span<const ItemKey> keys, const DeviceSampleOutput& out,
                        void* stream) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    return LookupToDeviceThroughHost(*this, remote_->spec, keys, out, stream);
  }
  Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(
      const DeviceSamplerOptions& options) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    return DeviceSamplerThroughHost(shared_from_this(), remote_->spec, options);
  }
  Status UpdatePrioritiesFromDevice(const uint64_t* keys, const float* priorities, int64_t n,
                                    void* stream) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    return UpdatePrioritiesFromDeviceThroughHost(*this, keys, priorities, n, stream);
  }

  Status SetRateLimiter(const RateLimiterSpec& spec) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    REPLAYDB_RETURN_IF_ERROR(spec.Validate());
    const std::string table = name();
    return remote_->connection->AskDone(
        fb::Body::SetRateLimiter,
        [&](flatbuffers::FlatBufferBuilder& b) {
          const auto t = b.CreateString(table);
          const auto l = EncodeLimiter(b, spec);
          return fb::CreateSetRateLimiter(b, t, l);
        },
        "setting the rate limiter of table '" + table + "'");
  }

  Status Seed(uint64_t seed) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    return remote_->connection->AskDone(
        fb::Body::SeedTable,
        [&](flatbuffers::FlatBufferBuilder& b) {
          return fb::CreateSeedTable(b, b.CreateString(table), seed);
        },
        "seeding table '" + table + "'");
  }

  Status Clear() override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    return remote_->connection->AskDone(
        fb::Body::ClearTable,
        [&](flatbuffers::FlatBufferBuilder& b) {
          return fb::CreateClearTable(b, b.CreateString(table));
        },
        "clearing table '" + table + "'");
  }

  Status DeleteItems(std::span<const ItemKey> keys, int64_t* deleted) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    std::string payload;
    Put(&payload, keys);
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::DeleteItems,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateDeleteItems(
                                                   b, b.CreateString(table));
                                             },
                                             std::move(payload)));
    REPLAYDB_RETURN_IF_ERROR(
        ExpectBody(m, fb::Body::ItemsDeleted, "deleting items of table '" + table + "'"));
    if (deleted != nullptr) *deleted = m.header()->body_as_ItemsDeleted()->deleted();
    return Status::OK();
  }

  Status Load(std::span<const uint64_t> ids) override {
    std::string payload;
    Put(&payload, ids);
    return LoadOn(false, 0, 0, std::move(payload));
  }
  Status LoadRange(uint64_t first, uint64_t last) override {
    return LoadOn(true, first, last, {});
  }

  using Table::ColdTrajectories;
  Status ColdTrajectories(uint64_t from, size_t limit, std::vector<uint64_t>* ids) const override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    const std::string what = "the cold trajectories of table '" + table + "'";
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::ColdTrajectories,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateColdTrajectories(
                                                   b, b.CreateString(table), from, limit);
                                             }));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TrajectoryIds, what));
    const int64_t count = m.header()->body_as_TrajectoryIds()->count();
    std::string_view in = m.payload;
    REPLAYDB_RETURN_IF_ERROR(CheckCount(what, count, "ids", sizeof(uint64_t), in));
    ids->resize(static_cast<size_t>(count));
    if (count > 0) std::memcpy(ids->data(), in.data(), in.size());
    return Status::OK();
  }

  using Table::ListTrajectories;
  Status ListTrajectories(const TrajectoryFilter& filter,
                          std::vector<TrajectoryInfo>* out) const override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    const std::string what = "the trajectories of table '" + table + "'";
    const int8_t ended = filter.ended ? (*filter.ended ? 1 : 0) : -1;
    const int8_t tier = filter.tier ? static_cast<int8_t>(*filter.tier) : -1;
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m, remote_->connection->Ask(
                       fb::Body::ListTrajectories, [&](flatbuffers::FlatBufferBuilder& b) {
                         return fb::CreateListTrajectories(b, b.CreateString(table), filter.from,
                                                           filter.limit, filter.min_length,
                                                           filter.max_length, ended, tier);
                       }));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TrajectoryList, what));
    const int64_t count = m.header()->body_as_TrajectoryList()->count();
    std::string_view in = m.payload;
    REPLAYDB_RETURN_IF_ERROR(CheckCount(what, count, "rows", kTrajectoryRowBytes, in));
    out->resize(static_cast<size_t>(count));
    for (TrajectoryInfo& t : *out) {
      if (!TakeTrajectoryRow(&in, &t)) {
        return Status::Corruption(what + " from " + address() +
                                  ": a row holds a value out of range");
      }
    }
    return Status::OK();
  }

  Status ReadTrajectory(uint64_t id, int64_t first, int64_t count,
                        TrajectorySteps* out) override {
    return Read(id, 0, first, count, out);
  }

  // ReadTrajectory of trajectory `id`, or (`writer_key` not 0) of the one
  // that remote writer's key names.
  Status Read(uint64_t id, uint64_t writer_key, int64_t first, int64_t count,
              TrajectorySteps* out) {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    const std::string what =
        "reading " +
        (writer_key != 0 ? "the trajectory of writer key " + std::to_string(writer_key)
                         : "trajectory " + std::to_string(id)) +
        " of table '" + table + "'";
    if (out == nullptr) return Status::InvalidArgument(what + ": out is null");
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m,
        remote_->connection->Ask(fb::Body::ReadTrajectory, [&](flatbuffers::FlatBufferBuilder& b) {
          return fb::CreateReadTrajectory(b, b.CreateString(table), id, first, count, writer_key);
        }));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TrajectoryRead, what));
    const fb::TrajectoryRead* r = m.header()->body_as_TrajectoryRead();
    const int64_t steps = r->steps();
    const std::string bad = what + " from " + address() + ": ";
    if (r->end_reason() > static_cast<uint8_t>(EndReason::kTruncated) ||
        r->tier() > static_cast<uint8_t>(Tier::kCold) || r->length() < 0 ||
        r->live_items() < 0) {
      return Status::Corruption(bad + "the trajectory's end reason, tier, length or item "
                                      "count is out of range");
    }
    TrajectoryInfo info;
    info.id = r->id();
    info.length = r->length();
    info.live_items = r->live_items();
    info.ended = r->ended();
    info.end_reason = static_cast<EndReason>(r->end_reason());
    info.tier = static_cast<Tier>(r->tier());
    const TableSpec& spec = remote_->spec;
    // A vector table stores [lanes, shape...] per column and step.
    const int64_t lanes = spec.lanes > 1 ? spec.lanes : 1;
    uint64_t row_bytes = 0;
    for (const ColumnSpec& c : spec.columns) row_bytes += c.step_bytes() * lanes;
    std::string_view in = m.payload;
    if (steps < 0 || r->first() < 0 ||
        (row_bytes + sizeof(double)) * static_cast<uint64_t>(steps) != in.size()) {
      return Status::Corruption(bad + std::to_string(steps) + " steps in " +
                                std::to_string(in.size()) + " payload bytes");
    }
    out->info = info;
    out->first = r->first();
    out->columns.resize(spec.columns.size());
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const ColumnSpec& col = spec.columns[c];
      const Shape stored = lanes > 1 ? col.shape.Prepend(lanes) : col.shape;
      out->columns[c].Reset(col.dtype, stored.Prepend(steps));
      const size_t bytes = out->columns[c].size_bytes();
      if (bytes > 0) std::memcpy(out->columns[c].data(), in.data(), bytes);
      in.remove_prefix(bytes);
    }
    out->step_priorities.resize(static_cast<size_t>(steps));
    if (steps > 0) std::memcpy(out->step_priorities.data(), in.data(), in.size());
    return Status::OK();
  }

  Status ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    const std::string what = "the item priorities of table '" + table + "'";
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::ItemPriorities,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateItemPriorities(
                                                   b, b.CreateString(table));
                                             }));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::ItemPrioritiesRead, what));
    const int64_t count = m.header()->body_as_ItemPrioritiesRead()->count();
    std::string_view in = m.payload;
    REPLAYDB_RETURN_IF_ERROR(
        CheckCount(what, count, "items", sizeof(ItemKey) + sizeof(double), in));
    const size_t n = static_cast<size_t>(count);
    keys->resize(n);
    priorities->resize(n);
    if (n > 0) {
      std::memcpy(keys->data(), in.data(), n * sizeof(ItemKey));
      std::memcpy(priorities->data(), in.data() + n * sizeof(ItemKey), n * sizeof(double));
    }
    return Status::OK();
  }

  // The server's; when it cannot be asked, only the name (InfoOrError says
  // why).
  TableInfo Info() const override {
    Result<TableInfo> info = InfoOrError();
    if (info.ok()) return std::move(info).value();
    TableInfo empty;
    empty.name = name();
    return empty;
  }

  Result<TableInfo> InfoOrError() const {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m,
        remote_->connection->Ask(fb::Body::GetInfo, [&](flatbuffers::FlatBufferBuilder& b) {
          return fb::CreateGetInfo(b, b.CreateString(table));
        }));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Info, "the info of table '" + table + "'"));
    return DecodeInfo(*m.header()->body_as_Info(), table);
  }

  Result<SamplingMass> Mass() override {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m,
        remote_->connection->Ask(fb::Body::GetMass, [&](flatbuffers::FlatBufferBuilder& b) {
          return fb::CreateGetMass(b, b.CreateString(table));
        }));
    REPLAYDB_RETURN_IF_ERROR(
        ExpectBody(m, fb::Body::MassRead, "the sampling mass of table '" + table + "'"));
    const fb::MassRead* read = m.header()->body_as_MassRead();
    SamplingMass mass;
    mass.total = read->total();
    mass.items = read->items();
    mass.smallest_priority = read->smallest_priority();
    return mass;
  }

  // This handle's calls fail from now on; the server's table stays open
  // (other clients use it).
  void Close() override { remote_->closed.store(true, std::memory_order_release); }

 private:
  const std::string& address() const { return remote_->address; }

  // The server's slabs from slab `first` on, imported on `client`'s
  // connection into `in_place.slabs`. FailedPrecondition when the server
  // will not share them on this connection.
  Status ImportSlabs(RpcClient& client, Remote::InPlace& p, int64_t first) {
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m, client.Call(Encoder(fb::Body::SlabKeys,
                                       [&](flatbuffers::FlatBufferBuilder& b) {
                                         const auto t = b.CreateString(table);
                                         return fb::CreateSlabKeys(b, t, first);
                                       }),
                               "", remote_->options.call_timeout));
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::SlabKeysRead,
                                        "the slab keys of table '" + table + "'"));
    const auto* slabs = m.header()->body_as_SlabKeysRead()->slabs();
    std::vector<Remote::Slab> got;
    if (slabs != nullptr) {
      for (const fb::SharedSlab* slab : *slabs) {
        if (slab->key() == nullptr) {
          return Status::Corruption("table '" + table + "': a slab without a key from " +
                                    address());
        }
        REPLAYDB_ASSIGN_OR_RETURN(
            const uint64_t key,
            client.transport().ImportKey(
                client.connection(),
                std::string_view(reinterpret_cast<const char*>(slab->key()->data()),
                                 slab->key()->size())));
        got.push_back({key, slab->address(), slab->bytes()});
      }
    }
    std::lock_guard<std::mutex> lock(p.mu);
    if (static_cast<int64_t>(p.slabs.size()) == first) {
      p.slabs.insert(p.slabs.end(), got.begin(), got.end());
    }
    return Status::OK();
  }

  // A sample whose windows this side reads from the server's memory: its
  // status, or nullopt where it is not to be read in place (the call is
  // then made the usual way): reads on the connection are not one-sided,
  // or the server does not share the table's hot tier.
  std::optional<Status> SampleInPlace(int64_t batch_size, const SampleOptions& options,
                                      SampleBatch* out) {
    Result<std::shared_ptr<RpcClient>> got = remote_->connection->Get();
    if (!got.ok()) return std::nullopt;  // the usual call says why
    const std::shared_ptr<RpcClient> client = std::move(got).value();
    Remote::InPlace& p = *remote_->in_place;
    std::vector<uint64_t> release;
    bool need_keys = false;
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.reader.lock() != client) {  // a new connection: its own keys
        p.reader = client;
        p.refused = false;
        p.slabs.clear();
        p.release.clear();
        need_keys = true;
      }
      if (p.refused) return std::nullopt;
      release.swap(p.release);
    }
    if (need_keys) {
      Result<bool> one_sided = client->transport().OneSided(client->connection());
      Status imported = !one_sided.ok() ? one_sided.status()
                        : !*one_sided
                            ? Status::FailedPrecondition("reads would not be one-sided")
                            : ImportSlabs(*client, p, 0);
      if (!imported.ok()) {
        // Refused: by message on this connection from now on. Failed
        // otherwise (the connection ended): asked again next time.
        std::lock_guard<std::mutex> lock(p.mu);
        if (imported.code() == Status::Code::kFailedPrecondition) {
          p.refused = true;
        } else {
          p.reader.reset();
        }
        return std::nullopt;
      }
    }
    const std::string table = name();
    std::string items;
    const auto started = std::chrono::steady_clock::now();
    REPLAYDB_ASSIGN_OR_RETURN(
        Message m, CallWaiting(options.timeout, [&](milliseconds slice) {
          return client->Call(
              Encoder(
                  fb::Body::Sample,
                  [&](flatbuffers::FlatBufferBuilder& b) {
                    const auto t = b.CreateString(table);
                    const auto r = b.CreateVector(release);
                    return fb::CreateSample(b, t, batch_size, options.importance_beta,
                                            static_cast<uint8_t>(options.weight_normalization),
                                            options.stratified, options.peek, options.gather,
                                            /*in_place=*/true, r, /*insertion_order=*/true);
                  },
                  slice.count()),
              "", ReplyWait(slice, remote_->options.call_timeout), 0, Landing(out, &items));
        }));
    const std::string what = "sample of table '" + table + "' from " + address();
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Sampled, what));
    const fb::Sampled* s = m.header()->body_as_Sampled();
    if (s->lease() == 0) return DecodeSampled(m, what, items, out);  // by message after all
    Status read = ReadInPlace(*client, p, *s, m.payload, what, out);
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.reader.lock() == client) p.release.push_back(s->lease());
    }
    if (read.ok() &&
        std::chrono::steady_clock::now() - started >= milliseconds(s->lease_ms())) {
      // The lease may have passed before the reads were done: the blocks
      // may hold other steps by now. The same items, gathered by the server.
      std::vector<ItemKey> keys = out->keys;
      SampleBatch looked;
      read = Lookup(keys, &looked);
      if (!read.ok()) {
        return read.WithContext(what + ": its lease of " + std::to_string(s->lease_ms()) +
                                " ms passed before the reads were done, and the items could "
                                "not be looked up again");
      }
      looked.probabilities = std::move(out->probabilities);
      looked.weights = std::move(out->weights);
      *out = std::move(looked);
    }
    return read;
  }

  // The windows of an in-place Sampled reply read from the server's slabs
  // into `out` (its items' fields from `payload`).
  Status ReadInPlace(RpcClient& client, Remote::InPlace& p, const fb::Sampled& s,
                     std::string_view payload, const std::string& what, SampleBatch* out) {
    const TableSpec& spec = remote_->spec;
    const int64_t B = s.batch_size();
    const int64_t L = s.sequence_length();
    SampleBatch b;
    std::string_view in = payload;
    if (B < 0 || L < 1 || L > (int64_t{1} << 32) ||
        !DecodeSampleItems(&in, B, L, s.has_weights(), s.has_insertion_order(), &b) ||
        s.segments() < 0 || in.size() != static_cast<uint64_t>(s.segments()) * kSegmentRowBytes) {
      return Status::Corruption(what + ": an in-place reply of " +
                                std::to_string(payload.size()) + " bytes does not add up");
    }
    const size_t columns = spec.columns.size();
    if (s.column_offset() == nullptr || s.column_step_bytes() == nullptr ||
        s.column_offset()->size() != columns || s.column_step_bytes()->size() != columns) {
      return Status::Corruption(what + ": an in-place reply without the table's " +
                                std::to_string(columns) + " columns' places");
    }
    for (size_t c = 0; c < columns; ++c) {
      if (s.column_step_bytes()->Get(c) != spec.columns[c].step_bytes()) {
        return Status::Corruption(what + ": column '" + spec.columns[c].name + "' has " +
                                  std::to_string(s.column_step_bytes()->Get(c)) +
                                  " bytes a step on the server, " +
                                  std::to_string(spec.columns[c].step_bytes()) + " here");
      }
    }
    std::vector<SegmentRow> segments(static_cast<size_t>(s.segments()));
    for (SegmentRow& g : segments) (void)TakeSegmentRow(&in, &g);  // sized above
    // The slabs the segments name, imported first where new ones appeared.
    uint32_t max_slab = 0;
    for (const auto& g : segments) max_slab = std::max(max_slab, g.slab);
    std::vector<Remote::Slab> slabs;
    for (int attempt = 0; attempt < 2; ++attempt) {
      {
        std::lock_guard<std::mutex> lock(p.mu);
        slabs = p.slabs;
      }
      if (segments.empty() || max_slab < slabs.size()) break;
      REPLAYDB_RETURN_IF_ERROR(
          ImportSlabs(client, p, static_cast<int64_t>(slabs.size())).WithContext(what));
    }
    if (!segments.empty() && max_slab >= slabs.size()) {
      return Status::Corruption(what + ": a window in slab " + std::to_string(max_slab) +
                                " of " + std::to_string(slabs.size()));
    }
    auto landing = std::make_shared<std::vector<Tensor>>(std::move(out->columns));
    ShapeSampleColumns(spec, B, L, landing.get());
    std::vector<Transport::ReadPiece> pieces;
    pieces.reserve(segments.size() * columns);
    std::vector<int64_t> written(static_cast<size_t>(B), 0);
    for (const SegmentRow& g : segments) {
      if (g.item >= static_cast<uint64_t>(B) || g.count == 0 ||
          uint64_t{g.out_step} + g.count > static_cast<uint64_t>(L)) {
        return Status::Corruption(what + ": a window's run out of the batch's bounds");
      }
      const Remote::Slab& slab = slabs[g.slab];
      for (size_t c = 0; c < columns; ++c) {
        const uint64_t step = s.column_step_bytes()->Get(c);
        const uint64_t from = g.block_offset + s.column_offset()->Get(c) + g.first_step * step;
        const uint64_t bytes = uint64_t{g.count} * step;
        if (bytes == 0) continue;
        if (from > slab.bytes || bytes > slab.bytes - from) {
          return Status::Corruption(what + ": a window's run past its slab's " +
                                    std::to_string(slab.bytes) + " bytes");
        }
        std::byte* to = (*landing)[c].data() +
                        (static_cast<uint64_t>(g.item) * L + g.out_step) * step;
        pieces.push_back({slab.key, slab.address + from, {to, static_cast<size_t>(bytes)}});
      }
      written[g.item] = std::max<int64_t>(written[g.item], int64_t{g.out_step} + g.count);
    }
    // Padding steps are zero, as a gathered sample's.
    for (size_t c = 0; c < columns; ++c) {
      const size_t step = spec.columns[c].step_bytes();
      for (int64_t i = 0; i < B; ++i) {
        if (written[i] < L) {
          std::memset((*landing)[c].data() + (static_cast<size_t>(i * L + written[i])) * step, 0,
                      static_cast<size_t>(L - written[i]) * step);
        }
      }
    }
    REPLAYDB_RETURN_IF_ERROR(client.transport()
                                 .ReadAll(client.connection(), std::move(pieces),
                                          remote_->options.call_timeout, landing)
                                 .WithContext(what));
    b.columns = std::move(*landing);
    *out = std::move(b);
    return Status::OK();
  }

  // Where a large Sampled reply goes (RpcClient's Placement): the items'
  // fields into `items`, the columns straight into `out`'s, which keep
  // their buffers when they are the right size already (a learner's batch
  // sampled again): no copy, and no fresh pages to fault in.
  Placement Landing(SampleBatch* out, std::string* items) const {
    const TableSpec* spec = &remote_->spec;
    return [spec, out, items](const fb::Header& h, size_t length) {
      std::vector<std::span<std::byte>> pieces;
      const fb::Sampled* s = h.body_as_Sampled();
      if (s == nullptr || !s->has_columns() || s->batch_size() < 0 ||
          s->sequence_length() < 0 || s->batch_size() > (int64_t{1} << 32) ||
          s->sequence_length() > (int64_t{1} << 32)) {
        return pieces;
      }
      const size_t rows = static_cast<size_t>(s->batch_size()) *
                          static_cast<size_t>(s->sequence_length());
      const size_t item_bytes = SampleItemsBytes(s->batch_size(), s->sequence_length(),
                                                 s->has_weights(), s->has_insertion_order());
      size_t total = item_bytes;
      for (const ColumnSpec& c : spec->columns) {
        size_t bytes = 0;
        if (__builtin_mul_overflow(rows, c.step_bytes(), &bytes) ||
            __builtin_add_overflow(total, bytes, &total)) {
          return pieces;
        }
      }
      if (total != length) return pieces;  // not what this table's sample holds
      items->resize(item_bytes);
      pieces.emplace_back(reinterpret_cast<std::byte*>(items->data()), items->size());
      ShapeSampleColumns(*spec, s->batch_size(), s->sequence_length(), &out->columns);
      for (Tensor& c : out->columns) pieces.emplace_back(c.data(), c.size_bytes());
      return pieces;
    };
  }

  // The batch of a Sampled reply: from its payload, or (placed) from
  // `items` and the columns already in `out`.
  Status DecodeSampled(const Message& m, const std::string& what, const std::string& items,
                       SampleBatch* out) {
    REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Sampled, what));
    const fb::Sampled* s = m.header()->body_as_Sampled();
    if (!m.placed) {
      return DecodeSamplePayload(m.payload, remote_->spec, s->batch_size(), s->sequence_length(),
                                 s->has_weights(), s->has_columns(), s->has_insertion_order(),
                                 address(), out);
    }
    SampleBatch b;
    std::string_view in = items;
    if (!DecodeSampleItems(&in, s->batch_size(), s->sequence_length(), s->has_weights(),
                           s->has_insertion_order(), &b) ||
        !in.empty()) {
      return Status::Internal(what + ": the items' fields placed do not add up");
    }
    b.columns = std::move(out->columns);
    *out = std::move(b);
    return Status::OK();
  }

  // Corruption naming `what` unless a reply's payload holds exactly `count`
  // `things` of `bytes_each`.
  Status CheckCount(const std::string& what, int64_t count, const char* things, size_t bytes_each,
                    std::string_view payload) const {
    if (count >= 0 && payload.size() == static_cast<uint64_t>(count) * bytes_each) {
      return Status::OK();
    }
    return Status::Corruption(what + " from " + address() + ": " + std::to_string(count) + " " +
                              things + " in " + std::to_string(payload.size()) +
                              " payload bytes");
  }

  // Load (`range` false: the ids in `payload`) or LoadRange on the server.
  Status LoadOn(bool range, uint64_t first, uint64_t last, std::string payload) {
    REPLAYDB_RETURN_IF_ERROR(remote_->Closed());
    const std::string table = name();
    REPLAYDB_ASSIGN_OR_RETURN(Message m, remote_->connection->Ask(
                                             fb::Body::LoadTrajectories,
                                             [&](flatbuffers::FlatBufferBuilder& b) {
                                               return fb::CreateLoadTrajectories(
                                                   b, b.CreateString(table), range, first,
                                                   last);
                                             },
                                             std::move(payload)));
    return ExpectBody(m, fb::Body::Done, "loading cold trajectories of table '" + table + "'");
  }

  std::shared_ptr<Remote> remote_;
};

}  // namespace

Status ReadTrajectoryOfWriterKey(Table& table, uint64_t writer_key, int64_t first, int64_t count,
                                 TrajectorySteps* out) {
  auto* remote = dynamic_cast<RemoteTable*>(&table);
  if (remote == nullptr) {
    return Status::InvalidArgument("table '" + table.name() +
                                   "' is not a served one: its trajectories are not found by "
                                   "writer key");
  }
  if (writer_key == 0) {
    return Status::InvalidArgument("table '" + table.name() + "': writer key 0 names no writer");
  }
  return remote->Read(0, writer_key, first, count, out);
}

Status ParseAddress(const std::string& address, std::string* host, uint16_t* port) {
  std::string rest = address;
  const std::string scheme = "ucx://";
  if (rest.rfind(scheme, 0) == 0) rest = rest.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  unsigned value = 0;
  const char* end = rest.data() + rest.size();
  if (colon == std::string::npos || colon == 0 ||
      std::from_chars(rest.data() + colon + 1, end, value).ptr != end || value == 0 ||
      value > 65535) {
    return Status::InvalidArgument("address '" + address +
                                   "' is not ucx://HOST:PORT (a port from 1 to 65535)");
  }
  *host = rest.substr(0, colon);
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

Result<std::unique_ptr<RemoteDB>> RemoteDB::Connect(const std::string& address,
                                                    const ConnectOptions& options) {
  const bool cluster = address.rfind("etcd://", 0) == 0 || address.rfind("file://", 0) == 0;
  std::string host;
  uint16_t port = 0;
  if (!cluster) REPLAYDB_RETURN_IF_ERROR(ParseAddress(address, &host, &port));
  const auto positive = [&](const char* name, milliseconds value, bool zero_too) -> Status {
    if (value.count() > 0 || (zero_too && value.count() == 0)) return Status::OK();
    return Status::InvalidArgument("connecting to " + address + ": ConnectOptions::" + name +
                                   " is " + std::to_string(value.count()) + " ms; it must be " +
                                   (zero_too ? "0 (none) or more" : "more than 0"));
  };
  REPLAYDB_RETURN_IF_ERROR(positive("connect_timeout", options.connect_timeout, false));
  REPLAYDB_RETURN_IF_ERROR(positive("call_timeout", options.call_timeout, false));
  REPLAYDB_RETURN_IF_ERROR(positive("heartbeat", options.heartbeat, true));
  RpcClientOptions o;
  o.client_name = options.client_name;
  o.connect_timeout = options.connect_timeout;
  o.transport.heartbeat = options.heartbeat;
  if (!options.token_file.empty()) {
    REPLAYDB_ASSIGN_OR_RETURN(const std::vector<Token> tokens, ReadTokenFile(options.token_file));
    o.token = tokens.front().secret;
  }
  if (cluster) {
    // A cluster's: its primary now, as its coordinator names it, and the
    // next one after a failover (Connection).
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<coord::Coordinator> coordinator,
                              coord::Coordinator::Open(address));
    REPLAYDB_ASSIGN_OR_RETURN(
        auto primary, Connection::ConnectToPrimary(
                          *coordinator, o, std::chrono::steady_clock::now() + o.connect_timeout,
                          [] { return Status::OK(); }));
    auto connection = std::make_shared<Connection>(
        primary.first, o, options.call_timeout,
        std::shared_ptr<RpcClient>(std::move(primary.second)), std::move(coordinator));
    return std::unique_ptr<RemoteDB>(new RemoteDB(std::move(connection), address, options));
  }
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> client, RpcClient::Connect(host, port, o));
  const std::string canonical = "ucx://" + host + ":" + std::to_string(port);
  auto connection = std::make_shared<Connection>(
      canonical, o, options.call_timeout, std::shared_ptr<RpcClient>(std::move(client)), nullptr);
  return std::unique_ptr<RemoteDB>(new RemoteDB(std::move(connection), canonical, options));
}

// As a local DB's: its tables and writers are closed with it, and calls in
// flight end (the server ends this connection's writers, truncated).
RemoteDB::~RemoteDB() {
  closed_->store(true, std::memory_order_release);
  connection_->Close(Status::Cancelled("database " + address_ + " was closed"));
}

Result<std::vector<std::string>> RemoteDB::ListTablesOrError() const {
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, connection_->Ask(fb::Body::ListTables, [](flatbuffers::FlatBufferBuilder& b) {
        return fb::CreateListTables(b);
      }));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TableList, "listing the tables of " + address_));
  std::vector<std::string> names;
  if (const auto* v = m.header()->body_as_TableList()->names()) {
    for (const auto* n : *v) names.push_back(n->str());
  }
  return names;
}

std::vector<std::string> RemoteDB::ListTables() const {
  Result<std::vector<std::string>> names = ListTablesOrError();
  return names.ok() ? std::move(names).value() : std::vector<std::string>();
}

Result<std::shared_ptr<Table>> RemoteDB::Opened(const Message& m, const std::string& what) {
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::TableOpened, what));
  const auto* spec = m.header()->body_as_TableOpened()->spec();
  std::vector<TableSpec> tables;
  REPLAYDB_RETURN_IF_ERROR(engine::DecodeCatalog(
      spec == nullptr ? std::string_view()
                      : std::string_view(reinterpret_cast<const char*>(spec->data()), spec->size()),
      what, &tables));
  if (tables.size() != 1) return Status::Corruption(what + ": the reply holds no one table spec");
  return std::shared_ptr<Table>(
      new RemoteTable(connection_, address_, std::move(tables[0]), options_, closed_));
}

Result<std::shared_ptr<Table>> RemoteDB::GetTable(std::string_view name) {
  const std::string table(name);
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, connection_->Ask(fb::Body::OpenTable, [&](flatbuffers::FlatBufferBuilder& b) {
        return fb::CreateOpenTable(b, b.CreateString(table));
      }));
  return Opened(m, "opening table '" + table + "' of " + address_);
}

Result<std::shared_ptr<Table>> RemoteDB::CreateTable(const TableSpec& spec) {
  // Checked here too, so that a bad spec's message does not depend on the
  // server being reachable.
  REPLAYDB_RETURN_IF_ERROR(spec.Validate());
  const std::string bytes = engine::EncodeCatalog(std::vector<TableSpec>{spec});
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, connection_->Ask(fb::Body::CreateTable, [&](flatbuffers::FlatBufferBuilder& b) {
        const auto v = b.CreateVector(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        return fb::CreateCreateTable(b, v);
      }));
  return Opened(m, "creating table '" + spec.name + "' on " + address_);
}

Status RemoteDB::DropTable(std::string_view name) {
  const std::string table(name);
  return connection_->AskDone(
      fb::Body::DropTable,
      [&](flatbuffers::FlatBufferBuilder& b) {
        return fb::CreateDropTable(b, b.CreateString(table));
      },
      "dropping table '" + table + "' of " + address_);
}

Status RemoteDB::Checkpoint() {
  return connection_->AskDone(
      fb::Body::Checkpoint,
      [](flatbuffers::FlatBufferBuilder& b) { return fb::CreateCheckpoint(b); },
      "a checkpoint of " + address_);
}

bool RemoteDB::read_only() const {
  return connection_->read_only();
}

Status RemoteDB::NotServed(const std::string& call) const {
  return Status::NotSupported(address_ + ": " + call +
                              " runs where the database is: `replaydb DIR` on the server's "
                              "machine (not served over a remote connection)");
}

Status RemoteDB::ExportTable(std::string_view, const std::string&, const LongOperationOptions&) {
  return NotServed("ExportTable");
}
Result<std::shared_ptr<Table>> RemoteDB::ImportTable(const std::string&, std::string_view,
                                                     std::string_view,
                                                     const LongOperationOptions&) {
  return NotServed("ImportTable");
}
namespace {
std::string Text(const flatbuffers::String* s) {
  return s == nullptr ? std::string() : s->str();
}
}  // namespace

Result<ReplicationInfo> RemoteDB::Replication() const {
  const std::string what = "the replication state of " + address_;
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, connection_->Ask(fb::Body::GetReplication, [](flatbuffers::FlatBufferBuilder& b) {
        return fb::CreateGetReplication(b);
      }));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::ReplicationState, what));
  const fb::ReplicationState* q = m.header()->body_as_ReplicationState();
  ReplicationInfo info;
  info.role = Text(q->role());
  info.primary = Text(q->primary());
  info.segment = q->segment();
  info.offset = q->offset();
  info.primary_segment = q->primary_segment();
  info.primary_offset = q->primary_offset();
  info.connected = q->connected();
  info.last_error = Text(q->last_error());
  if (q->replicas() != nullptr) {
    for (const fb::ReplicaRead* r : *q->replicas()) {
      info.replicas.push_back({Text(r->name()), r->segment(), r->seconds_since_read(),
                               r->applied_segment(), r->applied_offset(), r->lag_seconds(),
                               r->in_sync()});
    }
  }
  info.epoch = q->epoch();
  info.fenced_by = Text(q->fenced_by());
  info.fenced_epoch = q->fenced_epoch();
  return info;
}

Result<uint64_t> RemoteDB::Promote(const PromoteOptions& options) {
  REPLAYDB_ASSIGN_OR_RETURN(
      Message m, connection_->Ask(fb::Body::Promote, [&](flatbuffers::FlatBufferBuilder& b) {
        return fb::CreatePromote(b, options.old_primary_dead);
      }));
  REPLAYDB_RETURN_IF_ERROR(ExpectBody(m, fb::Body::Promoted, "the promotion of " + address_));
  return m.header()->body_as_Promoted()->epoch();
}

Result<WalInfo> RemoteDB::Wal() const {
  return NotServed("Wal");
}
Result<VerifyReport> RemoteDB::Verify(const LongOperationOptions&) {
  return NotServed("Verify");
}
Status RemoteDB::Compact(const LongOperationOptions&) {
  return NotServed("Compact");
}

}  // namespace rdma
}  // namespace replaydb
