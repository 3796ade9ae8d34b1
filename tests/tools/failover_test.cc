// Automatic failover (docs/replication.md, "Automatic failover"): a real
// etcd (tests/rdma/etcd_process.h) and three `replaydb serve --coordinator`
// processes on 127.0.0.1. A primary killed with SIGKILL under a writer's
// load is replaced, and nothing the writer had acknowledged under
// replicated(1) is lost; the old primary, restarted, rejoins as a replica
// and every copy agrees. A primary cut from etcd stops acknowledging; one
// stopped (SIGSTOP) past its session is deposed and its late writes
// refused. A primary cut off by a network partition (network namespaces,
// PartitionTest) is replaced and rejoins when healed. A static file's
// cluster follows a promotion by name. Bounded waits only; every process
// started is stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/cluster.h"
#include "replaydb/db.h"
#include "tests/rdma/etcd_process.h"
#include "tests/test_util.h"
#include "tests/tools/serve_process.h"
#include "wal/replica_set.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing_util::ServeProcess;
using testing_util::WaitUntil;

// The token file the nodes require and the clients prove (empty: none;
// PartitionTest's nodes listen on addresses other than loopback).
std::string& TokenFile() {
  static std::string file;
  return file;
}
ConnectOptions Connecting() {
  ConnectOptions o;
  o.token_file = TokenFile();
  return o;
}

TableSpec Spec() {
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kU8, Shape{24}}, {"reward", DType::kF32, Shape{}}};
  spec.capacity_steps = 1 << 16;
  spec.block_steps = 16;
  spec.sequence_length = 2;
  spec.acks = Acks{AckMode::kReplicated, 1};
  return spec;
}

// A node: `replaydb serve DIR --listen ucx://HOST:PORT --name NAME
// --coordinator C`, started again on the same port and directory. HOST:
// 127.0.0.1, or the address of a network namespace `netns` it runs in.
class Node {
 public:
  Node(std::string name, std::string dir, std::string coordinator, std::string netns = "",
       std::string host = "127.0.0.1")
      : name_(std::move(name)),
        dir_(std::move(dir)),
        coordinator_(std::move(coordinator)),
        netns_(std::move(netns)),
        host_(std::move(host)),
        address_("ucx://" + host_ + ":" + std::to_string(testing_util::FreePort())) {}
  ~Node() { Stop(); }
  void Start() {
    std::vector<std::string> prefix;
    if (!netns_.empty()) prefix = {"ip", "netns", "exec", netns_};
    std::vector<std::string> args = {dir_,         "--listen", address_, "--workers",
                                     "1",          "--name",   name_,    "--coordinator",
                                     coordinator_, "--ttl-ms", "2000"};
    if (!TokenFile().empty()) args.insert(args.end(), {"--token-file", TokenFile()});
    process_ = std::make_unique<ServeProcess>(std::move(args), "serve", prefix);
  }
  // Waits for the listening line (its role then known). A node's first
  // start whose port another test took meanwhile (tests run at once) starts
  // again on another (5 tries); a restart keeps its port.
  bool WaitListening() {
    for (int attempt = 0; attempt < 5; ++attempt) {
      const std::string said = process_->WaitFor(
          std::regex("(listening on ucx://[0-9.]+:[0-9]+|cannot listen on)"), 60s);
      if (said == "listening on " + address_) {
        started_ = true;
        return true;
      }
      if (said != "cannot listen on" || started_) break;
      Kill();
      address_ = "ucx://" + host_ + ":" + std::to_string(testing_util::FreePort());
      if (moved) moved();
      Start();
    }
    ADD_FAILURE() << name_ << " did not listen on " << address_ << ":\n" << output();
    return false;
  }
  void Stop() {
    if (!process_) return;
    ::kill(process_->pid(), SIGTERM);
    EXPECT_EQ(process_->Exit(60s), 0) << name_ << ":\n" << process_->output();
    process_.reset();
  }
  void Kill() {
    if (!process_) return;
    ::kill(process_->pid(), SIGKILL);
    process_->Exit(30s);
    process_.reset();
  }
  void Signal(int signal) { ::kill(process_->pid(), signal); }
  std::string WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout) {
    return process_ ? process_->WaitFor(pattern, timeout) : "";
  }
  std::string output() const { return process_ ? process_->output() : ""; }
  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }

 private:
  std::string name_;
  std::string dir_;
  std::string coordinator_;
  std::string netns_;
  std::string host_;
  std::string address_;
  bool started_ = false;  // listened once: its port is its own
  std::unique_ptr<ServeProcess> process_;

 public:
  // Called when a first start moved to another port (a static cluster's
  // file names it).
  std::function<void()> moved;
};

// The primary the coordinator names within `timeout` (other than `not_this`
// when given); empty when none.
std::string WaitForPrimary(const std::string& coordinator, std::chrono::milliseconds timeout,
                           const std::string& not_this = "") {
  for (const auto until = Clock::now() + timeout; Clock::now() < until;
       std::this_thread::sleep_for(50ms)) {
    Result<std::string> primary = ClusterPrimary(coordinator);
    if (primary.ok() && !primary->empty() && *primary != not_this) return *primary;
  }
  return "";
}

// A trajectory as written: each column's bytes, step after step.
struct Written {
  std::vector<std::string> columns;
  int64_t steps = 0;
};

// Writes trajectories of random lengths through the cluster's primary,
// connecting again (through the coordinator) whenever a call fails; keeps
// what each acknowledged trajectory (End returned OK) holds.
class Writer {
 public:
  Writer(std::string coordinator, uint64_t seed)
      : coordinator_(std::move(coordinator)), rng_(seed) {}
  ~Writer() { Stop(); }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int acknowledged() const { return acknowledged_.load(); }
  int failures() const { return failures_.load(); }
  Clock::time_point last_ack() const {
    return Clock::time_point(Clock::duration(last_ack_.load()));
  }
  // REQUIRES: stopped.
  const std::map<uint64_t, Written>& trajectories() const { return acked_; }

 private:
  void Run() {
    std::unique_ptr<DB> db;
    std::shared_ptr<Table> table;
    for (int round = 0; round < 100000 && !stop_; ++round) {
      if (table == nullptr) {
        table.reset();
        db.reset();
        ConnectOptions o = Connecting();
        o.connect_timeout = 1000ms;
        o.call_timeout = 5000ms;
        Result<std::unique_ptr<DB>> c = DB::Connect(coordinator_, o);
        if (!c.ok()) {
          std::this_thread::sleep_for(50ms);
          continue;
        }
        db = std::move(c).value();
        Result<std::shared_ptr<Table>> t = db->GetTable("experience");
        if (!t.ok()) t = db->CreateTable(Spec());
        if (!t.ok()) {
          db.reset();
          std::this_thread::sleep_for(50ms);
          continue;
        }
        table = *t;
      }
      if (!WriteOne(*table)) {
        ++failures_;
        table.reset();
        std::this_thread::sleep_for(20ms);
      }
    }
  }
  bool WriteOne(Table& table) {
    Result<std::unique_ptr<TrajectoryWriter>> w = table.NewWriter();
    if (!w.ok()) return false;
    Written written;
    written.columns.resize(Spec().columns.size());
    const int steps = 1 + static_cast<int>(rng_() % 12);
    for (int s = 0; s < steps; ++s) {
      const testing_util::StepData step = testing_util::RandomStep(Spec(), rng_);
      for (size_t c = 0; c < step.columns.size(); ++c) {
        written.columns[c].append(reinterpret_cast<const char*>(step.columns[c].data()),
                                  step.columns[c].size());
      }
      if (!(*w)->Append(step.tensors).ok()) return false;
    }
    if (!(*w)->End(EndReason::kTerminal).ok()) return false;
    written.steps = steps;
    acked_[(*w)->trajectory_id()] = std::move(written);
    ++acknowledged_;
    last_ack_ = Clock::now().time_since_epoch().count();
    return true;
  }

