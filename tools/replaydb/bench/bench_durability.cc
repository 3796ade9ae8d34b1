// The durability benches of `replaydb bench` (documented in tools/replaydb/bench/bench.h):
//   wal_append  TrajectoryWriter::Append with the write-ahead log on, against
//               one thread write()ing records of the same size to a file in
//               the same directory with the same sync policy (raw_write);
//   recover     DB::Open replaying a log that holds everything, against
//               read()ing the same segment files (sequential_read);
//   checkpoint  DB::Checkpoint of freshly written steps, against a RocksDB
//               write of the same values (rocksdb_write), which is what a
//               checkpoint does inside (engine/cold/cold_store.cc).
// Each bench uses its own fresh DB in a temporary directory, removed after.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "replaydb/db.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"
#include "replaydb/types.h"
#include "tools/replaydb/bench/bench_common.h"

namespace replaydb::tools {
namespace {

constexpr int64_t kTrajectorySteps = 1000;
constexpr int64_t kWalCapacityBytes = int64_t{256} << 20;
constexpr int64_t kWalCapacityMaxSteps = int64_t{1} << 20;
// Bytes the raw_write ceiling adds to each step for the log's record
// framing: the 9-byte record header (length, CRC, type) plus the step
// record's ids (table, trajectory, step index), rounded up.
constexpr int64_t kRecordOverheadBytes = 32;
// kBatch defaults (WalOptions), which the raw_write ceiling copies.
constexpr std::chrono::milliseconds kBatchInterval{100};
constexpr uint64_t kBatchBytes = uint64_t{4} << 20;
// recover / checkpoint: step data written before the timed call.
constexpr int64_t kFixedWorkBytes = int64_t{64} << 20;
constexpr int64_t kFixedWorkBytesQuick = int64_t{32} << 20;
constexpr int64_t kClockCheckInterval = 64;

constexpr char kWalCeiling[] = "raw_write";
constexpr char kRecoverCeiling[] = "sequential_read";
constexpr char kCheckpointCeiling[] = "rocksdb_write";

using Buffer = std::unique_ptr<std::byte[]>;

Buffer FilledBuffer(size_t n, uint64_t seed) {
  Buffer buf(new std::byte[n]);
  FillPattern(buf.get(), n, seed);
  return buf;
}

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " '" + path + "': " + std::strerror(errno));
}

TableSpec OneColumnSpec(std::string name, int64_t step_bytes, int64_t capacity_steps) {
  TableSpec spec;
  spec.name = std::move(name);
  spec.columns = {{"data", DType::kU8, Shape{step_bytes}}};
  spec.capacity_steps = capacity_steps;
  return spec;
}

// Options of a DB whose checkpoints happen only when asked for, so that a
// timed phase sees the log (or the one checkpoint) alone.
DBOptions ManualCheckpointOptions(WalSyncMode sync) {
  DBOptions options;
  options.wal.enabled = true;
  options.wal.sync = sync;
  options.checkpoint.every_wal_bytes = 0;
  options.checkpoint.every = std::chrono::seconds(0);
  options.checkpoint.on_close = false;
  return options;
}

// Appends steps of `step_bytes` from `src` (kTrajectorySteps steps, taken in
// turn) until `duration` has passed or, if max_steps > 0, max_steps were
// appended, ending a trajectory every kTrajectorySteps steps. *in_trajectory
// carries the position over calls. Returns the steps appended and the time.
struct AppendPhase {
  int64_t steps = 0;
  double seconds = 0;
};
Result<AppendPhase> AppendSteps(TrajectoryWriter* writer, const std::byte* src, int64_t step_bytes,
                                Seconds duration, int64_t max_steps, int64_t* in_trajectory) {
  ConstTensor tensor{DType::kU8, Shape{step_bytes}, nullptr, static_cast<size_t>(step_bytes)};
  const std::span<const ConstTensor> step(&tensor, 1);
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(duration);
  int64_t done = 0;
  for (;;) {
    if (max_steps > 0 && done >= max_steps) break;
    if (max_steps <= 0 && done % kClockCheckInterval == 0 && Clock::now() >= deadline) break;
    tensor.data = src + *in_trajectory * step_bytes;
    Status s = writer->Append(step);
    if (!s.ok()) return s.WithContext("Append");
    ++done;
    if (++*in_trajectory == kTrajectorySteps) {
      s = writer->End(EndReason::kTerminal);
      if (!s.ok()) return s.WithContext("End");
      *in_trajectory = 0;
    }
  }
  AppendPhase phase{done, Seconds(Clock::now() - start).count()};
  if (phase.steps == 0 || !(phase.seconds > 0)) {
    return Status::Internal("the writer made no progress in the timed phase");
  }
  return phase;
}

