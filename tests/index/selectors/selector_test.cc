#include "index/selectors/selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "index/selectors/ordered_selector.h"
#include "index/selectors/uniform_selector.h"
#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

// Chi-square critical value for `dof` degrees of freedom at upper-tail
// probability p (Wilson-Hilferty approximation).
double ChiSquareCritical(int dof, double p) {
  return testing_util::ChiSquareCriticalAt(dof, p);
}

// A fair selector fails a test with probability 1e-6.
constexpr double kFalseAlarm = 1e-6;

ItemRef Item(uint64_t seq) {
  return {MakeItemKey(seq / 7 + 1, static_cast<int64_t>(seq % 7)), seq};
}

// Draws `draws` selections and returns the chi-square statistic of the
// counts against the uniform distribution over `live`. Fails the test if a
// key outside `live` is drawn or a probability is not 1 / live.size().
double UniformChiSquare(const Selector& selector, const std::vector<ItemRef>& live, util::Random& rng,
                        int64_t draws) {
  std::map<ItemKey, int64_t> counts;
  for (const ItemRef& item : live) counts[item.key] = 0;
  for (int64_t i = 0; i < draws; ++i) {
    const Selection s = selector.Select(rng);
    auto it = counts.find(s.key);
    if (it == counts.end()) {
      ADD_FAILURE() << "selected key " << s.key << " which is not live";
      return 1e300;
    }
    ++it->second;
    if (s.probability != 1.0 / static_cast<double>(live.size())) {
      ADD_FAILURE() << "probability " << s.probability << " with " << live.size() << " items";
      return 1e300;
    }
  }
  const double expected = static_cast<double>(draws) / static_cast<double>(live.size());
  double chi2 = 0;
  for (const auto& [key, count] : counts) {
    chi2 += (count - expected) * (count - expected) / expected;
  }
  return chi2;
}

std::unique_ptr<Selector> MakeSelector(SelectorKind kind) {
  SelectorOptions options;
  options.kind = kind;
  return NewSelector(options);
}

TEST(NewSelectorTest, MakesUniformFifoAndLifo) {
  util::Random rng(1);
  std::unique_ptr<Selector> uniform = MakeSelector(SelectorKind::kUniform);
  std::unique_ptr<Selector> fifo = MakeSelector(SelectorKind::kFifo);
  std::unique_ptr<Selector> lifo = MakeSelector(SelectorKind::kLifo);
  ASSERT_NE(uniform, nullptr);
  ASSERT_NE(fifo, nullptr);
  ASSERT_NE(lifo, nullptr);
  for (uint64_t seq = 1; seq <= 4; ++seq) {
    uniform->Insert(Item(seq));
    fifo->Insert(Item(seq));
    lifo->Insert(Item(seq));
  }
  EXPECT_EQ(uniform->size(), 4u);
  EXPECT_DOUBLE_EQ(uniform->Select(rng).probability, 0.25);
  EXPECT_EQ(fifo->Select(rng).key, Item(1).key);
  EXPECT_EQ(fifo->Select(rng).probability, 1.0);
  EXPECT_EQ(lifo->Select(rng).key, Item(4).key);
  EXPECT_EQ(lifo->Select(rng).probability, 1.0);
  for (const Selector* s : {uniform.get(), fifo.get(), lifo.get()}) EXPECT_TRUE(s->has_mass());
}

TEST(NewSelectorTest, UnknownKindGivesNull) {
  EXPECT_EQ(MakeSelector(static_cast<SelectorKind>(200)), nullptr);
}

// Uniform, FIFO and LIFO ignore priorities and strata.
TEST(NewSelectorTest, PrioritiesAndStrataDoNotMatter) {
  for (SelectorKind kind : {SelectorKind::kUniform, SelectorKind::kFifo, SelectorKind::kLifo}) {
    SCOPED_TRACE("kind " + std::to_string(static_cast<int>(kind)));
    std::unique_ptr<Selector> selector = MakeSelector(kind);
    ASSERT_NE(selector, nullptr);
    EXPECT_FALSE(selector->has_mass());
    std::map<ItemKey, ItemRef> refs;
    for (uint64_t seq = 1; seq <= 6; ++seq) {
      ItemRef item = Item(seq);
      item.priority = seq % 2 == 0 ? 0.0 : 100.0 * static_cast<double>(seq);
      selector->Insert(item);
      refs[item.key] = item;
    }
    // Zero priorities still count as mass for these selectors.
    EXPECT_TRUE(selector->has_mass());
    selector->Update(refs[Item(1).key], 0.0);
    refs[Item(1).key].priority = 0.0;
    selector->Update(refs[Item(6).key], 1e9);
    refs[Item(6).key].priority = 1e9;
    EXPECT_EQ(selector->size(), 6u);

    util::Random rng(testing_util::TestSeed());
    for (int64_t stratum = 0; stratum < 4; ++stratum) {
      const Selection s = selector->Select(rng, Stratum{stratum, 4});
      ASSERT_TRUE(refs.count(s.key));
      if (kind == SelectorKind::kFifo) {
        EXPECT_EQ(s.key, Item(1).key);
      } else if (kind == SelectorKind::kLifo) {
        EXPECT_EQ(s.key, Item(6).key);
      } else {
        EXPECT_EQ(s.probability, 1.0 / 6);
      }
    }
    // Removal uses the priority as last set.
    selector->Remove(refs[Item(1).key]);
    selector->Remove(refs[Item(6).key]);
    EXPECT_EQ(selector->size(), 4u);
  }
}

