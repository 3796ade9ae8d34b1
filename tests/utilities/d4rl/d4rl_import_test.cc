// ImportD4rl (include/replaydb/utilities/d4rl.h): an HDF5 file in the D4RL
// layout into a new table, value by value; bad input, a read-only opener and
// a cancelled import leave nothing behind; progress reports; the shell's
// import-d4rl command. Built only where libhdf5 is found (replaydb_d4rl).
#include "replaydb/utilities/d4rl.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/tools/tool_runner.h"
#include "tests/utilities/d4rl/d4rl_test_file.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TestSeed;

TEST(D4rlImportTest, MatchesTheFileValueByValue) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  testing_util::D4rlTestShape shape;
  shape.steps = 300 + static_cast<int64_t>(rng() % 200);
  std::vector<testing_util::D4rlTestDataset> datasets =
      testing_util::RandomD4rlDatasets(shape, rng);
  datasets.push_back(testing_util::RandomDataset("infos/qpos", DType::kF64,
                                                 {static_cast<uint64_t>(shape.steps), 2}, rng));
  const std::string path = dir.Sub("data.h5");
  ASSERT_OK(testing_util::WriteD4rlTestFile(path, datasets));

  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "hopper";
  spec.block_steps = 16;
  spec.capacity_steps = 256;  // smaller than the file: the rest is cold
  ASSERT_OK_AND_ASSIGN(auto table, ImportD4rl(*db, path, spec));
  const TableSpec got = table->spec();
  ASSERT_EQ(got.columns.size(), 6u);
  const std::vector<std::string> names = {"observations", "actions",  "rewards",
                                          "terminals",    "timeouts", "infos.qpos"};
  for (size_t c = 0; c < names.size(); ++c) EXPECT_EQ(got.columns[c].name, names[c]);
  EXPECT_EQ(got.columns[0].shape, Shape{static_cast<int64_t>(shape.obs_dim)});
  EXPECT_EQ(got.columns[3].dtype, DType::kBool);
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_steps + info.cold_steps, shape.steps);

  // Reference trajectories: cut after each terminal or timeout.
  const auto& terminals = testing_util::FindDataset(datasets, "terminals").data;
  const auto& timeouts = testing_util::FindDataset(datasets, "timeouts").data;
  std::vector<std::pair<int64_t, int64_t>> cuts;  // (first, length)
  int64_t first = 0;
  for (int64_t i = 0; i < shape.steps; ++i) {
    if (terminals[i] != std::byte{0} || timeouts[i] != std::byte{0} || i == shape.steps - 1) {
      cuts.emplace_back(first, i + 1 - first);
      first = i + 1;
    }
  }
  EXPECT_EQ(info.num_trajectories + info.cold_trajectories, static_cast<int64_t>(cuts.size()));
  for (size_t t = 0; t < cuts.size(); ++t) {
    const uint64_t id = t + 1;
    const uint64_t ids[] = {id};
    ASSERT_OK(table->Load(ids));
    std::vector<ItemKey> keys;
    for (int64_t s = 0; s < cuts[t].second; ++s) keys.push_back(MakeItemKey(id, s));
    SampleBatch batch;
    ASSERT_OK(table->Lookup(keys, &batch));
    for (size_t c = 0; c < names.size(); ++c) {
      const std::string dataset = c == 5 ? "infos/qpos" : names[c];
      const auto& raw = testing_util::FindDataset(datasets, dataset).data;
      const size_t cb = got.columns[c].step_bytes();
      ASSERT_EQ(std::memcmp(batch.columns[c].data(), raw.data() + cuts[t].first * cb,
                            cb * static_cast<size_t>(cuts[t].second)),
                0)
          << "trajectory " << id << " column " << names[c];
    }
  }
}

