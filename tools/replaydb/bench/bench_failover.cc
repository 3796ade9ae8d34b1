// The failover benches (docs/replication.md, "Automatic failover"), each
// against a real etcd (Debian's etcd-server, /usr/bin/etcd, started here
// on free loopback ports) and three `replaydb serve --coordinator` nodes:
//
//   failover/acks={replicated(1),leader_durable,leader}/kills=N
//       A writer streams short trajectories (1 to 4 steps of 28 bytes, each
//       ended: End is the acknowledgment) through the cluster's primary
//       (DB::Connect("etcd://...")), connecting again whenever a call
//       fails. N times, at a random moment (0.3 to 1.5 s after the writer
//       acknowledged again), the primary is killed with SIGKILL; value: the
//       median time from the SIGKILL to the writer's next acknowledged
//       trajectory (through the new primary); the note gives p90 and max.
//       The killed node is started again each time (it rejoins as a
//       replica, from a snapshot). Ceiling "etcd_election", measured in the
//       same run: a candidate campaigning every 10 ms is elected this long
//       after the old leader's last keepalive (the TTL, 2 s, and etcd's
//       lease checks). Target: at most 3 s.
//   failover_lost/acks=.../kills=N
//       the same run's acknowledged trajectories that the last primary does
//       not hold whole, byte for byte (under any id: a killed primary, back,
//       salvages what its successor lacked as new trajectories); the note
//       also says whether the three copies agreed at the end. Target for replicated(1) and
//       leader_durable (nodes' logs sync always): 0. leader: none (loss
//       within max_lag is its contract).
// Nodes use --wal-sync always for leader_durable, batch otherwise.
// `replaydb bench --filter failover --kills 100` is the chaos run (100
// SIGKILLs per mode); `--quick` makes it 2.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "replaydb/cluster.h"
#include "tools/replaydb/bench/bench_common.h"
#include "tools/replaydb/child_process.h"

namespace replaydb::tools {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kEtcd = "/usr/bin/etcd";

double SecondsSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}
TableSpec FailoverSpec(const Acks& acks) {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kU8, Shape{24}}, {"reward", DType::kF32, Shape{}}};
  // Room for every trajectory a long run writes (each takes a block):
  // nothing is evicted, so whatever is missing was lost.
  spec.capacity_steps = 1 << 21;
  spec.block_steps = 4;
  spec.sequence_length = 1;
  spec.acks = acks;
  return spec;
}

