// replaydb::ClusterNode (include/replaydb/cluster.h): a served database
// whose role a coordinator (rdma/coord/coordinator.h) decides. One thread
// renews the session, publishes the node's state, reads who the primary is
// and changes the node's role to match (docs/replication.md, "Automatic
// failover").
#include "replaydb/cluster.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "engine/db/db_impl.h"
#include "rdma/coord/coordinator.h"
#include "rdma/db_service.h"
#include "rdma/remote_db.h"
#include "rdma/replica.h"
#include "rdma/salvage.h"

namespace replaydb {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using rdma::coord::Coordinator;
using rdma::coord::Handover;
using rdma::coord::LeaderState;
using rdma::coord::NodeState;

// What a directory holds, as far as a node's role goes.
enum class DirKind { kNew, kPrimary, kReplica, kFenced };

DirKind KindOf(const std::string& dir, std::string* primary) {
  Env* env = Env::Default();
  if (!env->FileExists(dir + "/CATALOG")) return DirKind::kNew;
  if (env->FileExists(dir + "/" + engine::DBImpl::kFencedFile)) return DirKind::kFenced;
  wal::LogPosition at;
  if (env->FileExists(dir + "/" + engine::DBImpl::kReplicaFile) &&
      engine::DBImpl::ReadReplicaFile(env, dir, primary, &at).ok()) {
    return DirKind::kReplica;
  }
  return DirKind::kPrimary;
}

class ClusterNodeImpl final : public ClusterNode {
 public:
  ClusterNodeImpl(std::string dir, DBOptions db_options, ServerOptions server,
                  ClusterOptions options, std::unique_ptr<Coordinator> coordinator)
      : dir_(std::move(dir)),
        db_options_(std::move(db_options)),
        server_options_(std::move(server)),
        options_(std::move(options)),
        coordinator_(std::move(coordinator)),
        address_(server_options_.listen),
        static_(options_.coordinator.rfind("file://", 0) == 0) {
    state_.name = options_.name;
    state_.role = "starting";
    state_.address = address_;
  }

  ~ClusterNodeImpl() override { (void)Close(); }

  void Run() {
    thread_ = std::thread([this] { Loop(); });
  }

  ClusterNodeState state() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

  Status Close() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    StopSalvage();
    // A primary stops acknowledging before its place goes to another, and
    // lets its in-sync replicas apply what it has (so that the one elected
    // next holds every acknowledged write).
    if (server_ != nullptr && role_ == Role::kPrimary) {
      const rdma::ServedParts parts = rdma::PartsOf(*server_);
      parts.service->SetLease(Clock::now(), options_.ttl, options_.margin);
      WaitForReplicas(*parts.db, std::chrono::seconds(2));
    }
    const Status resigned = coordinator_->Resign();
    if (!resigned.ok()) Log("could not resign from the coordinator: " + resigned.ToString());
    Status closed = Status::OK();
    if (server_ != nullptr) closed = server_->Close();
    server_.reset();
    return closed;
  }

