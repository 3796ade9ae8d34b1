#include "index/selectors/sum_tree.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

// The leaves as a plain vector, summed and searched the slow way.
class Reference {
 public:
  void Set(size_t slot, double value) {
    if (slot >= values_.size()) values_.resize(slot + 1, 0.0);
    values_[slot] = value;
  }
  double Get(size_t slot) const { return slot < values_.size() ? values_[slot] : 0.0; }
  size_t size() const { return values_.size(); }
  long double Total() const {
    long double sum = 0;
    for (double v : values_) sum += v;
    return sum;
  }
  // Sum of the slots before `slot`.
  long double Before(size_t slot) const {
    long double sum = 0;
    for (size_t i = 0; i < slot; ++i) sum += values_[i];
    return sum;
  }
  // The first positive slot whose cumulative interval ends past `target`,
  // or the last positive slot. Exact when every prefix sum is exact.
  size_t Find(long double target) const {
    long double sum = 0;
    size_t last_positive = values_.size();
    for (size_t i = 0; i < values_.size(); ++i) {
      if (values_[i] == 0) continue;
      sum += values_[i];
      last_positive = i;
      if (target < sum) return i;
    }
    return last_positive;
  }

 private:
  std::vector<double> values_;
};

double RelativeError(double got, long double want) {
  if (want == 0) return got == 0 ? 0 : 1;
  return static_cast<double>(std::fabs((static_cast<long double>(got) - want) / want));
}

TEST(SumTreeTest, StartsEmptyWithZeroTotal) {
  SumTree tree;
  EXPECT_EQ(tree.size(), 0u);
  EXPECT_EQ(tree.capacity(), 1u);
  EXPECT_EQ(tree.Total(), 0.0);
  SumTree sized(5);
  EXPECT_EQ(sized.size(), 5u);
  EXPECT_EQ(sized.capacity(), 8u);
  EXPECT_EQ(sized.Total(), 0.0);
  for (size_t slot = 0; slot < 5; ++slot) EXPECT_EQ(sized.Get(slot), 0.0);
}

TEST(SumTreeTest, SingleSlot) {
  SumTree tree(1);
  tree.Set(0, 2.5);
  EXPECT_EQ(tree.Total(), 2.5);
  for (double target : {-1.0, 0.0, 1.0, 2.5, 1e300}) EXPECT_EQ(tree.Find(target), 0u);
}

TEST(SumTreeTest, FindFollowsCumulativeIntervals) {
  SumTree tree;
  // Slots: 0:1  1:0  2:2  3:0  4:3  -> intervals [0,1) [1,3) [3,6).
  tree.Set(0, 1);
  tree.Set(2, 2);
  tree.Set(4, 3);
  EXPECT_EQ(tree.size(), 5u);
  EXPECT_EQ(tree.Total(), 6.0);
  EXPECT_EQ(tree.Find(0), 0u);
  EXPECT_EQ(tree.Find(0.999), 0u);
  EXPECT_EQ(tree.Find(1), 2u);
  EXPECT_EQ(tree.Find(2.999), 2u);
  EXPECT_EQ(tree.Find(3), 4u);
  EXPECT_EQ(tree.Find(std::nextafter(6.0, 0.0)), 4u);
  // Out of range targets clamp to the first and last positive slots.
  EXPECT_EQ(tree.Find(-5), 0u);
  EXPECT_EQ(tree.Find(6), 4u);
  EXPECT_EQ(tree.Find(std::numeric_limits<double>::infinity()), 4u);
  EXPECT_EQ(tree.Find(std::numeric_limits<double>::quiet_NaN()), 4u);
  // Zeros at both ends.
  tree.Set(0, 0);
  tree.Set(4, 0);
  EXPECT_EQ(tree.Total(), 2.0);
  EXPECT_EQ(tree.Find(-1), 2u);
  EXPECT_EQ(tree.Find(0), 2u);
  EXPECT_EQ(tree.Find(2), 2u);
  EXPECT_EQ(tree.Find(100), 2u);
}

