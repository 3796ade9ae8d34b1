#include "index/selectors/prioritized_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "index/selectors/selector.h"
#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

// Chi-square critical value for `dof` degrees of freedom at z = 5.3 (upper
// tail about 6e-8; testing_util::ChiSquareCritical): a correct selector
// fails one goodness-of-fit check about once in 16 million runs.
double ChiSquareCritical(int dof) { return testing_util::ChiSquareCritical(dof); }

ItemRef Item(uint64_t seq, double priority) {
  return ItemRef{MakeItemKey(seq / 7 + 1, static_cast<int64_t>(seq % 7)), seq, priority};
}

// The mass the header promises, computed independently of the selector.
long double ReferenceMass(double priority, double exponent) {
  if (priority == 0) return 0;
  if (exponent == 0) return 1;
  return std::pow(static_cast<long double>(priority), static_cast<long double>(exponent));
}

// Priorities 10^x with x uniform in [lo, hi].
double LogUniform(util::Random& rng, double lo, double hi) {
  return std::pow(10.0, lo + (hi - lo) * rng.NextDouble());
}

// What a test believes the selector holds.
using Model = std::map<ItemKey, ItemRef>;

// Draws `rounds` times (`strata` draws per round, one per stratum; strata =
// 1 means plain draws) and checks every draw: the key is live and has
// positive priority, and the reported probability is the item's mass over
// the total, both as the selector computes it (bit for bit) and against the
// reference masses (to 1e-12). Returns the draw counts per key.
std::map<ItemKey, int64_t> DrawAndCheck(const PrioritizedSelector& selector, const Model& model,
                                        util::Random& rng, int64_t rounds, int64_t strata = 1) {
  long double reference_total = 0;
  for (const auto& [key, item] : model) {
    reference_total += ReferenceMass(item.priority, selector.exponent());
  }
  std::map<ItemKey, int64_t> counts;
  for (int64_t round = 0; round < rounds; ++round) {
    for (int64_t b = 0; b < strata; ++b) {
      const Selection s = selector.Select(rng, Stratum{b, strata});
      const auto it = model.find(s.key);
      if (it == model.end()) {
        ADD_FAILURE() << "drew key " << s.key << ", which is not live";
        return counts;
      }
      if (it->second.priority == 0) {
        ADD_FAILURE() << "drew key " << s.key << ", whose priority is 0";
        return counts;
      }
      const double want = selector.Mass(it->second.priority) / selector.total_mass();
      if (s.probability != want) {
        ADD_FAILURE() << "probability " << s.probability << ", leaf / total is " << want;
        return counts;
      }
      const long double reference =
          ReferenceMass(it->second.priority, selector.exponent()) / reference_total;
      if (std::fabs(s.probability - reference) > 1e-12L * reference) {
        ADD_FAILURE() << "probability " << s.probability << ", reference " << double(reference);
        return counts;
      }
      ++counts[s.key];
    }
  }
  return counts;
}

struct Fit {
  double chi2 = 0;
  int dof = 0;
  int buckets = 0;
};

// Pearson's chi-square of `counts` against draws * mass / total over the
// model's items of positive mass. Items are sorted by expected count and
// merged, smallest first, into buckets of expected count >= 5 (the bucketing
// depends on the expected counts only).
Fit GoodnessOfFit(const Model& model, double exponent, const std::map<ItemKey, int64_t>& counts) {
  int64_t draws = 0;
  for (const auto& [key, count] : counts) draws += count;
  long double total = 0;
  for (const auto& [key, item] : model) total += ReferenceMass(item.priority, exponent);
  struct Cell {
    long double expected;
    int64_t observed;
  };
  std::vector<Cell> cells;
  for (const auto& [key, item] : model) {
    const long double mass = ReferenceMass(item.priority, exponent);
    if (mass == 0) continue;
    const auto it = counts.find(key);
    cells.push_back({draws * mass / total, it == counts.end() ? 0 : it->second});
  }
  std::sort(cells.begin(), cells.end(),
            [](const Cell& a, const Cell& b) { return a.expected < b.expected; });
  std::vector<Cell> buckets;
  Cell open{0, 0};
  for (const Cell& cell : cells) {
    open.expected += cell.expected;
    open.observed += cell.observed;
    if (open.expected >= 5) {
      buckets.push_back(open);
      open = {0, 0};
    }
  }
  if (open.expected > 0) {
    if (buckets.empty()) {
      buckets.push_back(open);
    } else {
      buckets.back().expected += open.expected;
      buckets.back().observed += open.observed;
    }
  }
  Fit fit;
  for (const Cell& bucket : buckets) {
    const long double diff = bucket.observed - bucket.expected;
    fit.chi2 += static_cast<double>(diff * diff / bucket.expected);
  }
  fit.buckets = static_cast<int>(buckets.size());
  fit.dof = fit.buckets - 1;
  return fit;
}

