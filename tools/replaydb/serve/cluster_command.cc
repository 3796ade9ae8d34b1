#include "tools/replaydb/serve/cluster_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "replaydb/cluster.h"
#include "tools/replaydb/json.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {

int ClusterCommand(std::span<const std::string> args) {
  bool help = false;
  bool json = false;
  const FlagSpec flags[] = {{"help", &help, nullptr}, {"json", &json, nullptr}};
  std::vector<std::string> positional;
  Status status = ParseFlags(args, flags, &positional);
  if (status.ok() && !help && positional.size() != 1) {
    status = Status::InvalidArgument(positional.empty()
                                         ? "which cluster? give etcd://HOST:PORT/CLUSTER or "
                                           "file://PATH"
                                         : "too many arguments");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "replaydb cluster: %s\nusage: replaydb %s\n", status.message().c_str(),
                 std::string(kClusterUsage).c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf("usage: replaydb %s\n  %s\n", std::string(kClusterUsage).c_str(),
                std::string(kClusterSummary).c_str());
    return kExitOk;
  }
  Result<ClusterView> view = DescribeCluster(positional[0]);
  if (!view.ok()) {
    std::fprintf(stderr, "replaydb cluster: %s\n", view.status().ToString().c_str());
    return kExitFailure;
  }
  Json nodes = Json::array();
  for (const ClusterMember& n : view->nodes) {
    nodes.push_back({{"name", n.name},
                     {"address", n.address},
                     {"role", n.role},
                     {"epoch", n.epoch},
                     {"following", n.following},
                     {"segment", n.segment},
                     {"offset", n.offset},
                     {"eligible", n.eligible}});
  }
  if (json) {
    std::printf("%s\n", DumpJson(Json{{"primary", view->primary},
                                      {"primary_address", view->primary_address},
                                      {"epoch", view->epoch},
                                      {"nodes", nodes}})
                            .c_str());
    return kExitOk;
  }
  if (view->primary.empty()) {
    std::printf("primary: none elected\n");
  } else {
    std::printf("primary: %s (%s), epoch %llu\n", view->primary.c_str(),
                view->primary_address.c_str(), static_cast<unsigned long long>(view->epoch));
  }
  std::printf("%-12s %-24s %-9s %-6s %-24s %-8s %-10s %s\n", "name", "address", "role", "epoch",
              "following", "segment", "offset", "eligible");
  for (const ClusterMember& n : view->nodes) {
    std::printf("%-12s %-24s %-9s %-6llu %-24s %-8llu %-10llu %s\n", n.name.c_str(),
                n.address.c_str(), n.role.c_str(), static_cast<unsigned long long>(n.epoch),
                n.following.empty() ? "-" : n.following.c_str(),
                static_cast<unsigned long long>(n.segment),
                static_cast<unsigned long long>(n.offset), n.eligible ? "yes" : "no");
  }
  return kExitOk;
}

}  // namespace replaydb::tools