// A total that absorbs a tiny right subtree: Find(Total()) must still land
// on a positive leaf, the last one.
TEST(SumTreeTest, TargetAtTotalGoesToLastPositiveLeafEvenIfAbsorbed) {
  SumTree tree(4);
  tree.Set(0, 1.0);
  tree.Set(1, 1e-17);  // 1 + 1e-17 rounds to 1
  EXPECT_EQ(tree.Total(), 1.0);
  EXPECT_EQ(tree.Find(1.0), 1u);
  EXPECT_EQ(tree.Find(std::nextafter(1.0, 0.0)), 0u);
  tree.Set(3, 1e-30);
  EXPECT_EQ(tree.Find(1.0), 3u);
  EXPECT_GT(tree.Get(tree.Find(1.0)), 0.0);
  // Two absorbed leaves: 1 - 1 = 0 would land on the first of them; the
  // clamp goes to the last.
  SumTree two(4);
  two.Set(0, 1.0);
  two.Set(2, 1e-17);
  two.Set(3, 1e-17);
  EXPECT_EQ(two.Total(), 1.0);
  EXPECT_EQ(two.Find(1.0), 3u);
  EXPECT_EQ(two.Find(std::nextafter(1.0, 0.0)), 0u);
}

// A target below Total() from which subtracting a left sum rounds up to
// (or past) the right sibling's sum: the descent clamps to that subtree's
// last positive leaf instead of wandering into it. (Found by search.)
TEST(SumTreeTest, RoundingPastASubtreeClampsToItsLastPositiveLeaf) {
  SumTree tree(8);
  tree.Set(3, 0x1.000000000000fp+27);
  tree.Set(5, 0x1.0000000000004p+28);
  tree.Set(6, 0x1.000000000000ap-13);
  tree.Set(7, 0x1.0000000000006p-30);
  const double target = 0x1.800000000080bp+28;
  ASSERT_LT(target, tree.Total());
  EXPECT_EQ(tree.Find(target), 7u);
}

// Recomputing nodes from their children (never by a delta) leaves no
// residue: after values come and go, zeroing everything gives exactly 0.
TEST(SumTreeTest, NoDriftAfterManyUpdates) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  SumTree tree(1000);
  for (int i = 0; i < 200000; ++i) {
    tree.Set(rng.Uniform(1000),
             std::ldexp(rng.NextDouble(), static_cast<int>(rng.Uniform(80)) - 40));
  }
  for (size_t slot = 0; slot < 1000; ++slot) tree.Set(slot, 0.0);
  EXPECT_EQ(tree.Total(), 0.0);
  // And a single value afterwards is the total exactly.
  tree.Set(777, 0.1);
  EXPECT_EQ(tree.Total(), 0.1);
  EXPECT_EQ(tree.Find(0.05), 777u);
}

// Small integer values: every sum is exact, so Find must agree with the
// reference slot for slot.
TEST(SumTreeTest, MatchesReferenceExactlyOnIntegers) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  SumTree tree;
  Reference ref;
  for (int step = 0; step < 20000; ++step) {
    const size_t slot = rng.Uniform(step < 10000 ? 300 : 1500);  // grows midway
    const double value = rng.Uniform(3) == 0 ? 0.0 : static_cast<double>(rng.Uniform(100));
    tree.Set(slot, value);
    ref.Set(slot, value);
    ASSERT_EQ(tree.size(), ref.size());
    ASSERT_EQ(static_cast<long double>(tree.Total()), ref.Total());
    if (tree.Total() == 0) continue;
    for (int probe = 0; probe < 4; ++probe) {
      // Integer targets hit interval boundaries, the rest fall inside.
      const double target =
          probe == 0 ? static_cast<double>(rng.Uniform(static_cast<uint64_t>(tree.Total()) + 1))
                     : rng.NextDouble() * tree.Total();
      const size_t got = tree.Find(target);
      ASSERT_EQ(got, ref.Find(target)) << "target " << target;
      ASSERT_GT(tree.Get(got), 0.0);
    }
  }
  for (size_t slot = 0; slot < ref.size(); ++slot) ASSERT_EQ(tree.Get(slot), ref.Get(slot));
}