void ExpectFits(const Model& model, double exponent, const std::map<ItemKey, int64_t>& counts) {
  const Fit fit = GoodnessOfFit(model, exponent, counts);
  ASSERT_GE(fit.dof, 1);
  EXPECT_LT(fit.chi2, ChiSquareCritical(fit.dof)) << fit.buckets << " buckets";
}

TEST(PrioritizedSelectorTest, NewSelectorMakesOneWithTheExponent) {
  SelectorOptions options;
  options.kind = SelectorKind::kPrioritized;
  options.priority_exponent = 0.6;
  std::unique_ptr<Selector> selector = NewSelector(options);
  ASSERT_NE(selector, nullptr);
  const auto* prioritized = dynamic_cast<const PrioritizedSelector*>(selector.get());
  ASSERT_NE(prioritized, nullptr);
  EXPECT_EQ(prioritized->exponent(), 0.6);
  EXPECT_FALSE(selector->has_mass());
  selector->Insert(Item(1, 4.0));
  EXPECT_TRUE(selector->has_mass());
  util::Random rng(1);
  EXPECT_EQ(selector->Select(rng).key, Item(1, 0).key);
  EXPECT_EQ(selector->Select(rng).probability, 1.0);
}

TEST(PrioritizedSelectorTest, MassIsPriorityToTheExponentAndZeroForZero) {
  for (double exponent : {0.0, 0.6, 1.0, 2.0}) {
    SCOPED_TRACE("exponent " + std::to_string(exponent));
    PrioritizedSelector selector(exponent);
    // Not pow(0, 0) == 1.
    EXPECT_EQ(selector.Mass(0.0), 0.0);
    EXPECT_EQ(selector.Mass(-0.0), 0.0);
    // Scale 0 until a rescale: leaves are p^exponent (to a rounding).
    EXPECT_EQ(selector.scale(), 0);
    EXPECT_EQ(selector.Mass(1.0), 1.0);
    EXPECT_DOUBLE_EQ(selector.Mass(3.0), exponent == 0 ? 1.0 : std::pow(3.0, exponent));
    EXPECT_DOUBLE_EQ(selector.Mass(1e-5), exponent == 0 ? 1.0 : std::pow(1e-5, exponent));
  }
  // Where p^exponent is a normal double it is pow's (to libm's rounding).
  PrioritizedSelector squared(2.0);
  util::Random rng(testing_util::TestSeed());
  for (int i = 0; i < 1000; ++i) {
    const double p = LogUniform(rng, -100, 100);
    ASSERT_DOUBLE_EQ(squared.Mass(p), p * p) << p;
  }
}

// The case: {1e-200, 3e-200} with exponent 2 have masses 1e-400 and
// 9e-400, which underflow; clamped to one smallest mass they were reported
// 0.5 / 0.5 and drawn 25 / 75. They are 0.1 / 0.9.
TEST(PrioritizedSelectorTest, TinyPrioritiesKeepTheirRatio) {
  const uint64_t seed = testing_util::TestSeed();
  util::Random rng(seed);
  PrioritizedSelector selector(2.0);
  selector.Insert(Item(1, 1e-200));
  selector.Insert(Item(2, 3e-200));
  ASSERT_TRUE(selector.has_mass());
  EXPECT_NEAR(selector.Mass(1e-200) / selector.total_mass(), 0.1, 1e-15);
  EXPECT_NEAR(selector.Mass(3e-200) / selector.total_mass(), 0.9, 1e-15);
  constexpr int64_t kDraws = 200000;
  int64_t heavy = 0;
  for (int64_t i = 0; i < kDraws; ++i) {
    const Selection s = selector.Select(rng);
    if (s.key == Item(2, 0).key) {
      ++heavy;
      ASSERT_NEAR(s.probability, 0.9, 1e-15);
    } else {
      ASSERT_EQ(s.key, Item(1, 0).key);
      ASSERT_NEAR(s.probability, 0.1, 1e-15);
    }
  }
  // Binomial(kDraws, 0.9): 6 sigma is about 800.
  EXPECT_NEAR(static_cast<double>(heavy), 0.9 * kDraws, 6 * std::sqrt(kDraws * 0.09));
}

