#include "index/trajectory_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "tests/test_util.h"

namespace replaydb::index {
namespace {

class TrajectoryStoreTest : public ::testing::Test {
 protected:
  std::mt19937_64 rng_{testing_util::TestSeed()};

  int64_t RandomIn(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
};

// Gives t `blocks` consecutive blocks from *next_block and `items` items of
// the given priorities (each times_sampled as given).
void Fill(TrajectoryStore& store, Trajectory& t, int64_t* next_block, int64_t blocks,
          const std::vector<double>& priorities, const std::vector<uint32_t>& times = {}) {
  for (int64_t b = 0; b < blocks; ++b) t.blocks.push_back((*next_block)++);
  store.CoverBlocks(*next_block);
  t.length = blocks * store.block_steps();
  for (size_t i = 0; i < priorities.size(); ++i) {
    ItemState& item = store.ItemAt(t, static_cast<int64_t>(i));
    item.priority = priorities[i];
    item.times_sampled = times.empty() ? 0 : times[i];
    ++t.items_created;
  }
  t.live_items = store.CountLive(t);
}

TEST_F(TrajectoryStoreTest, StartNewHandsOutIdsInOrderUntilTheyRunOut) {
  TrajectoryStore store({/*block_steps=*/4});
  const int64_t n = RandomIn(1, 50);
  uint64_t last_seq = 0;
  for (int64_t i = 1; i <= n; ++i) {
    std::shared_ptr<Trajectory> t = store.StartNew();
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->id, static_cast<uint64_t>(i));
    EXPECT_GT(t->hot_seq, last_seq);
    last_seq = t->hot_seq;
    EXPECT_EQ(store.Find(t->id), t.get());
    EXPECT_EQ(store.FindShared(t->id), t);
  }
  EXPECT_EQ(store.size(), static_cast<size_t>(n));
  EXPECT_EQ(store.next_id(), static_cast<uint64_t>(n + 1));
  EXPECT_EQ(store.Find(static_cast<uint64_t>(n + 1)), nullptr);
  EXPECT_EQ(store.FindShared(0), nullptr);