  const std::string coordinator_;
  std::mt19937_64 rng_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> acknowledged_{0};
  std::atomic<int> failures_{0};
  std::atomic<Clock::rep> last_ack_{0};
  std::map<uint64_t, Written> acked_;  // the writer thread's until it stops
};

// A primary whose last renewal of its coordinator session came late refuses
// writes (Unavailable, "try again") until its next renewal: seen under a
// parallel ctest on two cores, where etcd answered a renewal 1.5 s late. A
// client tries again, as this does: `f` until it returns anything but
// Unavailable, for 10 s at most.
Status RetriedWhileUnavailable(const std::function<Status()>& f) {
  Status s;
  (void)WaitUntil(10s, [&] {
    s = f();
    return s.code() != Status::Code::kUnavailable;
  });
  return s;
}

// One step appended to table "experience" straight at `address` (not
// through the coordinator), waiting for its own acknowledgment: OK only if
// that server acknowledged it. Connects for 500 ms at most.
Status SyncedAppendAt(const std::string& address, std::mt19937_64& rng) {
  ConnectOptions o = Connecting();
  o.connect_timeout = 500ms;
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> db, DB::Connect(address, o));
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> t, db->GetTable("experience"));
  WriterOptions sync;
  sync.sync = true;
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> w, t->NewWriter(sync));
  return w->Append(testing_util::RandomStep(Spec(), rng).tensors);
}

// The table's contents at `address` (empty where it cannot be read).
std::string ContentsAt(const std::string& address) {
  Result<std::unique_ptr<DB>> db = DB::Connect(address, Connecting());
  if (!db.ok()) return "";
  Result<std::shared_ptr<Table>> t = (*db)->GetTable("experience");
  return t.ok() ? testing_util::TableContents(**t) : "";
}

// Every acknowledged trajectory is on the database at `address`, ended,
// byte for byte.
void ExpectHolds(const std::string& address, const std::map<uint64_t, Written>& acked) {
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(address, Connecting()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("experience"));
  std::vector<TrajectoryInfo> infos;
  ASSERT_OK(table->ListTrajectories({}, &infos));
  std::map<uint64_t, TrajectoryInfo> by_id;
  for (const TrajectoryInfo& t : infos) by_id[t.id] = t;
  int lost = 0;
  for (const auto& [id, written] : acked) {
    auto it = by_id.find(id);
    if (it == by_id.end() || it->second.length != written.steps || !it->second.ended) {
      ++lost;
      continue;
    }
    TrajectorySteps steps;
    ASSERT_OK(table->ReadTrajectory(id, 0, written.steps, &steps));
    for (size_t c = 0; c < written.columns.size(); ++c) {
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(steps.columns[c].data()),
                            steps.columns[c].size_bytes()),
                written.columns[c])
          << "trajectory " << id << ", column " << c;
    }
  }
  EXPECT_EQ(lost, 0) << "of " << acked.size() << " acknowledged trajectories";
}

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = testing_util::EtcdProcess::Missing(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    etcd_ = std::make_unique<testing_util::EtcdProcess>(dir_.Sub("etcd"));
    coordinator_ = "etcd://" + etcd_->endpoint() + "/failover";
    for (const char* name : {"a", "b", "c"}) {
      nodes_.push_back(std::make_unique<Node>(name, dir_.Sub(name), coordinator_));
    }
    for (auto& n : nodes_) n->Start();
    for (auto& n : nodes_) ASSERT_TRUE(n->WaitListening());
  }
  void TearDown() override {
    for (auto& n : nodes_) n->Stop();
    nodes_.clear();
    etcd_.reset();
  }
  Node* NodeAt(const std::string& address) {
    for (auto& n : nodes_) {
      if (n->address() == address) return n.get();
    }
    ADD_FAILURE() << "no node at " << address;
    return nodes_.front().get();
  }
  // Creates table "experience" (Spec(), acknowledged `acks`) on `primary`
  // and waits until every node holds it.
  void CreateTableEverywhere(const std::string& primary, Acks acks) {
    TableSpec spec = Spec();
    spec.acks = acks;
    ASSERT_OK(RetriedWhileUnavailable([&]() -> Status {
      REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(primary, Connecting()));
      Result<std::shared_ptr<Table>> t = db->GetTable("experience");
      return t.ok() ? Status::OK() : db->CreateTable(spec).status();
    }));
    ASSERT_TRUE(WaitUntil(30s, [&] {
      for (auto& n : nodes_) {
        Result<std::unique_ptr<DB>> db = DB::Connect(n->address(), Connecting());
        if (!db.ok() || !(*db)->GetTable("experience").ok()) return false;
      }
      return true;
    })) << "the table never reached every node";
  }
  // Waits until every node's table holds the same as `address`'s.
  void ExpectAllAgree(const std::string& primary) {
    std::string want;
    std::vector<std::string> got(nodes_.size());
    const bool agreed = WaitUntil(60s, [&] {
      want = ContentsAt(primary);
      bool same = !want.empty();
      for (size_t i = 0; i < nodes_.size(); ++i) {
        got[i] = ContentsAt(nodes_[i]->address());
        same = same && got[i] == want;
      }
      return same;
    });
    EXPECT_TRUE(agreed) << "the copies differ: the primary's holds " << want.size()
                        << " bytes; the nodes' " << got[0].size() << ", " << got[1].size() << ", "
                        << got[2].size();
  }

  testing_util::TempDir dir_;
  std::unique_ptr<testing_util::EtcdProcess> etcd_;
  std::string coordinator_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(FailoverTest, AKilledPrimaryIsReplacedAndNothingAcknowledgedIsLost) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 20; }))
      << "no appends acknowledged under replicated(1); failures " << writer.failures();
  Node* old_primary = NodeAt(first);
  old_primary->Kill();
  const int before = writer.acknowledged();
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  ASSERT_FALSE(second.empty()) << "no new primary";
  NodeAt(second)->WaitFor(std::regex("(won the election)"), 10s);
  // The writer goes on through the new primary (once the third node, a
  // replica again, follows it: replicated(1)).
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= before + 20; }))
      << "no appends acknowledged after the failover\n"
      << NodeAt(second)->output();
  writer.Stop();
  ExpectHolds(second, writer.trajectories());
  // The old primary comes back: a replica of the new one, from a snapshot.
  old_primary->Start();
  ASSERT_TRUE(old_primary->WaitListening());
  EXPECT_FALSE(old_primary->WaitFor(std::regex("(resyncing from the primary)"), 10s).empty())
      << old_primary->output();
  ExpectAllAgree(second);
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(old_primary->address()));
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo info, db->Replication());
  EXPECT_EQ(info.role, "replica");
  EXPECT_EQ(info.primary, second);
  // The cluster as etcd sees it: the new primary, two replicas following it.
  const std::string tool = REPLAYDB_TOOL_PATH;
  // (Each node publishes its state within a poll, 100 ms.)
  ClusterView cluster;
  WaitUntil(10s, [&] {
    Result<ClusterView> v = DescribeCluster(coordinator_);
    if (v.ok()) cluster = *v;
    bool settled = v.ok() && cluster.nodes.size() == 3;
    for (const ClusterMember& n : cluster.nodes) settled = settled && n.epoch == cluster.epoch;
    return settled;
  });
  EXPECT_EQ(cluster.primary_address, second);
  ASSERT_EQ(cluster.nodes.size(), 3u);
  for (const ClusterMember& n : cluster.nodes) {
    EXPECT_EQ(n.role, n.address == second ? "primary" : "replica") << n.name;
    EXPECT_EQ(n.epoch, cluster.epoch) << n.name;
  }
  const std::string view = testing_util::ShellOutput(tool + " cluster " + coordinator_ + " 2>&1");
  EXPECT_THAT(view, HasSubstr("primary: " + NodeAt(second)->name() + " (" + second + "), epoch "));
  EXPECT_THAT(view, ::testing::ContainsRegex(old_primary->name() + " +" + old_primary->address() +
                                             " +replica +[0-9]+ +" + second));
  EXPECT_THAT(testing_util::ShellOutput(tool + " cluster 2>&1; echo exit $?"),
              HasSubstr("which cluster? give etcd://HOST:PORT/CLUSTER or file://PATH"));
  EXPECT_THAT(
      testing_util::ShellOutput(tool + " cluster etcd://127.0.0.1:1/x 2>&1; echo exit $?"),
      ::testing::ContainsRegex("etcd cannot be reached \\(http://127.0.0.1:1: .*\\)\nexit 1"));
}

