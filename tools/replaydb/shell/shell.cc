#include "tools/replaydb/shell/shell.h"

#include <readline/history.h>
#include <readline/readline.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {


// ------------------------------------------------------------------ Shell

namespace {

std::atomic<bool> g_interrupt{false};

extern "C" void OnInterrupt(int) { g_interrupt.store(true); }

// SIGINT sets g_interrupt; system calls it interrupts return EINTR.
void CatchInterrupts() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

const std::atomic<bool>* Shell::interrupt() const { return &g_interrupt; }

Result<std::unique_ptr<Shell>> Shell::Open(const std::string& dir, bool read_only,
                                           std::string* note, const std::string& token_file) {
  DBOptions options;
  options.create_if_missing = false;
  note->clear();
  if (dir.starts_with("ucx://") || dir.starts_with("etcd://") || dir.starts_with("file://")) {
    // A database that `replaydb serve` hosts: the same commands, run there.
    if (read_only) {
      return Status::InvalidArgument("--read-only opens a directory read-only; a server grants "
                                     "read-only access by its token (--token-file)");
    }
    ConnectOptions connect;
    connect.client_name = "replaydb shell";
    connect.token_file = token_file;
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> db, DB::Connect(dir, connect));
    return std::unique_ptr<Shell>(new Shell(std::move(db)));
  }
  if (!read_only) {
    Result<std::unique_ptr<DB>> db = DB::Open(options, dir);
    if (db.ok()) return std::unique_ptr<Shell>(new Shell(std::move(*db)));
    if (db.status().code() != Status::Code::kBusy) return db.status();
    *note = "another process holds " + dir + " read-write; opened it read-only (" +
            db.status().message() + ")";
  }
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> db, DB::OpenReadOnly(options, dir));
  return std::unique_ptr<Shell>(new Shell(std::move(db)));
}

Status Shell::Run(std::string_view line, CommandOutput* out, bool* produced, bool* quit) {
  *out = CommandOutput{};
  *produced = false;
  ParsedCommand command;
  REPLAYDB_RETURN_IF_ERROR(ParseCommandLine(line, &command));
  if (command.spec == nullptr) return Status::OK();
  if (command.spec->name == "quit" || command.spec->name == "exit") {
    *quit = true;
    return Status::OK();
  }
  *produced = true;
  g_interrupt.store(false);
  return RunShellCommand(*this, command, out);
}

namespace {

// The prefixes of `candidates` that start with `word`, sorted.
std::vector<std::string> Matching(const std::vector<std::string>& candidates,
                                  std::string_view word) {
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    if (c.starts_with(word)) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> Shell::Complete(std::string_view line, bool* paths) {
  *paths = false;
  std::vector<std::string> words;
  if (!SplitWords(line, &words).ok()) return {};  // inside an open quote
  const bool fresh = line.empty() || line.back() == ' ' || line.back() == '\t';
  const std::string word = fresh || words.empty() ? std::string() : words.back();
  if (!fresh && !words.empty()) words.pop_back();
  std::vector<std::string> commands;
  for (const ShellCommandSpec& c : ShellCommands()) commands.emplace_back(c.name);
  if (words.empty()) return Matching(commands, word);
  const ShellCommandSpec* spec = FindShellCommand(words[0]);
  if (spec == nullptr) return {};
  // The flag being typed, or the value of one.
  if (word.starts_with("--")) {
    std::vector<std::string> flags;
    for (std::string_view f : spec->flags) flags.push_back("--" + std::string(f));
    return Matching(flags, word);
  }
  std::vector<std::string> positional;
  std::string pending_flag;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i].starts_with("--") && words[i].find('=') == std::string::npos) {
      pending_flag = words[i].substr(2);
      if (i + 1 < words.size()) {
        ++i;
        pending_flag.clear();
      }
      continue;
    }
    positional.push_back(words[i]);
  }
  if (!pending_flag.empty()) {
    if (pending_flag != "column" || positional.empty()) return {};
    Result<std::shared_ptr<Table>> table = db_->GetTable(positional[0]);
    if (!table.ok()) return {};
    std::vector<std::string> columns;
    for (const ColumnSpec& c : (*table)->spec().columns) columns.push_back(c.name);
    return Matching(columns, word);
  }
  if (spec->arg_kinds.empty()) return {};
  const size_t index = std::min(positional.size(), spec->arg_kinds.size() - 1);
  switch (spec->arg_kinds[index]) {
    case ArgKind::kCommand: return Matching(commands, word);
    case ArgKind::kTable: return Matching(db_->ListTables(), word);
    case ArgKind::kPath: *paths = true; return {};
    default: return {};
  }
}

// ------------------------------------------------------------------ text view

