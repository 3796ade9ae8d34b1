// Sharded tables (rdma/shards/sharded_db.h) over local databases as
// shards: draws with the exact global distribution (chi-square against it,
// 1 to 4 shards with skewed masses), its probabilities and importance
// weights, ids and keys that name their shard and route, writers spread
// over the shards, and every refusal with its message. The same over
// `replaydb serve` processes: tests/tools/sharded_serve_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "rdma/shards/sharded_db.h"
#include "replaydb/db.h"
#include "replaydb/device.h"
#include "tests/device_out.h"
#include "tests/test_util.h"

namespace replaydb::rdma {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TableSpec Spec(SelectorKind selector, const std::string& name = "t") {
  TableSpec spec;
  spec.name = name;
  spec.columns = {{"obs", DType::kF32, Shape{3}}, {"step", DType::kI64, Shape{}}};
  spec.capacity_steps = 1 << 12;
  spec.block_steps = 16;
  spec.sequence_length = 2;
  spec.selector = selector;
  spec.priority_exponent = 0.8;
  return spec;
}

// S local databases in `dir`, made one sharded database.
std::unique_ptr<ShardedDB> LocalShards(testing_util::TempDir& dir, size_t S,
                                       std::vector<DB*>* shards = nullptr) {
  std::vector<std::unique_ptr<DB>> dbs;
  for (size_t s = 0; s < S; ++s) {
    DBOptions o = testing_util::ManualCheckpoints();
    o.create_if_missing = true;
    auto db = DB::Open(o, dir.Sub("shard" + std::to_string(s)));
    EXPECT_OK(db.status());
    if (!db.ok()) return nullptr;
    if (shards != nullptr) shards->push_back(db->get());
    dbs.push_back(std::move(db).value());
  }
  auto sharded = ShardedDB::Make(std::move(dbs), "local shards");
  EXPECT_OK(sharded.status());
  return sharded.ok() ? std::move(sharded).value() : nullptr;
}

// A shard that can go down: a local database whose tables answer Mass or
// Sample with Unavailable while `down` says so (the unit test's stand-in
// for a server that died between two calls; the real one is in
// tests/tools/sharded_serve_test.cc). Everything else goes to the database.
enum class Down { kNo, kMass, kSample };
class DownableTable final : public Table {
 public:
  DownableTable(std::shared_ptr<Table> t, const std::atomic<Down>* down)
      : t_(std::move(t)), down_(down) {}
  TableSpec spec() const override { return t_->spec(); }
  const std::string& name() const override { return t_->name(); }
  Result<std::unique_ptr<TrajectoryWriter>> NewWriter(const WriterOptions& o) override {
    return t_->NewWriter(o);
  }
  Result<std::unique_ptr<VectorWriter>> NewVectorWriter(size_t n, const WriterOptions& o) override {
    return t_->NewVectorWriter(n, o);
  }
  Status Sample(int64_t B, const SampleOptions& o, SampleBatch* out) override {
    if (*down_ != Down::kNo) return Status::Unavailable("test: this shard is down");
    return t_->Sample(B, o, out);
  }
  Result<SamplingMass> Mass() override {
    if (*down_ == Down::kMass) return Status::Unavailable("test: this shard is down");
    return t_->Mass();
  }
  Status UpdatePriorities(std::span<const ItemKey> k, std::span<const double> p,
                          PriorityUpdateResult* r) override {
    return t_->UpdatePriorities(k, p, r);
  }
  Status Lookup(std::span<const ItemKey> k, SampleBatch* out) override {
    return t_->Lookup(k, out);
  }
  Status SampleToDevice(int64_t B, const SampleOptions& o, const DeviceSampleOutput& out,
                        void* stream) override {
    return t_->SampleToDevice(B, o, out, stream);
  }
  Status LookupToDevice(std::span<const ItemKey> k, const DeviceSampleOutput& out,
                        void* stream) override {
    return t_->LookupToDevice(k, out, stream);
  }
  Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(const DeviceSamplerOptions& o) override {
    return t_->NewDeviceSampler(o);
  }
  Status UpdatePrioritiesFromDevice(const uint64_t* k, const float* p, int64_t n,
                                    void* stream) override {
    return t_->UpdatePrioritiesFromDevice(k, p, n, stream);
  }
  Status SetRateLimiter(const RateLimiterSpec& spec) override { return t_->SetRateLimiter(spec); }
  Status Seed(uint64_t seed) override { return t_->Seed(seed); }
  Status DeleteItems(std::span<const ItemKey> k, int64_t* n) override {
    return t_->DeleteItems(k, n);
  }
  Status Clear() override { return t_->Clear(); }
  Status Load(std::span<const uint64_t> ids) override { return t_->Load(ids); }
  Status LoadRange(uint64_t a, uint64_t b) override { return t_->LoadRange(a, b); }
  Status ColdTrajectories(uint64_t from, size_t limit, std::vector<uint64_t>* ids) const override {
    return t_->ColdTrajectories(from, limit, ids);
  }
  Status ListTrajectories(const TrajectoryFilter& f,
                          std::vector<TrajectoryInfo>* out) const override {
    return t_->ListTrajectories(f, out);
  }
  Status ReadTrajectory(uint64_t id, int64_t first, int64_t count, TrajectorySteps* out) override {
    return t_->ReadTrajectory(id, first, count, out);
  }
  Status ItemPriorities(std::vector<ItemKey>* k, std::vector<double>* p) override {
    return t_->ItemPriorities(k, p);
  }
  TableInfo Info() const override { return t_->Info(); }
  void Close() override { t_->Close(); }

 private:
  std::shared_ptr<Table> t_;
  const std::atomic<Down>* down_;
};

class DownableDB final : public DB {
 public:
  explicit DownableDB(std::unique_ptr<DB> db) : db_(std::move(db)) {}
  std::atomic<Down> down{Down::kNo};
  Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) override {
    return Wrap(db_->CreateTable(spec));
  }
  Result<std::shared_ptr<Table>> GetTable(std::string_view name) override {
    return Wrap(db_->GetTable(name));
  }
  Status DropTable(std::string_view name) override { return db_->DropTable(name); }
  std::vector<std::string> ListTables() const override { return db_->ListTables(); }
  const std::string& path() const override { return db_->path(); }
  Status Checkpoint() override { return db_->Checkpoint(); }
  RecoveryInfo recovery_info() const override { return db_->recovery_info(); }
  bool read_only() const override { return db_->read_only(); }
  Status ExportTable(std::string_view t, const std::string& dir,
                     const LongOperationOptions& o) override {
    return db_->ExportTable(t, dir, o);
  }
  Result<std::shared_ptr<Table>> ImportTable(const std::string& dir, std::string_view t,
                                             std::string_view name,
                                             const LongOperationOptions& o) override {
    return db_->ImportTable(dir, t, name, o);
  }
  Result<WalInfo> Wal() const override { return db_->Wal(); }
  Result<VerifyReport> Verify(const LongOperationOptions& o) override { return db_->Verify(o); }
  Status Compact(const LongOperationOptions& o) override { return db_->Compact(o); }

 private:
  Result<std::shared_ptr<Table>> Wrap(Result<std::shared_ptr<Table>> t) {
    if (!t.ok()) return t.status();
    return std::shared_ptr<Table>(std::make_shared<DownableTable>(std::move(t).value(), &down));
  }
  std::unique_ptr<DB> db_;
};

// `trajectories` trajectories of random lengths through one writer; each
// step's "step" column holds a number unique in the table. Returns the
// steps written by trajectory id.
std::map<uint64_t, std::vector<int64_t>> Fill(Table& table, int trajectories, std::mt19937_64& rng,
                                              int64_t* next_step) {
  std::map<uint64_t, std::vector<int64_t>> written;
  auto writer = table.NewWriter();
  EXPECT_OK(writer.status());
  if (!writer.ok()) return written;
  for (int t = 0; t < trajectories; ++t) {
    const int steps = 2 + static_cast<int>(rng() % 7);
    std::vector<int64_t> numbers;
    for (int i = 0; i < steps; ++i) {
      float obs[3] = {static_cast<float>(rng() % 100), 1.0f, 2.0f};
      const int64_t number = (*next_step)++;
      const ConstTensor step[] = {{DType::kF32, Shape{3}, obs, sizeof(obs)},
                                  {DType::kI64, Shape{}, &number, sizeof(number)}};
      EXPECT_OK((*writer)->Append(step, 1.0));
      numbers.push_back(number);
    }
    written[(*writer)->trajectory_id()] = numbers;
    EXPECT_OK((*writer)->End(EndReason::kTerminal));
  }
  return written;
}