TEST_F(FailoverTest, APrimaryStoppedHandsOverWithNothingAcknowledgedLost) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 20; }));
  Node* old_primary = NodeAt(first);
  old_primary->Stop();  // SIGTERM: its replicas catch up, it resigns, closes
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  ASSERT_FALSE(second.empty());
  const int before = writer.acknowledged();
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= before + 20; }));
  writer.Stop();
  ExpectHolds(second, writer.trajectories());
  old_primary->Start();
  ASSERT_TRUE(old_primary->WaitListening());
  ExpectAllAgree(second);
}

// A client connected through the coordinator follows the primary: a call
// made while the cluster elects a new one waits for it, later calls and new
// writers go to it, and a writer opened before resumes its open trajectory
// there.
TEST_F(FailoverTest, AClientOfTheClusterWaitsOutAFailoverAndGoesOnWithTheNewPrimary) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  CreateTableEverywhere(first, Acks{AckMode::kLeader, 0});
  if (HasFatalFailure()) return;
  std::mt19937_64 rng(testing_util::TestSeed());
  ConnectOptions o;
  o.connect_timeout = 30s;
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(coordinator_, o));
  EXPECT_EQ(db->path(), coordinator_);
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("experience"));
  const auto write = [&](int steps, bool end) -> std::unique_ptr<TrajectoryWriter> {
    Result<std::unique_ptr<TrajectoryWriter>> w = table->NewWriter();
    EXPECT_OK(w.status());
    if (!w.ok()) return nullptr;
    for (int s = 0; s < steps; ++s) {
      EXPECT_OK((*w)->Append(testing_util::RandomStep(Spec(), rng).tensors));
    }
    if (end) EXPECT_OK((*w)->End(EndReason::kTerminal));
    return std::move(w).value();
  };
  write(2 + static_cast<int>(rng() % 8), true);
  std::unique_ptr<TrajectoryWriter> before = write(3, false);
  ASSERT_NE(before, nullptr);
  ExpectAllAgree(first);
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo was, db->Replication());
  EXPECT_EQ(was.role, "primary");
  NodeAt(first)->Kill();
  std::this_thread::sleep_for(1s);  // the connection's heartbeats ended it
  // Made while the cluster elects (a 2 s session), a sample waits for it.
  SampleBatch batch;
  SampleOptions now;
  now.timeout = 0ms;
  const auto t0 = Clock::now();
  ASSERT_OK(table->Sample(2, now, &batch));
  EXPECT_LT(Clock::now() - t0, 30s);
  const std::string second = WaitForPrimary(coordinator_, 10s, first);
  ASSERT_FALSE(second.empty());
  // (The coordinator names the new primary a moment before that node has
  // finished its promotion, and the client may reach it in between: it
  // serves reads as a replica until then.)
  ReplicationInfo is;
  EXPECT_TRUE(WaitUntil(10s,
                        [&] {
                          Result<ReplicationInfo> info = db->Replication();
                          if (info.ok()) is = *info;
                          return info.ok() && is.role == "primary";
                        }))
      << "the client's server is still a " << is.role << " of epoch " << is.epoch;
  EXPECT_EQ(is.role, "primary");
  EXPECT_GT(is.epoch, was.epoch);
  // The writer opened on the old primary follows too: its trajectory,
  // open there, goes on and ends on the new one.
  ASSERT_OK(before->Append(testing_util::RandomStep(Spec(), rng).tensors));
  ASSERT_OK(before->End(EndReason::kTerminal));
  const uint64_t resumed = before->trajectory_id();
  before.reset();
  // A new one writes to the new primary.
  const int steps = 2 + static_cast<int>(rng() % 6);
  std::unique_ptr<TrajectoryWriter> after = write(steps, true);
  ASSERT_NE(after, nullptr);
  const uint64_t id = after->trajectory_id();
  ASSERT_OK_AND_ASSIGN(auto direct, DB::Connect(second));
  ASSERT_OK_AND_ASSIGN(auto there, direct->GetTable("experience"));
  TrajectorySteps read;
  ASSERT_OK(there->ReadTrajectory(id, 0, steps, &read));
  ASSERT_OK(there->ReadTrajectory(resumed, 0, 0, &read));
  EXPECT_EQ(read.info.length, 4);
  EXPECT_TRUE(read.info.ended);
  EXPECT_EQ(read.info.end_reason, EndReason::kTerminal);
}

