// The shell's command language: words (with quoting), the command table, and
// parsing of one command line into a command, its arguments and its flags.
// Pure functions with no I/O, so the parser can be fuzzed
// (tests/fuzz/shell_parser_fuzz.cc).
//
//   line     := word (blank word)*
//   word     := (plain | '...' | "..." | \c)+     joined without blanks
//   command  := NAME ARG* (--FLAG VALUE | --FLAG=VALUE)*  flags anywhere
//
// Inside "..." a backslash escapes " and \ only; inside '...' nothing is
// special. A line whose first word starts with '#' is a comment.
//
// Thread safety: every function is pure; the command table is constant.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_PARSER_H_
#define REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_PARSER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::tools {

// What a positional argument names, for tab completion.
enum class ArgKind { kNone, kCommand, kTable, kPath, kNumber };

struct ShellCommandSpec {
  std::string_view name;
  std::string_view usage;    // "sample TABLE N [--seq L]"
  std::string_view summary;  // one line
  int min_args = 0;
  int max_args = 0;                        // -1: any number (passed through)
  std::span<const std::string_view> flags;  // each takes a value
  std::span<const ArgKind> arg_kinds;       // per positional; the last repeats
  bool passthrough = false;                // arguments unparsed (bench)
};

// Every command, in the order `help` lists them.
std::span<const ShellCommandSpec> ShellCommands();
// The command named `name`, or null.
const ShellCommandSpec* FindShellCommand(std::string_view name);

struct ParsedCommand {
  const ShellCommandSpec* spec = nullptr;  // null: an empty line or a comment
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> flags;  // in order given

  // The flag's last value, or `fallback`.
  std::string Flag(std::string_view name, std::string_view fallback = {}) const;
  bool HasFlag(std::string_view name) const;
};

// Splits `line` into words. InvalidArgument for an unterminated quote.
Status SplitWords(std::string_view line, std::vector<std::string>* words);

// Parses one line. InvalidArgument, one line, for an unknown command ("unknown
// command 'x' (type help for the commands)"), a wrong argument count, an
// unknown flag or a flag without a value; the message ends with the command's
// usage.
Status ParseCommandLine(std::string_view line, ParsedCommand* out);

// Parses `text` as an integer in [min, max]; InvalidArgument naming `what`,
// the bounds and the text otherwise, with `spec`'s usage.
Status ParseInteger(const ShellCommandSpec& spec, std::string_view what, std::string_view text,
                    int64_t min, int64_t max, int64_t* out);

// "<name>: <message> (usage: <usage>)".
Status UsageError(const ShellCommandSpec& spec, std::string_view message);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_PARSER_H_