// Every live item's priority, skewed by its shard: shard s's are drawn from
// [1, 2) times 10^s (so the shards' masses differ by orders of magnitude).
std::map<ItemKey, double> SkewPriorities(Table& table, std::mt19937_64& rng) {
  std::vector<ItemKey> keys;
  std::vector<double> unused;
  EXPECT_OK(table.ItemPriorities(&keys, &unused));
  std::map<ItemKey, double> priorities;
  std::vector<double> values;
  for (ItemKey key : keys) {
    const double p =
        (1.0 + std::uniform_real_distribution<double>(0, 1)(rng)) * std::pow(10.0, ShardOfKey(key));
    priorities[key] = p;
    values.push_back(p);
  }
  PriorityUpdateResult result;
  EXPECT_OK(table.UpdatePriorities(keys, values, &result));
  EXPECT_EQ(result.updated, static_cast<int64_t>(keys.size()));
  return priorities;
}

// The chi-square statistic of `counts` against `probability` of `draws`.
double ChiSquare(const std::map<ItemKey, int64_t>& counts,
                 const std::map<ItemKey, double>& probability, int64_t draws) {
  double chi2 = 0;
  for (const auto& [key, p] : probability) {
    const double expected = p * static_cast<double>(draws);
    const auto it = counts.find(key);
    const double seen = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    chi2 += (seen - expected) * (seen - expected) / expected;
  }
  return chi2;
}

// A peek of `B` at `table`, which has nothing to draw, fails at once
// naming it (`peek_says`); a sample waits 30 ms and fails saying so
// (`wait_says`).
void ExpectNothingToDraw(Table& table, int64_t B, const std::string& peek_says,
                         const std::string& wait_says) {
  SampleOptions peek;
  peek.peek = true;
  SampleBatch batch;
  Status s = table.Sample(B, peek, &batch);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(peek_says));
  SampleOptions wait;
  wait.timeout = 30ms;
  s = table.Sample(B, wait, &batch);
  EXPECT_EQ(s.code(), Status::Code::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr(wait_says));
}

class ShardedTableTest : public ::testing::Test {
 protected:
  testing_util::TempDir dir_;
  std::mt19937_64 rng_{testing_util::TestSeed()};
  int64_t next_step_ = 0;
};

// Prioritized draws over 1 to 4 shards whose masses differ by orders of
// magnitude land on each item as often as one table holding them all would
// (an equal share per shard would put a quarter of the draws where 0.0009
// of the mass is), with that table's probabilities and weights.
TEST_F(ShardedTableTest, PrioritizedDrawsFollowTheExactGlobalDistribution) {
  for (size_t S = 1; S <= 4; ++S) {
    SCOPED_TRACE("shards: " + std::to_string(S));
    testing_util::TempDir dir;
    auto db = LocalShards(dir, S);
    ASSERT_NE(db, nullptr);
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
    Fill(*table, 4 * static_cast<int>(S), rng_, &next_step_);
    const std::map<ItemKey, double> priorities = SkewPriorities(*table, rng_);
    const double exponent = table->spec().priority_exponent;
    double total = 0, smallest = std::numeric_limits<double>::infinity();
    for (const auto& [key, p] : priorities) {
      total += std::pow(p, exponent);
      smallest = std::min(smallest, p);
    }
    std::map<ItemKey, double> want;
    for (const auto& [key, p] : priorities) want[key] = std::pow(p, exponent) / total;
    ASSERT_OK_AND_ASSIGN(const SamplingMass mass, table->Mass());
    EXPECT_NEAR(mass.total / total, 1.0, 1e-12);
    EXPECT_EQ(mass.items, static_cast<int64_t>(priorities.size()));
    EXPECT_EQ(mass.smallest_priority, smallest);

    std::map<ItemKey, int64_t> counts;
    const int64_t B = 64;
    const int rounds = 400;
    SampleOptions o;
    o.importance_beta = 0.6;
    for (int r = 0; r < rounds; ++r) {
      o.weight_normalization =
          r % 2 == 0 ? WeightNormalization::kBuffer : WeightNormalization::kBatch;
      SampleBatch batch;
      ASSERT_OK(table->Sample(B, o, &batch));
      ASSERT_EQ(batch.keys.size(), static_cast<size_t>(B));
      double largest = 0;
      for (int64_t b = 0; b < B; ++b) {
        const ItemKey key = batch.keys[b];
        ASSERT_EQ(want.count(key), 1u) << "key " << key;
        ++counts[key];
        EXPECT_NEAR(batch.probabilities[b] / want.at(key), 1.0, 1e-9) << "key " << key;
        EXPECT_EQ(batch.priorities[b], priorities.at(key));
        largest =
            std::max(largest, std::pow(static_cast<double>(want.size()) * want.at(key), -0.6));
      }
      ASSERT_EQ(batch.weights.size(), static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) {
        const double p = priorities.at(batch.keys[b]);
        const double expected =
            r % 2 == 0 ? std::pow(smallest / p, exponent * 0.6)
                       : std::pow(static_cast<double>(want.size()) * want.at(batch.keys[b]), -0.6) /
                             largest;
        EXPECT_NEAR(batch.weights[b], expected, 1e-9) << "round " << r << ", draw " << b;
      }
    }
    const double chi2 = ChiSquare(counts, want, B * rounds);
    EXPECT_LT(chi2, testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)))
        << "draws do not follow the global distribution";
  }
}

// Stratified draws: the B strata of the shards' masses laid end to end, one
// point in each, give each shard within one of its share of every batch
// (independent draws stray by several), each shard drawing its part
// stratified, and every item its probability over many batches.
TEST_F(ShardedTableTest, StratifiedDrawsGiveEachShardItsShareOfEveryBatch) {
  const size_t S = 3;
  auto db = LocalShards(dir_, S);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
  Fill(*table, 12, rng_, &next_step_);
  const std::map<ItemKey, double> priorities = SkewPriorities(*table, rng_);
  const double exponent = table->spec().priority_exponent;
  double total = 0;
  std::vector<double> shard_mass(S, 0.0);
  for (const auto& [key, p] : priorities) {
    total += std::pow(p, exponent);
    shard_mass[static_cast<size_t>(ShardOfKey(key))] += std::pow(p, exponent);
  }
  std::map<ItemKey, double> want;
  for (const auto& [key, p] : priorities) want[key] = std::pow(p, exponent) / total;
  std::map<ItemKey, int64_t> counts;
  const int64_t B = 64;
  const int rounds = 300;
  SampleOptions o;
  o.stratified = true;
  o.gather = false;
  for (int r = 0; r < rounds; ++r) {
    ASSERT_OK_AND_ASSIGN(const SampleBatch batch, table->Sample(B, o));
    std::vector<int64_t> per_shard(S, 0);
    for (ItemKey key : batch.keys) {
      ++counts[key];
      ++per_shard[static_cast<size_t>(ShardOfKey(key))];
    }
    for (size_t s = 0; s < S; ++s) {
      const double share = static_cast<double>(B) * shard_mass[s] / total;
      EXPECT_GE(static_cast<double>(per_shard[s]), std::floor(share) - 1) << "shard " << s;
      EXPECT_LE(static_cast<double>(per_shard[s]), std::ceil(share) + 1) << "shard " << s;
    }
  }
  EXPECT_LT(ChiSquare(counts, want, B * rounds),
            testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)));
}

