// Read replicas (docs/replication.md) as processes of their own: a primary
// and a replica, each `replaydb serve`, on 127.0.0.1. What a client writes
// to the primary shows on the replica byte for byte (steps, ends,
// priorities, removals); the replica refuses writes, naming its primary; a
// replica killed with SIGKILL goes on from where it was, storing nothing
// twice, also after the primary checkpointed meanwhile; a new replica
// starts from a snapshot of its primary; one whose place the primary's log
// no longer holds is told it needs one. Bounded waits only; every server
// started is stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/rdma/etcd_process.h"  // FreePort
#include "tests/test_util.h"
#include "tests/tools/serve_process.h"
#include "tools/replaydb/child_process.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

using testing_util::ServeProcess;

// `replaydb serve DIR --listen LISTEN --workers 1 [ARGS...]`, once it
// listens.
class Served {
 public:
  // `must_listen` false: a server that could not listen (its port was
  // taken) is no failure of the test's; address() is then empty.
  explicit Served(const std::string& dir, std::vector<std::string> more = {},
                  const std::string& listen = "ucx://127.0.0.1:0", bool must_listen = true) {
    std::vector<std::string> args = {dir, "--listen", listen, "--workers", "1"};
    args.insert(args.end(), more.begin(), more.end());
    process_ = std::make_unique<ServeProcess>(std::move(args));
    address_ = process_->WaitFor(
        std::regex(must_listen ? "listening on (ucx://127\\.0\\.0\\.1:[0-9]+)"
                               : "listening on (ucx://127\\.0\\.0\\.1:[0-9]+)|cannot listen on"),
        30s);
    if (!must_listen && address_.find("ucx://") != 0) {
      address_.clear();
      End(SIGKILL);
    }
    EXPECT_TRUE(!address_.empty() || !must_listen) << "no listening line; output:\n"
                                                   << process_->output();
  }
  ~Served() { Stop(); }
  // SIGTERM, and the exit (0) awaited.
  void Stop() { End(SIGTERM); }
  void Kill() { End(SIGKILL); }
  // SIGSTOP or SIGCONT.
  void Signal(int signal) {
    if (process_) ::kill(process_->pid(), signal);
  }
  const std::string& address() const { return address_; }
  std::string WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout) {
    return process_ ? process_->WaitFor(pattern, timeout) : "";
  }
  std::string output() const { return process_ ? process_->output() : ""; }

 private:
  void End(int signal) {
    if (!process_) return;
    ::kill(process_->pid(), signal);
    const int status = process_->Exit(60s);
    if (signal == SIGTERM) {
      EXPECT_EQ(status, 0) << process_->output();
    }
    // A failed test shows each server's side of it (a connection it ended
    // and why, say), which the client's message alone does not tell.
    if (::testing::Test::HasFailure()) {
      std::cerr << "--- output of replaydb serve " << address_ << " (the test failed):\n"
                << process_->output() << "---\n";
    }
    process_.reset();
  }

  std::unique_ptr<ServeProcess> process_;
  std::string address_;
};

// The output of `replaydb serve ARGS... --listen ucx://127.0.0.1:0`, which
// must fail (exit 1, or 2 for a usage error).
std::string ServeFails(std::vector<std::string> args) {
  args.insert(args.end(), {"--listen", "ucx://127.0.0.1:0"});
  ServeProcess serve(std::move(args));
  const int status = serve.Exit(30s);
  EXPECT_TRUE(status == 1 || status == 2) << status << ": " << serve.output();
  return serve.output();
}

TableSpec Spec() {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kU8, Shape{24}}, {"reward", DType::kF32, Shape{}}};
  spec.capacity_steps = 8192;
  spec.block_steps = 16;
  spec.sequence_length = 3;
  spec.selector = SelectorKind::kPrioritized;
  return spec;
}

// Waits (bounded) until the replica's table holds what the primary's does.
void ExpectSameSoon(DB& primary, DB& replica) {
  ASSERT_OK_AND_ASSIGN(auto p, primary.GetTable("experience"));
  const std::string want = testing_util::TableContents(*p);
  std::string got;
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < until) {
    auto r = replica.GetTable("experience");
    if (r.ok()) {
      got = testing_util::TableContents(**r);
      if (got == want) return;
    }
    std::this_thread::sleep_for(50ms);
  }
  FAIL() << "the replica never caught up: its table holds " << got.size()
         << " bytes of contents against the primary's " << want.size();
}

// Random trajectories of random lengths, ended or not, with priorities:
// `open` is left open (the writer returned) for the next round to go on.
void Write(Table& table, std::mt19937_64& rng, int trajectories,
           std::unique_ptr<TrajectoryWriter>* open) {
  for (int t = 0; t < trajectories; ++t) {
    std::unique_ptr<TrajectoryWriter> writer;
    if (*open) {
      writer = std::move(*open);
    } else {
      ASSERT_OK_AND_ASSIGN(writer, table.NewWriter());
    }
    const int steps = 1 + static_cast<int>(rng() % 40);
    for (int s = 0; s < steps; ++s) {
      ASSERT_OK(writer->Append(testing_util::RandomStep(Spec(), rng).tensors,
                               static_cast<double>(rng() % 1000) / 10.0));
    }
    if (t + 1 == trajectories) {
      *open = std::move(writer);
    } else {
      ASSERT_OK(writer->End(rng() % 2 == 0 ? EndReason::kTerminal : EndReason::kTruncated));
    }
  }
}

