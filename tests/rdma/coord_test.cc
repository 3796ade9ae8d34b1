// Coordinators (rdma/coord/coordinator.h): the static file's, and etcd's
// against a real etcd started by the test (tests/rdma/etcd_process.h) on
// free loopback ports. Elections, epochs that grow, sessions that expire
// and take their leadership with them, etcd stopped and gone; every error
// a user can hit checked by its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "rdma/coord/coordinator.h"
#include "replaydb/cluster.h"
#include "replaydb/env.h"
#include "tests/rdma/etcd_process.h"
#include "tests/test_util.h"

namespace replaydb::rdma::coord {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(StaticCoordinatorTest, NamesItsPrimaryAndItsNodesAndElectsNoOne) {
  testing_util::TempDir dir;
  const std::string path = dir.Sub("cluster");
  WriteFile(path,
            "# three nodes\n"
            "node a ucx://127.0.0.1:7101\n"
            "node b ucx://127.0.0.1:7102   # the second\n"
            "\n"
            "node c ucx://127.0.0.1:7103\n"
            "primary b\n");
  ASSERT_OK_AND_ASSIGN(auto c, Coordinator::Open("file://" + path));
  EXPECT_EQ(c->address(), "file://" + path);
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> leader, c->Leader());
  ASSERT_TRUE(leader.has_value());
  EXPECT_EQ(leader->name, "b");
  EXPECT_EQ(leader->address, "ucx://127.0.0.1:7102");
  EXPECT_FALSE(leader->this_session);
  ASSERT_OK_AND_ASSIGN(const std::vector<NodeState> nodes, c->Nodes());
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "a");
  EXPECT_EQ(nodes[0].role, "replica");
  EXPECT_EQ(nodes[1].role, "primary");

  NodeState a;
  a.name = "a";
  a.address = "ucx://127.0.0.1:7101";
  ASSERT_OK(c->Publish(a));
  const Result<LeaderState> lost = c->Campaign(a);
  EXPECT_EQ(lost.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(lost.status().message(), HasSubstr("elects no one: it names 'b' the primary"));
  EXPECT_THAT(lost.status().message(), HasSubstr("replaydb promote NODE --coordinator file://"));

  NodeState stranger = a;
  stranger.name = "d";
  EXPECT_THAT(c->Publish(stranger).message(), HasSubstr("names no node 'd'"));
  NodeState moved = a;
  moved.address = "ucx://127.0.0.1:9999";
  EXPECT_THAT(c->Publish(moved).message(),
              HasSubstr("names node 'a' at ucx://127.0.0.1:7101, not at ucx://127.0.0.1:9999"));

  // A promotion rewrites the primary line only.
  ASSERT_OK(SetStaticPrimary(path, "a"));
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> now, c->Leader());
  EXPECT_EQ(now->name, "a");
  EXPECT_TRUE(now->this_session);  // (a published itself)
  ASSERT_OK_AND_ASSIGN(const LeaderState won, c->Campaign(a));
  EXPECT_EQ(won.name, "a");
  std::string text;
  ASSERT_OK(Env::Default()->ReadFileToString(path, &text));
  EXPECT_THAT(text, HasSubstr("node b ucx://127.0.0.1:7102   # the second\n"));
  EXPECT_THAT(text, HasSubstr("primary a\n"));
  EXPECT_THAT(SetStaticPrimary(path, "z").message(), HasSubstr("names no node 'z'"));
  // It records no handovers (a promotion fences the old primary first).
  ASSERT_OK(c->MarkEpoch(2, Handover{1, {3, 64}}));
  ASSERT_OK_AND_ASSIGN(const std::optional<wal::LogPosition> handed, c->HandedOver(1));
  EXPECT_FALSE(handed.has_value());
}

TEST(StaticCoordinatorTest, RefusesFilesThatDoNotParseNamingTheLine) {
  testing_util::TempDir dir;
  const std::string path = dir.Sub("cluster");
  const auto refused = [&](const std::string& text) {
    WriteFile(path, text);
    Result<std::unique_ptr<Coordinator>> c = Coordinator::Open("file://" + path);
    EXPECT_FALSE(c.ok()) << text;
    return c.status().ToString();
  };
  EXPECT_THAT(refused("node a ucx://127.0.0.1:1\nnode a ucx://127.0.0.1:2\nprimary a\n"),
              HasSubstr(", line 2: node 'a' is named twice"));
  EXPECT_THAT(refused("node a tcp://127.0.0.1:1\nprimary a\n"),
              HasSubstr(", line 1: the address is not ucx://HOST:PORT"));
  EXPECT_THAT(refused("node a ucx://127.0.0.1:1\nleader a\n"),
              HasSubstr(", line 2: not a line of a static cluster file: 'leader a'"));
  EXPECT_THAT(refused("node a ucx://127.0.0.1:1\nprimary a\nprimary a\n"),
              HasSubstr(", line 3: a second primary line"));
  EXPECT_THAT(refused("node a ucx://127.0.0.1:1\n"), HasSubstr("names no primary"));
  EXPECT_THAT(refused("node a ucx://127.0.0.1:1\nprimary b\n"),
              HasSubstr("the primary 'b' is no node of it"));
  Result<std::unique_ptr<Coordinator>> missing = Coordinator::Open("file://" + dir.Sub("none"));
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("the coordinator's static file"));
}

