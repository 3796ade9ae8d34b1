// The remote benches: a `replaydb serve` process of its own (this binary,
// started for each row) and this process as its client over UCX on
// 127.0.0.1, each row over TCP (transport=tcp: UCX_TLS=tcp) and over shared
// memory (transport=sm: UCX_TLS=sm,tcp, the TCP lanes for connecting),
// against ceilings that `ucx_perftest` (ucx-utils) measures in the same run
// over the same transports, with the UCX settings replaydb's connections
// use (UcxSettings(), replaydb/server.h: TCP segments of 256 KiB; for sm,
// UCX_MM_ERROR_HANDLING=y) and the same error handling mode (-e:
// UCP_ERR_HANDLING_MODE_PEER, as every replaydb endpoint):
//
//   remote_insert   16 KiB steps from 1 and 4 writers (threads of this
//                   process, a connection each), one Append per step and
//                   AppendMany of 64 steps per call; bytes/s of step data
//                   against ucp_am_bw of messages of a call's bytes (16 KiB,
//                   1 MiB). The table is unlogged: the row measures the
//                   network path, not the log. The server has a worker per
//                   writer (ServerWorkers: at most a quarter of the
//                   hardware threads), as one serving that many actors
//                   would; the note says how many. Other rows: 1.
//   remote_sample   B=256 windows of L=32 steps of 4 KiB (32 MiB a batch),
//                   bytes/s; over TCP against tag_bw of 4 MiB messages, over
//                   shared memory (where the client reads the windows in
//                   place, rdma/WIRE.md) against ucp_get of 32 MiB.
//   remote_small    p50 microseconds of a sample of B=1 of 64 B steps, and of
//                   an update of 1 key, against the am_lat round trip (twice
//                   ucp_am_lat's one-way p50) plus the same call's p50 on a
//                   local table; ratio = value / that.
//   remote_sharded_sample  p50 microseconds of Sample(256) (L=8) of a
//                   prioritized table over four `replaydb serve` processes
//                   (DB::Connect("A+B+C+D"), docs/sharding.md) against the
//                   same on one of them alone; ratio = value / that.
//   sharded_exactness  the total-variation distance of a sharded table's
//                   draws (4 served shards over TCP, masses tenfold apart)
//                   from the exact distribution, against one local table's of
//                   as many draws (its sampling noise).
//   remote_replica_apply, remote_replica_insert, remote_replicated_append:
//                   read replicas and acknowledgments (docs/replication.md),
//                   below.
//   remote_read     the transport's one-sided reads (Transport::ReadMany) of
//                   a sample's shape: 256 reads of 128 KiB (a window of 32
//                   steps of 4 KiB each) at random places of 64 MiB of a
//                   peer's SharedMemory, made at once, against
//                   ucx_perftest's ucp_get of 32 MiB, a batch's bytes in
//                   one get (its gets of 128 KiB read one place again and
//                   again, from the cache: 49 GB/s on the dev box, against
//                   13 GB/s for 32 MiB). ProbeTransportReads
//                   (replaydb/server.h): the peer is a transport of this
//                   process (its own UCP context and worker, as another
//                   process would have). Shared memory only: over TCP UCX
//                   emulates reads with messages the peer answers (and UCX
//                   1.13 aborts the peer when an answer cannot go out).
//
// Each ceiling is the best of three ucx_perftest runs. Where ucx_perftest is
// not installed the rows have no ceiling, and say so.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "replaydb/server.h"
#include "tools/replaydb/bench/bench_common.h"
#include "tools/replaydb/child_process.h"

namespace replaydb::tools {
namespace {

// The rows' transports (the `transport` parameter).
constexpr const char* kTransports[] = {"tcp", "sm"};

// Sets UCX_TLS for `transport` in this process's environment, which the
// server and ucx_perftest processes inherit, and clears
// UCX_MM_ERROR_HANDLING, which UcxSettings sets again where UCX_TLS loads
// shared memory (a row before may have left it; UCX warns about it where no
// sm transport is loaded).
void UseTransport(const std::string& transport) {
  ::setenv("UCX_TLS", transport == "sm" ? "sm,tcp" : "tcp", 1);
  ::unsetenv("UCX_MM_ERROR_HANDLING");
}

// ucx_perftest's numbers for one test: the one-way latency's p50 (us) and
// the bandwidth (bytes/s; it prints MB/s of 2^20 bytes).
struct Perf {
  double p50_us = 0;
  double bytes_per_second = 0;
};

// Runs ucx_perftest `test` with messages of `bytes`, a server and a client
// process over `transport` on 127.0.0.1. NotFound when ucx_perftest is not
// installed.
Result<Perf> UcxPerftestOnce(const std::string& transport, const std::string& test, size_t bytes,
                             int iterations);

// The best of three runs of UcxPerftestOnce (the highest bandwidth, the
// lowest latency): on a small shared machine one run swings by 2x or more,
// and the ceiling is what the transport can do.
Result<Perf> UcxPerftest(const std::string& transport, const std::string& test, size_t bytes,
                         int iterations) {
  Perf best;
  for (int run = 0; run < 3; ++run) {
    REPLAYDB_ASSIGN_OR_RETURN(const Perf p, UcxPerftestOnce(transport, test, bytes, iterations));
    best.bytes_per_second = std::max(best.bytes_per_second, p.bytes_per_second);
    best.p50_us = run == 0 ? p.p50_us : std::min(best.p50_us, p.p50_us);
  }
  return best;
}

Result<Perf> UcxPerftestOnce(const std::string& transport, const std::string& test, size_t bytes,
                             int iterations) {
  UseTransport(transport);
  // The UCX settings replaydb's connections run with.
  for (const auto& [name, value] : UcxSettings()) {
    ::setenv(("UCX_" + name).c_str(), value.c_str(), /*overwrite=*/0);
  }
  if (std::system("command -v ucx_perftest >/dev/null 2>&1") != 0) {
    return Status::NotFound("ucx_perftest is not installed (Debian's ucx-utils)");
  }
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int port = FreeLoopbackPort();
    if (port == 0) return Status::IOError("no free TCP port on 127.0.0.1 for ucx_perftest");
    REPLAYDB_ASSIGN_OR_RETURN(
        auto server, ChildProcess::Start({"ucx_perftest", "-p", std::to_string(port), "-e"}));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REPLAYDB_ASSIGN_OR_RETURN(
        auto client,
        ChildProcess::Start({"ucx_perftest", "127.0.0.1", "-p", std::to_string(port), "-t", test, "-s",
                      std::to_string(bytes), "-n", std::to_string(iterations), "-w",
                      std::to_string(std::max(1, iterations / 10)), "-f", "-e"}));
    const int status = client->Wait(std::chrono::seconds(120));
    server->Wait(std::chrono::seconds(10));
    // The last line of numbers: iterations, p50, average, overall
    // (latency, us), average and overall bandwidth (MB/s), message rates.
    std::istringstream lines(client->output());
    std::string line;
    std::vector<double> numbers;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::vector<double> v;
      double x = 0;
      while (words >> x) v.push_back(x);
      if (v.size() == 8 && words.eof()) numbers = v;
    }
    if (status == 0 && numbers.size() == 8) {
      return Perf{numbers[1], numbers[5] * 1048576.0};
    }
    last_error = "ucx_perftest -t " + test + " exited " + std::to_string(status) + ": " +
                 client->output().substr(0, 400);
  }
  return Status::Internal(last_error);
}

