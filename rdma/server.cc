// replaydb::Server (include/replaydb/server.h): an RpcServer running the
// database's requests (rdma/db_service.h).
#include "replaydb/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "engine/db/db_impl.h"
#include "rdma/db_service.h"
#include "rdma/remote_db.h"
#include "rdma/replica.h"
#include "rdma/rpc.h"
#include "rdma/shared_slabs.h"
#include "rdma/token.h"
#include "rdma/transport.h"

namespace replaydb {
namespace {

// "localhost", or an IPv4 address in 127.0.0.0/8 (a literal address only: a
// host name that starts with "127." may be anywhere).
bool IsLoopback(const std::string& host) {
  in_addr a{};
  return host == "localhost" ||
         (::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127);
}

class ServerImpl final : public Server {
 public:
  ServerImpl(std::unique_ptr<rdma::DbService> service, std::unique_ptr<rdma::RpcServer> server,
             std::string host, DB* db, std::unique_ptr<DB> owned = nullptr)
      : service_(std::move(service)),
        server_(std::move(server)),
        host_(std::move(host)),
        port_(server_->port()),
        db_(db),
        owned_(std::move(owned)) {}
  // The server first (its threads call the service), then the service (the
  // leases' pins), then an owned database (its hot tiers' slabs, which keep
  // the transport's UCP context until they are unmapped).
  // The follower stops first (it applies into hot tiers in the transport's
  // memory) but goes after the server (requests read its state), before
  // the database it applies to.
  ~ServerImpl() override {
    if (replica_) replica_->Stop();  // (it applies into the transport's memory)
    server_.reset();
    replica_.reset();
    service_.reset();
    owned_.reset();
  }
  std::string address() const override {
    return "ucx://" + host_ + ":" + std::to_string(port_);
  }
  DB* db() const override { return db_; }
  bool NeedsSnapshot() const override { return replica_ && replica_->state().needs_snapshot; }
  // Follows a primary's log (Server::Open with replica_of).
  void SetReplica(std::unique_ptr<rdma::Replica> replica) { replica_ = std::move(replica); }
  rdma::ServedParts parts() const {
    return rdma::ServedParts{service_.get(),
                             owned_ ? static_cast<engine::DBImpl*>(owned_.get()) : nullptr,
                             replica_.get()};
  }
  Status Close() override {
    if (replica_) replica_->Stop();
    server_.reset();
    replica_.reset();
    service_.reset();
    if (!owned_) return Status::OK();
    const Status checkpointed = owned_->Checkpoint();
    owned_.reset();
    db_ = nullptr;
    return checkpointed;
  }