// etcd on two free loopback ports, its data in `dir`.
Result<std::unique_ptr<ChildProcess>> StartEtcd(const std::string& dir, std::string* endpoint) {
  const std::string client = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  const std::string peer = "http://127.0.0.1:" + std::to_string(FreeLoopbackPort());
  REPLAYDB_ASSIGN_OR_RETURN(
      auto etcd,
      ChildProcess::Start({kEtcd, "--name", "bench", "--data-dir", dir, "--listen-client-urls",
                           "http://" + client, "--advertise-client-urls", "http://" + client,
                           "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                           "--initial-cluster", "bench=" + peer}));
  if (etcd->WaitFor(std::regex("(ready to serve client requests)"), 30s).empty()) {
    return Status::Internal("etcd did not start: " + etcd->output());
  }
  *endpoint = client;
  return etcd;
}

// A node: `replaydb serve` (this binary) as a process, started again on
// the same port and directory.
struct Node {
  std::string name;
  std::string dir;
  std::string address;
  std::unique_ptr<ChildProcess> process;

  Status Start(const std::string& coordinator, const std::string& wal_sync) {
    REPLAYDB_ASSIGN_OR_RETURN(
        process, ChildProcess::Start({"/proc/self/exe", "serve", dir, "--listen", address,
                                      "--workers", "1", "--name", name, "--coordinator",
                                      coordinator, "--ttl-ms", "2000", "--wal-sync", wal_sync}));
    if (process->WaitFor(std::regex("listening on (ucx://[0-9.:]+)"), 120s).empty()) {
      return Status::Internal("node " + name + " did not start: " + process->output());
    }
    return Status::OK();
  }
};

// The writer: short trajectories through the cluster's primary.
class Writer {
 public:
  Writer(std::string cluster, Acks acks) : cluster_(std::move(cluster)), acks_(acks) {}
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t acknowledged() const { return acknowledged_.load(); }
  // The first acknowledgment after `t` from a server other than `address`
  // (none yet: nullopt).
  std::optional<Clock::time_point> FirstAckAfter(Clock::time_point t, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = times_.lower_bound(t); it != times_.end(); ++it) {
      if (it->second != address) return it->first;
    }
    return std::nullopt;
  }
  // REQUIRES: stopped.
  const std::map<uint64_t, std::string>& acked() const { return acked_; }

 private:
  void Run() {
    std::unique_ptr<DB> db;
    std::shared_ptr<Table> table;
    std::mt19937_64 rng(7);
    const TableSpec spec = FailoverSpec(acks_);
    for (int64_t round = 0; !stop_ && round < 100000000; ++round) {
      if (table == nullptr) {
        db.reset();
        ConnectOptions o;
        o.connect_timeout = 1000ms;
        o.call_timeout = 5000ms;
        o.client_name = "failover bench writer";
        Result<std::unique_ptr<DB>> c = DB::Connect(cluster_, o);
        Result<std::shared_ptr<Table>> t = Status::Unavailable("not connected");
        if (c.ok()) {
          t = (*c)->GetTable(spec.name);
          if (!t.ok()) t = (*c)->CreateTable(spec);
        }
        if (!t.ok()) {
          std::this_thread::sleep_for(10ms);
          continue;
        }
        db = std::move(c).value();
        table = *t;
      }
      Result<std::unique_ptr<TrajectoryWriter>> w = table->NewWriter();
      std::string bytes;
      bool ok = w.ok();
      const int steps = 1 + static_cast<int>(rng() % 4);
      std::vector<std::byte> obs(24);
      float reward = 0;
      for (int s = 0; ok && s < steps; ++s) {
        for (auto& b : obs) b = static_cast<std::byte>(rng());
        reward = static_cast<float>(rng() % 1000);
        bytes.append(reinterpret_cast<const char*>(obs.data()), obs.size());
        bytes.append(reinterpret_cast<const char*>(&reward), sizeof(reward));
        const std::vector<ConstTensor> step = {{DType::kU8, Shape{24}, obs.data(), obs.size()},
                                               {DType::kF32, Shape{}, &reward, sizeof(reward)}};
        ok = (*w)->Append(step).ok();
      }
      ok = ok && (*w)->End(EndReason::kTerminal).ok();
      if (!ok) {
        table.reset();
        continue;
      }
      acked_[(*w)->trajectory_id()] = std::move(bytes);
      {
        std::lock_guard<std::mutex> lock(mu_);
        times_.emplace(Clock::now(), db->path());
        if (times_.size() > 100000) times_.erase(times_.begin());
      }
      ++acknowledged_;
    }
  }

  const std::string cluster_;
  const Acks acks_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> acknowledged_{0};
  std::map<uint64_t, std::string> acked_;
  std::mutex mu_;
  std::multimap<Clock::time_point, std::string> times_;  // acks: when, from which server
};

// Each trajectory's bytes (28 per step) at `address`, by id.
// `evicted` (may be null): the trajectories the table evicted.
Result<std::map<uint64_t, std::string>> Holdings(const std::string& address,
                                                 int64_t* evicted = nullptr) {
  REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(address));
  REPLAYDB_ASSIGN_OR_RETURN(auto table, db->GetTable("experience"));
  if (evicted != nullptr) *evicted = table->Info().evicted_trajectories;
  std::vector<TrajectoryInfo> infos;
  REPLAYDB_RETURN_IF_ERROR(table->ListTrajectories({}, &infos));
  std::map<uint64_t, std::string> out;
  for (const TrajectoryInfo& t : infos) {
    if (!t.ended) continue;
    TrajectorySteps steps;
    REPLAYDB_RETURN_IF_ERROR(table->ReadTrajectory(t.id, 0, t.length, &steps));
    std::string bytes;
    for (int64_t s = 0; s < t.length; ++s) {
      bytes.append(reinterpret_cast<const char*>(steps.columns[0].data()) + 24 * s, 24);
      bytes.append(reinterpret_cast<const char*>(steps.columns[1].data()) + 4 * s, 4);
    }
    out[t.id] = std::move(bytes);
  }
  return out;
}

struct FailoverRun {
  std::vector<double> failovers;  // seconds, per kill
  double election = 0;            // etcd's, same run
  int64_t acknowledged = 0;
  int64_t lost = 0;
  int64_t evicted = 0;  // by the last primary (none expected: the table has room)
  bool agreed = false;
};

Result<FailoverRun> RunFailover(const Acks& acks, int kills) {
  REPLAYDB_ASSIGN_OR_RETURN(auto dir, TempDir::Make());
  std::string endpoint;
  REPLAYDB_ASSIGN_OR_RETURN(auto etcd, StartEtcd(dir->path() + "/etcd", &endpoint));
  const std::string cluster = "etcd://" + endpoint + "/bench";
  FailoverRun run;
  REPLAYDB_ASSIGN_OR_RETURN(const std::chrono::milliseconds election,
                            ProbeElection(cluster, std::chrono::seconds(2)));
  run.election = static_cast<double>(election.count()) / 1000.0;
  const std::string wal_sync = acks.mode == AckMode::kLeaderDurable ? "always" : "batch";
  std::vector<Node> nodes(3);
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = std::string(1, static_cast<char>('a' + i));
    nodes[i].dir = dir->path() + "/" + nodes[i].name;
    nodes[i].address = "ucx://127.0.0.1:" + std::to_string(FreeLoopbackPort());
    REPLAYDB_RETURN_IF_ERROR(nodes[i].Start(cluster, wal_sync));
  }
  const auto primary = [&]() -> Node* {
    for (const auto until = Clock::now() + 30s; Clock::now() < until;
         std::this_thread::sleep_for(10ms)) {
      Result<std::string> l = ClusterPrimary(cluster);
      if (!l.ok()) continue;
      for (Node& n : nodes) {
        if (n.address == *l) return &n;
      }
    }
    return nullptr;
  };
  Writer writer(cluster, acks);
  writer.Start();
  struct StopWriter {
    Writer* w;
    ~StopWriter() { w->Stop(); }
  } stop_writer{&writer};
  const auto wait_acks = [&](int64_t more, std::chrono::seconds limit) {
    const int64_t want = writer.acknowledged() + more;
    for (const auto until = Clock::now() + limit; Clock::now() < until;
         std::this_thread::sleep_for(5ms)) {
      if (writer.acknowledged() >= want) return true;
    }
    return false;
  };
  if (!wait_acks(10, 60s)) return Status::Internal("the writer got no acknowledgments");
  std::mt19937_64 rng(42);
  for (int k = 0; k < kills; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 1200));
    Node* victim = primary();
    if (victim == nullptr) return Status::Internal("no primary before kill " + std::to_string(k));
    victim->process->Signal(SIGKILL);
    const auto killed = Clock::now();
    victim->process->Wait(30s);
    std::optional<Clock::time_point> next;
    while (!(next = writer.FirstAckAfter(killed, victim->address)) && Clock::now() - killed < 60s) {
      std::this_thread::sleep_for(1ms);
    }
    if (!next) {
      return Status::Internal("kill " + std::to_string(k) +
                              ": no other server acknowledged within 60 s");
    }
    run.failovers.push_back(SecondsSince(killed, *next));
    std::fprintf(stderr, "failover %s: kill %d of %d: %.3f s\n", AcksName(acks).c_str(), k + 1,
                 kills, run.failovers.back());
    REPLAYDB_RETURN_IF_ERROR(victim->Start(cluster, wal_sync));
    if (!wait_acks(3, 60s))
      return Status::Internal("no acknowledgments after kill " + std::to_string(k));
  }
  writer.Stop();
  run.acknowledged = writer.acknowledged();
  Node* last = primary();
  if (last == nullptr) return Status::Internal("no primary at the end");
  // What came back, once the copies agree: a killed primary, back,
  // salvages what its successor lacked in the background (rdma/salvage.h).
  // Counted by content, not id: salvaged trajectories get new ids. (Every
  // trajectory's bytes are random: no two are alike.) Until nothing is
  // lost, or the count has not moved for 5 s, 60 s at most.
  int64_t last_lost = -1;
  auto moved = Clock::now();
  for (const auto until = Clock::now() + 60s; Clock::now() < until;
       std::this_thread::sleep_for(100ms)) {
    Result<std::map<uint64_t, std::string>> held = Holdings(last->address, &run.evicted);
    if (!held.ok()) continue;
    std::multiset<std::string> contents;
    for (const auto& [id, bytes] : *held) contents.insert(bytes);
    run.lost = 0;
    for (const auto& [id, bytes] : writer.acked()) {
      if (contents.count(bytes) == 0) ++run.lost;
    }
    if (run.lost != last_lost) moved = Clock::now();
    last_lost = run.lost;
    run.agreed = true;
    for (Node& n : nodes) {
      Result<std::map<uint64_t, std::string>> h = Holdings(n.address);
      run.agreed = run.agreed && h.ok() && *h == *held;
    }
    if (run.agreed && (run.lost == 0 || Clock::now() - moved > 5s)) break;
  }
  for (Node& n : nodes) {
    n.process->Signal(SIGTERM);
    n.process->Wait(60s);
  }
  return run;
}

