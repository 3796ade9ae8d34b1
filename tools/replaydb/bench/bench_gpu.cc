// `replaydb bench` cases of the GPU hot tier, present only where a GPU can be
// used (CudaDeviceCount > 0; otherwise a note on stderr says why not):
//
//   gather/tier={device,pinned}/step_bytes={256,4096,65536}/batch=256/L={1,32}
//       Table::SampleToDevice of 256 windows of L steps into device buffers
//       (the column, keys, probabilities and mask), drawn on the device too
//       (a uniform table with priority_device 0: nothing passes through the
//       host), from a table of one u8[step_bytes] column whose hot tier is in
//       device 0's memory
//       (tier=device: Placement::Device(0)) or in pinned host memory that the
//       kernel reads over PCIe (tier=pinned: Placement::Host(), which must
//       report "pinned"). The table (block_steps 64) is filled, untimed,
//       through VectorWriter::AppendFromDevice with 1024-step trajectories:
//       max(min(2 GiB, 1M steps), 8 batches) of step data, at most 4 GiB.
//       Before timing, 8 windows read by LookupToDevice are checked against
//       the bytes written. The note splits a call into its host part (time
//       inside the calls) and its device part (calls queued behind a held
//       stream, then run back to back: DeviceMicrosPerCall), the
//       same for the ceiling's copy, and gives the host part of a
//       LookupToDevice of 256 host keys (random live items in enough sets of
//       256 that one pass reads >= 256 MiB, cycling through them), whose
//       host work grows with the keys. Value: payload GB/s = 256 * L *
//       step_bytes / time per call.
//       Ceiling, measured right there, copies of the same payload size back
//       to back on the same stream from a source ring of >= 256 MiB into one
//       destination (like the gather's output):
//         "d2d_memcpy/2"       tier=device: CopyDeviceToDeviceAsync; payload
//                              bytes / time, i.e. half the memcpy's
//                              read+write rate;
//         "pinned_h2d_memcpy"  tier=pinned: CopyHostToDeviceAsync from pinned
//                              memory (PinnedBuffer).
//       The row's note gives the same copy at 256 MiB (the large-transfer
//       peak), measured once per run. torch's index_select of the same rows is
//       timed by tools/analysis/gather_baseline.py; tools/analysis/gather_summary.py puts the
//       two side by side.
//
//   vector_sample/envs=4096/step_bytes=1024/batch=4096/draws=device
//       Table::SampleToDevice of 4096 rows from a vector table of 4096
//       environments x 1 KiB on device 0 (block 8 vector steps, 256 of them,
//       filled with AppendFromDevice), drawn uniformly in the gather launch
//       (priority_device 0); one batch is checked against the bytes written
//       first. Value: microseconds per call. Ceiling "d2d_memcpy": one
//       CopyDeviceToDeviceAsync of the same 4 MiB. Target: <= 20 us.
//
//   sample_to_host/tier={device,pinned}/step_bytes=4096/batch=256/L=32/
//       selector=prioritized
//       Table::Sample of 256 windows of 32 steps (32 MiB) into a fresh
//       SampleBatch per call, as the C API and Python make them, from a
//       prioritized table drawn on device 0 (priority_device 0) whose hot
//       tier is in device memory (tier=device) or pinned host memory
//       (tier=pinned), filled as the gather rows' table is; one batch is
//       checked against the bytes written first. Value: payload GB/s.
//       Ceiling, same run: "pinned_d2h_memcpy" (tier=device), a copy of the
//       same bytes from device memory into pinned host memory;
//       "host_memcpy_from_pinned" (tier=pinned), a memcpy of the same bytes
//       from pinned into pageable host memory already mapped. Targets:
//       ratio >= 0.8 (device), >= 0.5 (pinned).
//
//   vector_insert/envs=4096/step_bytes=1024/table={vector,per_env}/
//       wal={off,on}/threads={auto,1}/from={device,host}
//       (table=vector: wal=off threads=auto only, from both; table=per_env:
//       threads=1 with wal=off only; from=host with wal=off, threads=auto)
//       VectorWriter::AppendFromDevice of one step of 4096 environments x
//       1 KiB from a device array (from=host: VectorWriter::Append of the
//       same rows from pageable host memory), into a table on device 0 with
//       one column u8[1024]:
//       - table=vector: a vector table (TableSpec::lanes 4096,
//         docs/vector_tables.md), block 8 vector steps, room for 256 (every
//         environment's 64-step episode, 4 times over). A call stores one
//         vector step; its 4096 rows are 4096 items.
//       - table=per_env: one trajectory per environment, block 64 steps,
//         room for 4 trajectories of 64 steps per environment.
//       Every environment's episode ends after 64 steps; one EndMany of the
//       4096 environments runs between the timed stretches (its cost per
//       environment is in the row's note; a vector table's only checks the
//       environments).
//       The hot tier is filled once beforehand, so the timed appends evict.
//       A per-environment table's writer splits its per-environment passes
//       over WriterOptions::threads threads: automatic (the default; the
//       note says how many), or 1, the baseline of the caller's thread
//       alone.
//       Value: microseconds per call. Ceiling "d2d_memcpy": microseconds of
//       one CopyDeviceToDeviceAsync of the same 4 MiB (from the same input
//       into a 256 MiB ring); from=host, "pageable_h2d_memcpy": one
//       CopyHostToDeviceAsync of the host input instead. ratio = value /
//       ceiling, as for the priority rows. The issue's <= 20 us target is
//       the table=vector wal=off from=device row's.

//   device_append/steps_per_call={1,1024}/step_bytes=1024
//       TrajectoryWriter::Append (steps_per_call=1) or AppendMany of host
//       steps in pageable memory into a table on device 0 of four columns
//       (u8[1000], f32[4], f32, f32: 1 KiB a step; block 64 steps, room for
//       64 trajectories of 1024 steps, filled first so that the timed calls
//       evict); each trajectory ends after 1024 steps. The device is
//       synchronised every 100 calls. Value: microseconds per call.
//       Ceiling "pageable_h2d_memcpy": CopyHostToDeviceAsync of the call's
//       rows, one copy per column, back to back on one stream. No target.
//
// Time per call: wall time of many calls queued on one DeviceStream,
// synchronised at the end (GpuMicrosPerCall), median of the repetitions.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/device.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"
#include "replaydb/types.h"
#include "tools/replaydb/bench/bench_common.h"

