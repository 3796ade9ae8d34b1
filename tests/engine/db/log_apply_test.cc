// ApplyLogRecord (engine/db/log_apply.h), the path recovery and replicas
// apply logged changes through, on a table of its own: records built with
// wal::RecordBuilder as a writer's table would log them.
#include "engine/db/log_apply.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/table/table_impl.h"
#include "engine/table/vector_table.h"
#include "tests/test_util.h"
#include "wal/records.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;
using testing_util::RandomStep;
using testing_util::StepData;

constexpr uint32_t kTableId = 7;

class LogApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.name = "applied";
    spec_.columns = {{"obs", DType::kF32, {static_cast<int64_t>(1 + rng_() % 5)}},
                     {"act", DType::kI32, {}}};
    spec_.capacity_steps = 4096;
    spec_.block_steps = 1 + static_cast<int64_t>(rng_() % 16);
    spec_.sequence_length = 1 + static_cast<int64_t>(rng_() % 3);
    spec_.max_times_sampled = 2;
    ASSERT_OK(spec_.Validate());
    ASSERT_OK_AND_ASSIGN(table_, TableImpl::Create(spec_, nullptr));
    find_ = [this](uint32_t id) { return id == kTableId ? table_.get() : nullptr; };
  }

  // The payload of an AppendSteps record of steps [first, first + n) of
  // trajectory `id` (their data in steps_[id]), with priorities.
  std::vector<std::byte> AppendRecord(uint64_t id, int64_t first, int64_t n,
                                      uint32_t step_bytes = 0, uint64_t writer_key = 0) {
    std::vector<uint64_t> ids(static_cast<size_t>(n), id);
    std::vector<int64_t> steps;
    std::vector<double> priorities;
    for (int64_t i = 0; i < n; ++i) {
      steps.push_back(first + i);
      priorities.push_back(0.5 + static_cast<double>(rng_() % 100));
    }
    const uint32_t bytes = step_bytes != 0 ? step_bytes : static_cast<uint32_t>(spec_.step_bytes());
    std::byte* data = builder_.AppendSteps(kTableId, bytes, ids, steps, priorities, writer_key);
    for (int64_t i = 0; i < n; ++i) {
      const StepData& step = steps_[id][static_cast<size_t>(first + i)];
      for (const auto& column : step.columns) {
        std::memcpy(data, column.data(), column.size());
        data += column.size();
      }
    }
    return Payload();
  }
  std::vector<std::byte> Payload() const {
    const std::span<const std::byte> p = builder_.payload();
    return {p.begin(), p.end()};
  }
  Status Apply(wal::RecordType type, const std::vector<std::byte>& payload) {
    return ApplyLogRecord(type, payload, find_);
  }
  // Writes n random steps of trajectory `id` to steps_ (not to the table).
  void MakeSteps(uint64_t id, int64_t n) {
    for (int64_t i = 0; i < n; ++i) steps_[id].push_back(RandomStep(spec_, rng_));
  }
  // The table's items, looked up, equal steps_.
  void ExpectItemsAsWritten(uint64_t id) {
    const int64_t length = static_cast<int64_t>(steps_[id].size());
    const int64_t L = spec_.sequence_length;
    std::vector<ItemKey> keys;
    for (int64_t s = 0; s + L <= length; ++s) keys.push_back(MakeItemKey(id, s));
    if (keys.empty()) return;
    SampleBatch batch;
    ASSERT_OK(table_->Lookup(keys, &batch));
    for (size_t b = 0; b < keys.size(); ++b) {
      for (int64_t k = 0; k < L; ++k) {
        for (size_t c = 0; c < spec_.columns.size(); ++c) {
          const size_t cb = spec_.columns[c].step_bytes();
          const std::byte* got = batch.columns[c].data() + (b * L + k) * cb;
          const auto& want = steps_[id][b + static_cast<size_t>(k)].columns[c];
          ASSERT_EQ(std::memcmp(got, want.data(), cb), 0)
              << "trajectory " << id << " item " << b << " step " << k << " column " << c;
        }
      }
    }
  }

  std::mt19937_64 rng_{testing_util::TestSeed()};
  TableSpec spec_;
  std::shared_ptr<TableImpl> table_;
  TableById find_;
  wal::RecordBuilder builder_;
  std::map<uint64_t, std::vector<StepData>> steps_;
};

