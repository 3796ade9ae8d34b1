// A served database (rdma/db_service.h) read through rdma/remote_db.h over
// real UCP workers on 127.0.0.1: tables listed and opened, seeded samples
// byte-identical to the same calls on a local copy of the database, the
// server's errors carried back, damaged replies refused.
#include "rdma/remote_db.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "rdma/db_service.h"
#include "rdma/rpc.h"
#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

TableSpec RandomSpec(std::mt19937_64& rng, const std::string& name) {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kF32, Shape{static_cast<int64_t>(1 + rng() % 8)}},
                  {"act", DType::kI32, Shape{}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(1 + rng() % 100)}}};
  spec.capacity_steps = 1 << 12;
  spec.block_steps = 16;
  spec.sequence_length = 1 + static_cast<int64_t>(rng() % 4);
  spec.selector = rng() % 2 == 0 ? SelectorKind::kUniform : SelectorKind::kPrioritized;
  return spec;
}

void Fill(Table& table, std::mt19937_64& rng) {
  for (int t = 0; t < 12; ++t) {
    auto writer = table.NewWriter();
    ASSERT_OK(writer.status());
    const int steps = 4 + static_cast<int>(rng() % 20);
    for (int s = 0; s < steps; ++s) {
      testing_util::StepData step = testing_util::RandomStep(table.spec(), rng);
      ASSERT_OK((*writer)->Append(step.tensors, 0.5 + static_cast<double>(rng() % 100)));
    }
    ASSERT_OK((*writer)->End(EndReason::kTerminal));
  }
}

void ExpectSameBatch(const SampleBatch& a, const SampleBatch& b) {
  EXPECT_EQ(a.batch_size, b.batch_size);
  EXPECT_EQ(a.sequence_length, b.sequence_length);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.probabilities, b.probabilities);
  EXPECT_EQ(a.priorities, b.priorities);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.times_sampled, b.times_sampled);
  ASSERT_EQ(a.columns.size(), b.columns.size());
  for (size_t c = 0; c < a.columns.size(); ++c) {
    EXPECT_EQ(a.columns[c].dtype(), b.columns[c].dtype());
    EXPECT_TRUE(a.columns[c].shape() == b.columns[c].shape()) << "column " << c;
    ASSERT_EQ(a.columns[c].size_bytes(), b.columns[c].size_bytes());
    EXPECT_EQ(std::memcmp(a.columns[c].data(), b.columns[c].data(), a.columns[c].size_bytes()),
              0)
        << "column " << c;
  }
}

struct Served {
  testing_util::TempDir dir;
  std::unique_ptr<DB> served;  // the server's
  std::unique_ptr<DB> local;   // a copy, opened here
  std::unique_ptr<DbService> service;
  std::unique_ptr<RpcServer> server;
  TableSpec spec;

  void Start(uint64_t seed) {
    std::mt19937_64 rng(seed);
    spec = RandomSpec(rng, "t");
    {
      DBOptions o = testing_util::ManualCheckpoints();
      o.create_if_missing = true;
      auto db = DB::Open(o, dir.Sub("a"));
      ASSERT_OK(db.status());
      auto table = (*db)->CreateTable(spec);
      ASSERT_OK(table.status());
      Fill(**table, rng);
      TableSpec empty = RandomSpec(rng, "empty");
      ASSERT_OK((*db)->CreateTable(empty).status());
      ASSERT_OK((*db)->Checkpoint());
    }
    fs::copy(dir.Sub("a"), dir.Sub("b"), fs::copy_options::recursive);
    auto a = DB::Open(testing_util::ManualCheckpoints(), dir.Sub("a"));
    ASSERT_OK(a.status());
    served = std::move(a).value();
    auto b = DB::Open(testing_util::ManualCheckpoints(), dir.Sub("b"));
    ASSERT_OK(b.status());
    local = std::move(b).value();
    RpcServerOptions o;
    o.server_name = "served";
    o.transport.heartbeat = 2000ms;
    service = std::make_unique<DbService>(served.get());
    RequestHandler handler;
    ServeWith(service.get(), &o, &handler);
    auto s = RpcServer::Start(o, std::move(handler));
    ASSERT_OK(s.status());
    server = std::move(s).value();
  }
  std::string address() const { return "ucx://127.0.0.1:" + std::to_string(server->port()); }
  ~Served() { server.reset(); }
};