// ------------------------------------------------------------- wal_append

// Records per second that one thread write()s: `records` records of
// `record_bytes` (taken in turn from `src`, kTrajectorySteps records) to a
// new file `path`. kBatch: a background thread fdatasyncs every
// kBatchInterval, or sooner once kBatchBytes are unsynced, like the log; the
// writer never waits for it. kNone: no sync. The time runs from the first
// write to the last write's return (as the Append timing does); the file is
// removed afterwards.
Result<double> RawWriteRate(const std::string& path, const std::byte* src, size_t record_bytes,
                            int64_t records, WalSyncMode sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", path);
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  uint64_t unsynced = 0;
  std::atomic<bool> sync_failed{false};
  std::thread syncer;
  if (sync == WalSyncMode::kBatch) {
    syncer = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!stop) {
        cv.wait_for(lock, kBatchInterval, [&] { return stop || unsynced >= kBatchBytes; });
        if (stop) break;
        unsynced = 0;
        lock.unlock();
        if (::fdatasync(fd) != 0) sync_failed.store(true);
        lock.lock();
      }
    });
  }
  Status status;
  const Clock::time_point start = Clock::now();
  int64_t r = 0;
  for (int64_t i = 0; i < records; ++i) {
    const std::byte* p = src + r * record_bytes;
    size_t left = record_bytes;
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        status = Errno("write", path);
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    if (!status.ok()) break;
    if (++r == kTrajectorySteps) r = 0;
    if (sync == WalSyncMode::kBatch) {
      bool wake = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        unsynced += record_bytes;
        wake = unsynced >= kBatchBytes;
      }
      if (wake) cv.notify_one();
    }
  }
  const double seconds = Seconds(Clock::now() - start).count();
  if (syncer.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_one();
    syncer.join();
  }
  ::close(fd);
  ::unlink(path.c_str());
  if (!status.ok()) return status;
  if (sync_failed.load()) return Errno("fdatasync", path);
  if (!(seconds > 0)) return Status::Internal("raw_write: no time passed");
  return static_cast<double>(records) / seconds;
}

Result<BenchResult> RunWalAppend(const Timing& timing, int64_t step_bytes, WalSyncMode sync) {
  auto dir_or = TempDir::Make();
  if (!dir_or.ok()) return dir_or.status();
  const std::string dir = (*dir_or)->path();
  DBOptions options = ManualCheckpointOptions(sync);
  options.error_if_exists = true;
  auto db_or = DB::Open(options, dir + "/db");
  if (!db_or.ok()) return db_or.status().WithContext("DB::Open");
  std::unique_ptr<DB> db = std::move(db_or).value();

  const TableSpec spec =
      OneColumnSpec("bench_wal_append", step_bytes,
                    std::min(kWalCapacityMaxSteps, kWalCapacityBytes / step_bytes));
  auto table_or = db->CreateTable(spec);
  if (!table_or.ok()) return table_or.status().WithContext("CreateTable");
  std::shared_ptr<Table> table = std::move(table_or).value();
  WriterOptions wo;
  wo.timeout = kCallTimeout;
  auto writer_or = table->NewWriter(wo);
  if (!writer_or.ok()) return writer_or.status().WithContext("NewWriter");
  std::unique_ptr<TrajectoryWriter> writer = std::move(writer_or).value();

  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectorySteps * step_bytes), 1);
  int64_t in_trajectory = 0;
  Result<AppendPhase> warmup =
      AppendSteps(writer.get(), src.get(), step_bytes, timing.duration / 2, 0, &in_trajectory);
  if (!warmup.ok()) return warmup.status().WithContext("warm-up");
  std::vector<int64_t> counts;
  Result<double> steps_per_second = Median(timing.repetitions, [&]() -> Result<double> {
    Result<AppendPhase> phase =
        AppendSteps(writer.get(), src.get(), step_bytes, timing.duration, 0, &in_trajectory);
    if (!phase.ok()) return phase.status();
    counts.push_back(phase->steps);
    return static_cast<double>(phase->steps) / phase->seconds;
  });
  if (!steps_per_second.ok()) return steps_per_second.status();
  if (in_trajectory > 0) {
    Status s = writer->End(EndReason::kTruncated);
    if (!s.ok()) return s.WithContext("End");
  }
  writer.reset();
  table.reset();
  db.reset();

  // Ceiling: as many records as the median timed phase appended.
  std::sort(counts.begin(), counts.end());
  const int64_t records = std::max<int64_t>(counts[counts.size() / 2], kTrajectorySteps);
  const size_t record_bytes = static_cast<size_t>(step_bytes + kRecordOverheadBytes);
  Buffer raw_src = FilledBuffer(static_cast<size_t>(kTrajectorySteps) * record_bytes, 2);
  const std::string raw_path = dir + "/raw_write.log";
  Result<double> ceiling_records = Median(timing.repetitions, [&]() -> Result<double> {
    return RawWriteRate(raw_path, raw_src.get(), record_bytes, records, sync);
  });
  if (!ceiling_records.ok()) return ceiling_records.status().WithContext("raw_write");

  BenchResult result;
  result.value = *steps_per_second * static_cast<double>(step_bytes);
  result.unit = "B/s";
  result.ceiling = *ceiling_records * static_cast<double>(step_bytes);
  result.ceiling_name = kWalCeiling;
  char note[160];
  std::snprintf(note, sizeof(note),
                "%.3g steps/s; raw_write %.3g records/s of %zu bytes (%" PRId64 " records)",
                *steps_per_second, *ceiling_records, record_bytes, records);
  result.note = note;
  return result;
}

