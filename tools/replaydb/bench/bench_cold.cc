// The cold-tier benches of `replaydb bench` (documented in tools/replaydb/bench/bench.h):
//   spill            eviction with TableSpec::spill writing trajectories into
//                    the cold store, against a fresh RocksDB taking the same
//                    values the same way (rocksdb_put);
//   reload           Table::Load of cold trajectories, against RocksDB Get of
//                    the same values from a fresh RocksDB (rocksdb_get);
//   sample_rotating  Table::Sample on a table rotating a dataset 4x its hot
//                    tier, against the same sampling of the same data in a
//                    table that holds all of it (fully_hot).
// Each bench uses its own fresh DB (log off, checkpoints only when asked, so
// that the timed phases see the cold tier alone) and its own RocksDB in a
// temporary directory, removed after. Step data is pseudo-random
// (FillPattern), so zstd finds nothing to compress on either side.
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"
#include "replaydb/types.h"
#include "tools/replaydb/bench/bench_common.h"

namespace replaydb::tools {
namespace {

constexpr int64_t kTrajectorySteps = 1000;
constexpr int64_t kColdStepBytes = 4096;
constexpr int64_t kTrajectoryBytes = kTrajectorySteps * kColdStepBytes;
// Hot tier of every cold bench: 64 MiB (32 MiB with --quick), i.e. 16 (8)
// trajectories of 1000 steps in 64-step blocks.
constexpr int64_t kHotTierBytes = int64_t{64} << 20;
constexpr int64_t kHotTierBytesQuick = int64_t{32} << 20;
// reload: trajectories written, so that half of them are cold.
constexpr int64_t kReloadTierMultiple = 2;
// sample_rotating: the dataset is this many hot tiers.
constexpr int64_t kRotatingTierMultiple = 4;
constexpr double kRotationFraction = 0.1;
// What the ceilings' RocksDB values add to the step bytes, like the cold
// store's: a StepChunk's FlatBuffer framing, and a TrajectoryMeta of 1000
// step priorities (8 bytes) and items (24 bytes) plus framing.
constexpr int64_t kChunkFramingBytes = 64;
constexpr int64_t kMetaBytes = 32 * kTrajectorySteps + 64;
// Polling interval while waiting for spills to finish.
constexpr std::chrono::microseconds kPollInterval{200};

constexpr char kSpillCeiling[] = "rocksdb_put";
constexpr char kReloadCeiling[] = "rocksdb_get";
constexpr char kRotatingCeiling[] = "fully_hot";

using Buffer = std::unique_ptr<std::byte[]>;

Buffer FilledBuffer(size_t n, uint64_t seed) {
  Buffer buf(new std::byte[n]);
  FillPattern(buf.get(), n, seed);
  return buf;
}

int64_t HotTierBytes(const Timing& timing) {
  return timing.quick ? kHotTierBytesQuick : kHotTierBytes;
}

// A fresh DB without the log and with checkpoints only when asked for.
DBOptions ColdBenchOptions() {
  DBOptions options;
  options.wal.enabled = false;
  options.checkpoint.every_wal_bytes = 0;
  options.checkpoint.every = std::chrono::seconds(0);
  options.checkpoint.on_close = false;
  return options;
}

TableSpec ColdSpec(std::string name, int64_t capacity_bytes, bool spill) {
  TableSpec spec;
  spec.name = std::move(name);
  spec.columns = {{"data", DType::kU8, Shape{kColdStepBytes}}};
  spec.capacity_bytes = capacity_bytes;
  spec.spill = spill;
  return spec;
}

Result<std::unique_ptr<TrajectoryWriter>> NewBenchWriter(Table* table) {
  WriterOptions options;
  options.timeout = kCallTimeout;
  return table->NewWriter(options);
}

// One ended trajectory of kTrajectorySteps steps from `src`, in one
// AppendMany.
Status AppendTrajectory(TrajectoryWriter* writer, const std::byte* src) {
  const ConstTensor steps{DType::kU8, Shape{kTrajectorySteps, kColdStepBytes}, src,
                          static_cast<size_t>(kTrajectoryBytes)};
  REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span<const ConstTensor>(&steps, 1)));
  return writer->End(EndReason::kTerminal);
}

