// `replaydb bench` priority cases:
//   prio_sample/n=N/batch=4096/device=cpu   Table::Sample of 4096 keys (no
//       gather) from a prioritized table of N items. Baseline
//       "cpu_cumsum_search": what a prefix-sum sampler pays per batch when
//       priorities change between batches: an fp64 inclusive scan over the N
//       priorities plus 4096 binary searches.
//   prio_update/n=N/batch=4096/device=cpu   Table::UpdatePriorities of 4096
//       random live keys. Baseline "cpu_cumsum_rebuild": writing 4096
//       priorities into an array and rescanning it.
//   prio_sample/.../device=gpu, prio_update/.../device=gpu  the same on a
//       table with priority_device = 0: Table::SampleToDevice into device
//       buffers, Table::UpdatePrioritiesFromDevice from device arrays. Time
//       per call = wall time of many queued calls, synchronised at the end
//       (what a learner issuing them back to back sees). No baseline in this
//       process: tools/analysis/prio_baseline.py times torch on the same priorities
//       and tools/scripts/gpu-run.sh puts the two side by side. Present only where
//       a GPU can be used.
// The cases of one n and device share one filled table.
// Values are microseconds per call (median of repetitions); ratio =
// value / baseline, so below 1 is faster and 1/ratio is the speed-up.
//
// Priorities: item i gets 10^(12 u_i - 6), u_i = splitmix64(2026 + i) / 2^64
// (53 bits), log-uniform over 12 orders of magnitude; tools/analysis/prio_baseline.py
// draws the same values for the torch baselines.
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "replaydb/device.h"
#include "tools/replaydb/bench/bench_common.h"

