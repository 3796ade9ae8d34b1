#include "index/selectors/block_uniform_selector.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace replaydb::index {
namespace {

// How many items ahead InsertMany asks for the block records it will touch
// (one per environment in a vector append, scattered).
constexpr size_t kPrefetchAhead = 16;

// Entries beyond twice the items that are tolerated before a pass drops
// the removed ones (so that small selectors do not compact at every
// removal).
constexpr size_t kSlackEntries = 64;

// InsertManyDistinctBlocks' pass over the front: entries each part looks
// at per run (a run costs about as much as 2,000 of them).
constexpr size_t kFrontPassPerPart = 8192;

// A part's share of the pass held no present entry.
constexpr size_t kAllRemoved = ~size_t{0};

}  // namespace

BlockUniformSelector::BlockUniformSelector(int64_t num_slots, int64_t block_steps,
                                           uint32_t first_generation)
    : num_slots_(num_slots),
      block_steps_(static_cast<uint32_t>(block_steps)),
      block_shift_(std::has_single_bit(block_steps_) ? std::countr_zero(block_steps_) : -1),
      first_generation_(first_generation & kGenerationMask) {
  assert(num_slots >= 1 && num_slots <= kMaxSlots);
  assert(block_steps >= 1 && block_steps <= num_slots);
}

void BlockUniformSelector::InsertMany(std::span<const ItemRef> items) {
  const size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) {
      const size_t ahead = BlockOf(static_cast<uint32_t>(items[i + kPrefetchAhead].slot));
      if (ahead < blocks_.size()) __builtin_prefetch(&blocks_[ahead], 1);
    }
    InsertOne(items[i]);
  }
  PassFront();
}

void BlockUniformSelector::InsertManyDistinctBlocks(std::span<const ItemRef> items,
                                                    util::ForkJoin& fork_join) {
  const size_t n = items.size();
  const int parts = fork_join.parts();
  if (parts == 1 || n < static_cast<size_t>(parts) * util::kMinEnvsPerPart / 4) {
    InsertMany(items);
    return;
  }
  checks_.assign(static_cast<size_t>(parts), PartCheck{});
  // The pass over the removed entries at the front that InsertMany makes,
  // in windows of kFrontPassPerPart entries per part, each part looking at
  // its share (up to its first present entry); the first window goes with
  // the check of the items.
  const auto next_window = [&] {
    return std::min(Listed(), kFrontPassPerPart * static_cast<size_t>(parts));
  };
  const size_t window = next_window();
  const auto first_present = [this](size_t from, size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      if (Present(entries_[from + i])) return i;
    }
    return kAllRemoved;
  };
  util::ForkJoin::ForEachShare(&fork_join, n, [&](int part, size_t begin, size_t end) {
    PartCheck c;
    for (size_t i = begin; i < end; ++i) {
      assert(items[i].slot >= 0 && items[i].slot < num_slots_ &&
             "BlockUniformSelector::InsertManyDistinctBlocks: slot out of range");
      const uint32_t slot = static_cast<uint32_t>(items[i].slot);
      const uint32_t block = BlockOf(slot);
      c.max_block = std::max(c.max_block, block);
      c.compacts |= block < tags_.size() && (tags_[block] & kRemovedFlag) != 0 && Removed(slot);
    }
    size_t first = 0;
    size_t last = 0;
    util::ForkJoin::Share(window, part, parts, &first, &last);
    c.first_present = first_present(front_, first, last);
    checks_[static_cast<size_t>(part)] = c;
  });
  uint32_t max_block = 0;
  size_t present = kAllRemoved;  // the first in the window
  for (const PartCheck& c : checks_) {
    // An item whose slot's last item left alone: Insert's way, in order.
    if (c.compacts) {
      InsertMany(items);
      return;
    }
    max_block = std::max(max_block, c.max_block);
    present = std::min(present, c.first_present);
  }
  GrowTo(max_block);
  for (size_t w = window; present == kAllRemoved && w > 0;) {
    front_ += w;
    w = next_window();
    if (w == 0) break;
    util::ForkJoin::ForEachShare(&fork_join, w, [&](int part, size_t first, size_t last) {
      checks_[static_cast<size_t>(part)].first_present = first_present(front_, first, last);
    });
    for (const PartCheck& c : checks_) present = std::min(present, c.first_present);
  }
  if (present != kAllRemoved) front_ += present;
  // When the front that is left behind is longer than the listed part with
  // the new entries, the listed part moves to the start of the array (as
  // PassFront does), each part moving its share: the two do not overlap,
  // and the new entries go after them.
  const size_t listed = Listed();
  const bool move = front_ > listed + n;
  const size_t first = move ? listed : entries_.size();
  if (!move) entries_.resize(first + n);
  util::ForkJoin::ForEachShare(&fork_join, n, [&](int part, size_t begin, size_t end) {
    if (move) {
      size_t lo = 0;
      size_t hi = 0;
      util::ForkJoin::Share(listed, part, parts, &lo, &hi);
      std::copy(entries_.begin() + static_cast<std::ptrdiff_t>(front_ + lo),
                entries_.begin() + static_cast<std::ptrdiff_t>(front_ + hi),
                entries_.begin() + static_cast<std::ptrdiff_t>(lo));
    }
    for (size_t i = begin; i < end; ++i) {
      if (i + kPrefetchAhead < end) {
        __builtin_prefetch(&blocks_[BlockOf(static_cast<uint32_t>(items[i + kPrefetchAhead].slot))],
                           1);
      }
      const uint32_t slot = static_cast<uint32_t>(items[i].slot);
      const uint32_t block = BlockOf(slot);
      Block& b = blocks_[block];
      b.key = items[i].key - StepOf(slot);
      ++b.live;
      entries_[first + i] = {slot, tags_[block] & kGenerationMask};
    }
  });
  if (move) {
    entries_.resize(first + n);
    front_ = 0;
  }
  size_ += n;
}