// The server's workers for `clients` busy connections: one each, as a
// server of that many actors would be run, while a quarter of the machine's
// hardware threads allows (each connection's client thread and worker
// spin, and the table's copies need cores too); 1 on a small machine.
int ServerWorkers(int clients) {
  const int quarter = static_cast<int>(std::thread::hardware_concurrency() / 4);
  return std::max(1, std::min(clients, quarter));
}

// `replaydb serve` (this binary) on a fresh database in `dir`, on a free
// port, with `workers` transport workers.
struct Served {
  std::unique_ptr<ChildProcess> process;
  std::string address;

  static Result<Served> Start(const std::string& dir, int workers,
                              const std::vector<std::string>& more = {}) {
    Served s;
    std::vector<std::string> args = {
        "/proc/self/exe",        "serve",     dir, "--listen", "ucx://127.0.0.1:0", "--workers",
        std::to_string(workers), "--threads", "4"};
    args.insert(args.end(), more.begin(), more.end());
    REPLAYDB_ASSIGN_OR_RETURN(s.process, ChildProcess::Start(std::move(args)));
    s.address = s.process->WaitFor(std::regex("listening on (ucx://127\\.0\\.0\\.1:[0-9]+)"),
                                   std::chrono::seconds(30));
    if (s.address.empty()) {
      return Status::Internal("replaydb serve did not start: " + s.process->output());
    }
    return s;
  }
  Status Stop() {
    process->Signal(SIGTERM);
    const int status = process->Wait(std::chrono::seconds(60));
    if (status != 0) {
      return Status::Internal("replaydb serve exited " + std::to_string(status) + ": " +
                              process->output());
    }
    return Status::OK();
  }
};

// Runs `body` with a DB connected to a server of a fresh database holding
// `spec`'s table, over `transport`; stops the server after.
Result<BenchResult> WithServedTable(const std::string& transport, const TableSpec& spec,
                                    const std::function<Result<BenchResult>(DB*)>& body,
                                    std::string* server_log = nullptr, int workers = 1) {
  REPLAYDB_ASSIGN_OR_RETURN(auto dir, TempDir::Make());
  UseTransport(transport);  // this process's connections, and the server's
  REPLAYDB_ASSIGN_OR_RETURN(Served served, Served::Start(dir->path() + "/db", workers));
  Result<BenchResult> result = [&]() -> Result<BenchResult> {
    ConnectOptions o;
    o.client_name = "replaydb bench";
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> remote, DB::Connect(served.address, o));
    REPLAYDB_RETURN_IF_ERROR(remote->CreateTable(spec).status());
    return body(remote.get());
  }();
  const Status stopped = served.Stop();
  if (server_log != nullptr) *server_log = served.process->output();
  if (result.ok() && !stopped.ok()) return stopped;
  if (!result.ok()) {
    // What the server saw (a connection it ended, and why) goes with the error.
    const std::string log = served.process->output();
    const size_t keep = 800;
    return result.status().WithContext(
        "replaydb serve's log, last lines: [" +
        (log.size() > keep ? "..." + log.substr(log.size() - keep) : log) + "]");
  }
  return result;
}

TableSpec BytesSpec(const std::string& name, int64_t step_bytes, int64_t capacity_steps,
                    int64_t sequence_length) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"data", DType::kU8, Shape{step_bytes}}};
  spec.capacity_steps = capacity_steps;
  spec.sequence_length = sequence_length;
  spec.logging = TableLogging::kOff;
  return spec;
}

void SetCeiling(const Result<Perf>& perf, double value, const std::string& name,
                BenchResult* r) {
  if (perf.ok()) {
    r->ceiling = value;
    r->ceiling_name = name;
  } else {
    r->ceiling_name = name;
    r->note = "no ceiling: " + perf.status().message();
  }
}