// Uniform draws over shards holding different numbers of items give each
// item 1/N of the draws, N the items of every shard.
TEST_F(ShardedTableTest, UniformDrawsGiveEveryItemOfEveryShardTheSameChance) {
  const size_t S = 2 + rng_() % 3;
  auto db = LocalShards(dir_, S);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kUniform)));
  Fill(*table, 3 * static_cast<int>(S) + static_cast<int>(rng_() % S), rng_, &next_step_);
  std::vector<ItemKey> keys;
  std::vector<double> unused;
  ASSERT_OK(table->ItemPriorities(&keys, &unused));
  std::map<ItemKey, double> want;
  for (ItemKey key : keys) want[key] = 1.0 / static_cast<double>(keys.size());
  std::map<ItemKey, int64_t> counts;
  const int64_t B = 50;
  const int rounds = 300;
  SampleOptions o;
  o.importance_beta = 0.5;
  o.gather = false;
  for (int r = 0; r < rounds; ++r) {
    SampleBatch batch;
    ASSERT_OK(table->Sample(B, o, &batch));
    EXPECT_TRUE(batch.columns.empty());
    for (int64_t b = 0; b < B; ++b) {
      ++counts[batch.keys[b]];
      EXPECT_NEAR(batch.probabilities[b] * static_cast<double>(keys.size()), 1.0, 1e-12);
      EXPECT_EQ(batch.weights[b], 1.0);
    }
  }
  EXPECT_LT(ChiSquare(counts, want, B * rounds),
            testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)));
}

// One shard: the same seed gives what a local table of the same contents
// gives, byte for byte.
TEST_F(ShardedTableTest, AtOneShardSeededSamplesEqualALocalTables) {
  auto db = LocalShards(dir_, 1);
  ASSERT_NE(db, nullptr);
  DBOptions o = testing_util::ManualCheckpoints();
  o.create_if_missing = true;
  ASSERT_OK_AND_ASSIGN(auto local_db, DB::Open(o, dir_.Sub("local")));
  ASSERT_OK_AND_ASSIGN(auto sharded, db->CreateTable(Spec(SelectorKind::kPrioritized)));
  ASSERT_OK_AND_ASSIGN(auto local, local_db->CreateTable(Spec(SelectorKind::kPrioritized)));
  const uint64_t seed = rng_();
  std::mt19937_64 a(seed), b(seed);
  int64_t na = 0, nb = 0;
  Fill(*sharded, 6, a, &na);
  Fill(*local, 6, b, &nb);
  ASSERT_OK(sharded->Seed(seed));
  ASSERT_OK(local->Seed(seed));
  for (int i = 0; i < 5; ++i) {
    SampleOptions so;
    so.importance_beta = 0.4;
    ASSERT_OK_AND_ASSIGN(const SampleBatch x, sharded->Sample(16, so));
    ASSERT_OK_AND_ASSIGN(const SampleBatch y, local->Sample(16, so));
    EXPECT_EQ(x.keys, y.keys);
    EXPECT_EQ(x.probabilities, y.probabilities);
    EXPECT_EQ(x.weights, y.weights);
    ASSERT_EQ(x.columns.size(), y.columns.size());
    for (size_t c = 0; c < x.columns.size(); ++c) {
      ASSERT_EQ(x.columns[c].size_bytes(), y.columns[c].size_bytes());
      EXPECT_EQ(std::memcmp(x.columns[c].data(), y.columns[c].data(), x.columns[c].size_bytes()),
                0);
    }
  }
}

// Trajectory ids and item keys carry their shard: trajectories go round the
// shards, each is read back whole by its id, looked up, updated and deleted
// through its keys on its own shard, and listed in id order.
TEST_F(ShardedTableTest, IdsAndKeysNameTheirShardAndRouteThere) {
  const size_t S = 3;
  std::vector<DB*> shards;
  auto db = LocalShards(dir_, S, &shards);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
  const std::map<uint64_t, std::vector<int64_t>> written = Fill(*table, 9, rng_, &next_step_);
  std::map<int, int> per_shard;
  for (const auto& [id, steps] : written) {
    ++per_shard[ShardOfTrajectory(id)];
    ASSERT_LT(static_cast<size_t>(ShardOfTrajectory(id)), S);
    // The shard itself holds it under its own id.
    ASSERT_OK_AND_ASSIGN(auto own, shards[ShardOfTrajectory(id)]->GetTable("t"));
    TrajectorySteps there;
    ASSERT_OK(own->ReadTrajectory(ShardLocalTrajectory(id), 0, 100, &there));
    TrajectorySteps read;
    ASSERT_OK(table->ReadTrajectory(id, 0, 100, &read));
    EXPECT_EQ(read.info.id, id);
    ASSERT_EQ(read.columns.size(), 2u);
    ASSERT_EQ(read.columns[1].size_bytes(), steps.size() * sizeof(int64_t));
    EXPECT_EQ(std::memcmp(read.columns[1].data(), steps.data(), read.columns[1].size_bytes()), 0);
  }
  for (size_t s = 0; s < S; ++s) EXPECT_EQ(per_shard[static_cast<int>(s)], 3) << "shard " << s;

  std::vector<TrajectoryInfo> listed;
  ASSERT_OK(table->ListTrajectories({}, &listed));
  std::vector<uint64_t> ids;
  for (const TrajectoryInfo& t : listed) ids.push_back(t.id);
  std::vector<uint64_t> want_ids;
  for (const auto& [id, steps] : written) want_ids.push_back(id);
  EXPECT_EQ(ids, want_ids);
  TrajectoryFilter from_second;
  from_second.from = ShardedTrajectoryId(1, 0);
  from_second.limit = 4;
  ASSERT_OK(table->ListTrajectories(from_second, &listed));
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_EQ(listed[0].id, want_ids[3]);
  EXPECT_EQ(listed[3].id, want_ids[6]);

  // Lookup of keys from every shard, in the caller's order.
  std::vector<ItemKey> keys;
  std::vector<double> priorities;
  ASSERT_OK(table->ItemPriorities(&keys, &priorities));
  std::shuffle(keys.begin(), keys.end(), rng_);
  keys.resize(10);
  ASSERT_OK_AND_ASSIGN(const SampleBatch looked, [&]() -> Result<SampleBatch> {
    SampleBatch b;
    REPLAYDB_RETURN_IF_ERROR(table->Lookup(keys, &b));
    return b;
  }());
  EXPECT_EQ(looked.keys, keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t first = looked.columns[1].data_as<int64_t>()[i * 2];
    const std::vector<int64_t>& steps = written.at(ItemKeyTrajectory(keys[i]));
    EXPECT_EQ(first, steps[static_cast<size_t>(ItemKeyStart(keys[i]))]) << "key " << keys[i];
  }

  // Updates reach the owning shard; a key naming no shard is skipped.
  std::vector<ItemKey> update = {keys[0], keys[1], ShardedItemKey(7, MakeItemKey(1, 0))};
  PriorityUpdateResult result;
  ASSERT_OK(table->UpdatePriorities(update, std::vector<double>{5.5, 6.5, 1.0}, &result));
  EXPECT_EQ(result.updated, 2);
  EXPECT_EQ(result.skipped, 1);
  ASSERT_OK_AND_ASSIGN(auto owner, shards[ShardOfKey(keys[0])]->GetTable("t"));
  SampleBatch there;
  const ItemKey local_key = ShardLocalKey(keys[0]);
  ASSERT_OK(owner->Lookup(std::span<const ItemKey>(&local_key, 1), &there));
  EXPECT_EQ(there.priorities[0], 5.5);

  // Info adds the shards up.
  const TableInfo info = table->Info();
  int64_t steps = 0;
  for (const auto& [id, numbers] : written) steps += static_cast<int64_t>(numbers.size());
  EXPECT_EQ(info.num_steps, steps);
  EXPECT_EQ(info.num_trajectories, 9);
  EXPECT_EQ(info.num_items, static_cast<int64_t>(priorities.size()));

  int64_t deleted = 0;
  ASSERT_OK(table->DeleteItems(std::vector<ItemKey>{keys[2]}, &deleted));
  EXPECT_EQ(deleted, 1);
  SampleBatch gone;
  const Status s = table->Lookup(std::vector<ItemKey>{keys[2]}, &gone);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("on shard " + std::to_string(ShardOfKey(keys[2]))));

  const Status foreign =
      table->Lookup(std::vector<ItemKey>{ShardedItemKey(9, MakeItemKey(1, 0))}, &gone);
  EXPECT_EQ(foreign.code(), Status::Code::kNotFound);
  EXPECT_THAT(foreign.message(), HasSubstr("names shard 9; the table has 3"));
  TrajectorySteps none;
  const Status no_trajectory = table->ReadTrajectory(ShardedTrajectoryId(5, 1), 0, 1, &none);
  EXPECT_THAT(no_trajectory.message(), HasSubstr("it names shard 5, and the table has 3"));
}

