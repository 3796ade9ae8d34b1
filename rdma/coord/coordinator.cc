// Coordinator::Open and the static file's coordinator (coordinator.h).
#include "rdma/coord/coordinator.h"

#include <sstream>
#include <utility>

#include "rdma/coord/etcd.h"
#include "replaydb/env.h"

namespace replaydb::rdma::coord {
namespace {

struct StaticFile {
  std::vector<NodeState> nodes;  // name and address
  std::string primary;           // a node's name
};

Result<StaticFile> ReadStaticFile(const std::string& path) {
  std::string text;
  Status read = Env::Default()->ReadFileToString(path, &text);
  if (!read.ok()) return read.WithContext("the coordinator's static file");
  StaticFile f;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const auto bad = [&](const std::string& why) {
      return Status::Corruption(path + ", line " + std::to_string(number) + ": " + why + ": '" +
                                line + "' (lines: 'node NAME ucx://HOST:PORT', 'primary NAME')");
    };
    std::istringstream words(line);
    std::string word;
    std::vector<std::string> w;
    while (words >> word && word[0] != '#') w.push_back(word);
    if (w.empty()) continue;
    if (w[0] == "node" && w.size() == 3) {
      for (const NodeState& n : f.nodes) {
        if (n.name == w[1]) return bad("node '" + w[1] + "' is named twice");
      }
      if (w[2].rfind("ucx://", 0) != 0) return bad("the address is not ucx://HOST:PORT");
      NodeState n;
      n.name = w[1];
      n.address = w[2];
      f.nodes.push_back(std::move(n));
    } else if (w[0] == "primary" && w.size() == 2) {
      if (!f.primary.empty()) return bad("a second primary line");
      f.primary = w[1];
    } else {
      return bad("not a line of a static cluster file");
    }
  }
  if (f.primary.empty()) return Status::Corruption(path + " names no primary ('primary NAME')");
  bool named = false;
  for (NodeState& n : f.nodes) {
    n.role = n.name == f.primary ? "primary" : "replica";
    named |= n.name == f.primary;
  }
  if (!named)
    return Status::Corruption(path + ": the primary '" + f.primary + "' is no node of it");
  return f;
}

class StaticCoordinator final : public Coordinator {
 public:
  StaticCoordinator(std::string address, std::string path)
      : address_(std::move(address)), path_(std::move(path)) {}
  const std::string& address() const override { return address_; }
  Result<std::optional<LeaderState>> Leader() override {
    REPLAYDB_ASSIGN_OR_RETURN(const StaticFile f, ReadStaticFile(path_));
    for (const NodeState& n : f.nodes) {
      if (n.name == f.primary) {
        return std::optional<LeaderState>(LeaderState{n.name, n.address, 0, n.name == me_});
      }
    }
    return std::optional<LeaderState>();
  }
  Result<std::vector<NodeState>> Nodes() override {
    REPLAYDB_ASSIGN_OR_RETURN(StaticFile f, ReadStaticFile(path_));
    return std::move(f.nodes);
  }
  Status Publish(const NodeState& me) override {
    REPLAYDB_ASSIGN_OR_RETURN(const StaticFile f, ReadStaticFile(path_));
    for (const NodeState& n : f.nodes) {
      if (n.name != me.name) continue;
      if (n.address != me.address) {
        return Status::InvalidArgument(path_ + " names node '" + me.name + "' at " + n.address +
                                       ", not at " + me.address);
      }
      me_ = me.name;
      return Status::OK();
    }
    return Status::NotFound(path_ + " names no node '" + me.name + "'");
  }
  Status KeepAlive() override { return Status::OK(); }
  Result<LeaderState> Campaign(const NodeState& me) override {
    REPLAYDB_ASSIGN_OR_RETURN(const std::optional<LeaderState> leader, Leader());
    if (leader && leader->name == me.name) return *leader;
    return Status::FailedPrecondition(
        "the static coordinator " + address_ + " elects no one: it names '" +
        (leader ? leader->name : std::string()) +
        "' the primary; promote by hand (replaydb promote NODE --coordinator " + address_ + ")");
  }
  Status Resign() override { return Status::OK(); }
  Result<uint64_t> LastEpoch() override { return uint64_t{0}; }
  Status MarkEpoch(uint64_t, const std::optional<Handover>&) override { return Status::OK(); }
  Result<std::optional<wal::LogPosition>> HandedOver(uint64_t) override {
    return std::optional<wal::LogPosition>();
  }

 private:
  const std::string address_;
  const std::string path_;
  std::string me_;  // the name Publish was given
};

}  // namespace

Result<std::unique_ptr<Coordinator>> Coordinator::Open(const std::string& address,
                                                       const CoordinatorOptions& options) {
  if (address.rfind("etcd://", 0) == 0) {
    REPLAYDB_ASSIGN_OR_RETURN(auto etcd, EtcdCoordinator::Open(address, options));
    return std::unique_ptr<Coordinator>(std::move(etcd));
  }
  if (address.rfind("file://", 0) == 0 && address.size() > 7) {
    const std::string path = address.substr(7);
    REPLAYDB_RETURN_IF_ERROR(ReadStaticFile(path).status());
    return std::unique_ptr<Coordinator>(new StaticCoordinator(address, path));
  }
  return Status::InvalidArgument("coordinator address '" + address +
                                 "': give etcd://HOST:PORT[,HOST:PORT...]/CLUSTER or "
                                 "file://PATH");
}

Status SetStaticPrimary(const std::string& path, const std::string& name) {
  REPLAYDB_ASSIGN_OR_RETURN(const StaticFile f, ReadStaticFile(path));
  bool named = false;
  for (const NodeState& n : f.nodes) named |= n.name == name;
  if (!named) return Status::NotFound(path + " names no node '" + name + "'");
  std::string text;
  REPLAYDB_RETURN_IF_ERROR(Env::Default()->ReadFileToString(path, &text));
  // Every line as it was but the primary's.
  std::istringstream lines(text);
  std::string line;
  std::string out;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    out += (first == "primary" ? "primary " + name : line) + "\n";
  }
  return Env::Default()->WriteFileAtomic(path, out);
}

}  // namespace replaydb::rdma::coord