namespace {

bool IsTable(const Json& j) {
  if (!j.is_array() || j.empty()) return false;
  for (const Json& row : j) {
    if (!row.is_object()) return false;
  }
  return true;
}

void RenderTable(const Json& rows, const std::string& indent, std::string* out) {
  std::vector<std::string> keys;
  for (const auto& member : rows.front().items()) keys.push_back(member.key());
  std::vector<size_t> width(keys.size());
  for (size_t c = 0; c < keys.size(); ++c) width[c] = keys[c].size();
  std::vector<std::vector<std::string>> cells;
  for (const Json& row : rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < keys.size(); ++c) {
      const auto v = row.find(keys[c]);
      line.push_back(v == row.end() ? std::string("-") : JsonText(*v));
      width[c] = std::max(width[c], line.back().size());
    }
    cells.push_back(std::move(line));
  }
  const auto emit = [&](const std::vector<std::string>& line) {
    std::string text = indent;
    for (size_t c = 0; c < line.size(); ++c) {
      text += line[c];
      if (c + 1 < line.size()) text += std::string(width[c] - line[c].size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    *out += text + "\n";
  };
  emit(keys);
  for (const auto& line : cells) emit(line);
}

void RenderObject(const Json& obj, const std::string& indent, std::string* out) {
  for (const auto& member : obj.items()) {
    const std::string& key = member.key();
    const Json& value = member.value();
    if (value.is_object()) {
      *out += indent + key + ":\n";
      RenderObject(value, indent + "  ", out);
    } else if (IsTable(value)) {
      *out += indent + key + ":\n";
      RenderTable(value, indent + "  ", out);
    } else if (value.is_array() && value.empty()) {
      *out += indent + key + ": (none)\n";
    } else {
      *out += indent + key + ": " + JsonText(value) + "\n";
    }
  }
}

}  // namespace

std::string RenderText(const Json& json) {
  std::string out;
  if (json.is_object()) {
    RenderObject(json, "", &out);
  } else if (IsTable(json)) {
    RenderTable(json, "", &out);
  } else {
    out = JsonText(json) + "\n";
  }
  return out;
}

// ------------------------------------------------------------------ the modes

namespace {

struct Session {
  Shell* shell = nullptr;
  bool json = false;
  bool failed = false;
};

// Runs one line and prints what it produced or its error. Returns false
// when the line failed.
bool RunLine(Session& s, std::string_view line, bool* quit) {
  CommandOutput out;
  bool produced = false;
  const Status status = s.shell->Run(line, &out, &produced, quit);
  if (!status.ok()) {
    s.failed = true;
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", status.message().c_str());
    if (s.json) {
      const Json error = {{"error", status.message()}, {"code", StatusCodeName(status.code())}};
      std::printf("%s\n", DumpJson(error).c_str());
    }
    std::fflush(stdout);
    return false;
  }
  if (produced) {
    if (s.json) {
      std::printf("%s\n", DumpJson(out.json).c_str());
    } else {
      std::fputs(out.text.empty() ? RenderText(out.json).c_str() : out.text.c_str(), stdout);
    }
    std::fflush(stdout);
  }
  return true;
}

// ---- readline

Shell* g_completing = nullptr;
std::vector<std::string> g_matches;

char* NextMatch(const char* /*text*/, int state) {
  if (static_cast<size_t>(state) >= g_matches.size()) return nullptr;
  return strdup(g_matches[static_cast<size_t>(state)].c_str());
}

char** CompleteHook(const char* text, int start, int /*end*/) {
  bool paths = false;
  const std::string before(rl_line_buffer, static_cast<size_t>(start));
  g_matches = g_completing->Complete(before + text, &paths);
  if (paths) return nullptr;  // readline's filename completion
  rl_attempted_completion_over = 1;
  if (g_matches.empty()) return nullptr;
  return rl_completion_matches(text, NextMatch);
}

std::string HistoryPath() {
  if (const char* p = std::getenv("REPLAYDB_HISTORY"); p != nullptr && *p != '\0') return p;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.replaydb_history";
  }
  return {};
}

// The terminal stays in readline's mode (no echo, no line buffering) for the
// whole session, so keys typed while a command runs, Ctrl-D too, wait for
// the next prompt as keys. At the prompt Ctrl-C reaches readline as a key
// (ISIG off), bound to DropLine: deterministic whatever keys follow, and no
// signal that some other thread of the process might take. While a command
// runs ISIG is on: Ctrl-C raises SIGINT and g_interrupt cancels the command.
bool g_terminal_prepped = false;

void SetTerminalSignals(bool on) {
  struct termios t;
  if (tcgetattr(STDIN_FILENO, &t) != 0) return;
  const tcflag_t want = on ? (t.c_lflag | ISIG) : (t.c_lflag & ~static_cast<tcflag_t>(ISIG));
  if (want == t.c_lflag) return;
  t.c_lflag = want;
  tcsetattr(STDIN_FILENO, TCSADRAIN, &t);
}

void PrepTerminal(int meta) {
  if (!g_terminal_prepped) {
    rl_prep_terminal(meta);
    g_terminal_prepped = true;
  }
  SetTerminalSignals(false);
}

// Between lines: only signals back on. RestoreTerminal ends the session.
void DeprepTerminal() { SetTerminalSignals(true); }

void RestoreTerminal() {
  if (g_terminal_prepped) rl_deprep_terminal();
  g_terminal_prepped = false;
}

// Ctrl-C at the prompt: drop the line and prompt again.
int DropLine(int /*count*/, int /*key*/) {
  rl_replace_line("", 0);
  rl_crlf();
  rl_on_new_line();
  return 0;
}

void Interactive(Session& s, const std::string& dir) {
  g_completing = s.shell;
  rl_readline_name = "replaydb";
  rl_catch_signals = 0;  // our handler (CatchInterrupts) sees SIGINT
  rl_prep_term_function = PrepTerminal;
  rl_deprep_term_function = DeprepTerminal;
  rl_bind_key('\003', DropLine);
  rl_attempted_completion_function = CompleteHook;
  const std::string history = HistoryPath();
  if (!history.empty()) read_history(history.c_str());
  stifle_history(1000);
  std::printf("replaydb shell on %s%s; type help for the commands, quit or Ctrl-D to leave\n",
              dir.c_str(), s.shell->db().read_only() ? " (read-only)" : "");
  const std::string prompt = s.shell->db().read_only() ? "replaydb (read-only)> " : "replaydb> ";
  bool quit = false;
  while (!quit) {
    char* raw = readline(prompt.c_str());
    if (raw == nullptr) {
      std::printf("\n");
      break;
    }
    std::string line(raw);
    std::free(raw);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    add_history(line.c_str());
    RunLine(s, line, &quit);
  }
  RestoreTerminal();
  if (!history.empty()) write_history(history.c_str());
  g_completing = nullptr;
}

}  // namespace

