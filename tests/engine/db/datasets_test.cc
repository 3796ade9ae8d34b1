// Export a table to a new database, import one from another database, and
// import an HDF5 file in the D4RL layout; bad input leaves nothing behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/utilities/d4rl/d4rl_test_file.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec SpillSpec() {
  TableSpec spec;
  spec.name = "src";
  spec.columns = {{"obs", DType::kF32, Shape{4}}, {"flag", DType::kBool, Shape{}}};
  spec.block_steps = 8;
  spec.capacity_steps = 64;
  spec.spill = true;
  spec.selector = SelectorKind::kPrioritized;
  return spec;
}

// Per trajectory id: its steps (column bytes) and item priorities.
struct Content {
  std::map<uint64_t, std::vector<std::vector<std::vector<std::byte>>>> steps;
  std::map<uint64_t, std::vector<double>> priorities;
};

Content Write(Table* table, const TableSpec& spec, int n, std::mt19937_64& rng) {
  Content c;
  auto writer = table->NewWriter();
  EXPECT_TRUE(writer.ok());
  for (int i = 0; i < n; ++i) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % 20);
    for (int64_t s = 0; s < len; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      const double p = 0.5 + static_cast<double>(rng() % 100);
      EXPECT_OK((*writer)->Append(step.tensors, p));
      c.steps[(*writer)->trajectory_id()].push_back(step.columns);
      c.priorities[(*writer)->trajectory_id()].push_back(p);
    }
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
  }
  return c;
}

// Every trajectory of `c` is in `table` (loaded one by one), byte-identical,
// with its priorities.
void ExpectContent(Table* table, const Content& c) {
  for (const auto& [id, steps] : c.steps) {
    const uint64_t ids[] = {id};
    ASSERT_OK(table->Load(ids));
    std::vector<ItemKey> keys;
    for (size_t s = 0; s < steps.size(); ++s) keys.push_back(MakeItemKey(id, static_cast<int64_t>(s)));
    SampleBatch batch;
    ASSERT_OK(table->Lookup(keys, &batch));
    for (size_t s = 0; s < steps.size(); ++s) {
      for (size_t col = 0; col < steps[s].size(); ++col) {
        const size_t cb = steps[s][col].size();
        ASSERT_EQ(std::memcmp(reinterpret_cast<const std::byte*>(batch.columns[col].data()) + s * cb,
                              steps[s][col].data(), cb),
                  0)
            << "trajectory " << id << " step " << s;
      }
      EXPECT_EQ(batch.priorities[s], c.priorities.at(id)[s]);
    }
  }
}

TEST(DatasetsTest, ExportAndImportCopyEveryTrajectoryHotAndCold) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = SpillSpec();
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("a")));
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  const Content content = Write(table.get(), spec, 30, rng);
  ASSERT_GT(table->Info().cold_trajectories, 0);

  ASSERT_OK(db->ExportTable("src", dir.Sub("exported")));
  {
    ASSERT_OK_AND_ASSIGN(auto exported, DB::Open({}, dir.Sub("exported")));
    ASSERT_EQ(exported->ListTables(), std::vector<std::string>{"src"});
    ASSERT_OK_AND_ASSIGN(auto t, exported->GetTable("src"));
    EXPECT_EQ(t->spec(), spec);
    const TableInfo info = t->Info();
    EXPECT_EQ(info.num_trajectories + info.cold_trajectories,
              static_cast<int64_t>(content.steps.size()));
    EXPECT_GT(info.num_trajectories, 0) << "the hot tier is filled after an import";
    ExpectContent(t.get(), content);
  }
  // Exporting onto an existing database fails and leaves it alone.
  const Status again = db->ExportTable("src", dir.Sub("exported"));
  EXPECT_EQ(again.code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(again.ToString(), HasSubstr("export of 'src'"));
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("exported") + "/CATALOG"));

  // Import while the source database is open read-write here: the import
  // sees its last checkpoint (taken by the export above).
  ASSERT_OK_AND_ASSIGN(auto other, DB::Open({}, dir.Sub("b")));
  ASSERT_OK_AND_ASSIGN(auto copy, other->ImportTable(dir.Sub("a"), "src", "copy"));
  EXPECT_EQ(copy->name(), "copy");
  ExpectContent(copy.get(), content);
}

TEST(DatasetsTest, ImportErrorsLeaveNothingBehind) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  const TableSpec spec = SpillSpec();
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("a")));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    Write(table.get(), spec, 5, rng);
  }
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("b")));
  TableSpec taken = spec;
  taken.name = "taken";
  ASSERT_OK(db->CreateTable(taken).status());

  Result<std::shared_ptr<Table>> r = db->ImportTable(dir.Sub("a"), "src", "taken");
  EXPECT_EQ(r.status().code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(r.status().ToString(), HasSubstr("import of table 'src' from " + dir.Sub("a")));
  r = db->ImportTable(dir.Sub("a"), "nope");
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no table named 'nope' in " + dir.Sub("a")));
  r = db->ImportTable(dir.Sub("missing"), "src");
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no database at " + dir.Sub("missing")));
  EXPECT_EQ(db->ListTables(), std::vector<std::string>{"taken"});
}

// ---- D4RL

TEST(DatasetsTest, D4rlImportMatchesTheFileValueByValue) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  testing_util::D4rlTestShape shape;
  shape.steps = 300 + static_cast<int64_t>(rng() % 200);
  std::vector<testing_util::D4rlTestDataset> datasets = testing_util::RandomD4rlDatasets(shape, rng);
  datasets.push_back(testing_util::RandomDataset(
      "infos/qpos", DType::kF64, {static_cast<uint64_t>(shape.steps), 2}, rng));
  const std::string path = dir.Sub("data.h5");
  ASSERT_OK(testing_util::WriteD4rlTestFile(path, datasets));

  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "hopper";
  spec.block_steps = 16;
  spec.capacity_steps = 256;  // smaller than the file: the rest is cold
  ASSERT_OK_AND_ASSIGN(auto table, db->ImportD4rl(path, spec));
  const TableSpec got = table->spec();
  ASSERT_EQ(got.columns.size(), 6u);
  const std::vector<std::string> names = {"observations", "actions", "rewards",
                                          "terminals", "timeouts", "infos.qpos"};
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

TEST(DatasetsTest, D4rlBadInputNamesItAndLeavesNoTable) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open({}, dir.Sub("db")));
  TableSpec spec;
  spec.name = "d";
  spec.capacity_steps = 4096;
  const auto expect_error = [&](const std::string& path, const TableSpec& s, Status::Code code,
                                const std::string& text) {
    const auto r = db->ImportD4rl(path, s);
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
  typed.columns = {{"observations", DType::kF32, Shape{4}}, {"actions", DType::kF32, Shape{2}},
                   {"rewards", DType::kF32, Shape{}},      {"terminals", DType::kBool, Shape{}},
                   {"timeouts", DType::kBool, Shape{}}};
  expect_error(dir.Sub("good.h5"), typed, Status::Code::kInvalidArgument,
               "column 0 of table 'd' is 'observations' f32[4], but dataset 'observations' is "
               "'observations' f32[3]");
  typed.columns[0].shape = Shape{3};
  typed.columns.pop_back();
  expect_error(dir.Sub("good.h5"), typed, Status::Code::kInvalidArgument,
               "dataset 'timeouts' (column 'timeouts') is not in the spec of table 'd'");
  // And the good file imports.
  EXPECT_OK(db->ImportD4rl(dir.Sub("good.h5"), spec).status());
}

}  // namespace
}  // namespace replaydb