void BlockUniformSelector::GrowTo(uint32_t block) {
  if (block < blocks_.size()) return;
  const size_t limit = static_cast<size_t>((num_slots_ - 1) / block_steps_ + 1);
  const size_t size = std::min(limit, std::max<size_t>(block + 1, 2 * blocks_.size()));
  blocks_.resize(size);
  tags_.resize(size, first_generation_);
}

void BlockUniformSelector::Insert(const ItemRef& item) {
  InsertOne(item);
  PassFront();
}

void BlockUniformSelector::InsertOne(const ItemRef& item) {
  assert(item.slot >= 0 && item.slot < num_slots_ &&
         "BlockUniformSelector::Insert: slot out of range");
  const uint32_t slot = static_cast<uint32_t>(item.slot);
  const uint32_t block = BlockOf(slot);
  GrowTo(block);
  if ((tags_[block] & kRemovedFlag) != 0 && Removed(slot)) {
    // Its item left alone in this generation and its entry may still be
    // listed: drop it before the slot is present again (the flag stays:
    // other slots of the block may have their bits set).
    Compact();
    SetRemoved(slot, false);
  }
  Block& b = blocks_[block];
  b.key = item.key - StepOf(slot);
  ++b.live;
  entries_.push_back({slot, tags_[block] & kGenerationMask});
  ++size_;
}

void BlockUniformSelector::Remove(const ItemRef& item) {
  const uint32_t slot = static_cast<uint32_t>(item.slot);
  const uint32_t block = BlockOf(slot);
  assert(item.slot >= 0 && block < blocks_.size() &&
         "BlockUniformSelector::Remove: slot out of range");
  Block& b = blocks_[block];
  assert(b.live > 0 && ((tags_[block] & kRemovedFlag) == 0 || !Removed(slot)) &&
         KeyAt(slot) == item.key && "BlockUniformSelector::Remove: no such item at the slot");
  --size_;
  if (--b.live == 0) {
    Renew(block);  // its entries are all stale now: no bits needed
  } else {
    if (removed_.empty()) removed_.resize(static_cast<size_t>((num_slots_ + 63) / 64));
    SetRemoved(slot, true);
    tags_[block] |= kRemovedFlag;
  }
  MaybeCompact();
}