// A shard joins: the table of two shards, then a third database given the
// same table and the sharded database made again over the three. The keys
// of before still name their items, new trajectories go round all three,
// and draws reach the new shard.
TEST_F(ShardedTableTest, AShardThatJoinsTakesNewTrajectoriesAndOldKeysStayValid) {
  std::vector<ItemKey> before;
  {
    auto db = LocalShards(dir_, 2);
    ASSERT_NE(db, nullptr);
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kUniform)));
    Fill(*table, 4, rng_, &next_step_);
    std::vector<double> unused;
    ASSERT_OK(table->ItemPriorities(&before, &unused));
  }
  std::vector<DB*> shards;
  auto db = LocalShards(dir_, 3, &shards);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(db->GetTable("t").status().code(), Status::Code::kNotFound);
  ASSERT_OK(shards[2]->CreateTable(Spec(SelectorKind::kUniform)).status());
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  SampleBatch looked;
  ASSERT_OK(table->Lookup(before, &looked));
  EXPECT_EQ(looked.keys, before);
  const auto written = Fill(*table, 3, rng_, &next_step_);
  std::set<int> went;
  for (const auto& [id, steps] : written) went.insert(ShardOfTrajectory(id));
  EXPECT_EQ(went, (std::set<int>{0, 1, 2}));
  std::set<int> drawn;
  SampleOptions o;
  o.gather = false;
  for (int i = 0; i < 50 && drawn.size() < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(const SampleBatch batch, table->Sample(16, o));
    for (ItemKey key : batch.keys) drawn.insert(ShardOfKey(key));
  }
  EXPECT_EQ(drawn, (std::set<int>{0, 1, 2}));
}

// A vector writer gives each shard a contiguous block of its environments.
TEST_F(ShardedTableTest, AVectorWritersEnvironmentsAreSpreadOverTheShards) {
  const size_t S = 3;
  auto db = LocalShards(dir_, S);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kUniform)));
  const size_t N = 5 + rng_() % 6;
  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(N));
  EXPECT_EQ(writer->num_envs(), N);
  const int steps = 3;
  for (int k = 0; k < steps; ++k) {
    std::vector<float> obs(N * 3, static_cast<float>(k));
    std::vector<int64_t> number(N);
    for (size_t e = 0; e < N; ++e) number[e] = static_cast<int64_t>(e * 100 + k);
    const ConstTensor step[] = {
        {DType::kF32, Shape{static_cast<int64_t>(N), 3}, obs.data(), obs.size() * sizeof(float)},
        {DType::kI64, Shape{static_cast<int64_t>(N)}, number.data(), N * sizeof(int64_t)}};
    ASSERT_OK(writer->Append(step));
  }
  std::set<int> used;
  for (size_t e = 0; e < N; ++e) {
    const uint64_t id = writer->trajectory_id(e);
    const int shard = ShardOfTrajectory(id);
    size_t want = 0;  // the last shard whose block starts at or before e
    while (want + 1 < S && (want + 1) * N / S <= e) ++want;
    EXPECT_EQ(static_cast<size_t>(shard), want) << "environment " << e;
    used.insert(shard);
    TrajectorySteps read;
    ASSERT_OK(table->ReadTrajectory(id, 0, steps, &read));
    for (int k = 0; k < steps; ++k) {
      EXPECT_EQ(read.columns[1].data_as<int64_t>()[k], static_cast<int64_t>(e * 100 + k));
    }
  }
  EXPECT_EQ(used.size(), S);
  ASSERT_OK(writer->EndMany(std::vector<size_t>{0, N - 1}, EndReason::kTerminal));
  TrajectorySteps read;
  ASSERT_OK(table->ReadTrajectory(writer->trajectory_id(1), 0, steps, &read));
  EXPECT_FALSE(read.info.ended);
  const Status bad = writer->End(N, EndReason::kTerminal);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("environment " + std::to_string(N) +
                                       " of a vector writer of " + std::to_string(N)));
  std::vector<float> obs(N * 3);
  const ConstTensor wrong[] = {
      {DType::kF32, Shape{static_cast<int64_t>(N), 3}, obs.data(), obs.size() * sizeof(float)},
      {DType::kF32, Shape{static_cast<int64_t>(N)}, obs.data(), N * sizeof(float)}};
  const Status wrong_dtype = writer->Append(wrong);
  EXPECT_EQ(wrong_dtype.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(wrong_dtype.message(), HasSubstr("column 'step': got f32"));
}

// Nothing to draw anywhere: a peek fails at once, a sample waits out its
// timeout; selectors and options a sharded table does not draw are
// refused naming them.
TEST_F(ShardedTableTest, WhatASampleCannotDoIsRefusedNamingIt) {
  auto db = LocalShards(dir_, 2);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
  ExpectNothingToDraw(*table, 4, "table 't' has nothing to draw on any of its 2 shards",
                      "nothing to draw on any of its 2 shards within 30 ms");
  SampleBatch batch;
  Status s = table->Sample(0, {}, &batch);
  EXPECT_THAT(s.message(), HasSubstr("batch_size is 0"));

  Fill(*table, 4, rng_, &next_step_);
  // The GPU calls check their arrays as a local table does (through_host.h).
  s = table->SampleToDevice(4, {}, {}, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("a device sample needs device pointers for keys"));
  s = table->UpdatePrioritiesFromDevice(nullptr, nullptr, 3, nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 't': UpdatePrioritiesFromDevice needs n >= 0"));

  TableSpec vector = Spec(SelectorKind::kUniform, "v");
  vector.sequence_length = 1;
  vector.lanes = 3;
  const Status lanes = db->CreateTable(vector).status();
  EXPECT_EQ(lanes.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(lanes.message(),
              HasSubstr("a vector table of 3 lanes over 2 shards; each shard takes 2 or more, "
                        "so lanes >= 4"));
}

// A shard that is down: without skip_unavailable_shards a sample fails
// Unavailable naming it; with it, draws come from the other shards with the
// exact distribution of a table holding only theirs (chi-square), whether
// the shard was down when asked its mass (round 1) or went down between
// that and its draws (round 2, its rows redrawn from the others), with
// probabilities, item counts and weights of the shards that answered.
TEST_F(ShardedTableTest, ADownShardIsLeftOutOfSamplesWhereTheConnectionAllowsIt) {
  for (const bool skip : {false, true}) {
    SCOPED_TRACE(skip ? "skip_unavailable_shards" : "default");
    testing_util::TempDir dir;
    std::vector<std::unique_ptr<DB>> dbs;
    std::vector<DownableDB*> shards;
    for (size_t s = 0; s < 3; ++s) {
      DBOptions o = testing_util::ManualCheckpoints();
      o.create_if_missing = true;
      ASSERT_OK_AND_ASSIGN(auto local, DB::Open(o, dir.Sub("shard" + std::to_string(s))));
      auto wrapped = std::make_unique<DownableDB>(std::move(local));
      shards.push_back(wrapped.get());
      dbs.push_back(std::move(wrapped));
    }
    ConnectOptions co;
    co.skip_unavailable_shards = skip;
    ASSERT_OK_AND_ASSIGN(auto db, ShardedDB::Make(std::move(dbs), "downable shards", co));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
    Fill(*table, 12, rng_, &next_step_);
    const std::map<ItemKey, double> priorities = SkewPriorities(*table, rng_);
    const double exponent = table->spec().priority_exponent;
    // Shard 2 (most of the mass, so that every batch needs it) goes down;
    // what the others hold, with their chances alone. (A batch that asks
    // nothing of the down shard is drawn with the whole table's chances:
    // nothing tells it the shard is down.)
    double total = 0, smallest = std::numeric_limits<double>::infinity();
    for (const auto& [key, p] : priorities) {
      if (ShardOfKey(key) == 2) continue;
      total += std::pow(p, exponent);
      smallest = std::min(smallest, p);
    }
    std::map<ItemKey, double> want;
    for (const auto& [key, p] : priorities) {
      if (ShardOfKey(key) != 2) want[key] = std::pow(p, exponent) / total;
    }
    for (const Down how : {Down::kMass, Down::kSample}) {
      SCOPED_TRACE(how == Down::kMass ? "down when asked its mass" : "down at its draws");
      shards[2]->down = how;
      SampleOptions o;
      o.importance_beta = 0.5;
      SampleBatch batch;
      if (!skip) {
        const Status s = table->Sample(32, o, &batch);
        EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
        EXPECT_THAT(s.message(), HasSubstr("table 't' on shard 2 (" + dir.Sub("shard2")));
        EXPECT_THAT(s.message(), HasSubstr("this shard is down"));
        continue;
      }
      if (how == Down::kMass) {
        ASSERT_OK_AND_ASSIGN(const SamplingMass mass, table->Mass());
        EXPECT_NEAR(mass.total / total, 1.0, 1e-12);
        EXPECT_EQ(mass.items, static_cast<int64_t>(want.size()));
      }
      std::map<ItemKey, int64_t> counts;
      const int64_t B = 64;
      const int rounds = 300;
      for (int r = 0; r < rounds; ++r) {
        ASSERT_OK(table->Sample(B, o, &batch));
        for (int64_t b = 0; b < B; ++b) {
          const ItemKey key = batch.keys[b];
          ASSERT_EQ(want.count(key), 1u) << "key " << key << " of shard " << ShardOfKey(key);
          ++counts[key];
          EXPECT_NEAR(batch.probabilities[b] / want.at(key), 1.0, 1e-9);
          EXPECT_NEAR(batch.weights[b], std::pow(smallest / priorities.at(key), exponent * 0.5),
                      1e-9);
        }
      }
      EXPECT_LT(ChiSquare(counts, want, B * rounds),
                testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)));
      // kBatch weights count the items of the shards that answered.
      o.weight_normalization = WeightNormalization::kBatch;
      ASSERT_OK(table->Sample(B, o, &batch));
      double largest = 0;
      for (int64_t b = 0; b < B; ++b) {
        largest = std::max(
            largest, std::pow(static_cast<double>(want.size()) * want.at(batch.keys[b]), -0.5));
      }
      for (int64_t b = 0; b < B; ++b) {
        EXPECT_NEAR(
            batch.weights[b],
            std::pow(static_cast<double>(want.size()) * want.at(batch.keys[b]), -0.5) / largest,
            1e-9);
      }
    }
    if (!skip) continue;
    // Every shard down: Unavailable, naming the first.
    for (DownableDB* shard : shards) shard->down = Down::kMass;
    SampleBatch batch;
    Status s = table->Sample(8, {}, &batch);
    EXPECT_EQ(s.code(), Status::Code::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("every shard is unavailable"));
    EXPECT_THAT(s.message(), HasSubstr("shard 0"));
    for (DownableDB* shard : shards) shard->down = Down::kSample;
    s = table->Sample(8, {}, &batch);
    EXPECT_EQ(s.code(), Status::Code::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr("every shard with something to draw is unavailable"));
    // Back up: every shard draws again.
    for (DownableDB* shard : shards) shard->down = Down::kNo;
    std::set<int> seen;
    for (int r = 0; r < 50 && seen.size() < 3; ++r) {
      ASSERT_OK(table->Sample(64, {}, &batch));
      for (ItemKey key : batch.keys) seen.insert(ShardOfKey(key));
    }
    EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));
  }
}

