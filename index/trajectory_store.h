// TrajectoryStore: a table's index of the trajectories in its hot tier.
//
// By id, each trajectory with the hot-tier blocks that hold its steps
// (Trajectory). Beside the blocks, per hot-tier slot (block * block_steps +
// step in block), what the table keeps per step: its priority and the item
// that starts there (SlotMeta); nothing is allocated per step. And the order
// in which eviction takes whole trajectories: the ended ones by when they
// entered the tier (oldest first) or, under EvictionPolicy::kLowestPriority,
// by the highest priority among their live items (lowest first).
//
// The store knows nothing of selectors, rate limiters or memory: the table
// keeps those in step with it. Item keys are MakeItemKey(trajectory id,
// start step) (include/replaydb/types.h); a vector table folds the
// environment into the start (engine/table/vector_table.h).
//
// Thread safety: none of its own; the owning table's mutex guards every call.
#ifndef REPLAYDB_INDEX_TRAJECTORY_STORE_H_
#define REPLAYDB_INDEX_TRAJECTORY_STORE_H_

#include <cassert>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "index/id_index.h"
#include "replaydb/options.h"
#include "replaydb/table.h"
#include "replaydb/types.h"
#include "util/huge_page_allocator.h"

namespace replaydb::index {

// Per-item state.
struct ItemState {
  uint64_t seq = 0;
  double priority = 0;
  uint32_t times_sampled = 0;  // kDeletedItem: deleted (Table::DeleteItems)
};

// ItemState::times_sampled of a deleted item (kept so through checkpoints and
// the cold tier); a sample count stops one short of it.
inline constexpr uint32_t kDeletedItem = 0xFFFFFFFFu;

// What the table keeps per step of the hot tier, by slot: the step's
// priority and the item that starts there. Steps and items of a block sit
// side by side, so appending to many trajectories touches one line per
// trajectory.
struct SlotMeta {
  ItemState item;  // valid for starts below the trajectory's items_created
  double step_priority = 0;  // valid for steps below its length
};

// A trajectory in the hot tier (or leaving it). Its steps' priorities and
// items live in the store's SlotMeta of its blocks (TrajectoryStore::ItemAt,
// StepPriorityAt) while it holds them.
//
// The fields an append reads and writes come first, in one cache line (the
// struct is aligned to one): a vector append touches every environment's
// trajectory in each call.
struct alignas(64) Trajectory {
  uint64_t id = 0;
  int64_t length = 0;         // published steps
  int64_t items_created = 0;  // items exist for starts [0, items_created)
  int64_t live_items = 0;     // of those, not yet removed
  std::vector<int64_t> blocks;  // BlockPool ids
  bool ended = false;
  bool removed = false;  // left the hot tier (evicted or consumed)
  bool evicted = false;  // left because the tier was full
  // Durability (engine/table/table_durability.cc): its metadata changed
  // since the last checkpoint.
  bool dirty = true;
  // EvictionPolicy::kLowestPriority: kept while the trajectory is ranked
  // (ended, in the tier): the highest priority of a live item (-1 when none).
  bool ranked = false;
  // The first cache line ends here.
  double best_priority = -1;
  int32_t pins = 0;  // in-flight copies into or out of its blocks
  int32_t leases = 0;  // of the pins, those of samples read in place (held longer)
  EndReason end_reason = EndReason::kTruncated;
  // Left by Table::Clear (`evicted` is set too, so that its writer starts
  // anew); messages say so.
  bool cleared = false;
  // Durability: steps [0, persisted_steps) are in the cold store; `in_cold`
  // means a checkpoint may have stored it.
  int64_t persisted_steps = 0;
  bool in_cold = false;
  // When it entered the hot tier (created or loaded), store-wide order:
  // eviction and rotation take the oldest first.
  uint64_t hot_seq = 0;
  // The remote writer whose steps it last applied from the log (the
  // records' writer key; 0: none said), by which that writer finds it
  // again on a promoted replica (TableImpl::Adopt). Set through
  // TrajectoryStore::SetWriterKey, which indexes it.
  uint64_t writer_key = 0;
};

class TrajectoryStore {
 public:
  using Map = std::map<uint64_t, std::shared_ptr<Trajectory>>;

  struct Options {
    int64_t block_steps = 1;         // steps per hot-tier block
    uint32_t max_times_sampled = 0;  // TableSpec::max_times_sampled (0: no limit)
    EvictionPolicy eviction = EvictionPolicy::kOldestFirst;
  };
  explicit TrajectoryStore(const Options& options) : options_(options) {}