Result<BenchResult> RunRemoteInsert(const std::string& transport, const Timing& timing, int writers,
                                    int64_t per_call) {
  constexpr int64_t kStepBytes = 16384;
  const TableSpec spec = BytesSpec("remote_insert", kStepBytes, 1 << 14, 1);
  BenchResult r;
  REPLAYDB_ASSIGN_OR_RETURN(r, WithServedTable(transport, spec, [&](DB* remote) -> Result<BenchResult> {
    // One connection per writer, as separate actors have.
    std::vector<std::unique_ptr<DB>> connections;
    std::vector<std::shared_ptr<Table>> tables;
    for (int w = 0; w < writers; ++w) {
      ConnectOptions o;
      o.client_name = "bench writer " + std::to_string(w);
      REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(remote->path(), o));
      REPLAYDB_ASSIGN_OR_RETURN(auto t, db->GetTable(spec.name));
      connections.push_back(std::move(db));
      tables.push_back(std::move(t));
    }
    std::vector<uint8_t> data(static_cast<size_t>(kStepBytes * per_call));
    FillPattern(data.data(), data.size(), 7);
    BenchResult out;
    out.unit = "B/s";
    REPLAYDB_ASSIGN_OR_RETURN(out.value, Median(timing.repetitions, [&]() -> Result<double> {
      std::atomic<int64_t> bytes{0};
      std::vector<Status> errors(static_cast<size_t>(writers));
      const auto start = Clock::now();
      std::vector<std::thread> threads;
      for (int w = 0; w < writers; ++w) {
        threads.emplace_back([&, w] {
          WriterOptions wo;
          wo.timeout = kCallTimeout;
          auto writer = tables[static_cast<size_t>(w)]->NewWriter(wo);
          if (!writer.ok()) {
            errors[static_cast<size_t>(w)] = writer.status();
            return;
          }
          const ConstTensor one{DType::kU8, Shape{kStepBytes}, data.data(),
                                static_cast<size_t>(kStepBytes)};
          const ConstTensor many{DType::kU8, Shape{per_call, kStepBytes}, data.data(),
                                 data.size()};
          int64_t done = 0;
          while (Clock::now() - start < timing.duration) {
            const Status s = per_call == 1 ? (*writer)->Append(std::span(&one, 1))
                                           : (*writer)->AppendMany(std::span(&many, 1));
            if (!s.ok()) {
              errors[static_cast<size_t>(w)] = s;
              return;
            }
            done += per_call;
            if (done % 1024 < per_call) (void)(*writer)->End(EndReason::kTruncated);
          }
          (void)(*writer)->End(EndReason::kTruncated);
          bytes += done * kStepBytes;
        });
      }
      for (auto& t : threads) t.join();
      for (const Status& e : errors) REPLAYDB_RETURN_IF_ERROR(e);
      return static_cast<double>(bytes.load()) / Seconds(Clock::now() - start).count();
    }));
    return out;
  }, nullptr, ServerWorkers(writers)));
  // The same bytes per message as a call sends.
  const size_t message = static_cast<size_t>(kStepBytes * per_call);
  const Result<Perf> perf =
      UcxPerftest(transport, "ucp_am_bw", message, per_call == 1 ? 20000 : 1000);
  SetCeiling(perf, perf.ok() ? perf->bytes_per_second : 0,
             (per_call == 1 ? "ucp_am_bw 16KiB " : "ucp_am_bw 1MiB ") + transport, &r);
  const std::string workers = std::to_string(ServerWorkers(writers)) + " server workers";
  r.note = r.note.empty() ? workers : workers + "; " + r.note;
  return r;
}

Result<BenchResult> RunRemoteSample(const std::string& transport, const Timing& timing) {
  constexpr int64_t kStepBytes = 4096;
  constexpr int64_t kBatch = 256;
  constexpr int64_t kL = 32;
  const TableSpec spec = BytesSpec("remote_sample", kStepBytes, 1 << 14, kL);
  BenchResult r;
  std::string log;  // the server's
  REPLAYDB_ASSIGN_OR_RETURN(r, WithServedTable(transport, spec, [&](DB* remote) -> Result<BenchResult> {
    REPLAYDB_ASSIGN_OR_RETURN(auto table, remote->GetTable(spec.name));
    {  // Fills the table: 8192 steps in trajectories of 256, 64 steps a call.
      REPLAYDB_ASSIGN_OR_RETURN(auto writer, table->NewWriter());
      std::vector<uint8_t> data(static_cast<size_t>(kStepBytes * 64));
      FillPattern(data.data(), data.size(), 3);
      const ConstTensor many{DType::kU8, Shape{64, kStepBytes}, data.data(), data.size()};
      for (int i = 0; i < 128; ++i) {
        REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span(&many, 1)));
        if (i % 4 == 3) REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTerminal));
      }
    }
    SampleBatch batch;
    REPLAYDB_ASSIGN_OR_RETURN(const double rate,
                              Median(timing.repetitions, [&]() -> Result<double> {
                                return SampleRate(table.get(), kBatch, timing.duration, &batch);
                              }));
    BenchResult out;
    out.value = rate * static_cast<double>(kBatch * kL * kStepBytes);
    out.unit = "B/s";
    return out;
  }, &log));
  if (transport == "sm") {
    // Read in place (the server's log says whether it was): against
    // one-sided reads of a batch's bytes.
    const size_t batch = static_cast<size_t>(kBatch * kL * kStepBytes);
    const Result<Perf> perf = UcxPerftest(transport, "ucp_get", batch, 40);
    SetCeiling(perf, perf.ok() ? perf->bytes_per_second : 0, "ucp_get 32MiB " + transport, &r);
    const bool in_place = log.find("in place") != std::string::npos;
    r.note = std::string(in_place ? "read in place" : "by message (not read in place)") +
             (r.note.empty() ? "" : "; " + r.note);
    return r;
  }
  const Result<Perf> perf = UcxPerftest(transport, "tag_bw", size_t{4} << 20, 400);
  SetCeiling(perf, perf.ok() ? perf->bytes_per_second : 0, "tag_bw 4MiB " + transport, &r);
  return r;
}

Result<BenchResult> RunRemoteRead(const std::string& transport, const Timing& timing) {
  constexpr size_t kShared = size_t{64} << 20;
  constexpr size_t kRead = size_t{128} << 10;  // L=32 steps of 4 KiB
  constexpr int kReads = 256;                  // B=256
  UseTransport(transport);
  bool one_sided = false;
  BenchResult r;
  r.unit = "B/s";
  REPLAYDB_ASSIGN_OR_RETURN(r.value, Median(timing.repetitions, [&]() -> Result<double> {
    REPLAYDB_ASSIGN_OR_RETURN(
        const TransportReadProbe probe,
        ProbeTransportReads(kShared, kRead, kReads,
                            std::chrono::duration_cast<std::chrono::milliseconds>(timing.duration)));
    one_sided = probe.one_sided;
    return probe.bytes_per_second;
  }));
  const Result<Perf> perf = UcxPerftest(transport, "ucp_get", kRead * kReads, 40);
  SetCeiling(perf, perf.ok() ? perf->bytes_per_second : 0, "ucp_get 32MiB " + transport, &r);
  r.note = std::string(one_sided ? "one-sided" : "not one-sided") +
           (r.note.empty() ? "" : "; " + r.note);
  return r;
}

// p50 microseconds of `call` over `duration` (at least 200 calls).
Result<double> P50Micros(Seconds duration, const std::function<Status()>& call) {
  std::vector<double> micros;
  const auto start = Clock::now();
  for (int i = 0; i < 20; ++i) REPLAYDB_RETURN_IF_ERROR(call());
  while (micros.size() < 200 || Clock::now() - start < duration) {
    const auto t0 = Clock::now();
    REPLAYDB_RETURN_IF_ERROR(call());
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (micros.size() >= 1000000) break;
  }
  std::nth_element(micros.begin(), micros.begin() + static_cast<ptrdiff_t>(micros.size() / 2),
                   micros.end());
  return micros[micros.size() / 2];
}

