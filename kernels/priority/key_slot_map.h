// KeySlotMap: the host side's map from item key to slot for
// DevicePriorityTable. Plain C++ (no CUDA): header-only, because kernels/
// compiles only *.cu (with nvcc) or *_nocuda.cc (without).
//
// Open addressing with linear probing and backward-shift deletion, so erasing
// leaves no tombstones and lookups stay short under insert/remove churn. One
// 16-byte bucket per entry; the table doubles when it would pass half full.
//
// Thread safety: not thread-safe.
#ifndef REPLAYDB_KERNELS_PRIORITY_KEY_SLOT_MAP_H_
#define REPLAYDB_KERNELS_PRIORITY_KEY_SLOT_MAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace replaydb::kernels {

class KeySlotMap {
 public:
  struct Entry {
    uint64_t key;
    int32_t slot;    // >= 0 in a live entry; kEmptySlot marks an empty bucket
    uint32_t flags;  // the owner's bits
  };
  static constexpr int32_t kEmptySlot = -1;

  KeySlotMap() { Rehash(16); }

  size_t size() const { return size_; }
  size_t bucket_count() const { return buckets_.size(); }

  // The entry for `key`, or null. The pointer is valid until the next
  // Insert or Erase.
  Entry* Find(uint64_t key) {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Entry& e = buckets_[i];
      if (e.slot == kEmptySlot) return nullptr;
      if (e.key == key) return &e;
    }
  }

  // Adds `key` with `slot` and `flags`. REQUIRES: Find(key) == nullptr,
  // slot >= 0.
  void Insert(uint64_t key, int32_t slot, uint32_t flags) {
    if (2 * (size_ + 1) > buckets_.size()) Rehash(2 * buckets_.size());
    size_t i = Home(key);
    while (buckets_[i].slot != kEmptySlot) i = (i + 1) & mask_;
    buckets_[i] = Entry{key, slot, flags};
    ++size_;
  }

  // One probe: the entry of `key` if present (*inserted = false), else a new
  // entry {key, slot, flags} (*inserted = true). REQUIRES: slot >= 0.
  Entry* TryInsert(uint64_t key, int32_t slot, uint32_t flags, bool* inserted) {
    if (2 * (size_ + 1) > buckets_.size()) Rehash(2 * buckets_.size());
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      Entry& e = buckets_[i];
      if (e.slot == kEmptySlot) break;
      if (e.key == key) {
        *inserted = false;
        return &e;
      }
    }
    buckets_[i] = Entry{key, slot, flags};
    ++size_;
    *inserted = true;
    return &buckets_[i];
  }

  // Removes the entry `e` points to (from Find). Later entries of its probe
  // run shift back into the hole.
  void Erase(Entry* e) {
    size_t hole = static_cast<size_t>(e - buckets_.data());
    for (size_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
      Entry& cur = buckets_[j];
      if (cur.slot == kEmptySlot) break;
      const size_t home = Home(cur.key);
      // `cur` may move into the hole only if its home is not cyclically in
      // (hole, j]: otherwise a lookup starting at home would stop at the hole.
      const bool home_in_range =
          hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!home_in_range) {
        buckets_[hole] = cur;
        hole = j;
      }
    }
    buckets_[hole].slot = kEmptySlot;
    --size_;
  }

 private:
  static uint64_t Mix(uint64_t x) {
    // splitmix64's finaliser: every key bit affects every index bit.
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }
  size_t Home(uint64_t key) const { return static_cast<size_t>(Mix(key)) & mask_; }

  void Rehash(size_t buckets) {
    std::vector<Entry> old;
    old.swap(buckets_);
    buckets_.assign(buckets, Entry{0, kEmptySlot, 0});
    mask_ = buckets - 1;
    for (const Entry& e : old) {
      if (e.slot == kEmptySlot) continue;
      size_t i = Home(e.key);
      while (buckets_[i].slot != kEmptySlot) i = (i + 1) & mask_;
      buckets_[i] = e;
    }
  }

  std::vector<Entry> buckets_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_PRIORITY_KEY_SLOT_MAP_H_
