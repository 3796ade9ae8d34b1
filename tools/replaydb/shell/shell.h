// `replaydb shell DIR` (or `replaydb DIR`): inspect, query and maintain a
// database from the terminal, the way sqlite3 or ldb do.
//
//   replaydb DIR                    interactive (GNU readline: history in
//                                   $REPLAYDB_HISTORY or ~/.replaydb_history,
//                                   line editing, tab completion of commands,
//                                   flags, table and column names, paths)
//   replaydb DIR -c CMD [-c CMD]    run the commands, stop at the first error
//   replaydb DIR < script           one command per line; every line runs
//   --json                          one JSON object per command on stdout
//   --read-only                     open read-only even when the lock is free
//
// Ctrl-C stops a long command (verify, export, import, import-d4rl,
// compact) without damage: an export or import leaves nothing behind. At
// the prompt it clears the line. Long commands draw a progress bar on
// stderr when it is a terminal (tools/replaydb/progress_bar.h, fed by the
// engine's LongOperationOptions::progress).
//
// The database must exist. When another process holds it read-write, the
// shell opens it read-only and says so on stderr. Exit status: 0, or 1 when
// any command of -c or standard input failed (interactive: 0; 2 for a
// malformed `replaydb` command line). Errors are
// one line on stderr (and {"error": ...} on stdout with --json).
//
// The commands (tools/replaydb/shell/shell_parser.cc lists them; `help` prints them) use
// only the public API in include/replaydb/.
#ifndef REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_H_
#define REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_H_

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/db.h"
#include "tools/replaydb/json.h"
#include "tools/replaydb/shell/shell_parser.h"

namespace replaydb::tools {

inline constexpr std::string_view kShellUsage =
    "shell DIR|ucx://HOST:PORT [-c COMMAND]... [--json] [--read-only] [--token-file F]";
inline constexpr std::string_view kShellSummary =
    "inspect a database: interactive, -c COMMAND, or commands on stdin (also: replaydb DIR)";

// `replaydb shell ...`; args exclude the word "shell".
int ShellCommand(std::span<const std::string> args);

// What a command produced: `json` always; `text`, when not empty, is the
// table view (otherwise the table view renders `json`).
struct CommandOutput {
  Json json = Json::object();
  std::string text;
};

// One open database and the commands run against it.
class Shell {
 public:
  // Opens the database in `dir` (read-only when `read_only`, or when another
  // process holds it; *note then says so), or connects to the server at
  // `dir` when it is ucx://HOST:PORT (DB::Connect, proving the token of
  // `token_file` when not empty).
  static Result<std::unique_ptr<Shell>> Open(const std::string& dir, bool read_only,
                                             std::string* note,
                                             const std::string& token_file = {});

  DB& db() { return *db_; }
  // Set by SIGINT (Ctrl-C) while a command runs; long commands stop early
  // when it is set. Cleared before each command.
  const std::atomic<bool>* interrupt() const;
  // Runs one command line into *out; *quit set by quit/exit. Empty lines and
  // comments produce nothing (out->json stays an empty object and
  // *produced is false).
  Status Run(std::string_view line, CommandOutput* out, bool* produced, bool* quit);

  // Completions of the word being typed: `line` is the text before the
  // cursor. Empty: nothing to offer (paths are left to the caller).
  std::vector<std::string> Complete(std::string_view line, bool* paths);

 private:
  explicit Shell(std::unique_ptr<DB> db) : db_(std::move(db)) {}
  std::unique_ptr<DB> db_;
};

// The table view of a command's JSON: "key: value" lines, nested objects
// indented, arrays of objects as aligned tables.
std::string RenderText(const Json& json);

// Every command's usage and summary, one or two lines each, for help.
std::string FormatCommandList();

// Runs a parsed command (tools/replaydb/shell/shell_commands.cc).
Status RunShellCommand(Shell& shell, const ParsedCommand& command, CommandOutput* out);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_SHELL_SHELL_H_