// A vector table's lanes are spread over the shards (2, 2 and 3 of 7): a
// vector writer of 7 environments writes each shard's lanes there, draws
// are uniform over every environment's items (each shard's mass counts an
// item per environment), and keys route back to what was written.
TEST_F(ShardedTableTest, AVectorTablesLanesAreSpreadOverTheShards) {
  auto db = LocalShards(dir_, 3);
  ASSERT_NE(db, nullptr);
  TableSpec spec = Spec(SelectorKind::kUniform, "v");
  spec.sequence_length = 1;
  spec.lanes = 7;
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
  EXPECT_EQ(table->spec().lanes, 7);
  EXPECT_EQ(db->shard(0).GetTable("v").value()->spec().lanes, 2);
  EXPECT_EQ(db->shard(2).GetTable("v").value()->spec().lanes, 3);
  ASSERT_OK_AND_ASSIGN(auto reopened, db->GetTable("v"));
  EXPECT_EQ(reopened->spec().lanes, 7);
  Status s = table->NewVectorWriter(5).status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the vector table has 7 lanes"));

  ASSERT_OK_AND_ASSIGN(auto writer, table->NewVectorWriter(7));
  const int64_t steps = 10;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<float> obs(7 * 3);
    std::vector<int64_t> numbers(7);
    for (size_t e = 0; e < 7; ++e) {
      numbers[e] = t * 7 + static_cast<int64_t>(e);  // step t of environment e
      obs[e * 3] = static_cast<float>(numbers[e]);
    }
    const ConstTensor step[] = {
        {DType::kF32, Shape{7, 3}, obs.data(), obs.size() * sizeof(float)},
        {DType::kI64, Shape{7}, numbers.data(), numbers.size() * sizeof(int64_t)}};
    ASSERT_OK(writer->Append(step, {}));
  }
  for (size_t e = 0; e < 7; ++e) {
    EXPECT_EQ(ShardOfTrajectory(writer->trajectory_id(e)), e < 2   ? 0
                                                           : e < 4 ? 1
                                                                   : 2)
        << "environment " << e;
  }
  EXPECT_EQ(table->Info().num_items, 7 * steps);
  ASSERT_OK_AND_ASSIGN(const SamplingMass mass, table->Mass());
  EXPECT_EQ(mass.items, 7 * steps);
  EXPECT_EQ(mass.total, 7.0 * steps);

  std::map<int64_t, int64_t> counts;  // by the step number written
  const int64_t B = 64;
  const int rounds = 200;
  for (int r = 0; r < rounds; ++r) {
    SampleBatch batch;
    ASSERT_OK(table->Sample(B, {}, &batch));
    const auto* numbers = reinterpret_cast<const int64_t*>(batch.columns[1].data());
    SampleBatch looked;
    ASSERT_OK(table->Lookup(batch.keys, &looked));
    const auto* again = reinterpret_cast<const int64_t*>(looked.columns[1].data());
    for (int64_t b = 0; b < B; ++b) {
      ++counts[numbers[b]];
      EXPECT_EQ(again[b], numbers[b]) << "key " << batch.keys[b];
      EXPECT_NEAR(batch.probabilities[b] * static_cast<double>(7 * steps), 1.0, 1e-12);
      // Environment e's steps live on the shard its lane is on.
      const int64_t e = numbers[b] % 7;
      EXPECT_EQ(ShardOfKey(batch.keys[b]), e < 2 ? 0 : e < 4 ? 1 : 2) << "step " << numbers[b];
    }
  }
  EXPECT_EQ(counts.size(), static_cast<size_t>(7 * steps));
  EXPECT_LT(testing_util::UniformChiSquare(counts, static_cast<double>(B * rounds) / (7 * steps)),
            testing_util::ChiSquareCritical(static_cast<double>(7 * steps - 1)));
}