TEST(PrioritizedSelectorTest, HugePrioritiesDoNotOverflow) {
  for (const auto& [exponent, low, high, p_high] :
       {std::tuple{2.0, 1e300, 3e300, 0.9}, std::tuple{3.0, 1e250, 2e250, 8.0 / 9.0},
        std::tuple{7.5, std::numeric_limits<double>::max() / 2, std::numeric_limits<double>::max(),
                   1.0 / (1.0 + std::pow(0.5, 7.5))}}) {
    SCOPED_TRACE("exponent " + std::to_string(exponent));
    PrioritizedSelector selector(exponent);
    selector.Insert(Item(1, low));
    selector.Insert(Item(2, high));
    ASSERT_TRUE(std::isfinite(selector.total_mass()));
    EXPECT_NEAR(selector.Mass(high) / selector.total_mass(), p_high, 1e-13);
    EXPECT_NEAR(selector.Mass(low) / selector.total_mass(), 1 - p_high, 1e-13);
  }
}

// The probabilities and draws follow priority^exponent wherever priorities
// lie in the double range: fresh random priorities spread over many orders
// of magnitude around random centres from 1e-300 to 1e300, inserted,
// updated and removed (which moves the largest mass across the range and
// rescales the leaves), checked exactly against long double references and
// by chi-square.
TEST(PrioritizedSelectorTest, ProbabilitiesAndDrawsFollowTheDefinitionOverTheWholeRange) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  for (int round = 0; round < 12; ++round) {
    const double exponents[] = {0.5, 0.6, 1.0, 1.5, 2.0, 3.0, 7.5};
    const double exponent = exponents[rng.Uniform(std::size(exponents))];
    SCOPED_TRACE("round " + std::to_string(round) + " exponent " + std::to_string(exponent));
    PrioritizedSelector selector(exponent);
    Model model;
    uint64_t seq = 1;
    // Masses over about 16 orders of magnitude around the centre.
    const auto fill = [&](double centre) {
      const double spread = 8 / exponent;
      const double lo = std::max(-307.0, centre - spread), hi = std::min(307.0, centre + spread);
      for (int i = 0; i < 200; ++i) {
        const ItemRef item = Item(seq++, rng.Uniform(10) == 0 ? 0.0 : LogUniform(rng, lo, hi));
        selector.Insert(item);
        model[item.key] = item;
      }
    };
    const auto check = [&] {
      long double total = 0;
      for (const auto& [key, item] : model) total += ReferenceMass(item.priority, exponent);
      ASSERT_TRUE(std::isfinite(selector.total_mass()));
      ASSERT_GE(selector.total_mass(), 1.0);
      for (const auto& [key, item] : model) {
        const double reported = selector.Mass(item.priority) / selector.total_mass();
        const long double want = ReferenceMass(item.priority, exponent) / total;
        if (want >= std::numeric_limits<double>::min()) {
          ASSERT_LE(std::fabs(reported - want), 1e-12L * want)
              << "priority " << item.priority << ": " << reported << " vs " << double(want);
        } else {
          ASSERT_LE(std::fabs(reported - want), 1e-320L) << "priority " << item.priority;
        }
      }
      ExpectFits(model, exponent, DrawAndCheck(selector, model, rng, 200000));
    };
    fill(-300 + 600 * rng.NextDouble());
    check();
    // A second population far away: one of them dominates.
    fill(-300 + 600 * rng.NextDouble());
    check();
    // Remove the heavier half (by priority), then update what is left to
    // new random values around a third centre.
    std::vector<ItemRef> items;
    for (const auto& [key, item] : model) items.push_back(item);
    std::sort(items.begin(), items.end(),
              [](const ItemRef& a, const ItemRef& b) { return a.priority > b.priority; });
    for (size_t i = 0; i < items.size() / 2; ++i) {
      selector.Remove(model[items[i].key]);
      model.erase(items[i].key);
    }
    check();
    const double centre = -300 + 600 * rng.NextDouble();
    const double spread = 8 / exponent;
    for (auto& [key, item] : model) {
      const double p = LogUniform(rng, std::max(-307.0, centre - spread),
                                  std::min(307.0, centre + spread));
      selector.Update(item, p);
      item.priority = p;
    }
    check();
  }
}

