// Coordinators (docs/replication.md, "Automatic failover"): where the nodes
// of a replicated database find each other and which of them is the
// primary. Two kinds, picked by the address's scheme:
//
//   etcd://HOST:PORT[,HOST:PORT...]/CLUSTER  an etcd 3.4 cluster (its v3
//       HTTP/JSON gateway, libcurl): each node keeps a session (a lease of
//       CoordinatorOptions::ttl, renewed by KeepAlive) under which it
//       publishes its state; the primary is elected (the leader key made
//       under the winner's lease in a transaction guarded on its absence),
//       and the leader key's create revision is its epoch.
//   file://PATH  a static file naming the nodes and the primary:
//       "node NAME ucx://HOST:PORT" lines and one "primary NAME" line
//       (# comments). It elects no one: `replaydb promote NODE
//       --coordinator file://PATH` changes its primary line.
//
// Thread safety: a coordinator is used by one thread at a time.
#ifndef REPLAYDB_RDMA_COORD_COORDINATOR_H_
#define REPLAYDB_RDMA_COORD_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::rdma::coord {

// What a node publishes about itself.
struct NodeState {
  std::string name;     // unique in its cluster
  std::string address;  // ucx://HOST:PORT, where it serves
  std::string role;     // "primary", "replica" or "starting"
  uint64_t epoch = 0;   // its database's (engine::DBImpl::epoch)
  // A replica's: the primary it follows, where it applied that primary's
  // log to, and whether it may stand for election (it was in sync with its
  // primary when it last heard from it).
  std::string following;
  wal::LogPosition position;
  bool eligible = false;
};

// The primary the coordinator names.
struct LeaderState {
  std::string name;
  std::string address;
  // etcd: the leader key's create revision (grows with each election);
  // the static file: 0.
  uint64_t epoch = 0;
  // Whether this coordinator's session holds the place (a node's earlier
  // session, of a process that went, may still hold it under its name
  // until its lease expires). The static file: the named node's.
  bool this_session = false;
};

// Where a new primary took over from the last: the epoch of the primary
// it followed, and where in that primary's log it had applied to. That
// primary's records from there on are on no later primary: its own, when it
// comes back, are what the cluster lacks (ClusterNode salvages them).
struct Handover {
  uint64_t epoch = 0;
  wal::LogPosition position;
};

struct CoordinatorOptions {
  // A session's lease: a node that stops renewing it is gone this long
  // after its last renewal, with its leadership. 500 ms to 60 s.
  std::chrono::milliseconds ttl{2000};
  // The longest one request to the coordinator may take.
  std::chrono::milliseconds request_timeout{1000};
};

class Coordinator {
 public:
  // InvalidArgument naming `address` when it is neither etcd://... nor
  // file://..., or is malformed; a static file that cannot be read or
  // parsed: its error (NotFound, Corruption naming the line).
  static Result<std::unique_ptr<Coordinator>> Open(const std::string& address,
                                                   const CoordinatorOptions& options = {});
  virtual ~Coordinator() = default;
  // The address it was opened with.
  virtual const std::string& address() const = 0;
  // The primary named now; nullopt when there is none (no election won, or
  // its session expired). Unavailable when the coordinator cannot be
  // reached.
  virtual Result<std::optional<LeaderState>> Leader() = 0;
  // The nodes with live sessions (etcd) or named (the file, with only
  // name, address and role).
  virtual Result<std::vector<NodeState>> Nodes() = 0;
  // Publishes `me` under this node's session, starting a session first
  // where there is none (etcd); the file: NotFound unless it names `me`.
  virtual Status Publish(const NodeState& me) = 0;
  // Renews the session. FailedPrecondition when it expired (its leadership
  // went with it; the next Publish starts another), Unavailable when the
  // coordinator cannot be reached.
  virtual Status KeepAlive() = 0;
  // One campaign for the primary's place, without waiting, under the
  // session (REQUIRES: Publish succeeded): the primary afterwards, `me`
  // with its epoch when it won or held it already. The file:
  // FailedPrecondition unless it names `me` as the primary.
  virtual Result<LeaderState> Campaign(const NodeState& me) = 0;
  // Gives the primary's place up, where this session holds it, and ends
  // the session.
  virtual Status Resign() = 0;
  // The last epoch in which a primary took writes (MarkEpoch), which a
  // candidate must have reached to stand; 0 when none (the static file:
  // always 0).
  virtual Result<uint64_t> LastEpoch() = 0;
  // Records that this session's primary, elected in `epoch`, takes writes
  // from now on: guarded on it still holding the place (FailedPrecondition
  // otherwise). `from`, for a primary that was a replica of epoch
  // from->epoch's primary, is recorded with it (HandedOver). The static
  // file: OK, and records nothing.
  virtual Status MarkEpoch(uint64_t epoch, const std::optional<Handover>& from = std::nullopt) = 0;
  // Where epoch `epoch`'s log was taken over by the primary after it (in
  // that log's positions: MarkEpoch's `from`); nullopt when nothing was
  // recorded (a primary that resigned or was fenced hands over its whole
  // log; the static file records nothing).
  virtual Result<std::optional<wal::LogPosition>> HandedOver(uint64_t epoch) = 0;
};

// The static file's primary line made `name` (written whole: a new file
// renamed over the old). NotFound unless the file names the node.
Status SetStaticPrimary(const std::string& path, const std::string& name);

}  // namespace replaydb::rdma::coord

#endif  // REPLAYDB_RDMA_COORD_COORDINATOR_H_
