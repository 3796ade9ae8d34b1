// Table::DeleteItems: deleted items are never drawn or looked up again, leave
// the counts and the rate limiter as deletes, stay deleted through log
// replay, checkpoints and the cold tier, and free a trajectory that has
// nothing left once it ended. Refusals name the table and why.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;
using ::testing::HasSubstr;

TableSpec Spec(const std::string& name, SelectorKind selector, uint32_t max_times_sampled = 0) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"v", DType::kI64, {}}};
  spec.capacity_steps = 4096;
  spec.block_steps = 16;
  spec.selector = selector;
  spec.max_times_sampled = max_times_sampled;
  return spec;
}

// Trajectories of the given lengths (step i holds i); returns their items'
// keys in order.
std::vector<ItemKey> Write(Table& table, const std::vector<int>& lengths) {
  std::vector<ItemKey> keys;
  auto writer = table.NewWriter();
  EXPECT_OK(writer.status());
  for (int length : lengths) {
    for (int i = 0; i < length; ++i) {
      const int64_t v = i;
      ConstTensor t{DType::kI64, Shape(), &v, sizeof v};
      EXPECT_OK((*writer)->Append(std::span<const ConstTensor>(&t, 1), 1.0 + (i % 5)));
      keys.push_back(MakeItemKey((*writer)->trajectory_id(), i));
    }
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
  }
  return keys;
}

std::set<ItemKey> Drawn(Table& table, int batches) {
  std::set<ItemKey> seen;
  SampleOptions o;
  o.peek = true;
  for (int b = 0; b < batches; ++b) {
    auto batch = table.Sample(64, o);
    EXPECT_OK(batch.status());
    if (!batch.ok()) break;
    seen.insert(batch->keys.begin(), batch->keys.end());
  }
  return seen;
}

class TableDeleteTest : public ::testing::TestWithParam<SelectorKind> {
 protected:
  TempDir dir_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

TEST_P(TableDeleteTest, DeletedItemsAreNeverDrawnAndCountAsDeletes) {
  auto db = testing_util::OpenDB(dir_.path());
  auto table = testing_util::CreateTable(db.get(), Spec("d", GetParam()));
  const std::vector<ItemKey> keys = Write(*table, {40, 25, 33});
  std::vector<ItemKey> doomed;
  for (ItemKey k : keys) {
    if (rng_() % 3 == 0) doomed.push_back(k);
  }
  doomed.push_back(MakeItemKey(999, 0));  // no such item: skipped
  int64_t deleted = -1;
  ASSERT_OK(table->DeleteItems(doomed, &deleted));
  EXPECT_EQ(deleted, static_cast<int64_t>(doomed.size()) - 1);
  ASSERT_OK(table->DeleteItems(doomed, &deleted));
  EXPECT_EQ(deleted, 0) << "deleting again skips them";
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, static_cast<int64_t>(keys.size() - doomed.size() + 1));
  EXPECT_EQ(info.rate_limiter.deletes, static_cast<int64_t>(doomed.size()) - 1);
  const std::set<ItemKey> gone(doomed.begin(), doomed.end());
  for (ItemKey k : Drawn(*table, 40)) EXPECT_EQ(gone.count(k), 0u) << k;
  SampleBatch out;
  const Status s = table->Lookup(std::span<const ItemKey>(&doomed[0], 1), &out);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  PriorityUpdateResult r;
  const std::vector<double> p(1, 3.0);
  ASSERT_OK(table->UpdatePriorities(std::span<const ItemKey>(&doomed[0], 1), p, &r));
  EXPECT_EQ(r.updated, 0);
  auto report = db->Verify();
  ASSERT_OK(report.status());
  EXPECT_TRUE(report->problems.empty()) << report->problems[0];
}

