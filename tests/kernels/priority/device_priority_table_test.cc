// DevicePriorityTable: draws against priority^alpha (chi-square), zero
// priorities, twelve orders of magnitude, device-side updates (unknown keys,
// duplicates, bad values), stratified draws, importance weights, staged
// inserts/removes with slot reuse, streams, caller-chosen slots (InsertAt,
// the draws' slots). Every GPU test skips, with the reason, where no GPU can
// be used (a table needs one, so do the host-side checks of its calls);
// KeySlotMap (host code) and the options' defaults are tested everywhere.
#include "kernels/priority/device_priority_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kernels/runtime/gpu.h"
#include "kernels/priority/key_slot_map.h"
#include "replaydb/device.h"
#include "tests/test_util.h"

namespace replaydb::kernels {
namespace {

using Table = DevicePriorityTable;

// ----------------------------------------------------------------- helpers

using testing_util::ChiSquareCritical;

struct ChiSquareResult {
  double statistic = 0;
  double critical = 0;
  int bins = 0;
};

// Pearson's chi-square of observed counts against expected ones. Bins are
// taken in ascending order of expectation and merged until each expects at
// least 5 (items of tiny probability pool together).
ChiSquareResult ChiSquare(const std::vector<double>& observed,
                          const std::vector<double>& expected) {
  std::vector<size_t> order(expected.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return expected[a] < expected[b]; });
  std::vector<double> obs, exp;
  double o = 0, e = 0;
  for (size_t i : order) {
    o += observed[i];
    e += expected[i];
    if (e >= 5.0) {
      obs.push_back(o);
      exp.push_back(e);
      o = e = 0;
    }
  }
  if (e > 0 || o > 0) {  // the remainder joins the last bin
    if (exp.empty()) {
      obs.push_back(o);
      exp.push_back(e);
    } else {
      obs.back() += o;
      exp.back() += e;
    }
  }
  ChiSquareResult r;
  r.bins = static_cast<int>(exp.size());
  for (size_t i = 0; i < exp.size(); ++i) {
    const double d = obs[i] - exp[i];
    r.statistic += d * d / exp[i];
  }
  r.critical = ChiSquareCritical(std::max(1, r.bins - 1));
  return r;
}

// What a slot holds for `priority`, as the table computes it.
double Value(double priority, double alpha) {
  if (!(priority > 0)) return 0;
  const double v = alpha == 1.0 ? priority : std::pow(priority, alpha);
  float f = v >= std::numeric_limits<float>::max() ? std::numeric_limits<float>::max()
                                                   : static_cast<float>(v);
  if (f == 0) f = std::numeric_limits<float>::denorm_min();
  return f;
}

// Device outputs of Sample, read back.
struct Draws {
  std::vector<uint64_t> keys;
  std::vector<float> probabilities;
  std::vector<float> weights;
  std::vector<int64_t> slots;  // from SampleBuffers made with slots
};

// Output buffers for batches of up to `batch`, poisoned before each call.
class SampleBuffers {
 public:
  // With `slots`, every Sample call also asks for the draws' slots
  // (SampleParams::d_slots) and Draws::slots gets them.
  static Result<SampleBuffers> Make(int64_t batch, bool slots = false) {
    SampleBuffers b;
    b.batch_ = batch;
    REPLAYDB_ASSIGN_OR_RETURN(b.keys_, DeviceBuffer::Allocate(0, sizeof(uint64_t) * batch));
    REPLAYDB_ASSIGN_OR_RETURN(b.probabilities_, DeviceBuffer::Allocate(0, sizeof(float) * batch));
    REPLAYDB_ASSIGN_OR_RETURN(b.weights_, DeviceBuffer::Allocate(0, sizeof(float) * batch));
    if (slots) {
      REPLAYDB_ASSIGN_OR_RETURN(b.slots_, DeviceBuffer::Allocate(0, sizeof(int64_t) * batch));
    }
    b.with_slots_ = slots;
    return Result<SampleBuffers>(std::move(b));
  }

  // One Sample call of `batch` draws, appended to *out.
  Status Draw(Table& table, int64_t batch, const Table::SampleParams& params, Draws* out,
              void* stream = nullptr) {
    REPLAYDB_RETURN_IF_ERROR(keys_.Fill(0xAB, stream));
    REPLAYDB_RETURN_IF_ERROR(probabilities_.Fill(0xAB, stream));
    REPLAYDB_RETURN_IF_ERROR(weights_.Fill(0xAB, stream));
    Table::SampleParams p = params;
    if (with_slots_) {
      REPLAYDB_RETURN_IF_ERROR(slots_.Fill(0xAB, stream));
      p.d_slots = slots_.as<int64_t>();
    }
    REPLAYDB_RETURN_IF_ERROR(table.Sample(
        batch, p, keys_.as<uint64_t>(), probabilities_.as<float>(), weights_.as<float>(), stream));
    if (with_slots_) {
      const size_t at = out->slots.size();
      out->slots.resize(at + batch);
      REPLAYDB_RETURN_IF_ERROR(
          slots_.CopyToHost(out->slots.data() + at, sizeof(int64_t) * batch, 0, stream));
    }
    const size_t at = out->keys.size();
    out->keys.resize(at + batch);
    out->probabilities.resize(at + batch);
    out->weights.resize(at + batch);
    REPLAYDB_RETURN_IF_ERROR(
        keys_.CopyToHost(out->keys.data() + at, sizeof(uint64_t) * batch, 0, stream));
    REPLAYDB_RETURN_IF_ERROR(probabilities_.CopyToHost(out->probabilities.data() + at,
                                                       sizeof(float) * batch, 0, stream));
    return weights_.CopyToHost(out->weights.data() + at, sizeof(float) * batch, 0, stream);
  }

  Status DrawMany(Table& table, int64_t total, const Table::SampleParams& params, Draws* out) {
    for (int64_t done = 0; done < total; done += batch_) {
      REPLAYDB_RETURN_IF_ERROR(Draw(table, std::min(batch_, total - done), params, out));
    }
    return Status::OK();
  }

 private:
  int64_t batch_ = 0;
  bool with_slots_ = false;
  DeviceBuffer keys_, probabilities_, weights_, slots_;
};

std::vector<uint64_t> DistinctKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> keys;
  // The extremes first: every 64-bit value is a valid key.
  for (uint64_t k : {uint64_t{0}, ~uint64_t{0}}) {
    if (keys.size() < n) {
      keys.push_back(k);
      seen.insert(k);
    }
  }
  while (keys.size() < n) {
    const uint64_t k = rng();
    if (seen.insert(k).second) keys.push_back(k);
  }
  return keys;
}

// `s` has `code` and its message contains each of `parts`.
void ExpectError(const Status& s, Status::Code code, const std::vector<std::string>& parts) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  for (const std::string& part : parts) {
    EXPECT_NE(s.message().find(part), std::string::npos)
        << "\"" << part << "\" is not in: " << s.ToString();
  }
}

// Every draw returned a key of `slot_of` together with that key's slot.
void ExpectDrawnSlots(const Draws& draws, const std::unordered_map<uint64_t, int64_t>& slot_of) {
  ASSERT_EQ(draws.slots.size(), draws.keys.size());
  for (size_t d = 0; d < draws.keys.size(); ++d) {
    auto it = slot_of.find(draws.keys[d]);
    ASSERT_NE(it, slot_of.end()) << "draw " << d << " returned unknown key " << draws.keys[d];
    ASSERT_EQ(draws.slots[d], it->second) << "draw " << d << " of key " << draws.keys[d];
  }
}

// `n` distinct slots in [0, capacity), in random order. REQUIRES: n <= capacity.
std::vector<int64_t> DistinctSlots(int64_t n, int64_t capacity, std::mt19937_64& rng) {
  std::vector<int64_t> slots;
  if (2 * n > capacity) {
    for (int64_t s = 0; s < capacity; ++s) slots.push_back(s);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(static_cast<size_t>(n));
    return slots;
  }
  std::unordered_set<int64_t> seen;
  while (static_cast<int64_t>(slots.size()) < n) {
    const int64_t s = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
    if (seen.insert(s).second) slots.push_back(s);
  }
  return slots;
}

class DevicePriorityTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  }

  static std::unique_ptr<Table> MakeTable(int64_t capacity, double alpha = 1.0, uint64_t seed = 1,
                                          bool caller_slots = false, bool track_updates = false) {
    Table::Options options;
    options.capacity = capacity;
    options.alpha = alpha;
    options.seed = seed;
    options.caller_slots = caller_slots;
    options.track_updates = track_updates;
    auto table = Table::Create(options);
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    return table.ok() ? std::move(table).value() : nullptr;
  }

  // Chi-square of the draws' keys against priority^alpha, and each draw's
  // probability against value / total.
  static void ExpectDrawsMatch(const Draws& draws, const std::vector<uint64_t>& keys,
                               const std::vector<double>& priorities, double alpha) {
    std::unordered_map<uint64_t, size_t> index;
    double total = 0;
    std::vector<double> values(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      index[keys[i]] = i;
      values[i] = Value(priorities[i], alpha);
      total += values[i];
    }
    std::vector<double> observed(keys.size(), 0.0), expected(keys.size());
    int64_t bad_probability = 0;
    for (size_t d = 0; d < draws.keys.size(); ++d) {
      auto it = index.find(draws.keys[d]);
      ASSERT_NE(it, index.end()) << "draw " << d << " returned unknown key " << draws.keys[d];
      const size_t i = it->second;
      ASSERT_GT(values[i], 0) << "draw " << d << " landed on key " << keys[i] << " of priority "
                              << priorities[i];
      observed[i] += 1;
      const double want = values[i] / total;
      if (std::abs(draws.probabilities[d] - want) > 2e-6 * want) ++bad_probability;
    }
    EXPECT_EQ(bad_probability, 0) << "draws whose probability is not value / total";
    for (size_t i = 0; i < keys.size(); ++i) {
      expected[i] = values[i] / total * static_cast<double>(draws.keys.size());
    }
    const ChiSquareResult chi = ChiSquare(observed, expected);
    EXPECT_LT(chi.statistic, chi.critical) << chi.bins << " bins";
  }
};

// ------------------------------------------------------------------ tests

TEST_F(DevicePriorityTableTest, CreateRejectsBadOptions) {
  Table::Options o;
  o.capacity = 0;
  EXPECT_EQ(Table::Create(o).status().code(), Status::Code::kInvalidArgument);
  o.capacity = int64_t{1} << 31;
  EXPECT_EQ(Table::Create(o).status().code(), Status::Code::kInvalidArgument);
  o.capacity = 10;
  o.alpha = -0.5;
  EXPECT_EQ(Table::Create(o).status().code(), Status::Code::kInvalidArgument);
  o.alpha = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Table::Create(o).status().code(), Status::Code::kInvalidArgument);
  o.alpha = 1;
  o.device = 1 << 20;
  EXPECT_EQ(Table::Create(o).status().code(), Status::Code::kInvalidArgument);
}

