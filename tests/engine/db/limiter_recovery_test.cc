// The rate limiter after a crash: its counters are checkpointed, inserts and
// removals are replayed from the log, samples are not. These tests crash a
// database (dropped without the checkpoint on close, as a killed process
// leaves it) after random histories of inserts, samples and evictions under
// every kind of limiter, reopen it, and check what docs/durability.md
// promises of the counters (RateLimiter::SettleAfterRecovery): they agree
// with the items recovered, they never leave writers owing the learner more
// than the limiter's range, and a table whose every sample removes its item
// (Queue, Stack) comes back exactly as it was.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using namespace std::chrono_literals;
using testing_util::ManualCheckpoints;
using testing_util::RandomStep;
using testing_util::TempDir;
using testing_util::TestSeed;

std::vector<ColumnSpec> Columns() { return {{"x", DType::kI32, {2}}}; }

std::unique_ptr<DB> Open(const DBOptions& o, const std::string& path) {
  auto db = DB::Open(o, path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

double Error(const RateLimiterInfo& r) {
  return static_cast<double>(r.inserts) * r.spec.samples_per_insert -
         static_cast<double>(r.samples);
}

std::string Counters(const RateLimiterInfo& r) {
  return "inserts=" + std::to_string(r.inserts) + " samples=" + std::to_string(r.samples) +
         " deletes=" + std::to_string(r.deletes);
}

// One kind of limited table.
struct Kind {
  std::string name;
  TableSpec spec;
  // Every sample removes the item it draws (max_times_sampled 1): the log's
  // removals then account for every sample, and recovery is exact.
  bool exact = false;
};

std::vector<Kind> Kinds() {
  std::vector<Kind> kinds;
  const auto base = [](std::string name, RateLimiterSpec limiter) {
    TableSpec spec;
    spec.name = std::move(name);
    spec.columns = Columns();
    spec.rate_limiter = limiter;
    // Small, so that histories evict (deletes the learner never sampled).
    spec.capacity_steps = 48;
    spec.block_steps = 4;
    return spec;
  };
  kinds.push_back({"min_size", base("min_size", RateLimiterSpec::MinSize(3)), false});
  kinds.push_back(
      {"ratio2", base("ratio2", RateLimiterSpec::SampleToInsertRatio(2.0, 5, 6.0)), false});
  kinds.push_back(
      {"ratio_half", base("ratio_half", RateLimiterSpec::SampleToInsertRatio(0.5, 4, 3.0)), false});
  {
    TableSpec spec = base("ratio_twice", RateLimiterSpec::SampleToInsertRatio(1.0, 2, 5.0));
    spec.max_times_sampled = 2;
    kinds.push_back({"ratio_twice", spec, false});
  }
  {
    TableSpec spec = base("prioritized", RateLimiterSpec::SampleToInsertRatio(1.5, 3, 4.0));
    spec.selector = SelectorKind::kPrioritized;
    kinds.push_back({"prioritized", spec, false});
  }
  {
    TableSpec spec = TableSpec::Queue("queue", Columns(), 10);
    spec.capacity_steps = 48;
    spec.block_steps = 4;
    kinds.push_back({"queue", spec, true});
  }
  {
    TableSpec spec = TableSpec::Stack("stack", Columns(), 7);
    spec.capacity_steps = 48;
    spec.block_steps = 4;
    kinds.push_back({"stack", spec, true});
  }
  return kinds;
}

// Single-threaded operations that never wait (timeouts 0): an insert the
// limiter refuses now returns DeadlineExceeded, and so does a sample.
class Driver {
 public:
  Driver(Table& table, std::mt19937_64& rng) : table_(table), rng_(rng) {}

  // One step (an item) into the current trajectory, ending it at random.
  // True if the limiter admitted it.
  bool Insert() {
    if (writer_ == nullptr) {
      WriterOptions wo;
      wo.timeout = 0ms;
      auto w = table_.NewWriter(wo);
      EXPECT_TRUE(w.ok()) << w.status().ToString();
      if (!w.ok()) return false;
      writer_ = std::move(w).value();
    }
    const auto step = RandomStep(table_.spec(), rng_);
    const Status s = writer_->Append(step.tensors);
    if (s.code() == Status::Code::kDeadlineExceeded) return false;
    EXPECT_OK(s);
    if (rng_() % 4 == 0) End();
    return s.ok();
  }
  void End() {
    if (writer_ == nullptr) return;
    EXPECT_OK(writer_->End(EndReason::kTerminal));
    writer_.reset();
  }
  // True if the limiter admitted a sample of `n`.
  bool Sample(int64_t n) {
    SampleOptions so;
    so.timeout = 0ms;
    so.gather = false;
    auto b = table_.Sample(n, so);
    if (b.status().code() == Status::Code::kDeadlineExceeded) return false;
    EXPECT_OK(b.status());
    return b.ok();
  }
  // A random history of `ops` inserts and samples.
  void Run(int ops) {
    for (int i = 0; i < ops; ++i) {
      if (rng_() % 2 == 0) {
        Insert();
      } else {
        Sample(1 + static_cast<int64_t>(rng_() % 2));
      }
    }
  }

 private:
  Table& table_;
  std::mt19937_64& rng_;
  std::unique_ptr<TrajectoryWriter> writer_;
};

// From the table's state, a single thread that inserts when the limiter lets
// it and samples otherwise never finds both refused.
void ExpectLive(Table& table, std::mt19937_64& rng, const std::string& what) {
  Driver d(table, rng);
  for (int i = 0; i < 200; ++i) {
    const bool moved = d.Insert() || d.Sample(1);
    ASSERT_TRUE(moved) << what << ": neither an insert nor a sample is admitted after "
                       << i << " moves: " << Counters(table.Info().rate_limiter);
  }
  d.End();
}

TEST(LimiterRecoveryTest, QueueThatPassedItsSizeComesBackAdmittingItsSize) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    auto table = testing_util::CreateTable(db.get(), TableSpec::Queue("q", Columns(), 10));
    Driver d(*table, rng);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(d.Insert());
    d.End();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(d.Sample(1));
  }  // no checkpoint on close: a crash
  auto db = Open(ManualCheckpoints(), dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("q"));
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, 0);
  EXPECT_EQ(info.rate_limiter.inserts - info.rate_limiter.deletes, 0);
  EXPECT_EQ(Error(info.rate_limiter), 0.0) << Counters(info.rate_limiter);
  Driver d(*table, rng);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(d.Insert()) << "insert " << i << " refused after recovery: "
                            << Counters(table->Info().rate_limiter);
  }
  EXPECT_FALSE(d.Insert()) << "the queue admits more than its size";
  d.End();
}