TEST(EtcdCoordinatorTest, RefusesMalformedAddressesAndTtls) {
  const auto refused = [](const std::string& address, CoordinatorOptions o = {}) {
    Result<std::unique_ptr<Coordinator>> c = Coordinator::Open(address, o);
    EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument) << address;
    return c.status().message();
  };
  EXPECT_THAT(refused("zookeeper://127.0.0.1:2181/x"),
              HasSubstr("give etcd://HOST:PORT[,HOST:PORT...]/CLUSTER or file://PATH"));
  EXPECT_THAT(refused("etcd://127.0.0.1:2379"), HasSubstr("no cluster name"));
  EXPECT_THAT(refused("etcd://127.0.0.1:2379/"), HasSubstr("no cluster name"));
  EXPECT_THAT(refused("etcd://127.0.0.1/x"), HasSubstr("'127.0.0.1' is not HOST:PORT"));
  EXPECT_THAT(refused("etcd://127.0.0.1:2379,:1/x"), HasSubstr("':1' is not HOST:PORT"));
  EXPECT_THAT(refused("etcd://127.0.0.1:2379/a/b"), HasSubstr("the cluster name may hold"));
  CoordinatorOptions o;
  o.ttl = 1500ms;
  EXPECT_THAT(refused("etcd://127.0.0.1:2379/x", o),
              HasSubstr("whole seconds from 1 to 60 (etcd's leases count seconds), not 1500 ms"));
}

class EtcdCoordinatorLiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string missing = testing_util::EtcdProcess::Missing(); !missing.empty()) {
      GTEST_SKIP() << missing;
    }
    etcd_ = std::make_unique<testing_util::EtcdProcess>(dir_.Sub("etcd"));
    cluster_ = "etcd://" + etcd_->endpoint() + "/test" + std::to_string(rng_() % 100000);
  }
  std::unique_ptr<Coordinator> Open(std::chrono::milliseconds ttl = 1s) {
    CoordinatorOptions o;
    o.ttl = ttl;
    Result<std::unique_ptr<Coordinator>> c = Coordinator::Open(cluster_, o);
    EXPECT_OK(c.status());
    return c.ok() ? std::move(c).value() : nullptr;
  }
  static NodeState Node(const std::string& name, uint64_t offset) {
    NodeState n;
    n.name = name;
    n.address = "ucx://127.0.0.1:" + std::to_string(7000 + name[0]);
    n.role = "replica";
    n.following = "ucx://127.0.0.1:7000";
    n.position = wal::LogPosition{1, offset};
    n.eligible = offset % 2 == 0;
    return n;
  }

  testing_util::TempDir dir_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
  std::unique_ptr<testing_util::EtcdProcess> etcd_;
  std::string cluster_;
};