// --------------------------------------------------- recover / checkpoint

int64_t FixedWorkSteps(const Timing& timing, int64_t step_bytes) {
  return (timing.quick ? kFixedWorkBytesQuick : kFixedWorkBytes) / step_bytes;
}

// Creates a table in `db` big enough for `steps` steps (no eviction) and
// writes them as 1000-step trajectories (the last one possibly shorter), one
// AppendMany per trajectory, every trajectory ended.
Status WriteFixedSteps(DB* db, int64_t step_bytes, int64_t steps, const std::byte* src) {
  auto table_or = db->CreateTable(OneColumnSpec("bench_durability", step_bytes, 2 * steps));
  if (!table_or.ok()) return table_or.status().WithContext("CreateTable");
  std::shared_ptr<Table> table = std::move(table_or).value();
  WriterOptions wo;
  wo.timeout = kCallTimeout;
  auto writer_or = table->NewWriter(wo);
  if (!writer_or.ok()) return writer_or.status().WithContext("NewWriter");
  std::unique_ptr<TrajectoryWriter> writer = std::move(writer_or).value();
  for (int64_t done = 0; done < steps;) {
    const int64_t n = std::min(kTrajectorySteps, steps - done);
    const size_t bytes = static_cast<size_t>(n * step_bytes);
    const ConstTensor t{DType::kU8, Shape{n, step_bytes}, src, bytes};
    REPLAYDB_RETURN_IF_ERROR(writer->AppendMany(std::span<const ConstTensor>(&t, 1)));
    REPLAYDB_RETURN_IF_ERROR(writer->End(EndReason::kTerminal));
    done += n;
  }
  return Status::OK();
}

// Bytes per second of read()ing every segment file of `wal_dir` in name
// order into a 1 MiB buffer. *bytes gets the total read.
Result<double> SequentialReadRate(const std::string& wal_dir, uint64_t* bytes) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(wal_dir, ec)) {
    if (e.path().extension() == ".log") files.push_back(e.path().string());
  }
  if (ec) return Status::IOError("list '" + wal_dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<std::byte> buf(size_t{1} << 20);
  uint64_t total = 0;
  const Clock::time_point start = Clock::now();
  for (const std::string& f : files) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open", f);
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        Status s = Errno("read", f);
        ::close(fd);
        return s;
      }
      if (n == 0) break;
      total += static_cast<uint64_t>(n);
    }
    ::close(fd);
  }
  DoNotOptimize(buf.data());
  const double seconds = Seconds(Clock::now() - start).count();
  *bytes = total;
  if (total == 0 || !(seconds > 0)) {
    return Status::Internal("sequential_read: no log bytes in '" + wal_dir + "'");
  }
  return static_cast<double>(total) / seconds;
}

// Seconds of one DB::Checkpoint of `steps` steps written into a fresh DB at
// `path` (created with `options`; removed afterwards).
Result<double> CheckpointSeconds(const std::string& path, const DBOptions& options,
                                 int64_t step_bytes, int64_t steps, const std::byte* src) {
  DBOptions create = options;
  create.error_if_exists = true;
  auto db_or = DB::Open(create, path);
  if (!db_or.ok()) return db_or.status().WithContext("DB::Open");
  std::unique_ptr<DB> db = std::move(db_or).value();
  Status s = WriteFixedSteps(db.get(), step_bytes, steps, src);
  if (!s.ok()) return s.WithContext("fill");
  const Clock::time_point start = Clock::now();
  s = db->Checkpoint();
  const double seconds = Seconds(Clock::now() - start).count();
  if (!s.ok()) return s.WithContext("Checkpoint");
  db.reset();
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return seconds;
}