TEST(LimiterRecoveryTest, ResetAfterReplayRestartsTheCountersFromTheItems) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  {
    auto db = Open(ManualCheckpoints(), dir.path());
    auto table = testing_util::CreateTable(db.get(), TableSpec::Queue("q", Columns(), 10));
    Driver d(*table, rng);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(d.Insert());
    d.End();
    for (int i = 0; i < 7; ++i) ASSERT_TRUE(d.Sample(1));
  }
  DBOptions o = ManualCheckpoints();
  o.checkpoint.reset_rate_limiters_on_restore = true;
  auto db = Open(o, dir.path());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("q"));
  const TableInfo info = table->Info();
  EXPECT_EQ(info.num_items, 3);
  EXPECT_EQ(info.rate_limiter.inserts, 3) << Counters(info.rate_limiter);
  EXPECT_EQ(info.rate_limiter.samples, 0);
  EXPECT_EQ(info.rate_limiter.deletes, 0);
}

// A vector table's step is `lanes` items to the limiter: recovery counts
// them so, kept or reset.
TEST(LimiterRecoveryTest, VectorTableCountsEveryEnvironmentsItem) {
  constexpr int64_t kLanes = 4;
  TableSpec spec;
  spec.name = "vt";
  spec.columns = Columns();
  spec.lanes = kLanes;
  spec.block_steps = 4;
  spec.capacity_steps = 64;
  spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(0.5, 4, 10.0);
  std::mt19937_64 rng(TestSeed());
  for (const bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "kept");
    TempDir dir;
    RateLimiterInfo before;
    {
      auto db = Open(ManualCheckpoints(), dir.path());
      auto table = testing_util::CreateTable(db.get(), spec);
      ASSERT_NE(table, nullptr);
      ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(kLanes));
      std::vector<int32_t> rows(kLanes * 2);
      for (int i = 0; i < 6; ++i) {
        for (auto& v : rows) v = static_cast<int32_t>(rng());
        const ConstTensor t{DType::kI32, Shape{kLanes, 2}, rows.data(), rows.size() * 4};
        ASSERT_OK(writer->Append({&t, 1}));
      }
      ASSERT_OK(db->Checkpoint());  // restored from the checkpoint, not the log
      ASSERT_OK(table->Sample(3, {}).status());
      before = table->Info().rate_limiter;
    }
    DBOptions o = ManualCheckpoints();
    o.checkpoint.reset_rate_limiters_on_restore = reset;
    auto db = Open(o, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("vt"));
    const TableInfo info = table->Info();
    ASSERT_EQ(info.num_items, 6 * kLanes);
    EXPECT_EQ(info.rate_limiter.inserts - info.rate_limiter.deletes, info.num_items);
    EXPECT_EQ(info.rate_limiter.inserts, reset ? info.num_items : before.inserts);
  }
}

