#include "tools/replaydb/demo/demo.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <filesystem>
#include <memory>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/options.h"
#include "replaydb/table.h"
#include "replaydb/types.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {
namespace {

constexpr char kTableName[] = "experience";
constexpr int kNumWriters = 4;
constexpr int kTrajectoriesPerWriter = 25;
constexpr int64_t kShortestTrajectory = 10;
constexpr int64_t kLongestTrajectory = 200;
constexpr int64_t kObsDim = 8;
constexpr int32_t kNumActions = 6;
constexpr int64_t kSequenceLength = 4;
constexpr int64_t kCapacitySteps = 100000;
constexpr int64_t kBatchSize = 32;
constexpr size_t kItemsShown = 8;
// Generous bounds so that an engine bug shows up as an error, not a hang.
constexpr std::chrono::milliseconds kWriterTimeout{10000};
constexpr std::chrono::milliseconds kSamplerTimeout{100};
constexpr std::chrono::milliseconds kFinalSampleTimeout{10000};

TableSpec DemoSpec() {
  TableSpec spec;
  spec.name = kTableName;
  spec.columns = {
      {"obs", DType::kF32, Shape{kObsDim}},
      {"action", DType::kI32, Shape{}},
      {"reward", DType::kF32, Shape{}},
      {"done", DType::kBool, Shape{}},
  };
  spec.sequence_length = kSequenceLength;
  spec.padding = Padding::kTail;
  spec.capacity_steps = kCapacitySteps;
  return spec;
}

// OK if the demo may write into `dir`: it does not exist, is an empty
// directory, or holds a replaydb database (DIR/CATALOG, see replaydb/db.h).
Status CheckDemoDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found) return Status::OK();
  if (ec) return Status::IOError("cannot stat '" + dir + "': " + ec.message());
  if (!fs::is_directory(st)) {
    return Status::InvalidArgument("'" + dir + "' exists and is not a directory");
  }
  if (fs::exists(fs::path(dir) / "CATALOG", ec)) return Status::OK();
  const bool empty = fs::is_empty(dir, ec);
  if (ec) return Status::IOError("cannot list '" + dir + "': " + ec.message());
  if (!empty) {
    return Status::FailedPrecondition(
        "'" + dir +
        "' is neither empty nor a replaydb database; the demo writes only into a new or "
        "empty directory or an existing database");
  }
  return Status::OK();
}

struct WriterStats {
  int64_t steps = 0;
  int terminal = 0;
  int truncated = 0;
};

