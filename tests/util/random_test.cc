#include "tests/test_util.h"
#include "util/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

namespace replaydb::util {

// Reads and sets Random's private state (a friend of Random).
class RandomTestPeer {
 public:
  static Random WithState(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3) {
    Random rng(0);
    rng.s_[0] = s0;
    rng.s_[1] = s1;
    rng.s_[2] = s2;
    rng.s_[3] = s3;
    return rng;
  }
  static std::vector<uint64_t> State(const Random& rng) {
    return {rng.s_[0], rng.s_[1], rng.s_[2], rng.s_[3]};
  }
};

namespace {

// The chi-square statistic a fair generator exceeds with probability p, for
// `dof` degrees of freedom (Wilson-Hilferty approximation).
double ChiSquareCritical(int dof, double p) {
  return testing_util::ChiSquareCriticalAt(dof, p);
}

// A failure probability of 1e-6 per test keeps these tests from flaking
// while a biased generator fails them at once.
constexpr double kFalseAlarm = 1e-6;

TEST(ChiSquareCriticalTest, MatchesTables) {
  // Reference values of the chi-square upper quantile (e.g. R's qchisq);
  // Wilson-Hilferty is within 1% of them from a few degrees of freedom on.
  EXPECT_NEAR(testing_util::NormalUpperQuantile(1e-6), 4.753424, 1e-5);
  EXPECT_NEAR(ChiSquareCritical(9, 0.001), 27.877, 0.01 * 27.877);
  EXPECT_NEAR(ChiSquareCritical(99, 0.001), 148.23, 0.01 * 148.23);
  EXPECT_NEAR(ChiSquareCritical(49, 1e-6), 111.14, 0.01 * 111.14);
}

// xoshiro256** from state {1, 2, 3, 4}: the first outputs of the reference
// implementation (prng.di.unimi.it), as published by several ports.
TEST(RandomTest, MatchesReferenceXoshiro256StarStar) {
  Random rng = RandomTestPeer::WithState(1, 2, 3, 4);
  const uint64_t expected[] = {11520u,
                               0u,
                               1509978240u,
                               1215971899390074240u,
                               1216172134540287360u,
                               607988272756665600u,
                               16172922978634559625u,
                               8476171486693032832u,
                               10595114339597558777u,
                               2904607092377533576u};
  for (uint64_t want : expected) EXPECT_EQ(rng.Next(), want);
}

// The seed goes through splitmix64: state words are its first four outputs
// (reference outputs for seed 1234567).
TEST(RandomTest, SeedsThroughSplitMix64) {
  Random rng(1234567);
  EXPECT_EQ(RandomTestPeer::State(rng),
            (std::vector<uint64_t>{6457827717110365317u, 3203168211198807973u, 9817491932198370423u,
                                   4593380528125082431u}));
}

TEST(RandomTest, SameSeedSameSequenceDifferentSeedDifferentSequence) {
  Random a(42), b(42), c(43);
  std::vector<uint64_t> sa, sb, sc;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.Next());
    sb.push_back(b.Next());
    sc.push_back(c.Next());
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(RandomTest, SeedZeroIsUsable) {
  Random rng(0);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(rng.Next());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RandomTest, FromEntropyGivesDifferentGenerators) {
  Random a = Random::FromEntropy();
  Random b = Random::FromEntropy();
  std::vector<uint64_t> sa, sb;
  for (int i = 0; i < 4; ++i) {
    sa.push_back(a.Next());
    sb.push_back(b.Next());
  }
  EXPECT_NE(sa, sb);
}

TEST(RandomTest, UniformStaysInRange) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Random rng(seed);
  const uint64_t bounds[] = {1,
                             2,
                             3,
                             7,
                             10,
                             1000,
                             (uint64_t{1} << 32) + 1,
                             (uint64_t{1} << 63) + 1,
                             std::numeric_limits<uint64_t>::max()};
  for (uint64_t n : bounds) {
    for (int i = 0; i < 10000; ++i) {
      const uint64_t v = rng.Uniform(n);
      ASSERT_LT(v, n) << "n = " << n;
    }
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(rng.Uniform(1), 0u);
}

TEST(RandomTest, UniformHitsBothEnds) {
  Random rng(testing_util::TestSeed());
  bool saw_zero = false, saw_max = false;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = rng.Uniform(5);
    saw_zero |= v == 0;
    saw_max |= v == 4;
  }
  EXPECT_TRUE(saw_zero);
  EXPECT_TRUE(saw_max);
}

TEST(RandomTest, UniformPassesChiSquare) {
  for (uint64_t n : {2u, 7u, 10u, 100u, 1000u}) {
    const uint64_t seed = testing_util::TestSeed();
    SCOPED_TRACE("n " + std::to_string(n) + " seed " + std::to_string(seed));
    Random rng(seed);
    const int64_t draws = 200 * static_cast<int64_t>(n);
    std::vector<int64_t> counts(n, 0);
    for (int64_t i = 0; i < draws; ++i) ++counts[rng.Uniform(n)];
    const double expected = static_cast<double>(draws) / static_cast<double>(n);
    EXPECT_LT(testing_util::UniformChiSquare(counts, expected),
              ChiSquareCritical(static_cast<int>(n) - 1, kFalseAlarm));
  }
}

// n = 3 * 2^62 is where naive reductions are most biased: `x % n` puts half
// the draws below 2^62 (instead of a third) and multiply-shift without
// rejection makes half the draws multiples of 3 (instead of a third).
TEST(RandomTest, UniformHasNoBiasForLargeBounds) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Random rng(seed);
  const uint64_t n = uint64_t{3} << 62;
  const int draws = 60000;
  int low = 0, multiple_of_3 = 0;
  for (int i = 0; i < draws; ++i) {
    const uint64_t v = rng.Uniform(n);
    ASSERT_LT(v, n);
    low += v < (uint64_t{1} << 62);
    multiple_of_3 += v % 3 == 0;
  }
  // Both are Binomial(draws, 1/3): sd = 115; allow 6 sd. A biased reduction
  // is off by draws / 6 = 10000.
  const double mean = draws / 3.0;
  const double tolerance = 6 * std::sqrt(draws * (1.0 / 3) * (2.0 / 3));
  EXPECT_NEAR(low, mean, tolerance);
  EXPECT_NEAR(multiple_of_3, mean, tolerance);
}

TEST(RandomTest, NextDoubleIsA53BitFractionInUnitInterval) {
  Random rng(testing_util::TestSeed());
  for (int i = 0; i < 100000; ++i) {
    const double d = rng.NextDouble();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
    const double scaled = d * 0x1.0p53;
    ASSERT_EQ(scaled, std::floor(scaled)) << d;
  }
}

TEST(RandomTest, NextDoubleUsesTheTopBitsOfNext) {
  Random a(99), b(99);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a.NextDouble(), static_cast<double>(b.Next() >> 11) / 0x1.0p53);
  }
}

TEST(RandomTest, NextDoublePassesChiSquare) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Random rng(seed);
  const int buckets = 64;
  const int64_t draws = 64000;
  std::vector<int64_t> counts(buckets, 0);
  for (int64_t i = 0; i < draws; ++i) ++counts[static_cast<int>(rng.NextDouble() * buckets)];
  EXPECT_LT(testing_util::UniformChiSquare(counts, static_cast<double>(draws) / buckets),
            ChiSquareCritical(buckets - 1, kFalseAlarm));
}

}  // namespace
}  // namespace replaydb::util