// Arbitrary doubles: Total within 1e-12 of the exact sum, and every Find
// lands on a positive slot whose interval (by the exact prefix sums) holds
// the target up to the same tolerance.
TEST(SumTreeTest, MatchesReferenceWithinRoundingOnDoubles) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  SumTree tree;
  Reference ref;
  for (int step = 0; step < 5000; ++step) {
    const size_t slot = rng.Uniform(700);
    const double value = rng.Uniform(4) == 0 ? 0.0 : std::pow(10.0, 12 * rng.NextDouble() - 6);
    tree.Set(slot, value);
    ref.Set(slot, value);
    const long double total = ref.Total();
    ASSERT_LT(RelativeError(tree.Total(), total), 1e-12);
    if (tree.Total() == 0) continue;
    for (int probe = 0; probe < 8; ++probe) {
      const double target = rng.NextDouble() * tree.Total();
      const size_t got = tree.Find(target);
      ASSERT_GT(tree.Get(got), 0.0) << "target " << target;
      const long double before = ref.Before(got);
      const long double tolerance = 1e-12L * total;
      ASSERT_LE(before - tolerance, target) << "slot " << got;
      ASSERT_LT(target, before + tree.Get(got) + tolerance) << "slot " << got;
    }
  }
}

// Values over 12 orders of magnitude with runs of zeros between them; the
// targets include 0, the total, just below it, every interval boundary (and
// its neighbours) and random points. No zero leaf may ever come back.
TEST(SumTreeTest, NeverFindsAZeroLeaf) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  for (int round = 0; round < 20; ++round) {
    const size_t n = 1 + rng.Uniform(3000);
    SumTree tree;
    Reference ref;
    for (size_t slot = 0; slot < n; ++slot) {
      // Zeros in runs of up to 16, and alone.
      double value = 0;
      if (rng.Uniform(2) == 0) value = std::pow(10.0, 12 * rng.NextDouble() - 6);
      tree.Set(slot, value);
      ref.Set(slot, value);
      if (rng.Uniform(50) == 0) {
        const size_t run = rng.Uniform(16);
        for (size_t z = 0; z < run && slot + 1 < n; ++z) {
          ++slot;
          tree.Set(slot, 0.0);
          ref.Set(slot, 0.0);
        }
      }
    }
    if (round % 4 == 0) {
      // Also a zero tail and a zero head.
      for (size_t slot = 0; slot < n; ++slot) {
        if (slot < n / 5 || slot >= n - n / 5) {
          tree.Set(slot, 0.0);
          ref.Set(slot, 0.0);
        }
      }
    }
    if (tree.Total() == 0) continue;
    ASSERT_LT(RelativeError(tree.Total(), ref.Total()), 1e-12);
    const double total = tree.Total();
    std::vector<double> targets = {0.0,
                                   -0.0,
                                   std::numeric_limits<double>::denorm_min(),
                                   std::nextafter(total, 0.0),
                                   total,
                                   std::nextafter(total, 2 * total),
                                   2 * total,
                                   -1.0};
    long double prefix = 0;
    for (size_t slot = 0; slot < ref.size(); ++slot) {
      prefix += ref.Get(slot);
      const double boundary = static_cast<double>(prefix);
      targets.push_back(boundary);
      targets.push_back(std::nextafter(boundary, 0.0));
      targets.push_back(std::nextafter(boundary, 2 * total));
    }
    for (int i = 0; i < 10000; ++i) targets.push_back(rng.NextDouble() * total);
    for (double target : targets) {
      const size_t got = tree.Find(target);
      ASSERT_LT(got, tree.size()) << "target " << target;
      ASSERT_GT(tree.Get(got), 0.0) << "target " << target << " n " << n;
    }
    // The clamps: first and last positive slots.
    size_t first = 0, last = 0;
    while (ref.Get(first) == 0) ++first;
    for (size_t slot = 0; slot < ref.size(); ++slot) {
      if (ref.Get(slot) > 0) last = slot;
    }
    EXPECT_EQ(tree.Find(-1.0), first);
    EXPECT_EQ(tree.Find(0.0), first);
    EXPECT_EQ(tree.Find(total), last);
  }
}

