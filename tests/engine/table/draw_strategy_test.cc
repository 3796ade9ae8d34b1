#include "engine/table/draw_strategy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "index/trajectory_store.h"
#include "replaydb/device.h"
#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;

TableSpec Spec(SelectorKind selector, int priority_device = -1) {
  TableSpec spec;
  spec.name = "draws";
  spec.columns = {{"x", DType::kF32, {2}}};
  spec.capacity_steps = 1024;
  spec.block_steps = 16;
  spec.selector = selector;
  spec.priority_device = priority_device;
  return spec;
}

class DrawStrategyTest : public ::testing::Test {
 protected:
  std::mt19937_64 rng_{testing_util::TestSeed()};
  util::Random random_{rng_()};
  std::string why_none_;  // before gpus_, which writes it
  int gpus_ = CudaDeviceCount(&why_none_);
};

TEST_F(DrawStrategyTest, HostSelectorsDrawOnTheHostOnly) {
  for (SelectorKind kind : {SelectorKind::kUniform, SelectorKind::kFifo, SelectorKind::kLifo,
                            SelectorKind::kPrioritized, SelectorKind::kMinHeap,
                            SelectorKind::kMaxHeap}) {
    SCOPED_TRACE(std::string(SelectorKindName(kind)));
    const TableSpec spec = Spec(kind);
    ASSERT_OK(spec.Validate());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DrawStrategy> draws,
                         DrawStrategy::Create(spec, gpus_, why_none_));
    EXPECT_FALSE(draws->draws_on_device());
    EXPECT_EQ(draws->device_priorities(), nullptr);
    EXPECT_OK(draws->status());
    const Status none = draws->DevicePrioritiesStatus();
    EXPECT_EQ(none.code(), Status::Code::kFailedPrecondition);
    EXPECT_EQ(none.message(), "table 'draws' keeps its priorities on the host (priority_device = -1)");
    // Nothing for the device tier to keep.
    DeviceTier::Options options;
    draws->ConfigureTier(&options);
    EXPECT_FALSE(options.item_steps);
    EXPECT_FALSE(options.uniform_draws);

    // Items of random priorities, one per slot of a few trajectories'
    // blocks: every draw is one of them, with its probability.
    index::Selector& selector = draws->selector();
    std::map<ItemKey, double> priorities;
    const int n = 1 + static_cast<int>(rng_() % 40);
    for (int i = 0; i < n; ++i) {
      const uint64_t trajectory = 1 + static_cast<uint64_t>(i) / 16;
      const int64_t start = i % 16;
      const ItemKey key = MakeItemKey(trajectory, start);
      const double p = 0.5 + static_cast<double>(rng_() % 100);
      priorities[key] = p;
      selector.Insert({key, static_cast<uint64_t>(i + 1), p, static_cast<int64_t>(i)});
    }
    index::TrajectoryStore store({spec.block_steps});
    ASSERT_OK(draws->PrepareHostDraws(8, SampleOptions{}, store, nullptr));
    double total = 0;
    for (const auto& [key, p] : priorities) total += p;
    for (int64_t b = 0; b < 8; ++b) {
      const index::Selection sel = draws->HostDraw(b, random_, {});
      ASSERT_EQ(priorities.count(sel.key), 1u) << "drew key " << sel.key;
      if (kind == SelectorKind::kUniform) {
        EXPECT_DOUBLE_EQ(sel.probability, 1.0 / n);
      }
      if (kind == SelectorKind::kPrioritized) {
        EXPECT_NEAR(sel.probability, priorities[sel.key] / total, 1e-12);
      }
      if (kind == SelectorKind::kFifo) {
        EXPECT_EQ(sel.key, MakeItemKey(1, 0));
      }
    }
  }
}

TEST_F(DrawStrategyTest, DeviceDrawsNeedTheirGpu) {
  if (gpus_ > 0) GTEST_SKIP() << "this machine has a GPU; the no-GPU errors cannot show";
  const Status uniform = DrawStrategy::Create(Spec(SelectorKind::kUniform, 0), gpus_, why_none_)
                             .status();
  EXPECT_EQ(uniform.code(), Status::Code::kNotSupported);
  EXPECT_THAT(uniform.message(),
              HasSubstr("table 'draws': uniform draws on CUDA device 0 need that GPU, but no GPU "
                        "can be used ("));
  const Status prioritized =
      DrawStrategy::Create(Spec(SelectorKind::kPrioritized, 0), gpus_, why_none_).status();
  EXPECT_FALSE(prioritized.ok());
  EXPECT_THAT(prioritized.message(), HasSubstr("table 'draws': priorities on CUDA device 0"));
}

using DrawStrategyGpuTest = DrawStrategyTest;

TEST_F(DrawStrategyGpuTest, DeviceDrawsOnTheGpu) {
  if (gpus_ == 0) GTEST_SKIP() << "no GPU: " << why_none_;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DrawStrategy> uniform,
                       DrawStrategy::Create(Spec(SelectorKind::kUniform, 0), gpus_, why_none_));
  EXPECT_TRUE(uniform->draws_on_device());
  EXPECT_EQ(uniform->device_priorities(), nullptr);
  EXPECT_OK(uniform->status());
  EXPECT_EQ(uniform->DevicePrioritiesStatus().message(),
            "table 'draws': the uniform selector has no priorities to update");
  DeviceTier::Options options;
  uniform->ConfigureTier(&options);
  EXPECT_TRUE(options.item_steps);
  EXPECT_TRUE(options.uniform_draws);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DrawStrategy> prioritized,
                       DrawStrategy::Create(Spec(SelectorKind::kPrioritized, 0), gpus_, why_none_));
  EXPECT_TRUE(prioritized->draws_on_device());
  EXPECT_NE(prioritized->device_priorities(), nullptr);
  EXPECT_OK(prioritized->DevicePrioritiesStatus());
  options = {};
  prioritized->ConfigureTier(&options);
  EXPECT_TRUE(options.item_steps);
  EXPECT_FALSE(options.uniform_draws);
  // Nothing to draw: the device table says so.
  index::TrajectoryStore store({16});
  const Status empty = prioritized->PrepareHostDraws(4, SampleOptions{}, store, nullptr);
  EXPECT_FALSE(empty.ok());
  EXPECT_THAT(empty.message(), HasSubstr("no item of priority > 0"));
  // An item the device draws but the store does not hold (as when every
  // priority was set to 0 from the device, and the device draws a sentinel)
  // is no item, named.
  const ItemKey key = MakeItemKey(7, 3);
  prioritized->selector().Insert({key, 1, 1.0, 3});
  const Status unknown = prioritized->PrepareHostDraws(4, SampleOptions{}, store, nullptr);
  EXPECT_EQ(unknown.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(unknown.message(), "table 'draws': the device drew no item (key " +
                                   std::to_string(key) +
                                   "); every priority on the device may be 0");
  // Once the store holds it, the draws are that item, with probability 1.
  std::shared_ptr<index::Trajectory> t = store.Make(7);
  t->blocks.push_back(0);
  t->length = 4;
  t->items_created = 4;
  store.CoverBlocks(1);
  store.Insert(t);
  ASSERT_OK(prioritized->PrepareHostDraws(4, SampleOptions{}, store, nullptr));
  for (int64_t b = 0; b < 4; ++b) {
    const index::Selection sel = prioritized->HostDraw(b, random_, {});
    EXPECT_EQ(sel.key, key);
    EXPECT_NEAR(sel.probability, 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace replaydb::engine
