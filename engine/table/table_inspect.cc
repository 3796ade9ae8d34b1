// TableImpl's inspection calls (include/replaydb/table.h): ListTrajectories,
// ReadTrajectory and ItemPriorities, and Table's returning forms of
// ListTrajectories and ColdTrajectories, and Mass. They change nothing; the replaydb shell's
// trajectories, show and priorities commands are built on them.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/table/table_impl.h"
#include "index/selectors/prioritized_selector.h"
#include "kernels/priority/device_priority_table.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

bool Matches(const TrajectoryFilter& f, const TrajectoryInfo& t) {
  return t.length >= f.min_length && t.length <= f.max_length &&
         (!f.ended || *f.ended == t.ended) && (!f.tier || *f.tier == t.tier);
}

}  // namespace

}  // namespace replaydb::engine

namespace replaydb {

std::vector<TrajectoryInfo> Table::ListTrajectories(const TrajectoryFilter& filter) const {
  std::vector<TrajectoryInfo> out;
  if (!ListTrajectories(filter, &out).ok()) out.clear();
  return out;
}

Result<SamplingMass> Table::Mass() {
  return Status::NotSupported("table " + util::Quoted(name()) +
                              ": no sampling mass (a vector table)");
}

std::vector<uint64_t> Table::ColdTrajectories(uint64_t from, size_t limit) const {
  std::vector<uint64_t> ids;
  if (!ColdTrajectories(from, limit, &ids).ok()) ids.clear();
  return ids;
}

}  // namespace replaydb

namespace replaydb::engine {

Status TableImpl::ListTrajectories(const TrajectoryFilter& filter,
                                   std::vector<TrajectoryInfo>* result) const {
  std::vector<TrajectoryInfo>& out = *result;
  out.clear();
  std::lock_guard<std::mutex> lock(mu_);
  // Both indexes are ordered by id: merge them.
  const TrajectoryStore::Map& hot_tier = store_.trajectories();
  auto hot = hot_tier.lower_bound(filter.from);
  auto cold = cold_.lower_bound(filter.from);
  while (hot != hot_tier.end() || cold != cold_.end()) {
    if (filter.limit > 0 && out.size() >= filter.limit) break;
    TrajectoryInfo info;
    if (cold == cold_.end() || (hot != hot_tier.end() && hot->first <= cold->first)) {
      const Trajectory& t = *hot->second;
      if (cold != cold_.end() && cold->first == hot->first) ++cold;  // mid-load: hot wins
      ++hot;
      info.id = t.id;
      info.length = t.length;
      info.ended = t.ended;
      info.end_reason = t.end_reason;
      info.tier = Tier::kHot;
      info.live_items = t.live_items;
    } else {
      const ColdEntry& e = cold->second;
      info.id = cold->first;
      ++cold;
      info.length = e.length;
      info.ended = e.ended;
      info.end_reason = e.end_reason;
      info.tier = Tier::kCold;
      info.live_items = e.live_items;
    }
    if (Matches(filter, info)) out.push_back(info);
  }
  return Status::OK();
}

Status TableImpl::ReadTrajectory(uint64_t id, int64_t first, int64_t count,
                                 TrajectorySteps* out) {
  const std::string where = "table " + Quoted(name_) + ": trajectory " + std::to_string(id);
  if (out == nullptr) return Status::InvalidArgument(where + ": out is null");
  if (first < 0 || count < 0) {
    return Status::InvalidArgument(where + ": cannot read " + std::to_string(count) +
                                   " steps from step " + std::to_string(first) +
                                   "; both must be >= 0");
  }
  std::unique_lock<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  TrajectoryInfo info;
  info.id = id;
  // The trajectory whose blocks hold the steps (hot, or leaving the hot
  // tier with its blocks held until its spill is written), or null.
  std::shared_ptr<Trajectory> in_blocks;
  // A spilling one whose blocks went back: every step is in the store, its
  // metadata (TrajectoryMeta) in its spill job.
  std::string stored_meta;
  if (std::shared_ptr<Trajectory> hot = store_.FindShared(id); hot != nullptr) {
    const Trajectory& t = *hot;
    in_blocks = hot;
    info.length = t.length;
    info.ended = t.ended;
    info.end_reason = t.end_reason;
    info.tier = Tier::kHot;
    info.live_items = t.live_items;
  } else if (auto c = cold_.find(id); c != cold_.end()) {
    info.length = c->second.length;
    info.ended = c->second.ended;
    info.end_reason = c->second.end_reason;
    info.tier = Tier::kCold;
    info.live_items = c->second.live_items;
    if (c->second.spilling) {
      for (const SpillJob& job : spill_queue_) {
        if (job.t->id != id) continue;
        if (job.t->blocks.empty()) {
          stored_meta = job.meta;
        } else {
          in_blocks = job.t;
        }
        break;
      }
    }
  } else {
    return Status::NotFound("table " + Quoted(name_) + " has no trajectory " + std::to_string(id) +
                            " in either tier" +
                            (id > 0 && id < store_.next_id()
                                 ? " (it left the table: evicted without spill, consumed, "
                                   "or never written)"
                                 : ""));
  }
  if (first > info.length) {
    return Status::InvalidArgument(where + " has " + std::to_string(info.length) +
                                   " steps; cannot read from step " + std::to_string(first));
  }
  const int64_t n = std::min(count, info.length - first);
  out->info = info;
  out->first = first;
  out->columns.resize(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    out->columns[c].Reset(columns_[c].dtype, columns_[c].shape.Prepend(n));
  }
  out->step_priorities.clear();
  std::string steps;  // n steps, step-major
  if (in_blocks != nullptr) {
    Trajectory& t = *in_blocks;
    out->step_priorities.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      out->step_priorities[static_cast<size_t>(i)] = store_.StepPriorityAt(t, first + i);
    }
    // Steps a scatter kernel wrote must have landed.
    if (tier_ && n > 0) REPLAYDB_RETURN_IF_ERROR(tier_->AwaitScatters().WithContext(where));
    std::vector<std::byte*> blocks;
    for (int64_t b : t.blocks) blocks.push_back(pool_.address(b));
    ++t.pins;  // the blocks stay ours while the lock is released
    lock.unlock();
    const Status s = ReadSteps(blocks, first, first + n, &steps);
    lock.lock();
    UnpinLocked(t);
    REPLAYDB_RETURN_IF_ERROR(s.WithContext(where));
  } else {
    const std::shared_ptr<ColdStore> store = cold_store_;
    if (store == nullptr) return Status::FailedPrecondition(where + ": no cold store");
    lock.unlock();
    StoredTrajectory stored;
    if (!stored_meta.empty()) {
      REPLAYDB_RETURN_IF_ERROR(ParseMeta(stored_meta, id, StoredWhere(*store, id), &stored));
      stored.steps.resize(static_cast<size_t>(stored.length) * layout_.step_bytes);
      REPLAYDB_RETURN_IF_ERROR(ReadChunks(*store, table_id_, layout_.step_bytes,
                                          StoredWhere(*store, id), &stored));
    } else {
      REPLAYDB_RETURN_IF_ERROR(ReadStored(*store, id, /*steps=*/true, &stored));
    }
    if (stored.length < first + n) {
      return Status::Corruption(StoredWhere(*store, id) + " holds " +
                                std::to_string(stored.length) + " steps; its index says " +
                                std::to_string(info.length));
    }
    const size_t sb = layout_.step_bytes;
    steps.assign(stored.steps, static_cast<size_t>(first) * sb, static_cast<size_t>(n) * sb);
    out->step_priorities.assign(stored.step_priorities.begin() + first,
                                stored.step_priorities.begin() + first + n);
  }
  // Step-major (each step's columns one after another) to one tensor per
  // column.
  size_t offset = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    const size_t cb = layout_.column_bytes[c];
    std::byte* dst = out->columns[c].data();
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + static_cast<size_t>(i) * cb,
                  steps.data() + static_cast<size_t>(i) * layout_.step_bytes + offset, cb);
    }
    offset += cb;
  }
  return Status::OK();
}

