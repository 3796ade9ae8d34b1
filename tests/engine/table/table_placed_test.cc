// Steps placed straight into the hot tier (TableImpl::PlaceSteps, through
// TrajectoryWriterImpl::Place): what a served writer's large appends use
// (rdma/WIRE.md, "Appends straight into the hot tier"). The bytes a
// transport would fetch are written here by hand into the places given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/table/writers.h"
#include "replaydb/db.h"
#include "tests/test_util.h"
#include "wal/records.h"

namespace replaydb {
namespace {

using testing_util::RandomStep;
using testing_util::TempDir;
using ::testing::HasSubstr;

class TablePlacedTest : public ::testing::Test {
 protected:
  void SetUp() override { db_ = testing_util::OpenDB(dir_.path()); }

  TableSpec Spec(const std::string& name, TableLogging logging = TableLogging::kOff) {
    TableSpec spec;
    spec.name = name;
    spec.columns = {{"obs", DType::kU8, {1 + static_cast<int64_t>(rng_() % 300)}},
                    {"act", DType::kI32, {}}};
    spec.capacity_steps = 1024;
    spec.block_steps = 1 + static_cast<int64_t>(rng_() % 8);
    spec.logging = logging;
    return spec;
  }

  // A table of `spec` and a writer of it, as the engine's (Place is not on
  // the public interface).
  struct Opened {
    std::shared_ptr<Table> table;
    std::unique_ptr<TrajectoryWriter> owner;
    engine::TrajectoryWriterImpl* writer = nullptr;
  };
  void Open(const TableSpec& spec, Opened* out) {
    out->table = testing_util::CreateTable(db_.get(), spec);
    ASSERT_NE(out->table, nullptr);
    ASSERT_OK_AND_ASSIGN(out->owner, out->table->NewWriter());
    out->writer = dynamic_cast<engine::TrajectoryWriterImpl*>(out->owner.get());
    ASSERT_NE(out->writer, nullptr);
  }

  // One placed append of `n` random rows: placed, its bytes written into
  // the places, its record built as a client builds it (with its data
  // left out), and the rows as they should read back.
  struct Append {
    engine::PlacedSteps placed;
    std::vector<uint64_t> record;  // 8-byte words
    size_t record_bytes = 0;
    size_t data_offset = 0;
    std::vector<std::string> rows;
    std::span<std::byte> Record() {
      return {reinterpret_cast<std::byte*>(record.data()), record_bytes};
    }
  };
  Append Place(engine::TrajectoryWriterImpl* writer, const TableSpec& spec, int64_t n) {
    Append a;
    std::string bytes;
    for (int64_t i = 0; i < n; ++i) {
      const testing_util::StepData step = RandomStep(spec, rng_);
      std::string row;
      for (const auto& c : step.columns) row.append(reinterpret_cast<const char*>(c.data()), c.size());
      bytes += row;
      a.rows.push_back(row);
    }
    std::vector<std::span<std::byte>> pieces;
    writer->Place(n, &a.placed, &pieces);
    size_t at = 0;
    for (const auto& piece : pieces) {
      EXPECT_LE(at + piece.size(), bytes.size());
      if (at + piece.size() > bytes.size()) break;
      std::memcpy(piece.data(), bytes.data() + at, piece.size());
      at += piece.size();
    }
    if (a.placed.trajectory != nullptr) {
      EXPECT_EQ(at, bytes.size()) << "the places hold every row";
    }
    wal::RecordBuilder b;
    std::byte* data = b.AppendSteps(writer->table_id(), static_cast<uint32_t>(bytes.size() / n),
                                    std::vector<uint64_t>(n), std::vector<int64_t>(n), {});
    a.data_offset = static_cast<size_t>(data - b.payload().data());
    a.record_bytes = b.payload().size();
    a.record.assign((a.record_bytes + 7) / 8, 0);
    std::memcpy(a.record.data(), b.payload().data(), a.record_bytes);
    return a;
  }

