// The etcd coordinator (coordinator.h): etcd 3.4's v3 API through its
// HTTP/JSON gateway, with libcurl.
#ifndef REPLAYDB_RDMA_COORD_ETCD_H_
#define REPLAYDB_RDMA_COORD_ETCD_H_

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "rdma/coord/coordinator.h"

namespace replaydb::rdma::coord {

class EtcdCoordinator final : public Coordinator {
 public:
  // `address`: etcd://HOST:PORT[,HOST:PORT...]/CLUSTER (InvalidArgument
  // naming it otherwise). Connects at the first request.
  static Result<std::unique_ptr<EtcdCoordinator>> Open(const std::string& address,
                                                       const CoordinatorOptions& options);
  ~EtcdCoordinator() override;
  const std::string& address() const override { return address_; }
  Result<std::optional<LeaderState>> Leader() override;
  Result<std::vector<NodeState>> Nodes() override;
  Status Publish(const NodeState& me) override;
  Status KeepAlive() override;
  Result<LeaderState> Campaign(const NodeState& me) override;
  Status Resign() override;
  Result<uint64_t> LastEpoch() override;
  Status MarkEpoch(uint64_t epoch, const std::optional<Handover>& from) override;
  Result<std::optional<wal::LogPosition>> HandedOver(uint64_t epoch) override;

 private:
  EtcdCoordinator(std::string address, std::vector<std::string> endpoints, std::string cluster,
                  const CoordinatorOptions& options);
  // POSTs `body` to `path` of the first endpoint that answers (the one
  // that answered last first): the reply's body. Unavailable naming each
  // endpoint's failure when none answers; an HTTP error: Unavailable, or
  // FailedPrecondition for an unknown lease, with etcd's message.
  Result<std::string> Post(const std::string& path, const std::string& body);
  Result<nlohmann::json> Call(const std::string& path, const nlohmann::json& body);
  Result<LeaderState> ParseLeader(const nlohmann::json& kv) const;

  const std::string address_;
  const std::vector<std::string> endpoints_;  // http://HOST:PORT
  const std::string prefix_;                  // /replaydb/CLUSTER/
  const CoordinatorOptions options_;
  size_t current_ = 0;    // the endpoint that answered last
  void* curl_ = nullptr;  // CURL*, made at the first request
  std::string lease_;     // the session's lease id; empty: none
};

}  // namespace replaydb::rdma::coord

#endif  // REPLAYDB_RDMA_COORD_ETCD_H_