TEST(D4rlImportTest, BadInputNamesItAndLeavesNoTable) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "d";
  spec.capacity_steps = 4096;
  const auto expect_error = [&](const std::string& path, const TableSpec& s, Status::Code code,
                                const std::string& text) {
    const auto r = ImportD4rl(*db, path, s);
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_THAT(r.status().ToString(), HasSubstr(text));
    EXPECT_TRUE(db->ListTables().empty()) << "a failed import left a table";
  };
  expect_error(dir.Sub("none.h5"), spec, Status::Code::kNotFound, dir.Sub("none.h5"));

  testing_util::D4rlTestShape shape;
  auto datasets = testing_util::RandomD4rlDatasets(shape, rng);
  // Inconsistent lengths.
  auto short_actions = datasets;
  testing_util::FindDataset(short_actions, "actions") =
      testing_util::RandomDataset("actions", DType::kF32, {99, 2}, rng);
  ASSERT_OK(testing_util::WriteD4rlTestFile(dir.Sub("short.h5"), short_actions));
  expect_error(dir.Sub("short.h5"), spec, Status::Code::kInvalidArgument, "'actions' has 99 steps");
  // A missing dataset.
  auto missing = datasets;
  testing_util::RemoveDataset(missing, "rewards");
  ASSERT_OK(testing_util::WriteD4rlTestFile(dir.Sub("missing.h5"), missing));
  expect_error(dir.Sub("missing.h5"), spec, Status::Code::kInvalidArgument, "rewards");
  // An unsupported dtype.
  auto strings = datasets;
  testing_util::D4rlTestDataset names;
  names.path = "infos/name";
  names.type = testing_util::H5TestType::kFixedString;
  names.dims = {static_cast<uint64_t>(shape.steps)};
  names.data.assign(static_cast<size_t>(shape.steps) * names.string_size, std::byte{'a'});
  strings.push_back(names);
  ASSERT_OK(testing_util::WriteD4rlTestFile(dir.Sub("strings.h5"), strings));
  expect_error(dir.Sub("strings.h5"), spec, Status::Code::kInvalidArgument, "infos/name");

  // Schema mismatch against a spec with columns.
  ASSERT_OK(testing_util::WriteD4rlTestFile(dir.Sub("good.h5"), datasets));
  TableSpec typed = spec;
  typed.columns = {{"observations", DType::kF32, Shape{4}},
                   {"actions", DType::kF32, Shape{2}},
                   {"rewards", DType::kF32, Shape{}},
                   {"terminals", DType::kBool, Shape{}},
                   {"timeouts", DType::kBool, Shape{}}};
  expect_error(dir.Sub("good.h5"), typed, Status::Code::kInvalidArgument,
               "column 0 of table 'd' is 'observations' f32[4], but dataset 'observations' is "
               "'observations' f32[3]");
  typed.columns[0].shape = Shape{3};
  typed.columns.pop_back();
  expect_error(dir.Sub("good.h5"), typed, Status::Code::kInvalidArgument,
               "dataset 'timeouts' (column 'timeouts') is not in the spec of table 'd'");
  typed.columns.push_back({"timeouts", DType::kBool, Shape{}});
  typed.columns.push_back({"extra", DType::kF32, Shape{}});
  expect_error(dir.Sub("good.h5"), typed, Status::Code::kInvalidArgument,
               "'" + dir.Sub("good.h5") +
                   "': the spec of table 'd' has column 'extra', which the file lacks");
  // An invalid spec, and a trajectory longer than the hot tier.
  TableSpec unnamed = spec;
  unnamed.name = "";
  expect_error(dir.Sub("good.h5"), unnamed, Status::Code::kInvalidArgument,
               "'" + dir.Sub("good.h5") + "'");
  TableSpec tiny = spec;
  tiny.block_steps = 1;
  tiny.capacity_steps = 1;
  expect_error(dir.Sub("good.h5"), tiny, Status::Code::kInvalidArgument,
               "steps, more than the hot tier of table 'd' holds; raise its capacity");
  // A name that is taken.
  TableSpec other = spec;
  other.name = "taken";
  other.columns = {{"x", DType::kF32, Shape{}}};
  ASSERT_OK(db->CreateTable(other).status());
  TableSpec taken = spec;
  taken.name = "taken";
  const auto r = ImportD4rl(*db, dir.Sub("good.h5"), taken);
  EXPECT_EQ(r.status().code(), Status::Code::kAlreadyExists) << r.status().ToString();
  EXPECT_THAT(r.status().ToString(), HasSubstr("'" + dir.Sub("good.h5") + "'"));
  ASSERT_OK(db->DropTable("taken"));
  // And the good file imports.
  EXPECT_OK(ImportD4rl(*db, dir.Sub("good.h5"), spec).status());
}