TEST(ReplicationTest, AReplicaHoldsWhatItsPrimaryWroteAndRefusesWrites) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
  ASSERT_FALSE(replica.address().empty());
  EXPECT_FALSE(replica.WaitFor(std::regex("(a read replica of ucx://)"), 1s).empty());

  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 12, &open);
  // Priorities changed and items removed travel too.
  std::vector<ItemKey> keys;
  std::vector<double> priorities;
  ASSERT_OK(table->ItemPriorities(&keys, &priorities));
  ASSERT_GT(keys.size(), 4u);
  std::vector<ItemKey> some(keys.begin(), keys.begin() + 4);
  const std::vector<double> fresh = {0.5, 7.0, 11.25, 3.0};
  ASSERT_OK(table->UpdatePriorities(some, fresh));
  ASSERT_OK(table->DeleteItems(std::span(keys.end() - 2, 2)));

  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  ExpectSameSoon(*p, *r);
  // Where each stands: the replica caught up with its primary's log's end.
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo pi, p->Replication());
  EXPECT_EQ(pi.role, "primary");
  ASSERT_EQ(pi.replicas.size(), 1u);
  EXPECT_THAT(pi.replicas[0].name, ::testing::EndsWith(":" + dir.Sub("replica")));
  EXPECT_LT(pi.replicas[0].seconds_since_read, 10.0);
  ReplicationInfo ri;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms)) {
    ASSERT_OK_AND_ASSIGN(ri, r->Replication());
    if (ri.segment == pi.segment && ri.offset == pi.offset) break;
  }
  EXPECT_EQ(ri.role, "replica");
  EXPECT_EQ(ri.primary, primary.address());
  EXPECT_TRUE(ri.connected);
  EXPECT_EQ(ri.last_error, "");
  EXPECT_EQ(std::make_pair(ri.segment, ri.offset), std::make_pair(pi.segment, pi.offset));
  EXPECT_EQ(std::make_pair(ri.primary_segment, ri.primary_offset),
            std::make_pair(pi.segment, pi.offset));
  EXPECT_THAT(
      testing_util::ShellOutput(std::string(REPLAYDB_TOOL_PATH) + " " + replica.address() +
                                " -c replication 2>&1"),
      HasSubstr("role: replica\nepoch: 0\nsegment: " + std::to_string(pi.segment) +
                "\noffset: " + std::to_string(pi.offset) + "\nprimary: " + primary.address()));
  EXPECT_THAT(testing_util::ShellOutput(std::string(REPLAYDB_TOOL_PATH) + " " + replica.address() +
                                        " -c replication 2>&1"),
              HasSubstr("behind: 0 bytes\nconnected: true"));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  // Samples are served.
  SampleOptions so;
  so.timeout = 10s;
  SampleBatch batch;
  ASSERT_OK(rt->Sample(16, so, &batch));
  EXPECT_EQ(batch.batch_size, 16);
  // Samples are not logged: each server counts its own draws (what a
  // replica taking over starts from).
  for (int i = 0; i < 3; ++i) ASSERT_OK(table->Sample(7, so, &batch));
  ExpectSameSoon(*p, *r);
  EXPECT_EQ(table->Info().items_sampled, 21);
  EXPECT_EQ(rt->Info().items_sampled, 16);  // the replica's own 16, not the primary's
  EXPECT_EQ(rt->Info().rate_limiter.samples, 16);

  // Writes are not: each refusal names the primary.
  const auto refused = [&](const Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << what << ": " << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("this server is a read replica of " + primary.address()))
        << what;
    EXPECT_THAT(s.message(), HasSubstr("writes go to the primary")) << what;
  };
  refused(rt->NewWriter().status(), "NewWriter");
  refused(rt->UpdatePriorities(some, fresh), "UpdatePriorities");
  refused(rt->DeleteItems(some), "DeleteItems");
  refused(rt->Clear(), "Clear");
  TableSpec other = Spec();
  other.name = "other";
  refused(r->CreateTable(other).status(), "CreateTable");
  refused(r->DropTable("experience"), "DropTable");

  // Ends and a dropped table travel as well, and a rate limiter set.
  ASSERT_OK(open->End(EndReason::kTerminal));
  ExpectSameSoon(*p, *r);
  const RateLimiterSpec limiter = RateLimiterSpec::SampleToInsertRatio(
      2.0 + static_cast<double>(rng() % 4), 3, 20.0 + static_cast<double>(rng() % 20));
  ASSERT_OK(table->SetRateLimiter(limiter));
  const auto limiter_of = [](DB& db) {
    auto t = db.GetTable("experience");
    return t.ok() ? std::make_pair((*t)->spec().rate_limiter.samples_per_insert,
                                   (*t)->spec().rate_limiter.max_diff)
                  : std::make_pair(-1.0, -1.0);
  };
  const auto want_limiter = std::make_pair(limiter.samples_per_insert, limiter.max_diff);
  for (auto until = std::chrono::steady_clock::now() + 30s;
       limiter_of(*r) != want_limiter && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(limiter_of(*r), want_limiter) << "the replica's rate limiter";
  ASSERT_OK(p->CreateTable(other).status());
  ASSERT_OK(p->DropTable("other"));
  ASSERT_OK(p->CreateTable([] {
               TableSpec t = Spec();
               t.name = "third";
               return t;
             }())
                .status());
  ASSERT_OK(p->CreateTable(other).status());  // a name used again, under a new id
  const std::vector<std::string> tables = {"experience", "other", "third"};
  const auto until = std::chrono::steady_clock::now() + 30s;
  while (r->ListTables() != tables && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(r->ListTables(), tables);
  ASSERT_TRUE(std::filesystem::exists(dir.Sub("replica") + "/REPLICA"));

  // Sent back to the start of the segment its primary keeps for it, the
  // replica applies all that again and holds the same (nothing twice; the
  // table made, dropped and made again under its name included).
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo held, p->Replication());
  ASSERT_EQ(held.replicas.size(), 1u);
  replica.Stop();
  {
    std::ofstream(dir.Sub("replica") + "/REPLICA")
        << "replaydb replica 1\nprimary " << primary.address() << "\nsegment "
        << held.replicas[0].segment << "\noffset 0\n";
    Served again(dir.Sub("replica"), {"--replica-of", primary.address()});
    EXPECT_FALSE(again.WaitFor(std::regex("(connected; applying from segment [0-9]+, offset 0)"),
                               30s)
                     .empty())
        << again.output();
    ASSERT_OK_AND_ASSIGN(auto r2, DB::Connect(again.address()));
    ASSERT_OK_AND_ASSIGN(const ReplicationInfo end, p->Replication());
    ReplicationInfo back;
    for (auto limit = std::chrono::steady_clock::now() + 30s;
         std::chrono::steady_clock::now() < limit; std::this_thread::sleep_for(20ms)) {
      ASSERT_OK_AND_ASSIGN(back, r2->Replication());
      if (back.segment == end.segment && back.offset == end.offset) break;
    }
    EXPECT_EQ(std::make_pair(back.segment, back.offset), std::make_pair(end.segment, end.offset))
        << back.last_error;
    EXPECT_EQ(back.last_error, "");
    ExpectSameSoon(*p, *r2);
    EXPECT_EQ(r2->ListTables(), tables);
    EXPECT_EQ(limiter_of(*r2), want_limiter);
    EXPECT_THAT(again.output(), Not(HasSubstr("stopped following"))) << again.output();
  }

  // Stopped, the directories say where they stood.
  primary.Stop();
  ASSERT_OK_AND_ASSIGN(auto local, DB::OpenReadOnly({}, dir.Sub("replica")));
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo stopped, local->Replication());
  EXPECT_EQ(stopped.role, "replica");
  EXPECT_EQ(limiter_of(*local), want_limiter) << "the replica's catalog holds the limiter";
  EXPECT_EQ(stopped.primary, primary.address());
  ASSERT_OK_AND_ASSIGN(auto local_primary, DB::OpenReadOnly({}, dir.Sub("primary")));
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo kept, local_primary->Replication());
  EXPECT_EQ(kept.role, "primary");
  ASSERT_EQ(kept.replicas.size(), 1u) << "the replica's read outlives the primary (REPLICAS)";
  EXPECT_THAT(kept.replicas[0].name, ::testing::EndsWith(":" + dir.Sub("replica")));
  EXPECT_LT(kept.replicas[0].seconds_since_read, 60.0);
}

// A FIFO table's items keep on the replica the insertion orders their
// primary gave them (its ItemClock records applied), so a replica that takes
// over a shard of a sharded FIFO table merges in the same order.
TEST(ReplicationTest, AReplicasFifoItemsKeepTheirPrimarysInsertionOrders) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
  ASSERT_FALSE(replica.address().empty());
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  TableSpec spec = Spec();
  spec.name = "queue";
  spec.selector = SelectorKind::kFifo;
  spec.sequence_length = 1;
  spec.max_times_sampled = 1;
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(spec));
  const int64_t n = 8 + static_cast<int64_t>(rng() % 8);
  {
    ASSERT_OK_AND_ASSIGN(auto w, table->NewWriter());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_OK(w->Append(testing_util::RandomStep(spec, rng).tensors));
      if (rng() % 3 == 0) ASSERT_OK(w->End(EndReason::kTerminal));
      std::this_thread::sleep_for(2ms);  // (the item clock ticks each millisecond)
    }
    ASSERT_OK(w->End(EndReason::kTerminal));
  }
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  std::shared_ptr<Table> rt;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms)) {
    auto got = r->GetTable("queue");
    if (got.ok() && (*got)->Info().num_items == n) {
      rt = *got;
      break;
    }
  }
  ASSERT_NE(rt, nullptr) << "the replica never held the queue's " << n << " items";
  // Each takes every item: the replica first (the primary's removals reach
  // it as RemoveItems records; its own stay its own).
  SampleOptions so;
  so.timeout = 10s;
  SampleBatch from_primary, from_replica;
  ASSERT_OK(rt->Sample(n, so, &from_replica));
  ASSERT_OK(table->Sample(n, so, &from_primary));
  EXPECT_EQ(from_replica.keys, from_primary.keys);
  ASSERT_EQ(from_primary.insertion_order.size(), static_cast<size_t>(n));
  EXPECT_EQ(from_replica.insertion_order, from_primary.insertion_order);
  EXPECT_GT(from_primary.insertion_order[0], uint64_t{1} << 60) << "numbered by the clock";
  EXPECT_TRUE(
      std::is_sorted(from_primary.insertion_order.begin(), from_primary.insertion_order.end()));
}

// The trajectory lengths a table holds, in id order.
std::vector<int64_t> Lengths(Table& table) {
  std::vector<TrajectoryInfo> infos;
  if (!table.ListTrajectories({}, &infos).ok()) return {-1};
  std::vector<int64_t> out;
  for (const TrajectoryInfo& t : infos) out.push_back(t.length);
  return out;
}

