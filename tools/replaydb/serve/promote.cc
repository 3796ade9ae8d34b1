#include "tools/replaydb/serve/promote.h"

#include <cstdio>
#include <string>
#include <vector>

#include "replaydb/cluster.h"
#include "replaydb/db.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {

int PromoteCommand(std::span<const std::string> args) {
  bool help = false;
  bool old_primary_dead = false;
  std::string token_file;
  std::string coordinator;
  const FlagSpec flags[] = {{"help", &help, nullptr},
                            {"coordinator", nullptr, &coordinator},
                            {"old-primary-dead", &old_primary_dead, nullptr},
                            {"token-file", nullptr, &token_file}};
  std::vector<std::string> positional;
  Status status = ParseFlags(args, flags, &positional);
  if (status.ok() && !help && positional.size() != 1) {
    status = Status::InvalidArgument(
        positional.empty() ? (coordinator.empty() ? "which replica? give ucx://HOST:PORT"
                                                  : "which node? give NAME")
                           : "too many arguments");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "replaydb promote: %s\nusage: replaydb %s\n", status.message().c_str(),
                 std::string(kPromoteUsage).c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf(
        "usage: replaydb %s\n  %s\n\n"
        "  --old-primary-dead  the old primary cannot be reached and is known to be dead:\n"
        "                      promote without fencing it (otherwise refused then)\n"
        "  --token-file F      a token of F for the replica (and its first token then)\n"
        "  --coordinator file://PATH  promote node NAME of that static cluster file, and\n"
        "                      make the file name it the primary (the other nodes follow)\n\n"
        "The replica fences its old primary (which then refuses writes, naming the new\n"
        "one), applies its log to the end, and takes writes as the primary of the next\n"
        "epoch (docs/replication.md, \"Failover\").\n",
        std::string(kPromoteUsage).c_str(), std::string(kPromoteSummary).c_str());
    return kExitOk;
  }
  ConnectOptions o;
  o.client_name = "replaydb promote";
  o.token_file = token_file;
  PromoteOptions p;
  p.old_primary_dead = old_primary_dead;
  Result<uint64_t> epoch = uint64_t{0};
  if (!coordinator.empty()) {
    epoch = PromoteNode(coordinator, positional[0], p, o);
  } else {
    Result<std::unique_ptr<DB>> db = DB::Connect(positional[0], o);
    epoch = db.ok() ? (*db)->Promote(p) : Result<uint64_t>(db.status());
  }
  if (!epoch.ok()) {
    std::fprintf(stderr, "replaydb promote: %s\n", epoch.status().ToString().c_str());
    return kExitFailure;
  }
  std::printf("promoted %s: the primary of epoch %llu\n", positional[0].c_str(),
              static_cast<unsigned long long>(*epoch));
  return kExitOk;
}

}  // namespace replaydb::tools