TEST_F(DevicePriorityTableTest, HostSideErrors) {
  auto t = MakeTable(3);
  ASSERT_NE(t, nullptr);
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(8));
  Draws d;
  EXPECT_EQ(out.Draw(*t, 8, {}, &d).code(), Status::Code::kFailedPrecondition);  // empty
  ASSERT_OK(t->Insert(1, 0.0));
  EXPECT_EQ(out.Draw(*t, 8, {}, &d).code(), Status::Code::kFailedPrecondition);  // all zero
  EXPECT_EQ(t->Insert(1, 2.0).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(t->Insert(2, -1.0).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(t->Insert(2, std::numeric_limits<double>::infinity()).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(t->Insert(2, std::numeric_limits<double>::quiet_NaN()).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(t->Remove(2).code(), Status::Code::kNotFound);
  EXPECT_EQ(t->SetPriority(2, 1.0).code(), Status::Code::kNotFound);
  EXPECT_EQ(t->SetPriority(1, -3.0).code(), Status::Code::kInvalidArgument);
  ASSERT_OK(t->Insert(2, 1.0));
  ASSERT_OK(t->Insert(3, 1.0));
  EXPECT_EQ(t->Insert(4, 1.0).code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(t->size(), 3);
  ASSERT_OK(t->Remove(3));
  EXPECT_EQ(t->size(), 2);
  ASSERT_OK(t->Insert(4, 1.0));  // the freed slot
  EXPECT_EQ(t->size(), 3);
  EXPECT_EQ(t->Sample(-1, {}, nullptr, nullptr, nullptr, nullptr).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(t->Sample(4, {}, nullptr, nullptr, nullptr, nullptr).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(t->UpdatePriorities(nullptr, nullptr, 4, nullptr).code(),
            Status::Code::kInvalidArgument);
  ASSERT_OK(t->Sample(0, {}, nullptr, nullptr, nullptr, nullptr));
  ASSERT_OK(t->UpdatePriorities(nullptr, nullptr, 0, nullptr));
  ASSERT_OK_AND_ASSIGN(std::vector<double> p, t->ReadPriorities({1, 2, 3, 4, 5}));
  EXPECT_EQ(p, (std::vector<double>{0.0, 1.0, -1.0, 1.0, -1.0}));
}

TEST_F(DevicePriorityTableTest, DrawsFollowPriorityToTheAlpha) {
  constexpr int kItems = 5000;
  for (double alpha : {1.0, 0.6}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    auto t = MakeTable(kItems + 123, alpha, /*seed=*/7);
    ASSERT_NE(t, nullptr);
    const std::vector<uint64_t> keys = DistinctKeys(kItems, 11);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(0.05, 20.0);
    std::vector<double> priorities(kItems);
    for (int i = 0; i < kItems; ++i) {
      priorities[i] = u(rng);
      ASSERT_OK(t->Insert(keys[i], priorities[i]));
    }
    ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
    Draws d;
    ASSERT_OK(out.DrawMany(*t, 1 << 19, {}, &d));
    ExpectDrawsMatch(d, keys, priorities, alpha);
  }
}

TEST_F(DevicePriorityTableTest, PrioritiesOverTwelveOrdersOfMagnitude) {
  constexpr int kItems = 20000;
  auto t = MakeTable(kItems, 1.0, 3);
  ASSERT_NE(t, nullptr);
  const std::vector<uint64_t> keys = DistinctKeys(kItems, 12);
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> exponent(-6.0, 6.0);
  std::vector<double> priorities(kItems);
  for (int i = 0; i < kItems; ++i) {
    priorities[i] = std::pow(10.0, exponent(rng));
    ASSERT_OK(t->Insert(keys[i], priorities[i]));
  }
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
  Draws d;
  ASSERT_OK(out.DrawMany(*t, 1 << 19, {}, &d));
  ExpectDrawsMatch(d, keys, priorities, 1.0);

  // The small end alone: only items near 1e-6 keep mass once the rest are
  // set to 0, and they are drawn in proportion.
  std::vector<double> small(kItems);
  for (int i = 0; i < kItems; ++i) {
    small[i] = priorities[i] < 1e-5 ? priorities[i] : 0.0;
    if (small[i] == 0.0) ASSERT_OK(t->SetPriority(keys[i], 0.0));
  }
  Draws d2;
  ASSERT_OK(out.DrawMany(*t, 1 << 18, {}, &d2));
  ExpectDrawsMatch(d2, keys, small, 1.0);

  // Extremes of float's range: 1e-40 (below float's normal range) and 1e30.
  auto t2 = MakeTable(4, 1.0, 4);
  ASSERT_NE(t2, nullptr);
  ASSERT_OK(t2->Insert(1, 1e-40));
  ASSERT_OK(t2->Insert(2, 3e-40));
  Draws d3;
  ASSERT_OK(out.DrawMany(*t2, 1 << 16, {}, &d3));
  ExpectDrawsMatch(d3, {1, 2}, {1e-40, 3e-40}, 1.0);
  ASSERT_OK(t2->Insert(3, 1e30));
  Draws d4;
  ASSERT_OK(out.Draw(*t2, 1 << 16, {}, &d4));
  for (uint64_t k : d4.keys) ASSERT_EQ(k, 3u);
}

TEST_F(DevicePriorityTableTest, ZeroPriorityIsNeverDrawn) {
  constexpr int kItems = 40000;
  auto t = MakeTable(kItems, 1.0, 9);
  ASSERT_NE(t, nullptr);
  const std::vector<uint64_t> keys = DistinctKeys(kItems, 13);
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> priorities(kItems);
  for (int i = 0; i < kItems; ++i) {
    // Whole zero segments (slots 4096..8191), zeros at segment edges, and
    // 90% zeros elsewhere.
    const bool zero = (i >= 4096 && i < 8192) || (i % 1024 == 0) || (i % 1024 == 1023) ||
                      (i % 32 == 31) || u(rng) < 0.9;
    priorities[i] = zero ? 0.0 : 0.5 + u(rng);
    ASSERT_OK(t->Insert(keys[i], priorities[i]));
  }
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
  for (bool stratified : {false, true}) {
    Draws d;
    Table::SampleParams params;
    params.stratified = stratified;
    ASSERT_OK(out.DrawMany(*t, 1 << 19, params, &d));
    ExpectDrawsMatch(d, keys, priorities, 1.0);  // fails on any zero draw
  }

  // One positive item at the first and one at the last slot of a segment.
  auto t2 = MakeTable(3000, 1.0, 10);
  ASSERT_NE(t2, nullptr);
  for (int i = 0; i < 3000; ++i) ASSERT_OK(t2->Insert(i, i == 1024 || i == 2047 ? 1.0 : 0.0));
  Draws d2;
  ASSERT_OK(out.Draw(*t2, 1 << 16, {}, &d2));
  int64_t first = 0;
  for (uint64_t k : d2.keys) {
    ASSERT_TRUE(k == 1024 || k == 2047) << k;
    first += k == 1024;
  }
  EXPECT_NEAR(static_cast<double>(first) / (1 << 16), 0.5, 0.02);
}

// Options::track_updates: a collection gives every item UpdatePriorities set
// since the last collection of the same mark, once, with its latest
// priority; the two marks are independent; a collection with too little
// room says more() and the next one gives the rest; removed items are
// left out; a table made without tracking refuses, saying why.
TEST_F(DevicePriorityTableTest, CollectUpdatedGivesEachUpdatedItemOnceWithItsLatestPriority) {
  std::mt19937_64 rng(testing_util::TestSeed());
  const int items = 500 + static_cast<int>(rng() % 3000);
  auto t = MakeTable(items + 17, 1.0, 5, /*caller_slots=*/false, /*track_updates=*/true);
  ASSERT_NE(t, nullptr);
  const std::vector<uint64_t> keys = DistinctKeys(items, rng());
  for (const uint64_t k : keys) ASSERT_OK(t->Insert(k, 1.0));
  ASSERT_OK(t->Flush(nullptr));
  std::uniform_real_distribution<float> u(0.0f, 100.0f);
  // Several calls, keys repeated within and across them.
  std::map<uint64_t, double> latest;
  const auto update = [&](int calls) {
    for (int c = 0; c < calls; ++c) {
      const int n = 1 + static_cast<int>(rng() % 700);
      std::vector<uint64_t> k(n);
      std::vector<float> p(n);
      for (int i = 0; i < n; ++i) {
        k[i] = keys[rng() % keys.size()];
        p[i] = u(rng);
        latest[k[i]] = p[i];
      }
      ASSERT_OK_AND_ASSIGN(DeviceBuffer d_k, DeviceBuffer::Allocate(0, sizeof(uint64_t) * n));
      ASSERT_OK_AND_ASSIGN(DeviceBuffer d_p, DeviceBuffer::Allocate(0, sizeof(float) * n));
      ASSERT_OK(d_k.CopyFromHost(k.data(), sizeof(uint64_t) * n));
      ASSERT_OK(d_p.CopyFromHost(p.data(), sizeof(float) * n));
      ASSERT_OK(t->UpdatePriorities(d_k.as<uint64_t>(), d_p.as<float>(), n, nullptr));
      ASSERT_OK(DeviceSynchronize(0));
    }
  };
  // Everything a mark has, collected `room` items at a time.
  const auto collect = [&](int mark, int64_t room) {
    std::map<uint64_t, double> got;
    auto into = t->NewUpdated(room);
    EXPECT_OK(into.status());
    if (!into.ok()) return got;
    for (int round = 0; round < 10000; ++round) {
      EXPECT_OK(t->CollectUpdated(mark, into->get()));
      EXPECT_OK((*into)->Wait());
      EXPECT_LE((*into)->count(), room);
      for (int64_t i = 0; i < (*into)->count(); ++i) {
        EXPECT_TRUE(got.emplace((*into)->keys()[i], (*into)->priorities()[i]).second)
            << "key " << (*into)->keys()[i] << " given twice";
      }
      if (!(*into)->more()) break;
      EXPECT_EQ((*into)->count(), room) << "more() with room left";
    }
    return got;
  };
  update(1 + static_cast<int>(rng() % 5));
  const std::map<uint64_t, double> first = latest;
  EXPECT_EQ(collect(Table::kLogMark, 1 + static_cast<int64_t>(rng() % 300)), first);
  EXPECT_TRUE(collect(Table::kLogMark, 64).empty()) << "collected again without updates";
  // More updates: the checkpoint mark has both rounds, the log mark the second.
  latest.clear();
  update(1 + static_cast<int>(rng() % 5));
  // A removed item is not given by either mark.
  const uint64_t removed = latest.begin()->first;
  ASSERT_OK(t->Remove(removed));
  latest.erase(removed);
  std::map<uint64_t, double> both = first;
  both.erase(removed);
  for (const auto& [k, p] : latest) both[k] = p;
  EXPECT_EQ(collect(Table::kLogMark, items), latest);
  EXPECT_EQ(collect(Table::kCheckpointMark, 1 + static_cast<int64_t>(rng() % 300)), both);
  EXPECT_TRUE(collect(Table::kCheckpointMark, 64).empty());

  auto one = t->NewUpdated(1);
  ASSERT_OK(one.status());
  EXPECT_EQ(t->CollectUpdated(3, one->get()).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(t->NewUpdated(0).status().code(), Status::Code::kInvalidArgument);
  auto untracked = MakeTable(8);
  ASSERT_NE(untracked, nullptr);
  auto room = untracked->NewUpdated(4);
  ASSERT_OK(room.status());
  const Status refused = untracked->CollectUpdated(Table::kLogMark, room->get());
  EXPECT_EQ(refused.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("without track_updates"));
}

// Both update paths: up to 65536 updates run as one cooperative kernel,
// more are sorted by slot (a filler of valid updates in front makes n larger
// without changing what wins).
TEST_F(DevicePriorityTableTest, UpdatePrioritiesFromDeviceArrays) {
  constexpr int kItems = 3000;
  for (int filler : {0, 70000}) {
    SCOPED_TRACE("filler " + std::to_string(filler));
    auto t = MakeTable(kItems, 1.0, 21);
    ASSERT_NE(t, nullptr);
    const std::vector<uint64_t> keys = DistinctKeys(kItems, 14);
    std::vector<double> priorities(kItems, 1.0);
    for (int i = 0; i < kItems; ++i) ASSERT_OK(t->Insert(keys[i], 1.0));
    ASSERT_OK(t->Flush(nullptr));

    std::vector<uint64_t> up_keys;
    std::vector<float> up_values;
    int64_t want_skipped = 0;
    std::mt19937_64 rng(15);
    std::uniform_real_distribution<float> u(0.1f, 10.0f);
    for (int i = 0; i < filler; ++i) {
      up_keys.push_back(keys[rng() % kItems]);
      up_values.push_back(u(rng));
    }
    // Every item once, in shuffled order.
    std::vector<int> order(kItems);
    for (int i = 0; i < kItems; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      up_keys.push_back(keys[i]);
      up_values.push_back(u(rng));
      priorities[i] = up_values.back();
    }
    // Duplicates: the last occurrence wins.
    for (int rep = 0; rep < 3; ++rep) {
      for (int i = 0; i < 100; ++i) {
        up_keys.push_back(keys[i]);
        up_values.push_back(u(rng));
        priorities[i] = up_values.back();
      }
    }
    // Unknown keys and bad values are skipped and counted; a bad value does
    // not undo an earlier valid update of the same key.
    for (int i = 0; i < 50; ++i) {
      up_keys.push_back(0x5eed000000000000ULL + i);
      up_values.push_back(1.0f);
      ++want_skipped;
    }
    const float bad[] = {-1.0f, std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
    for (int i = 0; i < 40; ++i) {
      up_keys.push_back(keys[200 + i]);
      up_values.push_back(bad[i % 4]);
      ++want_skipped;
    }
    // Priority 0 is valid.
    for (int i = 300; i < 400; ++i) {
      up_keys.push_back(keys[i]);
      up_values.push_back(0.0f);
      priorities[i] = 0.0;
    }
    const int64_t n = static_cast<int64_t>(up_keys.size());
    ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * n));
    ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * n));
    ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * n));
    ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * n));
    ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), n, nullptr));

    ASSERT_OK_AND_ASSIGN(int64_t skipped, t->SkippedUpdates());
    EXPECT_EQ(skipped, want_skipped);
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities(keys));
    for (int i = 0; i < kItems; ++i) {
      ASSERT_EQ(held[i], priorities[i]) << "item " << i;
    }
    ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
    Draws d;
    ASSERT_OK(out.DrawMany(*t, 1 << 19, {}, &d));
    ExpectDrawsMatch(d, keys, priorities, 1.0);

    // The same updates again: the counter accumulates.
    ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), n, nullptr));
    ASSERT_OK_AND_ASSIGN(skipped, t->SkippedUpdates());
    EXPECT_EQ(skipped, 2 * want_skipped);
  }
}