// Waits until `table` has no trajectory left to write out.
Status WaitForSpills(Table* table) {
  const Clock::time_point deadline = Clock::now() + kCallTimeout;
  while (table->Info().spill_queue > 0) {
    if (Clock::now() >= deadline) {
      return Status::DeadlineExceeded("spills still queued after " +
                                      std::to_string(kCallTimeout.count()) + " ms");
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  return Status::OK();
}

// ------------------------------------------------------- RocksDB ceilings

// The cold store's RocksDB options (engine/cold/cold_store.cc, OpenRocks) with
// RocksDB's own Env.
rocksdb::Options ColdStoreRocksOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kZSTD;
  options.avoid_flush_during_shutdown = false;
  options.max_open_files = 256;
  return options;
}

Result<std::unique_ptr<rocksdb::DB>> OpenRocks(const std::string& path) {
  rocksdb::DB* raw = nullptr;
  const rocksdb::Status rs = rocksdb::DB::Open(ColdStoreRocksOptions(), path, &raw);
  if (!rs.ok()) return Status::IOError("rocksdb open '" + path + "': " + rs.ToString());
  return std::unique_ptr<rocksdb::DB>(raw);
}

// Keys as the cold store's (engine/cold/COLD.md): table id 1 (u32), a kind byte,
// the trajectory id and, for step chunks, the first step, big-endian.
std::string RocksKey(char kind, uint64_t trajectory) {
  std::string key = {'\0', '\0', '\0', '\1', kind};
  for (int b = 7; b >= 0; --b) key.push_back(static_cast<char>((trajectory >> (8 * b)) & 0xff));
  if (kind == 'D') key.append(8, '\0');  // first step 0
  return key;
}

// The values of one spilled trajectory: its step chunk and its metadata.
struct RocksValues {
  Buffer chunk = FilledBuffer(static_cast<size_t>(kTrajectoryBytes + kChunkFramingBytes), 21);
  Buffer meta = FilledBuffer(static_cast<size_t>(kMetaBytes), 22);

  rocksdb::Slice ChunkSlice() const {
    return {reinterpret_cast<const char*>(chunk.get()),
            static_cast<size_t>(kTrajectoryBytes + kChunkFramingBytes)};
  }
  rocksdb::Slice MetaSlice() const {
    return {reinterpret_cast<const char*>(meta.get()), static_cast<size_t>(kMetaBytes)};
  }
};

// Writes trajectory `id` as a spill does (engine/table/table_cold.cc,
// RunSpillLocked): one WriteBatch of the step chunk and the metadata,
// through RocksDB's log, unsynced, with no flush.
Status RocksPutTrajectory(rocksdb::DB* db, const RocksValues& values, uint64_t id) {
  rocksdb::WriteBatch batch;
  rocksdb::Status rs = batch.Put(RocksKey('D', id), values.ChunkSlice());
  if (rs.ok()) rs = batch.Put(RocksKey('M', id), values.MetaSlice());
  if (rs.ok()) rs = db->Write(rocksdb::WriteOptions(), &batch);
  if (!rs.ok())
    return Status::IOError("rocksdb put of trajectory " + std::to_string(id) + ": " +
                           rs.ToString());
  return Status::OK();
}

// Step bytes per second that RocksPutTrajectory takes, putting trajectories
// *next_id, *next_id + 1, ... until `duration` has passed.
Result<double> RocksPutRate(rocksdb::DB* db, const RocksValues& values, Seconds duration,
                            uint64_t* next_id) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  int64_t puts = 0;
  Clock::time_point now = start;
  do {
    REPLAYDB_RETURN_IF_ERROR(RocksPutTrajectory(db, values, (*next_id)++));
    ++puts;
    now = Clock::now();
  } while (now < deadline);
  return static_cast<double>(puts * kTrajectoryBytes) / Seconds(now - start).count();
}

// ------------------------------------------------------------------ spill