// Heap tables: every draw takes the best top item of any shard, so a batch's
// priorities come in the order one table holding every item gives (a
// twin, with the same priorities): highest first (max heap) or lowest
// (min heap), each item as often as max_times_sampled allows, then gone;
// without a limit the whole batch is the best item. Peeks take nothing.
TEST_F(ShardedTableTest, HeapDrawsTakeTheBestTopOfAnyShardAsOneTableWould) {
  for (const SelectorKind kind : {SelectorKind::kMaxHeap, SelectorKind::kMinHeap}) {
    for (const int64_t limit : {int64_t{2}, int64_t{0}}) {
      SCOPED_TRACE(std::string(SelectorKindName(kind)) + ", max_times_sampled " +
                   std::to_string(limit));
      testing_util::TempDir dir;
      auto db = LocalShards(dir, 3);
      ASSERT_NE(db, nullptr);
      TableSpec spec = Spec(kind);
      spec.sequence_length = 1;
      spec.max_times_sampled = limit;
      spec.rate_limiter = RateLimiterSpec::MinSize(1);
      ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
      Fill(*table, 9, rng_, &next_step_);
      std::vector<ItemKey> keys;
      std::vector<double> priorities;
      ASSERT_OK(table->ItemPriorities(&keys, &priorities));
      for (double& p : priorities) p = std::uniform_real_distribution<double>(0, 1000)(rng_);
      ASSERT_OK(table->UpdatePriorities(keys, priorities));
      // The twin: one local table with the same priorities.
      DBOptions o = testing_util::ManualCheckpoints();
      o.create_if_missing = true;
      ASSERT_OK_AND_ASSIGN(auto twin_db, DB::Open(o, dir.Sub("twin")));
      ASSERT_OK_AND_ASSIGN(auto twin, twin_db->CreateTable(spec));
      {
        ASSERT_OK_AND_ASSIGN(auto w, twin->NewWriter());
        for (double p : priorities) {
          float obs[3] = {0, 0, 0};
          const int64_t number = 0;
          const ConstTensor step[] = {{DType::kF32, Shape{3}, obs, sizeof(obs)},
                                      {DType::kI64, Shape{}, &number, sizeof(number)}};
          ASSERT_OK(w->Append(step, p));
        }
        ASSERT_OK(w->End(EndReason::kTerminal));
      }
      SampleOptions peek;
      peek.peek = true;
      SampleBatch a, b;
      ASSERT_OK(table->Sample(3, peek, &a));
      ASSERT_OK(twin->Sample(3, peek, &b));
      EXPECT_EQ(a.priorities, b.priorities);
      const int64_t n = static_cast<int64_t>(priorities.size());
      const int64_t B = 5;
      const int64_t batches = limit > 0 ? limit * n / B : 4;
      SampleOptions so;
      so.timeout = 1s;
      so.importance_beta = 0.5;
      for (int64_t i = 0; i < batches; ++i) {
        ASSERT_OK(table->Sample(B, so, &a));
        ASSERT_OK(twin->Sample(B, so, &b));
        EXPECT_EQ(a.priorities, b.priorities) << "batch " << i;
        EXPECT_EQ(a.times_sampled, b.times_sampled) << "batch " << i;
        EXPECT_EQ(a.probabilities, b.probabilities);
        EXPECT_EQ(a.weights, b.weights);
        for (ItemKey key : a.keys) EXPECT_LT(ShardOfKey(key), 3);
      }
      if (limit > 0) {  // every item drawn `limit` times: nothing left for a batch
        EXPECT_EQ(table->Info().num_items, n - limit * n / B * B / limit);
      }
    }
  }
  // Nothing in any shard: a peek fails at once, a sample waits its timeout.
  auto db = LocalShards(dir_, 2);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto empty, db->CreateTable(Spec(SelectorKind::kMaxHeap, "empty")));
  ExpectNothingToDraw(*empty, 2, "nothing to draw on any of its 2 shards",
                      "within 30 ms, 0 of 2 drawn");
}

// FIFO and LIFO tables: every draw takes the oldest (newest) item of any
// shard by the shards' item clocks, so a batch comes in the order the steps
// were written across the shards, as one queue (stack) holding them all
// would give it; so do a heap's items of equal priority (ties go to the
// oldest, as in one heap): two writers, each on its own shard at a time, append in a
// random interleaving, 2 ms apart (the clocks tick each millisecond). The
// order holds after the shards are reopened from a checkpoint and their
// logs (the ItemClock records replayed), and peeks take nothing.
TEST_F(ShardedTableTest, FifoLifoAndHeapTiesFollowTheInsertionOrderAcrossShards) {
  for (const SelectorKind kind :
       {SelectorKind::kFifo, SelectorKind::kLifo, SelectorKind::kMaxHeap, SelectorKind::kMinHeap}) {
    SCOPED_TRACE(SelectorKindName(kind));
    testing_util::TempDir dir;
    TableSpec spec = Spec(kind, "q");
    spec.sequence_length = 1;
    spec.max_times_sampled = 1;
    spec.rate_limiter = RateLimiterSpec::MinSize(1);
    std::vector<int64_t> written;  // step numbers, in the order written
    const auto realtime_ns = [] {
      return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    };
    const uint64_t started = realtime_ns();
    uint64_t finished = 0;
    {
      auto db = LocalShards(dir, 3);
      ASSERT_NE(db, nullptr);
      ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
      std::unique_ptr<TrajectoryWriter> w[2];
      int left[2] = {0, 0};
      for (auto& one : w) {
        ASSERT_OK_AND_ASSIGN(one, table->NewWriter());
      }
      const int steps = 18 + static_cast<int>(rng_() % 8);
      for (int i = 0; i < steps; ++i) {
        const size_t k = rng_() % 2;
        if (left[k] == 0) left[k] = 1 + static_cast<int>(rng_() % 4);
        float obs[3] = {0, 0, 0};
        const int64_t number = static_cast<int64_t>(written.size());
        const ConstTensor step[] = {{DType::kF32, Shape{3}, obs, sizeof(obs)},
                                    {DType::kI64, Shape{}, &number, sizeof(number)}};
        ASSERT_OK(w[k]->Append(step, 1.0));
        written.push_back(number);
        if (--left[k] == 0) ASSERT_OK(w[k]->End(EndReason::kTerminal));
        // Half of the items reach the reopened shards through a
        // checkpoint, the rest through the log.
        if (i == steps / 2) ASSERT_OK(db->Checkpoint());
        std::this_thread::sleep_for(2ms);
      }
      for (auto& one : w) ASSERT_OK(one->End(EndReason::kTerminal));
      finished = realtime_ns();
      // A peek: the first item in the order, taken from nobody.
      SampleOptions peek;
      peek.peek = true;
      SampleBatch top;
      ASSERT_OK(table->Sample(2, peek, &top));
      const int64_t first = kind == SelectorKind::kLifo ? written.back() : written.front();
      EXPECT_EQ(top.columns[1].data_as<int64_t>()[0], first);
      EXPECT_EQ(top.columns[1].data_as<int64_t>()[1], first);
      EXPECT_EQ(top.insertion_order.size(), 2u);
      EXPECT_EQ(table->Info().num_items, static_cast<int64_t>(written.size()));
    }
    // Reopened: the checkpoint and the log give every item its order.
    auto db = LocalShards(dir, 3);
    ASSERT_NE(db, nullptr);
    ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("q"));
    const auto n = static_cast<int64_t>(written.size());
    SampleOptions so;
    so.timeout = 1s;
    SampleBatch batch;
    ASSERT_OK(table->Sample(n, so, &batch));
    std::vector<int64_t> drawn(batch.columns[1].data_as<int64_t>(),
                               batch.columns[1].data_as<int64_t>() + n);
    std::vector<int64_t> expected = written;
    if (kind == SelectorKind::kLifo) std::reverse(expected.begin(), expected.end());
    EXPECT_EQ(drawn, expected);
    std::set<int> shards;
    for (ItemKey key : batch.keys) shards.insert(ShardOfKey(key));
    EXPECT_EQ(shards.size(), 3u) << "every shard held some of the steps";
    ASSERT_EQ(batch.insertion_order.size(), static_cast<size_t>(n));
    // The orders are the shards' clocks when the items were made.
    for (const uint64_t order : batch.insertion_order) {
      EXPECT_GE(order, started);
      EXPECT_LE(order, finished);
    }
    for (int64_t i = 1; i < n; ++i) {
      if (kind == SelectorKind::kLifo) {
        EXPECT_GT(batch.insertion_order[i - 1], batch.insertion_order[i]) << i;
      } else {
        EXPECT_LT(batch.insertion_order[i - 1], batch.insertion_order[i]) << i;
      }
    }
    EXPECT_EQ(table->Info().num_items, 0);
  }
}

