#include "index/selectors/heap_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "index/selectors/selector.h"
#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

using Order = HeapSelector::Order;

// Keys scrambled against seq order (unique for seq < 1000003), so a
// selector that broke ties by key instead of seq would show.
ItemRef Item(uint64_t seq, double priority) {
  return ItemRef{MakeItemKey(seq * 7919 % 1000003 + 1, static_cast<int64_t>(seq % 5)), seq,
                 priority};
}

// The item a heap selector must return, by a linear scan.
ItemKey Expected(const std::map<ItemKey, ItemRef>& model, Order order) {
  const ItemRef* best = nullptr;
  for (const auto& [key, item] : model) {
    if (best == nullptr) {
      best = &item;
      continue;
    }
    const bool better =
        order == Order::kMin ? item.priority < best->priority : item.priority > best->priority;
    if (better || (item.priority == best->priority && item.seq < best->seq)) best = &item;
  }
  return best->key;
}

class HeapSelectorTest : public testing::TestWithParam<Order> {
 protected:
  Order order() const { return GetParam(); }
  bool min() const { return GetParam() == Order::kMin; }
};

TEST_P(HeapSelectorTest, NewSelectorMakesTheRightOrder) {
  SelectorOptions options;
  options.kind = min() ? SelectorKind::kMinHeap : SelectorKind::kMaxHeap;
  std::unique_ptr<Selector> selector = NewSelector(options);
  ASSERT_NE(selector, nullptr);
  const auto* heap = dynamic_cast<const HeapSelector*>(selector.get());
  ASSERT_NE(heap, nullptr);
  EXPECT_EQ(heap->order(), order());
  EXPECT_FALSE(selector->has_mass());
  selector->Insert(Item(1, 2.0));
  selector->Insert(Item(2, 1.0));
  selector->Insert(Item(3, 3.0));
  EXPECT_TRUE(selector->has_mass());
  util::Random rng(1);
  const Selection s = selector->Select(rng);
  EXPECT_EQ(s.key, min() ? Item(2, 0).key : Item(3, 0).key);
  EXPECT_EQ(s.probability, 1.0);
}

TEST_P(HeapSelectorTest, SelectsLowestOrHighestPriorityAndIgnoresStrata) {
  HeapSelector selector(order());
  util::Random rng(testing_util::TestSeed());
  selector.Insert(Item(1, 5.0));
  selector.Insert(Item(2, 0.0));  // priority 0 is an ordinary priority here
  selector.Insert(Item(3, 9.5));
  selector.Insert(Item(4, 7.0));
  const ItemKey want = min() ? Item(2, 0).key : Item(3, 0).key;
  for (int64_t b = 0; b < 8; ++b) {
    const Selection s = selector.Select(rng, Stratum{b, 8});
    EXPECT_EQ(s.key, want);
    EXPECT_EQ(s.probability, 1.0);
  }
  EXPECT_EQ(selector.size(), 4u);  // Select does not remove
  EXPECT_TRUE(selector.has_mass());
}

TEST_P(HeapSelectorTest, TiesGoToTheOldest) {
  HeapSelector selector(order());
  util::Random rng(1);
  // Sparse increasing seqs whose keys are in the opposite order.
  std::vector<ItemRef> items;
  for (uint64_t i = 0; i < 10; ++i) {
    const ItemRef item{MakeItemKey(100 - i, 0), 5 * i + 3, 1.5};
    items.push_back(item);
    selector.Insert(item);
  }
  EXPECT_EQ(selector.Select(rng).key, items[0].key);
  // Raising (min) or lowering (max) the oldest hands over to the next
  // oldest; moving it back restores it, since ties go by seq, not by when
  // the priority was set.
  selector.Update(items[0], min() ? 2.0 : 1.0);
  EXPECT_EQ(selector.Select(rng).key, items[1].key);
  selector.Update(ItemRef{items[0].key, items[0].seq, min() ? 2.0 : 1.0}, 1.5);
  EXPECT_EQ(selector.Select(rng).key, items[0].key);
  // A newer item moved away and back onto the tie does not jump ahead of
  // older ones.
  const double away = min() ? 3.0 : 0.5;
  selector.Update(items[9], away);
  EXPECT_EQ(selector.Select(rng).key, items[0].key);
  selector.Update(ItemRef{items[9].key, items[9].seq, away}, 1.5);
  EXPECT_EQ(selector.Select(rng).key, items[0].key);
  // Draining by Select + Remove gives insertion order.
  for (const ItemRef& item : items) {
    ASSERT_EQ(selector.Select(rng).key, item.key);
    selector.Remove(item);
  }
  EXPECT_EQ(selector.size(), 0u);
  EXPECT_FALSE(selector.has_mass());
}

TEST_P(HeapSelectorTest, DrainsInPriorityOrder) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  HeapSelector selector(order());
  std::vector<ItemRef> items;
  for (uint64_t seq = 1; seq <= 500; ++seq) {
    // Few distinct priorities, so there are many ties.
    const ItemRef item = Item(seq, static_cast<double>(rng.Uniform(20)) / 4);
    items.push_back(item);
    selector.Insert(item);
  }
  std::vector<ItemRef> want = items;
  std::stable_sort(want.begin(), want.end(), [this](const ItemRef& a, const ItemRef& b) {
    return min() ? a.priority < b.priority : a.priority > b.priority;
  });
  std::map<ItemKey, ItemRef> refs;
  for (const ItemRef& item : items) refs[item.key] = item;
  for (const ItemRef& item : want) {
    const Selection s = selector.Select(rng);
    ASSERT_EQ(s.key, item.key);
    selector.Remove(refs.at(s.key));
  }
  EXPECT_EQ(selector.size(), 0u);
}

// Random inserts, updates and removals against a linear-scan model.
TEST_P(HeapSelectorTest, MatchesAReferenceUnderRandomOperations) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  HeapSelector selector(order());
  std::map<ItemKey, ItemRef> model;
  uint64_t next_seq = 1;
  auto random_priority = [&rng]() {
    // Small integers for ties, occasional zeros and wide values.
    switch (rng.Uniform(4)) {
      case 0:
        return 0.0;
      case 1:
        return static_cast<double>(rng.Uniform(10));
      case 2:
        return rng.NextDouble() * 1e6;
      default:
        return rng.NextDouble() * 1e-6;
    }
  };
  for (int step = 0; step < 20000; ++step) {
    const uint64_t op = rng.Uniform(10);
    if (model.empty() || op < 4) {
      const ItemRef item = Item(next_seq++, random_priority());
      selector.Insert(item);
      model[item.key] = item;
    } else if (op < 7) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      // Often the selected item, as a sampler that consumes it would.
      if (rng.Uniform(2) == 0) it = model.find(Expected(model, order()));
      selector.Remove(it->second);
      model.erase(it);
    } else {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      if (rng.Uniform(2) == 0) it = model.find(Expected(model, order()));
      const double priority = random_priority();
      selector.Update(it->second, priority);
      it->second.priority = priority;
    }
    ASSERT_EQ(selector.size(), model.size());
    if (model.empty()) continue;
    const Selection s = selector.Select(rng);
    ASSERT_EQ(s.key, Expected(model, order())) << "step " << step;
    ASSERT_EQ(s.probability, 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(MinAndMax, HeapSelectorTest, testing::Values(Order::kMin, Order::kMax),
                         [](const testing::TestParamInfo<Order>& info) {
                           return info.param == Order::kMin ? "Min" : "Max";
                         });

}  // namespace
}  // namespace replaydb::index