// One timed phase of the spill bench: the writer appends ended trajectories
// until `duration` has passed, then the phase waits for the spill queue to
// empty. Step bytes spilled per second over the whole phase.
struct SpillPhase {
  double rate = 0;
  int64_t trajectories = 0;
  double drain_seconds = 0;
};
Result<SpillPhase> TimeSpills(Table* table, TrajectoryWriter* writer, const std::byte* src,
                              Seconds duration) {
  const int64_t spilled_before = table->Info().spilled_bytes;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  SpillPhase phase;
  Clock::time_point last_append;
  do {
    REPLAYDB_RETURN_IF_ERROR(AppendTrajectory(writer, src));
    ++phase.trajectories;
    last_append = Clock::now();
  } while (last_append < deadline);
  REPLAYDB_RETURN_IF_ERROR(WaitForSpills(table));
  const Clock::time_point end = Clock::now();
  const int64_t spilled = table->Info().spilled_bytes - spilled_before;
  if (spilled <= 0) return Status::Internal("the timed phase spilled nothing");
  phase.rate = static_cast<double>(spilled) / Seconds(end - start).count();
  phase.drain_seconds = Seconds(end - last_append).count();
  return phase;
}

Result<BenchResult> RunSpill(const Timing& timing) {
  auto dir_or = TempDir::Make();
  if (!dir_or.ok()) return dir_or.status();
  const std::string dir = (*dir_or)->path();
  const int64_t tier_bytes = HotTierBytes(timing);
  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectoryBytes), 5);

  std::vector<SpillPhase> phases;
  Result<BenchResult> engine = WithFreshDB(ColdBenchOptions(), [&](DB* db) {
    return WithTable(
        db, ColdSpec("bench_spill", tier_bytes, true), [&](Table* table) -> Result<BenchResult> {
          REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> writer,
                                    NewBenchWriter(table));
          // Warm-up: fill the hot tier once, then spill for a while.
          const int64_t fill = tier_bytes / kTrajectoryBytes;
          for (int64_t t = 0; t < fill; ++t) {
            Status s = AppendTrajectory(writer.get(), src.get());
            if (!s.ok()) return s.WithContext("fill");
          }
          Result<SpillPhase> warmup =
              TimeSpills(table, writer.get(), src.get(), timing.duration / 2);
          if (!warmup.ok()) return warmup.status().WithContext("warm-up");
          Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
            Result<SpillPhase> phase = TimeSpills(table, writer.get(), src.get(), timing.duration);
            if (!phase.ok()) return phase.status();
            phases.push_back(*phase);
            return phase->rate;
          });
          if (!rate.ok()) return rate.status();
          BenchResult result;
          result.value = *rate;
          return result;
        });
  });
  if (!engine.ok()) return engine.status();

  // Ceiling: a fresh RocksDB, warmed up as long as the bench's warm-up.
  RocksValues values;
  Result<double> ceiling = [&]() -> Result<double> {
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db, OpenRocks(dir + "/rocksdb"));
    uint64_t next_id = 1;
    Result<double> warmup = RocksPutRate(db.get(), values, timing.duration / 2, &next_id);
    if (!warmup.ok()) return warmup.status();
    Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
      return RocksPutRate(db.get(), values, timing.duration, &next_id);
    });
    (void)db->Close();
    return rate;
  }();
  if (!ceiling.ok()) return ceiling.status().WithContext(kSpillCeiling);

  std::sort(phases.begin(), phases.end(),
            [](const SpillPhase& a, const SpillPhase& b) { return a.rate < b.rate; });
  const SpillPhase& median = phases[phases.size() / 2];
  BenchResult result;
  result.value = engine->value;
  result.unit = "B/s";
  result.ceiling = *ceiling;
  result.ceiling_name = kSpillCeiling;
  char note[200];
  std::snprintf(note, sizeof(note),
                "%" PRId64 " MiB hot tier; median run: %" PRId64
                " trajectories appended, %.0f ms from the last append until the spill queue "
                "emptied",
                tier_bytes >> 20, median.trajectories, median.drain_seconds * 1e3);
  result.note = note;
  return result;
}

// ----------------------------------------------------------------- reload