TEST_F(EtcdCoordinatorLiveTest, OneCandidateWinsAndTheNextElectionsEpochIsLater) {
  std::unique_ptr<Coordinator> a = Open();
  std::unique_ptr<Coordinator> b = Open();
  ASSERT_TRUE(a && b);
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> none, a->Leader());
  EXPECT_FALSE(none.has_value());
  const uint64_t offset_a = rng_() % 1000000;
  const uint64_t offset_b = rng_() % 1000000;
  ASSERT_OK(a->Publish(Node("a", offset_a)));
  ASSERT_OK(b->Publish(Node("b", offset_b)));
  // What each published, as the other reads it.
  ASSERT_OK_AND_ASSIGN(const std::vector<NodeState> nodes, b->Nodes());
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "a");
  EXPECT_EQ(nodes[0].position.offset, offset_a);
  EXPECT_EQ(nodes[0].eligible, offset_a % 2 == 0);
  EXPECT_EQ(nodes[0].following, "ucx://127.0.0.1:7000");
  EXPECT_EQ(nodes[1].position.offset, offset_b);

  ASSERT_OK_AND_ASSIGN(const LeaderState won, a->Campaign(Node("a", offset_a)));
  EXPECT_EQ(won.name, "a");
  EXPECT_TRUE(won.this_session);
  EXPECT_GT(won.epoch, 0u);
  ASSERT_OK_AND_ASSIGN(const LeaderState lost, b->Campaign(Node("b", offset_b)));
  EXPECT_EQ(lost.name, "a");
  EXPECT_EQ(lost.epoch, won.epoch);
  EXPECT_FALSE(lost.this_session);
  // Campaigning again keeps the place and its epoch.
  ASSERT_OK_AND_ASSIGN(const LeaderState again, a->Campaign(Node("a", offset_a)));
  EXPECT_TRUE(again.this_session);
  EXPECT_EQ(again.epoch, won.epoch);
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> read, b->Leader());
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->address, Node("a", 0).address);
  EXPECT_EQ(read->epoch, won.epoch);

  // a resigns: b wins the next election, in a later epoch.
  ASSERT_OK(a->Resign());
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> gone, b->Leader());
  EXPECT_FALSE(gone.has_value());
  ASSERT_OK_AND_ASSIGN(const LeaderState next, b->Campaign(Node("b", offset_b)));
  EXPECT_EQ(next.name, "b");
  EXPECT_TRUE(next.this_session);
  EXPECT_GT(next.epoch, won.epoch);
  ASSERT_OK_AND_ASSIGN(const std::vector<NodeState> left, b->Nodes());
  ASSERT_EQ(left.size(), 1u);  // (a's session ended with its node key)
  EXPECT_EQ(left[0].name, "b");
  // The last epoch that took writes: marked by its primary while it holds
  // the place, kept after its session.
  ASSERT_OK_AND_ASSIGN(uint64_t last, b->LastEpoch());
  EXPECT_EQ(last, 0u);
  // b took over from won.epoch's primary at a random place of its log:
  // recorded with the epoch, for that primary's salvage.
  std::mt19937_64 rng(testing_util::TestSeed());
  const wal::LogPosition at{1 + rng() % 1000, rng() % (1u << 30)};
  ASSERT_OK_AND_ASSIGN(std::optional<wal::LogPosition> handed, a->HandedOver(won.epoch));
  EXPECT_FALSE(handed.has_value());
  ASSERT_OK(b->MarkEpoch(next.epoch, Handover{won.epoch, at}));
  const Status stale = a->MarkEpoch(won.epoch, Handover{won.epoch - 1, {1, 1}});
  EXPECT_EQ(stale.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(stale.message(), HasSubstr("no longer holds the primary's place"));
  ASSERT_OK(b->Resign());
  ASSERT_OK_AND_ASSIGN(last, a->LastEpoch());
  EXPECT_EQ(last, next.epoch);
  ASSERT_OK_AND_ASSIGN(handed, a->HandedOver(won.epoch));
  ASSERT_TRUE(handed.has_value());
  EXPECT_EQ(*handed, at);
  // (The refused mark recorded nothing; nor was next.epoch handed over.)
  ASSERT_OK_AND_ASSIGN(handed, a->HandedOver(won.epoch - 1));
  EXPECT_FALSE(handed.has_value());
  ASSERT_OK_AND_ASSIGN(handed, a->HandedOver(next.epoch));
  EXPECT_FALSE(handed.has_value());
}

TEST_F(EtcdCoordinatorLiveTest, ASessionNotRenewedExpiresWithItsLeadership) {
  std::unique_ptr<Coordinator> a = Open(1s);
  std::unique_ptr<Coordinator> b = Open(1s);
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->Publish(Node("a", 2)));
  ASSERT_OK_AND_ASSIGN(const LeaderState won, a->Campaign(Node("a", 2)));
  ASSERT_TRUE(won.this_session);
  // Renewed, it holds past its TTL.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(300ms);
    ASSERT_OK(a->KeepAlive());
  }
  ASSERT_OK_AND_ASSIGN(std::optional<LeaderState> held, b->Leader());
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->name, "a");
  // Not renewed, it goes (bounded: etcd's TTL may be its minimum, a few
  // seconds, where 1 s is below it).
  const auto until = std::chrono::steady_clock::now() + 15s;
  while (held.has_value() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    ASSERT_OK_AND_ASSIGN(held, b->Leader());
  }
  EXPECT_FALSE(held.has_value()) << "a's place outlived its session";
  const Status expired = a->KeepAlive();
  EXPECT_EQ(expired.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(expired.message(), HasSubstr("session with etcd (lease "));
  EXPECT_THAT(expired.message(), HasSubstr(") expired"));
  EXPECT_THAT(a->KeepAlive().message(), HasSubstr("no session with etcd: publish first"));
  // A new session, and a later epoch for whoever wins.
  ASSERT_OK(b->Publish(Node("b", 4)));
  ASSERT_OK_AND_ASSIGN(const LeaderState next, b->Campaign(Node("b", 4)));
  EXPECT_TRUE(next.this_session);
  EXPECT_GT(next.epoch, won.epoch);
}

