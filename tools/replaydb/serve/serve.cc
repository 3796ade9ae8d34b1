#include "tools/replaydb/serve/serve.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "replaydb/cluster.h"
#include "replaydb/db.h"
#include "replaydb/server.h"
#include "tools/replaydb/progress_bar.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {
namespace {

Status ParseCount(const std::string& flag, const std::string& value, int lo, int hi, int* out) {
  const char* end = value.data() + value.size();
  if (value.empty() || std::from_chars(value.data(), end, *out).ptr != end || *out < lo ||
      *out > hi) {
    return Status::InvalidArgument("--" + flag + " must be a number from " + std::to_string(lo) +
                                   " to " + std::to_string(hi) + ", not '" + value + "'");
  }
  return Status::OK();
}

// One line to stdout, stamped, whole (threads log at once).
void LogLine(const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
  std::printf("%s replaydb serve: %s\n", stamp, line.c_str());
  std::fflush(stdout);
}

int Fail(const Status& s) {
  std::fprintf(stderr, "replaydb serve: %s\n", s.ToString().c_str());
  return kExitFailure;
}

// Waits for SIGTERM or SIGINT (blocked in `stop`), calling `tick` (may be
// empty) twice a second meanwhile, then `close`s the server (its
// checkpoint's status): the exit status.
int ServeUntilStopped(const sigset_t& stop, const std::function<void()>& tick,
                      const std::function<Status()>& close) {
  int signal = 0;
  const timespec half_second{0, 500'000'000};
  while ((signal = sigtimedwait(&stop, nullptr, &half_second)) < 0) {
    if (tick) tick();
  }
  LogLine(std::string("stopping (") + (signal == SIGTERM ? "SIGTERM" : "SIGINT") + ")");
  const Status closed = close();
  if (!closed.ok()) return Fail(closed.WithContext("checkpoint on stop"));
  LogLine("stopped; database checkpointed and closed");
  return kExitOk;
}

}  // namespace

