// The client side of a served database (rdma/db_service.h): DB::Connect's
// DB, its Tables and their writers, each call a request over an RpcClient
// (rdma/rpc.h) in the wire protocol (rdma/WIRE.md).
//
// The calls into GPU memory (SampleToDevice, LookupToDevice,
// NewDeviceSampler, UpdatePrioritiesFromDevice, a vector writer's
// AppendFromDevice) run through this host's memory: the served host call,
// and copies to or from the caller's device arrays. What a remote database
// does not do (yet), each NotSupported naming it: the maintenance calls
// (ExportTable, ImportTable, Wal, Verify, Compact: run them on the server's
// machine with `replaydb DIR`).
//
// Thread safety: as DB and Table (every method from any thread); writers as
// local ones (one thread at a time each).
#ifndef REPLAYDB_RDMA_REMOTE_DB_H_
#define REPLAYDB_RDMA_REMOTE_DB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "rdma/rpc.h"
#include "replaydb/db.h"
#include "replaydb/table.h"

namespace replaydb::rdma {

// "ucx://HOST:PORT" (or "HOST:PORT") as host and port; InvalidArgument
// naming the address otherwise.
Status ParseAddress(const std::string& address, std::string* host, uint16_t* port);

class Connection;

// The trajectory of served `table` (a table of DB::Connect's) whose steps
// the remote writer of key `writer_key` sent last, read as
// Table::ReadTrajectory reads steps [first, first + count) (a returning
// primary's salvage, rdma/salvage.h). NotFound where the server knows no
// such trajectory; InvalidArgument when `table` is not a served one.
Status ReadTrajectoryOfWriterKey(Table& table, uint64_t writer_key, int64_t first, int64_t count,
                                 TrajectorySteps* out);

// A served database: what DB::Connect returns. When the server goes, calls
// fail Unavailable; a later call connects again (no sooner than a backoff
// of 50 ms doubling to 5 s allows; a cluster's, to the primary its
// coordinator names then, waiting for one up to the connect timeout).
// Writers belong to the connection they were opened on: after it ended
// (the server ended their trajectories truncated) their calls fail
// Unavailable, and new writers are needed; except a cluster's trajectory
// writers, which resume their trajectory on the next primary
// (docs/replication.md, "Writers through a failover").
class RemoteDB final : public DB {
 public:
  static Result<std::unique_ptr<RemoteDB>> Connect(const std::string& address,
                                                   const ConnectOptions& options = {});
  ~RemoteDB() override;

  Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) override;
  Result<std::shared_ptr<Table>> GetTable(std::string_view name) override;
  Status DropTable(std::string_view name) override;
  // Empty when the server cannot be asked (ListTablesOrError says why).
  std::vector<std::string> ListTables() const override;
  Result<std::vector<std::string>> ListTablesOrError() const;
  // The server's address, ucx://HOST:PORT, or the cluster's
  // (etcd://... or file://...) as given to Connect.
  const std::string& path() const override { return address_; }
  Status Checkpoint() override;
  // Nothing: recovery happened on the server.
  RecoveryInfo recovery_info() const override { return {}; }
  // Whether the server grants this client reads only (its token's).
  bool read_only() const override;
  Status ExportTable(std::string_view table, const std::string& dir,
                     const LongOperationOptions& options) override;
  Result<std::shared_ptr<Table>> ImportTable(const std::string& source_dir,
                                             std::string_view source_table, std::string_view name,
                                             const LongOperationOptions& options) override;
  Result<WalInfo> Wal() const override;
  Result<ReplicationInfo> Replication() const override;
  Result<uint64_t> Promote(const PromoteOptions& options) override;
  Result<VerifyReport> Verify(const LongOperationOptions& options) override;
  Status Compact(const LongOperationOptions& options) override;

 private:
  RemoteDB(std::shared_ptr<Connection> connection, std::string address, ConnectOptions options)
      : connection_(std::move(connection)), address_(std::move(address)), options_(options) {}
  Result<std::shared_ptr<Table>> Opened(const Message& reply, const std::string& what);
  Status NotServed(const std::string& call) const;
  std::shared_ptr<Connection> connection_;
  std::string address_;
  ConnectOptions options_;
  std::shared_ptr<std::atomic<bool>> closed_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_REMOTE_DB_H_