TEST(ReplicationTest, ReplicatedAcksHoldEachAppendUntilTheReplicaAppliedIt) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  TableSpec spec = Spec();
  spec.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(spec));
  WriterOptions each;
  each.sync = true;  // each Append waits for its acknowledgment
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(each));
  // No replica: refused, nothing stored.
  Status s = writer->Append(testing_util::RandomStep(spec, rng).tensors, 1.0);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("table 'experience': acks replicated(1) needs 1 in-sync "
                                     "replica; 0 are in sync (none): nothing was appended"));
  EXPECT_EQ(table->Info().num_steps, 0);

  auto replica = std::make_unique<Served>(
      dir.Sub("replica"), std::vector<std::string>{"--replica-of", primary.address()});
  ReplicationInfo pi;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(20ms)) {
    ASSERT_OK_AND_ASSIGN(pi, p->Replication());
    if (!pi.replicas.empty() && pi.replicas[0].in_sync) break;
  }
  ASSERT_EQ(pi.replicas.size(), 1u);
  ASSERT_TRUE(pi.replicas[0].in_sync);
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica->address()));
  // Each append acknowledged is on the replica already.
  const int steps = 10 + static_cast<int>(rng() % 20);
  for (int i = 0; i < steps; ++i) {
    ASSERT_OK(writer->Append(testing_util::RandomStep(spec, rng).tensors, 1.0 + i));
    ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
    ASSERT_EQ(Lengths(*rt), std::vector<int64_t>{i + 1}) << "step " << i;
  }
  // A replica stopped (SIGSTOP) for less than a second holds the append's
  // acknowledgment until it runs again and applies it.
  replica->Signal(SIGSTOP);
  std::this_thread::sleep_for(50ms);  // (its read in flight answered)
  auto held = std::async(std::launch::async, [&] {
    return writer->Append(testing_util::RandomStep(spec, rng).tensors, 2.0);
  });
  EXPECT_EQ(held.wait_for(400ms), std::future_status::timeout) << "acknowledged while stopped";
  replica->Signal(SIGCONT);
  ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
  ASSERT_OK(held.get());
  {
    ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
    EXPECT_EQ(Lengths(*rt), std::vector<int64_t>{steps + 1});
  }
  ASSERT_OK(writer->End(EndReason::kTerminal));
  // Appends sent ahead, acknowledged together: all there once End returns.
  ASSERT_OK_AND_ASSIGN(auto ahead, table->NewWriter());
  std::unique_ptr<TrajectoryWriter> open = std::move(ahead);
  Write(*table, rng, 6, &open);
  ASSERT_OK(open->End(EndReason::kTruncated));
  {
    ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
    EXPECT_EQ(testing_util::TableContents(*rt), testing_util::TableContents(*table));
  }
  EXPECT_THAT(testing_util::ShellOutput(std::string(REPLAYDB_TOOL_PATH) + " " + primary.address() +
                                        " -c replication 2>&1"),
              ::testing::ContainsRegex("lag_seconds +in_sync\n.* true\n"));

  // The replica killed: an append fails (stored on the primary, or
  // refused once the replica is out of sync) within seconds.
  replica->Kill();
  const auto start = std::chrono::steady_clock::now();
  s = writer->Append(testing_util::RandomStep(spec, rng).tensors, 1.0);
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(),
              ::testing::AnyOf(HasSubstr("it is stored on the primary, not acknowledged by 1"),
                               HasSubstr("nothing was appended")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // A writer asking for `leader` goes on.
  WriterOptions leader;
  leader.acks = Acks{AckMode::kLeader, 0};
  ASSERT_OK_AND_ASSIGN(auto quick, table->NewWriter(leader));
  ASSERT_OK(quick->Append(testing_util::RandomStep(spec, rng).tensors, 1.0));
  ASSERT_OK(quick->End(EndReason::kTerminal));
}

TEST(ReplicationTest, AKilledReplicaGoesOnFromItsPlaceAndStoresNothingTwice) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  auto replica = std::make_unique<Served>(
      dir.Sub("replica"), std::vector<std::string>{"--replica-of", primary.address()});
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 2, &open);
  {
    // (Until a replica has read, the primary's checkpoints keep nothing
    // for it.)
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica->address()));
    ExpectSameSoon(*p, *r);
  }
  for (int round = 0; round < 3; ++round) {
    // Killed while the primary is written to (the open trajectory goes on
    // across the kill), and the primary checkpoints while no replica runs.
    const auto pause = std::chrono::milliseconds(rng() % 50);  // (rng is the writer's next)
    std::thread writes([&] { Write(*table, rng, 8, &open); });
    std::this_thread::sleep_for(pause);
    replica->Kill();
    writes.join();
    ASSERT_OK(p->Checkpoint());
    Write(*table, rng, 2, &open);
    replica = std::make_unique<Served>(dir.Sub("replica"),
                                       std::vector<std::string>{"--replica-of", primary.address()});
    ASSERT_FALSE(replica->address().empty());
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica->address()));
    ExpectSameSoon(*p, *r);
  }
  // Another primary for the same directory is refused.
  Served other(dir.Sub("other"));
  replica->Stop();
  EXPECT_THAT(ServeFails({dir.Sub("replica"), "--replica-of", other.address()}),
              HasSubstr("is a replica of " + primary.address() + ", not of " + other.address()));
}

// Whether every trajectory of `db`'s table has ended, and how many it holds.
std::pair<bool, size_t> AllEnded(DB& db) {
  auto table = db.GetTable("experience");
  if (!table.ok()) return {false, 0};
  std::vector<TrajectoryInfo> infos;
  if (!(*table)->ListTrajectories({}, &infos).ok()) return {false, 0};
  bool all = true;
  for (const TrajectoryInfo& t : infos) all = all && t.ended;
  return {all, infos.size()};
}

// Trajectories left open by a primary's crash are ended by its recovery,
// and those ends are logged: its replica ends them too.
TEST(ReplicationTest, TrajectoriesAPrimarysRecoveryEndsEndOnItsReplicaToo) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  // A port of its own, which the primary comes back on (another tried where
  // a test running beside this one took it meanwhile).
  std::string listen;
  std::unique_ptr<Served> primary;
  for (int attempt = 0; attempt < 5 && (!primary || primary->address().empty()); ++attempt) {
    listen = "ucx://127.0.0.1:" + std::to_string(tools::FreeLoopbackPort());
    primary = std::make_unique<Served>(dir.Sub("primary"), std::vector<std::string>{}, listen,
                                       /*must_listen=*/false);
  }
  ASSERT_FALSE(primary->address().empty()) << primary->output();
  Served replica(dir.Sub("replica"), {"--replica-of", primary->address()});
  ASSERT_FALSE(replica.address().empty());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  size_t written = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary->address()));
    ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
    // Some ended, three left open by writers still going when it dies.
    std::vector<std::unique_ptr<TrajectoryWriter>> open(3);
    for (auto& w : open) {
      const int trajectories = 2 + static_cast<int>(rng() % 3);  // the last one open
      Write(*table, rng, trajectories, &w);
      written += static_cast<size_t>(trajectories);
    }
    ExpectSameSoon(*p, *r);
    EXPECT_FALSE(AllEnded(*r).first) << "the replica holds the open trajectories open";
    primary->Kill();
  }  // (the writers' ends fail: the primary is gone)
  primary = std::make_unique<Served>(dir.Sub("primary"), std::vector<std::string>{}, listen);
  ASSERT_EQ(primary->address(), listen) << "the port was taken meanwhile? " << primary->output();
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary->address()));
  const auto [ended, count] = AllEnded(*p);
  EXPECT_TRUE(ended) << "the primary's recovery ends what its writers left open";
  EXPECT_EQ(count, written) << "every trajectory, ended or left open, is kept";
  ExpectSameSoon(*p, *r);
  EXPECT_EQ(AllEnded(*r), std::make_pair(true, count));
}

TEST(ReplicationTest, ANewReplicaStartsFromASnapshotOfItsPrimary) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 3, &open);
  ASSERT_OK(p->Checkpoint());  // no replica holds segment 1: it goes
  // Past the checkpoint (the snapshot's own makes another), and a table
  // made and dropped: what the log holds after the snapshot's place too.
  Write(*table, rng, 2, &open);
  TableSpec other = Spec();
  other.name = "gone";
  ASSERT_OK(p->CreateTable(other).status());
  ASSERT_OK(p->DropTable("gone"));
  {
    Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
    EXPECT_FALSE(
        replica
            .WaitFor(std::regex("(copied [0-9]+ of [0-9]+ bytes of the snapshot of ucx://)"), 30s)
            .empty())
        << replica.output();
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
    EXPECT_THAT(r->ListTables(), ::testing::ElementsAre("experience"));
    // It follows from there (the open trajectory goes on).
    Write(*table, rng, 4, &open);
    ExpectSameSoon(*p, *r);
    // Once it reads the log, its copy on the primary goes.
    const std::string copies = dir.Sub("primary") + "/snapshots";
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until && std::filesystem::exists(copies) &&
           !std::filesystem::is_empty(copies)) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(!std::filesystem::exists(copies) || std::filesystem::is_empty(copies));
    // Restarted, it goes on from its place, not from another snapshot.
    replica.Stop();
  }
  {
    Write(*table, rng, 2, &open);
    Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
    EXPECT_THAT(replica.output(), Not(HasSubstr("snapshot")));
  }
  // An install cut short (its staging folder there) is done afresh.
  {
    const std::string cut = dir.Sub("cut");
    std::filesystem::create_directories(cut + "/snapshot.partial/cold");
    std::filesystem::create_directories(cut + "/cold");
    std::ofstream(cut + "/snapshot.partial/cold/CURRENT") << "half a copy";
    std::ofstream(cut + "/REPLICA") << "replaydb replica 1\nprimary ucx://127.0.0.1:1\n";
    Served replica(cut, {"--replica-of", primary.address()});
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
    EXPECT_FALSE(std::filesystem::exists(cut + "/snapshot.partial"));
  }
  // A new replica whose primary cannot be reached does not start.
  EXPECT_THAT(ServeFails({dir.Sub("unreached"), "--replica-of", "ucx://127.0.0.1:1"}),
              HasSubstr("a snapshot of ucx://127.0.0.1:1 for " + dir.Sub("unreached")));
}