// The small calls on `table`: sample (B=1) or update (1 key).
std::function<Status()> SmallCall(Table* table, bool update, SampleBatch* batch,
                                  std::vector<ItemKey>* keys) {
  if (!update) {
    return [table, batch] {
      SampleOptions o;
      o.timeout = kCallTimeout;
      return table->Sample(1, o, batch);
    };
  }
  return [table, keys] {
    static thread_local double p = 1.0;
    p = p >= 100 ? 1.0 : p + 1;
    const double priorities[] = {p};
    return table->UpdatePriorities(std::span(keys->data(), 1), priorities);
  };
}

Status FillSmall(Table* table, std::vector<ItemKey>* keys) {
  REPLAYDB_ASSIGN_OR_RETURN(auto writer, table->NewWriter());
  std::vector<uint8_t> data(64 * 64);
  FillPattern(data.data(), data.size(), 5);
  const ConstTensor many{DType::kU8, Shape{64, 64}, data.data(), data.size()};
  REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span(&many, 1)));
  REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTerminal));
  SampleBatch b;
  SampleOptions o;
  o.timeout = kCallTimeout;
  REPLAYDB_RETURN_IF_ERROR(table->Sample(1, o, &b));
  *keys = b.keys;
  return Status::OK();
}

Result<BenchResult> RunRemoteSmall(const std::string& transport, DB* local_db, const Timing& timing,
                                   bool update) {
  TableSpec spec = BytesSpec(update ? "remote_small_update" : "remote_small_sample", 64, 4096, 1);
  spec.selector = SelectorKind::kPrioritized;
  // The same call on a local table.
  double local = 0;
  REPLAYDB_RETURN_IF_ERROR(WithTable(local_db, spec, [&](Table* t) -> Result<BenchResult> {
                             std::vector<ItemKey> keys;
                             REPLAYDB_RETURN_IF_ERROR(FillSmall(t, &keys));
                             SampleBatch batch;
                             REPLAYDB_ASSIGN_OR_RETURN(
                                 local, P50Micros(timing.duration,
                                                  SmallCall(t, update, &batch, &keys)));
                             return BenchResult{};
                           }).status());
  BenchResult r;
  REPLAYDB_ASSIGN_OR_RETURN(r, WithServedTable(transport, spec, [&](DB* remote) -> Result<BenchResult> {
    REPLAYDB_ASSIGN_OR_RETURN(auto table, remote->GetTable(spec.name));
    std::vector<ItemKey> keys;
    REPLAYDB_RETURN_IF_ERROR(FillSmall(table.get(), &keys));
    SampleBatch batch;
    BenchResult out;
    REPLAYDB_ASSIGN_OR_RETURN(
        out.value, P50Micros(timing.duration, SmallCall(table.get(), update, &batch, &keys)));
    out.unit = "us";
    return out;
  }));
  const Result<Perf> perf = UcxPerftest(transport, "ucp_am_lat", 8, 20000);
  SetCeiling(perf, perf.ok() ? 2 * perf->p50_us + local : 0, "am_lat_rtt+local " + transport, &r);
  char note[160];
  std::snprintf(note, sizeof(note), "local call p50 %.2f us; am_lat round trip %.2f us", local,
                perf.ok() ? 2 * perf->p50_us : 0.0);
  r.note = r.note.empty() ? note : r.note + "; " + note;
  return r;
}

// Appends `steps` steps of `data`'s 64-step calls to `table` (trajectories
// of 1024 steps); the bytes appended.
Result<int64_t> AppendSteps(Table* table, const std::vector<uint8_t>& data, int64_t step_bytes,
                            const std::function<bool(int64_t)>& more) {
  WriterOptions wo;
  wo.timeout = kCallTimeout;
  REPLAYDB_ASSIGN_OR_RETURN(auto writer, table->NewWriter(wo));
  const int64_t per_call = static_cast<int64_t>(data.size()) / step_bytes;
  const ConstTensor many{DType::kU8, Shape{per_call, step_bytes}, data.data(), data.size()};
  int64_t done = 0;
  while (more(done)) {
    REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span(&many, 1)));
    done += per_call;
    if (done % 1024 == 0) REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTruncated));
  }
  REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTruncated));
  return done * step_bytes;
}

// A logged table of 16 KiB steps, for the replication rows.
TableSpec LoggedSpec(const std::string& name, int64_t capacity_steps) {
  TableSpec spec = BytesSpec(name, 16384, capacity_steps, 1);
  spec.logging = TableLogging::kOn;
  spec.block_steps = 64;
  return spec;
}

// A primary and a read replica of it (docs/replication.md), each `replaydb
// serve` of a fresh database, with `spec`'s table made on the primary;
// `body` gets connections to both and the replica's process. Both stop
// after.
Result<BenchResult> WithReplica(
    const std::string& transport, const TableSpec& spec,
    const std::function<Result<BenchResult>(DB* primary, DB* replica, ChildProcess* process)>& body,
    const std::vector<std::string>& primary_args = {}) {
  REPLAYDB_ASSIGN_OR_RETURN(auto dir, TempDir::Make());
  UseTransport(transport);
  REPLAYDB_ASSIGN_OR_RETURN(Served primary,
                            Served::Start(dir->path() + "/primary", 1, primary_args));
  Result<Served> replica =
      Served::Start(dir->path() + "/replica", 1, {"--replica-of", primary.address});
  Result<BenchResult> result = replica.status();
  if (replica.ok()) {
    result = [&]() -> Result<BenchResult> {
      ConnectOptions o;
      o.client_name = "replaydb bench";
      REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> p, DB::Connect(primary.address, o));
      REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> r, DB::Connect(replica->address, o));
      REPLAYDB_RETURN_IF_ERROR(p->CreateTable(spec).status());
      return body(p.get(), r.get(), replica->process.get());
    }();
    replica->process->Signal(SIGCONT);  // (a body that failed may have left it stopped)
    const Status stopped = replica->Stop();
    if (result.ok() && !stopped.ok()) result = stopped;
  }
  const Status stopped = primary.Stop();
  if (result.ok() && !stopped.ok()) return stopped;
  return result;
}