// Every live priority 0: draws are uniform over the live items, with
// probability 1 / N (Reverb does the same), plain and stratified; any
// positive priority takes over again.
TEST(PrioritizedSelectorTest, AllZeroPrioritiesDrawUniformly) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(1.0);
  EXPECT_FALSE(selector.has_mass());
  std::vector<ItemRef> items;
  for (uint64_t seq = 1; seq <= 60; ++seq) {
    items.push_back(Item(seq, 0.0));
    selector.Insert(items.back());
  }
  // Removals leave holes among the slots: draws skip them.
  for (uint64_t seq = 1; seq <= 60; seq += 6) selector.Remove(items[seq - 1]);
  std::set<ItemKey> live;
  for (const ItemRef& item : items) {
    if ((item.seq - 1) % 6 != 0) live.insert(item.key);
  }
  ASSERT_EQ(selector.size(), live.size());
  EXPECT_TRUE(selector.has_mass());
  EXPECT_EQ(selector.positive(), 0u);
  const double n = static_cast<double>(live.size());
  for (int64_t strata : {int64_t{1}, int64_t{10}}) {
    std::map<ItemKey, int64_t> counts;
    constexpr int64_t kRounds = 20000;
    for (int64_t round = 0; round < kRounds; ++round) {
      for (int64_t b = 0; b < strata; ++b) {
        const Selection s = selector.Select(rng, Stratum{b, strata});
        ASSERT_EQ(live.count(s.key), 1u);
        ASSERT_EQ(s.probability, 1.0 / n);
        ++counts[s.key];
      }
    }
    EXPECT_EQ(counts.size(), live.size());
    EXPECT_LT(testing_util::UniformChiSquare(counts, kRounds * strata / n),
              ChiSquareCritical(static_cast<int>(live.size()) - 1));
  }
  EXPECT_EQ(selector.Log2MinProbabilityRatio(0.0), 0.0);
  // One positive priority: only it is drawn.
  selector.Update(items[1], 0.25);
  for (int i = 0; i < 100; ++i) {
    const Selection s = selector.Select(rng);
    ASSERT_EQ(s.key, items[1].key);
    ASSERT_EQ(s.probability, 1.0);
  }
  // Back to 0: uniform again.
  selector.Update(ItemRef{items[1].key, items[1].seq, 0.25}, 0.0);
  std::set<ItemKey> seen;
  for (int i = 0; i < 5000; ++i) seen.insert(selector.Select(rng).key);
  EXPECT_EQ(seen, live);
}

// Log2MinProbabilityRatio is log2(P_min / P) over the items of positive
// priority, whatever their range (it stays finite where the ratio
// underflows).
TEST(PrioritizedSelectorTest, MinProbabilityRatioIsTheSmallestOverTheLiveItems) {
  PrioritizedSelector selector(2.0);
  selector.Insert(Item(1, 0.0));  // never drawn: not the minimum
  selector.Insert(Item(2, 4.0));
  selector.Insert(Item(3, 2.0));
  selector.Insert(Item(4, 8.0));
  EXPECT_DOUBLE_EQ(selector.Log2MinProbabilityRatio(8.0), -4.0);  // (2/8)^2
  EXPECT_DOUBLE_EQ(selector.Log2MinProbabilityRatio(2.0), 0.0);
  selector.Remove(Item(3, 2.0));
  EXPECT_DOUBLE_EQ(selector.Log2MinProbabilityRatio(8.0), -2.0);  // (4/8)^2
  selector.Insert(Item(5, 1e-300));
  EXPECT_NEAR(selector.Log2MinProbabilityRatio(8.0), 2 * (std::log2(1e-300) - 3), 1e-9);
  selector.Update(Item(5, 1e-300), 1e300);
  EXPECT_DOUBLE_EQ(selector.Log2MinProbabilityRatio(4.0), 0.0);
  EXPECT_NEAR(selector.Log2MinProbabilityRatio(1e300), 2 * (2 - std::log2(1e300)), 1e-9);
  PrioritizedSelector flat(0.0);  // every positive item equally likely
  flat.Insert(Item(1, 1.0));
  flat.Insert(Item(2, 100.0));
  EXPECT_EQ(flat.Log2MinProbabilityRatio(100.0), 0.0);
}