int64_t BlockUniformSelector::RemoveBlocks(std::span<const int64_t> blocks) {
  int64_t removed = 0;
  for (const int64_t id : blocks) {
    assert(id >= 0 && id < (num_slots_ - 1) / block_steps_ + 1 &&
           "BlockUniformSelector::RemoveBlocks: block out of range");
    const size_t block = static_cast<size_t>(id);
    if (block >= blocks_.size()) continue;  // never held an item
    Block& b = blocks_[block];
    // Nothing of this generation listed (a block emptied item by item was
    // renewed then).
    if (b.live == 0 && (tags_[block] & kRemovedFlag) == 0) continue;
    removed += b.live;
    size_ -= b.live;
    b.live = 0;
    Renew(static_cast<uint32_t>(block));
  }
  MaybeCompact();
  return removed;
}

void BlockUniformSelector::Renew(uint32_t block) {
  if ((tags_[block] & kRemovedFlag) != 0) {
    const uint64_t first = uint64_t{block} * block_steps_;
    for (uint64_t s = first; s < first + block_steps_; ++s) SetRemoved(s, false);
  }
  const uint32_t generation = tags_[block] & kGenerationMask;
  if (generation == kGenerationMask) {
    // Wrapping around would make entries of long ago present again: drop
    // every entry of the block first.
    Compact(block);
    tags_[block] = 0;
    return;
  }
  tags_[block] = generation + 1;
}

void BlockUniformSelector::MaybeCompact() {
  if (size_ == 0) {
    entries_.clear();  // none is present
    front_ = 0;
  } else if (Listed() > 2 * size_ + kSlackEntries) {
    Compact();
    assert(entries_.size() == size_ && "BlockUniformSelector: entries and items disagree");
  }
}

void BlockUniformSelector::PassFront() {
  // Each removed entry is passed over once: O(1) amortised.
  const size_t size = entries_.size();
  while (front_ < size && !Present(entries_[front_])) ++front_;
  if (front_ > Listed()) {
    // Moves no more entries than the front had, each passed over once.
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(front_));
    front_ = 0;
  }
}

void BlockUniformSelector::Compact(uint32_t drop_block) {
  size_t kept = 0;
  const size_t n = entries_.size();
  for (size_t i = front_; i < n; ++i) {
    if (i + kPrefetchAhead < n) {
      __builtin_prefetch(&tags_[BlockOf(entries_[i + kPrefetchAhead].slot)]);
    }
    const Entry e = entries_[i];
    if (Present(e) && BlockOf(e.slot) != drop_block) entries_[kept++] = e;
  }
  entries_.resize(kept);
  front_ = 0;
}

void BlockUniformSelector::Update(const ItemRef& item, double /*new_priority*/) {
  assert(item.slot >= 0 && BlockOf(static_cast<uint32_t>(item.slot)) < blocks_.size() &&
         KeyAt(static_cast<uint32_t>(item.slot)) == item.key &&
         "BlockUniformSelector::Update: no such item at the slot");
  (void)item;
}

Selection BlockUniformSelector::Select(util::Random& rng, Stratum /*stratum*/) const {
  assert(size_ > 0 && "BlockUniformSelector::Select on an empty selector");
  const double probability = 1.0 / static_cast<double>(size_);
  while (true) {
    const Entry e = entries_[front_ + rng.Uniform(Listed())];
    if (!Present(e)) continue;
    return {KeyAt(e.slot), probability};
  }
}

void BlockUniformSelector::SelectMany(util::Random& rng, bool /*stratified*/,
                                      std::span<Selection> out) const {
  assert(size_ > 0 && "BlockUniformSelector::SelectMany on an empty selector");
  const double probability = 1.0 / static_cast<double>(size_);
  const size_t listed = Listed();
  // The picks first (out[b].key holds pick b's entry index meanwhile).
  for (Selection& s : out) {
    const size_t at = front_ + rng.Uniform(listed);
    __builtin_prefetch(&entries_[at]);
    s.key = at;
  }
  for (Selection& s : out) {
    Entry e = entries_[s.key];
    while (!Present(e)) e = entries_[front_ + rng.Uniform(listed)];
    s = {KeyAt(e.slot), probability};
  }
}

}  // namespace replaydb::index