// Every kind of limiter, random histories, a crash with or without a
// checkpoint in the middle, reopened with the counters kept or reset.
TEST(LimiterRecoveryTest, CountersAgreeWithTheRecoveredItemsForEveryLimiter) {
  const uint64_t seed = TestSeed();
  std::mt19937_64 rng(seed);
  for (const Kind& kind : Kinds()) {
    for (int round = 0; round < 6; ++round) {
      const bool checkpoint = round % 2 == 1;
      const bool reset = round >= 4;
      const std::string what = kind.name + " round " + std::to_string(round) +
                               (checkpoint ? " (checkpoint midway)" : "") +
                               (reset ? " (reset)" : "");
      SCOPED_TRACE(what);
      TempDir dir;
      RateLimiterInfo at_checkpoint;  // zeros: the table's first state
      at_checkpoint.spec = kind.spec.rate_limiter;
      RateLimiterInfo before;
      {
        auto db = Open(ManualCheckpoints(), dir.path());
        auto table = testing_util::CreateTable(db.get(), kind.spec);
        ASSERT_NE(table, nullptr);
        Driver d(*table, rng);
        d.Run(40 + static_cast<int>(rng() % 80));
        if (checkpoint) {
          ASSERT_OK(db->Checkpoint());
          at_checkpoint = table->Info().rate_limiter;
          d.Run(40 + static_cast<int>(rng() % 80));
        }
        d.End();
        before = table->Info().rate_limiter;
      }
      DBOptions o = ManualCheckpoints();
      o.checkpoint.reset_rate_limiters_on_restore = reset;
      auto db = Open(o, dir.path());
      ASSERT_OK_AND_ASSIGN(auto table, db->GetTable(kind.spec.name));
      const TableInfo info = table->Info();
      const RateLimiterInfo& after = info.rate_limiter;
      const RateLimiterSpec& spec = kind.spec.rate_limiter;
      const std::string counters =
          "before " + Counters(before) + ", after " + Counters(after) + ", items " +
          std::to_string(info.num_items);
      // The size the limiter sees is the items the table holds.
      EXPECT_EQ(after.inserts - after.deletes, info.num_items) << counters;
      const double bound = std::max(spec.max_diff, Error(at_checkpoint));
      if (reset) {
        EXPECT_EQ(after.inserts, info.num_items) << counters;
        EXPECT_EQ(after.deletes, 0) << counters;
        const double owed =
            static_cast<double>(info.num_items) * spec.samples_per_insert - spec.max_diff;
        EXPECT_EQ(after.samples, std::max<int64_t>(0, static_cast<int64_t>(std::ceil(owed))))
            << counters;
      } else {
        // Never more owed to the learner than the range allows (or than the
        // checkpoint already owed), never less than was owed at the crash.
        EXPECT_LE(Error(after), bound) << counters;
        EXPECT_GE(Error(after), std::min(Error(before), bound)) << counters;
        EXPECT_GE(after.samples, at_checkpoint.samples) << counters;
        if (kind.exact) {
          EXPECT_EQ(after.inserts, before.inserts) << counters;
          EXPECT_EQ(after.samples, before.samples) << counters;
          EXPECT_EQ(after.deletes, before.deletes) << counters;
        }
      }
      ExpectLive(*table, rng, what);
    }
  }
}

// A clean close checkpoints the counters; reopening changes none of them,
// whatever the history (even one that left the error above max_diff).
TEST(LimiterRecoveryTest, CleanCloseKeepsTheCountersExactly) {
  std::mt19937_64 rng(TestSeed());
  for (const Kind& kind : Kinds()) {
    SCOPED_TRACE(kind.name);
    TempDir dir;
    RateLimiterInfo before;
    {
      auto db = Open({}, dir.path());
      auto table = testing_util::CreateTable(db.get(), kind.spec);
      ASSERT_NE(table, nullptr);
      Driver d(*table, rng);
      d.Run(100);
      d.End();
      before = table->Info().rate_limiter;
    }
    auto db = Open({}, dir.path());
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable(kind.spec.name));
    const RateLimiterInfo after = table->Info().rate_limiter;
    EXPECT_EQ(after.inserts, before.inserts);
    EXPECT_EQ(after.samples, before.samples);
    EXPECT_EQ(after.deletes, before.deletes);
  }
}

}  // namespace
}  // namespace replaydb