// Step bytes per second of Table::Load of one cold trajectory at a time,
// taking the cold ids in order from *cursor (wrapping around) until
// `duration` has passed; then waits for the evictions' spills.
Result<double> LoadRate(Table* table, Seconds duration, uint64_t* cursor) {
  const int64_t loaded_before = table->Info().loaded_trajectories;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  Clock::time_point now = start;
  do {
    std::vector<uint64_t> ids = table->ColdTrajectories(*cursor, 1);
    if (ids.empty()) ids = table->ColdTrajectories(0, 1);
    if (ids.empty()) return Status::Internal("the table has no cold trajectories");
    Status s = table->Load(ids);
    if (!s.ok()) return s.WithContext("Load of trajectory " + std::to_string(ids[0]));
    *cursor = ids[0] + 1;
    now = Clock::now();
  } while (now < deadline);
  REPLAYDB_RETURN_IF_ERROR(WaitForSpills(table));
  now = Clock::now();
  const int64_t loaded = table->Info().loaded_trajectories - loaded_before;
  if (loaded <= 0) return Status::Internal("the timed phase loaded nothing");
  return static_cast<double>(loaded * kTrajectoryBytes) / Seconds(now - start).count();
}

// Step bytes per second of RocksDB Gets of the metadata and the step chunk
// of trajectories 1..n in turn from *next (wrapping around), into one
// reused string each, until `duration` has passed.
Result<double> RocksGetRate(rocksdb::DB* db, uint64_t n, Seconds duration, uint64_t* next) {
  std::string meta;
  std::string chunk;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  int64_t gets = 0;
  Clock::time_point now = start;
  do {
    rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), RocksKey('M', *next), &meta);
    if (rs.ok()) rs = db->Get(rocksdb::ReadOptions(), RocksKey('D', *next), &chunk);
    if (!rs.ok()) {
      return Status::IOError("rocksdb get of trajectory " + std::to_string(*next) + ": " +
                             rs.ToString());
    }
    if (chunk.size() != static_cast<size_t>(kTrajectoryBytes + kChunkFramingBytes)) {
      return Status::Internal("rocksdb returned a chunk of " + std::to_string(chunk.size()) +
                              " bytes");
    }
    DoNotOptimize(chunk.data());
    *next = *next % n + 1;
    ++gets;
    now = Clock::now();
  } while (now < deadline);
  return static_cast<double>(gets * kTrajectoryBytes) / Seconds(now - start).count();
}

Result<BenchResult> RunReload(const Timing& timing) {
  auto dir_or = TempDir::Make();
  if (!dir_or.ok()) return dir_or.status();
  const std::string dir = (*dir_or)->path();
  const int64_t tier_bytes = HotTierBytes(timing);
  const int64_t hot_trajectories = tier_bytes / kTrajectoryBytes;
  const int64_t trajectories = kReloadTierMultiple * hot_trajectories;
  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectoryBytes), 6);

  int64_t cold = 0;
  Result<BenchResult> engine = WithFreshDB(ColdBenchOptions(), [&](DB* db) {
    return WithTable(db, ColdSpec("bench_reload", tier_bytes, true),
                     [&](Table* table) -> Result<BenchResult> {
                       {
                         REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> writer,
                                                   NewBenchWriter(table));
                         for (int64_t t = 0; t < trajectories; ++t) {
                           Status s = AppendTrajectory(writer.get(), src.get());
                           if (!s.ok()) return s.WithContext("fill");
                         }
                       }
                       REPLAYDB_RETURN_IF_ERROR(WaitForSpills(table));
                       // Stores the hot trajectories too (so evicting them writes only their
                       // metadata) and flushes RocksDB, as the ceiling's store is.
                       Status s = db->Checkpoint();
                       if (!s.ok()) return s.WithContext("Checkpoint");
                       cold = table->Info().cold_trajectories;
                       if (cold < hot_trajectories) {
                         return Status::Internal("after the fill the table has " +
                                                 std::to_string(cold) + " cold trajectories");
                       }
                       uint64_t cursor = 0;
                       Result<double> warmup = LoadRate(table, timing.duration / 2, &cursor);
                       if (!warmup.ok()) return warmup.status().WithContext("warm-up");
                       Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
                         return LoadRate(table, timing.duration, &cursor);
                       });
                       if (!rate.ok()) return rate.status();
                       BenchResult result;
                       result.value = *rate;
                       return result;
                     });
  });
  if (!engine.ok()) return engine.status();

  // Ceiling: a fresh RocksDB holding as many trajectories as the table (put
  // as spills put them, then flushed), read in turn.
  Result<double> ceiling = [&]() -> Result<double> {
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db, OpenRocks(dir + "/rocksdb"));
    {
      RocksValues values;
      for (int64_t t = 1; t <= trajectories; ++t) {
        REPLAYDB_RETURN_IF_ERROR(RocksPutTrajectory(db.get(), values, static_cast<uint64_t>(t)));
      }
    }
    rocksdb::FlushOptions fo;
    fo.wait = true;
    const rocksdb::Status rs = db->Flush(fo);
    if (!rs.ok()) return Status::IOError("rocksdb flush: " + rs.ToString());
    const uint64_t n = static_cast<uint64_t>(trajectories);
    uint64_t next = 1;
    Result<double> warmup = RocksGetRate(db.get(), n, timing.duration / 2, &next);
    if (!warmup.ok()) return warmup.status();
    Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
      return RocksGetRate(db.get(), n, timing.duration, &next);
    });
    (void)db->Close();
    return rate;
  }();
  if (!ceiling.ok()) return ceiling.status().WithContext(kReloadCeiling);

  BenchResult result;
  result.value = engine->value;
  result.unit = "B/s";
  result.ceiling = *ceiling;
  result.ceiling_name = kReloadCeiling;
  char note[200];
  std::snprintf(
      note, sizeof(note),
      "%" PRId64 " MiB hot tier; %" PRId64 " trajectories, %" PRId64 " of them cold; %.0f loads/s",
      tier_bytes >> 20, trajectories, cold, engine->value / static_cast<double>(kTrajectoryBytes));
  result.note = note;
  return result;
}

