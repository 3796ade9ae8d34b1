// Serving a database to other processes and nodes over UCX (the network
// tier, rdma/; `replaydb serve` is its command). Clients reach it with
// DB::Connect; what is served: rdma/WIRE.md.
//
// Thread safety: Start and the destructor from one thread; the server's own
// threads call `log` several at once.
#ifndef REPLAYDB_SERVER_H_
#define REPLAYDB_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/status.h"

namespace replaydb {

struct ServerOptions {
  // ucx://HOST:PORT; port 0 picks a free one (Server::address says which).
  // An address other than loopback (127.0.0.0/8, localhost) needs
  // token_file.
  std::string listen = "ucx://127.0.0.1:7077";
  // A file of tokens (rdma/token.h: lines of "read-write SECRET" or
  // "read-only SECRET", mode 600): when set, a client must prove one by
  // challenge and response (HMAC-SHA256; the token never crosses the wire),
  // and a read-only token's writes are refused. Empty: no tokens (loopback
  // only).
  std::string token_file;
  // Threads that run the transport (one UCP worker each), and threads that
  // run requests (they may wait for the rate limiter). Connections go to the
  // workers in turn, and a worker serves its connections' appends itself:
  // busy writers on their own connections each want a worker (four actors
  // streaming large steps: --workers 4), where the cores allow.
  int workers = 2;
  int threads = 4;
  // Liveness: each connection carries a heartbeat this often and ends after
  // ten intervals in which nothing came from the client (1 s at the default). Clients must use
  // the same (ConnectOptions::heartbeat). Default: 100 ms.
  std::chrono::milliseconds heartbeat{100};
  // A line per connection accepted, named, refused and ended. May be empty.
  std::function<void(const std::string& line)> log;
  // In-place samples (a server that opened its database, Server::Open, on
  // connections whose reads are one-sided): a client's sample holds its
  // windows' blocks (not freed, not used again) until the client has read
  // them, at most this long. Default: 5 s; 1 ms to 10 min.
  std::chrono::milliseconds read_lease{5000};
  // ucx://HOST:PORT of a primary (Server::Open only): this server is its
  // read replica (docs/replication.md). It applies the primary's log as the
  // primary writes it, keeps its place in DIR/REPLICA, and serves reads,
  // samples and lookups; requests that change data are refused
  // (FailedPrecondition naming the primary). DIR must be empty or a replica
  // of the same primary. With token_file, its first token is presented to
  // the primary. Empty: a primary (or a lone server).
  //
  // A new replica (DIR missing or empty) first copies a snapshot of the
  // primary (docs/replication.md, "Snapshots"), then follows its log from
  // there; `progress` (may be empty) is told how the copy goes.
  std::string replica_of;
  ProgressCallback progress;

  // OK, or InvalidArgument naming what is wrong (the address malformed or
  // not loopback, counts out of range). Start checks it too.
  Status Validate() const;
};

class Server {
 public:
  // Serves `db` (which must outlive the server). InvalidArgument naming
  // the address when it is malformed, or not loopback without a token file,
  // or naming the token file when it is unusable; IOError when the address
  // cannot be listened on.
  static Result<std::unique_ptr<Server>> Start(DB* db, const ServerOptions& options);
  // Listens, then opens the database at `dir` (as DB::Open) and serves it;
  // the server owns it. Its tables' hot tiers in host memory are then
  // memory of the server's transport, which clients whose connections read
  // one-sidedly (shared memory on one host with UCX_MM_ERROR_HANDLING=y,
  // RDMA) read without the server's CPU: a sample answered with where its
  // windows lie (rdma/WIRE.md, "A sample in place"). Until the database is
  // open, requests are answered Unavailable. Errors as Start and DB::Open.
  static Result<std::unique_ptr<Server>> Open(const std::string& dir,
                                              const DBOptions& db_options,
                                              const ServerOptions& options);
  // Ends every connection (clients see Unavailable) and stops; a database
  // the server opened is closed (without a checkpoint: see Close).
  virtual ~Server() = default;
  // ucx://HOST:PORT, the port the one listened on.
  virtual std::string address() const = 0;
  // The database served (null once Close closed one the server opened).
  virtual DB* db() const = 0;
  // Ends every connection; then, for a database the server opened,
  // checkpoints and closes it (the checkpoint's status). Once.
  virtual Status Close() = 0;
  // A replica (ServerOptions::replica_of) whose primary's log no longer
  // holds its place (it was away while the primary's checkpoints removed
  // that log): it applies nothing more (its follower asks again each
  // second, and is refused). Closed and opened again on its directory, it
  // copies a new snapshot and follows from there: a program that runs a
  // replica's Server polls this and does so (replaydb serve and a cluster's
  // node do). False for any other server, and once promoted.
  virtual bool NeedsSnapshot() const = 0;
};

// The UCX settings that replaydb's connections (servers and DB::Connect's
// clients) use where the environment does not set them: (NAME, VALUE) for
// UCX_NAME, e.g. TCP segments of 256 KiB. A process's first connection sets
// them in its environment (UCX reads them there). ucx_perftest run as a
// ceiling for comparison should run with the same.
std::vector<std::pair<std::string, std::string>> UcxSettings();

// What one-sided reads give on this host, over the transports UCX picks for
// loopback here (UCX_TLS, UCX_MM_ERROR_HANDLING: rdma/transport.h): a
// transport shares `shared_bytes` of memory and another, with its own UCP
// context and worker as another process would have, reads `reads` pieces of
// `read_bytes` at random places of it, made at once (a sample's windows),
// batch after batch for `duration`. A diagnostic, and `replaydb bench`'s
// remote_read row. InvalidArgument for sizes that do not fit
// (read_bytes > shared_bytes, or zero); NotSupported, naming the lanes,
// where the reads would not be one-sided (TCP: UCX emulates them with
// messages the peer answers, and UCX 1.13 aborts the peer when an answer
// cannot go out); Unavailable when the transports cannot connect or a read
// fails.
struct TransportReadProbe {
  double bytes_per_second = 0;
  // Whether the reads took none of the peer's CPU (shared memory, RDMA):
  // always true in a probe that ran.
  bool one_sided = false;
};
Result<TransportReadProbe> ProbeTransportReads(size_t shared_bytes, size_t read_bytes, int reads,
                                               std::chrono::milliseconds duration);

}  // namespace replaydb

#endif  // REPLAYDB_SERVER_H_
