// UniformSelector finding items by slot (what a table drawing uniformly on
// a GPU uses, mirroring its dense array there): the
// distribution it draws from, and its insert/remove invariants against a
// simple model, with fresh random inputs each run.
#include "index/selectors/uniform_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "index/selectors/block_uniform_selector.h"
#include "index/selectors/selector.h"
#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

// A fair selector fails a check with probability 1e-6.
double ChiSquareCritical(int dof) {
  return testing_util::ChiSquareCriticalAt(dof, 1e-6);
}

// The model: present items by slot, and the on_place mirror of positions.
struct Model {
  std::map<int64_t, ItemRef> by_slot;
  std::vector<int64_t> mirror;  // what set_on_place reported, by position
};

// Checks the selector against the model: size, and that the mirror's first
// size() positions hold exactly the present slots, once each.
void CheckAgainst(const UniformSelector& selector, const Model& model) {
  ASSERT_EQ(selector.size(), model.by_slot.size());
  std::multiset<int64_t> placed(model.mirror.begin(),
                                model.mirror.begin() + static_cast<long>(selector.size()));
  std::multiset<int64_t> present;
  for (const auto& [slot, item] : model.by_slot) present.insert(slot);
  ASSERT_EQ(placed, present);
}

// Chi-square statistic of `draws` draws against the uniform distribution
// over the model's items; fails on a key outside them or a probability other
// than 1 / size.
double ChiSquare(const UniformSelector& selector, const Model& model, util::Random& rng,
                 int64_t draws) {
  std::map<ItemKey, int64_t> counts;
  for (const auto& [slot, item] : model.by_slot) counts[item.key] = 0;
  const double n = static_cast<double>(model.by_slot.size());
  for (int64_t i = 0; i < draws; ++i) {
    const Selection s = selector.Select(rng);
    auto it = counts.find(s.key);
    if (it == counts.end()) {
      ADD_FAILURE() << "drew key " << s.key << ", which is not present";
      return 1e300;
    }
    if (s.probability != 1.0 / n) {
      ADD_FAILURE() << "probability " << s.probability << " with " << n << " items";
      return 1e300;
    }
    ++it->second;
  }
  return testing_util::UniformChiSquare(counts, static_cast<double>(draws) / n);
}

// A table's pattern: trajectories fill blocks of `block_steps` slots, one
// item per slot, and leave whole (their items removed in order); others
// lose single items (max_times_sampled). Slots are reused by new items with
// new keys. After every operation the selector matches the model.
TEST(UniformSlotSelectorTest, MatchesAModelUnderRandomInsertsAndRemovals) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kBlockSteps = 8;
  constexpr int64_t kBlocks = 32;
  UniformSelector selector(kBlocks * kBlockSteps, kBlockSteps);
  Model model;
  selector.set_on_place([&](size_t position, int64_t slot) {
    if (model.mirror.size() <= position) model.mirror.resize(position + 1, -1);
    model.mirror[position] = slot;
  });
  std::vector<int64_t> free_blocks;
  for (int64_t b = kBlocks - 1; b >= 0; --b) free_blocks.push_back(b);
  std::vector<int64_t> used_blocks;
  uint64_t next_trajectory = 1;
  uint64_t next_seq = 1;
  for (int op = 0; op < 20000; ++op) {
    const uint64_t what = rng.Uniform(10);
    if (what < 5 && !free_blocks.empty()) {
      // A trajectory takes a random free block and fills part or all of it.
      const size_t pick = rng.Uniform(free_blocks.size());
      const int64_t block = free_blocks[pick];
      free_blocks.erase(free_blocks.begin() + static_cast<long>(pick));
      used_blocks.push_back(block);
      const uint64_t id = next_trajectory++;
      const int64_t items = 1 + static_cast<int64_t>(rng.Uniform(kBlockSteps));
      for (int64_t step = 0; step < items; ++step) {
        const ItemRef item{MakeItemKey(id, step), next_seq++, 0.0, block * kBlockSteps + step};
        selector.Insert(item);
        model.by_slot[item.slot] = item;
      }
    } else if (what < 8 && !used_blocks.empty()) {
      // A whole block's items leave, in slot order; the block is free again.
      const size_t pick = rng.Uniform(used_blocks.size());
      const int64_t block = used_blocks[pick];
      used_blocks.erase(used_blocks.begin() + static_cast<long>(pick));
      free_blocks.push_back(block);
      for (int64_t slot = block * kBlockSteps; slot < (block + 1) * kBlockSteps; ++slot) {
        auto it = model.by_slot.find(slot);
        if (it == model.by_slot.end()) continue;
        selector.Remove(it->second);
        model.by_slot.erase(it);
      }
    } else if (!model.by_slot.empty()) {
      // One item leaves (its slot stays unused until its block is free).
      auto it = model.by_slot.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.by_slot.size())));
      if (rng.Uniform(2) == 0) selector.Update(it->second, 3.0);  // changes nothing
      selector.Remove(it->second);
      model.by_slot.erase(it);
    }
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model));
    if (!model.by_slot.empty()) {
      const Selection s = selector.Select(rng);
      ASSERT_TRUE(std::any_of(model.by_slot.begin(), model.by_slot.end(),
                              [&](const auto& e) { return e.second.key == s.key; }));
    }
  }
  // Every present item comes out once when drained by Select + Remove.
  std::set<ItemKey> drained;
  while (selector.size() > 0) {
    const Selection s = selector.Select(rng);
    auto it = std::find_if(model.by_slot.begin(), model.by_slot.end(),
                           [&](const auto& e) { return e.second.key == s.key; });
    ASSERT_NE(it, model.by_slot.end());
    ASSERT_TRUE(drained.insert(s.key).second);
    selector.Remove(it->second);
    model.by_slot.erase(it);
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model));
  }
  EXPECT_TRUE(model.by_slot.empty());
}