int ShellCommand(std::span<const std::string> args) {
  bool help = false;
  bool json = false;
  bool read_only = false;
  std::string token_file;
  std::vector<std::string> commands;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-c") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "replaydb shell: -c needs a command\nusage: replaydb %s\n",
                     std::string(kShellUsage).c_str());
        return kExitUsage;
      }
      commands.push_back(args[++i]);
    } else if (a == "--json") {
      json = true;
    } else if (a == "--read-only") {
      read_only = true;
    } else if (a == "--token-file") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "replaydb shell: --token-file needs a file\nusage: replaydb %s\n",
                     std::string(kShellUsage).c_str());
        return kExitUsage;
      }
      token_file = args[++i];
    } else if (a == "--help" || a == "-h") {
      help = true;
    } else if (a.starts_with("-") && a != "-") {
      std::fprintf(stderr, "replaydb shell: unknown flag '%s'\nusage: replaydb %s\n", a.c_str(),
                   std::string(kShellUsage).c_str());
      return kExitUsage;
    } else {
      positional.push_back(a);
    }
  }
  if (help) {
    std::printf("usage: replaydb %s\n  %s\ncommands:\n%s", std::string(kShellUsage).c_str(),
                std::string(kShellSummary).c_str(), FormatCommandList().c_str());
    return kExitOk;
  }
  if (positional.size() != 1) {
    std::fprintf(stderr, "replaydb shell: expected one database directory, got %zu\n"
                 "usage: replaydb %s\n", positional.size(), std::string(kShellUsage).c_str());
    return kExitUsage;
  }
  const std::string& dir = positional[0];
  // `verify` checks the files as they are: a read-write open would first let
  // recovery cut a torn log tail (and hide it). Run alone, it opens read-only.
  const bool only_verify =
      !commands.empty() && std::all_of(commands.begin(), commands.end(), [](const std::string& c) {
        std::vector<std::string> words;
        return SplitWords(c, &words).ok() && !words.empty() && words[0] == "verify";
      });
  std::string note;
  Result<std::unique_ptr<Shell>> shell =
      Shell::Open(dir, read_only || only_verify, &note, token_file);
  if (!shell.ok()) {
    std::fprintf(stderr, "replaydb: cannot open %s: %s\n", dir.c_str(),
                 shell.status().message().c_str());
    if (json) {
      std::printf("%s\n", DumpJson(Json{{"error", shell.status().message()}}).c_str());
    }
    return kExitFailure;
  }
  if (!note.empty()) std::fprintf(stderr, "replaydb: %s\n", note.c_str());
  CatchInterrupts();
  Session s{shell->get(), json};
  bool quit = false;
  if (!commands.empty()) {
    for (const std::string& c : commands) {
      if (!RunLine(s, c, &quit) || quit) break;
    }
  } else if (isatty(STDIN_FILENO) && !json) {
    Interactive(s, dir);
    return kExitOk;  // typing mistakes along the way are no failure
  } else {
    std::string line;
    // Ctrl-C also ends a script (after the command it interrupted).
    while (!quit && !g_interrupt.load() && std::getline(std::cin, line)) {
      RunLine(s, line, &quit);
    }
    if (g_interrupt.load()) s.failed = true;
  }
  return s.failed ? kExitFailure : kExitOk;
}

}  // namespace replaydb::tools