TEST_F(FailoverTest, APrimaryCutFromEtcdStopsAcknowledgingUntilItsSessionIsBack) {
  const std::string primary = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(primary.empty());
  TableSpec spec = Spec();
  spec.acks = Acks{AckMode::kLeader, 0};
  std::mt19937_64 rng(testing_util::TestSeed());
  WriterOptions sync;
  sync.sync = true;  // (each append answers for itself)
  std::unique_ptr<DB> db;
  std::unique_ptr<TrajectoryWriter> w;
  ASSERT_OK(RetriedWhileUnavailable([&]() -> Status {
    w.reset();
    db.reset();
    REPLAYDB_ASSIGN_OR_RETURN(db, DB::Connect(primary));
    Result<std::shared_ptr<Table>> table = db->GetTable("experience");
    if (!table.ok()) table = db->CreateTable(spec);
    REPLAYDB_RETURN_IF_ERROR(table.status());
    REPLAYDB_ASSIGN_OR_RETURN(w, (*table)->NewWriter(sync));
    return w->Append(testing_util::RandomStep(Spec(), rng).tensors);
  }));
  etcd_->Signal(SIGSTOP);
  const auto cut = Clock::now();
  Status refused = Status::OK();
  // Its last renewal came before the cut, so its session ends by the cut +
  // TTL; it stops acknowledging at TTL - margin (1.5 s) after that renewal:
  // no append sent 1.5 s after the cut is acknowledged, whatever the
  // machine's speed.
  Clock::time_point last_acknowledged = cut;
  ASSERT_TRUE(WaitUntil(10s, [&] {
    const auto sent = Clock::now();
    refused = w->Append(testing_util::RandomStep(Spec(), rng).tensors);
    if (refused.ok()) last_acknowledged = sent;
    return !refused.ok();
  })) << "the primary went on acknowledging with etcd stopped";
  EXPECT_LT(last_acknowledged - cut, 1500ms);
  EXPECT_EQ(refused.code(), Status::Code::kUnavailable) << refused.ToString();
  EXPECT_THAT(refused.message(), HasSubstr("session with its coordinator was last renewed"));
  EXPECT_THAT(refused.message(), HasSubstr("it acknowledges no writes until it renews it"));
  etcd_->Signal(SIGCONT);
  // Back: a primary (this one or another) takes writes again.
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 5; }))
      << "no writes acknowledged after etcd came back";
  writer.Stop();
  ExpectHolds(WaitForPrimary(coordinator_, 10s), writer.trajectories());
}

TEST_F(FailoverTest, AStoppedPrimaryIsDeposedAndItsLateWritesAreRefused) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  // On the replicas before the primary stops (acknowledged under `leader`,
  // the table could be lost with it: the replica elected may not have read
  // it yet).
  CreateTableEverywhere(first, Acks{AckMode::kLeader, 0});
  if (HasFatalFailure()) return;
  std::mt19937_64 rng(testing_util::TestSeed());
  WriterOptions sync;
  sync.sync = true;
  Node* zombie = NodeAt(first);
  zombie->Signal(SIGSTOP);
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  zombie->Signal(SIGCONT);
  ASSERT_FALSE(second.empty());
  // Its late writes are refused (by its lapsed session, as fenced, or as
  // it closes to resync: whichever comes first); none is acknowledged.
  std::vector<std::string> refusals;
  for (const auto until = Clock::now() + 2s; Clock::now() < until && refusals.size() < 50;) {
    const Status s = SyncedAppendAt(first, rng);
    ASSERT_FALSE(s.ok()) << "the deposed primary acknowledged a write";
    refusals.push_back(s.ToString());
  }
  ASSERT_FALSE(refusals.empty());
  // It fenced itself for the new epoch, and rejoins as a replica of the new
  // primary; every copy agrees.
  EXPECT_FALSE(zombie->WaitFor(std::regex("(deposed: fenced for epoch)"), 30s).empty())
      << zombie->output();
  EXPECT_FALSE(zombie->WaitFor(std::regex("(resyncing from the primary)"), 30s).empty())
      << zombie->output();
  ASSERT_OK_AND_ASSIGN(auto now, DB::Connect(second));
  ASSERT_OK_AND_ASSIGN(auto t2, now->GetTable("experience"));
  ASSERT_OK_AND_ASSIGN(auto w2, t2->NewWriter(sync));
  ASSERT_TRUE(WaitUntil(
      30s, [&] { return w2->Append(testing_util::RandomStep(Spec(), rng).tensors).ok(); }));
  ASSERT_OK(w2->End(EndReason::kTerminal));
  ExpectAllAgree(second);
}

// The bytes of each ended trajectory of table "experience" at `address`
// (its columns' bytes one after another), whatever its id.
std::multiset<std::string> EndedTrajectoriesAt(const std::string& address) {
  std::multiset<std::string> out;
  Result<std::unique_ptr<DB>> db = DB::Connect(address);
  if (!db.ok()) return out;
  Result<std::shared_ptr<Table>> t = (*db)->GetTable("experience");
  if (!t.ok()) return out;
  for (const TrajectoryInfo& info : (*t)->ListTrajectories()) {
    TrajectorySteps steps;
    if (!info.ended || !(*t)->ReadTrajectory(info.id, 0, info.length, &steps).ok()) continue;
    std::string bytes;
    for (const Tensor& c : steps.columns) {
      bytes.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
    }
    out.insert(std::move(bytes));
  }
  return out;
}

