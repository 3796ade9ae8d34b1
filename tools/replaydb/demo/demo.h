// `replaydb demo [DIR]`: a tour of the public API on a small table.
//
// Opens (or creates) the database in DIR, (re)creates the table "experience"
// (obs f32[8], action i32[], reward f32[], done bool[]; sequence length 4,
// tail padding), has 4 writer threads write 25 random trajectories each while
// a sampler thread draws batches of 32, prints one batch and the table's
// info, then closes the database, reopens it and prints what the catalog
// gives back.
//
// The demo removes nothing it did not create: it writes only into a new or
// empty directory or an existing replaydb database, and there replaces only
// the table "experience".
#ifndef REPLAYDB_TOOLS_REPLAYDB_DEMO_DEMO_H_
#define REPLAYDB_TOOLS_REPLAYDB_DEMO_DEMO_H_

#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "replaydb/status.h"

namespace replaydb::tools {

inline constexpr std::string_view kDemoUsage = "demo [DIR]";
inline constexpr std::string_view kDemoSummary =
    "write and sample a demo table in DIR (default ./replaydb-demo)";
inline constexpr std::string_view kDemoDefaultDir = "./replaydb-demo";

// The subcommand: `args` are those after "demo". Returns the exit status.
int DemoCommand(std::span<const std::string> args);

// Runs the tour in `dir`, printing to `out`. The first failing call's Status,
// with context, on error.
Status RunDemo(const std::string& dir, std::FILE* out);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_DEMO_DEMO_H_
