// Many writers and samplers at once (run under ThreadSanitizer too): nothing
// lost, no torn step, windows never cross trajectories, with and without
// eviction racing the samplers.
#include <atomic>
#include <thread>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;

constexpr int kPayload = 256;

uint8_t PayloadByte(int64_t writer, int64_t traj, int64_t step, int i) {
  uint64_t x = (writer * 1000003 + traj) * 1000033 + step;
  x = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ull + i;
  return static_cast<uint8_t>(x ^ (x >> 32));
}

struct Config {
  int64_t capacity_steps;
  int64_t sequence_length;
  Padding padding;
  bool vector_writers;
};

class ConcurrencyTest : public ::testing::TestWithParam<Config> {};

TEST_P(ConcurrencyTest, WritersAndSamplersAgree) {
  const Config cfg = GetParam();
  TempDir dir;
  auto db = testing_util::OpenDB(dir.path());
  TableSpec spec;
  spec.name = "conc";
  spec.columns = {{"tag", DType::kI64, {3}}, {"payload", DType::kU8, {kPayload}}};
  spec.capacity_steps = cfg.capacity_steps;
  spec.block_steps = 8;
  spec.sequence_length = cfg.sequence_length;
  spec.padding = cfg.padding;
  auto created = db->CreateTable(spec);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<Table> table = *created;

  const int kWriters = 4;
  const int kTrajectories = 30;
  const uint64_t seed = testing_util::TestSeed();
  std::atomic<int64_t> written_steps{0};
  std::atomic<int64_t> expected_items{0};
  std::atomic<bool> done{false};
  std::atomic<int64_t> checked{0};

  auto writer_fn = [&](int w) {
    std::mt19937_64 rng(seed + w);
    std::vector<int64_t> tag(3);
    std::vector<uint8_t> payload(kPayload);
    const std::vector<ConstTensor> step = {
        {DType::kI64, {3}, tag.data(), 3 * sizeof(int64_t)},
        {DType::kU8, {kPayload}, payload.data(), kPayload}};
    auto writer = table->NewWriter();
    ASSERT_TRUE(writer.ok());
    for (int t = 0; t < kTrajectories; ++t) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % 60);
      for (int64_t s = 0; s < len; ++s) {
        tag = {w, t, s};
        for (int i = 0; i < kPayload; ++i) payload[i] = PayloadByte(w, t, s, i);
        ASSERT_OK((*writer)->Append(step));
        ++written_steps;
      }
      ASSERT_OK((*writer)->End(EndReason::kTerminal));
      expected_items += cfg.padding == Padding::kTail
                            ? len
                            : std::max<int64_t>(0, len - cfg.sequence_length + 1);
    }
  };

  auto sampler_fn = [&] {
    SampleBatch batch;
    const int64_t L = cfg.sequence_length;
    while (!done.load()) {
      Status s = table->Sample(16, {.timeout = std::chrono::milliseconds(5)}, &batch);
      if (s.code() == Status::Code::kDeadlineExceeded) continue;
      ASSERT_OK(s);
      const int64_t* tags = batch.columns[0].data_as<int64_t>();
      const uint8_t* payloads = batch.columns[1].data_as<uint8_t>();
      for (int64_t b = 0; b < 16; ++b) {
        const int64_t* first = tags + b * L * 3;
        ASSERT_EQ(first[2], ItemKeyStart(batch.keys[b]));
        for (int64_t l = 0; l < L; ++l) {
          const int64_t* tg = tags + (b * L + l) * 3;
          if (!batch.mask[b * L + l]) {
            EXPECT_EQ(tg[0] | tg[1] | tg[2], 0);
            continue;
          }
          ASSERT_EQ(tg[0], first[0]) << "window crosses writers";
          ASSERT_EQ(tg[1], first[1]) << "window crosses trajectories";
          ASSERT_EQ(tg[2], first[2] + l) << "steps out of order";
          const uint8_t* p = payloads + (b * L + l) * kPayload;
          for (int i = 0; i < kPayload; ++i) {
            ASSERT_EQ(p[i], PayloadByte(tg[0], tg[1], tg[2], i)) << "torn step";
          }
        }
      }
      checked += 16;
    }
  };

  auto vector_writer_fn = [&] {
    // Two environments whose trajectories end at different times.
    auto vw = table->NewVectorWriter(2);
    ASSERT_TRUE(vw.ok());
    std::vector<int64_t> tags(6);
    std::vector<uint8_t> payload(2 * kPayload);
    const std::vector<ConstTensor> step = {
        {DType::kI64, {2, 3}, tags.data(), 6 * sizeof(int64_t)},
        {DType::kU8, {2, kPayload}, payload.data(), 2 * kPayload}};
    int64_t traj[2] = {0, 0}, pos[2] = {0, 0};
    for (int n = 0; n < 400; ++n) {
      for (int env = 0; env < 2; ++env) {
        tags[env * 3] = 100 + env;
        tags[env * 3 + 1] = traj[env];
        tags[env * 3 + 2] = pos[env];
        for (int i = 0; i < kPayload; ++i) {
          payload[env * kPayload + i] = PayloadByte(100 + env, traj[env], pos[env], i);
        }
      }
      ASSERT_OK((*vw)->Append(step));
      written_steps += 2;
      for (int env = 0; env < 2; ++env) {
        ++pos[env];
        if (pos[env] == 17 + env * 13) {
          ASSERT_OK((*vw)->End(env, EndReason::kTruncated));
          expected_items += cfg.padding == Padding::kTail
                                ? pos[env]
                                : std::max<int64_t>(0, pos[env] - cfg.sequence_length + 1);
          ++traj[env];
          pos[env] = 0;
        }
      }
    }
    for (int env = 0; env < 2; ++env) {
      if (pos[env] == 0) continue;
      ASSERT_OK((*vw)->End(env, EndReason::kTruncated));
      expected_items += cfg.padding == Padding::kTail
                            ? pos[env]
                            : std::max<int64_t>(0, pos[env] - cfg.sequence_length + 1);
    }
  };

  std::vector<std::thread> samplers;
  for (int i = 0; i < 2; ++i) samplers.emplace_back(sampler_fn);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) writers.emplace_back(writer_fn, w);
  if (cfg.vector_writers) writers.emplace_back(vector_writer_fn);
  for (auto& t : writers) t.join();
  done = true;
  for (auto& t : samplers) t.join();

  const TableInfo info = table->Info();
  EXPECT_EQ(info.steps_inserted, written_steps.load());
  EXPECT_EQ(info.items_inserted, expected_items.load());
  EXPECT_EQ(info.num_open_trajectories, 0);
  EXPECT_EQ(info.num_items + info.evicted_items + info.items_removed, info.items_inserted);
  if (info.evicted_trajectories == 0) {
    EXPECT_EQ(info.num_steps, written_steps.load()) << "steps lost without eviction";
  } else {
    EXPECT_LE(info.num_steps, cfg.capacity_steps);
  }
  EXPECT_GT(checked.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ConcurrencyTest,
    ::testing::Values(Config{1 << 16, 1, Padding::kNone, true},
                      Config{1 << 16, 5, Padding::kTail, true},
                      Config{512, 4, Padding::kNone, false},  // constant eviction
                      Config{512, 3, Padding::kTail, true}));

}  // namespace
}  // namespace replaydb