TEST(SumTreeTest, SetPastTheEndGrowsByDoubling) {
  SumTree tree;
  Reference ref;
  size_t last_capacity = tree.capacity();
  int growths = 0;
  for (size_t slot = 0; slot < 5000; ++slot) {
    const double value = static_cast<double>(slot % 13);
    tree.Set(slot, value);
    ref.Set(slot, value);
    ASSERT_EQ(tree.size(), slot + 1);
    ASSERT_GE(tree.capacity(), tree.size());
    if (tree.capacity() != last_capacity) {
      ASSERT_GE(tree.capacity(), 2 * last_capacity);
      last_capacity = tree.capacity();
      ++growths;
    }
  }
  EXPECT_EQ(tree.capacity(), 8192u);
  EXPECT_EQ(growths, 13);
  EXPECT_EQ(static_cast<long double>(tree.Total()), ref.Total());
  for (size_t slot = 0; slot < 5000; ++slot) ASSERT_EQ(tree.Get(slot), ref.Get(slot));
  // A far slot jumps straight past it, keeping every value.
  tree.Set(100000, 1.0);
  EXPECT_EQ(tree.size(), 100001u);
  EXPECT_EQ(tree.capacity(), 131072u);
  EXPECT_EQ(static_cast<long double>(tree.Total()), ref.Total() + 1);
  for (size_t slot = 0; slot < 5000; ++slot) ASSERT_EQ(tree.Get(slot), ref.Get(slot));
  for (size_t slot = 5000; slot < 100000; ++slot) ASSERT_EQ(tree.Get(slot), 0.0);
  EXPECT_EQ(tree.Find(tree.Total()), 100000u);
}

TEST(SumTreeTest, ResizeGrowsAndShrinks) {
  SumTree tree(3);
  tree.Set(0, 1);
  tree.Set(1, 2);
  tree.Set(2, 4);
  tree.Resize(4);  // within capacity
  EXPECT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree.capacity(), 4u);
  EXPECT_EQ(tree.Get(3), 0.0);
  EXPECT_EQ(tree.Total(), 7.0);
  tree.Resize(1000);
  EXPECT_EQ(tree.size(), 1000u);
  EXPECT_EQ(tree.capacity(), 1024u);
  EXPECT_EQ(tree.Total(), 7.0);
  EXPECT_EQ(tree.Get(2), 4.0);
  EXPECT_EQ(tree.Find(3), 2u);
  tree.Set(999, 8);
  EXPECT_EQ(tree.Total(), 15.0);
  // Shrinking drops the values past the new size.
  tree.Resize(2);
  EXPECT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree.Total(), 3.0);
  EXPECT_EQ(tree.Find(100), 1u);
  tree.Resize(1000);
  EXPECT_EQ(tree.Get(2), 0.0);
  EXPECT_EQ(tree.Get(999), 0.0);
  EXPECT_EQ(tree.Total(), 3.0);
  tree.Resize(0);
  EXPECT_EQ(tree.Total(), 0.0);
}

// Reassign sets every slot at once: the same tree as Set slot by slot.
TEST(SumTreeTest, ReassignMatchesSetSlotBySlot) {
  util::Random rng(testing_util::TestSeed());
  SumTree by_set;
  for (size_t slot = 0; slot < 1000; ++slot) by_set.Set(slot, rng.NextDouble());
  SumTree reassigned(1000);
  std::vector<double> values(1000);
  for (size_t slot = 0; slot < 1000; ++slot) {
    values[slot] = static_cast<double>(rng.Uniform(1000));
    by_set.Set(slot, values[slot]);
  }
  reassigned.Reassign([&](size_t slot) { return values[slot]; });
  EXPECT_EQ(reassigned.Total(), by_set.Total());
  for (size_t slot = 0; slot < 1000; ++slot) ASSERT_EQ(reassigned.Get(slot), values[slot]);
  for (int i = 0; i < 1000; ++i) {
    const double target = rng.NextDouble() * by_set.Total();
    ASSERT_EQ(reassigned.Find(target), by_set.Find(target));
  }
}

}  // namespace
}  // namespace replaydb::index