namespace replaydb::tools {
namespace {

constexpr int kDevice = 0;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kBlockSteps = 64;

// ---- gather
constexpr int64_t kGatherBatch = 256;
constexpr int64_t kGatherTrajectorySteps = 1024;
// The fill: min(kFillBytes, kFillMaxSteps steps) of step data, raised to
// kFillMinBatches batches, capped at kFillMaxBytes.
constexpr int64_t kFillBytes = 2 * kGiB;
constexpr int64_t kFillMaxSteps = int64_t{1} << 20;
constexpr int64_t kFillMinBatches = 8;
constexpr int64_t kFillMaxBytes = 4 * kGiB;
// Environments of the fill's vector writer, at most.
constexpr int64_t kFillMaxEnvs = 256;
// Step contents the fill cycles through, so that neighbouring steps differ
// (odd, so that a window off by one step shows).
constexpr int64_t kFillPatterns = 7;
// Key sets: one pass over them reads >= kKeyCycleBytes of windows.
constexpr int64_t kKeyCycleBytes = 256 * kMiB;
constexpr int64_t kMinKeySets = 8;
constexpr int64_t kMaxKeySets = 4096;
// Windows checked against the written bytes before the timing.
constexpr int64_t kCheckedWindows = 8;

// ---- copies the rows are held to
// Source ring of the same-size copies: >= this many bytes and >= 2 payloads.
constexpr int64_t kRingBytes = 256 * kMiB;
// The large transfer whose rate the gather rows' notes give.
constexpr int64_t kPeakBytes = 256 * kMiB;
constexpr char kD2dHalfCeiling[] = "d2d_memcpy/2";
constexpr char kPinnedCeiling[] = "pinned_h2d_memcpy";
constexpr char kD2dCeiling[] = "d2d_memcpy";

// ---- vector insert
constexpr int64_t kInsertEnvs = 4096;
constexpr int64_t kInsertStepBytes = 1024;
constexpr int64_t kInsertTrajectorySteps = 64;
// Trajectories per environment the hot tier holds.
constexpr int64_t kInsertGenerations = 4;
// Block size of the vector table, whose steps are 4 MiB each.
constexpr int64_t kVectorBlockSteps = 8;

// ---- trajectory writer into a device table
constexpr int64_t kAppendStepBytes = 1024;
constexpr int64_t kAppendTrajectorySteps = 1024;
// Trajectories the hot tier holds.
constexpr int64_t kAppendGenerations = 64;

enum class Tier { kDevice, kPinned };

const char* TierName(Tier tier) {
  return tier == Tier::kDevice ? "device" : "pinned";
}

// n bytes of a pseudo-random pattern.
std::vector<uint8_t> PatternBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  FillPattern(out.data(), n, seed);
  return out;
}

TableSpec OneColumnSpec(std::string name, int64_t step_bytes, Placement placement) {
  TableSpec spec;
  spec.name = std::move(name);
  spec.columns = {{"data", DType::kU8, Shape{step_bytes}}};
  spec.block_steps = kBlockSteps;
  spec.placement = placement;
  return spec;
}

// FailedPrecondition unless the table's hot tier is where the case needs it.
Status CheckPlacement(Table* table, const std::string& want, const std::string& what) {
  const TableInfo info = table->Info();
  if (info.placement == want) return Status::OK();
  return Status::FailedPrecondition(
      what + ": the table's hot tier is '" + info.placement + "', expected '" + want + "'" +
      (want == "pinned" ? " (Placement::Host() on a machine with a GPU should "
                          "be pinned, mapped host memory)"
                        : ""));
}

// Calls queued behind a held stream per measurement of the device's part of
// a call (DeviceMicrosPerCall); a call queues at most 3 operations.
constexpr int kDeviceCalls = 100;

// The device's part of a call: microseconds per call with the host's work
// out of the way (median of the repetitions).
Result<double> DeviceMicros(const Timing& timing, const DeviceStream& stream,
                            const std::function<Status()>& call) {
  return Median(timing.repetitions, [&] {
    return DeviceMicrosPerCall(kDevice, stream.handle(), kDeviceCalls, call);
  });
}

// Microseconds per copy of `bytes` queued back to back on `stream`, as the
// caller sees it (`*device_micros`: the device's part): copy i reads slot
// i % src_slots of `src` (device memory, or pinned host memory when
// `from_host`) and writes slot i % dst_slots of `dst` (device memory).
Result<double> CopyMicros(const Timing& timing, const DeviceStream& stream, bool from_host,
                          void* dst, int64_t dst_slots, const void* src, int64_t src_slots,
                          int64_t bytes, double* device_micros = nullptr) {
  int64_t next = 0;
  const auto copy = [&] {
    const int64_t i = next++;
    void* to = static_cast<std::byte*>(dst) + (i % dst_slots) * bytes;
    const void* from = static_cast<const std::byte*>(src) + (i % src_slots) * bytes;
    const size_t n = static_cast<size_t>(bytes);
    return from_host ? CopyHostToDeviceAsync(to, from, n, stream.handle())
                     : CopyDeviceToDeviceAsync(to, from, n, stream.handle());
  };
  if (device_micros != nullptr) {
    REPLAYDB_ASSIGN_OR_RETURN(*device_micros, DeviceMicros(timing, stream, copy));
  }
  return GpuMicrosPerCall(timing, stream, copy);
}

// A copy's rate: payload GB/s as the caller sees it, and the device's part
// of one copy.
struct CopyRate {
  double gbps = 0;
  double device_micros = 0;
};

// Copies of `bytes` into one device buffer, from a ring of >= kRingBytes and
// >= 2 slots in device memory (tier=device) or pinned host memory
// (tier=pinned).
Result<CopyRate> SameSizeCopy(const Timing& timing, const DeviceStream& stream, Tier tier,
                              int64_t bytes) {
  const int64_t slots = std::max<int64_t>(2, (kRingBytes + bytes - 1) / bytes);
  const size_t ring_bytes = static_cast<size_t>(slots * bytes);
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer dst,
                            DeviceBuffer::Allocate(kDevice, static_cast<size_t>(bytes)));
  CopyRate rate;
  double micros = 0;
  if (tier == Tier::kDevice) {
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer ring, DeviceBuffer::Allocate(kDevice, ring_bytes));
    REPLAYDB_RETURN_IF_ERROR(ring.Fill(0x5A, stream.handle()));
    REPLAYDB_ASSIGN_OR_RETURN(micros, CopyMicros(timing, stream, /*from_host=*/false, dst.data(), 1,
                                                 ring.data(), slots, bytes, &rate.device_micros));
  } else {
    REPLAYDB_ASSIGN_OR_RETURN(PinnedBuffer ring, PinnedBuffer::Allocate(ring_bytes));
    std::memset(ring.data(), 0x5A, ring_bytes);
    REPLAYDB_ASSIGN_OR_RETURN(micros, CopyMicros(timing, stream, /*from_host=*/true, dst.data(), 1,
                                                 ring.data(), slots, bytes, &rate.device_micros));
  }
  rate.gbps = static_cast<double>(bytes) / micros / 1e3;
  return rate;
}