TEST(RemoteDBTest, SeededRemoteSamplesAreByteIdenticalToLocalOnes) {
  const uint64_t seed = testing_util::TestSeed();
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.Start(seed));
  ASSERT_OK_AND_ASSIGN(auto remote, RemoteDB::Connect(s.address()));
  ASSERT_OK_AND_ASSIGN(const std::vector<std::string> names, remote->ListTables());
  EXPECT_EQ(names, s.local->ListTables());
  ASSERT_OK_AND_ASSIGN(auto rt, remote->GetTable("t"));
  ASSERT_OK_AND_ASSIGN(auto lt, s.local->GetTable("t"));
  EXPECT_EQ(rt->spec().sequence_length, lt->spec().sequence_length);
  EXPECT_EQ(rt->spec().selector, lt->spec().selector);
  ASSERT_EQ(rt->spec().columns.size(), lt->spec().columns.size());
  ASSERT_OK(rt->Seed(seed));
  ASSERT_OK(lt->Seed(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 6; ++i) {
    SampleOptions o;
    o.timeout = 10s;
    o.importance_beta = i % 2 == 0 ? -1.0 : 0.4;
    o.stratified = i % 3 == 0;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 64);
    SampleBatch got;
    SampleBatch want;
    ASSERT_OK(rt->Sample(n, o, &got));
    ASSERT_OK(lt->Sample(n, o, &want));
    ASSERT_NO_FATAL_FAILURE(ExpectSameBatch(got, want)) << "sample " << i;
  }
}

TEST(RemoteDBTest, TheServersErrorsComeBackNamingWhatFailed) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.Start(testing_util::TestSeed()));
  ASSERT_OK_AND_ASSIGN(auto remote, RemoteDB::Connect(s.address()));
  auto missing = remote->GetTable("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound) << missing.status().ToString();
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  // Nothing to draw: the server's rate limiter waits out the timeout.
  ASSERT_OK_AND_ASSIGN(auto empty, remote->GetTable("empty"));
  SampleOptions o;
  o.timeout = 200ms;
  SampleBatch batch;
  const auto start = std::chrono::steady_clock::now();
  const Status waited = empty->Sample(1, o, &batch);
  EXPECT_EQ(waited.code(), Status::Code::kDeadlineExceeded) << waited.ToString();
  EXPECT_THAT(waited.message(), HasSubstr("table 'empty'"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  o.gather = false;
  EXPECT_EQ(empty->Sample(1, o, &batch).code(), Status::Code::kNotSupported);
}

TEST(RemoteDBTest, AddressesAreCheckedNamingThem) {
  std::string host;
  uint16_t port = 0;
  ASSERT_OK(ParseAddress("ucx://127.0.0.1:4000", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 4000);
  ASSERT_OK(ParseAddress("localhost:1", &host, &port));
  for (const char* bad : {"ucx://127.0.0.1", "ucx://:80", "127.0.0.1:0", "127.0.0.1:65536",
                          "127.0.0.1:8x", ""}) {
    const Status st = ParseAddress(bad, &host, &port);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), HasSubstr(std::string("address '") + bad + "'"));
  }
  auto nobody = RemoteDB::Connect("ucx://127.0.0.1:1");
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), Status::Code::kUnavailable) << nobody.status().ToString();
}

