// `replaydb bench [--json] [--filter SUBSTRING] [--quick] [--big]`: measures
// inserts, uniform samples, the write-ahead log, recovery, checkpoints, the
// cold tier, priority tables and the GPU hot tier through the
// public API, each against a ceiling or baseline measured in the same run,
// and prints the ratio. The durability cases (wal_append, recover,
// checkpoint) are in tools/replaydb/bench/bench_durability.cc, the cold-tier cases (spill,
// reload, sample_rotating) in tools/replaydb/bench/bench_cold.cc. The priority cases are described in
// tools/replaydb/bench/bench_priority.cc, the GPU hot-tier cases (gather, vector_insert;
// present only where a GPU can be used) in tools/replaydb/bench/bench_gpu.cc.
//
// Benchmarks, identified as "NAME/param=value/...":
//   insert/step_bytes={64,16384}/writers={1,4}/wal={on,off}
//       writers append 1000-step trajectories of one u8 column to a table
//       whose hot tier (min(256 MiB, 1M steps)) was filled once beforehand,
//       so every insert evicts. Each case opens a fresh DB: wal=on with the
//       default DBOptions (log on, WalSyncMode::kBatch, default automatic
//       checkpoints), wal=off the same with wal.enabled = false. Ceiling
//       "memcpy_ring": one thread memcpy'ing the same step-sized chunks into
//       a ring the size of the hot tier.
//   wal_append/step_bytes={64,16384}/sync={none,batch}
//       one TrajectoryWriter appending 1000-step trajectories of one u8
//       column to a table (hot tier as insert's, evicting once full) in a
//       fresh DB with that WalSyncMode (batch: the defaults, 100 ms / 4 MiB)
//       and automatic checkpoints off, so the timed appends pay for the log
//       alone; step payload in B/s (the note gives steps/s). Ceiling
//       "raw_write": in the same run and directory, one thread write()ing as
//       many records as the median timed run appended, each step_bytes + 32
//       bytes (the log's 9-byte record header plus the step record's ids),
//       to a file with the same sync policy: none never syncs; batch has a
//       background thread fdatasync every 100 ms or once 4 MiB are unsynced,
//       which the writer never waits for. Both timings end when the last
//       write (Append) returns.
//   recover/step_bytes=16384
//       a fresh DB (log kNone; checkpoint.on_close = false, every_wal_bytes
//       = 0, every = 0 s) gets 64 MiB (32 MiB with --quick) of 16 KiB steps
//       in ended 1000-step trajectories and is destroyed without a
//       checkpoint, so the log holds everything; then DB::Open of it is
//       timed, in log bytes (RecoveryInfo::wal_bytes) per second. The open
//       includes the checkpoint Open writes of everything it recovered; the
//       note gives a DB::Checkpoint of the same steps timed in another fresh
//       DB in the same repetition, and the replay-alone rate that leaves.
//       Ceiling "sequential_read": read() of the same segment files (wal/
//       NNN.log) into a 1 MiB buffer, done right before the open so that
//       both see the page cache alike (the files were just written, so both
//       normally read from it). Each repetition builds its own DB.
//   checkpoint/step_bytes=16384
//       a fresh DB with the log on (kBatch) and automatic checkpoints off
//       gets 64 MiB (32 MiB with --quick) of 16 KiB steps as for recover;
//       DB::Checkpoint() is timed, in step payload B/s. Ceiling
//       "rocksdb_write": a separate RocksDB (default options + zstd) in a
//       sibling directory takes one WriteBatch of the same number of values
//       of the same sizes (one per 1000-step trajectory, the cold store's
//       chunks), WAL disabled, then Flush(wait) -- what a checkpoint does
//       inside (engine/cold/cold_store.cc); its open is not timed.
//   spill/step_bytes=4096
//       the cold tier's write path: one TrajectoryWriter appends ended
//       1000-step trajectories (one AppendMany each) of pseudo-random bytes
//       to a table with TableSpec::spill whose 64 MiB hot tier (32 MiB with
//       --quick) was filled once beforehand, so every trajectory evicts one
//       that the background thread writes into the cold store. Value:
//       TableInfo::spilled_bytes gained / time from the first append until
//       TableInfo::spill_queue is 0 after the last one, in step B/s. Fresh
//       DB with the log off and checkpoints only when asked, so the spills
//       write alone. Ceiling "rocksdb_put": a fresh RocksDB with the cold
//       store's options (zstd, max_open_files 256; RocksDB's own Env) puts
//       the same chunking as a spill: per trajectory one WriteBatch of a
//       4 MB step-chunk value (+64 bytes) and a 32 KB metadata value
//       through its log, unsynced, no flush, for as long; step bytes / time
//       until the last Write returns. Target ratio >= 0.70.
//   reload/step_bytes=4096
//       Table::Load of one cold trajectory (1000 steps) at a time, cold ids
//       in order, wrapping around, from a table with spill and a 64 MiB (32
//       MiB) hot tier that was given 2 tiers of trajectories, then a
//       DB::Checkpoint so that every trajectory is stored and RocksDB
//       flushed: each Load evicts a trajectory already stored, which leaves
//       writing only its metadata (waited for at the end of each run); step
//       B/s. Ceiling "rocksdb_get": a fresh RocksDB (as rocksdb_put's)
//       given the same number of trajectories as rocksdb_put puts them, then
//       flushed, Gets each one's metadata and step chunk into reused
//       strings, in turn; step B/s.
//   sample_rotating/step_bytes=4096/batch=256
//       Table::Sample of 256 single steps (L=1) as sample_uniform, from a
//       table with spill and rotation (rotation_fraction 0.1,
//       rotation_every_samples = the hot tier's items, 16000 (8000)) whose
//       64 MiB (32 MiB) hot tier gets 4 tiers of trajectories, then a
//       DB::Checkpoint (so rotation writes out only metadata, as once every
//       trajectory has been cold); rotations load cold trajectories in the
//       background while it samples; payload B/s (the note gives items/s
//       and the rotations done). Ceiling "fully_hot": the same loop on the
//       same trajectories in a table whose hot tier holds them all, in a
//       fresh DB of its own. Target ratio >= 0.80.
//     The cold benches' step data is pseudo-random (FillPattern), so zstd
//     finds nothing to compress on either side; each uses its own fresh DB
//     and RocksDB in temporary directories.
//   sample_uniform/step_bytes={64,16384}/batch=256/L={1,32}
//       Table::Sample of 256 windows of L steps from 64 MiB of steps, reusing
//       one SampleBatch. Ceiling "memcpy_random_windows": one thread
//       memcpy'ing 256 windows of L steps from random offsets of a buffer the
//       size of the filled steps into one batch buffer.
//   vector_insert_host/envs=4096/step_bytes={4,1024}/table=per_env
//       VectorWriter::Append of one step of 4096 environments from host
//       memory into an unlogged table (TableLogging::kOff) in host memory,
//       in a fresh DB with automatic checkpoints off: the shape of the GPU
//       vector_insert row (one u8[step_bytes] column, block 64 steps, room
//       for 4 trajectories of 64 steps per environment, every environment's
//       trajectory ended after 64 steps by untimed End calls whose cost the
//       note gives, the hot tier filled once beforehand so the timed appends
//       evict), so the host bookkeeping that AppendFromDevice shares is
//       measured where no GPU is; microseconds per call. Ceiling
//       "memcpy_scatter": one thread memcpy'ing the same 4096 rows one by
//       one to where the blocks put them, in a ring the size of the hot
//       tier; ratio = value / ceiling.
//   vector_insert_host/envs=4096/step_bytes=1024/table=vector/threads={1,2,auto}
//       The same step appended to a vector table (TableSpec::lanes 4096,
//       block 8 vector steps, room for 256) in host memory: one stored row
//       of 4 MiB per call, whose bytes the writer's WriterOptions::threads
//       copy together (auto: as many as for 4096 environments; the note says
//       how many). Ceiling "memcpy_step": one thread memcpy'ing the whole
//       step into a ring the size of the hot tier; ratio = value / ceiling,
//       below 1 where the threads copy faster than one memcpy.
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
// after a warm-up (recover and checkpoint: the median of 3 timed calls,
// each on its own freshly written DB; the cold benches' ceilings likewise,
// after a warm-up of their own); time is measured with
// std::chrono::steady_clock. The durability benches have no numeric
// targets: their ratio is the share of the same-run I/O baseline kept.
// Every DB and file a bench makes lives in a mkdtemp directory under $TMPDIR
// (or /tmp), removed afterwards.
//
// Output: a table (bench, params, value, unit, ceiling, ceiling_name, ratio,
// target) with the targets in its footer, or with --json one object per line:
//   {"bench": "insert", "params": {"step_bytes": 64, "writers": 1, "wal": "on"},
//    "value": 2.1e+06, "unit": "steps/s", "ceiling": 4.3e+07,
//    "ceiling_name": "memcpy_ring", "ratio": 0.0488}
// (on one line; "ceiling" and "ratio" may be null; a row with a note, such as
// a gather row's large-transfer peak, ends with "note": "..."). The first
// failing call aborts the run with its Status on stderr and exit status 1.
#ifndef REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_H_
#define REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_H_

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

#endif  // REPLAYDB_TOOLS_REPLAYDB_BENCH_BENCH_H_
