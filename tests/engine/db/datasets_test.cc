// Export a table to a new database and import one from another database;
// bad input leaves nothing behind. The D4RL import's tests are in
// tests/utilities/d4rl/d4rl_import_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
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

}  // namespace
}  // namespace replaydb
