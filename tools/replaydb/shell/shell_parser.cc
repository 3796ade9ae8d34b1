#include "tools/replaydb/shell/shell_parser.h"

#include <array>
#include <charconv>

namespace replaydb::tools {
namespace {

using K = ArgKind;

constexpr std::string_view kNoFlags[] = {""};
constexpr std::string_view kTrajectoriesFlags[] = {"from", "limit", "min-length", "max-length",
                                                   "ended", "tier"};
constexpr std::string_view kShowFlags[] = {"first", "steps", "column"};
constexpr std::string_view kSampleFlags[] = {"seq", "column"};
constexpr std::string_view kPrioritiesFlags[] = {"bins"};

constexpr ArgKind kNoArgs[] = {K::kNone};
constexpr ArgKind kCommandArg[] = {K::kCommand};
constexpr ArgKind kTableArg[] = {K::kTable};
constexpr ArgKind kTableNumber[] = {K::kTable, K::kNumber};
constexpr ArgKind kTablePath[] = {K::kTable, K::kPath};
constexpr ArgKind kPathTable[] = {K::kPath, K::kNone};
constexpr ArgKind kPathName[] = {K::kPath, K::kNone};

constexpr std::span<const std::string_view> None() { return std::span(kNoFlags, 0); }

constexpr ShellCommandSpec kCommands[] = {
    {"help", "help [COMMAND]", "list the commands, or show one command's usage", 0, 1, None(),
     kCommandArg},
    {"tables", "tables", "list the tables with their sizes", 0, 0, None(), kNoArgs},
    {"describe", "describe TABLE", "a table's schema, options and placement", 1, 1, None(),
     kTableArg},
    {"stats", "stats TABLE",
     "a table's sizes per tier, memory, counters, rate limiter and selector", 1, 1, None(),
     kTableArg},
    {"trajectories",
     "trajectories TABLE [--from ID] [--limit N] [--min-length N] [--max-length N] "
     "[--ended yes|no] [--tier hot|cold]",
     "list trajectories (both tiers, by id; 20 at a time unless --limit)", 1, 1, kTrajectoriesFlags,
     kTableArg},
    {"show", "show TABLE TRAJECTORY [--first STEP] [--steps N] [--column NAME]",
     "a trajectory's steps, values per column (10 steps unless --steps)", 2, 2, kShowFlags,
     kTableNumber},
    {"sample", "sample TABLE N [--seq L] [--column NAME]",
     "draw N items without recording the draw: keys, probabilities, per-column statistics", 2, 2,
     kSampleFlags, kTableNumber},
    {"priorities", "priorities TABLE [--bins N]",
     "a histogram of the live items' priorities (10 bins unless --bins)", 1, 1, kPrioritiesFlags,
     kTableArg},
    {"wal", "wal", "the write-ahead log: segments, and records and bytes since the checkpoint", 0,
     0, None(), kNoArgs},
    {"replication", "replication",
     "where the database stands in replication: a replica's primary, place and lag, or a "
     "primary's log end and replicas",
     0, 0, None(), kNoArgs},
    {"checkpoint", "checkpoint", "write a checkpoint now", 0, 0, None(), kNoArgs},
    {"verify", "verify",
     "read every trajectory in both tiers and the log; check checksums and the indexes", 0, 0,
     None(), kNoArgs},
    {"compact", "compact", "compact the cold store (RocksDB), giving back space", 0, 0, None(),
     kNoArgs},
    {"export", "export TABLE DIR", "copy a table into a new database in DIR", 2, 2, None(),
     kTablePath},
    {"import", "import DIR TABLE [NAME]",
     "copy table TABLE of the database in DIR into this one (as NAME)", 2, 3, None(), kPathTable},
    {"import-d4rl", "import-d4rl FILE NAME", "import an HDF5 file in the D4RL layout as table NAME",
     2, 2, None(), kPathName},
    {"bench", "bench [ARGS...]", "run `replaydb bench` with ARGS (see bench --help)", 0, -1, None(),
     kNoArgs, /*passthrough=*/true},
    {"quit", "quit", "leave the shell (also: exit, Ctrl-D)", 0, 0, None(), kNoArgs},
    {"exit", "exit", "leave the shell", 0, 0, None(), kNoArgs},
};

std::string Plural(int n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

}  // namespace

std::span<const ShellCommandSpec> ShellCommands() { return kCommands; }

const ShellCommandSpec* FindShellCommand(std::string_view name) {
  for (const ShellCommandSpec& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string ParsedCommand::Flag(std::string_view name, std::string_view fallback) const {
  for (auto it = flags.rbegin(); it != flags.rend(); ++it) {
    if (it->first == name) return it->second;
  }
  return std::string(fallback);
}

bool ParsedCommand::HasFlag(std::string_view name) const {
  for (const auto& f : flags) {
    if (f.first == name) return true;
  }
  return false;
}

Status UsageError(const ShellCommandSpec& spec, std::string_view message) {
  return Status::InvalidArgument(std::string(spec.name) + ": " + std::string(message) +
                                 " (usage: " + std::string(spec.usage) + ")");
}

Status SplitWords(std::string_view line, std::vector<std::string>* words) {
  words->clear();
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r')) {
      ++i;
    }
    if (i >= n) return Status::OK();
    std::string word;
    while (i < n && line[i] != ' ' && line[i] != '\t' && line[i] != '\n' && line[i] != '\r') {
      const char c = line[i];
      if (c == '\'') {
        const size_t end = line.find('\'', i + 1);
        if (end == std::string_view::npos) {
          return Status::InvalidArgument("unterminated ' quote at column " + std::to_string(i + 1));
        }
        word.append(line.substr(i + 1, end - i - 1));
        i = end + 1;
      } else if (c == '"') {
        const size_t open = i++;
        while (true) {
          if (i >= n) {
            return Status::InvalidArgument("unterminated \" quote at column " +
                                           std::to_string(open + 1));
          }
          if (line[i] == '"') break;
          if (line[i] == '\\' && i + 1 < n && (line[i + 1] == '"' || line[i + 1] == '\\')) ++i;
          word += line[i++];
        }
        ++i;
      } else if (c == '\\' && i + 1 < n) {
        word += line[i + 1];
        i += 2;
      } else {
        word += c;
        ++i;
      }
    }
    words->push_back(std::move(word));
  }
}

Status ParseCommandLine(std::string_view line, ParsedCommand* out) {
  *out = ParsedCommand{};
  std::vector<std::string> words;
  REPLAYDB_RETURN_IF_ERROR(SplitWords(line, &words));
  if (words.empty() || words[0].starts_with('#')) return Status::OK();
  const ShellCommandSpec* spec = FindShellCommand(words[0]);
  if (spec == nullptr) {
    return Status::InvalidArgument("unknown command '" + words[0] +
                                   "' (type help for the commands)");
  }
  out->spec = spec;
  if (spec->passthrough) {
    out->args.assign(words.begin() + 1, words.end());
    return Status::OK();
  }
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!w.starts_with("--") || w.size() == 2) {
      out->args.push_back(w);
      continue;
    }
    std::string name = w.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    bool known = false;
    for (std::string_view f : spec->flags) known = known || f == name;
    if (!known) return UsageError(*spec, "unknown flag --" + name);
    if (!has_value) {
      if (i + 1 >= words.size()) return UsageError(*spec, "--" + name + " needs a value");
      value = words[++i];
    }
    out->flags.emplace_back(std::move(name), std::move(value));
  }
  const int got = static_cast<int>(out->args.size());
  if (got < spec->min_args || (spec->max_args >= 0 && got > spec->max_args)) {
    const std::string want =
        spec->min_args == spec->max_args
            ? Plural(spec->min_args, "argument")
            : std::to_string(spec->min_args) + " to " + Plural(spec->max_args, "argument");
    return UsageError(*spec, "takes " + want + ", got " + std::to_string(got));
  }
  return Status::OK();
}

Status ParseInteger(const ShellCommandSpec& spec, std::string_view what, std::string_view text,
                    int64_t min, int64_t max, int64_t* out) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return UsageError(spec, std::string(what) + " must be an integer from " +
                                std::to_string(min) + " to " + std::to_string(max) + ", not '" +
                                std::string(text) + "'");
  }
  *out = v;
  return Status::OK();
}

}  // namespace replaydb::tools