// Payload GB/s of kPeakBytes copies of the tier's kind; measured once per
// process and tier.
Result<double> PeakCopyGBps(const Timing& timing, const DeviceStream& stream, Tier tier) {
  static std::optional<double> peak[2];
  std::optional<double>& cached = peak[tier == Tier::kDevice ? 0 : 1];
  if (!cached.has_value()) {
    REPLAYDB_ASSIGN_OR_RETURN(const CopyRate rate, SameSizeCopy(timing, stream, tier, kPeakBytes));
    cached = rate.gbps;
  }
  return *cached;
}

std::string PeakNote(Tier tier, double peak_gbps) {
  char buf[192];
  if (tier == Tier::kDevice) {
    std::snprintf(buf, sizeof(buf), "%s of 256 MiB (peak): %.0f GB/s (memcpy read+write %.0f GB/s)",
                  kD2dHalfCeiling, peak_gbps, 2 * peak_gbps);
  } else {
    std::snprintf(buf, sizeof(buf), "%s of 256 MiB (peak): %.1f GB/s", kPinnedCeiling, peak_gbps);
  }
  return buf;
}

// How much the gather table holds.
struct GatherFill {
  int64_t envs = 0;          // of the fill's vector writer
  int64_t trajectories = 0;  // a multiple of envs
  int64_t steps = 0;         // trajectories * kGatherTrajectorySteps
};

GatherFill GatherFillFor(int64_t step_bytes, int64_t sequence_length) {
  const int64_t batch_bytes = kGatherBatch * sequence_length * step_bytes;
  int64_t bytes = std::min(kFillBytes, kFillMaxSteps * step_bytes);
  bytes = std::min(kFillMaxBytes, std::max(bytes, kFillMinBatches * batch_bytes));
  const int64_t trajectory_bytes = kGatherTrajectorySteps * step_bytes;
  GatherFill fill;
  fill.trajectories = std::max<int64_t>(1, (bytes + trajectory_bytes - 1) / trajectory_bytes);
  fill.envs = std::min(fill.trajectories, kFillMaxEnvs);
  fill.trajectories = (fill.trajectories + fill.envs - 1) / fill.envs * fill.envs;
  fill.steps = fill.trajectories * kGatherTrajectorySteps;
  return fill;
}

// The host copy of what the fill wrote: step s of the trajectory that
// environment e wrote holds pattern row (s % kFillPatterns, e).
struct FillPatterns {
  int64_t envs = 0;
  int64_t step_bytes = 0;
  std::vector<uint8_t> bytes;  // [kFillPatterns, envs, step_bytes]

  const uint8_t* Step(int64_t env, int64_t step) const {
    return bytes.data() + ((step % kFillPatterns) * envs + env) * step_bytes;
  }
};

// Writes fill.trajectories trajectories of kGatherTrajectorySteps steps with
// AppendFromDevice, fill.envs at a time; (*trajectory_ids)[t] is trajectory
// t's id, written by environment t % fill.envs.
Status FillGatherTable(Table* table, const GatherFill& fill, const FillPatterns& patterns,
                       const DeviceStream& stream, std::vector<uint64_t>* trajectory_ids) {
  REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer d_patterns,
                            DeviceBuffer::Allocate(kDevice, patterns.bytes.size()));
  REPLAYDB_RETURN_IF_ERROR(
      d_patterns.CopyFromHost(patterns.bytes.data(), patterns.bytes.size(), 0, stream.handle()));
  WriterOptions options;
  options.timeout = kCallTimeout;
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<VectorWriter> writer,
                            table->NewVectorWriter(static_cast<size_t>(fill.envs), options));
  const size_t step_rows_bytes = static_cast<size_t>(fill.envs * patterns.step_bytes);
  ConstTensor step{DType::kU8, Shape{fill.envs, patterns.step_bytes}, nullptr, step_rows_bytes};
  trajectory_ids->clear();
  for (int64_t round = 0; round < fill.trajectories / fill.envs; ++round) {
    for (int64_t s = 0; s < kGatherTrajectorySteps; ++s) {
      step.data = d_patterns.as<std::byte>() + (s % kFillPatterns) * step_rows_bytes;
      Status st = writer->AppendFromDevice(std::span<const ConstTensor>(&step, 1), stream.handle());
      if (!st.ok()) return st.WithContext("fill: AppendFromDevice");
    }
    for (int64_t e = 0; e < fill.envs; ++e) {
      trajectory_ids->push_back(writer->trajectory_id(static_cast<size_t>(e)));
      Status st = writer->End(static_cast<size_t>(e), EndReason::kTerminal);
      if (!st.ok()) return st.WithContext("fill: End");
    }
  }
  // d_patterns is freed on return: the queued appends must be done.
  return stream.Synchronize();
}

// The device buffers a LookupToDevice of kGatherBatch windows writes.
struct GatherOutput {
  DeviceBuffer column;         // [B, L, step_bytes]
  DeviceBuffer keys;           // [B] u64
  DeviceBuffer probabilities;  // [B] f32
  DeviceBuffer mask;           // [B * L] u8
  DeviceSampleOutput out;
};

Result<GatherOutput> AllocateGatherOutput(int64_t sequence_length, int64_t step_bytes) {
  const size_t windows = static_cast<size_t>(kGatherBatch * sequence_length);
  GatherOutput g;
  REPLAYDB_ASSIGN_OR_RETURN(
      g.column, DeviceBuffer::Allocate(kDevice, windows * static_cast<size_t>(step_bytes)));
  REPLAYDB_ASSIGN_OR_RETURN(g.keys,
                            DeviceBuffer::Allocate(kDevice, kGatherBatch * sizeof(uint64_t)));
  REPLAYDB_ASSIGN_OR_RETURN(g.probabilities,
                            DeviceBuffer::Allocate(kDevice, kGatherBatch * sizeof(float)));
  REPLAYDB_ASSIGN_OR_RETURN(g.mask, DeviceBuffer::Allocate(kDevice, windows));
  g.out.keys = g.keys.as<uint64_t>();
  g.out.probabilities = g.probabilities.as<float>();
  g.out.weights = nullptr;
  g.out.columns = {g.column.data()};
  g.out.mask = g.mask.as<uint8_t>();
  return Result<GatherOutput>(std::move(g));
}