 private:
  std::unique_ptr<rdma::DbService> service_;
  std::unique_ptr<rdma::RpcServer> server_;
  std::string host_;
  uint16_t port_ = 0;
  DB* db_;
  std::unique_ptr<DB> owned_;
  std::unique_ptr<rdma::Replica> replica_;
};

}  // namespace

namespace rdma {
ServedParts PartsOf(Server& server) {
  return static_cast<ServerImpl&>(server).parts();
}
}  // namespace rdma

namespace {

// The listen address's host and port (0: any free port, allowed here unlike
// in a client's address).
Status ParseListen(const ServerOptions& options, std::string* host, uint16_t* port) {
  std::string parsed = options.listen;
  const bool any_port = parsed.size() > 2 && parsed.compare(parsed.size() - 2, 2, ":0") == 0;
  if (any_port) parsed.back() = '1';
  REPLAYDB_RETURN_IF_ERROR(rdma::ParseAddress(parsed, host, port));
  if (any_port) *port = 0;
  if (!IsLoopback(*host) && options.token_file.empty()) {
    return Status::InvalidArgument("listen address " + options.listen +
                                   ": an address other than loopback needs a token file "
                                   "(--token-file), so that only its holders get in");
  }
  return Status::OK();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> UcxSettings() { return rdma::UcxSettings(); }

Status ServerOptions::Validate() const {
  std::string host;
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseListen(*this, &host, &port));
  if (!token_file.empty()) REPLAYDB_RETURN_IF_ERROR(rdma::ReadTokenFile(token_file).status());
  if (workers < 1 || workers > 64) {
    return Status::InvalidArgument("server: workers must be 1 to 64, not " +
                                   std::to_string(workers));
  }
  if (read_lease < std::chrono::milliseconds(1) || read_lease > std::chrono::minutes(10)) {
    return Status::InvalidArgument("server: read_lease must be 1 ms to 10 min, not " +
                                   std::to_string(read_lease.count()) + " ms");
  }
  if (threads < 1 || threads > 1024) {
    return Status::InvalidArgument("server: threads must be 1 to 1024, not " +
                                   std::to_string(threads));
  }
  if (!replica_of.empty()) {
    uint16_t primary_port = 0;
    Status s = rdma::ParseAddress(replica_of, &host, &primary_port);
    if (!s.ok()) return Status::InvalidArgument("server: replica_of: " + s.message());
  }
  return Status::OK();
}

namespace {

// The RpcServer's options for `options`, with `service` as its handler.
Result<rdma::RpcServerOptions> RpcOptions(const ServerOptions& options, const std::string& name,
                                          rdma::DbService* service,
                                          rdma::RequestHandler* handler, std::string* host) {
  REPLAYDB_RETURN_IF_ERROR(options.Validate());
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseListen(options, host, &port));
  rdma::RpcServerOptions o;
  o.server_name = "replaydb serve " + name;
  o.threads = options.threads;
  o.transport.workers = options.workers;
  o.transport.listen_host = *host;
  o.transport.listen_port = port;
  o.transport.heartbeat = options.heartbeat;
  o.log = options.log;
  if (!options.token_file.empty()) {
    REPLAYDB_ASSIGN_OR_RETURN(o.tokens, rdma::ReadTokenFile(options.token_file));
  }
  rdma::ServeWith(service, &o, handler);
  return o;
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(DB* db, const ServerOptions& options) {
  if (!options.replica_of.empty()) {
    return Status::InvalidArgument(
        "server: a replica opens its own database (Server::Open), not one it is given");
  }
  auto service = std::make_unique<rdma::DbService>(db);
  rdma::RequestHandler handler;
  std::string host;
  REPLAYDB_ASSIGN_OR_RETURN(rdma::RpcServerOptions o,
                            RpcOptions(options, db->path(), service.get(), &handler, &host));
  REPLAYDB_ASSIGN_OR_RETURN(auto server, rdma::RpcServer::Start(o, std::move(handler)));
  return std::unique_ptr<Server>(new ServerImpl(std::move(service), std::move(server), host, db));
}

Result<std::unique_ptr<Server>> Server::Open(const std::string& dir, const DBOptions& db_options,
                                             const ServerOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(db_options.Validate());
  auto service = std::make_unique<rdma::DbService>(nullptr);
  rdma::RequestHandler handler;
  std::string host;
  REPLAYDB_ASSIGN_OR_RETURN(rdma::RpcServerOptions o,
                            RpcOptions(options, dir, service.get(), &handler, &host));
  REPLAYDB_ASSIGN_OR_RETURN(auto server, rdma::RpcServer::Start(o, std::move(handler)));
  // The transport first: the tables' hot tiers are its memory.
  auto slabs = std::make_shared<rdma::SharedSlabs>(&server->transport());
  std::string token;
  if (!options.token_file.empty()) {
    REPLAYDB_ASSIGN_OR_RETURN(const std::vector<rdma::Token> tokens,
                              rdma::ReadTokenFile(options.token_file));
    token = tokens.front().secret;
  }
  if (!options.replica_of.empty()) {
    rdma::ReplicaOptions r;
    r.primary = options.replica_of;
    r.heartbeat = options.heartbeat;
    r.token = token;
    r.log = options.log;
    const Status copied = rdma::CopySnapshotIfNew(dir, std::move(r), options.progress);
    if (!copied.ok()) {
      server.reset();
      return copied;
    }
  }
  Result<std::unique_ptr<DB>> db =
      engine::DBImpl::Open(db_options, dir, slabs, /*replica=*/!options.replica_of.empty());
  if (!db.ok()) {
    server.reset();
    return db.status();
  }
  DB* raw = db->get();
  std::unique_ptr<rdma::Replica> replica;
  if (!options.replica_of.empty()) {
    rdma::ReplicaOptions r;
    r.primary = options.replica_of;
    r.heartbeat = options.heartbeat;
    r.log = options.log;
    r.token = token;
    Result<std::unique_ptr<rdma::Replica>> started =
        rdma::Replica::Start(static_cast<engine::DBImpl*>(raw), std::move(r));
    if (!started.ok()) {
      server.reset();
      return started.status();
    }
    replica = std::move(started).value();
    service->SetReplicaOf(options.replica_of, replica.get());
  }
  service->SetAddress("ucx://" + host + ":" + std::to_string(server->port()));
  service->SetDb(raw, rdma::InPlaceServing{&server->transport(), std::move(slabs),
                                           options.read_lease, options.log});
  auto served = std::make_unique<ServerImpl>(std::move(service), std::move(server), host, raw,
                                             std::move(db).value());
  served->SetReplica(std::move(replica));
  return std::unique_ptr<Server>(std::move(served));
}

}  // namespace replaydb