TEST_F(FailoverTest, AKilledPrimarysWritesItsSuccessorNeverAppliedAreSalvagedWhenItIsBack) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  CreateTableEverywhere(first, Acks{AckMode::kLeaderDurable, 0});
  if (HasFatalFailure()) return;
  // The replicas stop; the primary acknowledges trajectories under
  // leader_durable (its own fsync, no replica's), one of them begun before
  // the stop, then is killed. The replica elected has none of them whole.
  std::mt19937_64 rng(testing_util::TestSeed());
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(first));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("experience"));
  WriterOptions durable;
  durable.acks = Acks{AckMode::kLeaderDurable, 0};
  durable.sync = true;  // each append acknowledged before the next is sent
  // Steps appended to `columns` (one string per column, as
  // EndedTrajectoriesAt joins them).
  const auto write = [&](TrajectoryWriter& w, int steps, std::vector<std::string>* columns) {
    columns->resize(Spec().columns.size());
    for (int s = 0; s < steps; ++s) {
      const testing_util::StepData step = testing_util::RandomStep(Spec(), rng);
      for (size_t c = 0; c < step.columns.size(); ++c) {
        (*columns)[c].append(reinterpret_cast<const char*>(step.columns[c].data()),
                             step.columns[c].size());
      }
      ASSERT_OK(w.Append(step.tensors));
    }
  };
  const auto joined = [](const std::vector<std::string>& columns) {
    std::string out;
    for (const std::string& c : columns) out += c;
    return out;
  };
  ASSERT_OK_AND_ASSIGN(auto straddling, table->NewWriter(durable));
  std::vector<std::string> straddling_columns;
  write(*straddling, 3, &straddling_columns);
  std::vector<Node*> replicas;
  for (auto& n : nodes_) {
    if (n->address() != first) replicas.push_back(n.get());
  }
  // (Both replicas hold the straddling trajectory's first three steps.)
  ASSERT_TRUE(WaitUntil(10s, [&] {
    for (Node* r : replicas) {
      Result<std::unique_ptr<DB>> rdb = DB::Connect(r->address());
      Result<std::shared_ptr<Table>> rt =
          rdb.ok() ? (*rdb)->GetTable("experience") : Result<std::shared_ptr<Table>>(rdb.status());
      if (!rt.ok()) return false;
      const std::vector<TrajectoryInfo> infos = (*rt)->ListTrajectories();
      if (infos.size() != 1 || infos[0].length != 3) return false;
    }
    return true;
  }));
  for (Node* r : replicas) r->Signal(SIGSTOP);
  // A replica's read that waited for the next record is answered with the
  // first records logged after its stop, which it applies once continued:
  // a table made here is that record, so that what follows reaches no
  // replica. (Were the straddling trajectory's last steps in that answer,
  // its successor would lack only its end: below.)
  TableSpec filler = Spec();
  filler.name = "filler";
  ASSERT_OK(db->CreateTable(filler).status());
  std::this_thread::sleep_for(500ms);
  write(*straddling, 2, &straddling_columns);
  ASSERT_OK(straddling->End(EndReason::kTerminal));
  std::vector<std::string> acked;
  const int kTrajectories = 8;
  for (int i = 0; i < kTrajectories; ++i) {
    ASSERT_OK_AND_ASSIGN(auto w, table->NewWriter(durable));
    std::vector<std::string> columns;
    write(*w, 1 + static_cast<int>(rng() % 6), &columns);
    ASSERT_OK(w->End(EndReason::kTerminal));
    acked.push_back(joined(columns));
  }
  acked.push_back(joined(straddling_columns));
  straddling.reset();
  table.reset();
  db.reset();
  Node* old_primary = NodeAt(first);
  old_primary->Kill();
  for (Node* r : replicas) r->Signal(SIGCONT);
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  ASSERT_FALSE(second.empty()) << "no new primary";
  std::multiset<std::string> held = EndedTrajectoriesAt(second);
  for (const std::string& bytes : acked) {
    EXPECT_EQ(held.count(bytes), 0u) << "the new primary holds a trajectory written while its "
                                        "replica was stopped: the test tests nothing";
  }
  // Back, the old primary resyncs and copies what the new one lacks.
  // It copies the trajectories its log wrote steps of after the takeover:
  // the eight, and the straddling one, unless a replica had its last steps
  // all the same (the answer above, late); the new primary then lacks only
  // its end, which is not copied, and ends it truncated once no writer
  // resumed it within DBOptions::writer_resume_window
  // (docs/replication.md, "Salvage"). The bytes below hold either way.
  old_primary->Start();
  ASSERT_TRUE(old_primary->WaitListening());
  const std::string copying =
      old_primary->WaitFor(std::regex("salvage: copying ([0-9]+) trajectories"), 30s);
  EXPECT_TRUE(copying == "9" || copying == "8") << old_primary->output();
  EXPECT_FALSE(
      old_primary
          ->WaitFor(std::regex("(salvage of .* finished: " + copying + " trajectories)"), 30s)
          .empty())
      << old_primary->output();
  // (Once nothing is open there: what a replica had of a trajectory whose
  // end it lacks is ended after that window.)
  std::string contents;
  EXPECT_TRUE(WaitUntil(30s, [&] {
    contents = ContentsAt(second);
    return !contents.empty() && contents.find(" ended 0 ") == std::string::npos;
  })) << contents;
  held = EndedTrajectoriesAt(second);
  for (size_t i = 0; i < acked.size(); ++i) {
    EXPECT_EQ(held.count(acked[i]), 1u) << "acknowledged trajectory " << i << " of " << acked.size()
                                        << " is not on the new primary once";
  }
  ExpectAllAgree(second);
  // Restarted, it salvages nothing again.
  old_primary->Stop();
  old_primary->Start();
  ASSERT_TRUE(old_primary->WaitListening());
  std::this_thread::sleep_for(1s);
  EXPECT_THAT(old_primary->output(), ::testing::Not(HasSubstr("salvage")));
  EXPECT_EQ(EndedTrajectoriesAt(second).size(), held.size());
}

TEST_F(FailoverTest, EtcdKilledAndRestartedStopsTheWritesAWhileAndLosesNothing) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 20; }));
  etcd_->Kill();
  // Without etcd no session is renewed: the primary stops acknowledging
  // (and the writer cannot find another).
  std::this_thread::sleep_for(2500ms);
  const int stalled = writer.acknowledged();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(writer.acknowledged(), stalled) << "acknowledged with etcd gone";
  etcd_->Start();
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= stalled + 20; }))
      << "no writes acknowledged after etcd came back";
  writer.Stop();
  const std::string primary = WaitForPrimary(coordinator_, 30s);
  ASSERT_FALSE(primary.empty());
  ExpectHolds(primary, writer.trajectories());
  ExpectAllAgree(primary);
}

TEST_F(FailoverTest, AStoppedReplicaCatchesUpWhileTheOtherKeepsTheWritesAcknowledged) {
  const std::string primary = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(primary.empty());
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 20; }));
  Node* stopped = nullptr;
  for (auto& n : nodes_) {
    if (n->address() != primary) stopped = n.get();
  }
  // Stopped past its session's TTL: replicated(1) goes on with the other.
  stopped->Signal(SIGSTOP);
  std::this_thread::sleep_for(3000ms);
  const int before = writer.acknowledged();
  EXPECT_TRUE(WaitUntil(30s, [&] { return writer.acknowledged() >= before + 20; }));
  stopped->Signal(SIGCONT);
  EXPECT_TRUE(WaitUntil(30s, [&] { return writer.acknowledged() >= before + 40; }));
  writer.Stop();
  EXPECT_EQ(WaitForPrimary(coordinator_, 10s), primary);  // (no election)
  ExpectHolds(primary, writer.trajectories());
  ExpectAllAgree(primary);
}

TEST_F(FailoverTest, AnOldPrimaryBehindTheLastEpochThatTookWritesDoesNotStand) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  TableSpec spec = Spec();
  spec.acks = Acks{AckMode::kLeader, 0};
  std::mt19937_64 rng(testing_util::TestSeed());
  const auto write_once = [&](const std::string& address) -> Status {
    REPLAYDB_ASSIGN_OR_RETURN(auto db, DB::Connect(address));
    Result<std::shared_ptr<Table>> t = db->GetTable("experience");
    if (!t.ok()) t = db->CreateTable(spec);
    REPLAYDB_RETURN_IF_ERROR(t.status());
    REPLAYDB_ASSIGN_OR_RETURN(auto w, (*t)->NewWriter());
    for (int s = 0; s < 5; ++s) {
      REPLAYDB_RETURN_IF_ERROR(w->Append(testing_util::RandomStep(Spec(), rng).tensors));
    }
    return w->End(EndReason::kTerminal);
  };
  // (A trajectory a late renewal's refusal cut short ends when its writer
  // goes.)
  const auto write = [&](const std::string& address) {
    ASSERT_OK(RetriedWhileUnavailable([&] { return write_once(address); }));
  };
  write(first);
  Node* old_primary = NodeAt(first);
  old_primary->Signal(SIGSTOP);
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  ASSERT_FALSE(second.empty());
  // The new primary takes writes the old one never saw; then it and the
  // third node go.
  ASSERT_TRUE(WaitUntil(30s, [&] {
    Result<std::unique_ptr<DB>> db = DB::Connect(second);
    return db.ok() && (*db)->Replication().ok() && (*db)->Replication()->role == "primary";
  }));
  write(second);
  // What the old primary had acknowledged and not sent (its first
  // trajectory's end, maybe) stays open on the new one for the writer to
  // resume, then is ended (DBOptions::writer_resume_window): held is after.
  std::string held;
  EXPECT_TRUE(WaitUntil(30s,
                        [&] {
                          held = ContentsAt(second);
                          return held.rfind("trajectory ", 0) == 0 &&
                                 held.find(" ended 0 ") == std::string::npos;
                        }))
      << held << "\n"
      << DB::Connect(second, Connecting()).status().ToString() << "\n"
      << NodeAt(second)->output();
  for (auto& n : nodes_) {
    if (n.get() != old_primary) n->Kill();
  }
  old_primary->Signal(SIGCONT);
  EXPECT_FALSE(old_primary->WaitFor(std::regex("(so this node does not stand)"), 30s).empty())
      << old_primary->output();
  std::this_thread::sleep_for(1000ms);
  EXPECT_EQ(WaitForPrimary(coordinator_, 100ms), "") << "a node behind the last epoch was elected";
  // A node of that epoch comes back: it stands, and the old primary
  // follows it, with what it took.
  Node* back = NodeAt(second);
  back->Start();
  ASSERT_TRUE(back->WaitListening());
  EXPECT_EQ(WaitForPrimary(coordinator_, 30s), second);
  EXPECT_FALSE(old_primary->WaitFor(std::regex("(resyncing from the primary)"), 30s).empty())
      << old_primary->output();
  EXPECT_EQ(ContentsAt(second), held);
  for (auto& n : nodes_) {
    if (n.get() != old_primary && n.get() != back) {
      n->Start();
      ASSERT_TRUE(n->WaitListening());
    }
  }
  ExpectAllAgree(second);
}

