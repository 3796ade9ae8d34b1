// A local database served over an RpcServer (rdma/rpc.h): the requests of
// rdma/WIRE.md ("Tables and samples") run against it. The client side is
// rdma/remote_db.h.
//
// Thread safety: the handler runs on the server's executor threads at once;
// DB and Table are thread-safe.
#ifndef REPLAYDB_RDMA_DB_SERVICE_H_
#define REPLAYDB_RDMA_DB_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdma/rpc.h"
#include "replaydb/db.h"
#include "replaydb/table.h"
#include "wal/format.h"

namespace replaydb {
class Server;
}  // namespace replaydb

namespace replaydb::engine {
class DBImpl;
}  // namespace replaydb::engine

namespace replaydb::rdma {

// The longest a served call waits for the rate limiter (or hot-tier blocks)
// before it returns DeadlineExceeded; a client whose own timeout is longer
// sends the call again (remote_db.cc). Bounded waits keep the executor's
// threads turning over: a learner's sample queued behind appends that wait
// for it still runs, and a stopping server joins its threads promptly.
inline constexpr std::chrono::milliseconds kMaxServedWait{200};

// Serves `db` (which must outlive it) to an RpcServer: Handle is its
// handler, Disconnected its on_disconnect. A request of a kind it does not
// serve is NotSupported, naming it.
// Sample batches for replies, used again once sent: a sample's columns (tens
// of MiB) then land in memory already faulted in, not in fresh pages each
// time. Keeps at most kKept; thread-safe.
class BatchPool {
 public:
  static constexpr size_t kKept = 8;
  // A batch that goes back to the pool when the last hold on it goes
  // (the pool may be gone by then: it is then freed).
  std::shared_ptr<SampleBatch> Take();

 private:
  struct Shared {
    std::mutex mu;
    std::vector<std::unique_ptr<SampleBatch>> free;
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

class Replica;
class SharedSlabs;
class Transport;

// In-place samples (WIRE.md, "A sample in place"): a served table whose hot
// tier lies in `slabs` (memory of the server's `transport`) answers a
// Sample asking for it with where its windows lie, under a lease: their
// blocks stay as they are until the client releases the lease or `lease`
// passes (a client that died never pins them for longer).
struct InPlaceServing {
  Transport* transport = nullptr;
  std::shared_ptr<SharedSlabs> slabs;
  std::chrono::milliseconds lease{5000};
  // A line when a connection is granted its slab keys or refused them. May
  // be empty.
  std::function<void(const std::string& line)> log;
};

class DbService {
 public:
  // `db` may be null until SetDb (a server that listens before its
  // database is open): requests are answered Unavailable until then.
  explicit DbService(DB* db, InPlaceServing in_place = {});
  ~DbService();
  // Serves `db` from now on (and in-place samples as `in_place` says).
  // REQUIRES: constructed with no database; called once.
  void SetDb(DB* db, InPlaceServing in_place = {});
  Result<Reply> Handle(Request& request);
  // Handle on the transport's worker (RpcServerOptions::try_inline) for
  // the calls that never wait and stay small: listing and opening tables,
  // Info, lookups and priority updates of up to kInlineKeys keys, samples
  // of up to kInlineBytes that the rate limiter lets through at once, and
  // a trajectory writer's appends (up to kInlineAppendBytes) and ends that
  // take no waiting (engine::ScopedNoWait; not a vector writer's, nor a
  // sync writer's where the log syncs), and a replica's FetchLog where the
  // log holds at most kInlineBytes past its place (one that finds nothing
  // new has its place noted here, then waits on the executor). nullopt for
  // the rest (the executor's).
  std::optional<Result<Reply>> TryInline(Request& request);
  // The server is a read replica of `primary` (its address, for
  // messages), following it with `follower` (which must outlive the
  // service's requests): requests that change data are refused, and
  // GetReplication tells the follower's state. REQUIRES: called before
  // SetDb, once.
  void SetReplicaOf(std::string primary, Replica* follower) {
    std::lock_guard<std::mutex> lock(role_mu_);
    replica_of_ = std::move(primary);
    follower_ = follower;
    is_replica_.store(true, std::memory_order_release);
  }
  // A read replica made the primary of `epoch` (a coordinator's election:
  // docs/replication.md, "Automatic failover"): its follower stops, the
  // database becomes the primary (engine::DBImpl::BecomePrimary), writes
  // are taken. Where that epoch began in the log. FailedPrecondition on a
  // primary.
  Result<wal::LogPosition> TakeOver(uint64_t epoch);
  // Whether it serves as a read replica now.
  bool is_replica() const { return is_replica_.load(std::memory_order_acquire); }
  // Self-fencing under a coordinator's lease: from `until` on, requests
  // that change data (and a writer's appends and ends) are refused with
  // Unavailable saying that the session lapsed, until a later SetLease.
  // `ttl` and `margin` are for the message. Never called: no refusal;
  // `until` the clock's zero: refused as not (yet) elected.
  void SetLease(std::chrono::steady_clock::time_point until, std::chrono::milliseconds ttl,
                std::chrono::milliseconds margin);
  // This server's address (a promoted replica names it to the primary it
  // fences). REQUIRES: called before SetDb.
  void SetAddress(std::string address) { address_ = std::move(address); }
  static constexpr size_t kInlineKeys = 4096;
  static constexpr uint64_t kInlineBytes = 256 << 10;
  // A trajectory writer's appends of up to this many bytes too (its rows
  // are copied once, into the hot tier).
  static constexpr uint64_t kInlineAppendBytes = 4 << 20;
  // Where a trajectory writer's append (AppendStep giving its record's
  // data_offset; any other request: nothing) is received, for
  // RpcServerOptions::place_request: the
  // record's rows straight into the hot tier (TrajectoryWriterImpl::Place),
  // the rest of the record into a buffer of its own; nothing where they
  // cannot be placed now (the append then comes whole, and is copied in).
  // Its handling publishes the rows, or gives them up.
  PayloadPlaces PlaceAppend(ConnectionId from, const wire::fb::Header& h, size_t length);
  // The connection's writers go: their open trajectories end truncated.
  void Disconnected(ConnectionId connection);
  // Writers open now, over every connection (for tests and the log).
  size_t open_writers() const;
  // Appends whose rows were received straight into the hot tier
  // (PlaceAppend) and published, so far.
  uint64_t placed_appends() const { return placed_appends_.load(std::memory_order_relaxed); }
  // Leases of in-place samples held now.
  size_t open_leases() const;