  TrajectoryStore(const TrajectoryStore&) = delete;
  TrajectoryStore& operator=(const TrajectoryStore&) = delete;

  // ---- trajectories by id

  // The trajectory with `id`, or null when it is not in the hot tier.
  Trajectory* Find(uint64_t id) const {
    const std::shared_ptr<Trajectory>* t = by_id_.Find(id);
    return t == nullptr ? nullptr : t->get();
  }
  // The same, shared (a copy of the store's pointer), or null.
  std::shared_ptr<Trajectory> FindShared(uint64_t id) const {
    const std::shared_ptr<Trajectory>* t = by_id_.Find(id);
    return t == nullptr ? nullptr : *t;
  }
  // REQUIRES: a trajectory with `id` is in the store.
  const std::shared_ptr<Trajectory>& At(uint64_t id) const {
    const std::shared_ptr<Trajectory>* t = by_id_.Find(id);
    assert(t != nullptr);
    return *t;
  }
  // Starts loading what At(id) reads first (a batch of draws prefetches
  // each draw's line before it looks any of them up).
  void PrefetchId(uint64_t id) const { by_id_.Prefetch(id); }
  // Every trajectory, by id.
  const Map& trajectories() const { return map_; }

  // Notes that `t`'s steps are a remote writer's of `key` (Trajectory::
  // writer_key; indexed while `t` is in the store). Cheap when it is the
  // key `t` has: appends call it for every run.
  void SetWriterKey(Trajectory& t, uint64_t key) {
    if (t.writer_key == key) return;
    UnindexKey(t);
    t.writer_key = key;
    if (key != 0 && Find(t.id) == &t) by_key_[key] = t.id;
  }
  // The trajectory in the store whose writer key is `key` (the one given
  // it last, should two writers' random keys ever meet), or null. One hash
  // lookup: a failover resumes every environment of a vector writer by key,
  // which a walk over the table's trajectories made environments x
  // trajectories under the table's mutex.
  std::shared_ptr<Trajectory> FindByWriterKey(uint64_t key) const {
    if (key == 0) return nullptr;
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) return nullptr;
    std::shared_ptr<Trajectory> t = FindShared(it->second);
    return t != nullptr && t->writer_key == key ? t : nullptr;
  }
  size_t num_writer_keys() const { return by_key_.size(); }
  size_t size() const { return map_.size(); }

  // A new, empty trajectory under the next unused id, in the store; null
  // when ids above kMaxTrajectoryId would be needed.
  std::shared_ptr<Trajectory> StartNew();
  // A new, empty trajectory with `id` (replayed, restored or loaded), not
  // yet in the store: Insert it once it holds its steps.
  std::shared_ptr<Trajectory> Make(uint64_t id) {
    auto t = std::make_shared<Trajectory>();
    t->id = id;
    t->hot_seq = next_hot_seq_++;
    return t;
  }
  // Adds `t` (from Make; its id is not in the store) and keeps next_id()
  // above it.
  void Insert(std::shared_ptr<Trajectory> t);
  // Takes `t` out: of the eviction order, then of the store (last: this may
  // drop the final reference to it).
  void Erase(Trajectory& t);

  // The id StartNew hands out next. Ids below it may have been used.
  uint64_t next_id() const { return next_id_; }
  // Restore: the checkpoint's next id.
  void set_next_id(uint64_t id) { next_id_ = id; }
  // Keeps next_id() above `id` (an id seen elsewhere: the cold tier, an import).
  void NoteId(uint64_t id) { next_id_ = std::max(next_id_, id + 1); }

  // ---- ended trajectories, and the order eviction takes them in

  // Marks `t` ended for `reason` and dirty, and places it in the eviction order.
  void MarkEnded(Trajectory& t, EndReason reason);
  size_t num_ended() const { return ended_.size(); }
  // The ended trajectory that entered the tier first, or null.
  Trajectory* OldestEnded() const {
    return ended_.empty() ? nullptr : map_.at(ended_.begin()->second).get();
  }
  // The trajectory to evict to make room for `requester`, or null: by
  // priority (kLowestPriority), else the oldest ended one, else any other
  // that holds blocks (an open one), never the requester.
  std::shared_ptr<Trajectory> PickVictim(const Trajectory& requester) const;
  // kLowestPriority: (re)places an ended trajectory in the eviction order by
  // its best live item (Trajectory::best_priority), or takes it out. The
  // table calls Rank after a change to a ranked trajectory's items that may
  // change its best priority. Under other policies Rank does nothing.
  void Rank(Trajectory& t);
  void Unrank(Trajectory& t);

