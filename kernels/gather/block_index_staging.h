// The host half of DeviceBlockIndex: changes staged between flushes, turned
// into the records (gather::IndexUpdate) that the update kernel applies.
// Plain C++ (no CUDA), so that tests run it on machines without a GPU.
//
// Repeated writes to one entry coalesce at Take: the last one wins, and the
// records come out sorted by field and entry, one per entry, so that the
// kernel may apply them in any order. A change that breaks a REQUIRES of
// DeviceBlockIndex (an entry out of range, item steps on an index that keeps
// none) is dropped; Take then reports the first such change.
//
// Thread safety: not thread-safe.
#ifndef REPLAYDB_KERNELS_GATHER_BLOCK_INDEX_STAGING_H_
#define REPLAYDB_KERNELS_GATHER_BLOCK_INDEX_STAGING_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gather/block_gather_agent.h"
#include "replaydb/status.h"

namespace replaydb::kernels {

class BlockIndexStaging {
 public:
  // REQUIRES: num_blocks >= 1, block_steps >= 1.
  BlockIndexStaging(int64_t num_blocks, int64_t block_steps, bool item_steps,
                    bool uniform_draws = false)
      : num_blocks_(num_blocks),
        num_slots_(num_blocks * block_steps),
        item_steps_(item_steps),
        uniform_draws_(uniform_draws) {}

  void SetBlockAddress(int64_t block, const void* address) {
    if (block < 0 || block >= num_blocks_) {
      return Reject("SetBlockAddress(block " + std::to_string(block) + "): block is outside [0, " +
                    std::to_string(num_blocks_) + ")");
    }
    Stage(gather::kFieldAddress, block, reinterpret_cast<uintptr_t>(address));
  }

  void SetNext(int64_t block, int64_t next) {
    if (block < 0 || block >= num_blocks_ || next < -1 || next >= num_blocks_) {
      return Reject("SetNext(block " + std::to_string(block) + ", next " + std::to_string(next) +
                    "): block must be in [0, " + std::to_string(num_blocks_) +
                    ") and next in [-1, " + std::to_string(num_blocks_) + ")");
    }
    Stage(gather::kFieldNext, block, static_cast<uint64_t>(next));
  }

  void SetItemSteps(int64_t slot, uint32_t steps) {
    if (!item_steps_) {
      return Reject("SetItemSteps(slot " + std::to_string(slot) +
                    "): the index keeps no item steps (Options::item_steps is false)");
    }
    if (slot < 0 || slot >= num_slots_) {
      return Reject("SetItemSteps(slot " + std::to_string(slot) + "): slot is outside [0, " +
                    std::to_string(num_slots_) + ")");
    }
    Stage(gather::kFieldItemSteps, slot, steps);
  }

  void SetBlockKey(int64_t block, uint64_t key) {
    if (!uniform_draws_ || block < 0 || block >= num_blocks_) {
      return Reject("SetBlockKey(block " + std::to_string(block) +
                    "): needs Options::uniform_draws and block in [0, " +
                    std::to_string(num_blocks_) + ")");
    }
    Stage(gather::kFieldBlockKey, block, key);
  }

  void SetLive(int64_t position, int64_t slot) {
    if (!uniform_draws_ || position < 0 || position >= num_slots_ || slot < 0 ||
        slot >= num_slots_) {
      return Reject("SetLive(position " + std::to_string(position) + ", slot " +
                    std::to_string(slot) + "): needs Options::uniform_draws and both in [0, " +
                    std::to_string(num_slots_) + ")");
    }
    Stage(gather::kFieldLive, position, static_cast<uint64_t>(slot));
  }

  // True when changes (or a rejected one) wait for Take.
  bool dirty() const { return !staged_.empty() || rejected_ > 0; }

  // Replaces *out with the staged changes, coalesced, and empties the
  // staging. InvalidArgument naming the first dropped change (and how many
  // were dropped) if any was; the others are in *out all the same.
  Status Take(std::vector<gather::IndexUpdate>* out) {
    out->clear();
    std::stable_sort(staged_.begin(), staged_.end(),
                     [](const gather::IndexUpdate& a, const gather::IndexUpdate& b) {
                       return a.target < b.target;
                     });
    for (size_t i = 0; i < staged_.size(); ++i) {
      if (i + 1 == staged_.size() || staged_[i + 1].target != staged_[i].target) {
        out->push_back(staged_[i]);
      }
    }
    staged_.clear();
    if (rejected_ == 0) return Status::OK();
    Status s = Status::InvalidArgument(std::to_string(rejected_) +
                                       " staged change(s) dropped; the first: " + first_rejected_);
    rejected_ = 0;
    first_rejected_.clear();
    return s;
  }

 private:
  void Stage(gather::IndexField field, int64_t entry, uint64_t value) {
    staged_.push_back(gather::IndexUpdate{gather::UpdateTarget(field, entry), value});
  }
  void Reject(std::string what) {
    if (rejected_++ == 0) first_rejected_ = std::move(what);
  }

  const int64_t num_blocks_;
  const int64_t num_slots_;
  const bool item_steps_;
  const bool uniform_draws_;
  std::vector<gather::IndexUpdate> staged_;
  int64_t rejected_ = 0;
  std::string first_rejected_;
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_GATHER_BLOCK_INDEX_STAGING_H_
