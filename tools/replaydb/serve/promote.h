// `replaydb promote ucx://HOST:PORT`: manual failover (docs/replication.md,
// "Failover"). The served read replica at that address becomes the
// primary of the next epoch (DB::Promote): it fences its old primary, or,
// with --old-primary-dead, goes on without it when it cannot be reached.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SERVE_PROMOTE_H_
#define REPLAYDB_TOOLS_REPLAYDB_SERVE_PROMOTE_H_

#include <span>
#include <string>
#include <string_view>

namespace replaydb::tools {

inline constexpr std::string_view kPromoteUsage =
    "promote ucx://HOST:PORT|NAME --coordinator file://PATH [--old-primary-dead] "
    "[--token-file F]";
inline constexpr std::string_view kPromoteSummary =
    "make the served read replica there the primary (manual failover; fences the old one)";

// The subcommand: `args` are those after "promote". Returns the exit status.
int PromoteCommand(std::span<const std::string> args);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SERVE_PROMOTE_H_