  // ---- per-slot metadata

  // Entries of SlotMeta that lie between consecutive steps of one block
  // (MetaAt(b, s + 1) is kMetaStride entries after MetaAt(b, s)).
  static constexpr int64_t kMetaTileBlocks = 64;
  static constexpr int64_t kMetaStride = kMetaTileBlocks;

  // Grows the metadata to cover blocks [0, blocks). Existing entries stay.
  void CoverBlocks(int64_t blocks);
  // The SlotMeta of step `step` of block `block`, or of a hot-tier slot.
  // It is laid out in tiles of kMetaTileBlocks blocks, step-major inside a
  // tile: the same step of neighbouring blocks is adjacent, so a vector
  // append to environments whose blocks neighbour each other (blocks
  // handed out together) writes runs of entries, not one line each.
  // REQUIRES: the block is covered.
  SlotMeta& MetaAt(int64_t block, int64_t step) { return meta_[MetaIndex(block, step)]; }
  const SlotMeta& MetaAt(int64_t block, int64_t step) const {
    return meta_[MetaIndex(block, step)];
  }
  SlotMeta& Meta(int64_t slot) {
    return MetaAt(slot / options_.block_steps, slot % options_.block_steps);
  }
  const SlotMeta& Meta(int64_t slot) const {
    return MetaAt(slot / options_.block_steps, slot % options_.block_steps);
  }
  // The hot-tier slot of t's step `step`. REQUIRES: the step has a block.
  int64_t SlotOf(const Trajectory& t, int64_t step) const {
    const int64_t bs = options_.block_steps;
    return t.blocks[static_cast<size_t>(step / bs)] * bs + step % bs;
  }
  // Item `start` of t (REQUIRES: start < t.items_created, t holds its
  // blocks) and the priority of step `step` (REQUIRES: step < t.length).
  ItemState& ItemAt(const Trajectory& t, int64_t start) { return Meta(SlotOf(t, start)).item; }
  const ItemState& ItemAt(const Trajectory& t, int64_t start) const {
    return Meta(SlotOf(t, start)).item;
  }
  double StepPriorityAt(const Trajectory& t, int64_t step) const {
    return Meta(SlotOf(t, step)).step_priority;
  }
  // Whether an item may still be drawn: not deleted (Table::DeleteItems) and
  // max_times_sampled not reached.
  bool ItemLive(const ItemState& item) const {
    return item.times_sampled != kDeletedItem &&
           (options_.max_times_sampled == 0 || item.times_sampled < options_.max_times_sampled);
  }
  // The items of t that are live.
  int64_t CountLive(const Trajectory& t) const;

  int64_t block_steps() const { return options_.block_steps; }
  uint32_t max_times_sampled() const { return options_.max_times_sampled; }

 private:
  // Takes `t`'s writer key out of the index where it names `t`.
  void UnindexKey(const Trajectory& t) {
    if (t.writer_key == 0) return;
    const auto it = by_key_.find(t.writer_key);
    if (it != by_key_.end() && it->second == t.id) by_key_.erase(it);
  }
  size_t MetaIndex(int64_t block, int64_t step) const {
    return static_cast<size_t>((block / kMetaTileBlocks) * kMetaTileBlocks * options_.block_steps +
                               step * kMetaTileBlocks + block % kMetaTileBlocks);
  }

  const Options options_;
  Map map_;  // by id, in order
  IdIndex<Trajectory> by_id_;  // the same, for lookups
  // Writer keys (Trajectory::writer_key) of trajectories in the store, to ids.
  std::unordered_map<uint64_t, uint64_t> by_key_;
  // The ended trajectories as (hot_seq, id): the longest in the tier first.
  std::set<std::pair<uint64_t, uint64_t>> ended_;
  // kLowestPriority: ended trajectories by (best live priority, id).
  std::set<std::pair<double, uint64_t>> ranked_;
  // By hot-tier slot (MetaIndex), for the tiles of blocks covered so far.
  // Huge pages: an append touches one entry per environment, each in its
  // own block.
  std::vector<SlotMeta, util::HugePageAllocator<SlotMeta>> meta_;
  uint64_t next_id_ = 1;
  uint64_t next_hot_seq_ = 1;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_TRAJECTORY_STORE_H_