// The steps the replica's table `name` holds (0 before it has the table).
int64_t ReplicaSteps(DB* replica, const std::string& name) {
  auto t = replica->GetTable(name);
  return t.ok() ? (*t)->Info().num_steps : 0;
}

// remote_replica_apply: how fast a replica that fell behind catches up. The
// replica is stopped (SIGSTOP) while 128 MiB of 16 KiB steps are appended to
// the primary (the primary keeps the log for it), then let go; bytes/s of
// step data from the first step it applies to the last, against ucp_am_bw
// of 1 MiB messages (a read brings up to 4 MiB of records).
Result<BenchResult> RunReplicaApply(const std::string& transport, const Timing& timing) {
  constexpr int64_t kSteps = 8192;  // 128 MiB a round
  // Room for every round's steps (and the warm-up's): nothing is evicted.
  const TableSpec spec = LoggedSpec("remote_replica_apply", kSteps * (timing.repetitions + 2));
  std::vector<uint8_t> data(64 * 16384);
  FillPattern(data.data(), data.size(), 9);
  BenchResult r;
  REPLAYDB_ASSIGN_OR_RETURN(
      r,
      WithReplica(
          transport, spec, [&](DB* p, DB* replica, ChildProcess* process) -> Result<BenchResult> {
            REPLAYDB_ASSIGN_OR_RETURN(auto table, p->GetTable(spec.name));
            BenchResult out;
            out.unit = "B/s";
            int64_t total = 0;
            REPLAYDB_ASSIGN_OR_RETURN(
                out.value, Median(timing.repetitions, [&]() -> Result<double> {
                  // Caught up first (the replica has read: the
                  // primary keeps its log for it).
                  const auto limit = Clock::now() + std::chrono::seconds(120);
                  while (ReplicaSteps(replica, spec.name) < total) {
                    if (Clock::now() > limit) {
                      return Status::DeadlineExceeded("the replica never caught up");
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                  }
                  process->Signal(SIGSTOP);
                  Result<int64_t> bytes = AppendSteps(table.get(), data, 16384,
                                                      [&](int64_t done) { return done < kSteps; });
                  process->Signal(SIGCONT);
                  REPLAYDB_RETURN_IF_ERROR(bytes.status());
                  const int64_t before = total;
                  total += kSteps;
                  // From its first step applied to its last.
                  int64_t first = before;
                  Clock::time_point t0{};
                  const auto until = Clock::now() + std::chrono::seconds(120);
                  while (Clock::now() < until) {
                    const int64_t n = ReplicaSteps(replica, spec.name);
                    if (t0 == Clock::time_point{} && n > before) {
                      t0 = Clock::now();
                      first = n;
                    }
                    if (n >= total) {
                      const double s = Seconds(Clock::now() - t0).count();
                      return static_cast<double>((total - first) * 16384) / std::max(s, 1e-6);
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(500));
                  }
                  return Status::DeadlineExceeded("the replica did not catch up in 120 s");
                }));
            return out;
          }));
  const Result<Perf> perf = UcxPerftest(transport, "ucp_am_bw", size_t{1} << 20, 1000);
  SetCeiling(perf, perf.ok() ? perf->bytes_per_second : 0, "ucp_am_bw 1MiB " + transport, &r);
  return r;
}

// remote_replica_insert: one writer's logged appends (64 steps of 16 KiB a
// call) to a primary that a replica follows, against the same writer's to
// a primary without one, in the same row.
Result<BenchResult> RunReplicaInsert(const std::string& transport, const Timing& timing) {
  const TableSpec spec = LoggedSpec("remote_replica_insert", 1 << 14);
  std::vector<uint8_t> data(64 * 16384);
  FillPattern(data.data(), data.size(), 11);
  const auto measure = [&](Table* table) {
    return Median(timing.repetitions, [&]() -> Result<double> {
      const auto start = Clock::now();
      REPLAYDB_ASSIGN_OR_RETURN(const int64_t bytes, AppendSteps(table, data, 16384, [&](int64_t) {
                                  return Clock::now() - start < timing.duration;
                                }));
      return static_cast<double>(bytes) / Seconds(Clock::now() - start).count();
    });
  };
  BenchResult r;
  REPLAYDB_ASSIGN_OR_RETURN(
      r, WithReplica(transport, spec, [&](DB* p, DB*, ChildProcess*) -> Result<BenchResult> {
        REPLAYDB_ASSIGN_OR_RETURN(auto table, p->GetTable(spec.name));
        BenchResult out;
        out.unit = "B/s";
        REPLAYDB_ASSIGN_OR_RETURN(out.value, measure(table.get()));
        return out;
      }));
  REPLAYDB_ASSIGN_OR_RETURN(const BenchResult alone,
                            WithServedTable(transport, spec, [&](DB* p) -> Result<BenchResult> {
                              REPLAYDB_ASSIGN_OR_RETURN(auto table, p->GetTable(spec.name));
                              BenchResult out;
                              REPLAYDB_ASSIGN_OR_RETURN(out.value, measure(table.get()));
                              return out;
                            }));
  r.ceiling = alone.value;
  r.ceiling_name = "no replica " + transport;
  return r;
}

// remote_replicated_append: p50 microseconds of one append of a 1 KiB
// step acknowledged replicated(1) (WriterOptions::sync: each Append waits
// for its acknowledgment, which waits for the replica's next read; the
// primary runs --wal-sync none, so that the row measures replication, not
// fsync), against two am_lat round trips (the writer's, the replica's)
// plus the same append's p50 on a local logged table.
Result<BenchResult> RunReplicatedAppend(const std::string& transport, DB* local_db,
                                        const Timing& timing) {
  TableSpec spec = BytesSpec("remote_replicated_append", 1024, 1 << 14, 1);
  spec.logging = TableLogging::kOn;
  std::vector<uint8_t> data(1024);
  FillPattern(data.data(), data.size(), 13);
  const ConstTensor step{DType::kU8, Shape{1024}, data.data(), data.size()};
  // Appends through `writer`, a trajectory every 256 steps.
  const auto appends = [&](TrajectoryWriter* writer) {
    return [writer, &step, n = int64_t{0}]() mutable -> Status {
      REPLAYDB_RETURN_IF_ERROR(writer->Append(std::span(&step, 1)));
      if (++n % 256 == 0) return writer->End(EndReason::kTruncated);
      return Status::OK();
    };
  };
  double local = 0;
  REPLAYDB_RETURN_IF_ERROR(WithTable(local_db, spec, [&](Table* t) -> Result<BenchResult> {
                             REPLAYDB_ASSIGN_OR_RETURN(auto writer, t->NewWriter());
                             REPLAYDB_ASSIGN_OR_RETURN(
                                 local, P50Micros(timing.duration, appends(writer.get())));
                             return BenchResult{};
                           }).status());
  spec.acks = Acks::Replicated(1);
  double leader = 0;
  BenchResult r;
  REPLAYDB_ASSIGN_OR_RETURN(
      r, WithReplica(
             transport, spec,
             [&](DB* p, DB*, ChildProcess*) -> Result<BenchResult> {
               // Once the replica is in sync (it has read).
               const auto limit = Clock::now() + std::chrono::seconds(30);
               for (;;) {
                 REPLAYDB_ASSIGN_OR_RETURN(const ReplicationInfo info, p->Replication());
                 if (!info.replicas.empty() && info.replicas[0].in_sync) break;
                 if (Clock::now() > limit) {
                   return Status::DeadlineExceeded("the replica was not in sync within 30 s");
                 }
                 std::this_thread::sleep_for(std::chrono::milliseconds(5));
               }
               REPLAYDB_ASSIGN_OR_RETURN(auto table, p->GetTable(spec.name));
               WriterOptions wo;
               wo.sync = true;
               wo.timeout = kCallTimeout;
               // The same appends acknowledged `leader` (not waiting for the replica,
               // which still follows): what the replica's round adds.
               wo.acks = Acks{AckMode::kLeader, 0};
               REPLAYDB_ASSIGN_OR_RETURN(auto alone, table->NewWriter(wo));
               REPLAYDB_ASSIGN_OR_RETURN(leader, P50Micros(timing.duration, appends(alone.get())));
               wo.acks = Acks{AckMode::kTable, 0};
               REPLAYDB_ASSIGN_OR_RETURN(auto writer, table->NewWriter(wo));
               BenchResult out;
               out.unit = "us";
               REPLAYDB_ASSIGN_OR_RETURN(out.value,
                                         P50Micros(timing.duration, appends(writer.get())));
               return out;
             },
             {"--wal-sync", "none"}));
  const Result<Perf> perf = UcxPerftest(transport, "ucp_am_lat", 1024, 20000);
  SetCeiling(perf, perf.ok() ? 2 * (2 * perf->p50_us) + local : 0,
             "2 am_lat_rtt+local " + transport, &r);
  char note[200];
  std::snprintf(note, sizeof(note),
                "local append p50 %.2f us; am_lat round trip %.2f us; acks leader p50 %.2f us",
                local, perf.ok() ? 2 * perf->p50_us : 0.0, leader);
  r.note = r.note.empty() ? note : r.note + "; " + note;
  return r;
}

// Sample(256) of a prioritized table over 4 shards (DB::Connect("A+B+C+D",
// four `replaydb serve` processes) against the same on one of those
// servers alone holding as many steps (the ceiling): p50 of each, in the
// same run (docs/sharding.md).
Result<BenchResult> RunShardedSample(const std::string& transport, const Timing& timing,
                                     int64_t step_bytes) {
  constexpr int kShards = 4;
  constexpr int64_t kBatch = 256;
  constexpr int64_t kSteps = 8192;
  TableSpec spec = BytesSpec("sharded_sample", step_bytes, kSteps, 8);
  spec.selector = SelectorKind::kPrioritized;
  REPLAYDB_ASSIGN_OR_RETURN(auto dir, TempDir::Make());
  UseTransport(transport);
  std::vector<Served> servers;
  std::string sharded;
  for (int s = 0; s < kShards; ++s) {
    REPLAYDB_ASSIGN_OR_RETURN(Served served,
                              Served::Start(dir->path() + "/shard" + std::to_string(s), 1));
    sharded += (s == 0 ? "" : "+") + served.address;
    servers.push_back(std::move(served));
  }
  const auto fill = [&](Table* table) -> Status {
    REPLAYDB_ASSIGN_OR_RETURN(auto writer, table->NewWriter());
    std::vector<uint8_t> data(static_cast<size_t>(step_bytes * 64));
    FillPattern(data.data(), data.size(), 9);
    std::mt19937_64 rng(11);
    std::vector<double> priorities(64);
    const ConstTensor many{DType::kU8, Shape{64, step_bytes}, data.data(), data.size()};
    for (int64_t i = 0; i < kSteps / 64; ++i) {
      for (double& p : priorities) p = 0.1 + static_cast<double>(rng() % 1000);
      REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span(&many, 1), priorities));
      if (i % 4 == 3) REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTerminal));
    }
    return writer->End(EndReason::kTerminal);
  };
  const auto p50 = [&](const std::string& address) -> Result<double> {
    ConnectOptions o;
    o.client_name = "replaydb bench";
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> db, DB::Connect(address, o));
    REPLAYDB_ASSIGN_OR_RETURN(auto table, db->CreateTable(spec));
    REPLAYDB_RETURN_IF_ERROR(fill(table.get()));
    SampleBatch batch;
    return P50Micros(timing.duration, [&] {
      SampleOptions so;
      so.timeout = kCallTimeout;
      so.importance_beta = 0.4;
      return table->Sample(kBatch, so, &batch);
    });
  };
  Result<double> one = p50(servers[0].address);
  spec.name = "sharded_sample_4";
  Result<double> four = one.ok() ? p50(sharded) : one;
  for (Served& s : servers) {
    const Status stopped = s.Stop();
    if (four.ok() && !stopped.ok()) return stopped;
  }
  if (!one.ok()) return one.status();
  if (!four.ok()) return four.status();
  BenchResult r;
  r.value = *four;
  r.unit = "us";
  r.ceiling = *one;
  r.ceiling_name = "S=1 sample p50 " + transport;
  char note[128];
  std::snprintf(note, sizeof(note), "S=4 p50 %.1f us, S=1 p50 %.1f us (B=256, L=8)", *four, *one);
  r.note = note;
  return r;
}