// Partitions: etcd and three nodes, each node in a network namespace of its
// own joined by a veth pair to a bridge in a "hub" namespace, where etcd
// and the test's clients run. The test runs itself again inside the hub
// (`ip netns exec`, which also shows UCX the hub's interfaces under /sys):
// the host's network is not touched. Cutting a node is setting its veth
// down: its packets go nowhere, as when a cable is pulled. UCX over TCP
// alone (shared memory would cross the cut); the nodes listen on addresses
// other than loopback, so they require a token. Needs root (CAP_NET_ADMIN)
// and iproute2's `ip`; skips saying which is missing.
class PartitionTest : public FailoverTest {
 protected:
  static constexpr const char* kHubVariable = "REPLAYDB_TEST_PARTITION_HUB";

  void SetUp() override {
    if (const std::string missing = testing_util::EtcdProcess::Missing(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root (CAP_NET_ADMIN)";
    if (Sh("command -v ip").first != 0) {
      GTEST_SKIP() << "iproute2's `ip` is not installed (tools/scripts/install-deps.sh --tests)";
    }
    const char* hub = std::getenv(kHubVariable);
    if (hub == nullptr) {
      // Named namespaces are the host's: this process's id keeps them apart.
      hub_ = "replaydb-test-" + std::to_string(::getpid()) + "-hub";
      if (const auto [status, out] = Sh("ip netns add " + hub_); status != 0) {
        hub_.clear();
        GTEST_SKIP() << "cannot make a network namespace: ip netns add: " << out;
      }
      return;  // the test body runs itself in it
    }
    ::setenv("UCX_TLS", "tcp", 1);
    TokenFile() = dir_.Sub("tokens");
    {
      std::mt19937_64 rng(testing_util::TestSeed());
      std::ofstream(TokenFile()) << "read-write " << std::hex << rng() << rng() << rng() << rng()
                                 << "\n";
      std::filesystem::permissions(
          TokenFile(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    }
    ASSERT_NO_FATAL_FAILURE(Ip("link set lo up"));
    ASSERT_NO_FATAL_FAILURE(Ip("link add rdb-br type bridge"));
    ASSERT_NO_FATAL_FAILURE(Ip("addr add 10.231.0.1/24 dev rdb-br"));
    ASSERT_NO_FATAL_FAILURE(Ip("link set rdb-br up"));
    etcd_ = std::make_unique<testing_util::EtcdProcess>(dir_.Sub("etcd"), "10.231.0.1");
    coordinator_ = "etcd://" + etcd_->endpoint() + "/partition";
    const char* names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; ++i) {
      const std::string n = names[i];
      const std::string ns = std::string(hub) + "-" + n;
      const std::string ip = "10.231.0." + std::to_string(2 + i);
      ASSERT_NO_FATAL_FAILURE(Ip("netns add " + ns));
      namespaces_.push_back(ns);
      const std::string veth = "rdb-" + n;  // and its peer, veth + "1", in ns
      ASSERT_NO_FATAL_FAILURE(Ip("link add " + veth + " type veth peer name " + veth + "1"));
      ASSERT_NO_FATAL_FAILURE(Ip("link set " + veth + "1 netns " + ns));
      ASSERT_NO_FATAL_FAILURE(Ip("link set " + veth + " master rdb-br"));
      ASSERT_NO_FATAL_FAILURE(Ip("link set " + veth + " up"));
      ASSERT_NO_FATAL_FAILURE(Ip("-n " + ns + " addr add " + ip + "/24 dev " + veth + "1"));
      ASSERT_NO_FATAL_FAILURE(Ip("-n " + ns + " link set " + veth + "1 up"));
      ASSERT_NO_FATAL_FAILURE(Ip("-n " + ns + " link set lo up"));
      nodes_.push_back(std::make_unique<Node>(n, dir_.Sub(n), coordinator_, ns, ip));
    }
    for (auto& n : nodes_) n->Start();
    for (auto& n : nodes_) ASSERT_TRUE(n->WaitListening());
  }
  void TearDown() override {
    FailoverTest::TearDown();
    TokenFile().clear();
    for (const std::string& ns : namespaces_) Sh("ip netns del " + ns);
    if (!hub_.empty()) Sh("ip netns del " + hub_);
  }
  static bool InTheHub() { return std::getenv(kHubVariable) != nullptr; }
  // Outside the hub: runs this test again inside it and reports how it went.
  void RunInTheHub() {
    const ::testing::TestInfo* me = ::testing::UnitTest::GetInstance()->current_test_info();
    ::setenv(kHubVariable, hub_.c_str(), 1);
    auto child = tools::ChildProcess::Start(
        {"ip", "netns", "exec", hub_, std::filesystem::read_symlink("/proc/self/exe").string(),
         std::string("--gtest_filter=") + me->test_suite_name() + "." + me->name()});
    ::unsetenv(kHubVariable);
    ASSERT_OK(child.status());
    const int status = (*child)->Wait(10min);
    const std::string& out = (*child)->output();
    if (status == 0 && out.find("[  SKIPPED ]") != std::string::npos) {
      GTEST_SKIP() << "in the hub namespace:\n" << out;
    }
    EXPECT_EQ(status, 0) << "in the hub namespace:\n" << out;
  }
  // The exit status and output of `command` (through sh).
  static std::pair<int, std::string> Sh(const std::string& command) {
    std::string out;
    FILE* f = ::popen((command + " 2>&1").c_str(), "r");
    if (f == nullptr) return {-1, std::strerror(errno)};
    char buf[512];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    return {::pclose(f), out};
  }
  void Ip(const std::string& args) {
    const auto [status, out] = Sh("ip " + args);
    ASSERT_EQ(status, 0) << "ip " << args << ": " << out;
  }
  // Which of its peers a cut takes from a node.
  enum class CutFrom {
    kEveryone,  // etcd, the other nodes, clients: its link down
    kEtcd,      // etcd alone: iptables drops TCP to and from etcd's port
    kNodes,     // the other nodes alone: iptables drops their packets
  };
  // Cuts node `n` off (from), or joins it again.
  void Cut(const Node& n, bool cut, CutFrom from = CutFrom::kEveryone) {
    for (size_t k = 0; k < nodes_.size(); ++k) {
      if (nodes_[k].get() != &n) continue;
      if (from == CutFrom::kEveryone) {
        return Ip("-n " + namespaces_[k] + " link set rdb-" + n.name() + "1 " +
                  (cut ? "down" : "up"));
      }
      std::vector<std::string> rules;
      if (from == CutFrom::kEtcd) {
        const std::string& etcd = etcd_->endpoint();
        const std::string host = etcd.substr(0, etcd.rfind(':'));
        const std::string port = etcd.substr(etcd.rfind(':') + 1);
        rules = {"OUTPUT -p tcp -d " + host + " --dport " + port,
                 "INPUT -p tcp -s " + host + " --sport " + port};
      } else {
        for (size_t other = 0; other < nodes_.size(); ++other) {
          if (other == k) continue;
          rules.push_back("OUTPUT -d " + std::string("10.231.0.") + std::to_string(2 + other));
          rules.push_back("INPUT -s " + std::string("10.231.0.") + std::to_string(2 + other));
        }
      }
      for (const std::string& rule : rules) {
        const std::string command = "ip netns exec " + namespaces_[k] + " iptables " +
                                    (cut ? "-A " : "-D ") + rule + " -j DROP";
        const auto [status, out] = Sh(command);
        ASSERT_EQ(status, 0) << command << ": " << out;
      }
      return;
    }
    ADD_FAILURE() << "no node " << n.name();
  }

  void CutOffThePrimary(Acks acks, CutFrom from = CutFrom::kEveryone);

  std::string hub_;  // outside it: the hub namespace made for the run inside
  std::vector<std::string> namespaces_;
};

// A primary cut off from etcd, its replicas and its clients (or from etcd
// alone): it stops acknowledging once its session is older than TTL -
// margin (it cannot renew it), a replica is elected and takes the writes,
// and nothing acknowledged is lost (under replicated(1); under
// leader_durable what only the old primary had is salvaged once it is
// back). Cut from etcd alone, it is still reached, and refuses each write.
// Healed, the old primary finds itself deposed: it refuses writes (by its
// lapsed session or as fenced), fences itself, resyncs and rejoins as a
// replica; every copy agrees.
void PartitionTest::CutOffThePrimary(Acks acks, CutFrom from) {
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  if (acks.mode != AckMode::kReplicated) CreateTableEverywhere(first, acks);
  if (::testing::Test::HasFatalFailure()) return;
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 10; }))
      << "no appends acknowledged; failures " << writer.failures();
  Node* zombie = NodeAt(first);
  ASSERT_NO_FATAL_FAILURE(Cut(*zombie, true, from));
  const int before = writer.acknowledged();
  const std::string second = WaitForPrimary(coordinator_, 30s, first);
  ASSERT_FALSE(second.empty()) << "no new primary while " << first << " is cut off";
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= before + 10; }))
      << "no appends acknowledged after the cut\n"
      << NodeAt(second)->output();
  EXPECT_FALSE(
      zombie->WaitFor(std::regex("(cannot renew the session with the coordinator)"), 10s).empty())
      << zombie->output();
  // Whatever it is doing, it acknowledges no write: reached while cut
  // from etcd alone, and once healed.
  std::mt19937_64 rng(testing_util::TestSeed() + 1);
  const auto refuses = [&](const char* when) {
    int refusals = 0;
    for (const auto until = Clock::now() + 2s; Clock::now() < until && refusals < 20; ++refusals) {
      const Status s = SyncedAppendAt(first, rng);
      ASSERT_FALSE(s.ok()) << "the old primary acknowledged a write " << when;
      if (from == CutFrom::kEtcd && std::string(when) == "while cut") {
        // (Reached, and refused: its session lapsed, or it was fenced.)
        EXPECT_TRUE(s.message().find("it acknowledges no writes until it renews it") !=
                        std::string::npos ||
                    s.code() == Status::Code::kFailedPrecondition)
            << s.ToString();
      }
    }
    EXPECT_GT(refusals, 0);
  };
  if (from == CutFrom::kEtcd) {
    ASSERT_NO_FATAL_FAILURE(refuses("while cut"));
  }
  ASSERT_NO_FATAL_FAILURE(Cut(*zombie, false, from));
  ASSERT_NO_FATAL_FAILURE(refuses("after the partition healed"));
  EXPECT_FALSE(zombie->WaitFor(std::regex("(resyncing from the primary)"), 30s).empty())
      << zombie->output();
  writer.Stop();
  if (acks.mode != AckMode::kReplicated) {
    // What it acknowledged before the cut that no replica had is copied to
    // its successor (connecting with the nodes' token).
    EXPECT_FALSE(zombie->WaitFor(std::regex("(salvage of .* finished)"), 60s).empty())
        << zombie->output();
  }
  ExpectHolds(second, writer.trajectories());
  ExpectAllAgree(second);
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(first, Connecting()));
  ASSERT_OK_AND_ASSIGN(const ReplicationInfo info, db->Replication());
  EXPECT_EQ(info.role, "replica");
  EXPECT_EQ(info.primary, second);
}