TEST(ReplicationTest, AReplicaWhosePlaceTheLogNoLongerHoldsCopiesANewSnapshotRunningOrAtItsStart) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 3, &open);
  ASSERT_OK(p->Checkpoint());  // no replica holds segment 1: it goes
  // A replica that was to read from the log's beginning is told, while it
  // runs, that it needs a new snapshot: its server opens again on its port,
  // copies one and follows from there.
  const std::string old = dir.Sub("old");
  std::filesystem::create_directories(old);
  std::ofstream(old + "/REPLICA") << "replaydb replica 1\nprimary " << primary.address()
                                  << "\nsegment 0\noffset 0\n";
  {
    Served replica(old, {"--replica-of", primary.address()});
    EXPECT_FALSE(replica.WaitFor(std::regex("(listening again on ucx://[0-9.:]+)"), 30s).empty())
        << replica.output();
    const std::string said = replica.output();
    for (const std::string& line : std::vector<std::string>{
             "the replica needs a new snapshot of the primary (its server copies one when opened "
             "again)",
             "the primary's log no longer holds this replica's place: opening again to copy a new "
             "snapshot",
             "its log no longer holds this replica's place (segment 0, offset 0): copying a new "
             "snapshot",
             "listening again on " + replica.address()}) {
      EXPECT_THAT(said, HasSubstr(line));
    }
    Write(*table, rng, 2, &open);
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
  }
  // So does one whose segment a checkpoint removed.
  ASSERT_OK(p->Checkpoint());
  Write(*table, rng, 2, &open);
  std::ofstream(old + "/REPLICA") << "replaydb replica 1\nprimary " << primary.address()
                                  << "\nsegment 1\noffset 20\n";
  {
    Served replica(old, {"--replica-of", primary.address()});
    EXPECT_THAT(replica.output(), HasSubstr("(segment 1, offset 20): copying a new snapshot"));
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
  }
  // A replica whose place is past its primary's log's end (it followed
  // another log) is told so.
  {
    const std::string followed = dir.Sub("followed");
    std::filesystem::create_directories(followed);
    std::ofstream(followed + "/REPLICA")
        << "replaydb replica 1\nprimary " << primary.address() << "\nsegment 999\noffset 20\n";
    Served lost(followed, {"--replica-of", primary.address()});
    EXPECT_FALSE(lost.WaitFor(std::regex("(is past the end of the log of .*: the replica followed "
                                         "a log this primary does not have)"),
                              30s)
                     .empty())
        << "output:\n"
        << lost.output();
  }
  // A directory with tables of its own is not made a replica.
  Served lone(dir.Sub("lone"));
  {
    ASSERT_OK_AND_ASSIGN(auto l, DB::Connect(lone.address()));
    ASSERT_OK(l->CreateTable(Spec()).status());
  }
  lone.Stop();
  EXPECT_THAT(ServeFails({dir.Sub("lone"), "--replica-of", primary.address()}),
              HasSubstr("holds tables and was never a replica of " + primary.address() +
                        ": a replica starts from an empty directory"));
  EXPECT_THAT(ServeFails({dir.Sub("x"), "--replica-of", "ucx://127.0.0.1"}),
              HasSubstr("replica_of: "));
}

// `replaydb promote ARGS...`: its exit status and output.
std::pair<int, std::string> Promote(std::vector<std::string> args) {
  ServeProcess promote(std::move(args), "promote");
  const int status = promote.Exit(90s);
  return {status, promote.output()};
}

TEST(ReplicationTest, APromotedReplicaFencesItsPrimaryAndTakesTheWrites) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  // (What its old primary had open waits 1 s for a writer to resume it.)
  Served replica(dir.Sub("replica"),
                 {"--replica-of", primary.address(), "--resume-window-ms", "1000"});
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 4 + static_cast<int>(rng() % 8), &open);
  ASSERT_TRUE(open);  // a trajectory the primary has open when it is deposed
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  ASSERT_OK_AND_ASSIGN(auto before, p->Replication());
  EXPECT_EQ(before.epoch, 0u);
  // Only a replica is promoted.
  auto [refused, why] = Promote({primary.address()});
  EXPECT_EQ(refused, 1) << why;
  EXPECT_THAT(why, HasSubstr("this server is a primary (epoch 0), not a read replica"));
  // Promoted while the primary runs: it is fenced, and what it logged is
  // applied first (nothing waits for the replica to catch up here).
  auto [status, out] = Promote({replica.address()});
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("promoted " + replica.address() + ": the primary of epoch 1"));
  EXPECT_THAT(replica.WaitFor(std::regex("(fenced " + primary.address() + ")"), 10s),
              Not(::testing::IsEmpty()));
  // The old primary refuses writes, naming the new one.
  // (An append is sent ahead: its failure shows by the end at the latest.)
  Status append = open->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0);
  if (append.ok()) append = open->End(EndReason::kTerminal);
  EXPECT_EQ(append.code(), Status::Code::kFailedPrecondition) << append.ToString();
  EXPECT_THAT(append.message(), HasSubstr("epoch 1's primary is " + replica.address()));
  TableSpec other = Spec();
  other.name = "other";
  const Status created = p->CreateTable(other).status();
  EXPECT_THAT(created.message(),
              HasSubstr("is no longer the primary: epoch 1's primary is " + replica.address()));
  ASSERT_OK_AND_ASSIGN(auto deposed, p->Replication());
  EXPECT_EQ(deposed.fenced_by, replica.address());
  EXPECT_EQ(deposed.fenced_epoch, 1u);
  EXPECT_THAT(testing_util::ShellOutput(std::string(REPLAYDB_TOOL_PATH) + " " + primary.address() +
                                        " -c replication 2>&1"),
              HasSubstr("fenced_by: " + replica.address() + "\nfenced_epoch: 1"));
  // The new primary holds everything the old one did, the trajectory it
  // had open ended (truncated) once no writer resumed it within the
  // window, and takes writes.
  const auto ended_by = std::chrono::steady_clock::now() + 30s;
  while (!AllEnded(*r).first && std::chrono::steady_clock::now() < ended_by) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_OK_AND_ASSIGN(auto now, r->Replication());
  EXPECT_EQ(now.role, "primary");
  EXPECT_EQ(now.epoch, 1u);
  std::ifstream epochs(dir.Sub("replica") + "/EPOCHS");
  std::string history((std::istreambuf_iterator<char>(epochs)), {});
  EXPECT_THAT(history, ::testing::StartsWith("replaydb epochs 1\n1 "));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  std::vector<TrajectoryInfo> was, is;
  ASSERT_OK(table->ListTrajectories({}, &was));
  ASSERT_OK(rt->ListTrajectories({}, &is));
  ASSERT_EQ(was.size(), is.size());
  for (size_t i = 0; i < was.size(); ++i) {
    EXPECT_EQ(was[i].id, is[i].id);
    EXPECT_EQ(was[i].length, is[i].length);
    EXPECT_TRUE(is[i].ended);
    if (!was[i].ended) {
      EXPECT_EQ(is[i].end_reason, EndReason::kTruncated);
    }
  }
  open.reset();
  std::unique_ptr<TrajectoryWriter> onward;
  Write(*rt, rng, 3, &onward);
  // Restarted, the old primary stays fenced.
  p.reset();
  table.reset();
  primary.Stop();
  Served again(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto q, DB::Connect(again.address()));
  EXPECT_THAT(q->CreateTable(other).status().message(),
              HasSubstr("epoch 1's primary is " + replica.address()));
  // The new primary is promoted no further.
  auto [twice, said] = Promote({replica.address()});
  EXPECT_EQ(twice, 1) << said;
  EXPECT_THAT(said, HasSubstr("this server is a primary (epoch 1), not a read replica"));
}