// Gathers the first kCheckedWindows windows and compares keys, mask and
// bytes with what the fill wrote (window w: trajectory traj[w], start
// start[w]).
Status CheckGather(Table* table, const GatherFill& fill, const FillPatterns& patterns,
                   std::span<const ItemKey> keys, std::span<const int64_t> traj,
                   std::span<const int64_t> start, int64_t sequence_length, GatherOutput* g,
                   const DeviceStream& stream) {
  const int64_t n = kCheckedWindows;
  const size_t window_bytes = static_cast<size_t>(sequence_length * patterns.step_bytes);
  REPLAYDB_RETURN_IF_ERROR(g->column.Fill(0xEE, stream.handle()));
  REPLAYDB_RETURN_IF_ERROR(g->mask.Fill(0xEE, stream.handle()));
  Status s = table->LookupToDevice(keys.first(n), g->out, stream.handle());
  if (!s.ok()) return s.WithContext("check: LookupToDevice");
  REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
  std::vector<uint8_t> column(n * window_bytes);
  std::vector<uint8_t> mask(n * sequence_length);
  std::vector<uint64_t> got_keys(n);
  REPLAYDB_RETURN_IF_ERROR(g->column.CopyToHost(column.data(), column.size(), 0, stream.handle()));
  REPLAYDB_RETURN_IF_ERROR(g->mask.CopyToHost(mask.data(), mask.size(), 0, stream.handle()));
  REPLAYDB_RETURN_IF_ERROR(
      g->keys.CopyToHost(got_keys.data(), got_keys.size() * sizeof(uint64_t), 0, stream.handle()));
  for (int64_t w = 0; w < n; ++w) {
    const std::string where =
        "check: window " + std::to_string(w) + " (key " + std::to_string(keys[w]) + ")";
    if (got_keys[w] != keys[w]) {
      return Status::Internal(where + ": LookupToDevice wrote key " + std::to_string(got_keys[w]));
    }
    const int64_t env = traj[w] % fill.envs;
    for (int64_t j = 0; j < sequence_length; ++j) {
      if (mask[w * sequence_length + j] != 1) {
        return Status::Internal(where + ": mask of step " + std::to_string(j) + " is " +
                                std::to_string(mask[w * sequence_length + j]) + ", expected 1");
      }
      const uint8_t* got = column.data() + w * window_bytes + j * patterns.step_bytes;
      if (std::memcmp(got, patterns.Step(env, start[w] + j),
                      static_cast<size_t>(patterns.step_bytes)) != 0) {
        return Status::Internal(where + ": step " + std::to_string(j) +
                                " differs from the bytes written");
      }
    }
  }
  return Status::OK();
}

// The gather rows' table: one u8[step_bytes] column on `tier`, windows of
// `sequence_length` steps, drawn on device 0 (priority_device), room for
// `fill` and one spare block per environment (the fill evicts nothing).
TableSpec GatherTableSpec(const std::string& name, Tier tier, int64_t step_bytes,
                          int64_t sequence_length, SelectorKind selector, const GatherFill& fill) {
  TableSpec spec = OneColumnSpec(name + "_" + TierName(tier), step_bytes,
                                 tier == Tier::kDevice ? Placement::Device(kDevice)
                                                       : Placement::Host());
  spec.sequence_length = sequence_length;
  spec.padding = Padding::kNone;
  spec.selector = selector;
  spec.priority_device = kDevice;
  spec.capacity_steps = fill.steps + fill.envs * kBlockSteps;
  return spec;
}

// Checks that `table` sits on `tier` and fills it (FillGatherTable) with
// patterns of `seed`.
Status PrepareGatherTable(Table* table, Tier tier, const GatherFill& fill, int64_t step_bytes,
                          uint64_t seed, const std::string& what, const DeviceStream& stream,
                          FillPatterns* patterns, std::vector<uint64_t>* trajectory_ids) {
  REPLAYDB_RETURN_IF_ERROR(CheckPlacement(
      table, tier == Tier::kDevice ? "device:" + std::to_string(kDevice) : "pinned", what));
  patterns->envs = fill.envs;
  patterns->step_bytes = step_bytes;
  patterns->bytes =
      PatternBytes(static_cast<size_t>(kFillPatterns * fill.envs * step_bytes), seed);
  return FillGatherTable(table, fill, *patterns, stream, trajectory_ids);
}

Result<BenchResult> RunGather(DB* db, const Timing& timing, Tier tier, int64_t step_bytes,
                              int64_t sequence_length) {
  const GatherFill fill = GatherFillFor(step_bytes, sequence_length);
  // Drawn on the device too: the timed SampleToDevice passes nothing
  // through the host.
  const TableSpec spec = GatherTableSpec("bench_gather", tier, step_bytes, sequence_length,
                                         SelectorKind::kUniform, fill);
  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    const std::string what = std::string("gather tier=") + TierName(tier);
    REPLAYDB_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create(kDevice));
    FillPatterns patterns;
    std::vector<uint64_t> trajectory_ids;
    REPLAYDB_RETURN_IF_ERROR(PrepareGatherTable(table, tier, fill, step_bytes,
                                                static_cast<uint64_t>(step_bytes), what, stream,
                                                &patterns, &trajectory_ids));
    const TableInfo info = table->Info();
    const int64_t items_per_trajectory = kGatherTrajectorySteps - sequence_length + 1;
    if (info.num_steps != fill.steps ||
        info.num_items != fill.trajectories * items_per_trajectory ||
        info.evicted_trajectories != 0) {
      return Status::Internal(what + ": after the fill the table holds " +
                              std::to_string(info.num_steps) + " steps and " +
                              std::to_string(info.num_items) + " items (" +
                              std::to_string(info.evicted_trajectories) +
                              " trajectories evicted); expected " + std::to_string(fill.steps) +
                              " and " + std::to_string(fill.trajectories * items_per_trajectory));
    }

    // Key sets, drawn up front: random live items (trajectory, start).
    const int64_t payload = kGatherBatch * sequence_length * step_bytes;
    const int64_t sets =
        std::clamp((kKeyCycleBytes + payload - 1) / payload, kMinKeySets, kMaxKeySets);
    std::vector<ItemKey> keys(static_cast<size_t>(sets * kGatherBatch));
    std::vector<int64_t> traj(keys.size());
    std::vector<int64_t> start(keys.size());
    std::mt19937_64 rng(static_cast<uint64_t>(step_bytes * 131 + sequence_length));
    std::uniform_int_distribution<int64_t> traj_dist(0, fill.trajectories - 1);
    std::uniform_int_distribution<int64_t> start_dist(0, items_per_trajectory - 1);
    for (size_t i = 0; i < keys.size(); ++i) {
      traj[i] = traj_dist(rng);
      start[i] = start_dist(rng);
      keys[i] = MakeItemKey(trajectory_ids[static_cast<size_t>(traj[i])], start[i]);
    }

    REPLAYDB_ASSIGN_OR_RETURN(GatherOutput g, AllocateGatherOutput(sequence_length, step_bytes));
    REPLAYDB_RETURN_IF_ERROR(
        CheckGather(table, fill, patterns, keys, traj, start, sequence_length, &g, stream));

    int64_t next = 0;
    // Timed: SampleToDevice, drawn and gathered on the device.
    SampleOptions sample;
    sample.timeout = kCallTimeout;
    const auto call = [&] { return table->SampleToDevice(kGatherBatch, sample, g.out, stream.handle()); };
    REPLAYDB_ASSIGN_OR_RETURN(const double micros, GpuMicrosPerCall(timing, stream, call));
    REPLAYDB_ASSIGN_OR_RETURN(const double device_micros, DeviceMicros(timing, stream, call));

    // How much of a call is host work: the time inside the calls alone.
    Seconds host{0};
    constexpr int kHostCalls = 200;
    for (int i = 0; i < kHostCalls; ++i) {
      const auto start_call = Clock::now();
      REPLAYDB_RETURN_IF_ERROR(call());
      host += Clock::now() - start_call;
      if (i % 10 == 9) REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    }
    REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    const double host_micros = host.count() * 1e6 / kHostCalls;
    // Host-drawn keys (LookupToDevice) cost host work per key as well.
    Seconds lookup{0};
    for (int i = 0; i < kHostCalls; ++i) {
      const size_t set = static_cast<size_t>(next++ % sets);
      const auto start_call = Clock::now();
      REPLAYDB_RETURN_IF_ERROR(table->LookupToDevice(
          std::span<const ItemKey>(keys).subspan(set * kGatherBatch, kGatherBatch), g.out,
          stream.handle()));
      lookup += Clock::now() - start_call;
      if (i % 10 == 9) REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    }
    REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    const double lookup_micros = lookup.count() * 1e6 / kHostCalls;

    // The ceiling, and the same copy at kPeakBytes.
    REPLAYDB_ASSIGN_OR_RETURN(const CopyRate copy, SameSizeCopy(timing, stream, tier, payload));
    REPLAYDB_ASSIGN_OR_RETURN(const double peak, PeakCopyGBps(timing, stream, tier));

    BenchResult r;
    r.value = static_cast<double>(payload) / micros / 1e3;
    r.unit = "GB/s";
    r.ceiling = copy.gbps;
    r.ceiling_name = tier == Tier::kDevice ? kD2dHalfCeiling : kPinnedCeiling;
    char host_note[256];
    std::snprintf(host_note, sizeof(host_note),
                  "; a call %.1f us: host part %.1f us, device part %.1f us (the copy: %.1f us, "
                  "device part %.1f us); LookupToDevice of host keys: host part %.1f us",
                  micros, host_micros, device_micros,
                  static_cast<double>(payload) / copy.gbps / 1e3, copy.device_micros,
                  lookup_micros);
    r.note = PeakNote(tier, peak) + host_note;
    return r;
  });
}