  TempDir dir_;
  std::unique_ptr<DB> db_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
};

// Several placements in flight at once, chained one after another, across
// block boundaries: each row reads back where it was placed, once published
// in order.
TEST_F(TablePlacedTest, ChainedPlacementsPublishInOrderEveryRowWhereItWasPlaced) {
  const TableSpec spec = Spec("placed");
  Opened opened;
  ASSERT_NO_FATAL_FAILURE(Open(spec, &opened));
  auto& [table, w, writer] = opened;
  std::vector<std::string> expected;
  for (int round = 0; round < 3; ++round) {
    std::vector<Append> appends;
    for (int k = 0; k < 1 + static_cast<int>(rng_() % 4); ++k) {
      appends.push_back(Place(writer, spec, 1 + static_cast<int64_t>(rng_() % 10)));
      ASSERT_NE(appends.back().placed.trajectory, nullptr) << "round " << round << " append " << k;
    }
    EXPECT_EQ(table->Info().num_steps, static_cast<int64_t>(expected.size()))
        << "nothing is published before it is committed";
    for (Append& a : appends) {
      ASSERT_OK(writer->CommitPlaced(a.placed, a.Record(), a.data_offset));
      expected.insert(expected.end(), a.rows.begin(), a.rows.end());
    }
  }
  const uint64_t id = writer->trajectory_id();
  ASSERT_EQ(writer->num_steps(), static_cast<int64_t>(expected.size()));
  TrajectorySteps read;
  ASSERT_OK(table->ReadTrajectory(id, 0, static_cast<int64_t>(expected.size()), &read));
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string row;
    for (const Tensor& c : read.columns) {
      const size_t bytes = c.size_bytes() / expected.size();
      row.append(reinterpret_cast<const char*>(c.data()) + i * bytes, bytes);
    }
    EXPECT_TRUE(row == expected[i]) << "step " << i;
  }
  EXPECT_EQ(table->Info().num_items, static_cast<int64_t>(expected.size()));
}

// A placement given up gives its room back: one chained after it cannot be
// published (it names the step it expected), a record that does not match
// its placement is refused naming both, and the writer goes on appending
// where the trajectory really ends.
TEST_F(TablePlacedTest, AbandonedOrMismatchedPlacementsStoreNothingAndTheWriterGoesOn) {
  const TableSpec spec = Spec("abandoned");
  Opened opened;
  ASSERT_NO_FATAL_FAILURE(Open(spec, &opened));
  auto& [table, w, writer] = opened;
  Append first = Place(writer, spec, 2 + static_cast<int64_t>(rng_() % 6));
  Append second = Place(writer, spec, 1 + static_cast<int64_t>(rng_() % 6));
  ASSERT_NE(second.placed.trajectory, nullptr);
  writer->AbandonPlaced(first.placed);
  const Status out_of_order = writer->CommitPlaced(second.placed, second.Record(), second.data_offset);
  EXPECT_EQ(out_of_order.code(), Status::Code::kInternal) << out_of_order.ToString();
  EXPECT_THAT(out_of_order.message(),
              HasSubstr("placed steps from step " + std::to_string(first.rows.size())));
  EXPECT_EQ(table->Info().num_steps, 0);
  // A record whose data is not where its request said.
  Append third = Place(writer, spec, 3);
  const Status mismatch = writer->CommitPlaced(third.placed, third.Record(), third.data_offset + 16);
  EXPECT_EQ(mismatch.code(), Status::Code::kInvalidArgument) << mismatch.ToString();
  EXPECT_THAT(mismatch.message(), HasSubstr("its request said 3 rows at byte " +
                                            std::to_string(third.data_offset + 16)));
  EXPECT_EQ(table->Info().num_steps, 0);
  // The writer goes on from the trajectory's real end.
  Append fourth = Place(writer, spec, 4);
  ASSERT_OK(writer->CommitPlaced(fourth.placed, fourth.Record(), fourth.data_offset));
  ASSERT_OK(w->Append(RandomStep(spec, rng_).tensors));
  EXPECT_EQ(w->num_steps(), 5);
  EXPECT_EQ(table->Info().num_steps, 5);
  EXPECT_EQ(table->Info().num_items, 5);
}

// Nothing is placed where the rows must be logged as their record came, or
// where the rate limiter would make the append wait; the copying path
// takes those.
TEST_F(TablePlacedTest, NothingIsPlacedForALoggedTableOrWhereTheRateLimiterWouldWait) {
  {
    const TableSpec spec = Spec("logged", TableLogging::kOn);
    Opened opened;
    ASSERT_NO_FATAL_FAILURE(Open(spec, &opened));
    auto& [table, w, writer] = opened;
    engine::PlacedSteps placed;
    std::vector<std::span<std::byte>> pieces;
    writer->Place(3, &placed, &pieces);
    EXPECT_EQ(placed.trajectory, nullptr);
    EXPECT_TRUE(pieces.empty());
  }
  TableSpec spec = Spec("queue");
  spec.sequence_length = 1;
  spec.selector = SelectorKind::kFifo;
  spec.max_times_sampled = 1;
  spec.rate_limiter = RateLimiterSpec::Queue(4);
  Opened opened;
  ASSERT_NO_FATAL_FAILURE(Open(spec, &opened));
  auto& [table, w, writer] = opened;
  Append three = Place(writer, spec, 3);
  ASSERT_NE(three.placed.trajectory, nullptr);
  // One more item fits the queue of 4, two do not: all or none.
  engine::PlacedSteps two;
  std::vector<std::span<std::byte>> pieces;
  writer->Place(2, &two, &pieces);
  EXPECT_EQ(two.trajectory, nullptr);
  EXPECT_TRUE(pieces.empty());
  ASSERT_OK(writer->CommitPlaced(three.placed, three.Record(), three.data_offset));
  Append one = Place(writer, spec, 1);
  ASSERT_NE(one.placed.trajectory, nullptr);
  ASSERT_OK(writer->CommitPlaced(one.placed, one.Record(), one.data_offset));
  EXPECT_EQ(table->Info().num_items, 4);
}

}  // namespace
}  // namespace replaydb
