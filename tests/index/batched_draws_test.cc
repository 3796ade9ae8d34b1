// The pieces a batch of draws uses to overlap its cache misses: IdIndex
// (trajectory id -> trajectory, flat), SumTree::FindMany and the selectors'
// SelectMany. Each must give exactly what its one-at-a-time counterpart
// gives (or, for the uniform selector's batch, draws of the same
// distribution over the same items).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <vector>

#include "index/id_index.h"
#include "index/selectors/prioritized_selector.h"
#include "index/selectors/selector.h"
#include "index/selectors/sum_tree.h"
#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

using testing_util::TestSeed;

// Random inserts and erases (ids dense and sparse, so that runs of
// collisions form and erases shift them back) agree with a std::map.
TEST(IdIndexTest, InsertsFindsAndErasesAgreeWithAMap) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  util::Random rng(seed);
  IdIndex<int> index;
  std::map<uint64_t, std::shared_ptr<int>> model;
  for (int op = 0; op < 20000; ++op) {
    const uint64_t id = rng.Uniform(2) == 0 ? 1 + rng.Uniform(512) : rng.Next();
    if (model.count(id) == 0 && rng.Uniform(3) != 0) {
      auto v = std::make_shared<int>(op);
      index.Insert(id, v);
      model[id] = v;
    } else if (model.count(id) != 0) {
      index.Erase(id);
      model.erase(id);
    }
    if (op % 97 == 0) {
      ASSERT_EQ(index.size(), model.size());
      for (const auto& [key, value] : model) {
        const std::shared_ptr<int>* got = index.Find(key);
        ASSERT_NE(got, nullptr) << "id " << key;
        ASSERT_EQ(got->get(), value.get()) << "id " << key;
      }
      for (int k = 0; k < 32; ++k) {
        const uint64_t absent = 1 + rng.Uniform(1024);
        if (model.count(absent) == 0) {
          ASSERT_EQ(index.Find(absent), nullptr) << "id " << absent;
        }
      }
    }
  }
  for (const auto& [key, value] : model) index.Erase(key);
  EXPECT_EQ(index.size(), 0u);
  EXPECT_EQ(index.Find(model.empty() ? 1 : model.begin()->first), nullptr);
}

// FindMany is Find for every target: random trees with zero leaves, and
// targets inside, at, past and before the total, and NaN.
TEST(SumTreeTest, FindManyFindsWhatFindFinds) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  util::Random rng(seed);
  for (int round = 0; round < 40; ++round) {
    const size_t n = 1 + rng.Uniform(5000);
    SumTree tree(n);
    for (size_t s = 0; s < n; ++s) {
      tree.Set(s, rng.Uniform(4) == 0 ? 0.0 : rng.NextDouble() * std::exp2(rng.Uniform(40)));
    }
    if (!(tree.Total() > 0)) tree.Set(n - 1, 1.0);
    std::vector<double> targets;
    for (int i = 0; i < 300; ++i) targets.push_back(rng.NextDouble() * tree.Total());
    for (double t : {-1.0, 0.0, tree.Total(), 2 * tree.Total(),
                     std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
      targets.push_back(t);
    }
    std::vector<size_t> got(targets.size());
    tree.FindMany(targets, got);
    for (size_t i = 0; i < targets.size(); ++i) {
      ASSERT_EQ(got[i], tree.Find(targets[i])) << "target " << targets[i] << " of total "
                                               << tree.Total();
    }
  }
}

// A prioritized selector's SelectMany draws what as many Selects draw from
// the same random numbers, stratified or not, and with every priority 0.
TEST(PrioritizedSelectorTest, SelectManyDrawsWhatSelectDraws) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  util::Random rng(seed);
  for (const bool all_zero : {false, true}) {
    PrioritizedSelector selector(0.6);
    for (uint64_t i = 0; i < 3000; ++i) {
      const double p = all_zero || rng.Uniform(5) == 0 ? 0.0 : rng.NextDouble() * 100;
      selector.Insert({MakeItemKey(1 + i / 64, static_cast<int64_t>(i % 64)), i, p});
    }
    for (const bool stratified : {false, true}) {
      const int64_t n = 1 + static_cast<int64_t>(rng.Uniform(300));
      const uint64_t draw_seed = rng.Next();
      util::Random one(draw_seed);
      util::Random many(draw_seed);
      std::vector<Selection> got(static_cast<size_t>(n));
      selector.SelectMany(many, stratified, got);
      for (int64_t b = 0; b < n; ++b) {
        const Selection want = selector.Select(one, stratified ? Stratum{b, n} : Stratum{});
        ASSERT_EQ(got[b].key, want.key) << "draw " << b << " of " << n;
        ASSERT_EQ(got[b].probability, want.probability) << "draw " << b;
      }
    }
  }
}

}  // namespace
}  // namespace replaydb::index
