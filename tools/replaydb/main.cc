// `replaydb`: the command-line tool. Dispatches its first argument through a
// table of subcommands; each subcommand lives in its own file and uses only
// the public API in include/replaydb/.
//
// Exit status: 0 on success, 1 when a replaydb call fails, 2 for a malformed
// command line (unknown command or flag).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tools/replaydb/bench/bench.h"
#include "tools/replaydb/demo/demo.h"
#include "tools/replaydb/serve/cluster_command.h"
#include "tools/replaydb/serve/promote.h"
#include "tools/replaydb/serve/serve.h"
#include "tools/replaydb/shell/shell.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {
namespace {

// No version is exported by the public API yet; keep in step with the
// project() version in CMakeLists.txt.
constexpr char kVersion[] = "0.1.0";

int HelpCommand(std::span<const std::string> args);
int VersionCommand(std::span<const std::string> args);

struct Command {
  std::string_view name;
  std::string_view usage;    // the command and its arguments
  std::string_view summary;  // one line
  CommandFn run;
};

// Every subcommand, in the order `replaydb help` lists them.
constexpr Command kCommands[] = {
    {"help", "help [COMMAND]", "list the commands, or show one command's usage", &HelpCommand},
    {"version", "version", "print the version of replaydb", &VersionCommand},
    {"demo", kDemoUsage, kDemoSummary, &DemoCommand},
    {"bench", kBenchUsage, kBenchSummary, &BenchCommand},
    {"shell", kShellUsage, kShellSummary, &ShellCommand},
    {"serve", kServeUsage, kServeSummary, &ServeCommand},
    {"promote", kPromoteUsage, kPromoteSummary, &PromoteCommand},
    {"cluster", kClusterUsage, kClusterSummary, &ClusterCommand},
};

const Command* FindCommand(std::string_view name) {
  for (const Command& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void PrintUsage(std::FILE* f) {
  std::fprintf(f, "usage: replaydb COMMAND [ARGS...]\n       replaydb DIR [-c COMMAND]... [--json]"
                 "   (the shell)\n\ncommands:\n");
  size_t width = 0;
  for (const Command& c : kCommands) width = std::max(width, c.usage.size());
  for (const Command& c : kCommands) {
    std::fprintf(f, "  %-*.*s  %.*s\n", static_cast<int>(width), static_cast<int>(c.usage.size()),
                 c.usage.data(), static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(f, "\nRun 'replaydb COMMAND --help' for one command's options.\n");
}

int HelpCommand(std::span<const std::string> args) {
  if (args.empty()) {
    PrintUsage(stdout);
    return kExitOk;
  }
  if (args.size() > 1) {
    std::fprintf(stderr, "replaydb help: too many arguments\n");
    return kExitUsage;
  }
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) {
    std::fprintf(stderr, "replaydb: unknown command '%s'\n", args[0].c_str());
    PrintUsage(stderr);
    return kExitUsage;
  }
  if (command->run == &HelpCommand) {
    PrintUsage(stdout);
    return kExitOk;
  }
  // Every other command prints its own detailed usage.
  const std::string flag = "--help";
  return command->run(std::span<const std::string>(&flag, 1));
}

int VersionCommand(std::span<const std::string> args) {
  if (!args.empty() && !(args.size() == 1 && (args[0] == "--help" || args[0] == "-h"))) {
    std::fprintf(stderr, "replaydb version: unexpected argument '%s'\n", args[0].c_str());
    return kExitUsage;
  }
  if (!args.empty()) {
    std::printf("usage: replaydb version\n");
    return kExitOk;
  }
  std::printf("replaydb %s\n", kVersion);
  return kExitOk;
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (args.empty()) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  std::string name = args[0];
  if (name == "--help" || name == "-h") name = "help";
  if (name == "--version") name = "version";
  const Command* command = FindCommand(name);
  // `replaydb DIR ...` is `replaydb shell DIR ...` for an existing directory.
  std::error_code ec;
  if (command == nullptr && (std::filesystem::is_directory(name, ec) ||
                          name.find('/') != std::string::npos)) {
    return ShellCommand(args);
  }
  if (command == nullptr) {
    std::fprintf(stderr, "replaydb: unknown command '%s'\n", name.c_str());
    PrintUsage(stderr);
    return kExitUsage;
  }
  return command->run(std::span<const std::string>(args).subspan(1));
}

}  // namespace
}  // namespace replaydb::tools

int main(int argc, char** argv) {
  return replaydb::tools::Main(argc, argv);
}
