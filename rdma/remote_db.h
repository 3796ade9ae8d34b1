// The client side of a served database (rdma/db_service.h): tables listed,
// opened and sampled over an RpcClient. A first slice of the remote access
// of issue 33: reading (sampling) only; writers, priority updates and the
// rest of the Table interface come next, and with them DB::Connect returning
// the same DB and Table interfaces.
//
// Thread safety: every method may be called from any thread.
#ifndef REPLAYDB_RDMA_REMOTE_DB_H_
#define REPLAYDB_RDMA_REMOTE_DB_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rdma/rpc.h"
#include "replaydb/table.h"

namespace replaydb::rdma {

// "ucx://HOST:PORT" (or "HOST:PORT") as host and port; InvalidArgument
// naming the address otherwise.
Status ParseAddress(const std::string& address, std::string* host, uint16_t* port);

// A trajectory writer on the server (DbService), as TrajectoryWriter: each
// Append returns once the server has the step as durably as a local append
// with the table's sync mode. When this process or its connection goes,
// the server ends the open trajectory truncated; every acknowledged step
// stays. Not thread-safe (one thread at a time).
class RemoteWriter {
 public:
  // Ends the writer on the server (its open trajectory truncated).
  ~RemoteWriter();
  RemoteWriter(const RemoteWriter&) = delete;
  RemoteWriter& operator=(const RemoteWriter&) = delete;
  // As TrajectoryWriter::Append: one tensor per column, each the column's
  // dtype and shape (InvalidArgument naming the column otherwise, checked
  // here before anything is sent).
  Status Append(std::span<const ConstTensor> step, std::optional<double> priority = std::nullopt);
  Status End(EndReason reason);
  uint64_t trajectory_id() const { return trajectory_id_; }
  int64_t num_steps() const { return num_steps_; }

 private:
  friend class RemoteTable;
  RemoteWriter(std::shared_ptr<RpcClient> client, const TableSpec* spec, uint64_t id)
      : client_(std::move(client)), spec_(spec), id_(id) {}
  std::shared_ptr<RpcClient> client_;
  const TableSpec* spec_;  // the RemoteTable's, which outlives the writer
  uint64_t id_;
  uint64_t trajectory_id_ = 0;
  int64_t num_steps_ = 0;
  std::string step_;  // the payload, reused
};

class RemoteTable {
 public:
  // A writer on the server, owned by this connection.
  Result<std::unique_ptr<RemoteWriter>> NewWriter();
  const TableSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  // Table::Sample on the server. options.timeout bounds the wait (for the
  // rate limiter, and for the reply); `gather = false` is not served.
  Status Sample(int64_t batch_size, const SampleOptions& options, SampleBatch* out);
  Status Seed(uint64_t seed);

 private:
  friend class RemoteDB;
  RemoteTable(std::shared_ptr<RpcClient> client, TableSpec spec)
      : client_(std::move(client)), spec_(std::move(spec)) {}
  std::shared_ptr<RpcClient> client_;
  TableSpec spec_;
};

struct RemoteOptions {
  std::string client_name = "replaydb client";
  std::chrono::milliseconds connect_timeout{10000};
  // Calls without a timeout of their own wait this long for their reply.
  std::chrono::milliseconds call_timeout{60000};
};

class RemoteDB {
 public:
  // Connects to `replaydb serve` at `address` ("ucx://HOST:PORT").
  static Result<std::unique_ptr<RemoteDB>> Connect(const std::string& address,
                                                   const RemoteOptions& options = {});
  Result<std::vector<std::string>> ListTables();
  Result<std::shared_ptr<RemoteTable>> GetTable(const std::string& name);
  const std::string& address() const { return address_; }

 private:
  RemoteDB(std::shared_ptr<RpcClient> client, std::string address, RemoteOptions options)
      : client_(std::move(client)), address_(std::move(address)), options_(options) {}
  std::shared_ptr<RpcClient> client_;
  std::string address_;
  RemoteOptions options_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_REMOTE_DB_H_