// A static cluster's file (`file`): nodes p (`primary`) and r (`replica`),
// `who` the primary; replaced whole, as a coordinator reads it.
void NamePrimary(const std::string& file, const Served& primary, const Served& replica,
                 const char* who) {
  std::ofstream(file + ".new") << "node p " << primary.address() << "\nnode r " << replica.address()
                               << "\nprimary " << who << "\n";
  std::filesystem::rename(file + ".new", file);
}

// A client connected through a cluster's coordinator (here a static file)
// follows its primary: a write the fenced old primary refuses is made again
// on the primary the file names, and later calls go there; so does a
// writer opened before, its trajectory resumed there.
TEST(ReplicationTest, AClientOfAClusterFollowsItsPrimaryToThePromotedReplica) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
  const std::string file = dir.Sub("cluster");
  NamePrimary(file, primary, replica, "p");
  const std::string cluster = "file://" + file;
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect(cluster));
  EXPECT_EQ(c->path(), cluster);
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 2 + static_cast<int>(rng() % 3), &open);
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ExpectSameSoon(*p, *r);
  auto [status, out] = Promote({replica.address()});
  ASSERT_EQ(status, 0) << out;
  // While the file still names the old primary, its refusal comes back.
  TableSpec other = Spec();
  other.name = "other";
  const Status refused = c->CreateTable(other).status();
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("epoch 1's primary is " + replica.address()));
  // Once it names the new one, the refused call is made there.
  NamePrimary(file, primary, replica, "r");
  ASSERT_OK(c->CreateTable(other).status());
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo info, c->Replication());
  EXPECT_EQ(info.role, "primary");
  EXPECT_EQ(info.epoch, 1u);
  EXPECT_OK(r->GetTable("other").status());
  EXPECT_EQ(p->GetTable("other").status().code(), Status::Code::kNotFound);
  // The table opened before goes on there too, and so does the writer
  // opened before: its trajectory, open on the old primary, ends on the
  // new one with the step appended now.
  const int64_t length = open->num_steps();
  ASSERT_OK(open->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0));
  ASSERT_OK(open->End(EndReason::kTerminal));
  TrajectorySteps resumed;
  ASSERT_OK_AND_ASSIGN(auto resumed_table, r->GetTable("experience"));
  ASSERT_OK(resumed_table->ReadTrajectory(open->trajectory_id(), 0, 0, &resumed));
  EXPECT_EQ(resumed.info.length, length + 1);
  EXPECT_EQ(resumed.info.end_reason, EndReason::kTerminal);
  open.reset();
  const int64_t before = table->Info().num_trajectories;
  Write(*table, rng, 2, &open);
  ASSERT_OK(open->End(EndReason::kTerminal));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  EXPECT_EQ(rt->Info().num_trajectories, before + 2);
  SampleBatch batch;
  EXPECT_OK(table->Sample(4, {}, &batch));
  // A cluster whose primary does not answer: Unavailable once the connect
  // timeout has passed, saying why.
  const std::string gone = "ucx://127.0.0.1:" + std::to_string(testing_util::FreePort());
  std::ofstream(dir.Sub("headless")) << "node p " << gone << "\nprimary p\n";
  ConnectOptions quick;
  quick.connect_timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  const Status none = DB::Connect("file://" + dir.Sub("headless"), quick).status();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);  // (no attempt in its last 100 ms)
  EXPECT_EQ(none.code(), Status::Code::kUnavailable) << none.ToString();
  EXPECT_THAT(none.message(),
              HasSubstr("the cluster of file://" + dir.Sub("headless") +
                        " has no primary that answers (its primary " + gone + ": "));
  // A primary that refuses this client (it requires a token): at once, in
  // its words, not waited out as if it were away.
  const std::string tokens = dir.Sub("tokens");
  std::ofstream(tokens) << "read-write " << std::string(40, "0123456789abcdef"[rng() % 16]) << "\n";
  std::filesystem::permissions(
      tokens, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  Served guarded(dir.Sub("guarded"), {"--token-file", tokens});
  std::ofstream(dir.Sub("guarded-cluster")) << "node g " << guarded.address() << "\nprimary g\n";
  ConnectOptions patient;
  patient.connect_timeout = 20s;
  const auto t1 = std::chrono::steady_clock::now();
  const Status refused_client =
      DB::Connect("file://" + dir.Sub("guarded-cluster"), patient).status();
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 10s);
  EXPECT_EQ(refused_client.code(), Status::Code::kFailedPrecondition) << refused_client.ToString();
  EXPECT_THAT(refused_client.message(),
              HasSubstr("the primary " + guarded.address() + " of file://" +
                        dir.Sub("guarded-cluster") + ": server "));
  EXPECT_THAT(refused_client.message(), HasSubstr("requires a token"));
  patient.token_file = tokens;
  EXPECT_OK(DB::Connect("file://" + dir.Sub("guarded-cluster"), patient).status());
}

// The steps a test's writer appended, column by column, as
// ReadTrajectory gives them back.
struct Appended {
  std::vector<std::string> columns = std::vector<std::string>(Spec().columns.size());
  int64_t steps = 0;

  void Add(const testing_util::StepData& step) {
    for (size_t c = 0; c < columns.size(); ++c) {
      columns[c].append(reinterpret_cast<const char*>(step.columns[c].data()),
                        step.columns[c].size());
    }
    ++steps;
  }
  // `more`'s steps after these.
  void Add(const Appended& more) {
    for (size_t c = 0; c < columns.size(); ++c) columns[c] += more.columns[c];
    steps += more.steps;
  }
};

// Whether `table` holds `want` as trajectory `id`, ended with `reason`;
// what differs where not.
std::string Differs(Table& table, uint64_t id, const Appended& want, EndReason reason) {
  TrajectorySteps got;
  const Status read = table.ReadTrajectory(id, 0, want.steps, &got);
  if (!read.ok()) return read.ToString();
  if (got.info.length != want.steps) {
    return "length " + std::to_string(got.info.length) + ", appended " + std::to_string(want.steps);
  }
  if (!got.info.ended || got.info.end_reason != reason) return "not ended as it was";
  for (size_t c = 0; c < want.columns.size(); ++c) {
    const std::string bytes(reinterpret_cast<const char*>(got.columns[c].data()),
                            got.columns[c].size_bytes());
    if (bytes != want.columns[c]) return "column " + std::to_string(c) + "'s bytes differ";
  }
  return "";
}

// Waits (bounded) until one of `primary`'s replicas is in sync.
void WaitInSync(DB& primary) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    Result<ReplicationInfo> info = primary.Replication();
    if (info.ok()) {
      for (const ReplicaProgress& r : info->replicas) {
        if (r.in_sync) return;
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  FAIL() << "no replica came in sync in 60 s";
}

// A primary, its replica (which keeps its old primary's open trajectories
// for `window_ms` once promoted) and a static cluster file naming the
// primary: where the failover tests of cluster writers start.
struct PrimaryAndReplica {
  PrimaryAndReplica(const testing_util::TempDir& dir, const std::string& window_ms)
      : primary(dir.Sub("primary")),
        replica(dir.Sub("replica"),
                {"--replica-of", primary.address(), "--resume-window-ms", window_ms}),
        file(dir.Sub("cluster")) {
    NamePrimary(file, primary, replica, "p");
  }
  // Waits (bounded) until the replica is in sync with the primary.
  void WaitReplicaInSync() {
    ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
    WaitInSync(*p);
  }
  // SIGKILLs the primary and promotes the replica (--old-primary-dead).
  void KillAndPromote() {
    primary.Kill();
    auto [status, out] = Promote({replica.address(), "--old-primary-dead"});
    ASSERT_EQ(status, 0) << out;
  }
  // Starts a replica of the promoted one (for its replicated(1) appends)
  // and waits until it is in sync (`promoted`: connected to it).
  void StartNextReplica(const testing_util::TempDir& dir, DB& promoted) {
    next = std::make_unique<Served>(dir.Sub("next"),
                                    std::vector<std::string>{"--replica-of", replica.address()});
    WaitInSync(promoted);
  }
  // The cluster's file names the promoted replica.
  void NameReplica() { NamePrimary(file, primary, replica, "r"); }

  Served primary;
  Served replica;
  const std::string file;
  std::unique_ptr<Served> next;  // StartNextReplica's
};

// A writer connected through a cluster's coordinator follows its primary
// too: its trajectory, open when the primary is SIGKILLed with appends in
// flight, goes on on the promoted replica, which resumes it where it has
// it: each step stored once and in order (the appends sent again say their
// first step), nothing acknowledged lost (replicated(1)). A second
// writer's trajectory begins just before the kill (on the replica or not).
TEST(ReplicationTest, AClusterWritersTrajectoryGoesOnWholeOnThePromotedReplica) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "60000");
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(Spec()));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto first, table->NewWriter(o));
  ASSERT_OK_AND_ASSIGN(auto second, table->NewWriter(o));
  Appended done, going, late;
  for (int s = 0, n = 1 + static_cast<int>(rng() % 30); s < n; ++s) {
    const testing_util::StepData step = testing_util::RandomStep(Spec(), rng);
    ASSERT_OK(first->Append(step.tensors, 1.0));
    done.Add(step);
  }
  ASSERT_OK(first->End(EndReason::kTerminal));
  const uint64_t done_id = first->trajectory_id();
  // Appends sent ahead: some are in flight when the primary dies.
  const auto append = [&](TrajectoryWriter& w, Appended& to, int n) {
    for (int s = 0; s < n; ++s) {
      const testing_util::StepData step = testing_util::RandomStep(Spec(), rng);
      const Status appended = w.Append(step.tensors, 1.0);
      ASSERT_TRUE(appended.ok()) << "step " << to.steps << ": " << appended.ToString();
      to.Add(step);
    }
  };
  append(*first, going, 20 + static_cast<int>(rng() % 200));
  append(*second, late, 1 + static_cast<int>(rng() % 3));
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  pr.NameReplica();
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  append(*first, going, 1 + static_cast<int>(rng() % 50));
  append(*second, late, 1 + static_cast<int>(rng() % 50));
  ASSERT_OK(first->End(EndReason::kTruncated));
  ASSERT_OK(second->End(EndReason::kTerminal));
  const uint64_t going_id = first->trajectory_id();
  const uint64_t late_id = second->trajectory_id();
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  EXPECT_EQ(rt->Info().num_trajectories, 3) << testing_util::TableContents(*rt);
  EXPECT_EQ(Differs(*rt, done_id, done, EndReason::kTerminal), "");
  EXPECT_EQ(Differs(*rt, going_id, going, EndReason::kTruncated), "");
  EXPECT_EQ(Differs(*rt, late_id, late, EndReason::kTerminal), "");
}