TEST_F(LogApplyTest, AppendedStepsReadBackAndApplyingThemAgainChangesNothing) {
  const int64_t n = 3 + static_cast<int64_t>(rng_() % 40);
  MakeSteps(1, n);
  // The steps in records of random sizes, as writers log them.
  std::vector<std::vector<std::byte>> records;
  for (int64_t first = 0; first < n;) {
    const int64_t count = std::min<int64_t>(n - first, 1 + static_cast<int64_t>(rng_() % 7));
    records.push_back(AppendRecord(1, first, count));
    first += count;
  }
  for (const auto& r : records) ASSERT_OK(Apply(wal::RecordType::kAppendSteps, r));
  TableInfo info = table_->Info();
  EXPECT_EQ(info.steps_inserted, n);
  EXPECT_EQ(info.num_trajectories, 1);
  EXPECT_EQ(info.num_open_trajectories, 1);
  ASSERT_NO_FATAL_FAILURE(ExpectItemsAsWritten(1));

  // Again, in part or whole: the steps are there already.
  for (const auto& r : records) ASSERT_OK(Apply(wal::RecordType::kAppendSteps, r));
  info = table_->Info();
  EXPECT_EQ(info.steps_inserted, n);
  EXPECT_EQ(info.num_items, std::max<int64_t>(0, n - spec_.sequence_length + 1));
  ASSERT_NO_FATAL_FAILURE(ExpectItemsAsWritten(1));

  // The end, twice.
  builder_.EndTrajectory({kTableId, 1, static_cast<uint8_t>(EndReason::kTerminal)});
  const std::vector<std::byte> end = Payload();
  ASSERT_OK(Apply(wal::RecordType::kEndTrajectory, end));
  ASSERT_OK(Apply(wal::RecordType::kEndTrajectory, end));
  std::vector<TrajectoryInfo> listed = table_->ListTrajectories({});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].ended);
  EXPECT_EQ(listed[0].end_reason, EndReason::kTerminal);
  EXPECT_EQ(listed[0].length, n);
  // No step follows an end.
  MakeSteps(1, 1);
  const Status after_end = Apply(wal::RecordType::kAppendSteps, AppendRecord(1, n, 1));
  EXPECT_EQ(after_end.code(), Status::Code::kCorruption);
  EXPECT_EQ(after_end.message(), "table 'applied': logged step " + std::to_string(n) +
                                     " of trajectory 1 does not follow its " + std::to_string(n) +
                                     " steps (ended)");
}