// Writes kTrajectoriesPerWriter trajectories of random length and content,
// each ended terminal or truncated at random. Stops early when `stop` is set
// (another thread failed).
Status WriteTrajectories(Table* table, int writer_index, uint64_t seed,
                         const std::atomic<bool>& stop, WriterStats* stats) {
  const std::string context = "writer " + std::to_string(writer_index);
  WriterOptions options;
  options.timeout = kWriterTimeout;
  auto writer_or = table->NewWriter(options);
  if (!writer_or.ok()) return writer_or.status().WithContext(context);
  std::unique_ptr<TrajectoryWriter> writer = std::move(writer_or).value();

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> length_dist(kShortestTrajectory, kLongestTrajectory);
  std::normal_distribution<float> obs_dist(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> action_dist(0, kNumActions - 1);
  std::normal_distribution<float> reward_dist(0.0f, 1.0f);
  std::bernoulli_distribution terminal_dist(0.5);

  // One step's values; `step` views them and is appended after each refill.
  std::array<float, kObsDim> obs{};
  int32_t action = 0;
  float reward = 0;
  uint8_t done = 0;
  const std::array<ConstTensor, 4> step = {{
      {DType::kF32, Shape{kObsDim}, obs.data(), sizeof(obs)},
      {DType::kI32, Shape{}, &action, sizeof(action)},
      {DType::kF32, Shape{}, &reward, sizeof(reward)},
      {DType::kBool, Shape{}, &done, sizeof(done)},
  }};

  for (int t = 0; t < kTrajectoriesPerWriter && !stop.load(std::memory_order_relaxed); ++t) {
    const int64_t length = length_dist(rng);
    const bool terminal = terminal_dist(rng);
    for (int64_t s = 0; s < length; ++s) {
      for (float& x : obs) x = obs_dist(rng);
      action = action_dist(rng);
      reward = reward_dist(rng);
      done = (terminal && s == length - 1) ? 1 : 0;
      Status status = writer->Append(step);
      if (!status.ok()) return status.WithContext(context + ": Append");
      ++stats->steps;
    }
    Status status = writer->End(terminal ? EndReason::kTerminal : EndReason::kTruncated);
    if (!status.ok()) return status.WithContext(context + ": End");
    ++(terminal ? stats->terminal : stats->truncated);
  }
  return Status::OK();
}

struct SamplerStats {
  int64_t batches = 0;
  int64_t timeouts = 0;
};

// Samples batches, reusing one SampleBatch, until `writers_done` is set.
// A sample that times out on the rate limiter (the table may still be empty)
// is counted and retried.
Status SampleWhileWriting(Table* table, const std::atomic<bool>& writers_done,
                          SamplerStats* stats) {
  SampleOptions options;
  options.timeout = kSamplerTimeout;
  SampleBatch batch;
  while (!writers_done.load(std::memory_order_relaxed)) {
    Status status = table->Sample(kBatchSize, options, &batch);
    if (status.ok()) {
      ++stats->batches;
    } else if (status.code() == Status::Code::kDeadlineExceeded) {
      ++stats->timeouts;
    } else {
      return status.WithContext("sampler");
    }
  }
  return Status::OK();
}

void PrintBatch(const TableSpec& spec, const SampleBatch& batch, std::FILE* out) {
  std::fprintf(out, "\none batch: %" PRId64 " items x %" PRId64 " steps\n", batch.batch_size,
               batch.sequence_length);
  std::fprintf(out, "  %-8s %-6s %s\n", "column", "dtype", "shape");
  for (size_t c = 0; c < batch.columns.size(); ++c) {
    const std::string name = c < spec.columns.size() ? spec.columns[c].name : "?";
    const Tensor& t = batch.columns[c];
    std::fprintf(out, "  %-8s %-6s %s\n", name.c_str(), std::string(DTypeName(t.dtype())).c_str(),
                 t.shape().ToString().c_str());
  }

  const size_t l = batch.sequence_length > 0 ? static_cast<size_t>(batch.sequence_length) : 0;
  int64_t padded = 0;
  for (uint8_t m : batch.mask) padded += m == 0 ? 1 : 0;
  std::fprintf(out, "  padded steps (mask 0): %" PRId64 " of %zu\n", padded, batch.mask.size());

  const size_t shown = std::min(kItemsShown, batch.keys.size());
  std::fprintf(out, "  first %zu of %zu items:\n", shown, batch.keys.size());
  std::fprintf(out, "    %-18s %10s %6s %12s %6s  %s\n", "key", "trajectory", "start",
               "probability", "times", "mask");
  for (size_t i = 0; i < shown; ++i) {
    const ItemKey key = batch.keys[i];
    std::string probability = "?";
    if (i < batch.probabilities.size()) probability = FormatDouble(batch.probabilities[i]);
    std::string times = "?";
    if (i < batch.times_sampled.size()) times = std::to_string(batch.times_sampled[i]);
    std::string mask;
    for (size_t s = 0; s < l && (i * l + s) < batch.mask.size(); ++s) {
      mask.push_back(batch.mask[i * l + s] != 0 ? '1' : '0');
    }
    std::fprintf(out, "    0x%016" PRIx64 " %10" PRIu64 " %6" PRId64 " %12s %6s  %s\n", key,
                 ItemKeyTrajectory(key), ItemKeyStart(key), probability.c_str(), times.c_str(),
                 mask.c_str());
  }
}

// Creates the table, runs the writers and the sampler, prints a batch and the
// table's info. Leaves the database open for the caller to close.
Status WriteAndSample(DB* db, std::FILE* out) {
  const TableSpec spec = DemoSpec();
  std::vector<std::string> tables = db->ListTables();
  if (std::find(tables.begin(), tables.end(), kTableName) != tables.end()) {
    REPLAYDB_RETURN_IF_ERROR(db->DropTable(kTableName).WithContext("DropTable"));
    std::fprintf(out, "dropped table '%s' left by an earlier run\n", kTableName);
  }
  auto table_or = db->CreateTable(spec);
  if (!table_or.ok()) return table_or.status().WithContext("CreateTable");
  std::shared_ptr<Table> table = std::move(table_or).value();
  std::fprintf(out, "created table '%s':\n%s", kTableName, FormatTableSpec(spec, "  ").c_str());

  std::fprintf(out,
               "\n%d writers x %d trajectories of %" PRId64 "..%" PRId64
               " steps, one sampler drawing batches of %" PRId64 "...\n",
               kNumWriters, kTrajectoriesPerWriter, kShortestTrajectory, kLongestTrajectory,
               kBatchSize);
  std::fflush(out);

  std::atomic<bool> stop{false};
  std::atomic<bool> writers_done{false};
  std::vector<Status> writer_status(kNumWriters);
  std::vector<WriterStats> writer_stats(kNumWriters);
  Status sampler_status;
  SamplerStats sampler_stats;
  std::random_device seed_source;

  const auto start = std::chrono::steady_clock::now();
  std::thread sampler([&] {
    sampler_status = SampleWhileWriting(table.get(), writers_done, &sampler_stats);
    if (!sampler_status.ok()) stop.store(true);
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kNumWriters; ++w) {
    const uint64_t seed = (uint64_t{seed_source()} << 32) ^ seed_source() ^ uint64_t(w);
    writers.emplace_back([&, w, seed] {
      writer_status[w] = WriteTrajectories(table.get(), w, seed, stop, &writer_stats[w]);
      if (!writer_status[w].ok()) stop.store(true);
    });
  }
  for (std::thread& t : writers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writers_done.store(true);
  sampler.join();

  for (const Status& s : writer_status) REPLAYDB_RETURN_IF_ERROR(s);
  REPLAYDB_RETURN_IF_ERROR(sampler_status);

  WriterStats total;
  for (const WriterStats& s : writer_stats) {
    total.steps += s.steps;
    total.terminal += s.terminal;
    total.truncated += s.truncated;
  }
  std::fprintf(out, "wrote %d trajectories (%d terminal, %d truncated), %s steps in %.3f s (%s)\n",
               total.terminal + total.truncated, total.terminal, total.truncated,
               FormatCount(total.steps).c_str(), seconds,
               FormatRate(static_cast<double>(total.steps) / seconds, "steps/s").c_str());
  std::fprintf(out, "sampler drew %s batches of %" PRId64 " while writing (%s timed out)\n",
               FormatCount(sampler_stats.batches).c_str(), kBatchSize,
               FormatCount(sampler_stats.timeouts).c_str());

  SampleOptions options;
  options.timeout = kFinalSampleTimeout;
  auto batch_or = table->Sample(kBatchSize, options);
  if (!batch_or.ok()) return batch_or.status().WithContext("Sample");
  PrintBatch(spec, batch_or.value(), out);

  std::fprintf(out, "\ntable info:\n%s", FormatTableInfo(table->Info(), "  ").c_str());
  return Status::OK();
}

// Reopens the database and prints what it holds.
Status Reopen(const std::string& dir, std::FILE* out) {
  auto db_or = DB::Open(DBOptions(), dir);
  if (!db_or.ok()) return db_or.status().WithContext("reopening '" + dir + "'");
  std::unique_ptr<DB> db = std::move(db_or).value();

  std::string names;
  for (const std::string& name : db->ListTables()) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  std::fprintf(out, "\nreopened '%s'\n  ListTables: %s\n", dir.c_str(),
               names.empty() ? "(none)" : names.c_str());

  auto table_or = db->GetTable(kTableName);
  if (!table_or.ok()) return table_or.status().WithContext("GetTable after reopening");
  std::shared_ptr<Table> table = std::move(table_or).value();
  std::fprintf(out, "  spec of '%s' as the catalog gives it back:\n%s", kTableName,
               FormatTableSpec(table->spec(), "    ").c_str());
  if (!(table->spec() == DemoSpec())) {
    return Status::Internal("the reopened table's spec differs from the one created");
  }
  const TableInfo info = table->Info();
  std::fprintf(out, "  num_steps after reopening: %s\n", FormatCount(info.num_steps).c_str());
  if (info.num_steps == 0) {
    std::fprintf(out,
                 "  (the reopened table is empty: only the catalog is durable so far; "
                 "trajectories will survive a reopen once the write-ahead log lands)\n");
  }
  return Status::OK();
}

}  // namespace

Status RunDemo(const std::string& dir, std::FILE* out) {
  REPLAYDB_RETURN_IF_ERROR(CheckDemoDir(dir));
  {
    auto db_or = DB::Open(DBOptions(), dir);
    if (!db_or.ok()) return db_or.status().WithContext("opening '" + dir + "'");
    std::unique_ptr<DB> db = std::move(db_or).value();
    std::fprintf(out, "opened database '%s'\n", dir.c_str());
    REPLAYDB_RETURN_IF_ERROR(WriteAndSample(db.get(), out));
    // Destroying the DB closes its tables and releases the directory lock.
  }
  std::fprintf(out, "\nclosed the database\n");
  return Reopen(dir, out);
}

int DemoCommand(std::span<const std::string> args) {
  bool help = false;
  const FlagSpec flags[] = {{"help", &help, nullptr}};
  std::vector<std::string> positional;
  Status status = ParseFlags(args, flags, &positional);
  if (status.ok() && positional.size() > 1) {
    status = Status::InvalidArgument("too many arguments");
  }
  if (!status.ok()) {
    std::fprintf(stderr, "replaydb demo: %s\nusage: replaydb %s\n", status.message().c_str(),
                 std::string(kDemoUsage).c_str());
    return kExitUsage;
  }
  if (help) {
    std::printf("usage: replaydb %s\n  %s\n", std::string(kDemoUsage).c_str(),
                std::string(kDemoSummary).c_str());
    return kExitOk;
  }
  const std::string dir = positional.empty() ? std::string(kDemoDefaultDir) : positional[0];
  status = RunDemo(dir, stdout);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "replaydb demo: %s\n", status.ToString().c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace replaydb::tools
