// A node of a replicated database whose primary a coordinator elects
// (docs/replication.md, "Automatic failover"; `replaydb serve DIR
// --coordinator ...` runs one). Each node serves its directory
// (replaydb/server.h) as the primary or as a read replica of it, as the
// coordinator says, and changes role when the primary changes:
//
// - The nodes keep sessions with the coordinator (a lease of `ttl`,
//   renewed every ttl / 4) and publish their state under them.
// - With no primary elected, a node whose database is no replica (a new
//   node's, or a primary's), or a replica that was in sync with its
//   primary when it last heard from it and has applied at least as much of
//   its log as every other such replica, campaigns; the winner's epoch is
//   the coordinator's (etcd: the leader key's revision). A replica that
//   wins takes over in place (its follower stops, writes are taken).
// - The primary acknowledges no writes once its session was last renewed
//   more than ttl - margin ago (self-fencing: by the time another node can
//   be elected, it takes none). A primary that finds another elected was
//   deposed: it fences its database for the new epoch, moves its
//   directory aside (DIR.previous) and rejoins as a replica of the new
//   primary from a snapshot.
// - A replica whose primary changed moves its directory aside the same
//   way and copies a snapshot of the new primary (its place was in the old
//   primary's log).
//
// Thread safety: state() from any thread; Close once.
#ifndef REPLAYDB_CLUSTER_H_
#define REPLAYDB_CLUSTER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/options.h"
#include "replaydb/server.h"
#include "replaydb/status.h"

namespace replaydb {

struct ClusterOptions {
  // etcd://HOST:PORT[,HOST:PORT...]/CLUSTER (an etcd 3.4 cluster's v3
  // HTTP/JSON gateway) or file://PATH (a static file: "node NAME
  // ucx://HOST:PORT" lines and "primary NAME"; it elects no one, `replaydb
  // promote` changes it).
  std::string coordinator;
  // This node's name in the cluster; empty: its listen address.
  std::string name;
  // The session's lease (whole seconds, 1 to 60 for etcd): a primary that
  // stops renewing it is replaced this long after its last renewal.
  std::chrono::milliseconds ttl{2000};
  // The primary stops acknowledging writes at ttl - margin after its last
  // renewal (clock drift and a write in flight fit in the margin). Less
  // than ttl.
  std::chrono::milliseconds margin{500};
  // How often the coordinator is asked who the primary is.
  std::chrono::milliseconds poll{100};
  // A line per role change, election and resync. May be empty.
  std::function<void(const std::string& line)> log;

  // OK, or InvalidArgument naming what is wrong.
  Status Validate() const;
};

struct ClusterNodeState {
  std::string name;
  std::string address;  // ucx://HOST:PORT, where this node serves
  // "primary", "replica", or "starting" (while it opens or resyncs).
  std::string role;
  uint64_t epoch = 0;   // its database's
  std::string primary;  // the primary's address as this node knows it
  // Elections this node won, and resyncs (snapshots copied) it made.
  uint64_t elections_won = 0;
  uint64_t resyncs = 0;
};

class ClusterNode {
 public:
  // Serves `dir` (as Server::Open, with `server` options but its
  // replica_of, which the coordinator decides) as a node of the cluster.
  // Waits until the node has a role (at most 30 s: DeadlineExceeded).
  // InvalidArgument for bad options (the listen port must not be 0 with a
  // coordinator that names it: the static file); the coordinator's errors.
  static Result<std::unique_ptr<ClusterNode>> Start(const std::string& dir,
                                                    const DBOptions& db_options,
                                                    const ServerOptions& server,
                                                    const ClusterOptions& options);
  // Stops (as Close, ignoring its status).
  virtual ~ClusterNode() = default;
  virtual ClusterNodeState state() const = 0;
  // Gives up the primary's place (another node is elected at once) and the
  // session, then closes the server (a checkpoint). Once.
  virtual Status Close() = 0;
};

// Manual failover in a cluster whose coordinator is a static file
// (file://PATH): promotes node `name` (DB::Promote on its server, which
// fences the old primary), then makes the file name it the primary, so
// that the other nodes follow it. The new epoch. NotFound unless the file
// names the node; FailedPrecondition for an etcd cluster (it elects its
// primary itself); DB::Promote's errors.
Result<uint64_t> PromoteNode(const std::string& coordinator, const std::string& name,
                             const PromoteOptions& options, const ConnectOptions& connect = {});

// The primary a cluster's coordinator names now (its address, ucx://...);
// "" while none is elected. The coordinator's errors (Unavailable when it
// cannot be reached).
Result<std::string> ClusterPrimary(const std::string& coordinator);

// A cluster as its coordinator sees it (`replaydb cluster ADDR`): each
// node's published state (etcd: the nodes with live sessions; the static
// file: its nodes, with only name, address and role) and the primary.
struct ClusterMember {
  std::string name;
  std::string address;
  std::string role;  // "primary", "replica", "starting"
  uint64_t epoch = 0;
  // A replica's: the primary it follows, where it applied that primary's
  // log to, and whether it may stand for election.
  std::string following;
  uint64_t segment = 0;
  uint64_t offset = 0;
  bool eligible = false;
};
struct ClusterView {
  std::string primary;          // its name; "" while none is elected
  std::string primary_address;  // ucx://HOST:PORT
  uint64_t epoch = 0;           // etcd: the leader key's revision; the file: 0
  std::vector<ClusterMember> nodes;
};
Result<ClusterView> DescribeCluster(const std::string& coordinator);

// What an election takes on this coordinator (etcd only): a leader with a
// session of `ttl` stops renewing it, and a candidate campaigning every 10
// ms is elected this long after the leader's last renewal; under a cluster
// name of its own (CLUSTER-probe). A diagnostic, and the failover bench's
// ceiling. FailedPrecondition for a static file; the coordinator's errors.
Result<std::chrono::milliseconds> ProbeElection(const std::string& coordinator,
                                                std::chrono::milliseconds ttl);

}  // namespace replaydb

#endif  // REPLAYDB_CLUSTER_H_