// More than 2^20 slots: three levels, so updates and draws cross level-1
// segments and the level kernels run.
TEST_F(DevicePriorityTableTest, ThreeLevelTreeUpdatesAndDraws) {
  constexpr int kItems = 1500000;
  auto t = MakeTable(kItems, 0.7, 31);
  ASSERT_NE(t, nullptr);
  std::vector<uint64_t> keys(kItems);
  std::vector<double> priorities(kItems);
  std::mt19937_64 rng(32);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  for (int i = 0; i < kItems; ++i) {
    keys[i] = 0x9000000000000000ULL ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL);
    priorities[i] = u(rng);
    ASSERT_OK(t->Insert(keys[i], priorities[i]));
  }
  // Items 0..99999 get 50x their priority from the device; 200000..299999
  // drop to zero.
  std::vector<uint64_t> up_keys;
  std::vector<float> up_values;
  for (int i = 0; i < 100000; ++i) {
    up_keys.push_back(keys[i]);
    up_values.push_back(static_cast<float>(priorities[i] * 50));
    priorities[i] = up_values.back();
    up_keys.push_back(keys[200000 + i]);
    up_values.push_back(0.0f);
    priorities[200000 + i] = 0;
  }
  const int64_t n = static_cast<int64_t>(up_keys.size());
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * n));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * n));
  ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * n));
  ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * n));
  ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), n, nullptr));

  // Draws grouped into 64 bins of consecutive items (the insert order).
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
  Draws d;
  ASSERT_OK(out.DrawMany(*t, 1 << 19, {}, &d));
  std::unordered_map<uint64_t, int> index;
  for (int i = 0; i < kItems; ++i) index[keys[i]] = i;
  constexpr int kBins = 64;
  const int per_bin = (kItems + kBins - 1) / kBins;
  std::vector<double> observed(kBins, 0), expected(kBins, 0);
  double total = 0;
  for (int i = 0; i < kItems; ++i) total += Value(priorities[i], 0.7);
  for (int i = 0; i < kItems; ++i) {
    expected[i / per_bin] += Value(priorities[i], 0.7) / total * static_cast<double>(d.keys.size());
  }
  for (uint64_t k : d.keys) {
    auto it = index.find(k);
    ASSERT_NE(it, index.end());
    ASSERT_GT(priorities[it->second], 0) << "zero-priority item drawn";
    observed[it->second / per_bin] += 1;
  }
  const ChiSquareResult chi = ChiSquare(observed, expected);
  EXPECT_LT(chi.statistic, chi.critical);
  ASSERT_OK_AND_ASSIGN(std::vector<double> held,
                       t->ReadPriorities({keys[0], keys[99999], keys[200000], keys[kItems - 1]}));
  EXPECT_EQ(held[0], priorities[0]);
  EXPECT_EQ(held[1], priorities[99999]);
  EXPECT_EQ(held[2], 0.0);
  EXPECT_EQ(held[3], priorities[kItems - 1]);
}

// At most 4096 updates run as one kernel whose last block recomputes the
// upper levels: check it on a three-level tree, with duplicates, unknown
// keys and bad values, against a host model and by drawing.
TEST_F(DevicePriorityTableTest, ThreeLevelTreeSmallUpdates) {
  constexpr int kItems = 1200000;
  auto t = MakeTable(kItems, 1.0, 33);
  ASSERT_NE(t, nullptr);
  std::vector<uint64_t> keys(kItems);
  std::vector<double> priorities(kItems, 1.0);
  for (int i = 0; i < kItems; ++i) {
    keys[i] = static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ULL + 7;
    ASSERT_OK(t->Insert(keys[i], 1.0));
  }
  std::mt19937_64 rng(34);
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * 4096));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * 4096));
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(1 << 16));
  int64_t want_skipped = 0;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<uint64_t> up_keys;
    std::vector<float> up_values;
    const int n = round == 0 ? 4096 : round == 1 ? 1000 : 33;
    for (int u = 0; u < n; ++u) {
      const uint64_t r = rng() % 100;
      if (r < 3) {  // unknown key
        up_keys.push_back(0xABCDEF0000000000ULL + u);
        up_values.push_back(1.0f);
      } else if (r < 5) {  // bad value
        up_keys.push_back(keys[rng() % kItems]);
        up_values.push_back(-2.0f);
      } else if (r < 15 && !up_keys.empty()) {  // a repeat of an earlier key
        up_keys.push_back(up_keys[rng() % up_keys.size()]);
        up_values.push_back(static_cast<float>(1 + rng() % 1000));
      } else {  // mass concentrated on a few level-1 segments, zeros elsewhere
        const int item = static_cast<int>(rng() % 64) * 17011 + static_cast<int>(rng() % 5);
        up_keys.push_back(keys[item % kItems]);
        up_values.push_back(rng() % 4 == 0 ? 0.0f : static_cast<float>(1 + rng() % 1000));
      }
    }
    // Apply to the model in order: valid updates of known keys, last wins.
    std::unordered_map<uint64_t, int> index;
    for (int i = 0; i < kItems; ++i) index[keys[i]] = i;
    for (size_t u = 0; u < up_keys.size(); ++u) {
      auto it = index.find(up_keys[u]);
      if (it == index.end() || !(up_values[u] >= 0)) {
        ++want_skipped;
        continue;
      }
      priorities[it->second] = up_values[u];
    }
    ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * n));
    ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * n));
    ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), n, nullptr));
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities(keys));
    for (int i = 0; i < kItems; ++i) ASSERT_EQ(held[i], priorities[i]) << "item " << i;
    ASSERT_OK_AND_ASSIGN(int64_t skipped, t->SkippedUpdates());
    EXPECT_EQ(skipped, want_skipped);
    Draws d;
    ASSERT_OK(out.DrawMany(*t, 1 << 18, {}, &d));
    ExpectDrawsMatch(d, keys, priorities, 1.0);
  }
}