// How exact sharded draws are: the total-variation distance between the
// items' draw frequencies and their exact probabilities, over `batches`
// samples of 256 from a prioritized table over 4 shards whose masses differ
// tenfold shard to shard (shard s's priorities in [1, 2) x 10^s), against
// the same distance for as many draws from one table holding the same
// priorities (the ceiling: a single table's sampling noise; a local table).
// The shards are four `replaydb serve` processes over TCP
// (DB::Connect("A+B+C+D")). The note adds what an equal quota from each
// shard (Reverb's several servers) gives: 64 draws a shard, each shard's
// keys made the sharded table's by the shard in their top 8 bits
// (docs/sharding.md).
Result<BenchResult> ShardedExactness(const Timing& timing, const TableSpec& spec,
                                     const std::string& dir, const std::string& address,
                                     const std::vector<std::string>& shard_addresses);

Result<BenchResult> RunShardedExactness(const Timing& timing) {
  TableSpec spec = BytesSpec("sharded_exactness", 16, 4096, 1);
  spec.block_steps = 16;  // a trajectory's: nothing is evicted
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_exponent = 1.0;
  REPLAYDB_ASSIGN_OR_RETURN(auto dir, TempDir::Make());
  UseTransport("tcp");
  std::vector<Served> servers;
  std::vector<std::string> addresses;
  Status status;
  for (int s = 0; s < 4 && status.ok(); ++s) {
    Result<Served> served = Served::Start(dir->path() + "/shard" + std::to_string(s), 1);
    if (!served.ok()) {
      status = served.status();
      break;
    }
    addresses.push_back(served->address);
    servers.push_back(std::move(served).value());
  }
  std::string address;
  for (const std::string& a : addresses) address += (address.empty() ? "" : "+") + a;
  Result<BenchResult> r = status.ok()
                              ? ShardedExactness(timing, spec, dir->path(), address, addresses)
                              : Result<BenchResult>(status);
  for (Served& server : servers) {
    const Status stopped = server.Stop();
    if (r.ok() && !stopped.ok()) r = stopped;
  }
  return r;
}