Result<BenchResult> RunRecover(const Timing& timing, int64_t step_bytes) {
  const int64_t steps = FixedWorkSteps(timing, step_bytes);
  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectorySteps * step_bytes), 3);
  auto dir_or = TempDir::Make();
  if (!dir_or.ok()) return dir_or.status();
  const std::string dir = (*dir_or)->path();
  // The log is written without syncs (how fast it was written is not
  // measured); the page cache holds it for both the ceiling and the open.
  const DBOptions options = ManualCheckpointOptions(WalSyncMode::kNone);
  std::vector<double> ceilings;
  uint64_t wal_bytes = 0;
  uint64_t wal_records = 0;
  std::vector<double> open_seconds;
  std::vector<double> checkpoint_seconds;
  int run = 0;
  Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
    const std::string path = dir + "/db" + std::to_string(run++);
    {
      DBOptions create = options;
      create.error_if_exists = true;
      auto db_or = DB::Open(create, path);
      if (!db_or.ok()) return db_or.status().WithContext("DB::Open (create)");
      Status s = WriteFixedSteps(db_or->get(), step_bytes, steps, src.get());
      if (!s.ok()) return s.WithContext("fill");
    }  // destroyed without a checkpoint: the log holds everything
    uint64_t read_bytes = 0;
    Result<double> ceiling = SequentialReadRate(path + "/wal", &read_bytes);
    if (!ceiling.ok()) return ceiling.status();
    ceilings.push_back(*ceiling);

    // Automatic checkpoints on (the default): the open replays and returns,
    // leaving the checkpoint of what it recovered to the background.
    DBOptions reopen = options;
    reopen.create_if_missing = false;
    reopen.checkpoint.every = std::chrono::seconds(300);
    const Clock::time_point start = Clock::now();
    auto db_or = DB::Open(reopen, path);
    const double seconds = Seconds(Clock::now() - start).count();
    if (!db_or.ok()) return db_or.status().WithContext("DB::Open (recover)");
    const RecoveryInfo info = (*db_or)->recovery_info();
    db_or->reset();
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (info.wal_bytes == 0) return Status::Internal("recovery replayed no log bytes");
    wal_bytes = info.wal_bytes;
    wal_records = info.wal_records;
    open_seconds.push_back(seconds);

    // For the note: a DB::Checkpoint of the same steps in another fresh DB,
    // what the open leaves to the checkpoint thread.
    Result<double> ck = CheckpointSeconds(path + "-checkpoint", options, step_bytes, steps, src.get());
    if (!ck.ok()) return ck.status().WithContext("checkpoint estimate");
    checkpoint_seconds.push_back(*ck);
    return static_cast<double>(info.wal_bytes) / seconds;
  });
  if (!rate.ok()) return rate.status();
  std::sort(ceilings.begin(), ceilings.end());

  BenchResult result;
  result.value = *rate;
  result.unit = "B/s";
  result.ceiling = ceilings[ceilings.size() / 2];
  result.ceiling_name = kRecoverCeiling;
  std::sort(open_seconds.begin(), open_seconds.end());
  std::sort(checkpoint_seconds.begin(), checkpoint_seconds.end());
  const double open_s = open_seconds[open_seconds.size() / 2];
  const double ck_s = checkpoint_seconds[checkpoint_seconds.size() / 2];
  char note[400];
  std::snprintf(note, sizeof(note),
                "%.1f MiB of log (%" PRIu64 " records) per open of %.3f s; the checkpoint of "
                "what it recovered runs after it returns (a DB::Checkpoint of the same steps "
                "took %.3f s)",
                static_cast<double>(wal_bytes) / (1 << 20), wal_records, open_s, ck_s);
  result.note = note;
  return result;
}

// Key of the ceiling's value `i`: a 13-byte big-endian key like the cold
// store's step chunks (table, kind, trajectory).
std::string ChunkKey(uint64_t i) {
  std::string key(13, '\0');
  key[3] = 1;
  key[4] = 'd';
  for (int b = 0; b < 8; ++b) key[12 - b] = static_cast<char>((i >> (8 * b)) & 0xff);
  return key;
}