TEST_F(DevicePriorityTableTest, StratifiedDrawsOnePerStratum) {
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(4096));
  Table::SampleParams params;
  params.stratified = true;
  {
    // Equal priorities and as many items as draws: every item exactly once.
    constexpr int kItems = 4096;
    auto t = MakeTable(kItems, 1.0, 41);
    ASSERT_NE(t, nullptr);
    for (int i = 0; i < kItems; ++i) ASSERT_OK(t->Insert(1000 + i, 2.5));
    for (int round = 0; round < 4; ++round) {
      Draws d;
      ASSERT_OK(out.Draw(*t, kItems, params, &d));
      std::vector<uint64_t> sorted = d.keys;
      std::sort(sorted.begin(), sorted.end());
      for (int i = 0; i < kItems; ++i) ASSERT_EQ(sorted[i], 1000u + i) << "round " << round;
    }
  }
  {
    // Unequal priorities: an item holding a fraction f of the mass is drawn
    // B*f times, give or take less than 2 (one draw per stratum).
    constexpr int kItems = 700;
    constexpr int kBatch = 4096;
    auto t = MakeTable(kItems, 1.0, 42);
    ASSERT_NE(t, nullptr);
    std::mt19937_64 rng(43);
    std::uniform_real_distribution<double> exponent(-3.0, 3.0);
    std::vector<double> priorities(kItems);
    double total = 0;
    for (int i = 0; i < kItems; ++i) {
      priorities[i] = i % 7 == 3 ? 0.0 : std::pow(10.0, exponent(rng));
      total += Value(priorities[i], 1.0);
      ASSERT_OK(t->Insert(i, priorities[i]));
    }
    for (int round = 0; round < 8; ++round) {
      Draws d;
      ASSERT_OK(out.Draw(*t, kBatch, params, &d));
      std::vector<int> count(kItems, 0);
      for (uint64_t k : d.keys) {
        ASSERT_LT(k, static_cast<uint64_t>(kItems));
        ++count[k];
      }
      for (int i = 0; i < kItems; ++i) {
        const double want = Value(priorities[i], 1.0) / total * kBatch;
        ASSERT_LT(std::abs(count[i] - want), 2.0) << "item " << i << " round " << round;
      }
    }
  }
}

TEST_F(DevicePriorityTableTest, ImportanceWeightsMatchHost) {
  constexpr int kItems = 10000;
  constexpr int kBatch = 4096;
  constexpr double kAlpha = 0.6;
  auto t = MakeTable(kItems, kAlpha, 51);
  ASSERT_NE(t, nullptr);
  std::mt19937_64 rng(52);
  std::uniform_real_distribution<double> exponent(-4.0, 4.0);
  std::unordered_map<uint64_t, double> value;
  double total = 0;
  for (int i = 0; i < kItems; ++i) {
    const double p = std::pow(10.0, exponent(rng));
    ASSERT_OK(t->Insert(7 * i + 1, p));
    value[7 * i + 1] = Value(p, kAlpha);
    total += value[7 * i + 1];
  }
  // Batches up to 16384 get their weights in the sampling kernel; larger
  // ones through a reduction and a second kernel.
  ASSERT_OK_AND_ASSIGN(SampleBuffers big, SampleBuffers::Make(50000));
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(kBatch));
  for (int batch : {kBatch, 50000}) {
    for (double beta : {0.0, 0.4, 1.0}) {
      for (bool stratified : {false, true}) {
        SCOPED_TRACE("batch " + std::to_string(batch) + " beta " + std::to_string(beta) +
                     (stratified ? " stratified" : ""));
        Table::SampleParams params;
        params.beta = beta;
        params.stratified = stratified;
        Draws d;
        ASSERT_OK((batch == kBatch ? out : big).Draw(*t, batch, params, &d));
        double max_w = 0;
        std::vector<double> w(batch);
        for (int i = 0; i < batch; ++i) {
          const double p = value.at(d.keys[i]) / total;
          w[i] = std::pow(kItems * p, -beta);
          max_w = std::max(max_w, w[i]);
        }
        for (int i = 0; i < batch; ++i) {
          ASSERT_NEAR(d.weights[i], w[i] / max_w, 1e-5 * (w[i] / max_w)) << "draw " << i;
        }
      }
    }
  }
  // beta < 0: no weights are written.
  Draws d;
  ASSERT_OK(out.Draw(*t, kBatch, {}, &d));
  uint32_t poison;
  std::memset(&poison, 0xAB, sizeof(poison));
  for (float w : d.weights) {
    uint32_t bits;
    std::memcpy(&bits, &w, sizeof(bits));
    ASSERT_EQ(bits, poison);
  }
}

// Staged inserts, removes and priority changes, with slot reuse, against a
// host model; removed keys never come back (draws, reads, updates).
TEST_F(DevicePriorityTableTest, StagedChangesSlotReuseAndRemovedKeys) {
  constexpr int kCapacity = 256;
  auto t = MakeTable(kCapacity, 1.0, 61);
  ASSERT_NE(t, nullptr);
  std::map<uint64_t, double> model;  // key -> priority
  std::vector<uint64_t> removed;
  std::mt19937_64 rng(62);
  std::uniform_real_distribution<double> u(0.1, 5.0);
  uint64_t next_key = 1;
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(4096));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * 64));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * 64));
  int64_t want_skipped = 0;

  // Enough rounds that the device hash table fills with tombstones and is
  // rebuilt several times (each key is inserted once).
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Remove some, insert some (freed slots are reused), change some; a key
    // inserted and removed in the same round never reaches the device.
    for (int i = 0; i < 20 && !model.empty(); ++i) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      ASSERT_OK(t->Remove(it->first));
      removed.push_back(it->first);
      model.erase(it);
    }
    while (static_cast<int>(model.size()) < kCapacity - 4) {
      const uint64_t key = next_key++;
      const double p = (rng() % 5 == 0) ? 0.0 : u(rng);
      ASSERT_OK(t->Insert(key, p));
      if (rng() % 10 == 0) {
        ASSERT_OK(t->Remove(key));
        removed.push_back(key);
      } else {
        model[key] = p;
      }
    }
    for (int i = 0; i < 5; ++i) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      it->second = u(rng);
      ASSERT_OK(t->SetPriority(it->first, it->second));
    }
    ASSERT_EQ(t->size(), static_cast<int64_t>(model.size()));
    if (round % 3 == 0) ASSERT_OK(t->Flush(nullptr));

    // Device updates naming removed keys are skipped; live ones apply.
    std::vector<uint64_t> up_keys;
    std::vector<float> up_values;
    for (int i = 0; i < 8 && i < static_cast<int>(removed.size()); ++i) {
      up_keys.push_back(removed[rng() % removed.size()]);
      up_values.push_back(1.0f);
      ++want_skipped;
    }
    for (int i = 0; i < 8; ++i) {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      up_keys.push_back(it->first);
      up_values.push_back(static_cast<float>(u(rng)));
      it->second = up_values.back();
    }
    ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * up_keys.size()));
    ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * up_values.size()));
    ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(),
                                  static_cast<int64_t>(up_keys.size()), nullptr));

    if (round % 10 == 0 || round == 299) {
      std::vector<uint64_t> keys;
      std::vector<double> priorities;
      for (const auto& [k, p] : model) {
        keys.push_back(k);
        priorities.push_back(p);
      }
      ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities(keys));
      for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(held[i], priorities[i]) << keys[i];
      ASSERT_OK_AND_ASSIGN(std::vector<double> gone, t->ReadPriorities(removed));
      for (double p : gone) ASSERT_EQ(p, -1.0);
      Draws d;
      ASSERT_OK(out.DrawMany(*t, 1 << 14, {}, &d));
      ExpectDrawsMatch(d, keys, priorities, 1.0);  // removed keys are unknown here
    }
  }
  ASSERT_OK_AND_ASSIGN(int64_t skipped, t->SkippedUpdates());
  EXPECT_EQ(skipped, want_skipped);

  // A removed key may be inserted again: it is a new item.
  const uint64_t again = removed.front();
  ASSERT_OK(t->Remove(model.begin()->first));
  model.erase(model.begin());
  ASSERT_OK(t->Insert(again, 3.0));
  ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({again}));
  EXPECT_EQ(held[0], 3.0);
}