TEST(RemoteDBTest, ASamplePayloadThatDoesNotAddUpIsCorruption) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const TableSpec spec = RandomSpec(rng, "t");
  SampleBatch batch;
  batch.batch_size = 3;
  batch.sequence_length = spec.sequence_length;
  batch.keys = {1, 2, 3};
  batch.probabilities = {0.1, 0.2, 0.3};
  batch.priorities = {1, 2, 3};
  batch.times_sampled = {1, 1, 2};
  batch.mask.assign(static_cast<size_t>(3 * spec.sequence_length), 1);
  for (const ColumnSpec& c : spec.columns) {
    std::vector<int64_t> dims = {3, spec.sequence_length};
    for (const int64_t d : c.shape.dims()) dims.push_back(d);
    Tensor t;
    t.Reset(c.dtype, Shape::FromSpan(dims));
    for (size_t i = 0; i < t.size_bytes(); ++i) t.data()[i] = static_cast<std::byte>(rng());
    batch.columns.push_back(std::move(t));
  }
  const std::string payload = EncodeSamplePayload(batch);
  SampleBatch back;
  ASSERT_OK(DecodeSamplePayload(payload, spec, 3, spec.sequence_length, false, "peer", &back));
  ASSERT_NO_FATAL_FAILURE(ExpectSameBatch(back, batch));
  for (const size_t cut : {size_t{0}, payload.size() / 2, payload.size() - 1}) {
    const Status s = DecodeSamplePayload(std::string_view(payload).substr(0, cut), spec, 3,
                                         spec.sequence_length, false, "peer", &back);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << cut;
    EXPECT_THAT(s.message(), HasSubstr("sample of table 't' from peer: "));
  }
  const Status longer = DecodeSamplePayload(payload + "x", spec, 3, spec.sequence_length, false,
                                            "peer", &back);
  EXPECT_THAT(longer.message(), HasSubstr("1 bytes more than the batch holds"));
  const Status huge = DecodeSamplePayload(payload, spec, int64_t{1} << 40, 1, false, "peer", &back);
  EXPECT_EQ(huge.code(), Status::Code::kCorruption);
}

std::string StepBytes(const testing_util::StepData& step) {
  std::string out;
  for (const auto& c : step.columns) out.append(reinterpret_cast<const char*>(c.data()), c.size());
  return out;
}

std::string ReadBack(Table& table, uint64_t id, int64_t step) {
  TrajectorySteps steps;
  EXPECT_OK(table.ReadTrajectory(id, step, 1, &steps));
  std::string out;
  for (const Tensor& c : steps.columns) {
    out.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
  }
  return out;
}

TEST(RemoteDBTest, RemoteWritersStoreEveryStepByteForByte) {
  const uint64_t seed = testing_util::TestSeed();
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.Start(seed));
  ASSERT_OK_AND_ASSIGN(auto remote, RemoteDB::Connect(s.address()));
  ASSERT_OK_AND_ASSIGN(auto rt, remote->GetTable("t"));
  ASSERT_OK_AND_ASSIGN(auto served, s.served->GetTable("t"));
  const int64_t before = served->Info().num_steps;
  std::mt19937_64 rng(seed + 1);
  std::map<uint64_t, std::vector<std::string>> written;
  {
    ASSERT_OK_AND_ASSIGN(auto writer, rt->NewWriter());
    for (int t = 0; t < 5; ++t) {
      const int steps = 1 + static_cast<int>(rng() % 10);
      for (int i = 0; i < steps; ++i) {
        testing_util::StepData step = testing_util::RandomStep(rt->spec(), rng);
        ASSERT_OK(writer->Append(step.tensors, 1.0 + static_cast<double>(rng() % 50)));
        EXPECT_EQ(writer->num_steps(), i + 1);
        written[writer->trajectory_id()].push_back(StepBytes(step));
      }
      ASSERT_OK(writer->End(t % 2 == 0 ? EndReason::kTerminal : EndReason::kTruncated));
    }
  }
  int64_t total = 0;
  for (const auto& [id, steps] : written) {
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_EQ(ReadBack(*served, id, static_cast<int64_t>(i)), steps[i])
          << "trajectory " << id << " step " << i;
    }
    total += static_cast<int64_t>(steps.size());
  }
  EXPECT_EQ(written.size(), 5u);
  EXPECT_EQ(served->Info().num_steps, before + total);
  EXPECT_EQ(s.service->open_writers(), 0u);
}