// A promoted replica's open trajectories (KeepOrphans): a resuming
// writer finds its own by the key its records carried, or by id where the
// key matches (ids are given again by each primary); each is handed over
// once; what no writer took ends truncated (EndOrphans), and is then found
// ended.
TEST_F(LogApplyTest, OrphansAreFoundByTheirWritersKeyHandedOverOnceAndEndedIfNotTaken) {
  const uint64_t key1 = rng_() | 1, key2 = (rng_() | 1) ^ 2, key3 = (rng_() | 1) ^ 4;
  const int64_t n1 = 1 + static_cast<int64_t>(rng_() % 30);
  const int64_t n2 = 1 + static_cast<int64_t>(rng_() % 30);
  MakeSteps(1, n1);
  MakeSteps(2, n2);
  MakeSteps(3, 2);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(1, 0, n1, 0, key1)));
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(2, 0, n2, 0, key2)));
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(3, 0, 2, 0, key3)));
  builder_.EndTrajectory({kTableId, 3, static_cast<uint8_t>(EndReason::kTerminal)});
  ASSERT_OK(Apply(wal::RecordType::kEndTrajectory, Payload()));
  EXPECT_EQ(table_->KeepOrphans(), 2u);
  using State = TableImpl::Adopted::State;
  ASSERT_OK_AND_ASSIGN(TableImpl::Adopted one, table_->Adopt(key1, 0));
  EXPECT_EQ(one.state, State::kOpen);
  EXPECT_EQ(one.trajectory_id, 1u);
  EXPECT_EQ(one.num_steps, n1);
  ASSERT_NE(one.trajectory, nullptr);
  // Handed over once: no longer an orphan, by key or by id.
  for (const uint64_t id : {uint64_t{0}, uint64_t{1}}) {
    const Status taken = table_->Adopt(key1, id).status();
    EXPECT_EQ(taken.code(), Status::Code::kFailedPrecondition);
    EXPECT_EQ(taken.message(),
              "table 'applied': trajectory 1 is open and written by another writer");
  }
  // Another writer's key, an id without the key, an unknown id: not here.
  for (const auto& [key, id] : std::vector<std::pair<uint64_t, uint64_t>>{
           {key1 ^ key2 ^ key3 ^ 8, 0}, {key1, 2}, {key2, 99}, {0, 2}}) {
    ASSERT_OK_AND_ASSIGN(TableImpl::Adopted none, table_->Adopt(key, id));
    EXPECT_EQ(none.state, State::kNone) << key << " " << id;
  }
  for (const uint64_t id : {uint64_t{0}, uint64_t{3}}) {
    ASSERT_OK_AND_ASSIGN(TableImpl::Adopted ended, table_->Adopt(key3, id));
    EXPECT_EQ(ended.state, State::kEnded);
    EXPECT_EQ(ended.trajectory_id, 3u);
    EXPECT_EQ(ended.num_steps, 2);
    EXPECT_EQ(ended.end_reason, EndReason::kTerminal);
  }
  // What no writer took ends; what one took stays open.
  ASSERT_OK(table_->EndOrphans());
  std::vector<TrajectoryInfo> listed = table_->ListTrajectories({});
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_FALSE(listed[0].ended);
  EXPECT_TRUE(listed[1].ended);
  EXPECT_EQ(listed[1].end_reason, EndReason::kTruncated);
  ASSERT_OK_AND_ASSIGN(TableImpl::Adopted gone, table_->Adopt(key2, 0));
  EXPECT_EQ(gone.state, State::kEnded);
  EXPECT_EQ(gone.num_steps, n2);
  EXPECT_EQ(gone.end_reason, EndReason::kTruncated);
}