  // The last id there is, then none.
  store.set_next_id(kMaxTrajectoryId);
  std::shared_ptr<Trajectory> last = store.StartNew();
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->id, kMaxTrajectoryId);
  EXPECT_EQ(store.StartNew(), nullptr);
  EXPECT_EQ(store.size(), static_cast<size_t>(n + 1));
}

TEST_F(TrajectoryStoreTest, InsertedAndNotedIdsKeepNextIdAbove) {
  TrajectoryStore store({/*block_steps=*/8});
  const uint64_t id = static_cast<uint64_t>(RandomIn(10, 1000));
  std::shared_ptr<Trajectory> t = store.Make(id);
  EXPECT_EQ(t->id, id);
  EXPECT_EQ(store.Find(id), nullptr) << "Make does not insert";
  store.Insert(t);
  EXPECT_EQ(store.Find(id), t.get());
  EXPECT_EQ(store.next_id(), id + 1);
  store.NoteId(id - 5);
  EXPECT_EQ(store.next_id(), id + 1) << "a smaller id changes nothing";
  store.NoteId(id + 7);
  EXPECT_EQ(store.next_id(), id + 8);
  EXPECT_EQ(store.StartNew()->id, id + 8);
}

// Writer keys (by which a resuming remote writer finds its trajectory)
// are found with one lookup, against a walk over every trajectory as the
// reference: keys given, changed and given again to the same trajectory;
// trajectories made with a key before they are inserted, and erased.
TEST_F(TrajectoryStoreTest, WriterKeysFindTheirTrajectoryUntilItLeavesTheStore) {
  TrajectoryStore store({/*block_steps=*/4});
  std::vector<std::shared_ptr<Trajectory>> held;  // in the store
  std::vector<uint64_t> keys_given;
  const auto reference = [&](uint64_t key) -> Trajectory* {
    for (const auto& [id, t] : store.trajectories()) {
      if (t->writer_key == key) return t.get();
    }
    return nullptr;
  };
  const auto new_key = [&] {
    const uint64_t key = rng_() | 1;  // (random, as a writer's; never 0)
    keys_given.push_back(key);
    return key;
  };
  const int ops = static_cast<int>(RandomIn(200, 600));
  for (int op = 0; op < ops; ++op) {
    const int64_t what = RandomIn(0, 9);
    if (what <= 3 || held.empty()) {  // a new trajectory, a writer's or not (the store grows)
      std::shared_ptr<Trajectory> t;
      if (RandomIn(0, 1) == 0) {
        t = store.StartNew();
      } else {
        t = store.Make(store.next_id() + static_cast<uint64_t>(RandomIn(0, 3)));
        if (RandomIn(0, 1) == 0) store.SetWriterKey(*t, new_key());  // (before its Insert)
        store.Insert(t);
      }
      if (RandomIn(0, 2) > 0) store.SetWriterKey(*t, new_key());
      held.push_back(t);
    } else if (what <= 6) {  // a key given to one already there (or given again)
      Trajectory& t =
          *held[static_cast<size_t>(RandomIn(0, static_cast<int64_t>(held.size()) - 1))];
      store.SetWriterKey(t, RandomIn(0, 1) == 0 || t.writer_key == 0 ? new_key() : t.writer_key);
    } else {  // one leaves
      const size_t i = static_cast<size_t>(RandomIn(0, static_cast<int64_t>(held.size()) - 1));
      store.Erase(*held[i]);
      held[i] = held.back();
      held.pop_back();
    }
  }
  ASSERT_FALSE(keys_given.empty());
  size_t found = 0;
  for (const uint64_t key : keys_given) {
    Trajectory* want = reference(key);
    const std::shared_ptr<Trajectory> got = store.FindByWriterKey(key);
    EXPECT_EQ(got.get(), want) << "key " << key;
    found += want != nullptr ? 1 : 0;
  }
  EXPECT_GT(found, 0u);
  // The index holds the keys of trajectories in the store, no more.
  EXPECT_EQ(store.num_writer_keys(), found);
  EXPECT_EQ(store.FindByWriterKey(0), nullptr);
  for (const auto& t : held) store.Erase(*t);
  EXPECT_EQ(store.num_writer_keys(), 0u);
  for (const uint64_t key : keys_given) EXPECT_EQ(store.FindByWriterKey(key), nullptr);
}

TEST_F(TrajectoryStoreTest, OldestFirstEvictsEndedInTheOrderTheyEnteredThenOpenOnes) {
  TrajectoryStore store({/*block_steps=*/2});
  // Ids in random order of entry: the order is hot_seq's, not the ids'.
  const int64_t n = RandomIn(3, 20);
  std::vector<uint64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<uint64_t>(100 + i));
  std::shuffle(ids.begin(), ids.end(), rng_);
  int64_t next_block = 0;
  std::vector<std::shared_ptr<Trajectory>> entered;
  for (uint64_t id : ids) {
    std::shared_ptr<Trajectory> t = store.Make(id);
    Fill(store, *t, &next_block, 1, {1.0});
    store.Insert(t);
    entered.push_back(t);
  }
  const std::shared_ptr<Trajectory>& open = entered.back();
  // Every one but the last enters ends, in a random order of ending.
  std::vector<std::shared_ptr<Trajectory>> ending(entered.begin(), entered.end() - 1);
  std::shuffle(ending.begin(), ending.end(), rng_);
  for (const auto& t : ending) {
    const EndReason reason = RandomIn(0, 1) ? EndReason::kTerminal : EndReason::kTruncated;
    t->dirty = false;
    store.MarkEnded(*t, reason);
    EXPECT_TRUE(t->ended);
    EXPECT_TRUE(t->dirty);
    EXPECT_EQ(t->end_reason, reason);
  }
  EXPECT_EQ(store.num_ended(), static_cast<size_t>(n - 1));
  // Eviction takes them in the order they entered, never the requester.
  for (int64_t i = 0; i + 1 < n; ++i) {
    EXPECT_EQ(store.OldestEnded(), entered[static_cast<size_t>(i)].get());
    EXPECT_EQ(store.PickVictim(*open), entered[static_cast<size_t>(i)]);
    if (i + 2 < n) {
      EXPECT_EQ(store.PickVictim(*entered[static_cast<size_t>(i)]),
                entered[static_cast<size_t>(i + 1)]);
    }
    store.Erase(*entered[static_cast<size_t>(i)]);
    EXPECT_EQ(store.Find(entered[static_cast<size_t>(i)]->id), nullptr);
  }
  EXPECT_EQ(store.num_ended(), 0u);
  EXPECT_EQ(store.OldestEnded(), nullptr);
  // Only the open one is left: it is nobody's victim but another's.
  EXPECT_EQ(store.PickVictim(*open), nullptr);
  std::shared_ptr<Trajectory> other = store.StartNew();
  EXPECT_EQ(store.PickVictim(*other), open) << "an open trajectory holding blocks";
  EXPECT_EQ(store.PickVictim(*open), nullptr) << "one without blocks is no victim";
}