// A uniform selector picks zero-priority items as often as others.
TEST(UniformSelectorTest, IgnoresPriorities) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  UniformSelector selector;
  std::vector<ItemRef> live;
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    ItemRef item = Item(seq);
    item.priority = seq <= 10 ? 0.0 : 1000.0;
    selector.Insert(item);
    live.push_back(item);
  }
  for (int i = 0; i < 10; ++i) {
    selector.Update(live[i], 5000.0);
    live[i].priority = 5000.0;
  }
  EXPECT_LT(UniformChiSquare(selector, live, rng, 40000), ChiSquareCritical(19, kFalseAlarm));
}

TEST(UniformSelectorTest, SingleItemIsAlwaysSelectedWithProbabilityOne) {
  UniformSelector selector;
  selector.Insert(Item(5));
  util::Random rng(testing_util::TestSeed());
  for (int i = 0; i < 100; ++i) {
    const Selection s = selector.Select(rng);
    EXPECT_EQ(s.key, Item(5).key);
    EXPECT_EQ(s.probability, 1.0);
  }
}

TEST(UniformSelectorTest, ProbabilityIsOneOverSize) {
  UniformSelector selector;
  util::Random rng(testing_util::TestSeed());
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    selector.Insert(Item(seq));
    EXPECT_EQ(selector.size(), seq);
    EXPECT_EQ(selector.Select(rng).probability, 1.0 / static_cast<double>(seq));
  }
  selector.Remove(Item(3));
  EXPECT_EQ(selector.size(), 9u);
  EXPECT_EQ(selector.Select(rng).probability, 1.0 / 9);
}

TEST(UniformSelectorTest, SelectsUniformly) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  UniformSelector selector;
  std::vector<ItemRef> live;
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    selector.Insert(Item(seq));
    live.push_back(Item(seq));
  }
  EXPECT_LT(UniformChiSquare(selector, live, rng, 100000), ChiSquareCritical(49, kFalseAlarm));
}

TEST(UniformSelectorTest, StaysUniformAfterRemovals) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  UniformSelector selector;
  for (uint64_t seq = 1; seq <= 100; ++seq) selector.Insert(Item(seq));
  // Remove the first, the last, and every other one in between: each removal
  // moves the current last key into the hole.
  std::vector<ItemRef> live;
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    if (seq == 1 || seq == 100 || seq % 2 == 0) {
      selector.Remove(Item(seq));
    } else {
      live.push_back(Item(seq));
    }
  }
  ASSERT_EQ(selector.size(), live.size());
  EXPECT_LT(UniformChiSquare(selector, live, rng, 100000),
            ChiSquareCritical(static_cast<int>(live.size()) - 1, kFalseAlarm));
}

// Random inserts and removals against a std::set model: after every step
// the selector holds exactly the model's keys (checked by draining it).
TEST(UniformSelectorTest, MatchesASetUnderRandomInsertsAndRemovals) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  UniformSelector selector;
  std::map<ItemKey, ItemRef> model;
  uint64_t next_seq = 1;
  for (int step = 0; step < 5000; ++step) {
    if (model.empty() || rng.Uniform(3) != 0) {
      const ItemRef item = Item(next_seq++);
      selector.Insert(item);
      model[item.key] = item;
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      selector.Remove(it->second);
      model.erase(it);
    }
    ASSERT_EQ(selector.size(), model.size());
    if (!model.empty()) {
      ASSERT_TRUE(model.count(selector.Select(rng).key));
    }
  }
  // Every selected key is live, and removing them one by one empties it.
  std::set<ItemKey> drained;
  while (selector.size() > 0) {
    const Selection s = selector.Select(rng);
    ASSERT_TRUE(model.count(s.key));
    ASSERT_TRUE(drained.insert(s.key).second);
    selector.Remove(model[s.key]);
  }
  EXPECT_EQ(drained.size(), model.size());
}

TEST(UniformSelectorTest, RemovingEverythingThenInsertingAgainWorks) {
  UniformSelector selector;
  util::Random rng(testing_util::TestSeed());
  for (uint64_t seq = 1; seq <= 3; ++seq) selector.Insert(Item(seq));
  for (uint64_t seq = 3; seq >= 1; --seq) selector.Remove(Item(seq));
  EXPECT_EQ(selector.size(), 0u);
  selector.Insert(Item(10));
  EXPECT_EQ(selector.Select(rng).key, Item(10).key);
}

