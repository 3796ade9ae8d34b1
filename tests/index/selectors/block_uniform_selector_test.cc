// BlockUniformSelector (what a table drawing uniformly on the host uses):
// its items against a simple model under random inserts, single removals,
// whole-block removals and slot reuse; the distribution it draws from; the
// bound on the entries it keeps; and generations that wrap around. Fresh
// random inputs each run (REPLAYDB_TEST_SEED replays one).
#include "index/selectors/block_uniform_selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "index/selectors/selector.h"
#include "tests/test_util.h"
#include "util/fork_join.h"
#include "util/random.h"

namespace replaydb::index {
namespace {

using testing_util::TestSeed;

// Present items by slot.
using Model = std::map<int64_t, ItemRef>;

// Size, the entries bound, and draws: every draw is a present key with
// probability 1 / size.
void CheckAgainst(const BlockUniformSelector& selector, const Model& model, util::Random& rng) {
  ASSERT_EQ(selector.size(), model.size());
  ASSERT_LE(selector.entries(), 2 * model.size() + 64);
  if (model.empty()) return;
  std::set<ItemKey> keys;
  for (const auto& [slot, item] : model) keys.insert(item.key);
  for (int i = 0; i < 8; ++i) {
    const Selection s = selector.Select(rng);
    ASSERT_TRUE(keys.count(s.key)) << "drew key " << s.key << ", which is not present";
    ASSERT_EQ(s.probability, 1.0 / static_cast<double>(model.size()));
  }
  // The batched draws too (their picks made first, removed entries drawn
  // again after).
  std::vector<Selection> many(1 + rng.Uniform(16));
  selector.SelectMany(rng, /*stratified=*/false, many);
  for (const Selection& s : many) {
    ASSERT_TRUE(keys.count(s.key)) << "SelectMany drew key " << s.key << ", which is not present";
    ASSERT_EQ(s.probability, 1.0 / static_cast<double>(model.size()));
  }
}

// A table's pattern, with blocks of `block_steps` slots: a trajectory takes
// a free block and fills a prefix of it (one item per slot; sometimes over
// several calls, as appends do); blocks leave whole (RemoveBlocks, or item
// by item in slot order with RemoveMany); single items leave
// (max_times_sampled), and now and then one comes back into the slot it left
// before its block is reused. After every operation the selector matches
// the model.
void RunModel(int64_t block_steps, uint64_t seed) {
  SCOPED_TRACE("block_steps " + std::to_string(block_steps) + ", seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kBlocks = 40;
  BlockUniformSelector selector(kBlocks * block_steps, block_steps);
  Model model;
  std::vector<int64_t> free_blocks;
  for (int64_t b = kBlocks - 1; b >= 0; --b) free_blocks.push_back(b);
  // Used blocks: their trajectory id and how many slots have had items.
  std::map<int64_t, std::pair<uint64_t, int64_t>> used;
  std::vector<ItemRef> left_alone;  // single removals whose block is still used
  uint64_t next_trajectory = 1;
  uint64_t next_seq = 1;
  const auto fill = [&](int64_t block, int64_t count) {
    auto& [id, filled] = used[block];
    std::vector<ItemRef> batch;
    for (int64_t i = 0; i < count && filled < block_steps; ++i, ++filled) {
      batch.push_back({MakeItemKey(id, filled), next_seq++, 0.0, block * block_steps + filled});
      model[batch.back().slot] = batch.back();
    }
    selector.InsertMany(batch);
  };
  const auto drop_block = [&](int64_t block) {
    used.erase(block);
    std::erase_if(left_alone, [&](const ItemRef& r) { return r.slot / block_steps == block; });
    free_blocks.push_back(block);
  };
  for (int op = 0; op < 30000; ++op) {
    const uint64_t what = rng.Uniform(20);
    if (what < 6 && !free_blocks.empty()) {
      const size_t pick = rng.Uniform(free_blocks.size());
      const int64_t block = free_blocks[pick];
      free_blocks.erase(free_blocks.begin() + static_cast<long>(pick));
      used[block] = {next_trajectory++, 0};
      fill(block, 1 + static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(block_steps))));
    } else if (what < 9 && !used.empty()) {
      auto it = used.begin();
      std::advance(it, static_cast<long>(rng.Uniform(used.size())));
      fill(it->first, 1 + static_cast<int64_t>(rng.Uniform(3)));
    } else if (what < 12 && !used.empty()) {
      // Several blocks leave at once (a trajectory's blocks).
      std::vector<int64_t> blocks;
      int64_t expect = 0;
      const uint64_t n = 1 + rng.Uniform(std::min<uint64_t>(3, used.size()));
      for (uint64_t k = 0; k < n && !used.empty(); ++k) {
        auto it = used.begin();
        std::advance(it, static_cast<long>(rng.Uniform(used.size())));
        const int64_t block = it->first;
        blocks.push_back(block);
        for (int64_t s = block * block_steps; s < (block + 1) * block_steps; ++s) {
          expect += static_cast<int64_t>(model.erase(s));
        }
        drop_block(block);
      }
      ASSERT_EQ(selector.RemoveBlocks(blocks), expect);
    } else if (what < 14 && !used.empty()) {
      auto it = used.begin();
      std::advance(it, static_cast<long>(rng.Uniform(used.size())));
      const int64_t block = it->first;
      std::vector<ItemRef> items;
      for (int64_t s = block * block_steps; s < (block + 1) * block_steps; ++s) {
        auto m = model.find(s);
        if (m == model.end()) continue;
        items.push_back(m->second);
        model.erase(m);
      }
      selector.RemoveMany(items);
      drop_block(block);
    } else if (what < 18 && !model.empty()) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng.Uniform(model.size())));
      selector.Update(it->second, 2.5);  // changes nothing
      selector.Remove(it->second);
      left_alone.push_back(it->second);
      model.erase(it);
    } else if (!left_alone.empty()) {
      // An item comes back into the slot it left, its block not reused.
      const size_t pick = rng.Uniform(left_alone.size());
      ItemRef item = left_alone[pick];
      left_alone.erase(left_alone.begin() + static_cast<long>(pick));
      item.seq = next_seq++;
      selector.Insert(item);
      model[item.slot] = item;
    }
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model, rng));
  }
  // Drained by Select + Remove, every present item comes out once.
  std::set<ItemKey> drained;
  while (selector.size() > 0) {
    const Selection s = selector.Select(rng);
    auto it = std::find_if(model.begin(), model.end(),
                           [&](const auto& e) { return e.second.key == s.key; });
    ASSERT_NE(it, model.end());
    ASSERT_TRUE(drained.insert(s.key).second);
    selector.Remove(it->second);
    model.erase(it);
  }
  EXPECT_TRUE(model.empty());
  EXPECT_EQ(selector.entries(), 0u);
}