// -------------------------------------------------------- sample_rotating

// Writes `trajectories` ended trajectories into `table` and waits for the
// spills they cause.
Status FillTrajectories(Table* table, int64_t trajectories, const std::byte* src) {
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> writer, NewBenchWriter(table));
  for (int64_t t = 0; t < trajectories; ++t) {
    REPLAYDB_RETURN_IF_ERROR(AppendTrajectory(writer.get(), src));
  }
  writer.reset();
  return WaitForSpills(table);
}

// Batches of `batch_size` per second that Table::Sample draws into `batch`
// in the same loop as the sample_uniform bench: a warm-up of half
// `timing.duration`, then the median of the timed repetitions.
Result<double> TimedSampleRate(Table* table, const Timing& timing, int64_t batch_size,
                               SampleBatch* batch) {
  Result<double> warmup = SampleRate(table, batch_size, timing.duration / 2, batch);
  if (!warmup.ok()) return warmup.status().WithContext("warm-up");
  const size_t bytes = static_cast<size_t>(batch_size * kColdStepBytes);
  if (batch->batch_size != batch_size || batch->columns.size() != 1 ||
      batch->columns[0].size_bytes() != bytes) {
    return Status::Internal("Sample returned a batch of " + std::to_string(batch->batch_size) +
                            " with " + std::to_string(batch->columns.size()) + " columns");
  }
  return Median(timing.repetitions, [&]() -> Result<double> {
    return SampleRate(table, batch_size, timing.duration, batch);
  });
}

