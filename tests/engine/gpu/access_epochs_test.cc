#include "engine/gpu/access_epochs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace replaydb::engine {
namespace {

// What the fake GPU knows: which accesses are done, and how often the host
// asked.
struct FakeGpu {
  std::vector<bool> done;  // by access index (epoch - 1)
  int64_t queries = 0;
  int64_t syncs = 0;
};

class FakeEvent {
 public:
  FakeEvent() = default;
  FakeEvent(FakeGpu* gpu, size_t access) : gpu_(gpu), access_(access) {}
  Result<bool> Done() const {
    ++gpu_->queries;
    return static_cast<bool>(gpu_->done[access_]);
  }
  Status Synchronize() const {
    ++gpu_->syncs;
    gpu_->done[access_] = true;
    return Status::OK();
  }

 private:
  FakeGpu* gpu_ = nullptr;
  size_t access_ = 0;
};

// The true answer: the longest prefix of done accesses.
uint64_t DonePrefix(const FakeGpu& gpu) {
  uint64_t n = 0;
  while (n < gpu.done.size() && gpu.done[n]) ++n;
  return n;
}

TEST(AccessEpochsTest, CompletedIsExactlyTheDonePrefixAcrossStreams) {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    FakeGpu gpu;
    AccessEpochs<FakeEvent> epochs;
    const int streams = 1 + static_cast<int>(rng() % 4);
    // Each stream's accesses, in launch order; each stream finishes a prefix.
    std::vector<std::vector<size_t>> by_stream(static_cast<size_t>(streams));
    std::vector<size_t> finished(static_cast<size_t>(streams), 0);
    for (int step = 0; step < 400; ++step) {
      if (rng() % 3 != 0) {
        // Launch on a stream; runs of one stream are common.
        const size_t s = rng() % 5 == 0 ? rng() % by_stream.size() : (step / 37) % by_stream.size();
        const size_t access = gpu.done.size();
        gpu.done.push_back(false);
        by_stream[s].push_back(access);
        ASSERT_EQ(epochs.Push(/*stream_id=*/1000 + s, FakeEvent(&gpu, access)), access + 1);
      } else {
        // The GPU finishes some of one stream's work, in its order.
        const size_t s = rng() % by_stream.size();
        const size_t n = std::min(by_stream[s].size(), finished[s] + rng() % 6);
        for (; finished[s] < n; ++finished[s]) gpu.done[by_stream[s][finished[s]]] = true;
      }
      if (rng() % 4 == 0) {
        ASSERT_EQ(epochs.Completed(), DonePrefix(gpu)) << "round " << round << " step " << step;
        ASSERT_EQ(epochs.completed(), DonePrefix(gpu));
      }
      ASSERT_LE(epochs.completed(), DonePrefix(gpu));
    }
    ASSERT_EQ(epochs.launched(), gpu.done.size());
    // WaitFor blocks (here: finishes) exactly as far as asked.
    const uint64_t target = epochs.launched() / 2 + 1;
    ASSERT_TRUE(epochs.WaitFor(target).ok());
    EXPECT_GE(epochs.completed(), target);
    EXPECT_EQ(epochs.Completed(), DonePrefix(gpu));
    epochs.WaitAll();
    EXPECT_EQ(epochs.completed(), epochs.launched());
    EXPECT_EQ(epochs.in_flight(), 0u);
  }
}

TEST(AccessEpochsTest, OneStreamCostsOneQueryWhenAllAreDoneAndLogarithmicallyMany) {
  FakeGpu gpu;
  AccessEpochs<FakeEvent> epochs;
  for (size_t i = 0; i < 1000; ++i) {
    gpu.done.push_back(false);
    epochs.Push(7, FakeEvent(&gpu, i));
  }
  // None done: the last, then a bisection of the rest.
  EXPECT_EQ(epochs.Completed(), 0u);
  EXPECT_LE(gpu.queries, 1 + 10);
  // The first 613 done.
  for (size_t i = 0; i < 613; ++i) gpu.done[i] = true;
  gpu.queries = 0;
  EXPECT_EQ(epochs.Completed(), 613u);
  EXPECT_LE(gpu.queries, 1 + 10);
  EXPECT_EQ(epochs.in_flight(), 1000u - 613u);
  // All done: one query retires every one of them.
  for (size_t i = 0; i < 1000; ++i) gpu.done[i] = true;
  gpu.queries = 0;
  EXPECT_EQ(epochs.Completed(), 1000u);
  EXPECT_EQ(gpu.queries, 1);
  EXPECT_EQ(epochs.in_flight(), 0u);
  // Retired events come back as spares.
  ASSERT_TRUE(epochs.has_spare());
  int spares = 0;
  while (epochs.has_spare()) {
    (void)epochs.TakeSpare();
    ++spares;
  }
  EXPECT_EQ(spares, 1000);
}

TEST(AccessEpochsTest, AnUnfinishedStreamHoldsBackLaterEpochsOfOthers) {
  FakeGpu gpu;
  AccessEpochs<FakeEvent> epochs;
  gpu.done = {false, true, true};
  epochs.Push(1, FakeEvent(&gpu, 0));  // stream 1: slow
  epochs.Push(2, FakeEvent(&gpu, 1));  // stream 2: done
  epochs.Push(2, FakeEvent(&gpu, 2));
  EXPECT_EQ(epochs.Completed(), 0u);
  gpu.done[0] = true;
  EXPECT_EQ(epochs.Completed(), 3u);
}

}  // namespace
}  // namespace replaydb::engine