TEST(BlockUniformSelectorTest, MatchesAModelWithBlocksOfAPowerOfTwo) {
  RunModel(8, TestSeed());
}

TEST(BlockUniformSelectorTest, MatchesAModelWithOtherBlockSizes) {
  const uint64_t seed = TestSeed();
  RunModel(1, seed);
  RunModel(6, seed + 1);
  RunModel(67, seed + 2);  // a block's bits span two words
}

// Draws are uniform over what is present after whole-block removals (their
// entries left behind), single removals and reused blocks.
TEST(BlockUniformSelectorTest, DrawsUniformlyAfterRemovals) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kBlockSteps = 16;
  constexpr int64_t kBlocks = 64;
  BlockUniformSelector selector(kBlocks * kBlockSteps, kBlockSteps);
  Model model;
  uint64_t seq = 1;
  const auto fill = [&](int64_t block, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const ItemRef item{MakeItemKey(seq, i), seq * 100 + static_cast<uint64_t>(i), 0.0,
                         block * kBlockSteps + i};
      selector.Insert(item);
      model[item.slot] = item;
    }
    ++seq;
  };
  for (int64_t b = 0; b < kBlocks; ++b) {
    fill(b, 1 + static_cast<int64_t>(rng.Uniform(kBlockSteps)));
  }
  // Half the blocks leave whole, a third of the rest's items leave alone,
  // and a quarter of the freed blocks take new items.
  std::vector<int64_t> gone;
  for (int64_t b = 0; b < kBlocks; ++b) {
    if (rng.Uniform(2) == 0) gone.push_back(b);
  }
  for (int64_t b : gone) {
    for (int64_t s = b * kBlockSteps; s < (b + 1) * kBlockSteps; ++s) model.erase(s);
  }
  selector.RemoveBlocks(gone);
  std::vector<int64_t> singles;
  for (const auto& [slot, item] : model) {
    if (rng.Uniform(3) == 0) singles.push_back(slot);
  }
  for (int64_t slot : singles) {
    selector.Remove(model.at(slot));
    model.erase(slot);
  }
  for (size_t i = 0; i < gone.size() / 4; ++i) {
    fill(gone[i], 1 + static_cast<int64_t>(rng.Uniform(kBlockSteps)));
  }
  ASSERT_EQ(selector.size(), model.size());
  ASSERT_GT(model.size(), 50u);

  std::map<ItemKey, int64_t> counts;
  for (const auto& [slot, item] : model) counts[item.key] = 0;
  const int64_t draws = static_cast<int64_t>(model.size()) * 2000;
  for (int64_t i = 0; i < draws; ++i) {
    auto it = counts.find(selector.Select(rng).key);
    ASSERT_NE(it, counts.end());
    ++it->second;
  }
  const double expected = static_cast<double>(draws) / static_cast<double>(model.size());
  EXPECT_LT(testing_util::UniformChiSquare(counts, expected), testing_util::ChiSquareCriticalAt(static_cast<double>(model.size() - 1), 1e-6));
}