TEST_F(DevicePriorityTableTest, StreamsAndReproducibleDraws) {
  constexpr int kItems = 5000;
  auto a = MakeTable(kItems, 0.8, 71);
  auto b = MakeTable(kItems, 0.8, 71);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::mt19937_64 rng(72);
  std::uniform_real_distribution<double> u(0.1, 3.0);
  for (int i = 0; i < kItems; ++i) {
    const double p = u(rng);
    ASSERT_OK(a->Insert(i, p));
    ASSERT_OK(b->Insert(i, p));
  }
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(4096));
  Table::SampleParams params;
  params.beta = 0.5;
  Draws da1, da2, db1, db2;
  ASSERT_OK(out.Draw(*a, 4096, params, &da1, stream.handle()));
  ASSERT_OK(out.Draw(*a, 4096, params, &da2, stream.handle()));
  ASSERT_OK(out.Draw(*b, 4096, params, &db1, nullptr));
  ASSERT_OK(out.Draw(*b, 4096, params, &db2, nullptr));
  EXPECT_EQ(da1.keys, db1.keys);  // same seed, same state, same batches
  EXPECT_EQ(da2.keys, db2.keys);
  EXPECT_EQ(da1.weights, db1.weights);
  EXPECT_NE(da1.keys, da2.keys);  // the counter advances per call

  // Updates produced on the caller's stream are seen by the table's work.
  std::vector<uint64_t> keys(kItems);
  std::vector<float> zeros(kItems, 0.0f);
  for (int i = 0; i < kItems; ++i) keys[i] = i;
  zeros[17] = 1.0f;
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * kItems));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * kItems));
  ASSERT_OK(d_keys.CopyFromHost(keys.data(), sizeof(uint64_t) * kItems, 0, stream.handle()));
  ASSERT_OK(d_values.CopyFromHost(zeros.data(), sizeof(float) * kItems, 0, stream.handle()));
  ASSERT_OK(
      a->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), kItems, stream.handle()));
  Draws d;
  ASSERT_OK(out.Draw(*a, 4096, params, &d, stream.handle()));
  for (int i = 0; i < 4096; ++i) {
    ASSERT_EQ(d.keys[i], 17u);
    ASSERT_EQ(d.probabilities[i], 1.0f);
    ASSERT_EQ(d.weights[i], 1.0f);
  }
}

// ------------------------------------------------- caller-chosen slots

// Every error of InsertAt, and of Insert with caller_slots, message
// included. They are host-side checks made before any CUDA call, but a
// table cannot be made without a GPU, so this skips without one like the
// rest of the fixture.
TEST_F(DevicePriorityTableTest, CallerSlotsErrors) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t capacity = 3 + static_cast<int64_t>(rng() % 3000);
  const std::string cap = std::to_string(capacity);
  std::vector<uint64_t> keys = DistinctKeys(6, rng());  // 0 and UINT64_MAX among them
  std::shuffle(keys.begin(), keys.end(), rng);
  const uint64_t a = keys[0], b = keys[1], c = keys[2];
  const auto key = [](uint64_t k) { return "key " + std::to_string(k) + " "; };
  const std::vector<int64_t> slots = DistinctSlots(3, capacity, rng);
  const int64_t s = slots[0], s2 = slots[1];
  const auto slot = [](int64_t x) { return "slot " + std::to_string(x) + " "; };
  constexpr auto kInvalid = Status::Code::kInvalidArgument;
  constexpr auto kPrecondition = Status::Code::kFailedPrecondition;
  constexpr auto kExists = Status::Code::kAlreadyExists;

  // A table that chooses slots refuses InsertAt.
  auto chooses = MakeTable(capacity, 1.0, seed);
  ASSERT_NE(chooses, nullptr);
  ExpectError(chooses->InsertAt(a, 1.0, s), kPrecondition, {"InsertAt", "caller_slots", "Insert"});
  EXPECT_EQ(chooses->size(), 0);

  auto t = MakeTable(capacity, 1.0, seed, /*caller_slots=*/true);
  ASSERT_NE(t, nullptr);
  ExpectError(t->Insert(a, 1.0), kPrecondition, {"caller_slots", "use InsertAt"});
  for (int64_t bad : {int64_t{-1}, capacity, capacity + 1 + static_cast<int64_t>(rng() % 1000),
                      -1 - static_cast<int64_t>(rng() % 1000), std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
    ExpectError(t->InsertAt(a, 1.0, bad), kInvalid, {slot(bad), "capacity " + cap + ")"});
  }
  for (double bad :
       {-1.0, -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN()}) {
    ExpectError(t->InsertAt(a, bad, s), kInvalid, {"InsertAt: priority", "negative or not finite"});
  }
  EXPECT_EQ(t->size(), 0);

  ASSERT_OK(t->InsertAt(a, 2.0, s));
  ExpectError(t->InsertAt(a, 1.0, s), kExists, {key(a) + "is present"});   // its own slot
  ExpectError(t->InsertAt(a, 1.0, s2), kExists, {key(a) + "is present"});  // another slot
  ExpectError(t->InsertAt(b, 1.0, s), kPrecondition, {slot(s) + "holds " + key(a)});
  ExpectError(t->Insert(b, 1.0), kPrecondition, {"use InsertAt"});
  EXPECT_EQ(t->size(), 1);

  // Remove frees the slot at once: staged together, before any flush.
  ASSERT_OK(t->Remove(a));
  ASSERT_OK(t->InsertAt(b, 3.0, s));
  ExpectError(t->InsertAt(c, 1.0, s), kPrecondition, {slot(s) + "holds " + key(b)});
  ASSERT_OK(t->InsertAt(a, 4.0, s2));  // a removed key is a new item, here at another slot
  EXPECT_EQ(t->size(), 2);

  // Every slot taken: InsertAt names the slot's key (no ResourceExhausted).
  uint64_t next = 0;
  std::unordered_set<uint64_t> used(keys.begin(), keys.end());
  std::unordered_map<int64_t, uint64_t> key_at = {{s, b}, {s2, a}};
  for (int64_t x = 0; x < capacity; ++x) {
    if (key_at.count(x)) continue;
    while (used.count(next)) ++next;
    used.insert(next);
    key_at[x] = next;
    ASSERT_OK(t->InsertAt(next, 1.0, x));
  }
  EXPECT_EQ(t->size(), capacity);
  const int64_t full = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
  ExpectError(t->InsertAt(c, 1.0, full), kPrecondition,
              {slot(full) + "holds " + key(key_at[full])});
  ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({a, b, c}));
  EXPECT_EQ(held, (std::vector<double>{4.0, 3.0, -1.0}));
}