// A vector table's segments, applied with their remote writer's keys (one
// per record) and kept open at a promotion: a writer opened again resumes
// its segment by key (LaneWriterImpl::Resume), and its next step goes on in
// it; a segment adopted full (its last step's record applied, its end's
// not) is ended at once and reported ended; a key applied to no segment
// finds none; a vector table's writer resumes one segment only.
TEST_F(LogApplyTest, AVectorTablesWriterResumesItsSegmentByKeyAndEndsOneAdoptedFull) {
  spec_.sequence_length = 1;
  spec_.max_times_sampled = 0;
  spec_.lanes = 2 + static_cast<int64_t>(rng_() % 3);
  spec_.block_steps = 2 + static_cast<int64_t>(rng_() % 6);
  ASSERT_OK(spec_.Validate());
  ASSERT_OK_AND_ASSIGN(table_, TableImpl::Create(spec_, nullptr));
  const uint32_t step_bytes = static_cast<uint32_t>(table_->layout().step_bytes);
  const uint64_t open_key = rng_() | 1, full_key = (rng_() | 1) ^ 2;
  // Step `step` of segment `id`, random bytes, carrying `key`, of the table
  // of id `table` (the log's, or the table's own for its writer).
  const auto step_record = [&](uint64_t id, int64_t step, uint64_t key, uint32_t table = kTableId) {
    std::byte* data =
        builder_.AppendSteps(table, step_bytes, std::vector<uint64_t>{id},
                             std::vector<int64_t>{step}, {}, 0, std::vector<uint64_t>{key});
    for (uint32_t b = 0; b < step_bytes; ++b) data[b] = static_cast<std::byte>(rng_());
    return Payload();
  };
  const int64_t open_steps = 1 + static_cast<int64_t>(rng_() % (spec_.block_steps - 1));
  for (int64_t s = 0; s < open_steps; ++s) {
    ASSERT_OK(Apply(wal::RecordType::kAppendSteps, step_record(1, s, open_key)));
  }
  for (int64_t s = 0; s < spec_.block_steps; ++s) {
    ASSERT_OK(Apply(wal::RecordType::kAppendSteps, step_record(2, s, full_key)));
  }
  EXPECT_EQ(table_->KeepOrphans(), 2u);
  using State = TableImpl::Adopted::State;
  const auto lane_writer = [&] {
    Result<std::unique_ptr<VectorWriter>> w =
        table_->NewVectorWriter(static_cast<size_t>(spec_.lanes), {});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? std::move(w).value() : nullptr;
  };
  std::unique_ptr<VectorWriter> full = lane_writer();
  auto* full_lanes = dynamic_cast<LaneWriterImpl*>(full.get());
  ASSERT_NE(full_lanes, nullptr);
  ASSERT_OK_AND_ASSIGN(TableImpl::Adopted ended, full_lanes->Resume(0, full_key, 0));
  EXPECT_EQ(ended.state, State::kEnded);
  EXPECT_EQ(ended.trajectory_id, 2u);
  EXPECT_EQ(ended.num_steps, spec_.block_steps);
  EXPECT_EQ(ended.end_reason, EndReason::kTruncated);
  EXPECT_EQ(full_lanes->open_steps(0), 0);
  std::unique_ptr<VectorWriter> resumed = lane_writer();
  auto* lanes = dynamic_cast<LaneWriterImpl*>(resumed.get());
  ASSERT_NE(lanes, nullptr);
  const Status second = lanes->Resume(1, open_key, 0).status();
  EXPECT_EQ(second.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(second.message(),
            "table 'applied': a vector table's writer resumes one segment, not 2");
  ASSERT_OK_AND_ASSIGN(TableImpl::Adopted none, lanes->Resume(0, open_key ^ full_key ^ 4, 0));
  EXPECT_EQ(none.state, State::kNone);
  ASSERT_OK_AND_ASSIGN(TableImpl::Adopted open, lanes->Resume(0, open_key, 1));
  EXPECT_EQ(open.state, State::kOpen);
  EXPECT_EQ(open.num_steps, open_steps);
  for (size_t e = 0; e < static_cast<size_t>(spec_.lanes); ++e) {
    EXPECT_EQ(lanes->open_steps(e), open_steps);
    EXPECT_EQ(lanes->trajectory_id(e), 1u);
  }
  // Its next step (a remote writer's record, of its key) goes on in it.
  std::vector<std::byte> next = step_record(0, 0, open_key, table_->id());
  int64_t appended = 0;
  ASSERT_OK(lanes->AppendRecord(next, 0, &appended));
  EXPECT_EQ(appended, spec_.lanes);
  // (That step filled it: the writer ended it.)
  const bool filled = open_steps + 1 == spec_.block_steps;
  EXPECT_EQ(lanes->open_steps(0), filled ? 0 : open_steps + 1);
  std::vector<TrajectoryInfo> listed = table_->ListTrajectories({});
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].length, open_steps + 1);
  EXPECT_EQ(listed[0].ended, filled);
  EXPECT_TRUE(listed[1].ended);
  EXPECT_EQ(listed[1].end_reason, EndReason::kTruncated);
}

TEST_F(LogApplyTest, PrioritiesRemovedItemsAndRemovedTrajectories) {
  spec_.sequence_length = 1;
  ASSERT_OK_AND_ASSIGN(table_, TableImpl::Create(spec_, nullptr));
  const int64_t n = 2 + static_cast<int64_t>(rng_() % 20);
  MakeSteps(3, n);
  MakeSteps(4, n);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(3, 0, n)));
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(4, 0, n)));

  // New priorities for every item of trajectory 3.
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
  for (int64_t s = 0; s < n; ++s) {
    keys.push_back(MakeItemKey(3, s));
    priorities.push_back(static_cast<double>(1 + rng_() % 1000) / 8);
  }
  builder_.UpdatePriorities(kTableId, keys, priorities);
  ASSERT_OK(Apply(wal::RecordType::kUpdatePriorities, Payload()));
  SampleBatch batch;
  ASSERT_OK(table_->Lookup(keys, &batch));
  EXPECT_EQ(batch.priorities, priorities);

  // Items sampled away (max_times_sampled), twice.
  const std::vector<uint64_t> removed = {MakeItemKey(3, 0), MakeItemKey(3, n - 1)};
  builder_.RemoveItems(kTableId, removed);
  const std::vector<std::byte> remove_items = Payload();
  ASSERT_OK(Apply(wal::RecordType::kRemoveItems, remove_items));
  ASSERT_OK(Apply(wal::RecordType::kRemoveItems, remove_items));
  for (ItemKey key : removed) {
    EXPECT_EQ(table_->Lookup(std::span<const ItemKey>(&key, 1), &batch).code(),
              Status::Code::kNotFound);
  }
  EXPECT_EQ(table_->Info().num_items, 2 * n - 2);

  // Trajectory 4 leaves, twice.
  builder_.RemoveTrajectory({kTableId, 4, /*evicted=*/true});
  const std::vector<std::byte> remove_trajectory = Payload();
  ASSERT_OK(Apply(wal::RecordType::kRemoveTrajectory, remove_trajectory));
  ASSERT_OK(Apply(wal::RecordType::kRemoveTrajectory, remove_trajectory));
  const std::vector<TrajectoryInfo> listed = table_->ListTrajectories({});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, 3u);
  EXPECT_EQ(table_->Info().num_items, n - 2);
}