// A table evicting its oldest trajectories first (the vector writer's
// pattern: every environment's block gets one item per step, interleaved):
// the removed items' entries are at the front, the removals neither pass
// over them nor compact, and the next insert passes over them all: only
// present entries are listed then; the array's front is given back as it
// grows.
TEST(BlockUniformSelectorTest, OldestFirstRemovalsLeaveTheFront) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kBlockSteps = 8;
  constexpr int64_t kGenerations = 3;
  const int64_t envs = 5 + static_cast<int64_t>(rng.Uniform(20));
  BlockUniformSelector selector(envs * kGenerations * kBlockSteps, kBlockSteps);
  Model model;
  std::vector<int64_t> free_blocks;
  for (int64_t b = envs * kGenerations - 1; b >= 0; --b) free_blocks.push_back(b);
  std::deque<std::vector<int64_t>> generations;  // their blocks, oldest first
  uint64_t next_trajectory = 1;
  uint64_t next_seq = 1;
  for (int round = 0; round < 30; ++round) {
    if (static_cast<int64_t>(generations.size()) == kGenerations) {
      for (const int64_t block : generations.front()) {
        int64_t expect = 0;
        for (int64_t s = block * kBlockSteps; s < (block + 1) * kBlockSteps; ++s) {
          expect += static_cast<int64_t>(model.erase(s));
        }
        const size_t listed = selector.entries();
        ASSERT_EQ(selector.RemoveBlocks(std::span<const int64_t>(&block, 1)), expect);
        // Neither passed over nor compacted.
        ASSERT_EQ(selector.entries(), listed);
        free_blocks.push_back(block);
        ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model, rng));
      }
      generations.pop_front();
    }
    // A new trajectory per environment, filled in lockstep to random lengths.
    std::vector<int64_t> blocks;
    std::vector<int64_t> lengths;
    for (int64_t e = 0; e < envs; ++e) {
      blocks.push_back(free_blocks.back());
      free_blocks.pop_back();
      lengths.push_back(1 + static_cast<int64_t>(rng.Uniform(kBlockSteps)));
    }
    const uint64_t first_trajectory = next_trajectory;
    next_trajectory += static_cast<uint64_t>(envs);
    for (int64_t step = 0; step < kBlockSteps; ++step) {
      std::vector<ItemRef> batch;
      for (int64_t e = 0; e < envs; ++e) {
        if (step >= lengths[e]) continue;
        batch.push_back({MakeItemKey(first_trajectory + static_cast<uint64_t>(e), step),
                         next_seq++, 0.0, blocks[e] * kBlockSteps + step});
        model[batch.back().slot] = batch.back();
      }
      selector.InsertMany(batch);
      ASSERT_EQ(selector.entries(), selector.size());
    }
    generations.push_back(blocks);
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model, rng));
  }
}