int ServeCommand(std::span<const std::string> args) {
  bool help = false;
  std::string listen(kServeDefaultListen);
  std::string workers_flag = "2";
  std::string threads_flag = "4";
  std::string token_file;
  std::string replica_of;
  std::string wal_sync = "batch";
  std::string coordinator;
  std::string name;
  std::string ttl_flag = "2000";
  std::string resume_flag = "10000";
  const FlagSpec flags[] = {{"help", &help, nullptr},
                            {"coordinator", nullptr, &coordinator},
                            {"name", nullptr, &name},
                            {"ttl-ms", nullptr, &ttl_flag},
                            {"listen", nullptr, &listen},
                            {"workers", nullptr, &workers_flag},
                            {"threads", nullptr, &threads_flag},
                            {"token-file", nullptr, &token_file},
                            {"replica-of", nullptr, &replica_of},
                            {"wal-sync", nullptr, &wal_sync},
                            {"resume-window-ms", nullptr, &resume_flag}};
  std::vector<std::string> positional;
  Status status = ParseFlags(args, flags, &positional);
  int workers = 0;
  int threads = 0;
  if (status.ok() && !help && positional.size() != 1) {
    status = Status::InvalidArgument(positional.empty() ? "which database? give DIR"
                                                        : "too many arguments");
  }
  if (status.ok()) status = ParseCount("workers", workers_flag, 1, 64, &workers);
  if (status.ok()) status = ParseCount("threads", threads_flag, 1, 1024, &threads);
  int ttl_ms = 0;
  if (status.ok()) status = ParseCount("ttl-ms", ttl_flag, 1, 600000, &ttl_ms);
  int resume_ms = 0;
  if (status.ok()) status = ParseCount("resume-window-ms", resume_flag, 0, 3600000, &resume_ms);
  if (status.ok() && !coordinator.empty() && !replica_of.empty()) {
    status = Status::InvalidArgument(
        "--replica-of and --coordinator: give one (with a coordinator, it names the primary)");
  }
  if (status.ok() && coordinator.empty() && !name.empty()) {
    status = Status::InvalidArgument("--name names this node to a --coordinator: give one");
  }
  DBOptions options;
  options.create_if_missing = true;
  options.writer_resume_window = std::chrono::milliseconds(resume_ms);
  if (status.ok()) {
    status =
        Status::InvalidArgument("--wal-sync must be none, batch or always, not '" + wal_sync + "'");
    for (WalSyncMode mode : {WalSyncMode::kNone, WalSyncMode::kBatch, WalSyncMode::kAlways}) {
      if (wal_sync == WalSyncModeName(mode)) {
        options.wal.sync = mode;
        status = Status::OK();
      }
    }
  }
  ServerOptions o;
  o.listen = listen;
  o.workers = workers;
  o.threads = threads;
  o.token_file = token_file;
  o.replica_of = replica_of;
  o.log = LogLine;
  // A new replica's snapshot: a bar on a terminal, a line as it starts and
  // as it ends.
  ProgressBar bar;
  o.progress = [&bar](const ProgressUpdate& u) {
    if (!u.finished && u.done == 0) {
      LogLine("copying a " + std::string(u.operation) + " (" + std::to_string(u.total) + " bytes)");
    }
    bar.Update(u);
    if (u.finished) {
      LogLine("copied " + std::to_string(u.done) + " of " + std::to_string(u.total) +
              " bytes of the " + std::string(u.operation));
    }
  };
  ClusterOptions cluster;
  cluster.coordinator = coordinator;
  cluster.name = name;
  cluster.ttl = std::chrono::milliseconds(ttl_ms);
  cluster.margin = std::min(cluster.margin, cluster.ttl / 4);
  cluster.poll = std::min(cluster.poll, cluster.ttl / 4);
  cluster.log = LogLine;
  if (status.ok()) status = o.Validate();
  if (status.ok() && !coordinator.empty()) status = cluster.Validate();
  if (!status.ok()) {
    std::fprintf(stderr, "replaydb serve: %s\nusage: replaydb %s\n", status.message().c_str(),
                 std::string(kServeUsage).c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf(
        "usage: replaydb %s\n  %s\n\n"
        "  --listen ucx://HOST:PORT  where to listen (port 0: a free one); an address other\n"
        "                            than loopback needs --token-file\n"
        "  --workers N               transport threads, one UCP worker each (default 2)\n"
        "  --threads N               threads that run requests (default 4)\n"
        "  --token-file F            clients must prove a token of F (lines of 'read-write\n"
        "                            SECRET' or 'read-only SECRET', mode 600)\n"
        "  --replica-of ucx://HOST:PORT  a read replica of that primary: applies its log as\n"
        "                            it is written, serves reads, refuses writes; a new\n"
        "                            one (DIR empty) first copies a snapshot of it\n"
        "                            (docs/replication.md)\n"
        "  --wal-sync MODE           none, batch (default) or always: when the log is\n"
        "                            fsynced (DBOptions::wal.sync, docs/durability.md)\n"
        "  --coordinator ADDR        a node of a cluster whose primary ADDR elects:\n"
        "                            etcd://HOST:PORT/CLUSTER (automatic failover) or\n"
        "                            file://PATH (a static file; replaydb promote);\n"
        "                            docs/replication.md, \"Automatic failover\"\n"
        "  --name NAME               this node's name in the cluster (default: its\n"
        "                            --listen address, whose port must not be 0)\n"
        "  --ttl-ms N                the node's session with the coordinator: a primary\n"
        "                            that stops renewing it is replaced this long after\n"
        "                            (default 2000; whole seconds for etcd)\n"
        "  --resume-window-ms N      promoted, how long the trajectories the old primary\n"
        "                            had open wait for their writers to resume them\n"
        "                            before they end truncated (default 10000)\n",
        std::string(kServeUsage).c_str(), std::string(kServeSummary).c_str());
    return kExitOk;
  }
  // The signals that stop the server wait for sigwait below: blocked in
  // every thread, the server's included (they inherit this mask).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  // A server started again takes its port at once (SO_REUSEADDR on UCX's
  // TCP listener, which UCX 1.13 takes only from the environment), unless
  // the environment says otherwise. Set before any thread reads it.
  ::setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
  const std::string& dir = positional[0];
  if (!coordinator.empty()) {
    auto node = ClusterNode::Start(dir, options, o, cluster);
    if (!node.ok()) return Fail(node.status());
    const ClusterNodeState state = (*node)->state();
    LogLine("listening on " + state.address + ", database " + dir + ", node " + state.name +
            " of " + coordinator + " (" + state.role + ", epoch " + std::to_string(state.epoch) +
            ")");
    return ServeUntilStopped(stop, nullptr, [&] { return (*node)->Close(); });
  }
  // The server opens the database: its hot tiers are then memory that
  // clients on one-sided connections read without this process's CPU.
  auto server = Server::Open(dir, options, o);
  if (!server.ok()) return Fail(server.status());
  LogLine("listening on " + (*server)->address() + ", database " + dir + " (" +
          std::to_string((*server)->db()->ListTables().size()) + " tables)" +
          (token_file.empty() ? "" : ", tokens of " + token_file) +
          (replica_of.empty() ? "" : ", a read replica of " + replica_of));
  // A replica whose primary's log no longer holds its place opens again
  // (on the same port), which copies a new snapshot.
  o.listen = (*server)->address();
  // An open that fails (the primary gone meanwhile, the port taken) is
  // tried again each second.
  std::chrono::steady_clock::time_point retry_at{};
  const auto tick = [&] {
    if (*server != nullptr) {
      if (!(*server)->NeedsSnapshot()) return;
      LogLine(
          "the primary's log no longer holds this replica's place: opening again to copy a "
          "new snapshot");
      if (const Status closed = (*server)->Close(); !closed.ok()) LogLine(closed.ToString());
      server->reset();
    } else if (std::chrono::steady_clock::now() < retry_at) {
      return;
    }
    Result<std::unique_ptr<Server>> again = Server::Open(dir, options, o);
    if (!again.ok()) {
      LogLine("opening again: " + again.status().ToString() + "; trying again in 1 s");
      retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      return;
    }
    *server = std::move(again).value();
    LogLine("listening again on " + (*server)->address());
  };
  // Every connection ends (clients see Unavailable), then the checkpoint.
  return ServeUntilStopped(stop, tick,
                           [&] { return *server != nullptr ? (*server)->Close() : Status::OK(); });
}

}  // namespace replaydb::tools
