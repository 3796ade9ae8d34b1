// Writers' acknowledgment modes (AckMode, docs/replication.md) on a local
// database whose log a replica reads (a thread here reading it as a
// replica's follower does, through DBImpl::ReadLog): replicated(k) appends
// return only once a replica read past them, are refused with nothing
// stored where no replica is in sync, and fail, stored, when the replica
// goes; `none` never waits; bad modes are named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "engine/db/db_impl.h"
#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing_util::TempDir;
using namespace std::chrono_literals;

TableSpec Spec(Acks acks) {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kF32, Shape{6}}};
  spec.capacity_steps = 4096;
  spec.acks = acks;
  return spec;
}

// A replica's reads of `db`'s log, on a thread, until stopped: where it has
// read to is `at` (every record before it "applied").
class FakeReplica {
 public:
  explicit FakeReplica(engine::DBImpl* db) : db_(db) {
    thread_ = std::thread([this] {
      wal::LogPosition from;
      while (!stop_.load()) {
        Result<wal::LogChunk> chunk =
            db_->ReadLog("fake", from, 0, 1 << 20, std::chrono::steady_clock::now() + 20ms);
        if (!chunk.ok()) {
          error_ = chunk.status().ToString();
          return;
        }
        from = chunk->next;
        at_segment_.store(from.segment);
        at_offset_.store(from.offset);
      }
    });
  }
  ~FakeReplica() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  wal::LogPosition at() const { return {at_segment_.load(), at_offset_.load()}; }
  const std::string& error() const { return error_; }

 private:
  engine::DBImpl* const db_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> at_segment_{0}, at_offset_{0};
  std::string error_;
  std::thread thread_;
};

// A fresh local database and the engine's view of it.
class AcksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = testing_util::OpenDB(dir_.path());
    ASSERT_TRUE(db_);
    impl_ = dynamic_cast<engine::DBImpl*>(db_.get());
    ASSERT_NE(impl_, nullptr);
  }
  TempDir dir_;
  std::unique_ptr<DB> db_;
  engine::DBImpl* impl_ = nullptr;
};