  // Waits for a role; DeadlineExceeded after `limit`.
  Status WaitForRole(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, limit, [&] { return state_.role != "starting" || !failed_.ok(); })) {
      return failed_;
    }
    return Status::DeadlineExceeded("node " + state_.name + " has no role after " +
                                    std::to_string(limit.count()) + " ms (coordinator " +
                                    coordinator_->address() + "): " + last_wait_);
  }

 private:
  enum class Role { kStarting, kPrimary, kReplica };

  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }
  // A line said once until another replaces it (the loop's waits).
  void LogOnce(const std::string& line) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_wait_ = line;
    }
    if (line == last_logged_) return;
    last_logged_ = line;
    Log(line);
  }

  // Until every replica in sync with this primary applied its whole log,
  // or `limit` passed.
  static void WaitForReplicas(DB& db, std::chrono::milliseconds limit) {
    for (const auto until = Clock::now() + limit; Clock::now() < until;
         std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
      const Result<ReplicationInfo> info = db.Replication();
      if (!info.ok()) return;
      bool behind = false;
      for (const ReplicaProgress& r : info->replicas) {
        behind |= r.in_sync && wal::LogPosition{r.applied_segment, r.applied_offset} <
                                   wal::LogPosition{info->segment, info->offset};
      }
      if (!behind) return;
    }
  }

  void Loop() {
    while (true) {
      Tick();
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, options_.poll, [&] { return stop_; })) return;
    }
  }

  // This node as it publishes itself.
  NodeState Me() {
    NodeState me;
    me.name = options_.name;
    me.address = address_;
    me.role = role_ == Role::kPrimary   ? "primary"
              : role_ == Role::kReplica ? "replica"
                                        : "starting";
    if (server_ != nullptr) {
      const rdma::ServedParts parts = rdma::PartsOf(*server_);
      me.epoch = parts.db->epoch();
      if (role_ == Role::kReplica && parts.follower != nullptr) {
        const rdma::ReplicaState r = parts.follower->state();
        me.following = following_;
        me.position = r.position;
        me.eligible = r.last_read != Clock::time_point{} &&
                      r.last_read - r.caught_up_at <= std::chrono::seconds(1) && !r.needs_snapshot;
      }
    }
    if (role_ == Role::kPrimary) me.eligible = true;
    if (role_ == Role::kStarting) {
      std::string primary;
      const DirKind kind = KindOf(dir_, &primary);
      me.eligible = kind == DirKind::kNew || kind == DirKind::kPrimary;
      std::vector<EpochStart> epochs;
      if (kind != DirKind::kNew && engine::DBImpl::ReadEpochs(Env::Default(), dir_, &epochs).ok() &&
          !epochs.empty()) {
        me.epoch = epochs.back().epoch;
      }
    }
    return me;
  }

  void Tick() {
    const auto now = Clock::now();
    if (now >= next_renewal_) {
      Renew();
      next_renewal_ = now + options_.ttl / 4;
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) return;
    }
    Result<std::optional<LeaderState>> leader = coordinator_->Leader();
    if (!leader.ok()) {
      LogOnce("the coordinator " + coordinator_->address() +
              " cannot say who the primary is: " + leader.status().ToString());
      return;
    }
    Status s = Status::OK();
    if (leader->has_value() && (*leader)->this_session) {
      s = BePrimary(**leader);
    } else if (leader->has_value() && (*leader)->name == options_.name) {
      LogOnce(
          "this node's earlier session still holds the primary's place; waiting for it to "
          "expire");
    } else if (leader->has_value()) {
      s = Follow(**leader);
    } else {
      s = MaybeCampaign();
    }
    if (!s.ok()) LogOnce(s.ToString());
    Publish();
  }

  // Renews the session (or starts one); the primary's lease follows.
  void Renew() {
    if (session_) {
      const auto sent = Clock::now();
      const Status s = coordinator_->KeepAlive();
      if (s.ok()) {
        renewed_at_ = sent;
      } else if (s.code() == Status::Code::kFailedPrecondition) {
        session_ = false;
        holds_place_ = false;
        Log("session with the coordinator lost: " + s.ToString());
      } else {
        LogOnce("cannot renew the session with the coordinator: " + s.ToString());
      }
    }
    if (!session_) {
      const auto sent = Clock::now();
      const Status s = coordinator_->Publish(Me());
      if (s.ok()) {
        session_ = true;
        renewed_at_ = sent;
      } else if (s.code() == Status::Code::kNotFound ||
                 s.code() == Status::Code::kInvalidArgument) {
        // (A static file that does not name this node as it is: no retry
        // mends that.)
        std::lock_guard<std::mutex> lock(mu_);
        if (failed_.ok()) failed_ = s;
        stop_ = true;
        cv_.notify_all();
      } else {
        LogOnce("cannot start a session with the coordinator: " + s.ToString());
      }
    }
    if (server_ != nullptr && role_ == Role::kPrimary && holds_place_ && !static_) {
      rdma::PartsOf(*server_).service->SetLease(renewed_at_ + options_.ttl - options_.margin,
                                                options_.ttl, options_.margin);
    }
  }

  void Publish() {
    if (!session_) return;
    const NodeState me = Me();
    if (me.role == published_.role && me.epoch == published_.epoch &&
        me.position == published_.position && me.eligible == published_.eligible &&
        me.following == published_.following) {
      return;
    }
    if (coordinator_->Publish(me).ok()) published_ = me;
  }

  void SetState(Role role, uint64_t epoch, const std::string& primary) {
    role_ = role;
    std::lock_guard<std::mutex> lock(mu_);
    state_.role = role == Role::kPrimary   ? "primary"
                  : role == Role::kReplica ? "replica"
                                           : "starting";
    state_.epoch = epoch;
    state_.primary = primary;
    state_.address = address_;
    cv_.notify_all();
  }

  // Opens the server: the primary (replica_of empty) or a replica.
  Status OpenServer(const std::string& replica_of) {
    ServerOptions o = server_options_;
    o.replica_of = replica_of;
    REPLAYDB_ASSIGN_OR_RETURN(server_, Server::Open(dir_, db_options_, o));
    // Writes wait for the coordinator's word (BePrimary's lease).
    if (!static_) {
      rdma::PartsOf(*server_).service->SetLease(Clock::time_point{}, options_.ttl, options_.margin);
    }
    return Status::OK();
  }

  // The directory moved aside (DIR.previous, replacing an older one), and
  // the node a new replica of `leader`, from a snapshot.
  Status Resync(const LeaderState& leader, const std::string& why) {
    Log("resyncing from the primary " + leader.name + " (" + leader.address + ", epoch " +
        std::to_string(leader.epoch) + "): " + why);
    if (server_ != nullptr) {
      const Status closed = server_->Close();
      server_.reset();
      if (!closed.ok()) Log("closing before the resync: " + closed.ToString());
    }
    SetState(Role::kStarting, 0, leader.address);
    // A primary's directory may hold writes its successor never applied:
    // its log's records from where the successor took over.
    const std::optional<wal::LogPosition> salvage_from = SalvageFrom();
    StopSalvage();
    std::error_code ec;
    const std::string aside = Aside();
    rdma::SalvageState pending;
    if (rdma::ReadSalvageFile(Env::Default(), aside, &pending).ok() && !pending.finished) {
      if (!salvage_from) {
        // (The salvage goes on from the directory aside; this one, a
        // replica's, holds nothing that the primary lacks.)
        fs::remove_all(dir_, ec);
        if (ec) return Status::IOError("resync: removing " + dir_ + ": " + ec.message());
      } else {
        Log("resync: the unfinished salvage of " + aside + " is dropped for " + dir_ + "'s");
      }
    }
    fs::remove_all(aside, ec);
    if (fs::exists(dir_)) {
      fs::rename(dir_, aside, ec);
      if (ec) {
        return Status::IOError("resync: moving " + dir_ + " aside to " + aside + ": " +
                               ec.message());
      }
      Log("moved " + dir_ + " aside to " + aside);
    }
    REPLAYDB_RETURN_IF_ERROR(OpenServer(leader.address));
    following_ = leader.address;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++state_.resyncs;
    }
    SetState(Role::kReplica, rdma::PartsOf(*server_).db->epoch(), leader.address);
    Log("a replica of " + leader.name + " (" + leader.address + ")");
    if (salvage_from) {
      const Status marked = rdma::WriteSalvageFile(Env::Default(), aside,
                                                   rdma::SalvageState{*salvage_from, 0, false});
      if (!marked.ok())
        Log("salvage: " + marked.ToString() + "; nothing of " + aside + " is salvaged");
    }
    StartSalvage();
    return Status::OK();
  }

  std::string Aside() const { return dir_ + ".previous"; }

  // Where this directory's log was taken over by the primary after it
  // (Coordinator::HandedOver), when it is a primary's; nullopt otherwise.
  std::optional<wal::LogPosition> SalvageFrom() {
    std::string primary;
    const DirKind kind = KindOf(dir_, &primary);
    std::vector<EpochStart> epochs;
    if ((kind != DirKind::kPrimary && kind != DirKind::kFenced) ||
        !engine::DBImpl::ReadEpochs(Env::Default(), dir_, &epochs).ok() || epochs.empty()) {
      return std::nullopt;
    }
    Result<std::optional<wal::LogPosition>> at = coordinator_->HandedOver(epochs.back().epoch);
    if (!at.ok()) {
      Log("salvage: cannot ask the coordinator where epoch " + std::to_string(epochs.back().epoch) +
          " was taken over (" + at.status().ToString() + "): nothing of " + dir_ + " is salvaged");
      return std::nullopt;
    }
    if (*at) {
      Log("salvage: epoch " + std::to_string(epochs.back().epoch) +
          ", this directory's, was taken over at segment " + std::to_string((*at)->segment) +
          ", offset " + std::to_string((*at)->offset) + " of its log");
    }
    return *at;
  }

  // Starts copying what DIR.previous/SALVAGE says is left, in a thread of
  // its own, unless it runs or nothing is left.
  void StartSalvage() {
    if (salvage_thread_.joinable()) return;
    rdma::SalvageState state;
    if (!rdma::ReadSalvageFile(Env::Default(), Aside(), &state).ok() || state.finished) return;
    salvage_stop_ = false;
    salvage_thread_ = std::thread([this] {
      ConnectOptions o;
      o.client_name = "salvage of " + Aside();
      o.token_file = server_options_.token_file;  // the cluster's nodes require the same
      o.connect_timeout = std::chrono::milliseconds(2000);
      o.call_timeout = std::chrono::milliseconds(30000);
      for (int attempt = 0; attempt < 1000000 && !salvage_stop_; ++attempt) {
        const Result<rdma::SalvageReport> r =
            rdma::Salvage(Aside(), db_options_, options_.coordinator, o, salvage_stop_,
                          [this](const std::string& line) { Log(line); });
        if (r.ok() || salvage_stop_) return;
        Log("salvage: " + r.status().ToString() + "; trying again in a second");
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::seconds(1), [&] { return salvage_stop_.load(); });
      }
    });
  }
  void StopSalvage() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      salvage_stop_ = true;
    }
    cv_.notify_all();
    if (salvage_thread_.joinable()) salvage_thread_.join();
  }

  Status BePrimary(const LeaderState& won) {
    const bool was = holds_place_;
    holds_place_ = true;
    if (role_ == Role::kStarting) {
      REPLAYDB_RETURN_IF_ERROR(OpenServer(""));
      role_ = Role::kPrimary;
      StartSalvage();
    } else if (role_ == Role::kReplica) {
      rdma::ServedParts parts = rdma::PartsOf(*server_);
      // (A static file's node was promoted by hand already: DB::Promote.)
      if (parts.service->is_replica()) {
        const uint64_t followed = parts.db->epoch();
        REPLAYDB_RETURN_IF_ERROR(parts.service->TakeOver(won.epoch).status());
        // Recorded with the epoch: the old primary's records after it are
        // on no later primary (its salvage copies them when it is back).
        if (followed > 0 && parts.follower != nullptr) {
          handover_ = Handover{followed, parts.follower->state().position};
        }
      }
      following_.clear();
      role_ = Role::kPrimary;
    }
    engine::DBImpl* db = rdma::PartsOf(*server_).db;
    if (won.epoch > db->epoch()) REPLAYDB_RETURN_IF_ERROR(db->BeginEpoch(won.epoch));
    if (!was) {
      // Recorded before the first write is taken (until the lease below,
      // writes are refused): a node behind it no longer stands.
      const Status marked = coordinator_->MarkEpoch(won.epoch, handover_);
      if (!marked.ok()) {
        holds_place_ = false;
        return marked.WithContext("recording epoch " + std::to_string(won.epoch));
      }
      handover_.reset();
    }
    if (!static_) {
      rdma::PartsOf(*server_).service->SetLease(renewed_at_ + options_.ttl - options_.margin,
                                                options_.ttl, options_.margin);
    }
    if (!was) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++state_.elections_won;
      }
      Log("the primary of epoch " + std::to_string(db->epoch()) + " (" + address_ + ")");
    }
    SetState(Role::kPrimary, db->epoch(), address_);
    return Status::OK();
  }

  Status Follow(const LeaderState& leader) {
    holds_place_ = false;
    handover_.reset();
    if (role_ == Role::kPrimary) {
      // Deposed: another node won while this one's session lapsed.
      rdma::ServedParts parts = rdma::PartsOf(*server_);
      parts.service->SetLease(Clock::now(), options_.ttl, options_.margin);
    }
    if (role_ != Role::kReplica) {
      // A primary's directory may hold writes its successor lacks; where
      // the successor took over is recorded as it marks its epoch (before
      // its first write), so the resync that salvages them waits for that.
      std::string primary;
      const DirKind kind = KindOf(dir_, &primary);
      if (kind == DirKind::kPrimary || kind == DirKind::kFenced) {
        REPLAYDB_ASSIGN_OR_RETURN(const uint64_t last, coordinator_->LastEpoch());
        if (last < leader.epoch) {
          LogOnce("waiting for the primary " + leader.name + " to take writes in epoch " +
                  std::to_string(leader.epoch) + " before rejoining it");
          return Status::OK();
        }
      }
    }
    if (role_ == Role::kPrimary) {
      rdma::ServedParts parts = rdma::PartsOf(*server_);
      if (leader.epoch > parts.db->epoch()) {
        Result<wal::LogPosition> fenced = parts.db->Fence(leader.epoch, leader.address);
        Log(fenced.ok() ? "deposed: fenced for epoch " + std::to_string(leader.epoch) +
                              ", whose primary is " + leader.name + " (" + leader.address + ")"
                        : "fencing this deposed primary: " + fenced.status().ToString());
      }
      return Resync(leader, "this node was the primary of epoch " +
                                std::to_string(parts.db->epoch()) + " and was deposed");
    }
    if (role_ == Role::kReplica) {
      if (following_ == leader.address && server_->NeedsSnapshot()) {
        // (Opened again, the server copies a new snapshot.)
        Log("the primary's log no longer holds this replica's place: opening again to copy a "
            "new snapshot");
        const Status closed = server_->Close();
        server_.reset();
        if (!closed.ok()) Log("closing before the new snapshot: " + closed.ToString());
        SetState(Role::kStarting, 0, leader.address);
        REPLAYDB_RETURN_IF_ERROR(OpenServer(leader.address));
        Log("a replica of " + leader.name + " (" + leader.address + ") again");
      }
      if (following_ == leader.address) {
        SetState(Role::kReplica, rdma::PartsOf(*server_).db->epoch(), leader.address);
        return Status::OK();
      }
      return Resync(leader, "its primary was " + following_);
    }
    std::string primary;
    const DirKind kind = KindOf(dir_, &primary);
    if (kind == DirKind::kNew || (kind == DirKind::kReplica && primary == leader.address)) {
      REPLAYDB_RETURN_IF_ERROR(OpenServer(leader.address));
      following_ = leader.address;
      SetState(Role::kReplica, rdma::PartsOf(*server_).db->epoch(), leader.address);
      Log("a replica of " + leader.name + " (" + leader.address + ")");
      StartSalvage();
      return Status::OK();
    }
    return Resync(leader, kind == DirKind::kReplica  ? "DIR was a replica of " + primary
                          : kind == DirKind::kFenced ? "DIR was a fenced primary"
                                                     : "DIR was a primary");
  }

  Status MaybeCampaign() {
    const NodeState me = Me();
    if (!session_) return Status::OK();
    if (!me.eligible) {
      LogOnce(role_ == Role::kReplica
                  ? "no primary is elected; this replica was not in sync with its primary when "
                    "it last heard from it, so it does not stand (waiting for one that was)"
                  : "no primary is elected; " + dir_ +
                        " is a replica's or a fenced primary's, so this node does not stand "
                        "(promote one by hand: replaydb promote)");
      return Status::OK();
    }
    // A node behind the last epoch that took writes does not stand: it may
    // lack them (a primary whose session lapsed while another was elected
    // and took writes, and that one went too).
    REPLAYDB_ASSIGN_OR_RETURN(const uint64_t last, coordinator_->LastEpoch());
    if (me.epoch < last) {
      LogOnce("no primary is elected; the last primary took writes in epoch " +
              std::to_string(last) + ", past this node's " + std::to_string(me.epoch) +
              ", so this node does not stand (a node of that epoch must come back, or promote "
              "one by hand)");
      return Status::OK();
    }
    REPLAYDB_ASSIGN_OR_RETURN(const std::vector<NodeState> nodes, coordinator_->Nodes());
    // Of the replicas in sync with the same primary, the one that applied
    // most of its log stands (ties: the first name), once the old primary
    // answers no more reads: every replica's place is then final, and
    // published (a primary that resigned, rather than died, lets its
    // in-sync replicas catch up first, then closes).
    if (role_ == Role::kReplica) {
      const rdma::Replica* follower = rdma::PartsOf(*server_).follower;
      if (follower != nullptr && Clock::now() - follower->state().last_read < 2 * options_.poll) {
        LogOnce("no primary is elected; waiting for the old primary's last records");
        return Status::OK();
      }
      for (const NodeState& n : nodes) {
        if (n.name == me.name || !n.eligible || n.role != "replica" ||
            n.following != me.following) {
          continue;
        }
        if (n.position > me.position || (n.position == me.position && n.name < me.name)) {
          LogOnce("no primary is elected; " + n.name + " applied as much or more of " +
                  me.following + "'s log, and stands");
          return Status::OK();
        }
      }
    }
    REPLAYDB_ASSIGN_OR_RETURN(const LeaderState leader, coordinator_->Campaign(me));
    if (leader.this_session) {
      Log("won the election (epoch " + std::to_string(leader.epoch) + ")");
      return BePrimary(leader);
    }
    return Follow(leader);
  }

  const std::string dir_;
  const DBOptions db_options_;
  const ServerOptions server_options_;
  const ClusterOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
  // The loop's own (and Close's, after the loop ended).
  std::unique_ptr<Server> server_;
  Role role_ = Role::kStarting;
  const std::string address_;  // where the server listens (ServerOptions::listen)
  // A static file's cluster: no leases (its primary is fenced by the
  // promotion that deposes it).
  const bool static_;
  std::string following_;  // a replica's primary
  // A takeover from the primary this node followed, until MarkEpoch
  // records it.
  std::optional<Handover> handover_;
  // Copying a returning primary's writes (rdma/salvage.h) from DIR.previous.
  std::thread salvage_thread_;
  std::atomic<bool> salvage_stop_{false};
  bool session_ = false;
  bool holds_place_ = false;  // won under the current session
  Clock::time_point renewed_at_{};
  Clock::time_point next_renewal_{};
  NodeState published_;
  std::string last_logged_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;       // guarded by mu_
  bool closed_ = false;     // guarded by mu_
  ClusterNodeState state_;  // guarded by mu_
  Status failed_;           // guarded by mu_
  std::string last_wait_;   // guarded by mu_
};

}  // namespace

