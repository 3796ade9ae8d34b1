// BlockUniformSelector: every present item with equal probability, with
// replacement, for items kept by hot-tier slot (what a table drawing on the
// host uses). Removing a whole block's items is O(1) per block.
#ifndef REPLAYDB_INDEX_SELECTORS_BLOCK_UNIFORM_SELECTOR_H_
#define REPLAYDB_INDEX_SELECTORS_BLOCK_UNIFORM_SELECTOR_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "index/selectors/selector.h"
#include "util/huge_page_allocator.h"

namespace replaydb::index {

// The items are listed in an array of entries (slot, the generation of the
// slot's block when inserted); a block's generation changes when all its
// items leave at once (RemoveBlocks), or when its last item leaves one by
// one, and one item leaving alone sets a bit of its slot. An entry is
// present while its block's generation matches and its slot's bit is
// clear; removed items' entries stay behind until the array is more than
// twice the items (plus a little), when one pass drops them. Entries are
// in insertion order, and a table evicts its oldest trajectories first, so
// the removed ones gather at the front: inserts pass over them (checked
// once each; the removals do not, so that evicting trajectories one by one
// does not start a pass each time, and InsertManyDistinctBlocks' parts
// share the pass), the array's listed part starts past them, and the
// unlisted front is given back once it is longer than the listed part.
// Select draws
// entries uniformly until it finds a present one (at most two tries
// expected), which is uniform over the items.
//
// Cost: Insert O(1) (touches its block's record and tag, and appends an
// entry); Remove O(1); RemoveBlocks O(1) per block whatever its items;
// O(1) amortised for the passes that drop removed entries.
//
// As with UniformSelector by slot: every ItemRef carries its slot, and the
// items of one block (block_steps slots) are steps of one trajectory, so a
// key is the block's first key plus the step. Within one generation of its
// block a slot takes one item (an insert into a slot whose item left alone
// in that generation is correct, but costs a pass over the entries).
// Select reports probability 1 / size(). Not thread-safe (see Selector).
class BlockUniformSelector final : public Selector {
 public:
  // REQUIRES: 1 <= num_slots <= kMaxSlots, 1 <= block_steps <= num_slots.
  // `first_generation` (for tests of the wrap-around; 31 bits) is where
  // every block's generation starts.
  BlockUniformSelector(int64_t num_slots, int64_t block_steps, uint32_t first_generation = 0);
  BlockUniformSelector(const BlockUniformSelector&) = delete;
  BlockUniformSelector& operator=(const BlockUniformSelector&) = delete;

  // Slots are 32-bit (the last block id is kept as a marker).
  static constexpr int64_t kMaxSlots = (int64_t{1} << 32) - 1;

  using Selector::Select;

  void Insert(const ItemRef& item) override;
  void InsertMany(std::span<const ItemRef> items) override;
  // Each part lists its share of the items at their places in the array
  // (the blocks' records touched are all different).
  void InsertManyDistinctBlocks(std::span<const ItemRef> items, util::ForkJoin& fork_join) override;
  void Remove(const ItemRef& item) override;
  int64_t RemoveBlocks(std::span<const int64_t> blocks) override;
  // Does nothing: every item has the same chance whatever its priority.
  void Update(const ItemRef& item, double new_priority) override;
  size_t size() const override { return size_; }
  Selection Select(util::Random& rng, Stratum stratum) const override;
  // Each draw's entry picked first and prefetched, then read: a draw that
  // meets a removed entry draws again, after the others were picked.
  void SelectMany(util::Random& rng, bool stratified, std::span<Selection> out) const override;

  // Entries listed, present or not (for tests: at most 2 * size() + 64
  // after any call).
  size_t entries() const { return Listed(); }
  // The array's length, the front passed over included (for tests: at most
  // twice entries() after an insert).
  size_t held_entries() const { return entries_.size(); }

