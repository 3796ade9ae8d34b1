// Pieces shared by the `replaydb bench` cases (tools/bench*.cc).
#ifndef REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_COMMON_H_
#define REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_COMMON_H_

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/device.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb::tools {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// Bound on every blocking call, so that a stuck engine fails the bench
// instead of hanging it. Nothing blocks in a healthy run: the tables use the
// default rate limiter, which only holds samples until the first item.
constexpr std::chrono::milliseconds kCallTimeout{60000};
constexpr int kRepetitions = 3;

// Fills n bytes at dst with a pseudo-random pattern (xorshift64 of `seed`).
inline void FillPattern(void* dst, size_t n, uint64_t seed) {
  auto* out = static_cast<unsigned char*>(dst);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + sizeof(x) <= n; i += sizeof(x)) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(out + i, &x, sizeof(x));
  }
  for (; i < n; ++i) out[i] = static_cast<unsigned char>(i);
}

// Keeps the compiler from discarding stores into *p that nothing reads.
inline void DoNotOptimize(const void* p) {
#if defined(__GNUC__)
  __asm__ __volatile__("" : : "r"(p) : "memory");
#else
  static volatile const void* sink;
  sink = p;
#endif
}

struct Param {
  std::string name;
  int64_t value = 0;
  // When non-empty, the parameter's value is this text (e.g. device=gpu).
  std::string text;

  std::string ValueText() const { return text.empty() ? std::to_string(value) : text; }
};

struct Timing {
  Seconds duration;  // of one timed repetition
  int repetitions = kRepetitions;
  // --quick: benches that time a fixed amount of work (recover, checkpoint)
  // do less of it.
  bool quick = false;
};

// The goal a row is held to.
struct Target {
  enum class Kind { kRatioAtLeast, kRatioAtMost, kValueAtLeast, kValueAtMost };
  Kind kind = Kind::kRatioAtLeast;
  double threshold = 0;
  std::string text;  // printed beside the row and in the footer
};

struct BenchResult {
  std::string bench;
  std::vector<Param> params;
  double value = 0;
  std::string unit;
  std::optional<double> ceiling;
  std::string ceiling_name;
  std::optional<Target> target;
  // When non-empty, printed after the row and as "note" in its JSON line
  // (e.g. a ceiling's large-transfer peak).
  std::string note;

  std::optional<double> ratio() const {
    if (!ceiling.has_value() || !(*ceiling > 0)) return std::nullopt;
    return value / *ceiling;
  }
  // nullopt when no target applies (or the ratio it needs is unknown).
  std::optional<bool> target_met() const {
    if (!target.has_value()) return std::nullopt;
    if (target->kind == Target::Kind::kValueAtLeast) return value >= target->threshold;
    if (target->kind == Target::Kind::kValueAtMost) return value <= target->threshold;
    std::optional<double> r = ratio();
    if (!r.has_value()) return std::nullopt;
    if (target->kind == Target::Kind::kRatioAtMost) return *r <= target->threshold;
    return *r >= target->threshold;
  }
};

using BenchFn = std::function<Result<BenchResult>(DB* db, const Timing& timing)>;

struct BenchCase {
  std::string bench;
  std::vector<Param> params;
  BenchFn run;

  // "insert/step_bytes=64/writers=1": what --filter matches.
  std::string Id() const {
    std::string id = bench;
    for (const Param& p : params) id += "/" + p.name + "=" + p.ValueText();
    return id;
  }
};