// One run per acks mode, shared by its two rows.
Result<FailoverRun> CachedRun(const Acks& acks, int kills) {
  static std::mutex mu;
  static std::map<std::string, FailoverRun> runs;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = AcksName(acks) + "/" + std::to_string(kills);
  if (auto it = runs.find(key); it != runs.end()) return it->second;
  REPLAYDB_ASSIGN_OR_RETURN(FailoverRun run, RunFailover(acks, kills));
  runs[key] = run;
  return run;
}

// The SIGKILLs a run makes: --kills (params[1]), at most 2 with --quick.
int KillsFor(const std::vector<Param>& params, const Timing& timing) {
  const int kills = static_cast<int>(params[1].value);
  return timing.quick ? std::min(2, kills) : kills;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

std::vector<CaseWithTarget> FailoverCases(int kills) {
  std::vector<CaseWithTarget> cases;
  if (!std::filesystem::exists(kEtcd)) {
    std::fprintf(stderr,
                 "replaydb bench: the failover benches need etcd (%s, Debian's etcd-server): "
                 "skipped\n",
                 kEtcd);
    return cases;
  }
  for (const Acks acks :
       {Acks::Replicated(1), Acks{AckMode::kLeaderDurable, 0}, Acks{AckMode::kLeader, 0}}) {
    const std::vector<Param> params = {{"acks", 0, AcksName(acks)}, {"kills", kills}};
    cases.push_back({{"failover", params,
                      [acks, params](DB*, const Timing& timing) -> Result<BenchResult> {
                        const int n = KillsFor(params, timing);
                        REPLAYDB_ASSIGN_OR_RETURN(const FailoverRun run, CachedRun(acks, n));
                        BenchResult r;
                        r.bench = "failover";
                        r.params = params;
                        r.params[1].value = n;
                        r.value = Quantile(run.failovers, 0.5);
                        r.unit = "s";
                        r.ceiling = run.election;
                        r.ceiling_name = "etcd_election";
                        char note[160];
                        std::snprintf(note, sizeof(note),
                                      "p90 %.3f s, max %.3f s over %d SIGKILLs of the primary",
                                      Quantile(run.failovers, 0.9), Quantile(run.failovers, 1.0),
                                      n);
                        r.note = note;
                        return r;
                      }},
                     Target{Target::Kind::kValueAtMost, 3.0, "failover <= 3 s (TTL 2 s)"}});
    std::optional<Target> none;
    cases.push_back(
        {{"failover_lost", params,
          [acks, params](DB*, const Timing& timing) -> Result<BenchResult> {
            const int n = KillsFor(params, timing);
            REPLAYDB_ASSIGN_OR_RETURN(const FailoverRun run, CachedRun(acks, n));
            BenchResult r;
            r.bench = "failover_lost";
            r.params = params;
            r.params[1].value = n;
            r.value = static_cast<double>(run.lost);
            r.unit = "trajectories";
            r.note = "of " + std::to_string(run.acknowledged) + " acknowledged; the three copies " +
                     (run.agreed ? "agreed" : "DIFFERED");
            return r;
          }},
         acks.mode == AckMode::kLeader
             ? none
             : std::optional<Target>(Target{Target::Kind::kValueAtMost, 0, "lost = 0"})});
  }
  return cases;
}

}  // namespace replaydb::tools