TEST_F(PartitionTest, ACutOffPrimaryIsReplacedRefusesWritesWhenHealedAndRejoins) {
  if (!InTheHub()) return RunInTheHub();
  CutOffThePrimary(Spec().acks);  // replicated(1)
}

TEST_F(PartitionTest, ACutOffLeaderDurablePrimarysLastWritesAreSalvagedWhenHealed) {
  if (!InTheHub()) return RunInTheHub();
  CutOffThePrimary(Acks{AckMode::kLeaderDurable, 0});
}

// Cut from etcd alone, the primary is still reached by its replicas and
// clients: it refuses their writes once its session lapses, and is
// replaced.
TEST_F(PartitionTest, APrimaryCutFromEtcdAloneRefusesWritesAndIsReplaced) {
  if (!InTheHub()) {
    if (Sh("command -v iptables").first != 0) {
      GTEST_SKIP() << "iptables is not installed (tools/scripts/install-deps.sh --tests)";
    }
    return RunInTheHub();
  }
  CutOffThePrimary(Spec().acks, CutFrom::kEtcd);  // replicated(1)
}

// Cut from its replicas alone, a replicated(1) primary keeps its session:
// no replica is elected (none can be in sync), and it acknowledges nothing,
// since no replica applies it. Healed, the writes go on with it, and
// nothing acknowledged is lost.
TEST_F(PartitionTest, APrimaryCutFromItsReplicasAloneAcknowledgesNothingUntilHealed) {
  if (!InTheHub()) {
    if (Sh("command -v iptables").first != 0) {
      GTEST_SKIP() << "iptables is not installed (tools/scripts/install-deps.sh --tests)";
    }
    return RunInTheHub();
  }
  const std::string first = WaitForPrimary(coordinator_, 10s);
  ASSERT_FALSE(first.empty());
  Writer writer(coordinator_, testing_util::TestSeed());
  writer.Start();
  ASSERT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= 10; }))
      << "no appends acknowledged; failures " << writer.failures();
  Node* primary = NodeAt(first);
  ASSERT_NO_FATAL_FAILURE(Cut(*primary, true, CutFrom::kNodes));
  // (What the replicas applied before the cut may still be acknowledged.)
  std::this_thread::sleep_for(1500ms);
  const int during = writer.acknowledged();
  EXPECT_EQ(WaitForPrimary(coordinator_, 4s, first), "")
      << "a replica cut from its primary was elected";
  EXPECT_EQ(WaitForPrimary(coordinator_, 1s), first);
  EXPECT_EQ(writer.acknowledged(), during) << "acknowledged while no replica could apply";
  std::mt19937_64 rng(testing_util::TestSeed() + 1);
  const Status refused = SyncedAppendAt(first, rng);
  EXPECT_FALSE(refused.ok()) << "acknowledged while no replica could apply";
  EXPECT_THAT(refused.ToString(), HasSubstr("in sync")) << refused.ToString();
  ASSERT_NO_FATAL_FAILURE(Cut(*primary, false, CutFrom::kNodes));
  EXPECT_TRUE(WaitUntil(60s, [&] { return writer.acknowledged() >= during + 10; }))
      << "no appends acknowledged once healed; failures " << writer.failures() << "\n"
      << primary->output();
  writer.Stop();
  EXPECT_EQ(WaitForPrimary(coordinator_, 1s), first);
  ExpectHolds(first, writer.trajectories());
  ExpectAllAgree(first);
}

