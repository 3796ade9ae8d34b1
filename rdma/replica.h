// A read replica's follower (docs/replication.md): a thread that reads its
// primary's write-ahead log as it is written (FetchLog, rdma/WIRE.md) and
// applies it to the local database (DBImpl::ApplyShipped), keeping where it
// is in the primary's log in the database directory's REPLICA file, so
// that a restarted replica goes on from there. It reconnects with backoff
// when the primary is gone and says so in its log lines.
//
// Thread safety: every method may be called from any thread.
#ifndef REPLAYDB_RDMA_REPLICA_H_
#define REPLAYDB_RDMA_REPLICA_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/db/db_impl.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::rdma {

struct ReplicaOptions {
  // The primary's address, ucx://HOST:PORT.
  std::string primary;
  // The replica's name for the primary (default: HOSTNAME:DIR).
  std::string name;
  // A token the primary accepts (empty: none).
  std::string token;
  // The most log bytes one read brings.
  size_t max_bytes = 4 << 20;
  // How long the primary holds a read for records to come.
  std::chrono::milliseconds wait{200};
  // Liveness of the connection (the primary's ServerOptions::heartbeat).
  std::chrono::milliseconds heartbeat{100};
  // How long a connection to the primary may take.
  std::chrono::milliseconds connect_timeout{2000};
  // Lines for the server's log (connected, lost, errors). May be empty.
  std::function<void(const std::string& line)> log;
};

struct ReplicaState {
  wal::LogPosition position;     // in the primary's log: applied up to here
  wal::LogPosition primary_end;  // the primary's log's end at the last read
  bool connected = false;
  std::string last_error;  // the last failure, cleared by a good read
  // The last read the primary answered, and the last that brought this
  // replica to the primary's end (zero: none yet): a replica whose last
  // read caught it up was in sync when it last heard from its primary
  // (what lets it stand for election: docs/replication.md, "Automatic
  // failover").
  std::chrono::steady_clock::time_point last_read{};
  std::chrono::steady_clock::time_point caught_up_at{};
  // The primary's log no longer holds this replica's place (its reads are
  // refused with DBImpl::kSnapshotNeeded): it follows again only from a new
  // snapshot (Server::NeedsSnapshot). Cleared by a good read.
  bool needs_snapshot = false;
};

// The name a replica of database directory `dir` goes by when
// ReplicaOptions::name is empty: this host's name and the directory.
std::string DefaultReplicaName(const std::string& dir);

// A new replica's start (docs/replication.md, "Snapshots"): when `dir`
// holds no database yet (it is missing or empty, or an install was cut
// short: DIR/snapshot.partial is there), or holds a replica of
// options.primary whose place the primary's log no longer holds (its
// FetchLog is refused with DBImpl::kSnapshotNeeded; told to options.log),
// copies a snapshot of
// options.primary's database into it (GetSnapshot, then its files in
// chunks of options.max_bytes) and installs it
// (engine::DBImpl::InstallSnapshot), telling `progress` (may be empty) as
// "snapshot of PRIMARY", in bytes. A directory holding another database is
// left as it is (OK), as is a replica whose primary cannot be reached. Unavailable when the primary
// cannot be reached within options.connect_timeout; the primary's error otherwise. On failure the
// directory is left for the next start to install afresh.
Status CopySnapshotIfNew(const std::string& dir, ReplicaOptions options,
                         const ProgressCallback& progress);

class Replica {
 public:
  // Reads DIR/REPLICA (engine::DBImpl::ReadReplicaFile; FailedPrecondition
  // when it names another primary,
  // Corruption when it does not parse) and starts following. `db` must
  // outlive the replica.
  static Result<std::unique_ptr<Replica>> Start(engine::DBImpl* db, ReplicaOptions options);
  // Stops following (a read in flight ends within its wait).
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  ReplicaState state() const;
  // Stops following and saves its place; state() still answers.
  void Stop();

 private:
  class Impl;
  explicit Replica(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_REPLICA_H_