// Items at random slots with random keys and priorities: every draw returns
// the slot its key was inserted at, and draws follow priority^alpha, also
// after removes, re-inserts, SetPriority and UpdatePriorities.
TEST_F(DevicePriorityTableTest, CallerSlotsDrawsReturnTheirSlots) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Up to 3 * 2^20 slots: a three-level tree about two times in three.
  const int64_t capacity = 1000 + static_cast<int64_t>(rng() % (int64_t{3} << 20));
  const int items = static_cast<int>(std::min<int64_t>(capacity, 4000));
  SCOPED_TRACE("capacity " + std::to_string(capacity));
  auto t = MakeTable(capacity, 0.7, seed, /*caller_slots=*/true);
  ASSERT_NE(t, nullptr);
  std::vector<uint64_t> keys = DistinctKeys(items, rng());
  const std::vector<int64_t> slots = DistinctSlots(items, capacity, rng);
  std::uniform_real_distribution<double> exponent(-3.0, 3.0);
  std::vector<double> priorities(items);
  std::unordered_map<uint64_t, int64_t> slot_of;
  std::vector<int> order(items);
  for (int i = 0; i < items; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (int i : order) {
    priorities[i] = rng() % 10 == 0 ? 0.0 : std::pow(10.0, exponent(rng));
    ASSERT_OK(t->InsertAt(keys[i], priorities[i], slots[i]));
    slot_of[keys[i]] = slots[i];
  }
  if (rng() % 2 == 0) ASSERT_OK(t->Flush(nullptr));

  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(50000, /*slots=*/true));
  const auto draw_and_check = [&](const char* when) {
    SCOPED_TRACE(when);
    // Plain; stratified with weights (fused in the sampling kernel);
    // weights of a batch too large for that (a second kernel).
    Table::SampleParams stratified;
    stratified.stratified = true;
    stratified.beta = 0.4;
    Table::SampleParams big;
    big.beta = 1.0;
    Draws plain, strat, large;
    ASSERT_OK(out.DrawMany(*t, 1 << 18, {}, &plain));
    ASSERT_OK(out.Draw(*t, 4096, stratified, &strat));
    ASSERT_OK(out.Draw(*t, 50000, big, &large));
    for (const Draws* d : {&plain, &strat, &large}) ExpectDrawnSlots(*d, slot_of);
    ExpectDrawsMatch(plain, keys, priorities, 0.7);
  };
  draw_and_check("after inserts");

  // A quarter removed; half of their slots get new keys (in the same
  // staging), the rest of the new keys go to slots never used.
  std::unordered_set<uint64_t> used(keys.begin(), keys.end());
  std::unordered_set<int64_t> taken(slots.begin(), slots.end());
  std::vector<uint64_t> removed;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> freed;
  for (int j = 0; j < items / 4; ++j) {
    const int i = order[j];
    ASSERT_OK(t->Remove(keys[i]));
    removed.push_back(keys[i]);
    freed.push_back(slot_of[keys[i]]);
    slot_of.erase(keys[i]);
  }
  std::vector<uint64_t> live_keys;
  std::vector<double> live_priorities;
  std::vector<int64_t> live_slots;
  for (int j = items / 4; j < items; ++j) {
    live_keys.push_back(keys[order[j]]);
    live_priorities.push_back(priorities[order[j]]);
    live_slots.push_back(slots[order[j]]);
  }
  for (size_t j = 0; j < freed.size(); ++j) {
    int64_t at = freed[j];
    if (j % 2 == 1) {
      if (static_cast<int64_t>(taken.size()) >= capacity) continue;
      do {
        at = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
      } while (taken.count(at));
      taken.insert(at);
    }
    uint64_t k;
    do {
      k = rng();
    } while (!used.insert(k).second);
    const double p = std::pow(10.0, exponent(rng));
    ASSERT_OK(t->InsertAt(k, p, at));
    slot_of[k] = at;
    live_keys.push_back(k);
    live_priorities.push_back(p);
    live_slots.push_back(at);
  }
  // Host-side priority changes and device-side updates (removed keys skipped).
  for (int j = 0; j < 200; ++j) {
    const size_t i = rng() % live_keys.size();
    live_priorities[i] = rng() % 4 == 0 ? 0.0 : std::pow(10.0, exponent(rng));
    ASSERT_OK(t->SetPriority(live_keys[i], live_priorities[i]));
  }
  if (rng() % 2 == 0) ASSERT_OK(t->Flush(nullptr));
  std::vector<uint64_t> up_keys;
  std::vector<float> up_values;
  for (int j = 0; j < 300; ++j) {
    const size_t i = rng() % live_keys.size();
    up_keys.push_back(live_keys[i]);
    up_values.push_back(static_cast<float>(std::pow(10.0, exponent(rng))));
    live_priorities[i] = up_values.back();
  }
  for (int j = 0; j < 50; ++j) {
    up_keys.push_back(removed[rng() % removed.size()]);
    up_values.push_back(1.0f);
  }
  const int64_t n = static_cast<int64_t>(up_keys.size());
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * n));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * n));
  ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * n));
  ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * n));
  ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), n, nullptr));
  ASSERT_OK_AND_ASSIGN(int64_t skipped, t->SkippedUpdates());
  EXPECT_EQ(skipped, 50);
  EXPECT_EQ(t->size(), static_cast<int64_t>(live_keys.size()));
  ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities(live_keys));
  for (size_t i = 0; i < live_keys.size(); ++i) {
    ASSERT_EQ(held[i], live_priorities[i]) << "key " << live_keys[i];
  }
  ASSERT_OK_AND_ASSIGN(std::vector<double> gone, t->ReadPriorities(removed));
  for (double p : gone) ASSERT_EQ(p, -1.0);
  keys = live_keys;
  priorities = live_priorities;
  draw_and_check("after removes, re-inserts and updates");
}

// Remove then InsertAt into the same slot, staged together before a flush
// and across one; the same key back into its slot; two keys swapping slots.
// Then random churn against a host model, long enough that the device hash
// table is rebuilt, with every draw's slot checked.
TEST_F(DevicePriorityTableTest, CallerSlotsRemoveThenReinsertSameSlot) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t capacity = 64 + static_cast<int64_t>(rng() % 2000);
  auto t = MakeTable(capacity, 1.0, seed, /*caller_slots=*/true);
  ASSERT_NE(t, nullptr);
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(4096, /*slots=*/true));
  std::vector<uint64_t> k = DistinctKeys(8, rng());
  std::shuffle(k.begin(), k.end(), rng);
  const std::vector<int64_t> slots = DistinctSlots(2, capacity, rng);
  const int64_t s = slots[0], o = slots[1];
  // Draws (equal priorities) return exactly the items of `want`, each at its slot.
  const auto expect_items = [&](const std::unordered_map<uint64_t, int64_t>& want) {
    Draws d;
    ASSERT_OK(out.Draw(*t, 4096, {}, &d));
    ExpectDrawnSlots(d, want);
    for (const auto& [key, slot] : want) {
      EXPECT_NE(std::find(d.keys.begin(), d.keys.end(), key), d.keys.end())
          << "key " << key << " at slot " << slot << " never drawn";
    }
  };

  ASSERT_OK(t->InsertAt(k[0], 1.0, s));
  ASSERT_OK(t->InsertAt(k[1], 1.0, o));
  ASSERT_OK(t->Flush(nullptr));
  expect_items({{k[0], s}, {k[1], o}});

  {
    SCOPED_TRACE("staged: remove a flushed key, another key into its slot");
    ASSERT_OK(t->Remove(k[0]));
    ASSERT_OK(t->InsertAt(k[2], 1.0, s));
    expect_items({{k[2], s}, {k[1], o}});
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({k[0], k[2]}));
    EXPECT_EQ(held, (std::vector<double>{-1.0, 1.0}));
  }
  {
    SCOPED_TRACE("staged: the same key back into its slot");
    ASSERT_OK(t->Remove(k[2]));
    ASSERT_OK(t->InsertAt(k[2], 5.0, s));
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({k[2]}));
    EXPECT_EQ(held[0], 5.0);
    ASSERT_OK(t->SetPriority(k[2], 1.0));
    expect_items({{k[2], s}, {k[1], o}});
  }
  {
    SCOPED_TRACE("staged: a key that never reaches the device, then another");
    ASSERT_OK(t->Remove(k[2]));
    ASSERT_OK(t->InsertAt(k[3], 1.0, s));
    ASSERT_OK(t->Remove(k[3]));
    ASSERT_OK(t->InsertAt(k[0], 1.0, s));  // removed earlier: a new item
    expect_items({{k[0], s}, {k[1], o}});
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({k[2], k[3], k[0]}));
    EXPECT_EQ(held, (std::vector<double>{-1.0, -1.0, 1.0}));
  }
  {
    SCOPED_TRACE("across a flush");
    ASSERT_OK(t->Remove(k[0]));
    ASSERT_OK(t->Flush(nullptr));
    expect_items({{k[1], o}});
    ASSERT_OK(t->InsertAt(k[4], 1.0, s));
    ASSERT_OK(t->Flush(nullptr));
    expect_items({{k[4], s}, {k[1], o}});
  }
  {
    SCOPED_TRACE("staged: two keys swap slots");
    ASSERT_OK(t->Remove(k[4]));
    ASSERT_OK(t->Remove(k[1]));
    ASSERT_OK(t->InsertAt(k[1], 1.0, s));
    ASSERT_OK(t->InsertAt(k[4], 1.0, o));
    expect_items({{k[1], s}, {k[4], o}});
  }
  {
    SCOPED_TRACE("device updates: removed keys skipped, moved keys found");
    const std::vector<uint64_t> up_keys = {k[0], k[1], k[2], k[4]};
    const std::vector<float> up_values = {7.0f, 3.0f, 7.0f, 2.0f};
    ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t) * 4));
    ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float) * 4));
    ASSERT_OK(d_keys.CopyFromHost(up_keys.data(), sizeof(uint64_t) * 4));
    ASSERT_OK(d_values.CopyFromHost(up_values.data(), sizeof(float) * 4));
    ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), 4, nullptr));
    ASSERT_OK_AND_ASSIGN(int64_t skipped, t->SkippedUpdates());
    EXPECT_EQ(skipped, 2);
    ASSERT_OK_AND_ASSIGN(std::vector<double> held, t->ReadPriorities({k[0], k[1], k[2], k[4]}));
    EXPECT_EQ(held, (std::vector<double>{-1.0, 3.0, -1.0, 2.0}));
    ASSERT_OK(t->Remove(k[1]));
    ASSERT_OK(t->Remove(k[4]));
  }

  // Churn: each round removes some items and puts new or removed keys into
  // free slots, freed ones first; flushes on some rounds only.
  std::unordered_map<uint64_t, int64_t> slot_of;
  std::unordered_map<int64_t, uint64_t> key_at;
  std::vector<uint64_t> live, removed;
  uint64_t next_key = rng();
  std::uniform_real_distribution<double> u(0.1, 5.0);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<int64_t> freed;
    for (int i = 0; i < 20 && !live.empty(); ++i) {
      const size_t j = rng() % live.size();
      const uint64_t key = live[j];
      ASSERT_OK(t->Remove(key));
      freed.push_back(slot_of[key]);
      key_at.erase(slot_of[key]);
      slot_of.erase(key);
      removed.push_back(key);
      live[j] = live.back();
      live.pop_back();
    }
    while (static_cast<int64_t>(live.size()) < std::min<int64_t>(capacity - 2, 300)) {
      // A freed slot may have been taken meanwhile by a random pick.
      while (!freed.empty() && key_at.count(freed.back())) freed.pop_back();
      int64_t at;
      if (!freed.empty() && rng() % 4 != 0) {
        at = freed.back();
        freed.pop_back();
      } else {
        do {
          at = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
        } while (key_at.count(at));
      }
      if (rng() % 3 == 0) {
        // A live key into a taken slot fails; so does a held slot.
        if (!live.empty()) {
          const uint64_t present = live[rng() % live.size()];
          ASSERT_EQ(t->InsertAt(present, 1.0, at).code(), Status::Code::kAlreadyExists);
          const uint64_t holder = live[rng() % live.size()];
          ASSERT_EQ(t->InsertAt(next_key + 1000003, 1.0, slot_of[holder]).code(),
                    Status::Code::kFailedPrecondition);
        }
      }
      uint64_t key;
      if (!removed.empty() && rng() % 5 == 0) {
        const size_t j = rng() % removed.size();
        key = removed[j];  // back as a new item, maybe in its old slot
        removed[j] = removed.back();
        removed.pop_back();
      } else {
        key = next_key++;
      }
      ASSERT_OK(t->InsertAt(key, u(rng), at));
      slot_of[key] = at;
      key_at[at] = key;
      live.push_back(key);
    }
    ASSERT_EQ(t->size(), static_cast<int64_t>(live.size()));
    if (rng() % 3 == 0) ASSERT_OK(t->Flush(nullptr));
    if (round % 10 == 9) {
      Draws d;
      ASSERT_OK(out.Draw(*t, 4096, {}, &d));
      ExpectDrawnSlots(d, slot_of);
      ASSERT_OK_AND_ASSIGN(std::vector<double> gone, t->ReadPriorities(removed));
      for (double p : gone) ASSERT_EQ(p, -1.0);
    }
  }
}