namespace replaydb::tools {
namespace {

constexpr int64_t kPrioBatch = 4096;
constexpr int64_t kFillChunk = int64_t{1} << 16;
constexpr uint64_t kPrioritySeed = 2026;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double PriorityAt(int64_t i) {
  const double u = static_cast<double>(SplitMix64(kPrioritySeed + i) >> 11) * 0x1.0p-53;
  return std::pow(10.0, 12.0 * u - 6.0);
}

// `logged`: the table's default (host placement: logged); false: logging off.
TableSpec PrioritySpec(int64_t n, bool gpu, bool logged = true) {
  TableSpec spec;
  spec.name = "prio_" + std::to_string(n) + (gpu ? "_gpu" : "_cpu") + (logged ? "" : "_unlogged");
  spec.priority_device = gpu ? 0 : -1;
  if (!logged) spec.logging = TableLogging::kOff;
  spec.columns = {{"x", DType::kU8, {}}};
  spec.capacity_steps = n;
  spec.block_steps = 4096;
  spec.selector = SelectorKind::kPrioritized;
  return spec;
}

// Appends n one-byte steps with PriorityAt(i), in trajectories of kFillChunk.
Status Fill(Table* table, int64_t n, std::vector<ItemKey>* keys) {
  auto writer = table->NewWriter({kCallTimeout});
  if (!writer.ok()) return writer.status();
  std::vector<uint8_t> data(kFillChunk, 7);
  std::vector<double> priorities(kFillChunk);
  for (int64_t done = 0; done < n; done += kFillChunk) {
    const int64_t m = std::min(kFillChunk, n - done);
    for (int64_t i = 0; i < m; ++i) priorities[i] = PriorityAt(done + i);
    const ConstTensor steps[] = {{DType::kU8, {m}, data.data(), static_cast<size_t>(m)}};
    REPLAYDB_RETURN_IF_ERROR(
        (*writer)->AppendMany(steps, std::span<const double>(priorities.data(), m)));
    const uint64_t id = (*writer)->trajectory_id();
    for (int64_t i = 0; i < m; ++i) keys->push_back(MakeItemKey(id, i));
    REPLAYDB_RETURN_IF_ERROR((*writer)->End(EndReason::kTruncated));
  }
  return Status::OK();
}

// The table the priority cases of one (n, device) share: filled once, dropped
// when a case needs another.
struct FilledTable {
  std::string name;
  std::shared_ptr<Table> table;
  std::vector<ItemKey> keys;
};

FilledTable& SharedTable() {
  static FilledTable filled;
  return filled;
}

Result<FilledTable*> GetFilled(DB* db, int64_t n, bool gpu, bool logged = true) {
  FilledTable& filled = SharedTable();
  const TableSpec spec = PrioritySpec(n, gpu, logged);
  if (filled.table && filled.name == spec.name) return &filled;
  if (filled.table) {
    filled.table.reset();
    REPLAYDB_RETURN_IF_ERROR(db->DropTable(filled.name));
    filled.keys.clear();
  }
  auto table = db->CreateTable(spec);
  if (!table.ok()) return table.status().WithContext("CreateTable");
  filled.name = spec.name;
  filled.table = std::move(table).value();
  REPLAYDB_RETURN_IF_ERROR(Fill(filled.table.get(), n, &filled.keys));
  return &filled;
}

// Microseconds per call of `call`, timed over `duration` (median of
// repetitions).
Result<double> MicrosPerCall(const Timing& timing, const std::function<Status()>& call) {
  REPLAYDB_RETURN_IF_ERROR(call());  // warm-up
  return Median(timing.repetitions, [&]() -> Result<double> {
    int64_t calls = 0;
    const auto start = Clock::now();
    Seconds elapsed{0};
    do {
      REPLAYDB_RETURN_IF_ERROR(call());
      ++calls;
      elapsed = Clock::now() - start;
    } while (elapsed < timing.duration);
    return elapsed.count() * 1e6 / static_cast<double>(calls);
  });
}

// The prefix-sum baseline: rescans n priorities, then searches `batch` draws.
double CumsumSearchMicros(const Timing& timing, int64_t n, bool with_searches) {
  std::vector<double> priorities(n);
  for (int64_t i = 0; i < n; ++i) priorities[i] = PriorityAt(i);
  std::vector<double> cumsum(n);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> positions(kPrioBatch);
  auto once = [&] {
    if (!with_searches) {
      // An update: write the new values, then rescan.
      for (int64_t b = 0; b < kPrioBatch; ++b) {
        positions[b] = rng() % n;
        priorities[positions[b]] = PriorityAt(static_cast<int64_t>(rng() % n));
      }
    }
    std::inclusive_scan(priorities.begin(), priorities.end(), cumsum.begin());
    if (with_searches) {
      const double total = cumsum.back();
      for (int64_t b = 0; b < kPrioBatch; ++b) {
        const double target = std::uniform_real_distribution<double>(0, total)(rng);
        positions[b] = std::upper_bound(cumsum.begin(), cumsum.end(), target) - cumsum.begin();
      }
    }
    DoNotOptimize(positions.data());
    DoNotOptimize(cumsum.data());
  };
  auto result = MicrosPerCall(timing, [&] {
    once();
    return Status::OK();
  });
  return result.ok() ? *result : 0;
}

Result<BenchResult> RunPrioSampleCpu(DB* db, const Timing& timing, int64_t n) {
  REPLAYDB_ASSIGN_OR_RETURN(FilledTable * filled, GetFilled(db, n, /*gpu=*/false));
  Table* table = filled->table.get();
  {
    SampleOptions options;
    options.timeout = kCallTimeout;
    options.gather = false;
    SampleBatch batch;
    REPLAYDB_ASSIGN_OR_RETURN(const double micros, MicrosPerCall(timing, [&] {
                                return table->Sample(kPrioBatch, options, &batch);
                              }));
    BenchResult r;
    r.value = micros;
    r.unit = "us";
    r.ceiling = CumsumSearchMicros(timing, n, /*with_searches=*/true);
    r.ceiling_name = "cpu_cumsum_search";
    return r;
  }
}

Result<BenchResult> RunPrioUpdateCpu(DB* db, const Timing& timing, int64_t n) {
  REPLAYDB_ASSIGN_OR_RETURN(FilledTable * filled, GetFilled(db, n, /*gpu=*/false));
  Table* table = filled->table.get();
  const std::vector<ItemKey>& keys = filled->keys;
  {
    std::mt19937_64 rng(3);
    std::vector<ItemKey> update_keys(kPrioBatch);
    std::vector<double> values(kPrioBatch);
    PriorityUpdateResult result;
    REPLAYDB_ASSIGN_OR_RETURN(const double micros, MicrosPerCall(timing, [&] {
                                for (int64_t b = 0; b < kPrioBatch; ++b) {
                                  update_keys[b] = keys[rng() % keys.size()];
                                  values[b] = PriorityAt(static_cast<int64_t>(rng() % n));
                                }
                                return table->UpdatePriorities(update_keys, values, &result);
                              }));
    if (result.skipped != 0) return Status::Internal("prio_update: live keys were skipped");
    BenchResult r;
    r.value = micros;
    r.unit = "us";
    r.ceiling = CumsumSearchMicros(timing, n, /*with_searches=*/false);
    r.ceiling_name = "cpu_cumsum_rebuild";
    return r;
  }
}

constexpr char kGpuBaselines[] = "torch: tools/analysis/prio_baseline.py";

Result<BenchResult> RunPrioSampleGpu(DB* db, const Timing& timing, int64_t n) {
  REPLAYDB_ASSIGN_OR_RETURN(FilledTable * filled, GetFilled(db, n, /*gpu=*/true));
  REPLAYDB_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create(0));
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer keys, DeviceBuffer::Allocate(0, kPrioBatch * 8));
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer probabilities, DeviceBuffer::Allocate(0, kPrioBatch * 4));
  SampleOptions options;
  options.timeout = kCallTimeout;
  const DeviceSampleOutput out = {keys.as<uint64_t>(), probabilities.as<float>(), nullptr};
  REPLAYDB_ASSIGN_OR_RETURN(const double micros, GpuMicrosPerCall(timing, stream, [&] {
                              return filled->table->SampleToDevice(kPrioBatch, options, out,
                                                                   stream.handle());
                            }));
  BenchResult r;
  r.value = micros;
  r.unit = "us";
  r.ceiling_name = kGpuBaselines;
  return r;
}