// A vector append's inserts (one item per environment, each in its own
// block) split over a ForkJoin leave the selector exactly as InsertMany
// does: same size, same entries and the same draws from the same seed;
// also when an item comes back into a slot it left alone (Insert's
// compaction, which InsertManyDistinctBlocks leaves to InsertMany), and
// across generations of blocks removed oldest first, the batches passing
// over their entries at the front (and moving the listed ones to the start
// of the array when the front left behind outgrows them).
TEST(BlockUniformSelectorTest, InsertManyDistinctBlocksMatchesInsertMany) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  util::Random rng(seed);
  constexpr int64_t kBlockSteps = 8;
  constexpr int64_t kGenerations = 3;
  // Enough environments that 3 parts share the work, and that a
  // generation's entries take more than one window of the front's pass
  // (3 x 8,192).
  const int64_t envs = 3200 + static_cast<int64_t>(rng.Uniform(1000));
  const int64_t slots = envs * kGenerations * kBlockSteps;
  BlockUniformSelector serial(slots, kBlockSteps);
  BlockUniformSelector shared(slots, kBlockSteps);
  util::ForkJoin fork_join(3);
  std::vector<int64_t> free_blocks;
  for (int64_t b = envs * kGenerations - 1; b >= 0; --b) free_blocks.push_back(b);
  std::deque<std::vector<int64_t>> generations;
  uint64_t next_trajectory = 1;
  uint64_t next_seq = 1;
  int64_t comebacks = 0;
  const auto expect_same = [&](const char* after) {
    SCOPED_TRACE(after);
    ASSERT_EQ(shared.size(), serial.size());
    ASSERT_EQ(shared.entries(), serial.entries());
    if (serial.size() == 0) return;
    const uint64_t draw_seed = rng.Next();
    util::Random a(draw_seed);
    util::Random b(draw_seed);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(shared.Select(a).key, serial.Select(b).key);
  };
  for (int round = 0; round < 12; ++round) {
    if (static_cast<int64_t>(generations.size()) == kGenerations) {
      const std::vector<int64_t>& oldest = generations.front();
      ASSERT_EQ(shared.RemoveBlocks(oldest), serial.RemoveBlocks(oldest));
      for (const int64_t block : oldest) free_blocks.push_back(block);
      generations.pop_front();
      ASSERT_NO_FATAL_FAILURE(expect_same("removing the oldest generation"));
    }
    std::vector<int64_t> blocks(static_cast<size_t>(envs));
    for (int64_t& block : blocks) {
      block = free_blocks.back();
      free_blocks.pop_back();
    }
    const uint64_t first_trajectory = next_trajectory;
    next_trajectory += static_cast<uint64_t>(envs);
    std::vector<int64_t> filled(static_cast<size_t>(envs), 0);
    // Per environment, an item that left alone and may come back.
    std::vector<std::optional<ItemRef>> left(static_cast<size_t>(envs));
    for (int64_t step = 0; step < kBlockSteps; ++step) {
      std::vector<ItemRef> batch;
      for (int64_t e = 0; e < envs; ++e) {
        std::optional<ItemRef>& gone = left[static_cast<size_t>(e)];
        if (gone && rng.Uniform(2) == 0) {
          batch.push_back(*gone);  // back into the slot it left
          gone.reset();
          ++comebacks;
          continue;
        }
        int64_t& f = filled[static_cast<size_t>(e)];
        if (f == kBlockSteps || rng.Uniform(8) == 0) continue;  // this one skips a step
        batch.push_back({MakeItemKey(first_trajectory + static_cast<uint64_t>(e), f), next_seq++,
                         0.0, blocks[static_cast<size_t>(e)] * kBlockSteps + f});
        ++f;
      }
      serial.InsertMany(batch);
      shared.InsertManyDistinctBlocks(batch, fork_join);
      ASSERT_NO_FATAL_FAILURE(expect_same("a batch"));
      // The front passed over is given back once it outgrows the rest.
      ASSERT_LE(serial.held_entries(), 2 * serial.entries());
      ASSERT_LE(shared.held_entries(), 2 * shared.entries());
      // A few items leave alone (max_times_sampled), in rounds 1 and 3 only:
      // the others' batches all take the shared way (and from round 4 on,
      // the front left behind grows until the listed entries move).
      for (const ItemRef& item : batch) {
        if (round % 2 == 0 || round > 3 || rng.Uniform(50) != 0) continue;
        // The environment whose block holds the slot.
        size_t owner = static_cast<size_t>(envs);
        for (size_t i = 0; i < blocks.size(); ++i) {
          if (blocks[i] == item.slot / kBlockSteps) owner = i;
        }
        ASSERT_LT(owner, static_cast<size_t>(envs));
        if (left[owner]) continue;
        serial.Remove(item);
        shared.Remove(item);
        left[owner] = item;
      }
      ASSERT_NO_FATAL_FAILURE(expect_same("single removals"));
    }
    generations.push_back(blocks);
  }
  EXPECT_GT(comebacks, 0);
}