Status ClusterOptions::Validate() const {
  if (coordinator.empty()) return Status::InvalidArgument("cluster: no coordinator given");
  if (margin <= std::chrono::milliseconds(0) || margin >= ttl) {
    return Status::InvalidArgument("cluster: the margin (" + std::to_string(margin.count()) +
                                   " ms) must be above 0 and below the TTL (" +
                                   std::to_string(ttl.count()) + " ms)");
  }
  if (poll < std::chrono::milliseconds(10) || poll > ttl / 4) {
    return Status::InvalidArgument("cluster: poll must be 10 ms to a quarter of the TTL, not " +
                                   std::to_string(poll.count()) + " ms");
  }
  return Status::OK();
}

Result<std::unique_ptr<ClusterNode>> ClusterNode::Start(const std::string& dir,
                                                        const DBOptions& db_options,
                                                        const ServerOptions& server,
                                                        const ClusterOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(options.Validate());
  REPLAYDB_RETURN_IF_ERROR(server.Validate());
  REPLAYDB_RETURN_IF_ERROR(db_options.Validate());
  if (!server.replica_of.empty()) {
    return Status::InvalidArgument(
        "cluster: a node's primary is the coordinator's to say, not replica_of's");
  }
  rdma::coord::CoordinatorOptions co;
  co.ttl = options.ttl;
  REPLAYDB_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Open(options.coordinator, co));
  if (server.listen.size() > 2 && server.listen.compare(server.listen.size() - 2, 2, ":0") == 0) {
    return Status::InvalidArgument("cluster: a node listens on a port of its own, not " +
                                   server.listen +
                                   ": the coordinator tells the other nodes "
                                   "and clients where it is");
  }
  ClusterOptions o = options;
  if (o.name.empty()) o.name = server.listen;
  auto node = std::make_unique<ClusterNodeImpl>(dir, db_options, server, o, std::move(coordinator));
  node->Run();
  REPLAYDB_RETURN_IF_ERROR(node->WaitForRole(std::chrono::seconds(30)));
  return std::unique_ptr<ClusterNode>(std::move(node));
}