Result<BenchResult> RunPrioUpdateGpu(DB* db, const Timing& timing, int64_t n, bool logged) {
  REPLAYDB_ASSIGN_OR_RETURN(FilledTable * filled, GetFilled(db, n, /*gpu=*/true, logged));
  // 64 batches of random live keys and new priorities, uploaded once and
  // cycled through.
  constexpr int64_t kBatches = 64;
  std::mt19937_64 rng(5);
  std::vector<uint64_t> keys(kBatches * kPrioBatch);
  std::vector<float> priorities(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = filled->keys[rng() % filled->keys.size()];
    priorities[i] = static_cast<float>(PriorityAt(static_cast<int64_t>(rng() % n)));
  }
  REPLAYDB_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create(0));
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, keys.size() * 8));
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer d_priorities,
                            DeviceBuffer::Allocate(0, priorities.size() * 4));
  REPLAYDB_RETURN_IF_ERROR(d_keys.CopyFromHost(keys.data(), keys.size() * 8));
  REPLAYDB_RETURN_IF_ERROR(d_priorities.CopyFromHost(priorities.data(), priorities.size() * 4));
  int64_t next = 0;
  REPLAYDB_ASSIGN_OR_RETURN(const double micros, GpuMicrosPerCall(timing, stream, [&] {
                              const int64_t offset = (next++ % kBatches) * kPrioBatch;
                              return filled->table->UpdatePrioritiesFromDevice(
                                  d_keys.as<uint64_t>() + offset, d_priorities.as<float>() + offset,
                                  kPrioBatch, stream.handle());
                            }));
  const TableInfo info = filled->table->Info();
  if (info.priority_updates_skipped != 0) {
    return Status::Internal("prio_update gpu: " + std::to_string(info.priority_updates_skipped) +
                            " live keys were skipped");
  }
  BenchResult r;
  r.value = micros;
  r.unit = "us";
  r.ceiling_name = kGpuBaselines;
  return r;
}

}  // namespace

void ReleasePriorityTables() {
  FilledTable& filled = SharedTable();
  filled.table.reset();
  filled.keys = {};
  filled.name.clear();
}

std::vector<CaseWithTarget> PriorityCases(bool big) {
  std::vector<CaseWithTarget> cases;
  std::vector<int64_t> sizes = {1'000'000, 10'000'000};
  if (big) sizes.push_back(100'000'000);
  std::string why_no_gpu;
  const bool gpu = CudaDeviceCount(&why_no_gpu) > 0;
  if (!gpu) {
    std::fprintf(stderr, "replaydb bench: prio_* device=gpu cases left out: %s\n",
                 why_no_gpu.c_str());
  }
  for (int64_t n : sizes) {
    if (!gpu) continue;
    const std::vector<Param> params = {{"n", n}, {"batch", kPrioBatch}, {"device", 0, "gpu"}};
    std::optional<Target> sample_target;
    std::optional<Target> update_target;
    if (n == 10'000'000) {
      sample_target = Target{Target::Kind::kValueAtMost, 50.0, "<= 50 us (H100)"};
      update_target = Target{Target::Kind::kValueAtMost, 20.0, "<= 20 us (H100)"};
    } else if (n == 100'000'000) {
      sample_target = Target{Target::Kind::kValueAtMost, 500.0, "<= 500 us (H100)"};
      update_target = Target{Target::Kind::kValueAtMost, 25.0, "<= 25 us (H100)"};
    }
    cases.push_back({{"prio_sample", params,
                      [n](DB* db, const Timing& timing) { return RunPrioSampleGpu(db, timing, n); }},
                     sample_target});
    // Updates of a logged table (the default for a host-placed one: the
    // log learns them from copies the caller's stream makes) and of one
    // with logging off; the same targets.
    for (const bool logged : {true, false}) {
      std::vector<Param> update_params = params;
      update_params.push_back({"logged", logged ? 1 : 0, logged ? "yes" : "no"});
      cases.push_back({{"prio_update", update_params,
                        [n, logged](DB* db, const Timing& timing) {
                          return RunPrioUpdateGpu(db, timing, n, logged);
                        }},
                       update_target});
    }
  }
  for (int64_t n : sizes) {
    std::optional<Target> sample_target;
    // >= 1M samples/s at n = 1M: a batch of 4096 within 4096 us.
    if (n == 1'000'000) {
      sample_target = Target{Target::Kind::kValueAtMost, 4096.0, "<= 4096 us: >= 1M samples/s"};
    }
    const std::vector<Param> params = {{"n", n}, {"batch", kPrioBatch}, {"device", 0, "cpu"}};
    cases.push_back({{"prio_sample", params,
                      [n](DB* db, const Timing& timing) { return RunPrioSampleCpu(db, timing, n); }},
                     sample_target});
    cases.push_back({{"prio_update", params,
                      [n](DB* db, const Timing& timing) { return RunPrioUpdateCpu(db, timing, n); }},
                     std::nullopt});
  }
  return cases;
}

}  // namespace replaydb::tools