// Runs `measure` (one timed repetition, returning a rate) `repetitions`
// times and returns the median.
inline Result<double> Median(int repetitions, const std::function<Result<double>()>& measure) {
  std::vector<double> rates;
  for (int i = 0; i < repetitions; ++i) {
    Result<double> rate = measure();
    if (!rate.ok()) return rate.status();
    rates.push_back(*rate);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// Microseconds per call of `call` (which queues device work that `finish`
// waits for): 100 calls back to back, then `finish`, repeated for
// `timing.duration` (median of repetitions), after 20 warm-up calls. What a
// caller issuing the calls back to back sees: the slower of the host's
// per-call work and the device's.
inline Result<double> MicrosPerCall(const Timing& timing, const std::function<Status()>& call,
                                    const std::function<Status()>& finish) {
  constexpr int kChunk = 100;
  for (int i = 0; i < 20; ++i) REPLAYDB_RETURN_IF_ERROR(call());  // warm-up
  REPLAYDB_RETURN_IF_ERROR(finish());
  return Median(timing.repetitions, [&]() -> Result<double> {
    int64_t calls = 0;
    const auto start = Clock::now();
    Seconds elapsed{0};
    do {
      for (int i = 0; i < kChunk; ++i) REPLAYDB_RETURN_IF_ERROR(call());
      REPLAYDB_RETURN_IF_ERROR(finish());
      calls += kChunk;
      elapsed = Clock::now() - start;
    } while (elapsed < timing.duration);
    return elapsed.count() * 1e6 / static_cast<double>(calls);
  });
}

// MicrosPerCall of work queued on `stream`.
inline Result<double> GpuMicrosPerCall(const Timing& timing, const DeviceStream& stream,
                                       const std::function<Status()>& call) {
  return MicrosPerCall(timing, call, [&] { return stream.Synchronize(); });
}

// Samples per second of `batch_size` from `table` into *batch during
// `duration`, reusing *batch's buffers.
inline Result<double> SampleRate(Table* table, int64_t batch_size, Seconds duration,
                                 SampleBatch* batch) {
  SampleOptions options;
  options.timeout = kCallTimeout;
  int64_t samples = 0;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  Clock::time_point now = start;
  do {
    Status s = table->Sample(batch_size, options, batch);
    if (!s.ok()) return s.WithContext("Sample");
    ++samples;
    now = Clock::now();
  } while (now < deadline);
  return static_cast<double>(samples) / Seconds(now - start).count();
}

// What TimeVectorAppends measures besides its result.
struct VectorAppendTimes {
  // Host microseconds of the first append of each timed round (the one that
  // starts every environment's next trajectory, evicting the oldest ones),
  // mean over the rounds; it is part of the result.
  double first_micros = 0;
  // Mean microseconds per environment of the EndMany that ends every
  // environment after each round (untimed in the result).
  double end_micros = 0;
};

// Times vector appends as the vector_insert rows run them: each round
// appends `trajectory_steps` steps to every one of `envs` environments of
// `writer` through `append` (one call per step; `finish`, which may be
// empty, waits for work a call queued), then ends every environment's
// trajectory with one EndMany, untimed. `generations` rounds fill the hot
// tier first, so the timed rounds evict; rounds are then timed until
// timing.duration passes, the median of timing.repetitions. Returns
// microseconds per append.
inline Result<double> TimeVectorAppends(VectorWriter* writer, int64_t envs,
                                        int64_t trajectory_steps, int64_t generations,
                                        const Timing& timing,
                                        const std::function<Status()>& append,
                                        const std::function<Status()>& finish,
                                        VectorAppendTimes* times) {
  Seconds first_time{0};
  int64_t first_calls = 0;
  auto round = [&](bool timed) -> Result<Seconds> {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < trajectory_steps; ++i) {
      REPLAYDB_RETURN_IF_ERROR(append());
      if (i == 0 && timed) {
        first_time += Clock::now() - t0;
        ++first_calls;
      }
    }
    if (finish) REPLAYDB_RETURN_IF_ERROR(finish());
    return Seconds(Clock::now() - t0);
  };
  Seconds end_time{0};
  int64_t end_calls = 0;
  std::vector<size_t> all(static_cast<size_t>(envs));
  std::iota(all.begin(), all.end(), size_t{0});
  auto end_all = [&]() -> Status {
    const auto t0 = Clock::now();
    Status s = writer->EndMany(all, EndReason::kTerminal);
    if (!s.ok()) return s.WithContext("EndMany");
    end_time += Clock::now() - t0;
    end_calls += envs;
    return Status::OK();
  };
  for (int64_t g = 0; g < generations; ++g) {
    Result<Seconds> t = round(/*timed=*/false);
    if (!t.ok()) return t.status().WithContext("warm-up");
    REPLAYDB_RETURN_IF_ERROR(end_all());
  }
  Result<double> micros = Median(timing.repetitions, [&]() -> Result<double> {
    Seconds timed{0};
    int64_t calls = 0;
    do {
      Result<Seconds> t = round(/*timed=*/true);
      if (!t.ok()) return t.status();
      timed += *t;
      calls += trajectory_steps;
      REPLAYDB_RETURN_IF_ERROR(end_all());
    } while (timed < timing.duration);
    return timed.count() * 1e6 / static_cast<double>(calls);
  });
  times->end_micros =
      end_calls > 0 ? end_time.count() * 1e6 / static_cast<double>(end_calls) : 0.0;
  times->first_micros =
      first_calls > 0 ? first_time.count() * 1e6 / static_cast<double>(first_calls) : 0.0;
  return micros;
}

// The vector_insert rows' note: what a round's first append and an End cost.
inline std::string VectorAppendNote(const VectorAppendTimes& times, int64_t trajectory_steps) {
  char note[200];
  std::snprintf(note, sizeof(note),
                "first append of each %d (new trajectories, evictions): %.0f us on the host; "
                "untimed: EndMany of every env after them, %.2f us per env",
                static_cast<int>(trajectory_steps), times.first_micros, times.end_micros);
  return note;
}

// Creates `spec`'s table, runs `body` on it, then drops it so that benches do
// not hold each other's memory. The body's error wins over the drop's.
inline Result<BenchResult> WithTable(DB* db, const TableSpec& spec,
                              const std::function<Result<BenchResult>(Table*)>& body) {
  auto table_or = db->CreateTable(spec);
  if (!table_or.ok()) return table_or.status().WithContext("CreateTable");
  std::shared_ptr<Table> table = std::move(table_or).value();
  Result<BenchResult> result = body(table.get());
  Status dropped = db->DropTable(spec.name);
  if (result.ok() && !dropped.ok()) return dropped.WithContext("DropTable");
  return result;
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
// when the object goes away.
class TempDir {
 public:
  static Result<std::unique_ptr<TempDir>> Make() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") +
                          "/replaydb-bench-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      return Status::IOError("mkdtemp '" + pattern + "': " + std::strerror(errno));
    }
    return std::unique_ptr<TempDir>(new TempDir(std::move(pattern)));
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Opens a fresh DB with `options` in a temporary directory, runs `body` on
// it, then closes the DB and removes the directory.
inline Result<BenchResult> WithFreshDB(DBOptions options,
                                       const std::function<Result<BenchResult>(DB*)>& body) {
  auto dir = TempDir::Make();
  if (!dir.ok()) return dir.status();
  options.error_if_exists = true;
  auto db_or = DB::Open(options, (*dir)->path() + "/db");
  if (!db_or.ok()) return db_or.status().WithContext("DB::Open");
  std::unique_ptr<DB> db = std::move(db_or).value();
  Result<BenchResult> result = body(db.get());
  db.reset();
  return result;
}

struct CaseWithTarget {
  BenchCase bench_case;
  std::optional<Target> target;
};

// The priority benches (tools/replaydb/bench/bench_priority.cc). `big` adds n = 100M.
std::vector<CaseWithTarget> PriorityCases(bool big);
// Drops the table the priority cases share; call before the DB closes.
void ReleasePriorityTables();
// The GPU hot-tier benches (tools/replaydb/bench/bench_gpu.cc): gather and vector_insert.
// Empty, with a note on stderr, where no GPU can be used.
std::vector<CaseWithTarget> GpuCases();
// The durability benches (tools/replaydb/bench/bench_durability.cc): wal_append, recover,
// checkpoint.
std::vector<CaseWithTarget> DurabilityCases();
// The cold-tier benches (tools/replaydb/bench/bench_cold.cc): spill, reload,
// sample_rotating.
std::vector<CaseWithTarget> ColdCases();
// The remote benches (tools/replaydb/bench/bench_remote.cc): remote_insert,
// remote_sample, remote_small, each against a `replaydb serve` process, with
// ucx_perftest's ceilings.
std::vector<CaseWithTarget> RemoteCases();
// The draw-scaling benches (tools/replaydb/bench/bench_scale.cc):
// sample_scale at 1M, 10M and 50M steps against a random-read floor.
std::vector<CaseWithTarget> ScaleCases();
// The failover benches (tools/replaydb/bench/bench_failover.cc): etcd and
// three `replaydb serve --coordinator` nodes, the primary killed `kills`
// times under a writer's load. Empty, with a note on stderr, without etcd.
std::vector<CaseWithTarget> FailoverCases(int kills);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_COMMON_H_