Result<BenchResult> RunSampleRotating(const Timing& timing, int64_t batch_size) {
  const int64_t tier_bytes = HotTierBytes(timing);
  const int64_t hot_trajectories = tier_bytes / kTrajectoryBytes;
  const int64_t trajectories = kRotatingTierMultiple * hot_trajectories;
  // One hot tier's worth of items sampled between rotations.
  const int64_t every_samples = hot_trajectories * kTrajectorySteps;
  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectoryBytes), 8);
  SampleBatch batch;

  TableSpec rotating = ColdSpec("bench_sample_rotating", tier_bytes, true);
  rotating.rotation_fraction = kRotationFraction;
  rotating.rotation_every_samples = every_samples;
  int64_t rotations = 0;
  int64_t loaded = 0;
  TableInfo filled;
  Result<BenchResult> value = WithFreshDB(ColdBenchOptions(), [&](DB* db) {
    return WithTable(db, rotating, [&](Table* table) -> Result<BenchResult> {
      Status s = FillTrajectories(table, trajectories, src.get());
      if (!s.ok()) return s.WithContext("fill");
      // Stores the hot trajectories too, so that rotation writes only the
      // metadata of those leaving, as once every trajectory has been cold
      // (and flushes RocksDB before the timing rather than during it).
      s = db->Checkpoint();
      if (!s.ok()) return s.WithContext("Checkpoint");
      filled = table->Info();
      Result<double> rate = TimedSampleRate(table, timing, batch_size, &batch);
      if (!rate.ok()) return rate.status();
      const TableInfo after = table->Info();
      rotations = after.rotations - filled.rotations;
      loaded = after.loaded_trajectories - filled.loaded_trajectories;
      if (rotations == 0) return Status::Internal("no rotation happened while sampling");
      BenchResult result;
      result.value = *rate;
      return result;
    });
  });
  if (!value.ok()) return value.status();

  // Ceiling: the same data in a table that holds all of it, in a DB of its
  // own, so that nothing the rotating table's store still does runs beside.
  TableSpec hot = ColdSpec("bench_sample_fully_hot", 0, false);
  hot.capacity_steps = 2 * trajectories * kTrajectorySteps;
  Result<BenchResult> ceiling = WithFreshDB(ColdBenchOptions(), [&](DB* db) {
    return WithTable(db, hot, [&](Table* table) -> Result<BenchResult> {
      Status s = FillTrajectories(table, trajectories, src.get());
      if (!s.ok()) return s.WithContext("fill");
      if (table->Info().num_steps != trajectories * kTrajectorySteps) {
        return Status::Internal("the fully hot table holds " +
                                std::to_string(table->Info().num_steps) + " steps");
      }
      Result<double> rate = TimedSampleRate(table, timing, batch_size, &batch);
      if (!rate.ok()) return rate.status();
      BenchResult result;
      result.value = *rate;
      return result;
    });
  });
  if (!ceiling.ok()) return ceiling.status().WithContext(kRotatingCeiling);

  const double batch_bytes = static_cast<double>(batch_size * kColdStepBytes);
  BenchResult result;
  result.value = value->value * batch_bytes;
  result.unit = "B/s";
  result.ceiling = ceiling->value * batch_bytes;
  result.ceiling_name = kRotatingCeiling;
  char note[240];
  std::snprintf(note, sizeof(note),
                "%.3g items/s (fully_hot %.3g); %" PRId64 " MiB hot tier holding %" PRId64
                " of %" PRId64 " trajectories; a rotation every %" PRId64 " items: %" PRId64
                " rotations, %" PRId64 " loads in the timed runs",
                value->value * static_cast<double>(batch_size),
                ceiling->value * static_cast<double>(batch_size), tier_bytes >> 20,
                filled.num_trajectories, trajectories, every_samples, rotations, loaded);
  result.note = note;
  return result;
}

}  // namespace

std::vector<CaseWithTarget> ColdCases() {
  std::vector<CaseWithTarget> cases;
  cases.push_back({{"spill",
                    {{"step_bytes", kColdStepBytes}},
                    [](DB*, const Timing& timing) { return RunSpill(timing); }},
                   Target{Target::Kind::kRatioAtLeast, 0.70, "ratio >= 0.70"}});
  cases.push_back({{"reload",
                    {{"step_bytes", kColdStepBytes}},
                    [](DB*, const Timing& timing) { return RunReload(timing); }},
                   Target{Target::Kind::kRatioAtLeast, 0.70, "ratio >= 0.70"}});
  constexpr int64_t kBatch = 256;
  cases.push_back({{"sample_rotating",
                    {{"step_bytes", kColdStepBytes}, {"batch", kBatch}},
                    [](DB*, const Timing& timing) { return RunSampleRotating(timing, kBatch); }},
                   Target{Target::Kind::kRatioAtLeast, 0.80, "ratio >= 0.80"}});
  return cases;
}

}  // namespace replaydb::tools