TEST(RemoteDBTest, ABadStepIsRefusedNamingTheColumnAndNothingIsStored) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.Start(testing_util::TestSeed()));
  ASSERT_OK_AND_ASSIGN(auto remote, RemoteDB::Connect(s.address()));
  ASSERT_OK_AND_ASSIGN(auto rt, remote->GetTable("t"));
  ASSERT_OK_AND_ASSIGN(auto served, s.served->GetTable("t"));
  const int64_t before = served->Info().num_steps;
  ASSERT_OK_AND_ASSIGN(auto writer, rt->NewWriter());
  std::mt19937_64 rng(1);
  testing_util::StepData step = testing_util::RandomStep(rt->spec(), rng);
  step.tensors[1].dtype = DType::kF32;  // "act" is i32
  const Status wrong = writer->Append(step.tensors);
  EXPECT_EQ(wrong.code(), Status::Code::kInvalidArgument) << wrong.ToString();
  EXPECT_THAT(wrong.message(), HasSubstr("table 't': step, column 'act' expects dtype i32"));
  const Status bad_end = writer->End(static_cast<EndReason>(7));
  EXPECT_EQ(bad_end.code(), Status::Code::kInvalidArgument) << bad_end.ToString();
  EXPECT_EQ(served->Info().num_steps, before);
  auto missing = remote->GetTable("nope");
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
}

// A client process killed in the middle of a trajectory: the server ends it
// truncated; every acknowledged step stays, and nothing waits for it.
constexpr char kWriterChildEnv[] = "REPLAYDB_REMOTE_WRITER_CHILD";

TEST(RemoteWriterChild, AppendThreeStepsThenWait) {
  const char* address = std::getenv(kWriterChildEnv);
  if (address == nullptr) GTEST_SKIP() << "runs only as the remote writer test's client";
  ASSERT_OK_AND_ASSIGN(auto remote, RemoteDB::Connect(address));
  ASSERT_OK_AND_ASSIGN(auto rt, remote->GetTable("t"));
  ASSERT_OK_AND_ASSIGN(auto writer, rt->NewWriter());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(writer->Append(testing_util::RandomStep(rt->spec(), rng).tensors));
  }
  std::printf("appended %llu\n", static_cast<unsigned long long>(writer->trajectory_id()));
  std::fflush(stdout);
  std::this_thread::sleep_for(60s);
}

TEST(RemoteDBTest, AClientKilledMidTrajectoryLeavesItEndedTruncatedWithItsSteps) {
  Served s;
  ASSERT_NO_FATAL_FAILURE(s.Start(testing_util::TestSeed()));
  unsigned long long id = 0;
  {
    testing_util::ChildTest child("RemoteWriterChild.*", kWriterChildEnv, s.address());
    std::sscanf(child.LineStartingWith("appended ").c_str(), "appended %llu", &id);
  }  // killed here, mid-trajectory
  ASSERT_NE(id, 0u) << "the client process did not append";
  ASSERT_OK_AND_ASSIGN(auto served, s.served->GetTable("t"));
  // Bounded: the server notices the dead peer and drops its writer.
  TrajectoryInfo info;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    TrajectoryFilter filter;
    filter.from = id;
    filter.limit = 1;
    const auto found = served->ListTrajectories(filter);
    ASSERT_FALSE(found.empty());
    info = found[0];
    if (info.ended) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(info.ended) << "the killed client's trajectory was never ended";
  EXPECT_EQ(info.end_reason, EndReason::kTruncated);
  EXPECT_EQ(info.length, 3);
  EXPECT_EQ(s.service->open_writers(), 0u);
}

}  // namespace
}  // namespace replaydb::rdma