 private:
  struct Entry {
    // Left unset, so that growing entries_ writes nothing: the parts of
    // InsertManyDistinctBlocks then write each new entry once, in place.
    Entry() {}  // NOLINT(modernize-use-equals-default): = default would zero it
    Entry(uint32_t slot_in, uint32_t generation_in) : slot(slot_in), generation(generation_in) {}
    uint32_t slot;
    uint32_t generation;  // 31 bits
  };
  struct Block {
    ItemKey key = 0;    // the key of the block's first step
    uint32_t live = 0;  // present items
  };
  // A block's tag (tags_, apart from the records so that the checks of
  // presence, which compaction and Select make per entry, read a small
  // array): its generation, and kRemovedFlag when a slot of the block may
  // have its bit set in this generation (an item left alone).
  static constexpr uint32_t kGenerationMask = 0x7fffffffu;
  static constexpr uint32_t kRemovedFlag = 0x80000000u;
  // slot / block_steps and slot % block_steps (a shift and a mask when
  // block_steps is a power of two, as by default: a division costs as much
  // as the rest of a compaction's step).
  uint32_t BlockOf(uint32_t slot) const {
    return block_shift_ >= 0 ? slot >> block_shift_ : slot / block_steps_;
  }
  uint32_t StepOf(uint32_t slot) const {
    return block_shift_ >= 0 ? slot & (block_steps_ - 1) : slot % block_steps_;
  }
  bool Present(const Entry& e) const {
    const uint32_t tag = tags_[BlockOf(e.slot)];
    return (tag & kGenerationMask) == e.generation &&
           ((tag & kRemovedFlag) == 0 || !Removed(e.slot));
  }
  bool Removed(uint32_t slot) const { return (removed_[slot / 64] >> (slot % 64)) & 1; }
  void SetRemoved(uint64_t slot, bool removed) {
    const uint64_t bit = uint64_t{1} << (slot % 64);
    removed_[slot / 64] = removed ? removed_[slot / 64] | bit : removed_[slot / 64] & ~bit;
  }
  // The key of the item at `slot` (present).
  ItemKey KeyAt(uint32_t slot) const { return blocks_[BlockOf(slot)].key + StepOf(slot); }
  // Insert without the pass over the front.
  void InsertOne(const ItemRef& item);
  // Grows the blocks' records and tags to hold `block` (doubling).
  void GrowTo(uint32_t block);
  // Entries from front_ on.
  size_t Listed() const { return entries_.size() - front_; }
  // A new generation for `block` (its entries all stale), bits cleared.
  void Renew(uint32_t block);
  // Drops the entries of removed items when there are too many of them.
  void MaybeCompact();
  // Passes over the removed entries at the front, giving the front back
  // once it is longer than the listed part.
  void PassFront();
  // Drops the entries of removed items, and every entry of `drop_block`.
  void Compact(uint32_t drop_block = kNoBlock);
  static constexpr uint32_t kNoBlock = 0xffffffffu;

  const int64_t num_slots_;
  const uint32_t block_steps_;
  const int block_shift_;  // log2(block_steps), or -1 when not a power of two
  const uint32_t first_generation_;
  size_t size_ = 0;
  // Listed from front_ on (those before are all removed items').
  std::vector<Entry, util::HugePageAllocator<Entry>> entries_;
  size_t front_ = 0;
  // Both grown on demand to the highest block inserted into.
  std::vector<Block, util::HugePageAllocator<Block>> blocks_;
  std::vector<uint32_t> tags_;
  // One bit per slot, allocated at the first removal of a single item.
  std::vector<uint64_t> removed_;
  // InsertManyDistinctBlocks: each part's highest block, whether one of
  // its items needs Insert's compaction, and the first present entry of its
  // share of a window of the front's pass (counted from the front;
  // kAllRemoved when none).
  struct alignas(64) PartCheck {
    uint32_t max_block = 0;
    bool compacts = false;
    size_t first_present = 0;
  };
  std::vector<PartCheck> checks_;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_SELECTORS_BLOCK_UNIFORM_SELECTOR_H_
