// Requests and replies (rdma/rpc.h) between real UCP workers over
// 127.0.0.1: the handshake, replies matched to their calls under
// concurrency, timeouts, failures carried back, backpressure, a server
// process killed mid-call. Every wait is bounded.
#include "rdma/rpc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace fb = wire::fb;

// Requests in these tests are Pong bodies (the handler's to answer; Ping
// the server answers itself). The payload says what the handler does:
// "sleep N" sleeps N ms, "fail" fails, anything else comes back reversed.
Result<Reply> TestHandler(Request& r) {
  const std::string& p = r.message.payload;
  HeaderFields f;
  f.request_id = r.message.header()->request_id();
  if (p.rfind("sleep ", 0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(p.c_str() + 6)));
  }
  if (p == "fail") return Status::NotFound("no table named 'x'");
  return Reply{EncodePong(f), std::string(p.rbegin(), p.rend())};
}

auto Pong() {
  return [](const HeaderFields& f) { return EncodePong(f); };
}
auto Ping() {
  return [](const HeaderFields& f) { return EncodePing(f); };
}

RpcServerOptions ServerOptions(int threads = 2, size_t max_queued = 64) {
  RpcServerOptions o;
  o.server_name = "test-server";
  o.threads = threads;
  o.max_queued = max_queued;
  o.transport.workers = 2;
  o.transport.heartbeat = 2000ms;  // robust under sanitizers and parallel ctest
  return o;
}

RpcClientOptions ClientOptions() {
  RpcClientOptions o;
  o.client_name = "test-client";
  o.transport.heartbeat = 2000ms;
  return o;
}

TEST(RpcTest, HandshakeThenRepliesMatchTheirCallsAcrossThreads) {
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(ServerOptions(), TestHandler));
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", server->port(), ClientOptions()));
  EXPECT_EQ(client->server_name(), "test-server");
  EXPECT_TRUE(client->connected());
  const uint64_t seed = testing_util::TestSeed();
  std::atomic<int> matched{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (int i = 0; i < 40; ++i) {
        std::string payload(rng() % (i % 5 == 0 ? 256 << 10 : 512), '\0');
        for (char& c : payload) c = static_cast<char>('a' + rng() % 26);
        const bool ping = i % 2 == 0;
        auto reply = client->Call(ping ? std::function<std::string(const HeaderFields&)>(Ping())
                                       : Pong(),
                                  payload, 20s);
        ASSERT_TRUE(reply.ok()) << reply.status().ToString();
        ASSERT_EQ(reply->header()->body_type(), fb::Body::Pong);
        const std::string want = ping ? payload : std::string(payload.rbegin(), payload.rend());
        EXPECT_TRUE(reply->payload == want) << "thread " << t << " call " << i;
        ++matched;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(matched.load(), 160);
}

// Deferred replies (Request::Defer): sent later from other threads, and
// from handlers that a deferred reply's send runs on its thread (a Send
// progresses the worker it takes): every call is answered, none twice, and
// failures sent later come back as their status.
TEST(RpcTest, DeferredRepliesSentFromAnyThreadAnswerEveryCall) {
  std::mutex mu;
  std::vector<std::pair<Request::Responder, Reply>> later;  // guarded by mu
  std::atomic<bool> stop{false};
  RpcServerOptions o = ServerOptions();
  const auto defer = [&](Request& r) -> Result<Reply> {
    HeaderFields f;
    f.request_id = r.message.header()->request_id();
    const std::string& p = r.message.payload;
    Reply reply{EncodePong(f), std::string(p.rbegin(), p.rend())};
    Request::Responder respond = r.Defer();
    if (p == "fail") {
      respond(Status::NotFound("no table named 'later'"));
    } else if (p.size() % 2 == 0) {
      respond(std::move(reply));  // at once, on this thread (a worker's, inline)
    } else {
      std::lock_guard<std::mutex> lock(mu);
      later.emplace_back(std::move(respond), std::move(reply));
    }
    return Status::Internal("not sent: deferred");
  };
  o.try_inline = [&](Request& r) -> std::optional<Result<Reply>> { return defer(r); };
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(o, defer));
  // Another thread sends what waits, as replicas' reads would.
  std::thread sender([&] {
    while (!stop.load()) {
      std::vector<std::pair<Request::Responder, Reply>> now;
      {
        std::lock_guard<std::mutex> lock(mu);
        now.swap(later);
      }
      for (auto& [respond, reply] : now) respond(std::move(reply));
      std::this_thread::sleep_for(100us);
    }
  });
  ASSERT_OK_AND_ASSIGN(auto client,
                       RpcClient::Connect("127.0.0.1", server->port(), ClientOptions()));
  std::mt19937_64 rng(testing_util::TestSeed());
  std::vector<std::shared_ptr<PendingCall>> calls;
  std::vector<std::string> sent;
  for (int i = 0; i < 600; ++i) {
    std::string payload = i % 97 == 0 ? "fail" : std::string(1 + rng() % 64, 'a' + i % 26);
    calls.push_back(client->Start(Pong(), payload, 20s));
    sent.push_back(std::move(payload));
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    Result<Message> m = client->Await(*calls[i]);
    if (sent[i] == "fail") {
      EXPECT_EQ(m.status().code(), Status::Code::kNotFound) << i;
      EXPECT_THAT(m.status().message(), HasSubstr("no table named 'later'"));
      continue;
    }
    ASSERT_TRUE(m.ok()) << i << ": " << m.status().ToString();
    EXPECT_EQ(m->payload, std::string(sent[i].rbegin(), sent[i].rend())) << i;
  }
  stop = true;
  sender.join();
}