// A shard that leaves keeps its place as "-" (a null database here): the
// others' keys and ids stay valid, draws are exact over the shards that are
// there, writers and vector writers go to them only, and the keys and ids
// of the shard that left are refused naming it (priority updates skip them).
TEST_F(ShardedTableTest, AShardThatLeftKeepsItsPlaceAndTheOthersKeys) {
  std::vector<ItemKey> keys;
  std::map<uint64_t, std::vector<int64_t>> written;
  {
    auto db = LocalShards(dir_, 3);
    ASSERT_NE(db, nullptr);
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kPrioritized)));
    written = Fill(*table, 9, rng_, &next_step_);
    std::vector<double> unused;
    ASSERT_OK(table->ItemPriorities(&keys, &unused));
  }
  std::vector<std::unique_ptr<DB>> dbs(3);
  for (size_t s : {size_t{0}, size_t{2}}) {
    DBOptions o = testing_util::ManualCheckpoints();
    ASSERT_OK_AND_ASSIGN(dbs[s], DB::Open(o, dir_.Sub("shard" + std::to_string(s))));
  }
  ASSERT_OK_AND_ASSIGN(auto db, ShardedDB::Make(std::move(dbs), "A+-+C"));
  EXPECT_EQ(db->ListTables(), std::vector<std::string>{"t"});
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  std::vector<ItemKey> kept, gone;
  for (ItemKey key : keys) (ShardOfKey(key) == 1 ? gone : kept).push_back(key);
  ASSERT_FALSE(gone.empty());
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(table->Info().num_items, static_cast<int64_t>(kept.size()));

  // The others' keys read what was written there; the one that left's do not.
  SampleBatch looked;
  ASSERT_OK(table->Lookup(kept, &looked));
  EXPECT_EQ(looked.keys, kept);
  Status s = table->Lookup(gone, &looked);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("names shard 1, which has left"));
  for (const auto& [id, steps] : written) {
    TrajectorySteps read;
    const Status r = table->ReadTrajectory(id, 0, 1, &read);
    if (ShardOfTrajectory(id) == 1) {
      EXPECT_EQ(r.code(), Status::Code::kNotFound);
      EXPECT_THAT(r.message(), HasSubstr("trajectory " + std::to_string(id) + " names shard 1"));
    } else {
      EXPECT_OK(r);
    }
  }
  std::vector<double> ones(gone.size(), 1.0);
  PriorityUpdateResult result;
  ASSERT_OK(table->UpdatePriorities(gone, ones, &result));
  EXPECT_EQ(result.skipped, static_cast<int64_t>(gone.size()));
  EXPECT_EQ(result.updated, 0);

  // Draws: exact over shards 0 and 2.
  const std::map<ItemKey, double> priorities = SkewPriorities(*table, rng_);
  const double exponent = table->spec().priority_exponent;
  double total = 0;
  for (const auto& [key, p] : priorities) total += std::pow(p, exponent);
  std::map<ItemKey, double> want;
  for (const auto& [key, p] : priorities) want[key] = std::pow(p, exponent) / total;
  EXPECT_EQ(want.size(), kept.size());
  std::map<ItemKey, int64_t> counts;
  for (int r = 0; r < 200; ++r) {
    SampleBatch batch;
    ASSERT_OK(table->Sample(64, {}, &batch));
    for (int64_t b = 0; b < 64; ++b) {
      ASSERT_EQ(want.count(batch.keys[b]), 1u);
      ++counts[batch.keys[b]];
      EXPECT_NEAR(batch.probabilities[b] / want.at(batch.keys[b]), 1.0, 1e-9);
    }
  }
  EXPECT_LT(ChiSquare(counts, want, 64 * 200),
            testing_util::ChiSquareCritical(static_cast<double>(want.size() - 1)));

  // New trajectories and environments go to shards 0 and 2.
  std::set<int> went;
  for (const auto& [id, steps] : Fill(*table, 4, rng_, &next_step_)) {
    went.insert(ShardOfTrajectory(id));
  }
  EXPECT_EQ(went, (std::set<int>{0, 2}));
  ASSERT_OK_AND_ASSIGN(auto vw, table->NewVectorWriter(4));
  std::vector<float> obs(4 * 3, 1.0f);
  std::vector<int64_t> numbers = {next_step_, next_step_ + 1, next_step_ + 2, next_step_ + 3};
  next_step_ += 4;
  const ConstTensor step[] = {{DType::kF32, Shape{4, 3}, obs.data(), obs.size() * sizeof(float)},
                              {DType::kI64, Shape{4}, numbers.data(), 4 * sizeof(int64_t)}};
  ASSERT_OK(vw->Append(step, std::vector<double>(4, 1.0)));
  for (size_t env = 0; env < 4; ++env) {
    EXPECT_EQ(ShardOfTrajectory(vw->trajectory_id(env)), env < 2 ? 0 : 2) << "env " << env;
  }
  // A new table goes on the shards that are there.
  ASSERT_OK(db->CreateTable(Spec(SelectorKind::kUniform, "after")).status());
  EXPECT_EQ(db->ListTables(), (std::vector<std::string>{"after", "t"}));
  ASSERT_OK(db->Checkpoint());

  std::vector<std::unique_ptr<DB>> none(2);
  s = ShardedDB::Make(std::move(none), "-+-").status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("every shard has left"));
  // Where the connection skips unavailable shards, the shards that are there
  // all down is Unavailable, not a wait for items (a shard that left is no
  // shard to wait for).
  {
    vw.reset();
    table.reset();
    db.reset();  // shard 0's directory, for the downable opener below
    std::vector<std::unique_ptr<DB>> two(3);
    DBOptions o = testing_util::ManualCheckpoints();
    auto a = DB::Open(o, dir_.Sub("shard0"));
    ASSERT_OK(a.status());
    auto down = std::make_unique<DownableDB>(std::move(a).value());
    DownableDB* shard0 = down.get();
    two[0] = std::move(down);
    ConnectOptions co;
    co.skip_unavailable_shards = true;
    ASSERT_OK_AND_ASSIGN(auto skipping, ShardedDB::Make(std::move(two), "A+-+-", co));
    ASSERT_OK_AND_ASSIGN(auto t, skipping->GetTable("t"));
    shard0->down = Down::kMass;
    SampleBatch batch;
    SampleOptions wait;
    wait.timeout = 5s;
    s = t->Sample(4, wait, &batch);
    EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("every shard is unavailable"));
  }
}

// The threads a sharded table's calls fan out on: the database's, however
// many handles there are (a learner calling GetTable every step starts no
// thread), shared by calls from several threads at once, each getting its
// own answer.
int ThreadsOfThisProcess() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST_F(ShardedTableTest, HandlesAndThreadsShareTheDatabasesFanOutThreads) {
  auto db = LocalShards(dir_, 4);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(SelectorKind::kUniform)));
  Fill(*table, 16, rng_, &next_step_);
  const int before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  std::vector<std::shared_ptr<Table>> handles;
  for (int i = 0; i < 40; ++i) {
    ASSERT_OK_AND_ASSIGN(auto t, db->GetTable("t"));
    SampleBatch batch;
    ASSERT_OK(t->Sample(8, {}, &batch));
    handles.push_back(std::move(t));
  }
  EXPECT_LT(ThreadsOfThisProcess(), before + 4) << "handles started threads of their own";
  // Four callers at once, each with its own handle, each batch whole.
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < 50; ++r) {
        SampleBatch batch;
        const Status st = handles[static_cast<size_t>(c)]->Sample(32, {}, &batch);
        if (!st.ok() || batch.keys.size() != 32u ||
            std::any_of(batch.probabilities.begin(), batch.probabilities.end(),
                        [](double p) { return !(p > 0); })) {
          ++bad;
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_OK(db->Checkpoint());
}

// A table must be on every shard, with the same spec; creating one undoes
// itself when a shard refuses.
TEST_F(ShardedTableTest, ATableMissingOrDifferentOnAShardIsRefusedNamingTheShard) {
  std::vector<DB*> shards;
  auto db = LocalShards(dir_, 3, &shards);
  ASSERT_NE(db, nullptr);
  ASSERT_OK(shards[1]->CreateTable(Spec(SelectorKind::kUniform, "only_on_1")).status());
  Status s = db->GetTable("only_on_1").status();
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("shard 0"));
  EXPECT_TRUE(db->ListTables().empty());

  TableSpec other = Spec(SelectorKind::kUniform, "differs");
  ASSERT_OK(shards[0]->CreateTable(other).status());
  ASSERT_OK(shards[1]->CreateTable(other).status());
  other.sequence_length = 5;
  ASSERT_OK(shards[2]->CreateTable(other).status());
  s = db->GetTable("differs").status();
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'differs' differs between shard 0"));
  EXPECT_THAT(s.message(), HasSubstr("and shard 2"));

  // only_on_1 exists on shard 1: creating it fails there and is undone on 0.
  s = db->CreateTable(Spec(SelectorKind::kUniform, "only_on_1")).status();
  EXPECT_EQ(s.code(), Status::Code::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("on shard 1"));
  EXPECT_EQ(shards[0]->GetTable("only_on_1").status().code(), Status::Code::kNotFound);

  ASSERT_OK(db->DropTable("only_on_1"));
  EXPECT_EQ(db->DropTable("only_on_1").code(), Status::Code::kNotFound);
  ASSERT_OK(db->CreateTable(Spec(SelectorKind::kUniform, "everywhere")).status());
  EXPECT_EQ(db->ListTables(), (std::vector<std::string>{"differs", "everywhere"}));
  const Status wal = db->Wal().status();
  EXPECT_EQ(wal.code(), Status::Code::kNotSupported);
  EXPECT_THAT(wal.message(),
              HasSubstr("Wal of a sharded database (local shards): run it on each shard"));
}