// Draws stay uniform over what is present after removals that refill holes
// from the end, with slots handed out in random order (high ones first, so
// the flat index grows by jumps) and reused by new items.
TEST(UniformSlotSelectorTest, DrawsUniformlyAfterRemovalsAndSlotReuse) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kSlots = 4096;
  UniformSelector selector(kSlots);
  Model model;
  std::vector<int64_t> slots(kSlots);
  for (int64_t i = 0; i < kSlots; ++i) slots[static_cast<size_t>(i)] = i;
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(seed));
  uint64_t seq = 1;
  // 300 items at random slots, then a random 200 of them leave and 100 new
  // items take freed slots.
  for (size_t i = 0; i < 300; ++i) {
    const ItemRef item{MakeItemKey(seq, 0), seq, 0.0, slots[i]};
    ++seq;
    selector.Insert(item);
    model.by_slot[item.slot] = item;
  }
  std::vector<int64_t> freed;
  for (int i = 0; i < 200; ++i) {
    auto it = model.by_slot.begin();
    std::advance(it, static_cast<long>(rng.Uniform(model.by_slot.size())));
    freed.push_back(it->first);
    selector.Remove(it->second);
    model.by_slot.erase(it);
  }
  for (size_t i = 0; i < 100; ++i) {
    const ItemRef item{MakeItemKey(seq, 1), seq, 0.0, freed[i]};
    ++seq;
    selector.Insert(item);
    model.by_slot[item.slot] = item;
  }
  ASSERT_EQ(selector.size(), 200u);
  EXPECT_LT(ChiSquare(selector, model, rng, 400000), ChiSquareCritical(199));
}

// The last slot of the range works, and a slot far above the others grows
// the index without disturbing them.
TEST(UniformSlotSelectorTest, SlotsUpToTheLastOne) {
  constexpr int64_t kSlots = 1000;
  UniformSelector selector(kSlots);
  util::Random rng(testing_util::TestSeed());
  const ItemRef low{MakeItemKey(1, 0), 1, 0.0, 0};
  const ItemRef high{MakeItemKey(2, 0), 2, 0.0, kSlots - 1};
  selector.Insert(low);
  selector.Insert(high);
  EXPECT_EQ(selector.size(), 2u);
  selector.Remove(low);
  EXPECT_EQ(selector.Select(rng).key, high.key);
  EXPECT_EQ(selector.Select(rng).probability, 1.0);
  selector.Remove(high);
  EXPECT_EQ(selector.size(), 0u);
  EXPECT_FALSE(selector.has_mass());
  // The same slots again, new keys.
  const ItemRef again{MakeItemKey(3, 5), 3, 0.0, kSlots - 1};
  selector.Insert(again);
  EXPECT_EQ(selector.Select(rng).key, again.key);
}

// NewSelector makes a uniform selector that finds items by slot (a
// BlockUniformSelector) when given the slots, and by key otherwise (or
// beyond the 32-bit slots).
TEST(UniformSlotSelectorTest, NewSelectorChoosesBySlots) {
  util::Random rng(testing_util::TestSeed());
  SelectorOptions options;
  options.kind = SelectorKind::kUniform;
  options.slots = 64;
  std::unique_ptr<Selector> by_slot = NewSelector(options);
  ASSERT_NE(by_slot, nullptr);
  // The same key at two different slots (a trajectory loaded back into
  // other blocks) is two different places.
  const ItemRef first{MakeItemKey(7, 3), 1, 0.0, 10};
  by_slot->Insert(first);
  by_slot->Remove(first);
  const ItemRef moved{MakeItemKey(7, 3), 2, 0.0, 40};
  by_slot->Insert(moved);
  EXPECT_EQ(by_slot->Select(rng).key, moved.key);
  EXPECT_EQ(by_slot->size(), 1u);

  options.slots = BlockUniformSelector::kMaxSlots + 1;
  std::unique_ptr<Selector> by_key = NewSelector(options);
  ASSERT_NE(by_key, nullptr);
  by_key->Insert({MakeItemKey(1, 0), 1});  // no slot needed
  EXPECT_EQ(by_key->size(), 1u);
  // Other kinds ignore the slots.
  options.kind = SelectorKind::kFifo;
  std::unique_ptr<Selector> fifo = NewSelector(options);
  ASSERT_NE(fifo, nullptr);
  fifo->Insert({MakeItemKey(1, 0), 1});
  EXPECT_EQ(fifo->Select(rng).key, MakeItemKey(1, 0));
}

}  // namespace
}  // namespace replaydb::index