Result<std::string> ClusterPrimary(const std::string& coordinator) {
  REPLAYDB_ASSIGN_OR_RETURN(auto c, Coordinator::Open(coordinator));
  REPLAYDB_ASSIGN_OR_RETURN(const std::optional<LeaderState> leader, c->Leader());
  return leader ? leader->address : std::string();
}

Result<ClusterView> DescribeCluster(const std::string& coordinator) {
  REPLAYDB_ASSIGN_OR_RETURN(auto c, Coordinator::Open(coordinator));
  ClusterView view;
  REPLAYDB_ASSIGN_OR_RETURN(const std::optional<LeaderState> leader, c->Leader());
  if (leader) {
    view.primary = leader->name;
    view.primary_address = leader->address;
    view.epoch = leader->epoch;
  }
  REPLAYDB_ASSIGN_OR_RETURN(const std::vector<NodeState> nodes, c->Nodes());
  for (const NodeState& n : nodes) {
    view.nodes.push_back(ClusterMember{n.name, n.address, n.role, n.epoch, n.following,
                                       n.position.segment, n.position.offset, n.eligible});
  }
  return view;
}

Result<std::chrono::milliseconds> ProbeElection(const std::string& coordinator,
                                                std::chrono::milliseconds ttl) {
  if (coordinator.rfind("etcd://", 0) != 0) {
    return Status::FailedPrecondition("probing elections of " + coordinator +
                                      ": only etcd elects (a static file names its primary)");
  }
  rdma::coord::CoordinatorOptions o;
  o.ttl = ttl;
  REPLAYDB_ASSIGN_OR_RETURN(auto a, Coordinator::Open(coordinator + "-probe", o));
  REPLAYDB_ASSIGN_OR_RETURN(auto b, Coordinator::Open(coordinator + "-probe", o));
  NodeState na;
  na.name = "probe-a";
  na.address = "ucx://127.0.0.1:1";
  NodeState nb = na;
  nb.name = "probe-b";
  REPLAYDB_RETURN_IF_ERROR(a->Publish(na));
  REPLAYDB_RETURN_IF_ERROR(b->Publish(nb));
  REPLAYDB_ASSIGN_OR_RETURN(const LeaderState won, a->Campaign(na));
  if (!won.this_session) {
    return Status::FailedPrecondition("probing elections: " + won.name + " leads " + coordinator +
                                      "-probe already");
  }
  const auto last = Clock::now();
  REPLAYDB_RETURN_IF_ERROR(a->KeepAlive());
  auto renewed = Clock::now();
  while (Clock::now() - last < 10 * ttl) {
    if (Clock::now() - renewed > ttl / 4) {
      REPLAYDB_RETURN_IF_ERROR(b->KeepAlive());
      renewed = Clock::now();
    }
    REPLAYDB_ASSIGN_OR_RETURN(const LeaderState l, b->Campaign(nb));
    if (l.this_session) {
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
      (void)b->Resign();
      return took;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::DeadlineExceeded("probing elections: no candidate was elected within " +
                                  std::to_string((10 * ttl).count()) + " ms");
}

Result<uint64_t> PromoteNode(const std::string& coordinator, const std::string& name,
                             const PromoteOptions& options, const ConnectOptions& connect) {
  if (coordinator.rfind("file://", 0) != 0) {
    return Status::FailedPrecondition("promoting node '" + name + "' of " + coordinator +
                                      ": only a static coordinator (file://PATH) is promoted by "
                                      "hand; etcd elects its primary itself");
  }
  REPLAYDB_ASSIGN_OR_RETURN(auto c, Coordinator::Open(coordinator));
  REPLAYDB_ASSIGN_OR_RETURN(const std::vector<NodeState> nodes, c->Nodes());
  for (const NodeState& n : nodes) {
    if (n.name != name) continue;
    REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(n.address, connect));
    REPLAYDB_ASSIGN_OR_RETURN(const uint64_t epoch, db->Promote(options));
    REPLAYDB_RETURN_IF_ERROR(rdma::coord::SetStaticPrimary(coordinator.substr(7), name)
                                 .WithContext("node '" + name + "' was promoted (epoch " +
                                              std::to_string(epoch) +
                                              "), but the static file still names the old "
                                              "primary"));
    return epoch;
  }
  return Status::NotFound(coordinator + " names no node '" + name + "'");
}

}  // namespace replaydb