Status TableImpl::ItemPriorities(std::vector<ItemKey>* keys, std::vector<double>* priorities) {
  if (keys == nullptr || priorities == nullptr) {
    return Status::InvalidArgument("table " + Quoted(name_) + ": ItemPriorities needs both outputs");
  }
  keys->clear();
  priorities->clear();
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  keys->reserve(static_cast<size_t>(num_items_));
  priorities->reserve(static_cast<size_t>(num_items_));
  for (const auto& [id, tp] : store_.trajectories()) {
    const Trajectory& t = *tp;
    for (int64_t start = 0; start < t.items_created; ++start) {
      const ItemState& item = store_.ItemAt(t, start);
      if (!store_.ItemLive(item)) continue;
      keys->push_back(MakeItemKey(id, start));
      priorities->push_back(item.priority);
    }
  }
  if (draws_->device_priorities() != nullptr && device_updates_ > 0 && !keys->empty()) {
    // The device has priorities the host never saw.
    Result<std::vector<double>> on_device = draws_->device_priorities()->ReadPriorities(*keys);
    if (!on_device.ok()) return on_device.status().WithContext("table " + Quoted(name_));
    *priorities = std::move(*on_device);
  }
  return Status::OK();
}

Result<SamplingMass> TableImpl::Mass() {
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(CheckOpenLocked());
  SamplingMass mass;
  mass.items = num_items_;
  switch (spec_.selector) {
    case SelectorKind::kUniform:
      mass.total = static_cast<double>(num_items_);
      return mass;
    case SelectorKind::kPrioritized:
      break;
    default:
      return Status::NotSupported("table " + Quoted(name_) + ": a " +
                                  std::string(SelectorKindName(spec_.selector)) +
                                  " table has no sampling mass (its draws are certain)");
  }
  if (kernels::DevicePriorityTable* device = draws_->device_priorities()) {
    Result<double> total = device->Mass();
    if (!total.ok()) return total.status().WithContext("table " + Quoted(name_));
    mass.total = *total;
    return mass;
  }
  const auto* prioritized = dynamic_cast<const index::PrioritizedSelector*>(&selector_);
  if (prioritized == nullptr) {
    return Status::Internal("table " + Quoted(name_) + ": prioritized without a sum tree");
  }
  mass.total = prioritized->unscaled_mass();
  mass.smallest_priority = prioritized->smallest_positive_priority();
  return mass;
}

}  // namespace replaydb::engine