TEST_F(EtcdCoordinatorLiveTest, EtcdStoppedOrGoneIsUnavailableNamingIt) {
  std::unique_ptr<Coordinator> a = Open();
  ASSERT_TRUE(a);
  ASSERT_OK(a->Publish(Node("a", 0)));
  etcd_->Signal(SIGSTOP);
  const auto started = std::chrono::steady_clock::now();
  const Status stopped = a->KeepAlive();
  etcd_->Signal(SIGCONT);
  EXPECT_EQ(stopped.code(), Status::Code::kUnavailable);
  EXPECT_THAT(stopped.message(), HasSubstr("etcd cannot be reached (http://" + etcd_->endpoint()));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);  // (request_timeout, 1 s)
  etcd_->Kill();
  const Result<std::optional<LeaderState>> gone = a->Leader();
  EXPECT_EQ(gone.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr(etcd_->endpoint()));
  // A second endpoint that answers is used when the first does not.
  etcd_->Start();
  CoordinatorOptions o;
  ASSERT_OK_AND_ASSIGN(
      auto two, Coordinator::Open("etcd://127.0.0.1:" + std::to_string(testing_util::FreePort()) +
                                      "," + etcd_->endpoint() + "/two",
                                  o));
  ASSERT_OK_AND_ASSIGN(const std::optional<LeaderState> none, two->Leader());
  EXPECT_FALSE(none.has_value());
}

}  // namespace
}  // namespace replaydb::rdma::coord

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(ClusterNodeTest, RefusesOptionsItCannotRunWithNamingThem) {
  testing_util::TempDir dir;
  ServerOptions server;
  server.listen = "ucx://127.0.0.1:" + std::to_string(testing_util::FreePort());
  ClusterOptions o;
  const auto refused = [&](const ServerOptions& s, const ClusterOptions& c) {
    Result<std::unique_ptr<ClusterNode>> node = ClusterNode::Start(dir.Sub("db"), {}, s, c);
    EXPECT_EQ(node.status().code(), Status::Code::kInvalidArgument);
    return node.status().message();
  };
  EXPECT_THAT(refused(server, o), HasSubstr("no coordinator given"));
  o.coordinator = "etcd://127.0.0.1:1/x";
  o.margin = o.ttl;
  EXPECT_THAT(refused(server, o), HasSubstr("the margin (2000 ms) must be above 0 and below the "
                                            "TTL (2000 ms)"));
  o.margin = 500ms;
  o.poll = 5ms;
  EXPECT_THAT(refused(server, o), HasSubstr("poll must be 10 ms to a quarter of the TTL"));
  o.poll = 100ms;
  ServerOptions any_port = server;
  any_port.listen = "ucx://127.0.0.1:0";
  EXPECT_THAT(refused(any_port, o), HasSubstr("a node listens on a port of its own"));
  ServerOptions replica = server;
  replica.replica_of = "ucx://127.0.0.1:7077";
  EXPECT_THAT(refused(replica, o), HasSubstr("the coordinator's to say, not replica_of's"));
  o.coordinator = "consul://127.0.0.1:1/x";
  EXPECT_THAT(refused(server, o), HasSubstr("give etcd://HOST:PORT[,HOST:PORT...]/CLUSTER"));
  // (Refused before anything is made.)
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("db")));
}

TEST(ClusterNodeTest, ElectionsAreProbedOnEtcdOnly) {
  testing_util::TempDir dir;
  const std::string file = dir.Sub("cluster");
  std::ofstream(file) << "node a ucx://127.0.0.1:7101\nprimary a\n";
  const Result<std::chrono::milliseconds> no = ProbeElection("file://" + file, 2s);
  EXPECT_EQ(no.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(no.status().message(), HasSubstr("only etcd elects"));
  ASSERT_OK_AND_ASSIGN(const std::string primary, ClusterPrimary("file://" + file));
  EXPECT_EQ(primary, "ucx://127.0.0.1:7101");
  if (const std::string missing = testing_util::EtcdProcess::Missing(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  testing_util::EtcdProcess etcd(dir.Sub("etcd"));
  const std::string cluster = "etcd://" + etcd.endpoint() + "/probe";
  ASSERT_OK_AND_ASSIGN(const std::string none, ClusterPrimary(cluster));
  EXPECT_EQ(none, "");
  // An election follows the lapsed session's TTL (1 s), not sooner.
  ASSERT_OK_AND_ASSIGN(const std::chrono::milliseconds took, ProbeElection(cluster, 1s));
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 10s);
}

}  // namespace
}  // namespace replaydb