// A clear takes the trajectories whose ids are below its mark, and keeps
// those started after it (a checkpoint taken after the clear may hold them
// when the log is replayed from before it); applying it again changes
// nothing.
TEST_F(LogApplyTest, AClearTakesTheTrajectoriesBeforeItsMarkAndKeepsTheRest) {
  const uint64_t trajectories = 2 + rng_() % 6;
  for (uint64_t id = 1; id <= trajectories; ++id) {
    MakeSteps(id, spec_.sequence_length + static_cast<int64_t>(rng_() % 9));
    ASSERT_OK(Apply(wal::RecordType::kAppendSteps,
                    AppendRecord(id, 0, static_cast<int64_t>(steps_[id].size()))));
  }
  const uint64_t below = 2 + rng_() % (trajectories - 1);  // 2..trajectories
  builder_.ClearTable({kTableId, below});
  const std::vector<std::byte> clear = Payload();
  ASSERT_OK(Apply(wal::RecordType::kClearTable, clear));
  ASSERT_OK(Apply(wal::RecordType::kClearTable, clear));
  std::vector<uint64_t> kept;
  int64_t steps = 0;
  for (const TrajectoryInfo& t : table_->ListTrajectories({})) kept.push_back(t.id);
  std::vector<uint64_t> want;
  for (uint64_t id = below; id <= trajectories; ++id) {
    want.push_back(id);
    steps += static_cast<int64_t>(steps_[id].size());
  }
  EXPECT_EQ(kept, want) << "below " << below;
  const TableInfo info = table_->Info();
  EXPECT_EQ(info.num_steps, steps);
  EXPECT_EQ(info.rate_limiter.inserts, 0) << "the clear restarted the counters";
  for (uint64_t id = below; id <= trajectories; ++id) ExpectItemsAsWritten(id);
}

// An ItemClock record numbers the items made after it from its time on
// (their insertion orders, as the table that logged it gave them); one
// older than the table's clock, or applied again, changes nothing.
TEST_F(LogApplyTest, AnItemClockNumbersTheItemsMadeAfterIt) {
  const int64_t L = spec_.sequence_length;
  const auto items_of = [&](uint64_t id) {
    std::vector<ItemKey> keys;
    for (int64_t s = 0; s + L <= static_cast<int64_t>(steps_[id].size()); ++s) {
      keys.push_back(MakeItemKey(id, s));
    }
    SampleBatch batch;
    EXPECT_OK(table_->Lookup(keys, &batch));
    return batch.insertion_order;
  };
  MakeSteps(1, L + 1);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(1, 0, L + 1)));
  const std::vector<uint64_t> before = items_of(1);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[1], before[0] + 1);
  EXPECT_LT(before[1], 1000u) << "counted from 1 without a clock";

  const uint64_t time_ns = (uint64_t{1} << 60) + rng_() % 1000000;
  builder_.ItemClock({kTableId, time_ns});
  const std::vector<std::byte> clock = Payload();
  ASSERT_OK(Apply(wal::RecordType::kItemClock, clock));
  ASSERT_OK(Apply(wal::RecordType::kItemClock, clock));
  builder_.ItemClock({kTableId, time_ns / 2});
  ASSERT_OK(Apply(wal::RecordType::kItemClock, Payload()));
  MakeSteps(2, L + 2);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(2, 0, L + 2)));
  EXPECT_EQ(items_of(2), (std::vector<uint64_t>{time_ns, time_ns + 1, time_ns + 2}));
  EXPECT_EQ(items_of(1), before);
  // Another table's clock does not move this one's.
  builder_.ItemClock({kTableId + 1, time_ns + 1000});
  ASSERT_OK(Apply(wal::RecordType::kItemClock, Payload()));
  MakeSteps(3, L);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(3, 0, L)));
  EXPECT_EQ(items_of(3), (std::vector<uint64_t>{time_ns + 3}));
}