TEST(PrioritizedSelectorTest, ProbabilityIsLeafOverTotal) {
  PrioritizedSelector selector(1.0);
  for (uint64_t seq = 1; seq <= 4; ++seq) selector.Insert(Item(seq, static_cast<double>(seq)));
  util::Random rng(testing_util::TestSeed());
  std::set<ItemKey> seen;
  for (int i = 0; i < 2000; ++i) {
    const Selection s = selector.Select(rng);
    for (uint64_t seq = 1; seq <= 4; ++seq) {
      if (s.key == Item(seq, 0).key) {
        EXPECT_EQ(s.probability, static_cast<double>(seq) / 10.0);
        seen.insert(s.key);
      }
    }
  }
  EXPECT_EQ(seen.size(), 4u);
}

class PrioritizedFitTest : public testing::TestWithParam<double> {};

// Draws match priority^exponent by chi-square, zero priorities included.
TEST_P(PrioritizedFitTest, DrawsFollowPriorityToTheExponent) {
  const double exponent = GetParam();
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(exponent);
  Model model;
  for (uint64_t seq = 1; seq <= 300; ++seq) {
    const double priority = rng.Uniform(5) == 0 ? 0.0 : 0.01 + 10 * rng.NextDouble();
    const ItemRef item = Item(seq, priority);
    selector.Insert(item);
    model[item.key] = item;
  }
  ExpectFits(model, exponent, DrawAndCheck(selector, model, rng, 1000000));
}

// Priorities over 12 orders of magnitude: the rare items are bucketed so
// every cell expects >= 5 draws.
TEST_P(PrioritizedFitTest, DrawsFollowPrioritiesOverTwelveOrdersOfMagnitude) {
  const double exponent = GetParam();
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(exponent);
  Model model;
  for (uint64_t seq = 1; seq <= 2000; ++seq) {
    const ItemRef item = Item(seq, LogUniform(rng, -6, 6));
    selector.Insert(item);
    model[item.key] = item;
  }
  const auto counts = DrawAndCheck(selector, model, rng, 2000000);
  ExpectFits(model, exponent, counts);
  // The lightest tenth of the items (by mass) gets its share of the draws
  // in expectation; a loose 6-sigma binomial check, plus 10 for the
  // exponents where that tenth expects under one draw (Poisson: 16 or more
  // draws at a mean of 0.54 has odds under 1e-15).
  std::vector<ItemRef> by_mass;
  for (const auto& [key, item] : model) by_mass.push_back(item);
  std::sort(by_mass.begin(), by_mass.end(),
            [](const ItemRef& a, const ItemRef& b) { return a.priority < b.priority; });
  long double light_mass = 0, total_mass = 0;
  int64_t light_draws = 0;
  for (size_t i = 0; i < by_mass.size(); ++i) {
    const long double mass = ReferenceMass(by_mass[i].priority, exponent);
    total_mass += mass;
    if (i < by_mass.size() / 10) {
      light_mass += mass;
      const auto it = counts.find(by_mass[i].key);
      if (it != counts.end()) light_draws += it->second;
    }
  }
  const double p = static_cast<double>(light_mass / total_mass);
  const double mean = 2000000 * p;
  EXPECT_LE(std::fabs(light_draws - mean), 6 * std::sqrt(mean * (1 - p)) + 10)
      << "light share " << p;
}

INSTANTIATE_TEST_SUITE_P(Exponents, PrioritizedFitTest, testing::Values(1.0, 0.6, 0.0),
                         [](const testing::TestParamInfo<double>& info) {
                           return info.param == 1.0   ? std::string("One")
                                  : info.param == 0.0 ? std::string("Zero")
                                                      : std::string("PointSix");
                         });

// Millions of draws, plain and stratified, over priorities from 1e-6 to 1e6
// with zeros between them (alone and in runs, at both ends).
TEST(PrioritizedSelectorTest, ZeroPriorityItemsAreNeverDrawn) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  for (double exponent : {1.0, 0.0}) {
    PrioritizedSelector selector(exponent);
    Model model;
    uint64_t seq = 1;
    for (int i = 0; i < 2000; ++i) {
      double priority = 0;
      if (i >= 100 && i < 1900 && rng.Uniform(2) == 0) priority = LogUniform(rng, -6, 6);
      if (i % 97 < 10) priority = 0;  // runs of zeros
      const ItemRef item = Item(seq++, priority);
      selector.Insert(item);
      model[item.key] = item;
    }
    // DrawAndCheck fails on any zero-priority key.
    DrawAndCheck(selector, model, rng, 2000000);
    DrawAndCheck(selector, model, rng, 1000, 1000);
    DrawAndCheck(selector, model, rng, 100000, 7);
  }
}