// Bytes per second of payload that a fresh RocksDB (default options + zstd)
// in `path` takes in one WriteBatch (WAL disabled) of the 1000-step chunks
// that `steps` steps make, then Flush(wait). The open is not timed.
Result<double> RocksWriteRate(const std::string& path, const std::byte* src, int64_t step_bytes,
                              int64_t steps) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kZSTD;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status rs = rocksdb::DB::Open(options, path, &raw);
  if (!rs.ok()) return Status::IOError("rocksdb open '" + path + "': " + rs.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  const Clock::time_point start = Clock::now();
  rocksdb::WriteBatch batch;
  uint64_t i = 0;
  for (int64_t done = 0; done < steps; ++i) {
    const int64_t n = std::min(kTrajectorySteps, steps - done);
    rs = batch.Put(ChunkKey(i), rocksdb::Slice(reinterpret_cast<const char*>(src),
                                               static_cast<size_t>(n * step_bytes)));
    if (!rs.ok()) return Status::IOError("rocksdb batch: " + rs.ToString());
    done += n;
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rs = db->Write(wo, &batch);
  if (rs.ok()) {
    rocksdb::FlushOptions fo;
    fo.wait = true;
    rs = db->Flush(fo);
  }
  const double seconds = Seconds(Clock::now() - start).count();
  if (!rs.ok()) return Status::IOError("rocksdb write '" + path + "': " + rs.ToString());
  (void)db->Close();
  db.reset();
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return static_cast<double>(steps * step_bytes) / seconds;
}

Result<BenchResult> RunCheckpoint(const Timing& timing, int64_t step_bytes) {
  const int64_t steps = FixedWorkSteps(timing, step_bytes);
  Buffer src = FilledBuffer(static_cast<size_t>(kTrajectorySteps * step_bytes), 4);
  auto dir_or = TempDir::Make();
  if (!dir_or.ok()) return dir_or.status();
  const std::string dir = (*dir_or)->path();
  // The WAL as by default (kBatch); checkpoints only when asked.
  const DBOptions options = ManualCheckpointOptions(WalSyncMode::kBatch);
  int run = 0;
  Result<double> rate = Median(timing.repetitions, [&]() -> Result<double> {
    Result<double> seconds =
        CheckpointSeconds(dir + "/db" + std::to_string(run++), options, step_bytes, steps, src.get());
    if (!seconds.ok()) return seconds.status();
    return static_cast<double>(steps * step_bytes) / *seconds;
  });
  if (!rate.ok()) return rate.status();

  run = 0;
  Result<double> ceiling = Median(timing.repetitions, [&]() -> Result<double> {
    return RocksWriteRate(dir + "/rocksdb" + std::to_string(run++), src.get(), step_bytes, steps);
  });
  if (!ceiling.ok()) return ceiling.status().WithContext("rocksdb_write");

  BenchResult result;
  result.value = *rate;
  result.unit = "B/s";
  result.ceiling = *ceiling;
  result.ceiling_name = kCheckpointCeiling;
  char note[120];
  std::snprintf(note, sizeof(note), "%.1f MiB of steps (%" PRId64 " steps) per checkpoint",
                static_cast<double>(steps * step_bytes) / (1 << 20), steps);
  result.note = note;
  return result;
}

}  // namespace

std::vector<CaseWithTarget> DurabilityCases() {
  std::vector<CaseWithTarget> cases;
  for (int64_t step_bytes : {int64_t{64}, int64_t{16384}}) {
    for (WalSyncMode sync : {WalSyncMode::kNone, WalSyncMode::kBatch}) {
      // Issue 37: the log appends 16 KiB records at >= 0.8 of a raw write.
      std::optional<Target> target;
      if (step_bytes == 16384) target = Target{Target::Kind::kRatioAtLeast, 0.8, "ratio >= 0.80"};
      cases.push_back({{"wal_append",
                        {{"step_bytes", step_bytes},
                         {"sync", 0, std::string(WalSyncModeName(sync))}},
                        [step_bytes, sync](DB*, const Timing& timing) {
                          return RunWalAppend(timing, step_bytes, sync);
                        }},
                       target});
    }
  }
  constexpr int64_t kStepBytes = 16384;
  cases.push_back({{"recover",
                    {{"step_bytes", kStepBytes}},
                    [](DB*, const Timing& timing) { return RunRecover(timing, kStepBytes); }},
                   // Issue 37: recovery at >= 0.5 of a sequential read.
                   Target{Target::Kind::kRatioAtLeast, 0.5, "ratio >= 0.50"}});
  cases.push_back({{"checkpoint",
                    {{"step_bytes", kStepBytes}},
                    [](DB*, const Timing& timing) { return RunCheckpoint(timing, kStepBytes); }},
                   std::nullopt});
  return cases;
}

}  // namespace replaydb::tools