// Drains a selector by repeated Select + Remove and returns the keys in the
// order they came out.
std::vector<ItemKey> Drain(Selector& selector, const std::map<ItemKey, ItemRef>& refs) {
  util::Random rng(7);
  std::vector<ItemKey> out;
  while (selector.size() > 0) {
    const Selection s = selector.Select(rng);
    EXPECT_EQ(s.probability, 1.0);
    out.push_back(s.key);
    selector.Remove(refs.at(s.key));
  }
  return out;
}

class OrderedSelectorTest : public testing::TestWithParam<OrderedSelector::Order> {
 protected:
  bool fifo() const { return GetParam() == OrderedSelector::Order::kOldestFirst; }
};

TEST_P(OrderedSelectorTest, SelectsOldestOrNewestWithProbabilityOne) {
  OrderedSelector selector(GetParam());
  util::Random rng(testing_util::TestSeed());
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    selector.Insert(Item(seq * 10));
    const Selection s = selector.Select(rng);
    EXPECT_EQ(s.key, fifo() ? Item(10).key : Item(seq * 10).key);
    EXPECT_EQ(s.probability, 1.0);
  }
  // Select does not remove.
  EXPECT_EQ(selector.size(), 5u);
  EXPECT_EQ(selector.Select(rng).key, selector.Select(rng).key);
}

TEST_P(OrderedSelectorTest, DrainsInInsertionOrderOrReverse) {
  OrderedSelector selector(GetParam());
  std::map<ItemKey, ItemRef> refs;
  std::vector<ItemKey> inserted;
  // Sparse, increasing seqs whose keys are not in seq order.
  for (uint64_t i = 0; i < 20; ++i) {
    const ItemRef item{MakeItemKey(100 - i, 0), 3 * i + 1};
    selector.Insert(item);
    refs[item.key] = item;
    inserted.push_back(item.key);
  }
  if (!fifo()) std::reverse(inserted.begin(), inserted.end());
  EXPECT_EQ(Drain(selector, refs), inserted);
}

// Items restored from a checkpoint come trajectory by trajectory, so
// their seqs arrive out of order (two writers' trajectories interleave):
// each still lands in its place (a debug build asserted on this).
TEST_P(OrderedSelectorTest, ItemsInsertedOutOfOrderDrainInSeqOrder) {
  OrderedSelector selector(GetParam());
  std::mt19937_64 rng(testing_util::TestSeed());
  std::vector<uint64_t> seqs(40);
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i] = 1 + 2 * i;
  std::shuffle(seqs.begin(), seqs.end(), rng);
  std::map<ItemKey, ItemRef> refs;
  for (const uint64_t seq : seqs) {
    selector.Insert(Item(seq));
    refs[Item(seq).key] = Item(seq);
  }
  std::sort(seqs.begin(), seqs.end());
  if (!fifo()) std::reverse(seqs.begin(), seqs.end());
  std::vector<ItemKey> want;
  for (const uint64_t seq : seqs) want.push_back(Item(seq).key);
  EXPECT_EQ(Drain(selector, refs), want);
}

TEST_P(OrderedSelectorTest, KeepsOrderAfterRemovalsInTheMiddle) {
  OrderedSelector selector(GetParam());
  std::map<ItemKey, ItemRef> refs;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    selector.Insert(Item(seq));
    refs[Item(seq).key] = Item(seq);
  }
  for (uint64_t seq : {2, 5, 6, 9}) selector.Remove(Item(seq));
  EXPECT_EQ(selector.size(), 6u);
  // Inserts after the removals still go to the newest end.
  selector.Insert(Item(11));
  refs[Item(11).key] = Item(11);
  std::vector<ItemKey> expected;
  for (uint64_t seq : {1, 3, 4, 7, 8, 10, 11}) expected.push_back(Item(seq).key);
  if (!fifo()) std::reverse(expected.begin(), expected.end());
  EXPECT_EQ(Drain(selector, refs), expected);
}

TEST_P(OrderedSelectorTest, RemovingTheEndMovesSelectionToTheNextItem) {
  OrderedSelector selector(GetParam());
  util::Random rng(1);
  for (uint64_t seq = 1; seq <= 3; ++seq) selector.Insert(Item(seq));
  // Remove the item Select returns now; the next one in order takes over.
  selector.Remove(fifo() ? Item(1) : Item(3));
  EXPECT_EQ(selector.Select(rng).key, Item(2).key);
  selector.Remove(Item(2));
  EXPECT_EQ(selector.Select(rng).key, fifo() ? Item(3).key : Item(1).key);
  selector.Remove(fifo() ? Item(3) : Item(1));
  EXPECT_EQ(selector.size(), 0u);
  selector.Insert(Item(4));
  EXPECT_EQ(selector.Select(rng).key, Item(4).key);
}

INSTANTIATE_TEST_SUITE_P(FifoAndLifo, OrderedSelectorTest,
                         testing::Values(OrderedSelector::Order::kOldestFirst,
                                         OrderedSelector::Order::kNewestFirst),
                         [](const testing::TestParamInfo<OrderedSelector::Order>& info) {
                           return info.param == OrderedSelector::Order::kOldestFirst ? "Fifo"
                                                                                     : "Lifo";
                         });

}  // namespace
}  // namespace replaydb::index