// A block's generation passing the largest value starts again at 0 without
// bringing back items of earlier generations; the other blocks' items stay.
TEST(BlockUniformSelectorTest, GenerationsWrapAround) {
  util::Random rng(TestSeed());
  constexpr int64_t kBlockSteps = 4;
  BlockUniformSelector selector(8 * kBlockSteps, kBlockSteps,
                                0x7fffffffu - 2);  // generations are 31 bits
  Model model;
  // Block 1 keeps two items throughout.
  for (int64_t i = 0; i < 2; ++i) {
    const ItemRef item{MakeItemKey(1000, i), static_cast<uint64_t>(i + 1), 0.0, kBlockSteps + i};
    selector.Insert(item);
    model[item.slot] = item;
  }
  uint64_t seq = 10;
  // Block 0: filled and emptied again and again, by RemoveBlocks, by single
  // removals of every item, or by RemoveMany, past the wrap.
  for (uint64_t round = 0; round < 9; ++round) {
    std::vector<ItemRef> items;
    for (int64_t i = 0; i < kBlockSteps; ++i) {
      items.push_back({MakeItemKey(round + 1, i), seq++, 0.0, i});
      selector.Insert(items.back());
      model[i] = items.back();
    }
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model, rng));
    if (round % 3 == 0) {
      const int64_t block = 0;
      ASSERT_EQ(selector.RemoveBlocks(std::span<const int64_t>(&block, 1)), kBlockSteps);
    } else if (round % 3 == 1) {
      for (const ItemRef& item : items) selector.Remove(item);
    } else {
      selector.RemoveMany(items);
    }
    for (int64_t i = 0; i < kBlockSteps; ++i) model.erase(i);
    // Only block 1's items can come out, however many draws.
    for (int i = 0; i < 200; ++i) {
      const ItemKey key = selector.Select(rng).key;
      ASSERT_TRUE(key == model.at(kBlockSteps).key || key == model.at(kBlockSteps + 1).key);
    }
    ASSERT_NO_FATAL_FAILURE(CheckAgainst(selector, model, rng));
  }
}

// Blocks that never held an item, or hold none now, remove nothing.
TEST(BlockUniformSelectorTest, RemoveBlocksOfEmptyBlocks) {
  BlockUniformSelector selector(64, 8);
  const std::vector<int64_t> none = {0, 7};
  EXPECT_EQ(selector.RemoveBlocks(none), 0);
  const ItemRef item{MakeItemKey(1, 0), 1, 0.0, 8};
  selector.Insert(item);
  selector.Remove(item);
  const std::vector<int64_t> one = {1};
  EXPECT_EQ(selector.RemoveBlocks(one), 0);
  selector.Insert({MakeItemKey(2, 0), 2, 0.0, 8});
  EXPECT_EQ(selector.RemoveBlocks(one), 1);
  EXPECT_EQ(selector.size(), 0u);
  EXPECT_FALSE(selector.has_mass());
}

// The other selectors cannot remove by block: the table then removes item
// by item.
TEST(BlockUniformSelectorTest, OtherSelectorsDoNotRemoveByBlock) {
  SelectorOptions options;
  options.kind = SelectorKind::kPrioritized;
  std::unique_ptr<Selector> prioritized = NewSelector(options);
  prioritized->Insert({MakeItemKey(1, 0), 1, 1.0, 0});
  const std::vector<int64_t> block = {0};
  EXPECT_EQ(prioritized->RemoveBlocks(block), -1);
  EXPECT_EQ(prioritized->size(), 1u);
}

}  // namespace
}  // namespace replaydb::index
