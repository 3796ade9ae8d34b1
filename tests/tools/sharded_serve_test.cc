// A sharded table over three `replaydb serve` processes on 127.0.0.1
// (DB::Connect("A+B+C")): created on each, written round-robin, sampled
// with the exact global distribution (chi-square), its mass asked of each
// server (GetMass), the shell reading it, a FIFO table's draws in the order
// written across the servers; a shard killed makes calls fail
// Unavailable naming it, except the samples of a connection that skips
// unavailable shards, which draw from the others; an address that gives
// "-" in its place goes on without it. Bounded waits only; every server is stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "rdma/shards/sharded_db.h"
#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/tools/serve_process.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using testing_util::ServeProcess;

TEST(ShardedServeTest, ATableOverThreeServersSamplesWithGlobalProbabilities) {
  testing_util::TempDir dir;
  std::mt19937_64 rng(testing_util::TestSeed());
  std::vector<std::unique_ptr<ServeProcess>> servers;
  std::vector<std::string> addresses;
  for (int s = 0; s < 3; ++s) {
    servers.push_back(std::make_unique<ServeProcess>(std::vector<std::string>{
        dir.Sub("shard" + std::to_string(s)), "--listen", "ucx://127.0.0.1:0", "--workers", "1"}));
    addresses.push_back(
        servers.back()->WaitFor(std::regex("listening on (ucx://127\\.0\\.0\\.1:[0-9]+)"), 30s));
    ASSERT_FALSE(addresses.back().empty()) << servers.back()->output();
  }
  const std::string address = addresses[0] + "+" + addresses[1] + "+" + addresses[2];
  ConnectOptions o;
  o.client_name = "sharded learner";
  ASSERT_OK_AND_ASSIGN(auto db, DB::Connect(address, o));
  EXPECT_EQ(db->path(), address);
  TableSpec spec;
  spec.name = "experience";
  spec.columns = {{"obs", DType::kF32, Shape{4}}, {"reward", DType::kF32, Shape{}}};
  spec.capacity_steps = 4096;
  spec.block_steps = 16;
  spec.sequence_length = 1;
  spec.selector = SelectorKind::kPrioritized;
  spec.priority_exponent = 1.0;
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  EXPECT_EQ(db->ListTables(), std::vector<std::string>{"experience"});

  // Two writers, trajectories round the shards; priorities 10^shard.
  std::vector<std::unique_ptr<TrajectoryWriter>> writers(2);
  for (auto& w : writers) {
    ASSERT_OK_AND_ASSIGN(w, table->NewWriter());
  }
  std::map<int, int> per_shard;
  int64_t steps = 0;
  for (int t = 0; t < 12; ++t) {
    TrajectoryWriter& w = *writers[static_cast<size_t>(t) % 2];
    const int n = 2 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i, ++steps) {
      ASSERT_OK(w.Append(testing_util::RandomStep(spec, rng).tensors));
    }
    ++per_shard[rdma::ShardOfTrajectory(w.trajectory_id())];
    ASSERT_OK(w.End(EndReason::kTerminal));
  }
  EXPECT_EQ(per_shard, (std::map<int, int>{{0, 4}, {1, 4}, {2, 4}}));
  std::vector<ItemKey> keys;
  std::vector<double> unused;
  ASSERT_OK(table->ItemPriorities(&keys, &unused));
  ASSERT_EQ(static_cast<int64_t>(keys.size()), steps);
  std::vector<double> priorities;
  double total = 0;
  for (ItemKey key : keys) {
    priorities.push_back(std::pow(10.0, rdma::ShardOfKey(key)) *
                         (1 + std::uniform_real_distribution<double>(0, 1)(rng)));
    total += priorities.back();
  }
  ASSERT_OK(table->UpdatePriorities(keys, priorities));
  ASSERT_OK_AND_ASSIGN(const SamplingMass mass, table->Mass());
  EXPECT_NEAR(mass.total / total, 1.0, 1e-12);
  EXPECT_EQ(mass.items, steps);
  std::map<ItemKey, double> want;
  for (size_t i = 0; i < keys.size(); ++i) want[keys[i]] = priorities[i] / total;

  std::map<ItemKey, int64_t> counts;
  const int64_t B = 64;
  const int rounds = 150;
  SampleOptions so;
  so.timeout = 10s;
  for (int r = 0; r < rounds; ++r) {
    SampleBatch batch;
    ASSERT_OK(table->Sample(B, so, &batch));
    for (int64_t b = 0; b < B; ++b) {
      ASSERT_EQ(want.count(batch.keys[b]), 1u);
      ++counts[batch.keys[b]];
      EXPECT_NEAR(batch.probabilities[b] / want.at(batch.keys[b]), 1.0, 1e-9);
    }
  }
  double chi2 = 0;
  for (const auto& [key, p] : want) {
    const double expected = p * static_cast<double>(B * rounds);
    const double seen = static_cast<double>(counts[key]);
    chi2 += (seen - expected) * (seen - expected) / expected;
  }
  EXPECT_LT(chi2, testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)));
  EXPECT_EQ(table->Info().num_steps, steps);
  EXPECT_EQ(table->Info().items_sampled, B * rounds);

  // The shell sees the sharded table as one.
  const std::string out = testing_util::ShellOutput(
      "timeout 60 " + std::string(REPLAYDB_TOOL_PATH) + " '" + address + "' -c tables 2>&1");
  EXPECT_THAT(out, HasSubstr("experience")) << out;

  // A FIFO table over the three: draws merge the servers' insertion orders
  // (asked with each sample), so the steps come back in the order written.
  TableSpec queue = spec;
  queue.name = "queue";
  queue.selector = SelectorKind::kFifo;
  queue.max_times_sampled = 1;
  ASSERT_OK_AND_ASSIGN(auto fifo, db->CreateTable(queue));
  {
    ASSERT_OK_AND_ASSIGN(auto w, fifo->NewWriter());
    int in_trajectory = 0;
    for (int i = 0; i < 12; ++i) {
      testing_util::StepData step = testing_util::RandomStep(queue, rng);
      const float number = static_cast<float>(i);
      std::memcpy(step.columns[1].data(), &number, sizeof(number));
      ASSERT_OK(w->Append(step.tensors));
      if (++in_trajectory == 1 + static_cast<int>(rng() % 3)) {
        ASSERT_OK(w->End(EndReason::kTerminal));
        in_trajectory = 0;
      }
      std::this_thread::sleep_for(2ms);  // (the servers' item clocks tick each ms)
    }
    ASSERT_OK(w->End(EndReason::kTerminal));
  }
  // A lookup gives each item's insertion order too (the servers' clocks).
  std::vector<ItemKey> queued_keys;
  ASSERT_OK(fifo->ItemPriorities(&queued_keys, &unused));
  ASSERT_EQ(queued_keys.size(), 12u);
  SampleBatch looked_up;
  ASSERT_OK(fifo->Lookup(queued_keys, &looked_up));
  ASSERT_EQ(looked_up.insertion_order.size(), 12u);
  SampleBatch queued;
  ASSERT_OK(fifo->Sample(12, so, &queued));
  std::vector<float> order(queued.columns[1].data_as<float>(),
                           queued.columns[1].data_as<float>() + 12);
  EXPECT_EQ(order, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_TRUE(std::is_sorted(queued.insertion_order.begin(), queued.insertion_order.end()));
  std::map<ItemKey, uint64_t> order_of;
  for (size_t i = 0; i < 12; ++i) order_of[looked_up.keys[i]] = looked_up.insertion_order[i];
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(queued.insertion_order[i], order_of[queued.keys[i]]) << i;
    EXPECT_GT(queued.insertion_order[i], uint64_t{1} << 60) << "numbered by the clock";
  }
  EXPECT_EQ(fifo->Info().num_items, 0);

  // A second learner whose connection skips shards that are down.
  o.skip_unavailable_shards = true;
  ASSERT_OK_AND_ASSIGN(auto skipping_db, DB::Connect(address, o));
  ASSERT_OK_AND_ASSIGN(auto skipping, skipping_db->GetTable("experience"));

  // Shard 2 gone: calls that need it fail Unavailable, naming it.
  ASSERT_EQ(::kill(servers[2]->pid(), SIGKILL), 0);
  servers[2]->Exit(30s);
  Status s;
  for (int i = 0; i < 100 && s.code() != Status::Code::kUnavailable; ++i) {
    SampleBatch batch;
    s = table->Sample(B, so, &batch);
  }
  EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("shard 2 (" + addresses[2] + ")"));
  // ... except the skipping learner's samples: from shards 0 and 1, with
  // the chances of a table holding only theirs.
  double left_total = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (rdma::ShardOfKey(keys[i]) != 2) left_total += priorities[i];
  }
  // (Its own connection to shard 2 may not have seen the end yet.)
  Result<SamplingMass> left = skipping->Mass();
  for (int i = 0; i < 100 && !left.ok(); ++i) left = skipping->Mass();
  ASSERT_OK(left.status());
  EXPECT_NEAR(left->total / left_total, 1.0, 1e-12);
  for (int r = 0; r < 20; ++r) {
    SampleBatch batch;
    ASSERT_OK(skipping->Sample(B, so, &batch));
    for (int64_t b = 0; b < B; ++b) {
      ASSERT_NE(rdma::ShardOfKey(batch.keys[b]), 2);
      EXPECT_NEAR(batch.probabilities[b] / (want.at(batch.keys[b]) * total / left_total), 1.0,
                  1e-9);
    }
  }
  // Shard 2 leaves for good: the address keeps its place with "-", and the
  // other shards' keys keep their meaning.
  const std::string without = addresses[0] + "+" + addresses[1] + "+-";
  ASSERT_OK_AND_ASSIGN(auto left_db, DB::Connect(without, o));
  ASSERT_OK_AND_ASSIGN(auto left_table, left_db->GetTable("experience"));
  std::vector<ItemKey> kept, gone;
  for (ItemKey key : keys) (rdma::ShardOfKey(key) == 2 ? gone : kept).push_back(key);
  SampleBatch looked;
  ASSERT_OK(left_table->Lookup(kept, &looked));
  EXPECT_EQ(looked.keys, kept);
  s = left_table->Lookup(gone, &looked);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("names shard 2, which has left"));
  SampleBatch drawn;
  ASSERT_OK(left_table->Sample(B, so, &drawn));
  for (ItemKey key : drawn.keys) EXPECT_NE(rdma::ShardOfKey(key), 2);
  EXPECT_EQ(left_table->Info().num_items, static_cast<int64_t>(kept.size()));
  left_db.reset();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(::kill(servers[static_cast<size_t>(i)]->pid(), SIGTERM), 0);
    EXPECT_EQ(servers[static_cast<size_t>(i)]->Exit(60s), 0)
        << servers[static_cast<size_t>(i)]->output();
  }
}

}  // namespace
}  // namespace replaydb
