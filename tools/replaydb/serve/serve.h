// `replaydb serve DIR`: hosts the database in DIR for clients in other
// processes and on other nodes, over UCX (replaydb/server.h).
//
// Serves what rdma/WIRE.md lists (tables listed and opened, samples,
// seeds). Listens on 127.0.0.1 by default; other addresses need a token,
// which this build does not have yet, and are refused. Logs a line per
// connection. SIGTERM or SIGINT: connections end (clients see Unavailable),
// a checkpoint, the database closed, exit 0.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SERVE_SERVE_H_
#define REPLAYDB_TOOLS_REPLAYDB_SERVE_SERVE_H_

#include <span>
#include <string>
#include <string_view>

namespace replaydb::tools {

inline constexpr std::string_view kServeUsage =
    "serve DIR [--listen ucx://HOST:PORT] [--workers N] [--threads N] [--token-file F] "
    "[--replica-of ucx://HOST:PORT] [--wal-sync none|batch|always] [--resume-window-ms N] "
    "[--coordinator etcd://HOST:PORT/CLUSTER|file://PATH [--name NAME] [--ttl-ms N]]";
inline constexpr std::string_view kServeSummary =
    "host the database in DIR for other processes over UCX (default ucx://127.0.0.1:7077)";
inline constexpr std::string_view kServeDefaultListen = "ucx://127.0.0.1:7077";

// The subcommand: `args` are those after "serve". Returns the exit status.
int ServeCommand(std::span<const std::string> args);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SERVE_SERVE_H_