 private:
  struct Writer;
  struct PlacedAppend;
  struct Lease;
  Result<Reply> HandleWriter(Request& request);
  // An append's or end's own work (HandleWriter's, once its writer is found).
  Result<Reply> HandleWriterCall(Request& request, const std::shared_ptr<Writer>& writer,
                                 uint64_t id);
  // `reply` as it is, or deferred (Request::Defer) until the writer's
  // replicas have what it acknowledges (acks replicated(k)) and, when a
  // replica lags more than max_lag, it caught up: the handler's thread
  // goes on meanwhile.
  Result<Reply> AckWhenReplicated(Request& request, const std::shared_ptr<Writer>& writer,
                                  engine::DBImpl& db, Reply reply);
  Result<Reply> HandleSlabKeys(Request& request);
  // A replica's read of the log (docs/replication.md).
  // The records there now; where there are none, the reply is deferred
  // (Request::Defer) until records come or its wait_ms (at most
  // kMaxServedWait) passes: no thread waits for them.
  Result<Reply> HandleFetchLog(DB& db, Request& request);
  // A replica's read whose reply waits for records (HandleFetchLog).
  struct PendingFetch {
    Request::Responder respond;
    uint64_t request_id = 0;
    std::string replica;
    wal::LogPosition from;
    uint64_t saved_segment = 0;
    size_t max_bytes = 0;
    std::chrono::steady_clock::time_point until;
  };
  // Answers the pending reads that records came for, or whose wait passed
  // (from whichever thread appended records, or the shipper's).
  void PumpFetches(engine::DBImpl& db);
  // The shipper thread (started with the first pending read): pumps when
  // the log grows (local writes too) and when waits pass.
  void ShipLoop(engine::DBImpl* db);
  Result<Reply> HandleGetReplication(DB& db, Request& request);
  // Manual failover (docs/replication.md, "Failover"): a replica's
  // promotion, and a primary's fence.
  Result<Reply> HandlePromote(Request& request);
  Result<Reply> HandleFence(Request& request);
  // The primary this replica follows and its follower; FailedPrecondition
  // ("this server is a primary (epoch N), not a read replica") on a primary.
  Status ReplicaRole(const engine::DBImpl& impl, std::string* primary, Replica** follower) const;
  // TakeOver's work, for the replica of `primary` that `follower` follows
  // (ReplicaRole). REQUIRES: promote_mu_.
  Result<wal::LogPosition> TakeOverLocked(engine::DBImpl& impl, uint64_t epoch,
                                          const std::string& primary, Replica* follower);
  // OK, or Unavailable once the lease SetLease set lapsed.
  Status LeaseStatus() const;
  static constexpr int64_t kNoLease = INT64_MIN;
  std::atomic<int64_t> lease_until_ns_{kNoLease};  // steady clock
  std::atomic<int64_t> lease_ttl_ms_{0};
  std::atomic<int64_t> lease_margin_ms_{0};
  // A new replica's copy of the database (docs/replication.md,
  // "Snapshots"): made by GetSnapshot under DIR/snapshots/ID, read by
  // ReadSnapshot, removed once its replica reads the log (FetchLog), asks
  // for another, or the service goes.
  struct Snapshot {
    std::string replica;
    std::string dir;
    uint64_t segment = 0;                   // the log's, held for the replica
    std::map<std::string, uint64_t> files;  // relative path -> size
  };
  static constexpr size_t kMaxSnapshots = 4;
  Result<Reply> HandleGetSnapshot(DB& db, Request& request);
  Result<Reply> HandleReadSnapshot(DB& db, Request& request);
  // Removes the snapshots made for `replica` (every one when empty).
  void DropSnapshots(const std::string& replica);
  // An in-place sample's reply, or nullopt where the request is not to be
  // answered in place (the table's blocks are not in shared slabs, the
  // connection never asked for their keys).
  std::optional<Result<Reply>> SampleInPlace(Request& request);
  void ReleaseLeases(ConnectionId connection, const flatbuffers::Vector<uint64_t>* ids);
  // Leases whose time has passed go.
  void ExpireLeases();
  // Takes the leases `which` picks out of leases_. REQUIRES: leases_mu_.
  std::vector<std::unique_ptr<Lease>> TakeLeasesLocked(
      const std::function<bool(const Lease&)>& which);
  std::mutex fetch_mu_;
  std::condition_variable fetch_cv_;   // a read became pending, or stopping
  std::vector<PendingFetch> fetches_;  // guarded by fetch_mu_
  std::atomic<size_t> pending_fetches_{0};
  bool stop_shipping_ = false;  // guarded by fetch_mu_
  std::thread shipper_;
  mutable std::mutex snapshots_mu_;
  uint64_t next_snapshot_ = 1;              // guarded by snapshots_mu_
  std::map<uint64_t, Snapshot> snapshots_;  // guarded by snapshots_mu_
  std::atomic<size_t> snapshot_count_{0};
  // db_ as the engine's DBImpl (null for another DB), set with it: looked
  // up once, not on each request.
  std::atomic<engine::DBImpl*> impl_{nullptr};
  // The served database as the engine's, for the requests only it serves
  // (snapshots, promotions, fences); NotSupported saying what `what` asks.
  Result<engine::DBImpl*> Engine(std::string_view what) const;
  std::atomic<DB*> db_{nullptr};
  // A read replica's primary and follower, until a promotion (Promote)
  // clears them; is_replica_ says whether replica_of_ is set.
  mutable std::mutex role_mu_;
  std::string replica_of_;       // guarded by role_mu_
  Replica* follower_ = nullptr;  // guarded by role_mu_
  std::atomic<bool> is_replica_{false};
  std::mutex promote_mu_;  // one promotion at a time
  std::string address_;    // set before db_ (read after it)
  std::atomic<uint64_t> placed_appends_{0};
  InPlaceServing in_place_;  // set before db_ (read after it)
  mutable std::mutex leases_mu_;
  uint64_t next_lease_ = 1;
  std::map<uint64_t, std::unique_ptr<Lease>> leases_;
  std::atomic<size_t> lease_count_{0};
  // Connections that asked for slab keys and whose reads are one-sided.
  std::set<ConnectionId> readers_;
  std::unique_ptr<BatchPool> batches_ = std::make_unique<BatchPool>();
  mutable std::mutex mu_;
  uint64_t next_writer_ = 1;
  std::map<std::pair<ConnectionId, uint64_t>, std::shared_ptr<Writer>> writers_;
  // Connections that ended: a NewWriter of theirs still running when the
  // end was handled must not leave a writer behind.
  std::set<ConnectionId> gone_;
};

// What a server that Server::Open made holds: its service, its database
// (the engine's) and its follower (null for a primary). For a cluster node
// (rdma/cluster.cc); valid while the server is.
struct ServedParts {
  DbService* service = nullptr;
  engine::DBImpl* db = nullptr;
  Replica* follower = nullptr;
};
ServedParts PartsOf(Server& server);

// An RpcServer's options with `service` as its handler and on_disconnect.
void ServeWith(DbService* service, RpcServerOptions* options, RequestHandler* handler);

// A RateLimiterSpec and a TableInfo on the wire (fb::RateLimiter, fb::Info).
flatbuffers::Offset<wire::fb::RateLimiter> EncodeLimiter(flatbuffers::FlatBufferBuilder& b,
                                                         const RateLimiterSpec& spec);
RateLimiterSpec DecodeLimiter(const wire::fb::RateLimiter& limiter);
TableInfo DecodeInfo(const wire::fb::Info& info, const std::string& name);

// The rows of a TrajectoryList's payload (WIRE.md, "Trajectory rows"): id,
// length and live items (8 bytes each), ended, end reason and tier (1 byte
// each), 5 zero bytes. TakeTrajectoryRow: false when `in` is too short or a
// field is out of range.
inline constexpr size_t kTrajectoryRowBytes = 32;
void PutTrajectoryRow(std::string* out, const TrajectoryInfo& t);
bool TakeTrajectoryRow(std::string_view* in, TrajectoryInfo* t);

// A segment of an in-place sample (WIRE.md, "A sample in place"): one run
// of `count` steps of window `item`, going to its step `out_step`, lying
// from step `first_step` of the block at `block_offset` of slab `slab`.
// 32 bytes: item, out_step, count, slab (u32 each), block_offset,
// first_step (u64 each).
struct SegmentRow {
  uint32_t item = 0;
  uint32_t out_step = 0;
  uint32_t count = 0;
  uint32_t slab = 0;
  uint64_t block_offset = 0;
  uint64_t first_step = 0;
};
inline constexpr size_t kSegmentRowBytes = 32;
void PutSegmentRow(std::string* out, const SegmentRow& row);
// False when `in` is too short.
bool TakeSegmentRow(std::string_view* in, SegmentRow* row);

// A sample's payload (WIRE.md, "A sample's payload"): keys, probabilities,
// priorities, weights (when present), times sampled, the mask, insertion
// orders (when present: batch.insertion_order not empty), then each
// column's bytes in schema order (none when the sample did not gather).
std::string EncodeSamplePayload(const SampleBatch& batch);
// Its first part, the items' fields (all but the columns), and its size.
std::string EncodeSampleItems(const SampleBatch& batch);
size_t SampleItemsBytes(int64_t batch_size, int64_t sequence_length, bool has_weights,
                        bool has_insertion_order);
// `columns` shaped as a sample's of `batch_size` windows of
// `sequence_length` steps of a table of `spec`: one per column,
// [batch_size, sequence_length, column shape...], each keeping its buffer
// where that is the right size already.
void ShapeSampleColumns(const TableSpec& spec, int64_t batch_size, int64_t sequence_length,
                        std::vector<Tensor>* columns);
// Reads the items' fields from the front of `in` into `b` (its batch_size
// and sequence_length too); false when `in` is too short.
bool DecodeSampleItems(std::string_view* in, int64_t batch_size, int64_t sequence_length,
                       bool has_weights, bool has_insertion_order, SampleBatch* b);
// The batch that `payload` holds for a table of `spec`, `batch_size` items
// of windows of `sequence_length`; Corruption naming `from` when its size
// does not add up.
Status DecodeSamplePayload(std::string_view payload, const TableSpec& spec, int64_t batch_size,
                           int64_t sequence_length, bool has_weights, bool has_columns,
                           bool has_insertion_order, const std::string& from, SampleBatch* out);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_DB_SERVICE_H_
