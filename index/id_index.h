// IdIndex: trajectory id -> the trajectory, in one flat open-addressing
// table (linear probing, at most half full, deletion by backward shift), so
// that a draw finds its trajectory in one cache line where a std::map walks
// a tree of misses (16 levels at 50K trajectories), and so that a batch of
// draws can prefetch the lines it will read (Prefetch).
#ifndef REPLAYDB_INDEX_ID_INDEX_H_
#define REPLAYDB_INDEX_ID_INDEX_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace replaydb::index {

template <typename T>
class IdIndex {
 public:
  IdIndex() { Rehash(16); }

  size_t size() const { return size_; }

  // The entry of `id`, or null.
  const std::shared_ptr<T>* Find(uint64_t id) const {
    for (size_t i = Home(id);; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (!e.value) return nullptr;
      if (e.id == id) return &e.value;
    }
  }
  // Starts loading the line Find(id) reads first.
  void Prefetch(uint64_t id) const { __builtin_prefetch(&slots_[Home(id)]); }

  // REQUIRES: `id` is not in the index; value is not null.
  void Insert(uint64_t id, std::shared_ptr<T> value) {
    assert(value != nullptr && Find(id) == nullptr);
    if (2 * (size_ + 1) > slots_.size()) Rehash(2 * slots_.size());
    Place(id, std::move(value));
    ++size_;
  }

  // Removes `id` (nothing when absent).
  void Erase(uint64_t id) {
    size_t i = Home(id);
    while (true) {
      if (!slots_[i].value) return;
      if (slots_[i].id == id) break;
      i = (i + 1) & mask_;
    }
    // Backward shift: each later entry of the run that may move into the
    // hole does, so that no probe meets a hole before its entry.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].value; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j].id);
      // The entry at j may fill the hole unless its home lies in (hole, j].
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
    slots_[hole] = Entry{};
    --size_;
  }

 private:
  struct Entry {
    uint64_t id = 0;
    std::shared_ptr<T> value;  // null: empty
  };

  size_t Home(uint64_t id) const {
    // Fibonacci hashing: consecutive ids spread over the table.
    return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void Place(uint64_t id, std::shared_ptr<T> value) {
    size_t i = Home(id);
    while (slots_[i].value) i = (i + 1) & mask_;
    slots_[i] = Entry{id, std::move(value)};
  }

  void Rehash(size_t capacity) {
    std::vector<Entry> old = std::move(slots_);
    slots_ = std::vector<Entry>(capacity);
    mask_ = capacity - 1;
    shift_ = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (Entry& e : old) {
      if (e.value) Place(e.id, std::move(e.value));
    }
  }

  std::vector<Entry> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace replaydb::index

#endif  // REPLAYDB_INDEX_ID_INDEX_H_