TEST(RpcTest, FailuresComeBackAsTheirStatus) {
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(ServerOptions(), TestHandler));
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", server->port(), ClientOptions()));
  auto reply = client->Call(Pong(), "fail", 10s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status(), Status::NotFound("no table named 'x'"));
  // The connection goes on.
  ASSERT_OK(client->Call(Ping(), "", 10s).status());
}

TEST(RpcTest, ACallThatOutlivesItsTimeoutFailsAndTheLateReplyIsDropped) {
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(ServerOptions(), TestHandler));
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", server->port(), ClientOptions()));
  const auto start = std::chrono::steady_clock::now();
  // The reply comes 3 s late: a call that waited for it would take that
  // long, however loaded the machine.
  auto slow = client->Call(Pong(), "sleep 3000", 300ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().code(), Status::Code::kDeadlineExceeded) << slow.status().ToString();
  EXPECT_THAT(slow.status().message(),
              HasSubstr("to server 127.0.0.1:" + std::to_string(server->port()) +
                        " got no reply within 300 ms"));
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 2900ms);
  // The late reply arrives meanwhile and is dropped; later calls get theirs.
  auto next = client->Call(Pong(), "abc", 10s);
  ASSERT_OK(next.status());
  EXPECT_EQ(next->payload, "cba");
}

TEST(RpcTest, AClientOfAnotherProtocolVersionIsRefusedNamingBoth) {
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(ServerOptions(), TestHandler));
  RpcClientOptions o = ClientOptions();
  o.protocol_version = 99;
  auto client = RpcClient::Connect("127.0.0.1", server->port(), o);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Status::Code::kFailedPrecondition)
      << client.status().ToString();
  EXPECT_THAT(client.status().message(),
              HasSubstr("server 'test-server' speaks protocol version " +
                        std::to_string(kProtocolVersion) + ", the client 99"));
}

TEST(RpcTest, AFullQueueRefusesAtOnceInsteadOfGrowing) {
  // One executor thread, one queued request at most.
  ASSERT_OK_AND_ASSIGN(auto server, RpcServer::Start(ServerOptions(1, 1), TestHandler));
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", server->port(), ClientOptions()));
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::atomic<int> refused{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      auto r = client->Call(Pong(), "sleep 400", 20s);
      if (r.ok()) {
        ++ok;
      } else {
        EXPECT_EQ(r.status().code(), Status::Code::kResourceExhausted) << r.status().ToString();
        EXPECT_THAT(r.status().message(), HasSubstr("has 1 requests waiting: try again later"));
        ++refused;
      }
    });
    std::this_thread::sleep_for(50ms);  // likely in order: running, queued, refused, refused
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load() + refused.load(), 4);
  EXPECT_GE(refused.load(), 1);
  EXPECT_GE(ok.load(), 1);
}

// A server in a process of its own (this binary again), killed mid-call.
constexpr char kChildEnv[] = "REPLAYDB_RPC_SERVER_CHILD";

TEST(RpcChild, ServeUntilKilled) {
  if (std::getenv(kChildEnv) == nullptr) GTEST_SKIP() << "runs only as the rpc tests' server";
  auto server = RpcServer::Start(ServerOptions(), TestHandler);
  ASSERT_OK(server.status());
  std::printf("port %u\n", static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);
  std::this_thread::sleep_for(60s);
}

TEST(RpcTest, AServerKilledMidCallFailsTheCallUnavailable) {
  testing_util::ChildTest child("RpcChild.ServeUntilKilled", kChildEnv, "1");
  const pid_t pid = child.pid();
  unsigned port = 0;
  std::sscanf(child.LineStartingWith("port ").c_str(), "port %u", &port);
  ASSERT_NE(port, 0u);
  ASSERT_OK_AND_ASSIGN(auto client, RpcClient::Connect("127.0.0.1", static_cast<uint16_t>(port),
                                                       ClientOptions()));
  std::thread killer([pid] {
    std::this_thread::sleep_for(300ms);
    ::kill(pid, SIGKILL);
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Call(Pong(), "sleep 20000", 30s);
  killer.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnavailable) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_FALSE(client->connected());
  auto after = client->Call(Ping(), "", 1s);
  EXPECT_EQ(after.status().code(), Status::Code::kUnavailable) << after.status().ToString();
}

}  // namespace
}  // namespace replaydb::rdma