// A writer that comes back after its trajectory was ended on the new
// primary (here at once: --resume-window-ms 0) is told which steps were
// not stored, and the table object's new writers go on there.
TEST(ReplicationTest, AClusterWriterWhoseTrajectoryEndedOnThePromotedReplicaIsToldWhatWasLost) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "0");
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(Spec()));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter(o));
  const int64_t steps = 1 + static_cast<int64_t>(rng() % 20);
  for (int64_t s = 0; s < steps; ++s) {
    ASSERT_OK(writer->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0));
  }
  const uint64_t id = writer->trajectory_id();  // (every append acknowledged)
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  pr.NameReplica();
  Status lost = writer->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0);
  if (lost.ok()) lost = writer->End(EndReason::kTerminal);
  EXPECT_EQ(lost.code(), Status::Code::kFailedPrecondition) << lost.ToString();
  EXPECT_THAT(lost.message(),
              HasSubstr("table 'experience': its writer could not resume trajectory " +
                        std::to_string(id) + " on the new primary after \""));
  EXPECT_THAT(lost.message(),
              HasSubstr("\": it was ended there (truncated) with " + std::to_string(steps) +
                        " steps (its writer's connection ended, or no writer resumed it within "
                        "DBOptions::writer_resume_window); the 1 steps after those were not "
                        "stored"));
  // The writer is done: later calls say why.
  const Status after = writer->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0);
  EXPECT_EQ(after.code(), Status::Code::kFailedPrecondition) << after.ToString();
  EXPECT_EQ(after.message(), lost.message());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  TrajectorySteps read;
  ASSERT_OK(rt->ReadTrajectory(id, 0, 0, &read));
  EXPECT_EQ(read.info.length, steps);
  EXPECT_EQ(read.info.end_reason, EndReason::kTruncated);
  writer.reset();
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  ASSERT_OK_AND_ASSIGN(auto again, table->NewWriter(o));
  ASSERT_OK(again->Append(testing_util::RandomStep(Spec(), rng).tensors, 1.0));
  ASSERT_OK(again->End(EndReason::kTerminal));
}

// One vector step of `envs` random rows, each environment's row added to
// `appended[e]` once `append` (given the step's columns) returns OK; the
// rows in *sent where that is not null.
Status AppendVectorStep(std::mt19937_64& rng, size_t envs,
                        const std::function<Status(std::span<const ConstTensor>)>& append,
                        std::vector<Appended>& appended,
                        std::vector<testing_util::StepData>* sent = nullptr) {
  const TableSpec spec = Spec();
  std::vector<testing_util::StepData> rows;
  for (size_t e = 0; e < envs; ++e) rows.push_back(testing_util::RandomStep(spec, rng));
  std::vector<std::vector<std::byte>> columns(spec.columns.size());
  std::vector<ConstTensor> tensors;
  for (size_t c = 0; c < columns.size(); ++c) {
    for (const auto& row : rows) {
      columns[c].insert(columns[c].end(), row.columns[c].begin(), row.columns[c].end());
    }
    const ColumnSpec& col = spec.columns[c];
    tensors.push_back({col.dtype, col.shape.Prepend(static_cast<int64_t>(envs)), columns[c].data(),
                       columns[c].size()});
  }
  const Status s = append(tensors);
  if (s.ok()) {
    for (size_t e = 0; e < envs; ++e) appended[e].Add(rows[e]);
  }
  if (sent != nullptr) *sent = std::move(rows);
  return s;
}

// A vector writer connected through a cluster's coordinator follows its
// primary too: the primary is SIGKILLed while a step or an End is in
// flight (on another thread: it reached the replica or not), and every
// environment's trajectory goes on on the promoted replica, each step
// stored once and in order (replicated(1): nothing acknowledged lost), each
// End made once; an environment whose trajectory ended begins a new one.
TEST(ReplicationTest, AClusterVectorWritersTrajectoriesGoOnWholeOnThePromotedReplica) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "60000");
  ConnectOptions patient;  // (the in-flight step waits out the promotion below)
  patient.connect_timeout = 60s;
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file, patient));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(Spec()));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  const size_t envs = 2 + rng() % 3;
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(envs, o));
  const std::vector<double> priorities(envs, 1.0);
  const auto append = [&](std::span<const ConstTensor> t) { return writer->Append(t, priorities); };
  // Each environment's trajectories: those ended (id, steps, how), and the
  // open one's steps.
  struct Ended {
    uint64_t id;
    Appended steps;
    EndReason reason;
  };
  std::vector<std::vector<Ended>> ended(envs);
  std::vector<Appended> open(envs);
  const auto steps = [&](int n) {
    for (int s = 0; s < n; ++s) ASSERT_OK(AppendVectorStep(rng, envs, append, open));
  };
  const auto end = [&](size_t e, EndReason reason) {
    const uint64_t id = writer->trajectory_id(e);
    ASSERT_OK(writer->End(e, reason));
    ended[e].push_back(Ended{id, std::move(open[e]), reason});
    open[e] = Appended();
  };
  steps(1 + static_cast<int>(rng() % 10));
  end(0, EndReason::kTerminal);
  steps(1 + static_cast<int>(rng() % 10));
  // A step or an End in flight when the primary dies.
  const auto pause = std::chrono::microseconds(rng() % 3000);
  const bool end_in_flight = rng() % 2 == 0;
  std::mt19937_64 thread_rng(rng());
  std::thread in_flight([&] {
    if (end_in_flight) {
      end(envs - 1, EndReason::kTruncated);
    } else {
      EXPECT_OK(AppendVectorStep(thread_rng, envs, append, open));
    }
  });
  std::this_thread::sleep_for(pause);
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  pr.NameReplica();
  in_flight.join();
  steps(1 + static_cast<int>(rng() % 10));
  if (!end_in_flight) end(envs - 1, EndReason::kTruncated);
  steps(1 + static_cast<int>(rng() % 10));
  for (size_t e = 0; e < envs; ++e) end(e, EndReason::kTerminal);
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  int64_t trajectories = 0;
  for (size_t e = 0; e < envs; ++e) {
    for (const Ended& t : ended[e]) {
      ++trajectories;
      EXPECT_EQ(Differs(*rt, t.id, t.steps, t.reason), "")
          << "environment " << e << ", trajectory " << t.id;
    }
  }
  EXPECT_EQ(rt->Info().num_trajectories, trajectories) << testing_util::TableContents(*rt);
}

