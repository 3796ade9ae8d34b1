// replaydb::Server (include/replaydb/server.h): an RpcServer running the
// database's requests (rdma/db_service.h).
#include "replaydb/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "rdma/db_service.h"
#include "rdma/remote_db.h"
#include "rdma/rpc.h"
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
             std::string host)
      : service_(std::move(service)), server_(std::move(server)), host_(std::move(host)) {}
  // The server first (its threads call the service), then the service.
  ~ServerImpl() override { server_.reset(); }
  std::string address() const override {
    return "ucx://" + host_ + ":" + std::to_string(server_->port());
  }

 private:
  std::unique_ptr<rdma::DbService> service_;
  std::unique_ptr<rdma::RpcServer> server_;
  std::string host_;
};

}  // namespace

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
  if (threads < 1 || threads > 1024) {
    return Status::InvalidArgument("server: threads must be 1 to 1024, not " +
                                   std::to_string(threads));
  }
  return Status::OK();
}

Result<std::unique_ptr<Server>> Server::Start(DB* db, const ServerOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(options.Validate());
  std::string host;
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseListen(options, &host, &port));
  rdma::RpcServerOptions o;
  o.server_name = "replaydb serve " + db->path();
  o.threads = options.threads;
  o.transport.workers = options.workers;
  o.transport.listen_host = host;
  o.transport.listen_port = port;
  o.transport.heartbeat = options.heartbeat;
  o.log = options.log;
  if (!options.token_file.empty()) {
    REPLAYDB_ASSIGN_OR_RETURN(o.tokens, rdma::ReadTokenFile(options.token_file));
  }
  auto service = std::make_unique<rdma::DbService>(db);
  rdma::RequestHandler handler;
  rdma::ServeWith(service.get(), &o, &handler);
  REPLAYDB_ASSIGN_OR_RETURN(auto server, rdma::RpcServer::Start(o, std::move(handler)));
  return std::unique_ptr<Server>(new ServerImpl(std::move(service), std::move(server), host));
}

}  // namespace replaydb
