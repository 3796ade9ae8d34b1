#include "index/selectors/min_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tests/test_util.h"

namespace replaydb::index {
namespace {

TEST(MinTreeTest, StartsEmpty) {
  MinTree tree;
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.Min(), MinTree::kEmpty);
  MinTree sized(5);
  EXPECT_EQ(sized.size(), 5u);
  EXPECT_EQ(sized.capacity(), 8u);
  EXPECT_EQ(sized.Min(), MinTree::kEmpty);
  EXPECT_EQ(sized.Get(4), MinTree::kEmpty);
}

// Random sets, clears and growth past the capacity against a plain array.
TEST(MinTreeTest, MinMatchesAReferenceThroughSetsAndGrowth) {
  std::mt19937_64 rng(testing_util::TestSeed());
  MinTree tree;
  std::vector<double> reference;
  for (int i = 0; i < 20000; ++i) {
    const size_t slot = static_cast<size_t>(rng() % (reference.size() + 3));
    double value = MinTree::kEmpty;
    if (rng() % 4 != 0) {
      value = std::ldexp(static_cast<double>(rng() % 1000 + 1), static_cast<int>(rng() % 200) - 100);
    }
    tree.Set(slot, value);
    if (slot >= reference.size()) reference.resize(slot + 1, MinTree::kEmpty);
    reference[slot] = value;
    ASSERT_EQ(tree.size(), reference.size());
    ASSERT_GE(tree.capacity(), tree.size());
    ASSERT_EQ(tree.Min(), *std::min_element(reference.begin(), reference.end())) << "step " << i;
    const size_t probe = static_cast<size_t>(rng() % reference.size());
    ASSERT_EQ(tree.Get(probe), reference[probe]);
  }
}

}  // namespace
}  // namespace replaydb::index
