// Helpers shared by the subcommands of the `replaydb` command-line tool:
// exit codes, flag parsing, human formatting of sizes, counts and rates, and
// readable renderings of table specs and table info. Uses only the public
// replaydb API.
//
// Thread safety: every function here is a pure function of its arguments.
#ifndef REPLAYDB_TOOLS_REPLAYDB_TOOL_UTIL_H_
#define REPLAYDB_TOOLS_REPLAYDB_TOOL_UTIL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb::tools {

// Exit status of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a replaydb call (or the OS) failed
inline constexpr int kExitUsage = 2;    // the command line was malformed

// A subcommand: its arguments are those after the command name.
using CommandFn = int (*)(std::span<const std::string> args);

// One flag a subcommand accepts. A flag with `value` set takes an argument,
// given as "--name VALUE" or "--name=VALUE"; otherwise it is a switch
// ("--name"). The flag named "help" is also accepted as "-h".
struct FlagSpec {
  std::string_view name;  // without the leading "--"
  // Set to true when the flag is given. May be null for a flag with a value.
  bool* present = nullptr;
  // Non-null: the flag takes a value, stored here (the last one given wins).
  std::string* value = nullptr;
};

// Splits `args` into the flags of `flags` (in any position; everything after
// a lone "--" is positional) and the positional arguments, appended to
// *positional. InvalidArgument naming the unknown flag, the switch given a
// value, or the flag missing its value.
Status ParseFlags(std::span<const std::string> args, std::span<const FlagSpec> flags,
                  std::vector<std::string>* positional);

// "512 B", "16.0 KiB", "64.0 MiB", "1.50 GiB" (binary prefixes).
std::string FormatBytes(double bytes);
// 1234567 -> "1,234,567".
std::string FormatCount(int64_t n);
// Three significant digits with a decimal (SI) prefix and no unit:
// 950 -> "950", 12345 -> "12.3 k", 2.5e9 -> "2.50 G".
std::string FormatSi(double value);
// A rate with a decimal prefix: (1.2e10, "B/s") -> "12.0 GB/s",
// (2.1e6, "steps/s") -> "2.10 M steps/s".
std::string FormatRate(double per_second, std::string_view unit);
// A double for display: "inf" / "-inf" for the +/- max double the rate
// limiter uses as "no bound", otherwise up to 6 significant digits.
std::string FormatDouble(double value);

// "obs f32[8]"; a scalar column is "reward f32[]".
std::string FormatColumn(const ColumnSpec& column);
// "samples_per_insert=1 min_size_to_sample=1 min_diff=-inf max_diff=inf".
std::string FormatRateLimiterSpec(const RateLimiterSpec& spec);
// One "key: value" line per field of the spec, each prefixed by `indent`.
std::string FormatTableSpec(const TableSpec& spec, std::string_view indent);
// One "key: value" line per counter of the info (rate limiter counters
// included), each prefixed by `indent`. Keys are the TableInfo field names,
// so scripts can pick lines such as "items_sampled: 4096".
std::string FormatTableInfo(const TableInfo& info, std::string_view indent);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_TOOL_UTIL_H_