// A static file's cluster: nodes a (the file's primary) and b, started.
class StaticClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile();
    a_.moved = b_.moved = [this] { WriteFile(); };
    a_.Start();
    ASSERT_TRUE(a_.WaitListening());
    b_.Start();
    ASSERT_TRUE(b_.WaitListening());
  }
  void WriteFile() {
    std::ofstream(file_) << "node a " << a_.address() << "\nnode b " << b_.address()
                         << "\nprimary a\n";
  }

  testing_util::TempDir dir_;
  const std::string file_ = dir_.Sub("cluster");
  const std::string coordinator_ = "file://" + file_;
  Node a_{"a", dir_.Sub("a"), coordinator_};
  Node b_{"b", dir_.Sub("b"), coordinator_};
};

TEST_F(StaticClusterTest, NodesFollowTheFilesPrimaryAndAPromotionByName) {
  std::mt19937_64 rng(testing_util::TestSeed());
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(coordinator_));
  TableSpec spec = Spec();
  spec.acks = Acks{AckMode::kLeader, 0};
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  ASSERT_OK_AND_ASSIGN(auto w, table->NewWriter());
  for (int s = 0; s < 7; ++s) ASSERT_OK(w->Append(testing_util::RandomStep(Spec(), rng).tensors));
  ASSERT_OK(w->End(EndReason::kTerminal));
  w.reset();
  table.reset();
  db.reset();
  // A node the file does not name is refused at its start.
  ServeProcess stranger({dir_.Sub("c"), "--listen",
                         "ucx://127.0.0.1:" + std::to_string(testing_util::FreePort()), "--name",
                         "c", "--coordinator", coordinator_});
  EXPECT_EQ(stranger.Exit(30s), 1);
  EXPECT_THAT(stranger.output(), HasSubstr("names no node 'c'"));
  // Promoted by name: b is the primary, a follows it from a snapshot.
  ServeProcess promote({"b", "--coordinator", coordinator_}, "promote");
  ASSERT_EQ(promote.Exit(60s), 0) << promote.output();
  EXPECT_THAT(promote.output(), HasSubstr("promoted b: the primary of epoch 1"));
  EXPECT_FALSE(a_.WaitFor(std::regex("(resyncing from the primary b)"), 10s).empty())
      << a_.output();
  ASSERT_OK_AND_ASSIGN(db, DB::Connect(coordinator_));
  ASSERT_OK_AND_ASSIGN(table, db->GetTable("experience"));
  ASSERT_OK_AND_ASSIGN(w, table->NewWriter());
  ASSERT_OK(w->Append(testing_util::RandomStep(Spec(), rng).tensors));
  ASSERT_OK(w->End(EndReason::kTerminal));
  const std::string want = testing_util::TableContents(*table);
  EXPECT_TRUE(WaitUntil(30s, [&] { return ContentsAt(a_.address()) == want; }));
  ServeProcess etcd_promote({"b", "--coordinator", "etcd://127.0.0.1:1/x"}, "promote");
  EXPECT_EQ(etcd_promote.Exit(30s), 1);
  EXPECT_THAT(etcd_promote.output(), HasSubstr("etcd elects its primary itself"));
}

// A running replica whose place its primary's log no longer holds (here:
// stopped while its primary, restarted without the file where it kept its
// replicas' places, checkpointed the log away) opens its server again, which
// copies a new snapshot, and follows from there.
TEST_F(StaticClusterTest, ARunningReplicaWhosePlaceTheLogNoLongerHoldsCopiesANewSnapshot) {
  std::mt19937_64 rng(testing_util::TestSeed());
  TableSpec spec = Spec();
  spec.acks = Acks{AckMode::kLeader, 0};
  const auto write = [&](int trajectories) {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(a_.address()));
    Result<std::shared_ptr<Table>> t = db->GetTable("experience");
    if (!t.ok()) t = db->CreateTable(spec);
    ASSERT_OK(t.status());
    for (int i = 0; i < trajectories; ++i) {
      ASSERT_OK_AND_ASSIGN(auto w, (*t)->NewWriter());
      const int steps = 1 + static_cast<int>(rng() % 9);
      for (int s = 0; s < steps; ++s) {
        ASSERT_OK(w->Append(testing_util::RandomStep(Spec(), rng).tensors));
      }
      ASSERT_OK(w->End(EndReason::kTerminal));
    }
    ASSERT_OK(db->Checkpoint());
  };
  ASSERT_NO_FATAL_FAILURE(write(3));
  EXPECT_TRUE(WaitUntil(30s, [&] { return ContentsAt(b_.address()) == ContentsAt(a_.address()); }));
  b_.Signal(SIGSTOP);
  a_.Stop();
  std::filesystem::remove(dir_.Sub("a") + "/" + wal::ReplicaSet::kFile);
  a_.Start();
  ASSERT_TRUE(a_.WaitListening());
  ASSERT_NO_FATAL_FAILURE(write(4));
  b_.Signal(SIGCONT);
  EXPECT_FALSE(b_.WaitFor(std::regex("(a replica of a \\(ucx://[0-9.:]+\\) again)"), 60s).empty())
      << b_.output();
  EXPECT_THAT(b_.output(), HasSubstr("the primary's log no longer holds this replica's place: "
                                     "opening again to copy a new snapshot"));
  ASSERT_NO_FATAL_FAILURE(write(2));
  const std::string want = ContentsAt(a_.address());
  EXPECT_TRUE(WaitUntil(30s, [&] { return ContentsAt(b_.address()) == want; }))
      << ContentsAt(b_.address()) << "\nwant:\n"
      << want;
}

}  // namespace
}  // namespace replaydb