Result<BenchResult> ShardedExactness(const Timing& timing, const TableSpec& spec,
                                     const std::string& dir, const std::string& address,
                                     const std::vector<std::string>& shard_addresses) {
  constexpr size_t kShards = 4;
  constexpr int64_t kBatch = 256;
  constexpr int64_t kItemsPerShard = 1024;
  constexpr int kShardKeyShift = 56;  // a sharded table's key: shard << 56 | the shard's own
  const int batches = timing.quick ? 1000 : 4000;
  ConnectOptions co;
  co.client_name = "replaydb bench";
  REPLAYDB_ASSIGN_OR_RETURN(auto sharded_db, DB::Connect(address, co));
  REPLAYDB_ASSIGN_OR_RETURN(auto sharded, sharded_db->CreateTable(spec));
  DBOptions o;
  o.create_if_missing = true;
  REPLAYDB_ASSIGN_OR_RETURN(auto single_db, DB::Open(o, dir + "/single"));
  REPLAYDB_ASSIGN_OR_RETURN(auto single, single_db->CreateTable(spec));
  std::vector<std::unique_ptr<DB>> shard_dbs;  // each shard alone, for the equal quotas
  std::vector<std::shared_ptr<Table>> shards;
  for (const std::string& a : shard_addresses) {
    REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(a, co));
    REPLAYDB_ASSIGN_OR_RETURN(auto t, db->GetTable(spec.name));
    shard_dbs.push_back(std::move(db));
    shards.push_back(std::move(t));
  }
  // The same priorities into both: trajectories of 16 steps, round the
  // shards, each shard's priorities of its own magnitude.
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  {
    REPLAYDB_ASSIGN_OR_RETURN(auto to_sharded, sharded->NewWriter());
    REPLAYDB_ASSIGN_OR_RETURN(auto to_single, single->NewWriter());
    const uint8_t step[16] = {};
    const ConstTensor t{DType::kU8, Shape{16}, step, sizeof(step)};
    for (int64_t traj = 0; traj < kItemsPerShard * static_cast<int64_t>(kShards) / 16; ++traj) {
      const double scale =
          std::pow(10.0, static_cast<double>(traj % static_cast<int64_t>(kShards)));
      for (int i = 0; i < 16; ++i) {
        const double p = unit(rng) * scale;
        REPLAYDB_RETURN_IF_ERROR(to_sharded->Append(std::span(&t, 1), p));
        REPLAYDB_RETURN_IF_ERROR(to_single->Append(std::span(&t, 1), p));
      }
      REPLAYDB_RETURN_IF_ERROR(to_sharded->End(EndReason::kTerminal));
      REPLAYDB_RETURN_IF_ERROR(to_single->End(EndReason::kTerminal));
    }
  }
  for (Table* t : {sharded.get(), single.get()}) {
    if (t->Info().num_items != kItemsPerShard * static_cast<int64_t>(kShards)) {
      return Status::Internal("sharded_exactness: a table holds " +
                              std::to_string(t->Info().num_items) + " items, not " +
                              std::to_string(kItemsPerShard * static_cast<int64_t>(kShards)));
    }
  }
  // The exact distribution of a table: priority / sum, by key.
  const auto exact = [](Table& table) -> Result<std::unordered_map<ItemKey, double>> {
    std::vector<ItemKey> keys;
    std::vector<double> priorities;
    REPLAYDB_RETURN_IF_ERROR(table.ItemPriorities(&keys, &priorities));
    const double total = std::accumulate(priorities.begin(), priorities.end(), 0.0);
    std::unordered_map<ItemKey, double> p;
    for (size_t i = 0; i < keys.size(); ++i) p[keys[i]] = priorities[i] / total;
    return p;
  };
  // The total-variation distance from `want` of `batches` draws by `draw`.
  const auto tv = [&](const std::unordered_map<ItemKey, double>& want,
                      const std::function<Status(std::vector<ItemKey>*)>& draw) -> Result<double> {
    std::unordered_map<ItemKey, int64_t> counts;
    std::vector<ItemKey> keys;
    int64_t draws = 0;
    for (int b = 0; b < batches; ++b) {
      REPLAYDB_RETURN_IF_ERROR(draw(&keys));
      for (ItemKey k : keys) ++counts[k];
      draws += static_cast<int64_t>(keys.size());
    }
    double distance = 0;
    for (const auto& [key, p] : want) {
      const auto it = counts.find(key);
      const double seen = it == counts.end() ? 0 : static_cast<double>(it->second);
      distance += std::abs(seen / static_cast<double>(draws) - p);
    }
    return distance / 2;
  };
  SampleOptions so;
  so.gather = false;
  SampleBatch batch;
  const auto sample = [&](Table& table, int64_t n, std::vector<ItemKey>* keys) -> Status {
    REPLAYDB_RETURN_IF_ERROR(table.Sample(n, so, &batch));
    keys->assign(batch.keys.begin(), batch.keys.end());
    return Status::OK();
  };
  // The seed is in the note, so that a run can be repeated. (Seeding the
  // sharded table seeds its shards; the equal quotas draw after it.)
  const uint64_t seed = std::random_device{}();
  REPLAYDB_RETURN_IF_ERROR(sharded->Seed(seed));
  REPLAYDB_RETURN_IF_ERROR(single->Seed(seed + kShards));
  REPLAYDB_ASSIGN_OR_RETURN(const auto want_sharded, exact(*sharded));
  REPLAYDB_ASSIGN_OR_RETURN(const auto want_single, exact(*single));
  REPLAYDB_ASSIGN_OR_RETURN(const double value, tv(want_sharded, [&](std::vector<ItemKey>* keys) {
                              return sample(*sharded, kBatch, keys);
                            }));
  REPLAYDB_ASSIGN_OR_RETURN(const double noise, tv(want_single, [&](std::vector<ItemKey>* keys) {
                              return sample(*single, kBatch, keys);
                            }));
  REPLAYDB_ASSIGN_OR_RETURN(
      const double quota, tv(want_sharded, [&](std::vector<ItemKey>* keys) -> Status {
        keys->clear();
        for (size_t s = 0; s < kShards; ++s) {
          REPLAYDB_RETURN_IF_ERROR(shards[s]->Sample(kBatch / kShards, so, &batch));
          for (ItemKey k : batch.keys) keys->push_back((uint64_t{s} << kShardKeyShift) | k);
        }
        return Status::OK();
      }));
  BenchResult r;
  r.value = value;
  r.unit = "TV";
  r.ceiling = noise;
  r.ceiling_name = "one table's TV";
  char note[256];
  std::snprintf(
      note, sizeof(note),
      "%d batches of %lld over %zu shards of %lld items: sharded TV %.4f, one table %.4f; "
      "an equal quota per shard %.3f; seed %llu",
      batches, static_cast<long long>(kBatch), kShards, static_cast<long long>(kItemsPerShard),
      value, noise, quota, static_cast<unsigned long long>(seed));
  r.note = note;
  return r;
}

}  // namespace

