// `replaydb bench [--json] [--filter SUBSTRING] [--quick] [--big]`: measures
// inserts, uniform samples, priority tables and the GPU hot tier through the
// public API, each against a ceiling or baseline measured in the same run,
// and prints the ratio. The priority cases are described in
// tools/bench_priority.cc, the GPU hot-tier cases (gather, vector_insert;
// present only where a GPU can be used) in tools/bench_gpu.cc.
//
// Benchmarks, identified as "NAME/param=value/...":
//   insert/step_bytes={64,16384}/writers={1,4}
//       writers append 1000-step trajectories of one u8 column to a table
//       whose hot tier (min(256 MiB, 1M steps)) was filled once beforehand,
//       so every insert evicts. Ceiling "memcpy_ring": one thread memcpy'ing
//       the same step-sized chunks into a ring the size of the hot tier.
//   sample_uniform/step_bytes={64,16384}/batch=256/L={1,32}
//       Table::Sample of 256 windows of L steps from 64 MiB of steps, reusing
//       one SampleBatch. Ceiling "memcpy_random_windows": one thread
//       memcpy'ing 256 windows of L steps from random offsets of a buffer the
//       size of the filled steps into one batch buffer.
//   gather/tier={device,pinned}/step_bytes={256,4096,65536}/batch=256/L={1,32}
//       Table::LookupToDevice of 256 random windows of L steps from a table in
//       device memory or pinned host memory, in payload GB/s. Ceiling
//       "d2d_memcpy/2" (device) or "pinned_h2d_memcpy" (pinned): copies of
//       the same payload size on the same stream.
//   vector_insert/envs=4096/step_bytes=1024
//       VectorWriter::AppendFromDevice of one step of 4096 x 1 KiB into a
//       table in device memory, microseconds per call. Ceiling "d2d_memcpy":
//       one device-to-device copy of the same 4 MiB.
// Each value is the median of 3 timed runs of 1.0 s (0.2 s with --quick)
// after a warm-up; time is measured with std::chrono::steady_clock.
//
// Output: a table (bench, params, value, unit, ceiling, ceiling_name, ratio,
// target) with the targets in its footer, or with --json one object per line:
//   {"bench": "insert", "params": {"step_bytes": 64, "writers": 1},
//    "value": 2.1e+06, "unit": "steps/s", "ceiling": 4.3e+07,
//    "ceiling_name": "memcpy_ring", "ratio": 0.0488}
// (on one line; "ceiling" and "ratio" may be null; a row with a note, such as
// a gather row's large-transfer peak, ends with "note": "..."). The first
// failing call aborts the run with its Status on stderr and exit status 1.
#ifndef REPLAYDB_TOOLS_BENCH_H_
#define REPLAYDB_TOOLS_BENCH_H_

#include <span>
#include <string>
#include <string_view>

namespace replaydb::tools {

inline constexpr std::string_view kBenchUsage =
    "bench [--json] [--filter SUBSTRING] [--quick] [--big]";
inline constexpr std::string_view kBenchSummary =
    "measure inserts and samples against memcpy ceilings from the same run";

// The subcommand: `args` are those after "bench". Returns the exit status.
int BenchCommand(std::span<const std::string> args);

}  // namespace replaydb::tools

#endif  // REPLAYDB_TOOLS_BENCH_H_