// ---- samples to host memory
constexpr int64_t kHostSampleStepBytes = 4096;
constexpr int64_t kHostSampleL = 32;

// Table::Sample to the host from a prioritized table drawn on the device,
// a fresh SampleBatch per call as the C API and Python make them.
Result<BenchResult> RunSampleToHost(DB* db, const Timing& timing, Tier tier) {
  const GatherFill fill = GatherFillFor(kHostSampleStepBytes, kHostSampleL);
  const TableSpec spec = GatherTableSpec("bench_sample_host", tier, kHostSampleStepBytes,
                                         kHostSampleL, SelectorKind::kPrioritized, fill);
  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    const std::string what = std::string("sample_to_host tier=") + TierName(tier);
    REPLAYDB_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create(kDevice));
    FillPatterns patterns;
    std::vector<uint64_t> trajectory_ids;
    REPLAYDB_RETURN_IF_ERROR(PrepareGatherTable(table, tier, fill, kHostSampleStepBytes, 77, what,
                                                stream, &patterns, &trajectory_ids));
    std::unordered_map<uint64_t, int64_t> index_of;
    for (size_t t = 0; t < trajectory_ids.size(); ++t) {
      index_of[trajectory_ids[t]] = static_cast<int64_t>(t);
    }
    SampleOptions options;
    options.timeout = kCallTimeout;
    // One batch checked against the bytes written.
    {
      SampleBatch batch;
      REPLAYDB_RETURN_IF_ERROR(table->Sample(kGatherBatch, options, &batch));
      const size_t window = static_cast<size_t>(kHostSampleL * kHostSampleStepBytes);
      for (int64_t b = 0; b < kGatherBatch; ++b) {
        const ItemKey key = batch.keys[static_cast<size_t>(b)];
        const auto it = index_of.find(ItemKeyTrajectory(key));
        if (it == index_of.end()) return Status::Internal(what + ": drew an unknown trajectory");
        for (int64_t j = 0; j < kHostSampleL; ++j) {
          const std::byte* got = batch.columns[0].data() + b * window + j * kHostSampleStepBytes;
          if (std::memcmp(got, patterns.Step(it->second % fill.envs, ItemKeyStart(key) + j),
                          kHostSampleStepBytes) != 0) {
            return Status::Internal(what + ": window " + std::to_string(b) + " step " +
                                    std::to_string(j) + " differs from the bytes written");
          }
        }
      }
    }
    const auto call = [&] {
      SampleBatch batch;  // fresh each call
      return table->Sample(kGatherBatch, options, &batch);
    };
    const auto none = [] { return Status::OK(); };
    REPLAYDB_ASSIGN_OR_RETURN(const double micros, MicrosPerCall(timing, call, none));
    // Where a call's time goes: the draws alone, and a Lookup of 256 keys
    // (the gather and copy alone).
    SampleOptions draws_only = options;
    draws_only.gather = false;
    REPLAYDB_ASSIGN_OR_RETURN(const double draw_micros, MicrosPerCall(timing, [&] {
                                SampleBatch batch;
                                return table->Sample(kGatherBatch, draws_only, &batch);
                              }, none));
    std::vector<ItemKey> lookup_keys;
    {
      SampleBatch batch;
      REPLAYDB_RETURN_IF_ERROR(table->Sample(kGatherBatch, draws_only, &batch));
      lookup_keys = batch.keys;
    }
    REPLAYDB_ASSIGN_OR_RETURN(const double lookup_micros, MicrosPerCall(timing, [&] {
                                SampleBatch batch;
                                return table->Lookup(lookup_keys, &batch);
                              }, none));
    // The ceiling: the same bytes copied by themselves.
    const size_t payload = static_cast<size_t>(kGatherBatch * kHostSampleL * kHostSampleStepBytes);
    double copy_micros = 0;
    if (tier == Tier::kDevice) {
      REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(kDevice, payload));
      REPLAYDB_ASSIGN_OR_RETURN(PinnedBuffer dst, PinnedBuffer::Allocate(payload));
      REPLAYDB_ASSIGN_OR_RETURN(
          copy_micros, MicrosPerCall(
                           timing, [&] { return src.CopyToHost(dst.data(), payload, 0,
                                                               stream.handle()); },
                           [&] { return stream.Synchronize(); }));
    } else {
      REPLAYDB_ASSIGN_OR_RETURN(PinnedBuffer src, PinnedBuffer::Allocate(payload));
      std::memset(src.data(), 1, payload);
      std::vector<std::byte> dst(payload, std::byte{0});
      REPLAYDB_ASSIGN_OR_RETURN(copy_micros, MicrosPerCall(
                                                 timing,
                                                 [&] {
                                                   std::memcpy(dst.data(), src.data(), payload);
                                                   return Status::OK();
                                                 },
                                                 [] { return Status::OK(); }));
    }
    BenchResult r;
    r.value = static_cast<double>(payload) / micros / 1e3;
    r.unit = "GB/s";
    r.ceiling = static_cast<double>(payload) / copy_micros / 1e3;
    r.ceiling_name = tier == Tier::kDevice ? "pinned_d2h_memcpy" : "host_memcpy_from_pinned";
    char note[256];
    std::snprintf(note, sizeof(note),
                  "a call %.0f us: draws alone (gather=false) %.0f us, Lookup of 256 keys %.0f "
                  "us; the copy alone %.0f us (%zu MiB)",
                  micros, draw_micros, lookup_micros, copy_micros, payload >> 20);
    r.note = note;
    return r;
  });
}