TEST_P(TableDeleteTest, DeletedItemsStayDeletedThroughReplayCheckpointsAndTheColdTier) {
  std::vector<ItemKey> keys;
  std::vector<ItemKey> doomed;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto db = testing_util::OpenDB(dir_.path());
    std::shared_ptr<Table> table;
    if (round == 0) {
      table = testing_util::CreateTable(db.get(), Spec("d", GetParam()));
      keys = Write(*table, {30, 30, 30});
      for (ItemKey k : keys) {
        if (rng_() % 2 == 0) doomed.push_back(k);
      }
      ASSERT_OK(table->DeleteItems(doomed));  // logged; replayed on the next open
    } else {
      auto got = db->GetTable("d");
      ASSERT_OK(got.status());
      table = *got;
      if (round == 1) {
        ASSERT_OK(db->Checkpoint());  // into the cold store: the next open loads them
      }
    }
    EXPECT_EQ(table->Info().num_items, static_cast<int64_t>(keys.size() - doomed.size()));
    const std::set<ItemKey> gone(doomed.begin(), doomed.end());
    const std::set<ItemKey> drawn = Drawn(*table, 60);
    for (ItemKey k : drawn) EXPECT_EQ(gone.count(k), 0u) << k;
    if (GetParam() == SelectorKind::kFifo) {  // always the oldest live item
      const auto oldest = std::find_if(keys.begin(), keys.end(),
                                       [&](ItemKey k) { return gone.count(k) == 0; });
      EXPECT_EQ(drawn, std::set<ItemKey>{*oldest});
    } else {
      EXPECT_EQ(drawn.size(), keys.size() - doomed.size()) << "every live item still drawn";
    }
  }
}

TEST_P(TableDeleteTest, ATrajectoryWithNothingLeftLeavesOnceEnded) {
  auto db = testing_util::OpenDB(dir_.path());
  auto table = testing_util::CreateTable(db.get(), Spec("d", GetParam()));
  const std::vector<ItemKey> keys = Write(*table, {20, 12});
  const std::vector<ItemKey> first(keys.begin(), keys.begin() + 20);
  ASSERT_OK(table->DeleteItems(first));
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_trajectories, 1);
  EXPECT_EQ(info.num_steps, 12);
  EXPECT_EQ(info.num_items, 12);
}

INSTANTIATE_TEST_SUITE_P(Selectors, TableDeleteTest,
                         ::testing::Values(SelectorKind::kUniform, SelectorKind::kPrioritized,
                                           SelectorKind::kFifo),
                         [](const auto& info) { return std::string(SelectorKindName(info.param)); });

// With max_times_sampled, deleted items leave the draws they still had: the
// table runs dry when the others are sampled away, never waiting for them.
TEST(TableDeleteLimitsTest, MaxTimesSampledCountsOnlyTheItemsLeft) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  auto table = testing_util::CreateTable(db.get(), Spec("m", SelectorKind::kUniform, 2));
  const std::vector<ItemKey> keys = Write(*table, {10});
  ASSERT_OK(table->DeleteItems(std::span<const ItemKey>(keys.data(), 4)));
  SampleOptions o;
  o.timeout = std::chrono::milliseconds(0);
  int64_t drawn = 0;
  for (int i = 0; i < 20; ++i) {
    auto batch = table->Sample(1, o);
    if (!batch.ok()) break;
    ++drawn;
    EXPECT_GE(ItemKeyStart(batch->keys[0]), 4);
  }
  EXPECT_EQ(drawn, 6 * 2);
}

TEST(TableDeleteLimitsTest, AVectorTableRefusesNamingWhy) {
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec = Spec("lanes", SelectorKind::kUniform);
  spec.lanes = 4;
  auto table = testing_util::CreateTable(db.get(), spec);
  ASSERT_NE(table, nullptr);
  const ItemKey k = MakeItemKey(1, 0);
  int64_t deleted = 7;
  const Status s = table->DeleteItems(std::span<const ItemKey>(&k, 1), &deleted);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "table 'lanes': DeleteItems: a vector table (lanes 4) has no separate "
                         "items to delete");
  EXPECT_EQ(deleted, 0);
}

}  // namespace
}  // namespace replaydb
