// `replaydb cluster etcd://HOST:PORT/CLUSTER|file://PATH`: a cluster's
// nodes as its coordinator sees them (replaydb/cluster.h, DescribeCluster):
// the primary and its epoch, and each node's role, epoch, the primary it
// follows, where it applied that primary's log to, and whether it may stand
// for election (docs/replication.md, "Automatic failover").
#ifndef REPLAYDB_TOOLS_REPLAYDB_SERVE_CLUSTER_COMMAND_H_
#define REPLAYDB_TOOLS_REPLAYDB_SERVE_CLUSTER_COMMAND_H_

#include <span>
#include <string>
#include <string_view>

namespace replaydb::tools {

inline constexpr std::string_view kClusterUsage =
    "cluster etcd://HOST:PORT/CLUSTER|file://PATH [--json]";
inline constexpr std::string_view kClusterSummary =
    "show a cluster's nodes and primary as its coordinator sees them";

// The subcommand: `args` are those after "cluster". Returns the exit status.
int ClusterCommand(std::span<const std::string> args);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SERVE_CLUSTER_COMMAND_H_