// A vector writer whose environment's trajectory was evicted on the primary
// (its append failed for that environment alone; the other took the step)
// goes on through a failover right after: what it compares against is what
// the server stored, not its own count of the steps it sent.
TEST(ReplicationTest, AClusterVectorWriterFollowsAFailoverRightAfterAnEnvironmentWasEvicted) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "60000");
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file));
  TableSpec spec = Spec();
  spec.capacity_steps = 4 * spec.block_steps;  // four trajectories at most
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(spec));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(2, o));
  const std::vector<double> priorities(2, 1.0);
  const auto append = [&](std::span<const ConstTensor> t) { return writer->Append(t, priorities); };
  std::vector<Appended> open(2);
  // Both trajectories grow until the hot tier is full and one's next block
  // evicts the other.
  Status evicted;
  std::vector<testing_util::StepData> last;
  for (int s = 0; s < 100 && evicted.ok(); ++s) {
    evicted = AppendVectorStep(rng, 2, append, open, &last);
  }
  ASSERT_EQ(evicted.code(), Status::Code::kFailedPrecondition) << evicted.ToString();
  ASSERT_THAT(evicted.message(), HasSubstr("was evicted from the hot tier while open"));
  const uint64_t before[] = {writer->trajectory_id(0), writer->trajectory_id(1)};
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  pr.NameReplica();
  // The evicted environment begins a new trajectory there; the other's
  // goes on, with the step of the failed append.
  std::vector<Appended> after(2);
  const int n = 1 + static_cast<int>(rng() % 5);
  for (int s = 0; s < n; ++s) ASSERT_OK(AppendVectorStep(rng, 2, append, after));
  const uint64_t ids[] = {writer->trajectory_id(0), writer->trajectory_id(1)};
  ASSERT_TRUE((ids[0] != before[0]) != (ids[1] != before[1]))
      << "one environment's trajectory is new: " << before[0] << " " << before[1] << " -> "
      << ids[0] << " " << ids[1];
  ASSERT_OK(writer->End(0, EndReason::kTruncated));
  ASSERT_OK(writer->End(1, EndReason::kTerminal));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  for (size_t e = 0; e < 2; ++e) {
    Appended want = after[e];
    if (ids[e] == before[e]) {
      want = open[e];
      want.Add(last[e]);
      want.Add(after[e]);
    }
    EXPECT_EQ(Differs(*rt, ids[e], want, e == 0 ? EndReason::kTruncated : EndReason::kTerminal), "")
        << "environment " << e;
  }
}

// A vector step that the primary logged in parts (its rate limiter let the
// first environments in, then waited for samples) and that the primary
// died waiting to finish: the promoted replica holds it for those
// environments only. The writer sends it again there, and only the others
// take it: every environment's trajectory holds each step once, in order.
TEST(ReplicationTest, AClusterVectorWritersStepLoggedInPartsIsFinishedOnThePromotedReplica) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "60000");
  ConnectOptions patient;  // (the step in flight waits out the promotion below)
  patient.connect_timeout = 60s;
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file, patient));
  const size_t envs = 3 + rng() % 4;
  const int64_t before = 1 + static_cast<int64_t>(rng() % 3);             // whole steps first
  const int64_t admitted = 1 + static_cast<int64_t>(rng() % (envs - 1));  // of the next
  TableSpec spec = Spec();
  spec.sequence_length = 1;  // (each row an item, which the rate limiter counts)
  // Without samples, inserts stop once the table holds the whole steps and
  // `admitted` rows of the next; samples never wait.
  spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(
      1.0, 1, -1e9, static_cast<double>(before * static_cast<int64_t>(envs) + admitted));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(spec));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.timeout = 120s;  // (the step in parts waits on the primary until it is killed)
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(envs, o));
  const std::vector<double> priorities(envs, 1.0);
  const auto append = [&](std::span<const ConstTensor> t) { return writer->Append(t, priorities); };
  std::vector<Appended> open(envs);
  for (int64_t s = 0; s < before; ++s) ASSERT_OK(AppendVectorStep(rng, envs, append, open));
  std::vector<uint64_t> ids(envs);
  for (size_t e = 0; e < envs; ++e) ids[e] = writer->trajectory_id(e);
  std::mt19937_64 thread_rng(rng());
  std::thread in_parts([&] { EXPECT_OK(AppendVectorStep(thread_rng, envs, append, open)); });
  // The first part on the replica; the rest waits on the primary.
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  const int64_t first_part = before * static_cast<int64_t>(envs) + admitted;
  const bool arrived =
      testing_util::WaitUntil(30s, [&] { return rt->Info().num_steps == first_part; });
  // (Room for the rest of the step and the ones after it on the replica,
  // which counts its own samples: they are not logged.)
  SampleBatch batch;
  if (arrived) EXPECT_OK(rt->Sample(512, SampleOptions{}, &batch));
  pr.primary.Kill();
  if (!arrived) {
    in_parts.join();
    FAIL() << "the replica never held the step's first part: " << rt->Info().num_steps
           << " steps, not " << first_part;
  }
  auto [status, out] = Promote({pr.replica.address(), "--old-primary-dead"});
  ASSERT_EQ(status, 0) << out;
  NamePrimary(pr.file, pr.primary, pr.replica, "r");
  in_parts.join();
  EXPECT_EQ(rt->Info().num_steps, (before + 1) * static_cast<int64_t>(envs));
  const int n = 1 + static_cast<int>(rng() % 5);
  for (int s = 0; s < n; ++s) ASSERT_OK(AppendVectorStep(rng, envs, append, open));
  for (size_t e = 0; e < envs; ++e) {
    EXPECT_EQ(writer->trajectory_id(e), ids[e]) << "environment " << e;
    ASSERT_OK(writer->End(e, EndReason::kTerminal));
  }
  for (size_t e = 0; e < envs; ++e) {
    EXPECT_EQ(Differs(*rt, ids[e], open[e], EndReason::kTerminal), "") << "environment " << e;
  }
  EXPECT_EQ(rt->Info().num_trajectories, static_cast<int64_t>(envs));
}

// A vector writer that comes back after its trajectories were ended on the
// new primary (here at once: --resume-window-ms 0) is told which
// environment's trajectory, and that the step was not stored; its later
// calls say the same.
TEST(ReplicationTest, AClusterVectorWriterWhoseTrajectoriesEndedOnThePromotedReplicaIsToldSo) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "0");
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(Spec()));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  const size_t envs = 1 + rng() % 3;
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(envs, o));
  const std::vector<double> priorities(envs, 1.0);
  const auto append = [&](std::span<const ConstTensor> t) { return writer->Append(t, priorities); };
  std::vector<Appended> open(envs);
  const int64_t steps = 1 + static_cast<int64_t>(rng() % 10);
  for (int64_t s = 0; s < steps; ++s) ASSERT_OK(AppendVectorStep(rng, envs, append, open));
  const uint64_t id = writer->trajectory_id(0);
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  pr.NameReplica();
  const Status lost = AppendVectorStep(rng, envs, append, open);
  EXPECT_EQ(lost.code(), Status::Code::kFailedPrecondition) << lost.ToString();
  EXPECT_THAT(lost.message(),
              HasSubstr("table 'experience': its vector writer could not resume on the new "
                        "primary after \""));
  EXPECT_THAT(lost.message(),
              HasSubstr("\": environment 0's trajectory " + std::to_string(id) +
                        " was ended there (truncated) with " + std::to_string(steps) +
                        " steps (its writer's connection ended, or no writer resumed it within "
                        "DBOptions::writer_resume_window); the step appended after its " +
                        std::to_string(steps) + " acknowledged ones was not stored"));
  const Status after = writer->End(0, EndReason::kTerminal);
  EXPECT_EQ(after.code(), Status::Code::kFailedPrecondition) << after.ToString();
  EXPECT_EQ(after.message(), lost.message());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  for (size_t e = 0; e < envs; ++e) {
    TrajectorySteps read;
    ASSERT_OK(rt->ReadTrajectory(writer->trajectory_id(e), 0, 0, &read));
    EXPECT_EQ(read.info.length, steps) << "environment " << e;
    EXPECT_EQ(read.info.end_reason, EndReason::kTruncated);
  }
}

// A vector table (TableSpec::lanes) of `lanes` environments and segments of
// 4 steps, Spec()'s columns.
TableSpec VectorTableSpec(int64_t lanes) {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = Spec().columns;
  spec.capacity_steps = 8192;
  spec.block_steps = 4;
  spec.lanes = lanes;
  return spec;
}