TEST_F(LogApplyTest, RecordsOfOtherTablesAndOfTheCatalogChangeNothing) {
  MakeSteps(1, 5);
  std::vector<std::byte> other = AppendRecord(1, 0, 5);
  // The same record for a table that is not open.
  const TableById none = [](uint32_t) -> TableImpl* { return nullptr; };
  ASSERT_OK(ApplyLogRecord(wal::RecordType::kAppendSteps, other, none));
  builder_.CreateTable({kTableId, "spec bytes the catalog already has"});
  ASSERT_OK(Apply(wal::RecordType::kCreateTable, Payload()));
  builder_.DropTable({kTableId});
  ASSERT_OK(Apply(wal::RecordType::kDropTable, Payload()));
  EXPECT_EQ(table_->Info().steps_inserted, 0);
  EXPECT_EQ(table_->Info().num_trajectories, 0);
}

TEST_F(LogApplyTest, RecordsThatContradictTheTableAreCorruptionNamingIt) {
  MakeSteps(1, 8);
  ASSERT_OK(Apply(wal::RecordType::kAppendSteps, AppendRecord(1, 0, 3)));
  // A gap: step 5 after 3 steps.
  Status s = Apply(wal::RecordType::kAppendSteps, AppendRecord(1, 5, 1));
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.message(),
            "table 'applied': logged step 5 of trajectory 1 does not follow its 3 steps");
  // Steps of another size than the schema's.
  s = Apply(wal::RecordType::kAppendSteps,
            AppendRecord(1, 3, 1, static_cast<uint32_t>(spec_.step_bytes()) + 4));
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.message(), "table 'applied': logged steps have " +
                             std::to_string(spec_.step_bytes() + 4) + " bytes; the schema has " +
                             std::to_string(spec_.step_bytes()));
  // An end reason no build knows.
  builder_.EndTrajectory({kTableId, 1, 7});
  s = Apply(wal::RecordType::kEndTrajectory, Payload());
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.message(), "table 'applied': logged end of trajectory 1 has unknown reason 7");
  // A priority no call can set.
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    const std::vector<uint64_t> keys = {MakeItemKey(1, 0)};
    const std::vector<double> priorities = {bad};
    builder_.UpdatePriorities(kTableId, keys, priorities);
    s = Apply(wal::RecordType::kUpdatePriorities, Payload());
    EXPECT_EQ(s.code(), Status::Code::kCorruption);
    EXPECT_THAT(s.message(), HasSubstr("table 'applied': logged priority "));
    EXPECT_THAT(s.message(), HasSubstr(" is invalid"));
  }
  // Bytes that are no record of the type, and a type no build knows.
  std::vector<std::byte> garbage(1 + rng_() % 64);
  for (auto& b : garbage) b = static_cast<std::byte>(rng_());
  for (wal::RecordType type :
       {wal::RecordType::kAppendSteps, wal::RecordType::kEndTrajectory,
        wal::RecordType::kUpdatePriorities, wal::RecordType::kRemoveItems,
        wal::RecordType::kRemoveTrajectory, wal::RecordType::kClearTable,
        wal::RecordType::kCreateTable, wal::RecordType::kDropTable}) {
    EXPECT_FALSE(Apply(type, garbage).ok()) << static_cast<int>(type);
  }
  s = Apply(static_cast<wal::RecordType>(99), garbage);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_EQ(s.message(), "record type 99 is not known to this build");
  // None of that changed the table.
  EXPECT_EQ(table_->Info().steps_inserted, 3);
  EXPECT_EQ(table_->Info().num_open_trajectories, 1);
}

}  // namespace
}  // namespace replaydb::engine