std::vector<CaseWithTarget> RemoteCases() {
  std::vector<CaseWithTarget> cases;
  const Target bw{Target::Kind::kRatioAtLeast, 0.7, "ratio >= 0.70"};
  cases.push_back({{"sharded_exactness",
                    {{"shards", 4}, {"batch", 256}},
                    [](DB*, const Timing& timing) { return RunShardedExactness(timing); }},
                   Target{Target::Kind::kRatioAtMost, 1.5, "ratio <= 1.50"}});
  for (const std::string transport : kTransports) {
    for (const int writers : {1, 4}) {
      for (const int64_t per_call : {int64_t{1}, int64_t{64}}) {
        cases.push_back({{"remote_insert",
                          // (transport first: `--filter insert/step_bytes` means the
                          // local insert rows)
                          {{"transport", 0, transport},
                           {"step_bytes", 16384},
                           {"writers", writers},
                           {"steps_per_call", per_call}},
                          [transport, writers, per_call](DB*, const Timing& timing) {
                            return RunRemoteInsert(transport, timing, writers, per_call);
                          }},
                         bw});
      }
    }
    cases.push_back({{"remote_sample",
                      {{"transport", 0, transport}, {"step_bytes", 4096}, {"batch", 256}, {"L", 32}},
                      [transport](DB*, const Timing& timing) {
                        return RunRemoteSample(transport, timing);
                      }},
                     transport == "sm" ? Target{Target::Kind::kRatioAtLeast, 0.8, "ratio >= 0.80"}
                                       : Target{Target::Kind::kRatioAtLeast, 0.6, "ratio >= 0.60"}});
    if (transport == "sm") {  // over TCP UCX only emulates reads
      cases.push_back({{"remote_read",
                        {{"transport", 0, transport}, {"bytes", 131072}, {"reads", 256}},
                        [transport](DB*, const Timing& timing) {
                          return RunRemoteRead(transport, timing);
                        }},
                       Target{Target::Kind::kRatioAtLeast, 0.8, "ratio >= 0.80"}});
    }
    cases.push_back(
        {{"remote_replica_apply",
          {{"transport", 0, transport}, {"step_bytes", 16384}},
          [transport](DB*, const Timing& timing) { return RunReplicaApply(transport, timing); }},
         bw});
    cases.push_back(
        {{"remote_replica_insert",
          {{"transport", 0, transport}, {"step_bytes", 16384}, {"steps_per_call", 64}},
          [transport](DB*, const Timing& timing) { return RunReplicaInsert(transport, timing); }},
         Target{Target::Kind::kRatioAtLeast, 0.85, "ratio >= 0.85"}});
    cases.push_back(
        {{"remote_replicated_append",
          {{"transport", 0, transport}, {"step_bytes", 1024}, {"acks", 0, "replicated(1)"}},
          [transport](DB* db, const Timing& timing) {
            return RunReplicatedAppend(transport, db, timing);
          }},
         Target{Target::Kind::kRatioAtMost, 1.0, "ratio <= 1.00"}});
    for (const int64_t step_bytes : {int64_t{64}, int64_t{4096}}) {
      cases.push_back({{"remote_sharded_sample",
                        {{"transport", 0, transport}, {"shards", 4}, {"step_bytes", step_bytes}},
                        [transport, step_bytes](DB*, const Timing& timing) {
                          return RunShardedSample(transport, timing, step_bytes);
                        }},
                       Target{Target::Kind::kRatioAtMost, 1.5, "ratio <= 1.50"}});
    }
    for (const bool update : {false, true}) {
      cases.push_back({{"remote_small",
                        {{"transport", 0, transport},
                         {"call", 0, update ? "update_1_key" : "sample_B1_64B"}},
                        [transport, update](DB* db, const Timing& timing) {
                          return RunRemoteSmall(transport, db, timing, update);
                        }},
                       Target{Target::Kind::kRatioAtMost, 1.5, "ratio <= 1.50"}});
    }
  }
  return cases;
}

}  // namespace replaydb::tools
