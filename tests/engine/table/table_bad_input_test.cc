// Bad input to the writers through the public API: enum values no build
// knows. Each is refused with a Status naming the value, before anything is
// stored or logged.
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::StepData;
using testing_util::TempDir;
using ::testing::HasSubstr;

class TableBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }

  TableSpec Spec(const std::string& name) {
    TableSpec spec;
    spec.name = name;
    spec.columns = {{"obs", DType::kF32, {1 + static_cast<int64_t>(rng_() % 4)}},
                    {"act", DType::kI32, {}}};
    spec.capacity_steps = 1024;
    spec.block_steps = 1 + static_cast<int64_t>(rng_() % 8);
    return spec;
  }
  // An EndReason value past the known ones.
  EndReason UnknownReason() { return static_cast<EndReason>(2 + rng_() % 254); }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_F(TableBadInputTest, WriterEndRefusesAnUnknownReasonAndKeepsTheTrajectoryOpen) {
  const TableSpec spec = Spec("ends");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  const int64_t n = 1 + static_cast<int64_t>(rng_() % 10);
  for (int64_t i = 0; i < n; ++i) ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
  const uint64_t id = writer->trajectory_id();
  const EndReason bad = UnknownReason();
  const Status s = writer->End(bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'ends': End: reason " +
                             std::to_string(static_cast<int>(bad)) +
                             " is not an EndReason (0 terminal, 1 truncated)");
  // Nothing changed: the trajectory is open and takes more steps.
  EXPECT_EQ(writer->trajectory_id(), id);
  EXPECT_EQ(writer->num_steps(), n);
  EXPECT_EQ(table->Info().num_open_trajectories, 1);
  ASSERT_OK(writer->Append(RandomStep(spec, rng_).tensors));
  ASSERT_OK(writer->End(EndReason::kTerminal));
  const std::vector<TrajectoryInfo> listed = table->ListTrajectories();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].ended);
  EXPECT_EQ(listed[0].end_reason, EndReason::kTerminal);
  EXPECT_EQ(listed[0].length, n + 1);
  // Ending an empty trajectory with a bad reason is refused too.
  EXPECT_EQ(writer->End(bad).code(), Status::Code::kInvalidArgument);
}

TEST_F(TableBadInputTest, VectorWriterEndsRefuseAnUnknownReason) {
  const TableSpec spec = Spec("vector_ends");
  std::shared_ptr<Table> table = testing_util::CreateTable(db_.get(), spec);
  ASSERT_NE(table, nullptr);
  const size_t envs = 2 + rng_() % 6;
  ASSERT_OK_AND_ASSIGN(auto vw, table->NewVectorWriter(envs));
  std::vector<std::vector<std::byte>> data(spec.columns.size());
  std::vector<ConstTensor> tensors;
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    data[c].resize(col.step_bytes() * envs);
    tensors.push_back({col.dtype, col.shape.Prepend(static_cast<int64_t>(envs)), data[c].data(),
                       data[c].size()});
  }
  ASSERT_OK(vw->Append(tensors));
  const EndReason bad = UnknownReason();
  const std::string reason = "reason " + std::to_string(static_cast<int>(bad)) +
                             " is not an EndReason (0 terminal, 1 truncated)";
  Status s = vw->End(0, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'vector_ends': End: " + reason);
  std::vector<size_t> all(envs);
  for (size_t e = 0; e < envs; ++e) all[e] = e;
  s = vw->EndMany(all, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'vector_ends': EndMany: " + reason);
  EXPECT_EQ(table->Info().num_open_trajectories, static_cast<int64_t>(envs));
  ASSERT_OK(vw->EndMany(all, EndReason::kTruncated));
  EXPECT_EQ(table->Info().num_open_trajectories, 0);

  // A vector table's writer (one trajectory of all lanes) checks it too.
  TableSpec lanes = Spec("lanes");
  lanes.lanes = static_cast<int64_t>(envs);
  std::shared_ptr<Table> lane_table = testing_util::CreateTable(db_.get(), lanes);
  ASSERT_NE(lane_table, nullptr);
  ASSERT_OK_AND_ASSIGN(auto lw, lane_table->NewVectorWriter(envs));
  s = lw->End(0, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'lanes': End: " + reason);
  s = lw->EndMany(all, bad);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(s.message(), "table 'lanes': EndMany: " + reason);
}

}  // namespace
}  // namespace replaydb