// d_slots with the no-item draw: an item whose key is UINT64_MAX is drawn
// with its slot; once the device has zeroed its priority a draw finds no
// item: key UINT64_MAX again, but slot -1. And where the table chooses
// slots, a fresh table fills them in insert order.
TEST_F(DevicePriorityTableTest, DrawnSlotsAndTheNoItemDraw) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t capacity = 1 + static_cast<int64_t>(rng() % 100000);
  auto t = MakeTable(capacity, 1.0, seed, /*caller_slots=*/true);
  ASSERT_NE(t, nullptr);
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const int64_t s = static_cast<int64_t>(rng() % static_cast<uint64_t>(capacity));
  ASSERT_OK(t->InsertAt(kMax, 1.0, s));
  ASSERT_OK_AND_ASSIGN(SampleBuffers out, SampleBuffers::Make(2048, /*slots=*/true));
  Table::SampleParams params;
  params.beta = 0.5;
  Draws d;
  ASSERT_OK(out.Draw(*t, 2048, params, &d));
  for (int i = 0; i < 2048; ++i) {
    ASSERT_EQ(d.keys[i], kMax);
    ASSERT_EQ(d.slots[i], s);
    ASSERT_EQ(d.probabilities[i], 1.0f);
  }
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_keys, DeviceBuffer::Allocate(0, sizeof(uint64_t)));
  ASSERT_OK_AND_ASSIGN(DeviceBuffer d_values, DeviceBuffer::Allocate(0, sizeof(float)));
  const float zero = 0.0f;
  ASSERT_OK(d_keys.CopyFromHost(&kMax, sizeof(uint64_t)));
  ASSERT_OK(d_values.CopyFromHost(&zero, sizeof(float)));
  ASSERT_OK(t->UpdatePriorities(d_keys.as<uint64_t>(), d_values.as<float>(), 1, nullptr));
  Draws none;
  ASSERT_OK(out.Draw(*t, 2048, params, &none));
  for (int i = 0; i < 2048; ++i) {
    ASSERT_EQ(none.keys[i], kMax);
    ASSERT_EQ(none.slots[i], -1);
    ASSERT_EQ(none.probabilities[i], 0.0f);
    ASSERT_EQ(none.weights[i], 0.0f);
  }

  const int items = static_cast<int>(std::min<int64_t>(capacity, 3000));
  auto chooses = MakeTable(capacity, 1.0, seed);
  ASSERT_NE(chooses, nullptr);
  const std::vector<uint64_t> keys = DistinctKeys(items, rng());
  std::unordered_map<uint64_t, int64_t> slot_of;
  for (int i = 0; i < items; ++i) {
    ASSERT_OK(chooses->Insert(keys[i], 0.5 + static_cast<double>(rng() % 100)));
    slot_of[keys[i]] = i;
  }
  Draws c;
  ASSERT_OK(out.Draw(*chooses, 2048, {}, &c));
  ExpectDrawnSlots(c, slot_of);
}

// ---------------------------------------------------- host code, no GPU

TEST(DevicePriorityTableHostTest, KeySlotMapMatchesStdMap) {
  KeySlotMap map;
  std::unordered_map<uint64_t, int32_t> model;
  std::mt19937_64 rng(81);
  std::vector<uint64_t> keys;
  for (int step = 0; step < 200000; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 || keys.empty()) {
      // Small key space so that probe runs collide and wrap.
      const uint64_t key = rng() % 5000;
      const int32_t slot = static_cast<int32_t>(rng() % 1000000);
      if (step % 2 == 0) {
        bool inserted;
        KeySlotMap::Entry* e = map.TryInsert(key, slot, 0, &inserted);
        ASSERT_EQ(inserted, model.count(key) == 0);
        ASSERT_EQ(e->key, key);
        if (!inserted) continue;
      } else {
        if (model.count(key)) continue;
        map.Insert(key, slot, 0);
      }
      model[key] = slot;
      keys.push_back(key);
    } else if (op == 1) {
      const size_t i = rng() % keys.size();
      KeySlotMap::Entry* e = map.Find(keys[i]);
      ASSERT_NE(e, nullptr);
      map.Erase(e);
      model.erase(keys[i]);
      keys[i] = keys.back();
      keys.pop_back();
    } else {
      const uint64_t key = rng() % 5000;
      KeySlotMap::Entry* e = map.Find(key);
      auto it = model.find(key);
      ASSERT_EQ(e != nullptr, it != model.end()) << key;
      if (e != nullptr) {
        ASSERT_EQ(e->slot, it->second);
      }
    }
    ASSERT_EQ(map.size(), model.size());
  }
  for (const auto& [k, s] : model) {
    KeySlotMap::Entry* e = map.Find(k);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->slot, s);
  }
  EXPECT_LE(2 * map.size(), map.bucket_count());
}

TEST(DevicePriorityTableHostTest, CreateWithoutGpuSaysWhy) {
  std::string why;
  if (CudaDeviceCount(&why) > 0) GTEST_SKIP() << "a GPU is present";
  for (bool caller_slots : {false, true}) {
    Table::Options options;
    options.capacity = 16;
    options.caller_slots = caller_slots;
    auto t = Table::Create(options);
    EXPECT_EQ(t.status().code(), Status::Code::kNotSupported);
    EXPECT_FALSE(t.status().message().empty());
  }
}

TEST(DevicePriorityTableHostTest, CallerSlotsAndDrawnSlotsAreOffByDefault) {
  EXPECT_FALSE(Table::Options{}.caller_slots);
  EXPECT_EQ(Table::SampleParams{}.d_slots, nullptr);
}

}  // namespace
}  // namespace replaydb::kernels