// The steps acknowledged to a vector table's writer, each column's bytes
// one after another.
struct VectorTableSteps {
  explicit VectorTableSteps(TableSpec table)
      : spec(std::move(table)), columns(spec.columns.size()) {}
  // A random step through `writer`, kept where it is acknowledged.
  Status Append(VectorWriter& writer, std::mt19937_64& rng) {
    std::vector<std::vector<std::byte>> bytes;
    std::vector<ConstTensor> tensors;
    for (const ColumnSpec& col : spec.columns) {
      std::vector<std::byte> b(col.step_bytes() * static_cast<size_t>(spec.lanes));
      for (std::byte& x : b) x = static_cast<std::byte>(rng());
      bytes.push_back(std::move(b));
    }
    for (size_t c = 0; c < bytes.size(); ++c) {
      tensors.push_back({spec.columns[c].dtype, spec.columns[c].shape.Prepend(spec.lanes),
                         bytes[c].data(), bytes[c].size()});
    }
    const Status s = writer.Append(tensors);
    if (s.ok()) {
      for (size_t c = 0; c < bytes.size(); ++c) {
        columns[c].append(reinterpret_cast<const char*>(bytes[c].data()), bytes[c].size());
      }
      ++steps;
    }
    return s;
  }
  // "" where `table`'s segments, in the order of their ids, hold exactly
  // the steps acknowledged (each once, in order; none longer than a block);
  // else what differs.
  std::string Differs(Table& table) const {
    std::vector<TrajectoryInfo> infos = table.ListTrajectories();
    std::sort(infos.begin(), infos.end(),
              [](const TrajectoryInfo& a, const TrajectoryInfo& b) { return a.id < b.id; });
    std::vector<std::string> got(columns.size());
    int64_t held = 0;
    for (const TrajectoryInfo& info : infos) {
      if (info.length > spec.block_steps) {
        return "segment " + std::to_string(info.id) + " holds " + std::to_string(info.length) +
               " steps";
      }
      TrajectorySteps read;
      const Status s = table.ReadTrajectory(info.id, 0, info.length, &read);
      if (!s.ok()) return s.ToString();
      for (size_t c = 0; c < got.size(); ++c) {
        got[c].append(reinterpret_cast<const char*>(read.columns[c].data()),
                      read.columns[c].size_bytes());
      }
      held += info.length;
    }
    if (held != steps) {
      return std::to_string(held) + " steps in " + std::to_string(infos.size()) + " segments; " +
             std::to_string(steps) + " acknowledged";
    }
    for (size_t c = 0; c < got.size(); ++c) {
      if (got[c] != columns[c]) return "column " + std::to_string(c) + "'s bytes differ";
    }
    return "";
  }

  TableSpec spec;
  std::vector<std::string> columns;
  int64_t steps = 0;
};

// A vector table's writer (lanes > 1) connected through a cluster's
// coordinator follows its primary too: each step's record carries its
// segment's key, and the promoted replica resumes the segment it holds. A
// step in flight when the primary is SIGKILLed (it reached the replica or
// not) is stored once; segments go on rolling over at block_steps; nothing
// acknowledged (replicated(1)) is lost, and every step is stored once, in
// order.
TEST(ReplicationTest, AClusterVectorTablesWriterGoesOnWholeOnThePromotedReplica) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "60000");
  ConnectOptions patient;  // (the in-flight step waits out the promotion below)
  patient.connect_timeout = 60s;
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file, patient));
  VectorTableSteps acked(VectorTableSpec(2 + static_cast<int64_t>(rng() % 3)));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(acked.spec));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(acked.spec.lanes, o));
  const auto steps = [&](int n) {
    for (int s = 0; s < n; ++s) ASSERT_OK(acked.Append(*writer, rng));
  };
  steps(1 + static_cast<int>(rng() % 10));
  ASSERT_OK(writer->End(0, EndReason::kTerminal));  // (changes nothing)
  // A step in flight when the primary dies.
  const auto pause = std::chrono::microseconds(rng() % 3000);
  std::mt19937_64 thread_rng(rng());
  std::thread in_flight([&] { EXPECT_OK(acked.Append(*writer, thread_rng)); });
  std::this_thread::sleep_for(pause);
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  pr.NameReplica();
  in_flight.join();
  steps(1 + static_cast<int>(rng() % 10));
  ASSERT_OK(writer->End(acked.spec.lanes - 1, EndReason::kTruncated));
  steps(1 + static_cast<int>(rng() % 10));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  EXPECT_EQ(acked.Differs(*rt), "") << testing_util::TableContents(*rt);
}

// A vector table's segment that was ended on the new primary (here at once:
// --resume-window-ms 0) held every step acknowledged, so its writer loses
// nothing: its next step begins the next segment there.
TEST(ReplicationTest, AClusterVectorTablesWriterWhoseSegmentEndedOnThePromotedReplicaGoesOn) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  PrimaryAndReplica pr(dir, "0");
  ASSERT_OK_AND_ASSIGN(auto c, DB::Connect("file://" + pr.file));
  VectorTableSteps acked(VectorTableSpec(2 + static_cast<int64_t>(rng() % 3)));
  ASSERT_OK_AND_ASSIGN(auto table, c->CreateTable(acked.spec));
  ASSERT_NO_FATAL_FAILURE(pr.WaitReplicaInSync());
  WriterOptions o;
  o.acks = Acks::Replicated(1);
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(acked.spec.lanes, o));
  // (Its open segment holds 1 to 3 steps of 4.)
  const int first = 4 * static_cast<int>(rng() % 3) + 1 + static_cast<int>(rng() % 3);
  for (int s = 0; s < first; ++s) ASSERT_OK(acked.Append(*writer, rng));
  const uint64_t open = writer->trajectory_id(0);
  ASSERT_NO_FATAL_FAILURE(pr.KillAndPromote());
  pr.NameReplica();
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(pr.replica.address()));
  ASSERT_NO_FATAL_FAILURE(pr.StartNextReplica(dir, *r));
  ASSERT_OK(acked.Append(*writer, rng));
  EXPECT_NE(writer->trajectory_id(0), open) << "the step went to the segment ended there";
  for (int s = 0; s < 5; ++s) ASSERT_OK(acked.Append(*writer, rng));
  ASSERT_OK_AND_ASSIGN(auto rt, r->GetTable("experience"));
  TrajectorySteps ended;
  ASSERT_OK(rt->ReadTrajectory(open, 0, 0, &ended));
  EXPECT_TRUE(ended.info.ended);
  EXPECT_EQ(acked.Differs(*rt), "") << testing_util::TableContents(*rt);
}

TEST(ReplicationTest, APromotionWhoseOldPrimaryIsOutOfReachWaitsUntilItIsKnownDead) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
  {
    ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
    ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
    std::unique_ptr<TrajectoryWriter> open;
    Write(*table, rng, 3, &open);
    open.reset();
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
  }
  primary.Kill();
  auto [refused, why] = Promote({replica.address()});
  EXPECT_EQ(refused, 1) << why;
  EXPECT_THAT(why, HasSubstr("not promoted: the old primary " + primary.address() +
                             " cannot be reached to fence it"));
  EXPECT_THAT(why, HasSubstr("replaydb promote --old-primary-dead"));
  auto [status, out] = Promote({replica.address(), "--old-primary-dead"});
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("the primary of epoch 1"));
  ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
  ASSERT_OK_AND_ASSIGN(auto table, r->GetTable("experience"));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 2, &open);
  EXPECT_FALSE(replica.WaitFor(std::regex("(it is taken as dead)"), 10s).empty())
      << replica.output();
}

TEST(ReplicationTest, AReplicaStopsFollowingAPrimaryOfAnEarlierEpoch) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  Served primary(dir.Sub("primary"));
  ASSERT_OK_AND_ASSIGN(auto p, DB::Connect(primary.address()));
  ASSERT_OK_AND_ASSIGN(auto table, p->CreateTable(Spec()));
  std::unique_ptr<TrajectoryWriter> open;
  Write(*table, rng, 2, &open);
  {
    Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
    ASSERT_OK_AND_ASSIGN(auto r, DB::Connect(replica.address()));
    ExpectSameSoon(*p, *r);
  }
  // As if this replica had followed a later primary (epoch 3).
  std::ofstream(dir.Sub("replica") + "/EPOCHS") << "replaydb epochs 1\n3 1 0\n";
  Served replica(dir.Sub("replica"), {"--replica-of", primary.address()});
  EXPECT_FALSE(replica
                   .WaitFor(std::regex("(is in epoch 0, behind this replica's epoch 3: it was "
                                       "deposed)"),
                            30s)
                   .empty())
      << replica.output();
}

}  // namespace
}  // namespace replaydb