// SampleToDevice of kInsertEnvs rows from a vector table of kInsertEnvs
// environments x 1 KiB on device 0, drawn in the gather launch
// (priority_device 0).
// The vector rows' table: kInsertEnvs environments x kInsertStepBytes on
// device 0, blocks of kVectorBlockSteps vector steps, room for
// kInsertTrajectorySteps * kInsertGenerations of them.
TableSpec VectorTableSpec(const std::string& name) {
  TableSpec spec = OneColumnSpec(name, kInsertStepBytes, Placement::Device(kDevice));
  spec.lanes = kInsertEnvs;
  spec.block_steps = kVectorBlockSteps;
  spec.capacity_steps = kInsertTrajectorySteps * kInsertGenerations;  // vector steps
  return spec;
}

// What the vector rows write: a stream, one step of kInsertEnvs rows of
// pattern bytes in device memory (`pattern`: the same bytes on the host)
// and a vector writer of kInsertEnvs environments (WriterOptions::threads
// `threads`), for `table` after checking it sits on device 0.
struct VectorFeed {
  DeviceStream stream;
  DeviceBuffer input;
  std::vector<uint8_t> pattern;
  std::unique_ptr<VectorWriter> writer;
};

Result<VectorFeed> PrepareVectorFeed(Table* table, const std::string& what, uint64_t seed,
                                     int threads) {
  REPLAYDB_RETURN_IF_ERROR(CheckPlacement(table, "device:" + std::to_string(kDevice), what));
  VectorFeed f;
  REPLAYDB_ASSIGN_OR_RETURN(f.stream, DeviceStream::Create(kDevice));
  const size_t bytes = static_cast<size_t>(kInsertEnvs * kInsertStepBytes);
  REPLAYDB_ASSIGN_OR_RETURN(f.input, DeviceBuffer::Allocate(kDevice, bytes));
  f.pattern = PatternBytes(bytes, seed);
  REPLAYDB_RETURN_IF_ERROR(f.input.CopyFromHost(f.pattern.data(), bytes, 0, f.stream.handle()));
  WriterOptions options;
  options.timeout = kCallTimeout;
  options.threads = threads;
  REPLAYDB_ASSIGN_OR_RETURN(f.writer,
                            table->NewVectorWriter(static_cast<size_t>(kInsertEnvs), options));
  return f;
}

Result<BenchResult> RunVectorSample(DB* db, const Timing& timing) {
  TableSpec spec = VectorTableSpec("bench_vector_sample");
  spec.priority_device = kDevice;
  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    REPLAYDB_ASSIGN_OR_RETURN(VectorFeed feed, PrepareVectorFeed(table, "vector_sample", 19, 0));
    const DeviceStream& stream = feed.stream;
    const DeviceBuffer& input = feed.input;
    const std::vector<uint8_t>& bytes = feed.pattern;
    VectorWriter* writer = feed.writer.get();
    const size_t step_rows_bytes = static_cast<size_t>(kInsertEnvs * kInsertStepBytes);
    const ConstTensor step{DType::kU8, spec.columns[0].shape.Prepend(kInsertEnvs), input.data(),
                           step_rows_bytes};
    for (int64_t i = 0; i < spec.capacity_steps; ++i) {
      REPLAYDB_RETURN_IF_ERROR(writer->AppendFromDevice(std::span<const ConstTensor>(&step, 1),
                                                        stream.handle()));
    }
    REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    const int64_t batch = kInsertEnvs;
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer column, DeviceBuffer::Allocate(kDevice, step_rows_bytes));
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer keys, DeviceBuffer::Allocate(kDevice, batch * 8));
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer probabilities, DeviceBuffer::Allocate(kDevice, batch * 4));
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer mask, DeviceBuffer::Allocate(kDevice, batch));
    DeviceSampleOutput out;
    out.columns = {column.data()};
    out.keys = keys.as<uint64_t>();
    out.probabilities = probabilities.as<float>();
    out.mask = mask.as<uint8_t>();
    SampleOptions sample;
    sample.timeout = kCallTimeout;
    // One batch checked: every row is the pattern row of its environment.
    REPLAYDB_RETURN_IF_ERROR(table->SampleToDevice(batch, sample, out, stream.handle()));
    std::vector<uint64_t> got_keys(static_cast<size_t>(batch));
    std::vector<uint8_t> got(step_rows_bytes);
    REPLAYDB_RETURN_IF_ERROR(keys.CopyToHost(got_keys.data(), batch * 8, 0, stream.handle()));
    REPLAYDB_RETURN_IF_ERROR(column.CopyToHost(got.data(), got.size(), 0, stream.handle()));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t lane = ItemKeyStart(got_keys[static_cast<size_t>(b)]) % kInsertEnvs;
      if (std::memcmp(got.data() + b * kInsertStepBytes, bytes.data() + lane * kInsertStepBytes,
                      kInsertStepBytes) != 0) {
        return Status::Internal("vector_sample: row " + std::to_string(b) + " (environment " +
                                std::to_string(lane) + ") differs from the bytes written");
      }
    }
    REPLAYDB_ASSIGN_OR_RETURN(const double micros, GpuMicrosPerCall(timing, stream, [&] {
                                return table->SampleToDevice(batch, sample, out, stream.handle());
                              }));
    // Ceiling: the same 4 MiB copied on the device into a 256 MiB ring.
    const int64_t slots = kRingBytes / static_cast<int64_t>(step_rows_bytes);
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer ring,
                              DeviceBuffer::Allocate(kDevice, slots * step_rows_bytes));
    REPLAYDB_ASSIGN_OR_RETURN(const double copy_micros,
                              CopyMicros(timing, stream, false, ring.data(), slots, input.data(), 1,
                                         static_cast<int64_t>(step_rows_bytes)));
    BenchResult r;
    r.value = micros;
    r.unit = "us";
    r.ceiling = copy_micros;
    r.ceiling_name = kD2dCeiling;
    r.note = "drawn in the gather launch (priority_device 0), " +
             std::to_string(spec.capacity_steps) + " vector steps of " +
             std::to_string(kInsertEnvs) + " environments";
    return r;
  });
}