TEST(PrioritizedSelectorTest, UpdateChangesTheDistribution) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(1.0);
  Model model;
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    const ItemRef item = Item(seq, 1.0);
    selector.Insert(item);
    model[item.key] = item;
  }
  ExpectFits(model, 1.0, DrawAndCheck(selector, model, rng, 200000));
  // A third to zero, a third to 5, the rest unchanged.
  uint64_t i = 0;
  for (auto& [key, item] : model) {
    const double priority = i < 33 ? 0.0 : i < 66 ? 5.0 : 1.0;
    selector.Update(item, priority);
    item.priority = priority;
    ++i;
  }
  ExpectFits(model, 1.0, DrawAndCheck(selector, model, rng, 200000));
  // Everything to zero, then one item back.
  for (auto& [key, item] : model) {
    selector.Update(item, 0.0);
    item.priority = 0;
  }
  EXPECT_TRUE(selector.has_mass());  // drawn uniformly
  EXPECT_EQ(selector.positive(), 0u);
  ItemRef& chosen = model.begin()->second;
  selector.Update(chosen, 0.25);
  chosen.priority = 0.25;
  ASSERT_TRUE(selector.has_mass());
  for (int draw = 0; draw < 1000; ++draw) {
    const Selection s = selector.Select(rng);
    ASSERT_EQ(s.key, chosen.key);
    ASSERT_EQ(s.probability, 1.0);
  }
}

// Random inserts, removals and updates against a model. Freed slots are
// reused, also by items of priority 0: a removed key, or the mass it left
// behind, must never come back.
TEST(PrioritizedSelectorTest, RemovedKeysAreNeverDrawnAfterSlotReuse) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(0.6);
  Model model;
  std::set<ItemKey> removed;
  uint64_t next_seq = 1;
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = rng.Uniform(10);
    if (model.size() < 5 || op < 4) {
      // Half of the new items have priority 0.
      const double priority = rng.Uniform(2) == 0 ? 0.0 : LogUniform(rng, -3, 3);
      const ItemRef item = Item(next_seq++, priority);
      selector.Insert(item);
      model[item.key] = item;
    } else if (op < 8) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      selector.Remove(it->second);
      removed.insert(it->first);
      model.erase(it);
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      const double priority = rng.Uniform(3) == 0 ? 0.0 : LogUniform(rng, -3, 3);
      selector.Update(it->second, priority);
      it->second.priority = priority;
    }
    ASSERT_EQ(selector.size(), model.size());
    bool any_positive = false;
    for (const auto& [key, item] : model) any_positive |= item.priority > 0;
    ASSERT_EQ(selector.has_mass(), !model.empty());
    ASSERT_EQ(selector.positive() > 0, any_positive);
    if (!any_positive) continue;
    const auto counts = DrawAndCheck(selector, model, rng, 20);
    for (const auto& [key, count] : counts) ASSERT_FALSE(removed.count(key));
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
  // The walk may end with one or two positive items: a fit needs more
  // than one bucket, so top the model up to 20 positive ones first.
  size_t positive = 0;
  for (const auto& [key, item] : model) positive += item.priority > 0 ? 1 : 0;
  for (; positive < 20; ++positive) {
    const ItemRef item = Item(next_seq++, LogUniform(rng, -3, 3));
    selector.Insert(item);
    model[item.key] = item;
  }
  ASSERT_TRUE(selector.has_mass());
  ExpectFits(model, 0.6, DrawAndCheck(selector, model, rng, 500000));
}

// Tracks which slot each item occupies, by the rule in the header: a new
// item takes the most recently freed slot, else the next unused one.
class SlotModel {
 public:
  void Insert(const ItemRef& item) {
    if (free_.empty()) {
      slots_.push_back(item);
    } else {
      slots_[free_.back()] = item;
      free_.pop_back();
    }
  }
  void Remove(ItemKey key) {
    for (size_t slot = 0; slot < slots_.size(); ++slot) {
      if (slots_[slot] && slots_[slot]->key == key) {
        slots_[slot].reset();
        free_.push_back(slot);
        return;
      }
    }
    ADD_FAILURE() << "removing absent key " << key;
  }
  // Occupied slots in slot order.
  std::vector<ItemRef> InSlotOrder() const {
    std::vector<ItemRef> items;
    for (const auto& slot : slots_) {
      if (slot) items.push_back(*slot);
    }
    return items;
  }