// The GPU calls run through this host (rdma/through_host.h): on a sharded
// table seeded as its twin (the same contents over as many shards),
// SampleToDevice, LookupToDevice and a DeviceSampler give what the host
// calls give, and UpdatePrioritiesFromDevice sets what a host update of its
// valid entries sets.
TEST(ShardedTableGpuTest, DeviceCallsGiveWhatTheHostCallsGiveOnATwin) {
  using testing_util::Take;
  std::string why;
  if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  const uint64_t seed = testing_util::TestSeed();
  testing_util::TempDir dir_a, dir_b;
  auto a = LocalShards(dir_a, 3);
  auto b = LocalShards(dir_b, 3);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_OK_AND_ASSIGN(auto ta, a->CreateTable(Spec(SelectorKind::kPrioritized)));
  ASSERT_OK_AND_ASSIGN(auto tb, b->CreateTable(Spec(SelectorKind::kPrioritized)));
  std::mt19937_64 ra(seed), rb(seed), rng(seed + 1);
  int64_t na = 0, nb = 0;
  Fill(*ta, 9, ra, &na);
  Fill(*tb, 9, rb, &nb);
  ASSERT_OK(ta->Seed(seed));
  ASSERT_OK(tb->Seed(seed));
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  const TableSpec spec = ta->spec();
  for (int i = 0; i < 4; ++i) {
    SampleOptions o;
    o.importance_beta = i % 2 == 0 ? -1.0 : 0.4;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 48);
    testing_util::DeviceOut out = testing_util::AllocateOut(spec, n);
    ASSERT_OK(ta->SampleToDevice(n, o, out.view, stream.handle()));
    SampleBatch want;
    ASSERT_OK(tb->Sample(n, o, &want));
    ASSERT_NO_FATAL_FAILURE(testing_util::ExpectSameOnDevice(out.view, want, spec.sequence_length,
                                                             o.importance_beta >= 0))
        << "sample " << i;
    testing_util::DeviceOut looked = testing_util::AllocateOut(spec, n);
    ASSERT_OK(ta->LookupToDevice(want.keys, looked.view, stream.handle()));
    SampleBatch want_lookup;
    ASSERT_OK(tb->Lookup(want.keys, &want_lookup));
    ASSERT_NO_FATAL_FAILURE(
        testing_util::ExpectSameOnDevice(looked.view, want_lookup, spec.sequence_length, false))
        << "lookup " << i;
  }
  std::vector<ItemKey> keys;
  std::vector<double> ignored;
  ASSERT_OK(tb->ItemPriorities(&keys, &ignored));
  std::vector<float> values(keys.size());
  std::vector<ItemKey> valid_keys;
  std::vector<double> valid_values;
  for (size_t i = 0; i < keys.size(); ++i) {
    values[i] = rng() % 7 == 0 ? -1.0f : static_cast<float>(1 + rng() % 1000) / 4.0f;
    if (values[i] >= 0) {
      valid_keys.push_back(keys[i]);
      valid_values.push_back(values[i]);
    }
  }
  DeviceBuffer d_keys = Take(DeviceBuffer::Allocate(0, keys.size() * 8));
  DeviceBuffer d_values = Take(DeviceBuffer::Allocate(0, values.size() * 4));
  ASSERT_OK(d_keys.CopyFromHost(keys.data(), keys.size() * 8));
  ASSERT_OK(d_values.CopyFromHost(values.data(), values.size() * 4));
  ASSERT_OK(ta->UpdatePrioritiesFromDevice(d_keys.as<uint64_t>(), d_values.as<float>(),
                                           static_cast<int64_t>(keys.size()), stream.handle()));
  ASSERT_OK(tb->UpdatePriorities(valid_keys, valid_values, nullptr));
  std::vector<ItemKey> ka, kb;
  std::vector<double> pa, pb;
  ASSERT_OK(ta->ItemPriorities(&ka, &pa));
  ASSERT_OK(tb->ItemPriorities(&kb, &pb));
  EXPECT_EQ(ka, kb);
  EXPECT_EQ(pa, pb);

  ASSERT_OK(ta->Seed(seed + 2));
  ASSERT_OK(tb->Seed(seed + 2));
  DeviceSamplerOptions options;
  options.batch_size = 1 + static_cast<int64_t>(rng() % 32);
  options.in_flight = 1;
  options.sample.importance_beta = 0.4;
  ASSERT_OK_AND_ASSIGN(auto sampler, ta->NewDeviceSampler(options));
  for (int i = 0; i < 4; ++i) {
    DeviceBatch batch;
    ASSERT_OK(sampler->Next(stream.handle(), &batch, 10s));
    ASSERT_OK(stream.Synchronize());
    SampleBatch want;
    ASSERT_OK(tb->Sample(options.batch_size, options.sample, &want));
    const DeviceSampleOutput view{batch.keys, batch.probabilities, batch.weights, batch.columns,
                                  batch.mask};
    ASSERT_NO_FATAL_FAILURE(
        testing_util::ExpectSameOnDevice(view, want, batch.sequence_length, true))
        << "batch " << i;
    ASSERT_OK(sampler->Release(batch, stream.handle()));
  }
}

TEST(ShardedAddressTest, MalformedShardListsAreRefusedNamingWhy) {
  EXPECT_TRUE(IsShardedAddress("ucx://127.0.0.1:1+ucx://127.0.0.1:2"));
  EXPECT_TRUE(IsShardedAddress("ucx://127.0.0.1:1+etcd://127.0.0.1:2379/c"));
  EXPECT_FALSE(IsShardedAddress("ucx://127.0.0.1:1"));
  EXPECT_TRUE(IsShardedAddress("ucx://127.0.0.1:1+-+ucx://127.0.0.1:3"));
  EXPECT_TRUE(IsShardedAddress("ucx://127.0.0.1:1+-"));
  EXPECT_FALSE(IsShardedAddress("ucx://127.0.0.1:1+-x"));
  EXPECT_FALSE(IsShardedAddress("file:///tmp/a+b/cluster"));
  Status s = DB::Connect("ucx://127.0.0.1:1+ucx://127.0.0.1:1").status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("names ucx://127.0.0.1:1 twice"));
  s = DB::Connect("-+-").status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("every shard has left"));
  s = DB::Connect("ucx://127.0.0.1:1+ucx://127.0.0.1:2+").status();
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("shard 2's address is empty"));
  std::string many = "ucx://127.0.0.1:1";
  for (int i = 2; i <= kMaxShards + 1; ++i) many += "+ucx://127.0.0.1:" + std::to_string(i);
  s = DB::Connect(many).status();
  EXPECT_THAT(s.message(), HasSubstr("names 257 shards; at most 256"));
}

TEST(ShardedKeysTest, AKeyCarriesItsShardInItsTopBits) {
  std::mt19937_64 rng(testing_util::TestSeed());
  for (int i = 0; i < 1000; ++i) {
    const int shard = static_cast<int>(rng() % kMaxShards);
    const uint64_t id = rng() & kMaxShardTrajectoryId;
    const int64_t start = static_cast<int64_t>(rng() % kMaxTrajectorySteps);
    const uint64_t sharded = ShardedTrajectoryId(shard, id);
    ASSERT_LE(sharded, kMaxTrajectoryId);
    EXPECT_EQ(ShardOfTrajectory(sharded), shard);
    EXPECT_EQ(ShardLocalTrajectory(sharded), id);
    const ItemKey key = ShardedItemKey(shard, MakeItemKey(id, start));
    EXPECT_EQ(key, MakeItemKey(sharded, start));
    EXPECT_EQ(ShardOfKey(key), shard);
    EXPECT_EQ(ShardLocalKey(key), MakeItemKey(id, start));
  }
  // Shard 0's ids and keys are the shard's own.
  EXPECT_EQ(ShardedTrajectoryId(0, 12345), 12345u);
}

}  // namespace
}  // namespace replaydb::rdma