// A database of the vector_insert rows: checkpoints neither timed nor
// on close, so that only the appends (and, wal=on, their log) count.
DBOptions NoCheckpoints() {
  DBOptions options;
  options.checkpoint.every_wal_bytes = 0;
  options.checkpoint.every = std::chrono::seconds(0);
  options.checkpoint.on_close = false;
  return options;
}

// threads: WriterOptions::threads (0: automatic). vector_table: a vector
// table of the environments (TableSpec::lanes) instead of one trajectory per
// environment.
Result<BenchResult> RunVectorInsert(DB* db, const Timing& timing, bool logged, int threads,
                                    bool from_host, bool vector_table) {
  TableSpec spec =
      OneColumnSpec("bench_vector_insert", kInsertStepBytes, Placement::Device(kDevice));
  // A device table is not logged by default (TableLogging::kDefault).
  spec.logging = logged ? TableLogging::kOn : TableLogging::kDefault;
  spec.capacity_steps = kInsertEnvs * kInsertTrajectorySteps * kInsertGenerations;
  if (vector_table) {
    const TableSpec vector_spec = VectorTableSpec(spec.name);
    spec.lanes = vector_spec.lanes;
    spec.block_steps = vector_spec.block_steps;
    spec.capacity_steps = vector_spec.capacity_steps;
  }

  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    REPLAYDB_ASSIGN_OR_RETURN(VectorFeed feed,
                              PrepareVectorFeed(table, "vector_insert", 17, threads));
    const DeviceStream& stream = feed.stream;
    const DeviceBuffer& input = feed.input;
    const std::vector<uint8_t>& pattern = feed.pattern;
    VectorWriter* writer = feed.writer.get();
    const size_t step_rows_bytes = static_cast<size_t>(kInsertEnvs * kInsertStepBytes);
    // from=host: the same rows in ordinary (pageable) host memory, as a
    // simulator on the CPU would hand them over.
    const void* source = from_host ? static_cast<const void*>(pattern.data()) : input.data();
    const ConstTensor step{DType::kU8, spec.columns[0].shape.Prepend(kInsertEnvs), source,
                           step_rows_bytes};
    const std::span<const ConstTensor> steps(&step, 1);

    VectorAppendTimes times;
    Result<double> micros = TimeVectorAppends(
        writer, kInsertEnvs, kInsertTrajectorySteps, kInsertGenerations, timing,
        [&] {
          return from_host ? writer->Append(steps).WithContext("Append")
                           : writer->AppendFromDevice(steps, stream.handle())
                                 .WithContext("AppendFromDevice");
        },
        // Append's scatter runs on the writer's own stream.
        [&] { return from_host ? DeviceSynchronize(kDevice) : stream.Synchronize(); }, &times);
    if (!micros.ok()) return micros.status();

    // Ceiling: the same 4 MiB copied into a 256 MiB ring on the device, from
    // the device input or (from=host) from the pageable host input.
    const int64_t slots = kRingBytes / static_cast<int64_t>(step_rows_bytes);
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer ring,
                              DeviceBuffer::Allocate(kDevice, slots * step_rows_bytes));
    REPLAYDB_ASSIGN_OR_RETURN(const double copy_micros,
                              CopyMicros(timing, stream, from_host, ring.data(), slots, source, 1,
                                         static_cast<int64_t>(step_rows_bytes)));

    BenchResult r;
    r.value = *micros;
    r.unit = "us";
    r.ceiling = copy_micros;
    r.ceiling_name = from_host ? "pageable_h2d_memcpy" : kD2dCeiling;
    r.note = VectorAppendNote(times, kInsertTrajectorySteps);
    if (vector_table) {
      r.note +=
          "; a vector table: one vector step per call, " + std::to_string(kInsertEnvs) + " items";
    } else {
      r.note += "; writer threads " + std::to_string(writer->threads()) + " of " +
                std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
    }
    return r;
  });
}

// TrajectoryWriter::Append (steps_per_call 1) or AppendMany of host steps
// into a device table of four columns.
Result<BenchResult> RunDeviceAppend(DB* db, const Timing& timing, int64_t steps_per_call) {
  TableSpec spec;
  spec.name = "bench_device_append";
  // An observation, an action, a reward and a discount: 1 KiB a step.
  spec.columns = {{"observation", DType::kU8, Shape{kAppendStepBytes - 24}},
                  {"action", DType::kF32, Shape{4}},
                  {"reward", DType::kF32, Shape{}},
                  {"discount", DType::kF32, Shape{}}};
  spec.block_steps = kBlockSteps;
  spec.placement = Placement::Device(kDevice);
  spec.capacity_steps = kAppendTrajectorySteps * kAppendGenerations;

  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    REPLAYDB_RETURN_IF_ERROR(
        CheckPlacement(table, "device:" + std::to_string(kDevice), "device_append"));
    WriterOptions options;
    options.timeout = kCallTimeout;
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> writer, table->NewWriter(options));
    // Steps in pageable host memory, as an actor on the CPU hands them over.
    std::vector<std::vector<uint8_t>> columns;
    std::vector<ConstTensor> many, one;
    for (size_t c = 0; c < spec.columns.size(); ++c) {
      const ColumnSpec& col = spec.columns[c];
      columns.push_back(PatternBytes(static_cast<size_t>(steps_per_call) * col.step_bytes(), c));
      many.push_back({col.dtype, col.shape.Prepend(steps_per_call), columns.back().data(),
                      columns.back().size()});
      one.push_back({col.dtype, col.shape, columns.back().data(), col.step_bytes()});
    }
    const auto call = [&]() -> Status {
      if (writer->num_steps() + steps_per_call > kAppendTrajectorySteps) {
        REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTerminal).WithContext("End"));
      }
      return steps_per_call == 1 ? writer->Append(one).WithContext("Append")
                                 : writer->AppendMany(many).WithContext("AppendMany");
    };
    // Fill the hot tier first, so that the timed calls evict.
    const int64_t fill_calls = kAppendTrajectorySteps * kAppendGenerations / steps_per_call;
    for (int64_t i = 0; i < fill_calls; ++i) REPLAYDB_RETURN_IF_ERROR(call());
    // The scatters run on the writer's own stream.
    Result<double> micros = MicrosPerCall(timing, call, [] { return DeviceSynchronize(kDevice); });
    if (!micros.ok()) return micros.status();
    if (table->Info().evicted_trajectories == 0) {
      return Status::Internal("device_append: the timed calls evicted nothing");
    }

    // Ceiling: the call's rows copied from pageable host memory to the
    // device, one copy per column (into a ring of >= 256 MiB).
    REPLAYDB_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::Create(kDevice));
    const int64_t call_bytes = steps_per_call * kAppendStepBytes;
    const int64_t slots = std::max<int64_t>(2, kRingBytes / call_bytes);
    REPLAYDB_ASSIGN_OR_RETURN(DeviceBuffer ring,
                              DeviceBuffer::Allocate(kDevice, slots * call_bytes));
    int64_t next = 0;
    REPLAYDB_ASSIGN_OR_RETURN(
        const double copy_micros, GpuMicrosPerCall(timing, stream, [&]() -> Status {
          std::byte* to = ring.as<std::byte>() + (next++ % slots) * call_bytes;
          for (const std::vector<uint8_t>& column : columns) {
            REPLAYDB_RETURN_IF_ERROR(
                CopyHostToDeviceAsync(to, column.data(), column.size(), stream.handle()));
            to += column.size();
          }
          return Status::OK();
        }));

    BenchResult r;
    r.value = *micros;
    r.unit = "us";
    r.ceiling = copy_micros;
    r.ceiling_name = "pageable_h2d_memcpy";
    r.note = std::to_string(steps_per_call) + " steps of 1 KiB (4 columns) per call; " +
             std::to_string(kAppendTrajectorySteps) + "-step trajectories, the tier holding " +
             std::to_string(kAppendGenerations) + " (the calls evict)";
    return r;
  });
}

}  // namespace

