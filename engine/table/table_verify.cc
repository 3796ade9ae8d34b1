// TableImpl::Verify: DB::Verify's check of one table (include/replaydb/db.h).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine/table/table_impl.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

Status Interrupted(const std::atomic<bool>* cancel) {
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
    return Status::Cancelled("verify interrupted");
  }
  return Status::OK();
}

}  // namespace

Status TableImpl::Verify(ColdStore& store, const std::atomic<bool>* cancel,
                         util::ProgressReporter& progress, VerifyReport* report) {
  const std::string table = "table " + Quoted(name_);
  const auto problem = [&](const std::string& what) {
    report->problems.push_back(table + ": " + what);
  };
  std::vector<uint64_t> hot_ids;
  std::vector<std::pair<uint64_t, int64_t>> cold;  // id, length
  {
    std::lock_guard<std::mutex> lock(mu_);
    REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
    int64_t steps = 0;
    int64_t live = 0;
    std::set<int64_t> blocks;
    for (const auto& [id, tp] : store_.trajectories()) {
      const Trajectory& t = *tp;
      if (t.removed) continue;
      const std::string traj = "trajectory " + std::to_string(id);
      if (t.id != id) problem(traj + " is indexed under id " + std::to_string(t.id));
      if (static_cast<int64_t>(t.blocks.size()) < BlocksFor(t.length)) {
        problem(traj + " has " + std::to_string(t.length) + " steps in " +
                std::to_string(t.blocks.size()) + " blocks of " +
                std::to_string(layout_.block_steps));
      }
      for (int64_t b : t.blocks) {
        if (b < 0 || b >= pool_.capacity_blocks()) {
          problem(traj + " holds block " + std::to_string(b) + ", outside the pool");
        } else if (!blocks.insert(b).second) {
          problem(traj + " holds block " + std::to_string(b) + ", which another one holds too");
        }
      }
      const bool covered = static_cast<int64_t>(t.blocks.size()) >= BlocksFor(t.length);
      if (t.items_created > t.length || t.items_created < 0) {
        problem(traj + " has " + std::to_string(t.items_created) + " items for " +
                std::to_string(t.length) + " steps");
      }
      int64_t t_live = 0;
      if (covered) {
        for (int64_t start = 0; start < std::min(t.items_created, t.length); ++start) {
          t_live += store_.ItemLive(store_.ItemAt(t, start)) ? 1 : 0;
        }
      }
      if (t_live != t.live_items) {
        problem(traj + " counts " + std::to_string(t.live_items) + " live items but has " +
                std::to_string(t_live));
      }
      if (t.persisted_steps > t.length) {
        problem(traj + " claims " + std::to_string(t.persisted_steps) + " stored steps of " +
                std::to_string(t.length));
      }
      if (cold_.count(id) != 0) problem(traj + " is both in the hot and in the cold tier");
      steps += t.length;
      live += t.live_items;
      hot_ids.push_back(id);
    }
    if (steps != num_steps_) {
      problem("counts " + std::to_string(num_steps_) + " hot steps, its trajectories hold " +
              std::to_string(steps));
    }
    if (live != num_items_) {
      problem("counts " + std::to_string(num_items_) + " live items, its trajectories hold " +
              std::to_string(live));
    }
    if (draws_->device_priorities() == nullptr &&
        static_cast<int64_t>(selector_.size()) != num_items_) {
      problem("its selector holds " + std::to_string(selector_.size()) + " items, not " +
              std::to_string(num_items_));
    }
    if (static_cast<int64_t>(blocks.size()) > pool_.in_use()) {
      problem("its trajectories hold " + std::to_string(blocks.size()) +
              " blocks, more than the pool's " + std::to_string(pool_.in_use()) + " in use");
    }
    for (const auto& [id, entry] : cold_) {
      if (!entry.spilling) cold.emplace_back(id, entry.length);
    }
  }
  // Hot trajectories: their stored steps equal their blocks.
  std::string in_blocks;
  std::string stored_steps;
  for (uint64_t id : hot_ids) {
    REPLAYDB_RETURN_IF_ERROR(Interrupted(cancel));
    int64_t persisted = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Trajectory* tp = store_.Find(id);
      if (tp == nullptr || tp->removed) continue;  // left meanwhile
      const Trajectory& t = *tp;
      persisted = t.in_cold ? t.persisted_steps : 0;
      std::vector<std::byte*> blocks;
      for (int64_t b : t.blocks) blocks.push_back(pool_.address(b));
      REPLAYDB_RETURN_IF_ERROR(ReadSteps(blocks, 0, t.length, &in_blocks));
      ++report->hot_trajectories;
      report->steps += t.length;
      report->bytes += t.length * static_cast<int64_t>(layout_.step_bytes);
      progress.Add(t.length);
    }
    if (persisted == 0) continue;
    stored_steps.assign(static_cast<size_t>(persisted) * layout_.step_bytes, '\0');
    const Status s = ForEachStoredChunk(
        store, table_id_, id, persisted, layout_.step_bytes, StoredWhere(store, id),
        [&](int64_t first, int64_t count, const std::byte* data) {
          std::memcpy(stored_steps.data() + static_cast<size_t>(first) * layout_.step_bytes, data,
                      static_cast<size_t>(count) * layout_.step_bytes);
          return Status::OK();
        });
    if (!s.ok()) {
      problem(s.message());
    } else if (std::memcmp(stored_steps.data(), in_blocks.data(), stored_steps.size()) != 0) {
      problem("trajectory " + std::to_string(id) +
              ": its stored steps differ from its hot-tier blocks");
    }
  }
  // Cold trajectories: metadata and steps read back and verified.
  StoredTrajectory stored;
  for (const auto& [id, length] : cold) {
    REPLAYDB_RETURN_IF_ERROR(Interrupted(cancel));
    const Status s = ReadStored(store, id, /*steps=*/true, &stored);
    if (!s.ok()) {
      problem(s.message());
      continue;
    }
    if (stored.length != length) {
      problem("trajectory " + std::to_string(id) + " is indexed with " + std::to_string(length) +
              " cold steps but stored with " + std::to_string(stored.length));
    }
    ++report->cold_trajectories;
    report->steps += stored.length;
    report->bytes += stored.length * static_cast<int64_t>(layout_.step_bytes);
    progress.Add(stored.length);
  }
  return Status::OK();
}

}  // namespace replaydb::engine