 private:
  std::vector<std::optional<ItemRef>> slots_;
  std::vector<size_t> free_;
};

// With B strata, the draw for stratum b lies in the b-th of B equal slices
// of the cumulative mass (in slot order), and the draws together still
// follow priority^exponent.
void CheckStratified(const PrioritizedSelector& selector, const SlotModel& slots, util::Random& rng,
                     int64_t strata, int64_t rounds) {
  const std::vector<ItemRef> in_order = slots.InSlotOrder();
  std::map<ItemKey, std::pair<long double, long double>> interval;  // [begin, end)
  long double cumulative = 0;
  Model model;
  for (const ItemRef& item : in_order) {
    const long double mass = ReferenceMass(item.priority, selector.exponent());
    interval[item.key] = {cumulative, cumulative + mass};
    cumulative += mass;
    model[item.key] = item;
  }
  const long double total = cumulative;
  const long double tolerance = 1e-12L * total;
  std::map<ItemKey, int64_t> counts;
  for (int64_t round = 0; round < rounds; ++round) {
    for (int64_t b = 0; b < strata; ++b) {
      const Selection s = selector.Select(rng, Stratum{b, strata});
      const auto it = interval.find(s.key);
      ASSERT_NE(it, interval.end()) << "drew key " << s.key << ", which is not live";
      const auto [begin, end] = it->second;
      ASSERT_GT(end, begin) << "drew key " << s.key << ", whose priority is 0";
      const long double slice_begin = total * b / strata;
      const long double slice_end = total * (b + 1) / strata;
      // The item's interval overlaps the slice.
      ASSERT_LT(begin, slice_end + tolerance) << "stratum " << b << " of " << strata;
      ASSERT_GT(end, slice_begin - tolerance) << "stratum " << b << " of " << strata;
      ++counts[s.key];
    }
  }
  // Stratified draws vary less than independent ones, so the chi-square
  // check is conservative here.
  ExpectFits(model, selector.exponent(), counts);
}

TEST(PrioritizedSelectorTest, StratifiedDrawsComeFromTheirSlice) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  for (double exponent : {1.0, 0.6, 0.0}) {
    SCOPED_TRACE("exponent " + std::to_string(exponent));
    PrioritizedSelector selector(exponent);
    SlotModel slots;
    uint64_t seq = 1;
    for (int i = 0; i < 500; ++i) {
      const double priority = rng.Uniform(6) == 0 ? 0.0 : LogUniform(rng, -2, 2);
      const ItemRef item = Item(seq++, priority);
      selector.Insert(item);
      slots.Insert(item);
    }
    CheckStratified(selector, slots, rng, 64, 5000);
    CheckStratified(selector, slots, rng, 7, 20000);
    CheckStratified(selector, slots, rng, 1000, 300);  // more strata than items
  }
}

// The same after removals have freed slots that new items then reuse, so
// slot order is no longer insertion order.
TEST(PrioritizedSelectorTest, StratifiedAfterSlotReuse) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  PrioritizedSelector selector(1.0);
  SlotModel slots;
  Model model;
  uint64_t seq = 1;
  for (int i = 0; i < 400; ++i) {
    const ItemRef item = Item(seq++, LogUniform(rng, -2, 2));
    selector.Insert(item);
    slots.Insert(item);
    model[item.key] = item;
  }
  for (int i = 0; i < 300; ++i) {
    auto it = model.begin();
    std::advance(it, static_cast<long>(rng.Uniform(model.size())));
    selector.Remove(it->second);
    slots.Remove(it->first);
    model.erase(it);
    if (rng.Uniform(3) != 0) {
      const ItemRef item = Item(seq++, rng.Uniform(4) == 0 ? 0.0 : LogUniform(rng, -2, 2));
      selector.Insert(item);
      slots.Insert(item);
      model[item.key] = item;
    }
  }
  ASSERT_EQ(selector.size(), model.size());
  CheckStratified(selector, slots, rng, 32, 10000);
}

}  // namespace
}  // namespace replaydb::index