TEST_F(AcksTest, ReplicatedAppendsReturnOnceTheReplicaReadPastThem) {
  std::mt19937_64 rng(testing_util::TestSeed());
  DB* db = db_.get();
  engine::DBImpl* impl = impl_;
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(Acks::Replicated(1))));

  // No replica: refused, nothing stored.
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
  Status s = writer->Append(testing_util::RandomStep(table->spec(), rng).tensors);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_EQ(s.message(),
            "table 'experience': acks replicated(1) needs 1 in-sync replica; 0 are in sync "
            "(none): nothing was appended; try again once replicas follow");
  EXPECT_EQ(table->Info().num_steps, 0);
  // A writer asking for none is not held back.
  WriterOptions none;
  none.acks = Acks{AckMode::kNone, 0};
  ASSERT_OK_AND_ASSIGN(auto quick, table->NewWriter(none));
  ASSERT_OK(quick->Append(testing_util::RandomStep(table->spec(), rng).tensors));
  ASSERT_OK(quick->End(EndReason::kTerminal));

  FakeReplica replica(impl);
  for (auto until = std::chrono::steady_clock::now() + 10s;
       !table->spec().name.empty() && std::chrono::steady_clock::now() < until &&
       !impl->replica_set()->CheckInSync(1, "t").ok();) {
    std::this_thread::sleep_for(1ms);
  }
  const int steps = 20 + static_cast<int>(rng() % 30);
  for (int i = 0; i < steps; ++i) {
    ASSERT_OK(writer->Append(testing_util::RandomStep(table->spec(), rng).tensors));
    // The replica has read everything up to the log's end as of the return.
    EXPECT_GE(replica.at(), impl->LogEnd()) << "step " << i;
  }
  ASSERT_OK(writer->End(EndReason::kTerminal));
  EXPECT_GE(replica.at(), impl->LogEnd());
  EXPECT_EQ(table->Info().num_steps, steps + 1);
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo info, db->Replication());
  ASSERT_EQ(info.replicas.size(), 1u);
  EXPECT_TRUE(info.replicas[0].in_sync);
  EXPECT_EQ(info.replicas[0].applied_segment, info.segment);

  // The replica gone: the next append fails (stored on the primary, or
  // refused once the replica is out of sync), within about a second.
  replica.Stop();
  ASSERT_TRUE(replica.error().empty()) << replica.error();
  const auto start = std::chrono::steady_clock::now();
  s = writer->Append(testing_util::RandomStep(table->spec(), rng).tensors);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), AnyOf(HasSubstr("it is stored on the primary, not acknowledged by 1"),
                                 HasSubstr("nothing was appended")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// A replica that reads but never catches up (it asks again and again from
// the log's start): `leader` appends wait for it, up to the writer's
// timeout, naming it; `none` appends do not.
TEST_F(AcksTest, LeaderAppendsWaitWhileAReplicaLagsPastMaxLag) {
  std::mt19937_64 rng(testing_util::TestSeed());
  DB* db = db_.get();
  engine::DBImpl* impl = impl_;
  TableSpec spec = Spec(Acks{AckMode::kLeader, 0});
  spec.max_lag_ms = 50;
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  WriterOptions patient;
  patient.timeout = 300ms;
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(patient));
  ASSERT_OK(writer->Append(testing_util::RandomStep(spec, rng).tensors));  // no replica yet
  std::atomic<bool> stop{false};
  std::thread stuck([&] {
    while (!stop.load()) {
      (void)impl->ReadLog("stuck", wal::LogPosition{}, 0, 64, std::chrono::steady_clock::now());
      std::this_thread::sleep_for(5ms);
    }
  });
  std::this_thread::sleep_for(100ms);  // (past max_lag since it last caught up)
  const auto start = std::chrono::steady_clock::now();
  const Status s = writer->Append(testing_util::RandomStep(spec, rng).tensors);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("table 'experience': timed out waiting for replica stuck, "));
  EXPECT_THAT(s.message(), HasSubstr(" behind the primary (max_lag_ms 50)"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(table->Info().num_steps, 2) << "the append is stored: its acknowledgment waited";
  WriterOptions none;
  none.acks = Acks{AckMode::kNone, 0};
  ASSERT_OK_AND_ASSIGN(auto quick, table->NewWriter(none));
  const auto quick_start = std::chrono::steady_clock::now();
  ASSERT_OK(quick->Append(testing_util::RandomStep(spec, rng).tensors));
  EXPECT_LT(std::chrono::steady_clock::now() - quick_start, 250ms);
  stop = true;
  stuck.join();
}

TEST_F(AcksTest, BadModesAreNamed) {
  DB* db = db_.get();
  TableSpec spec = Spec(Acks{AckMode::kTable, 0});
  EXPECT_EQ(db->CreateTable(spec).status().message(),
            "table 'experience': acks is \"table\", which only a writer's options may say (a "
            "table's is none, leader, leader_durable or replicated(K))");
  spec.acks = Acks::Replicated(0);
  EXPECT_EQ(db->CreateTable(spec).status().message(),
            "table 'experience': acks replicated(0) needs 1 to 16 replicas");
  spec.acks = Acks{AckMode::kLeader, 0};
  spec.max_lag_ms = 0;
  EXPECT_EQ(db->CreateTable(spec).status().message(),
            "table 'experience': max_lag_ms is 0; it must be >= 1");
  spec.max_lag_ms = 500;
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  WriterOptions o;
  o.acks = Acks{AckMode::kLeader, 2};
  EXPECT_EQ(table->NewWriter(o).status().message(),
            "table 'experience': NewWriter: acks leader with replicas 2 (only replicated(K) "
            "counts replicas)");
  o.acks = Acks::Replicated(17);
  EXPECT_EQ(table->NewWriter(o).status().message(),
            "table 'experience': NewWriter: acks replicated(17) needs 1 to 16 replicas");
  // A table that logs nothing has no replicas to wait for.
  TableSpec unlogged = Spec(Acks::Replicated(1));
  unlogged.name = "unlogged";
  unlogged.logging = TableLogging::kOff;
  ASSERT_OK_AND_ASSIGN(auto quiet, db->CreateTable(unlogged));
  ASSERT_OK_AND_ASSIGN(auto w, quiet->NewWriter());
  std::mt19937_64 rng(1);
  const Status s = w->Append(testing_util::RandomStep(quiet->spec(), rng).tensors);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'unlogged': acks replicated(1) needs the table's "
                                     "changes in the write-ahead log"));
}

TEST_F(AcksTest, NamesParseBack) {
  for (const Acks& a :
       {Acks{AckMode::kTable, 0}, Acks{AckMode::kNone, 0}, Acks{AckMode::kLeader, 0},
        Acks{AckMode::kLeaderDurable, 0}, Acks::Replicated(1), Acks::Replicated(16)}) {
    ASSERT_OK_AND_ASSIGN(const Acks back, ParseAcks(AcksName(a)));
    EXPECT_EQ(back, a) << AcksName(a);
  }
  for (const char* bad :
       {"", "all", "replicated(0)", "replicated(17)", "replicated(x)", "replicated(2", "Leader"}) {
    const Result<Acks> r = ParseAcks(bad);
    EXPECT_EQ(r.status().message(),
              "acks '" + std::string(bad) +
                  "' is not one of table, none, leader, leader_durable, replicated(K) with K "
                  "from 1 to 16")
        << bad;
  }
}

}  // namespace
}  // namespace replaydb