TEST(D4rlImportTest, ReadOnlyOpenerFailsAndNamesTheDatabase) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const std::string file = dir.Sub("good.h5");
  ASSERT_OK(testing_util::WriteD4rlTestFile(file, testing_util::RandomD4rlDatasets({}, rng)));
  { ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db"))); }
  ASSERT_OK_AND_ASSIGN(auto reader, DB::OpenReadOnly({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "d";
  const auto r = ImportD4rl(*reader, file, spec);
  EXPECT_EQ(r.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(r.status().message(),
            "ImportD4rl: database " + dir.Sub("db") + " was opened read-only (DB::OpenReadOnly)");
}

TEST(D4rlImportTest, CancelledImportKeepsNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const std::string file = dir.Sub("good.h5");
  ASSERT_OK(testing_util::WriteD4rlTestFile(file, testing_util::RandomD4rlDatasets({}, rng)));
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "d";
  spec.capacity_steps = 4096;
  const std::atomic<bool> cancel{true};
  LongOperationOptions options;
  options.cancel = &cancel;
  const auto r = ImportD4rl(*db, file, spec, options);
  EXPECT_EQ(r.status().code(), Status::Code::kCancelled) << r.status().ToString();
  EXPECT_THAT(r.status().ToString(),
              HasSubstr("import of '" + file + "': interrupted after 0 steps; nothing was kept"));
  EXPECT_TRUE(db->ListTables().empty());
}

TEST(D4rlImportTest, ReportsProgressInSteps) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  testing_util::D4rlTestShape shape;
  shape.steps = 200 + static_cast<int64_t>(rng() % 100);
  const std::string file = dir.Sub("good.h5");
  ASSERT_OK(testing_util::WriteD4rlTestFile(file, testing_util::RandomD4rlDatasets(shape, rng)));
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "d";
  spec.capacity_steps = 4096;
  // The numbers of each report; the string_views are checked in the call.
  struct Counts {
    int64_t done, total;
    bool finished;
  };
  std::vector<Counts> reports;
  LongOperationOptions options;
  options.progress = [&](const ProgressUpdate& u) {
    reports.push_back({u.done, u.total, u.finished});
    EXPECT_EQ(u.operation, "import " + file);
    EXPECT_EQ(u.unit, "steps");
  };
  ASSERT_OK(ImportD4rl(*db, file, spec, options).status());
  ASSERT_GE(reports.size(), 2u);
  EXPECT_EQ(reports.front().done, 0);
  EXPECT_FALSE(reports.front().finished);
  EXPECT_TRUE(reports.back().finished);
  EXPECT_EQ(reports.back().done, shape.steps);
  EXPECT_EQ(reports.back().total, shape.steps);
}

// The shell's import-d4rl command, in a tool built with replaydb_d4rl.
class D4rlShellTest : public testing_util::ToolDirTest {};

TEST_F(D4rlShellTest, ImportD4rlCommandImportsTheFile) {
  std::mt19937_64 rng(TestSeed());
  testing_util::D4rlTestShape shape;
  const std::string file = (dir_ / "data.h5").string();
  ASSERT_OK(testing_util::WriteD4rlTestFile(file, testing_util::RandomD4rlDatasets(shape, rng)));
  const std::string db_path = (dir_ / "db").string();
  { auto db = testing_util::OpenDB(db_path); }
  testing_util::ToolRun run =
      Run({db_path, "--json", "-c", "import-d4rl " + file + " hopper", "-c", "tables"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<testing_util::JsonValue> out = testing_util::JsonLines(run);
  ASSERT_EQ(out.size(), 2u) << run.out;
  EXPECT_EQ(out[0].Find("imported")->string, "hopper");
  EXPECT_EQ(out[0].Find("steps")->number, static_cast<double>(shape.steps));
  EXPECT_EQ(run.err.find('\r'), std::string::npos) << "no bar where stderr is no terminal";
  // A bad file: one line naming the command and the file.
  run = Run({db_path, "-c", "import-d4rl " + (dir_ / "none.h5").string() + " other"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("error: import-d4rl: "));
  EXPECT_THAT(run.err, HasSubstr((dir_ / "none.h5").string()));
}

}  // namespace
}  // namespace replaydb

namespace replaydb {
namespace {

// Not a test of its own: tests/python/test_d4rl.py runs it to get a D4RL
// file (Python here has no HDF5 writer). With REPLAYDB_D4RL_FILE set it
// writes a random file there, and each of its five datasets' raw bytes
// (little-endian, C order) beside it as PATH.<dataset>.
TEST(D4rlFileForPython, WritesTheFileWhenAsked) {
  using testing_util::D4rlTestDataset;
  using testing_util::D4rlTestShape;
  using testing_util::RandomD4rlDatasets;
  using testing_util::WriteD4rlTestFile;
  const char* path = std::getenv("REPLAYDB_D4RL_FILE");
  if (path == nullptr) GTEST_SKIP() << "runs for tests/python/test_d4rl.py (REPLAYDB_D4RL_FILE)";
  std::mt19937_64 rng(TestSeed());
  D4rlTestShape shape;
  shape.steps = 50 + static_cast<int64_t>(rng() % 100);
  std::vector<D4rlTestDataset> datasets = RandomD4rlDatasets(shape, rng);
  ASSERT_OK(WriteD4rlTestFile(path, datasets));
  for (const D4rlTestDataset& d : datasets) {
    std::ofstream out(std::string(path) + "." + d.path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(d.data.data()),
              static_cast<std::streamsize>(d.data.size()));
    ASSERT_TRUE(out.good()) << d.path;
  }
}

}  // namespace
}  // namespace replaydb