std::vector<CaseWithTarget> GpuCases() {
  std::vector<CaseWithTarget> cases;
  std::string why_no_gpu;
  if (CudaDeviceCount(&why_no_gpu) <= 0) {
    std::fprintf(stderr, "replaydb bench: gather and vector_insert cases left out: %s\n",
                 why_no_gpu.c_str());
    return cases;
  }
  for (Tier tier : {Tier::kDevice, Tier::kPinned}) {
    for (int64_t step_bytes : {int64_t{256}, int64_t{4096}, int64_t{65536}}) {
      for (int64_t l : {int64_t{1}, int64_t{32}}) {
        std::optional<Target> target;
        if (step_bytes >= 4096) {
          target = Target{Target::Kind::kRatioAtLeast, 0.90, "ratio >= 0.90 (H100)"};
        }
        cases.push_back({{"gather",
                          {{"tier", 0, TierName(tier)},
                           {"step_bytes", step_bytes},
                           {"batch", kGatherBatch},
                           {"L", l}},
                          [tier, step_bytes, l](DB* db, const Timing& timing) {
                            return RunGather(db, timing, tier, step_bytes, l);
                          }},
                         target});
      }
    }
  }
  // Device draws for vector tables (issue 36): B = 4096 uniform rows.
  cases.push_back({{"vector_sample",
                    {{"envs", kInsertEnvs},
                     {"step_bytes", kInsertStepBytes},
                     {"batch", kInsertEnvs},
                     {"draws", 0, "device"}},
                    [](DB* db, const Timing& timing) { return RunVectorSample(db, timing); }},
                   Target{Target::Kind::kValueAtMost, 20.0, "<= 20 us (H100)"}});
  // Samples to host memory (issue 36): a fresh batch per call.
  for (Tier tier : {Tier::kDevice, Tier::kPinned}) {
    cases.push_back({{"sample_to_host",
                      {{"tier", 0, TierName(tier)},
                       {"step_bytes", kHostSampleStepBytes},
                       {"batch", kGatherBatch},
                       {"L", kHostSampleL},
                       {"selector", 0, "prioritized"}},
                      [tier](DB* db, const Timing& timing) {
                        return RunSampleToHost(db, timing, tier);
                      }},
                     Target{Target::Kind::kRatioAtLeast, tier == Tier::kDevice ? 0.8 : 0.5,
                            tier == Tier::kDevice ? "ratio >= 0.8 (H100)" : "ratio >= 0.5 (H100)"}});
  }
  // The target is for a vector table on the pure device path (wal=off: a
  // device table's default; docs/vector_tables.md), the table kind made for
  // a GPU simulator's steps; from=host (Append of the same rows from
  // pageable host memory) adds their upload. A table of one trajectory per
  // environment (table=per_env) runs without a target: with wal=off and
  // wal=on (TableLogging::kOn: the device-to-host copy that logs the step,
  // docs/durability.md; the database's log is on in both), with the
  // default writer (threads=auto, WriterOptions::threads 0) and with
  // threads=1, the caller's thread alone, the baseline its shared passes
  // are held to, and from=host.
  struct InsertCase {
    bool vector_table;
    bool wal;
    int threads;
    bool from_host;
  };
  for (const auto& [vector_table, wal, threads, from_host] :
       {InsertCase{true, false, 0, false}, InsertCase{true, false, 0, true},
        InsertCase{false, false, 0, false}, InsertCase{false, false, 1, false},
        InsertCase{false, true, 0, false}, InsertCase{false, false, 0, true}}) {
    std::optional<Target> target;
    if (vector_table && !from_host) {
      target = Target{Target::Kind::kValueAtMost, 20.0, "<= 20 us (H100)"};
    }
    cases.push_back({{"vector_insert",
                      {{"envs", kInsertEnvs},
                       {"step_bytes", kInsertStepBytes},
                       {"table", 0, vector_table ? "vector" : "per_env"},
                       {"wal", 0, wal ? "on" : "off"},
                       {"threads", 0, threads == 0 ? "auto" : std::to_string(threads)},
                       {"from", 0, from_host ? "host" : "device"}},
                      [vector_table, wal, threads, from_host](DB*, const Timing& timing) {
                        return WithFreshDB(NoCheckpoints(), [&](DB* db) {
                          return RunVectorInsert(db, timing, wal, threads, from_host, vector_table);
                        });
                      }},
                     target});
  }
  // TrajectoryWriter from host memory into a device table: no target in
  // the issue; the ratio says how far a call is from its rows' copy.
  for (int64_t steps_per_call : {int64_t{1}, int64_t{1024}}) {
    cases.push_back({{"device_append",
                      {{"steps_per_call", steps_per_call}, {"step_bytes", kAppendStepBytes}},
                      [steps_per_call](DB* db, const Timing& timing) {
                        return RunDeviceAppend(db, timing, steps_per_call);
                      }},
                     std::nullopt});
  }
  return cases;
}

}  // namespace replaydb::tools