TEST_F(TrajectoryStoreTest, LowestPriorityEvictsByTheBestLiveItem) {
  const uint32_t max_times = 3;
  TrajectoryStore store({/*block_steps=*/4, max_times, EvictionPolicy::kLowestPriority});
  int64_t next_block = 0;
  const int64_t n = RandomIn(2, 12);
  std::vector<std::shared_ptr<Trajectory>> all;
  std::vector<double> best(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    std::shared_ptr<Trajectory> t = store.StartNew();
    const int64_t items = RandomIn(0, 8);
    std::vector<double> priorities;
    std::vector<uint32_t> times;
    double b = -1;  // no live item
    for (int64_t k = 0; k < items; ++k) {
      priorities.push_back(std::uniform_real_distribution<double>(0, 10)(rng_));
      times.push_back(static_cast<uint32_t>(RandomIn(0, max_times)));
      if (times.back() < max_times) b = std::max(b, priorities.back());
    }
    Fill(store, *t, &next_block, 2, priorities, times);
    store.MarkEnded(*t, EndReason::kTerminal);
    EXPECT_TRUE(t->ranked);
    EXPECT_EQ(t->best_priority, b);
    best[static_cast<size_t>(i)] = b;
    all.push_back(t);
  }
  const std::shared_ptr<Trajectory> requester = store.StartNew();
  // Victims by (best live priority, id).
  std::vector<std::pair<double, uint64_t>> order;
  for (int64_t i = 0; i < n; ++i) order.emplace_back(best[static_cast<size_t>(i)], all[i]->id);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(store.PickVictim(*requester)->id, order.front().second);

  // Raising the lowest one's item above every other re-places it.
  Trajectory& lowest = *store.Find(order.front().second);
  if (lowest.items_created > 0) {
    ItemState& item = store.ItemAt(lowest, 0);
    item.priority = 100;
    item.times_sampled = 0;
    store.Rank(lowest);
    EXPECT_EQ(lowest.best_priority, 100);
    const uint64_t next = order.size() > 1 ? order[1].second : lowest.id;
    EXPECT_EQ(store.PickVictim(*requester)->id, next);
  }
  store.Unrank(lowest);
  EXPECT_FALSE(lowest.ranked);
  store.Erase(lowest);
  EXPECT_EQ(store.num_ended(), static_cast<size_t>(n - 1));
}

TEST_F(TrajectoryStoreTest, RankIsANoOpUnderOldestFirst) {
  TrajectoryStore store({/*block_steps=*/4});
  int64_t next_block = 0;
  std::shared_ptr<Trajectory> t = store.StartNew();
  Fill(store, *t, &next_block, 1, {5.0, 1.0});
  store.MarkEnded(*t, EndReason::kTruncated);
  EXPECT_FALSE(t->ranked);
  store.Rank(*t);
  EXPECT_FALSE(t->ranked);
  EXPECT_EQ(t->best_priority, -1);
}

TEST_F(TrajectoryStoreTest, SlotMetadataIsOneEntryPerSlotAndSurvivesGrowth) {
  const int64_t bs = RandomIn(1, 40);
  TrajectoryStore store({bs});
  const int64_t blocks = RandomIn(1, 3 * TrajectoryStore::kMetaTileBlocks);
  store.CoverBlocks(blocks);
  // Every (block, step) has its own entry; a block's steps are kMetaStride apart.
  std::set<const SlotMeta*> seen;
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t s = 0; s < bs; ++s) {
      SlotMeta& m = store.MetaAt(b, s);
      EXPECT_TRUE(seen.insert(&m).second) << "block " << b << " step " << s;
      EXPECT_EQ(&store.Meta(b * bs + s), &m);
      if (s > 0) {
        EXPECT_EQ(&m - &store.MetaAt(b, s - 1), TrajectoryStore::kMetaStride);
      }
      m.step_priority = std::uniform_real_distribution<double>(0, 1)(rng_);
      m.item.seq = static_cast<uint64_t>(b * bs + s);
    }
  }
  // Growth keeps what was written.
  store.CoverBlocks(blocks + RandomIn(1, 200));
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t s = 0; s < bs; ++s) {
      EXPECT_EQ(store.MetaAt(b, s).item.seq, static_cast<uint64_t>(b * bs + s));
    }
  }
  // A trajectory's step `i` is in its block i / bs.
  Trajectory t;
  for (int64_t i = 0; i < 3; ++i) t.blocks.push_back(RandomIn(0, blocks - 1));
  const int64_t step = RandomIn(0, 3 * bs - 1);
  EXPECT_EQ(store.SlotOf(t, step), t.blocks[static_cast<size_t>(step / bs)] * bs + step % bs);
  EXPECT_EQ(store.StepPriorityAt(t, step), store.Meta(store.SlotOf(t, step)).step_priority);
}

TEST_F(TrajectoryStoreTest, ItemsSampledMaxTimesAreNotLive) {
  TrajectoryStore unlimited({/*block_steps=*/4});
  TrajectoryStore limited({/*block_steps=*/4, /*max_times_sampled=*/2});
  ItemState item;
  item.times_sampled = 1000;
  EXPECT_TRUE(unlimited.ItemLive(item));
  EXPECT_FALSE(limited.ItemLive(item));
  item.times_sampled = 1;
  EXPECT_TRUE(limited.ItemLive(item));
  int64_t next_block = 0;
  std::shared_ptr<Trajectory> t = limited.StartNew();
  Fill(limited, *t, &next_block, 2, {1, 2, 3, 4, 5}, {0, 2, 1, 3, 2});
  EXPECT_EQ(limited.CountLive(*t), 2);
}

}  // namespace
}  // namespace replaydb::index
