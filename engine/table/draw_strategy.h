// DrawStrategy: where a table's draws happen. Every table keeps its live
// items in a selector; the strategy owns it and says how a sample draws:
//
//   HostDraws            the host's selector (uniform, FIFO, LIFO, heaps,
//                        the CPU sum tree) draws for Table::Sample, and
//                        SampleToDevice gathers the host's draws on the GPU.
//   DevicePriorityDraws  TableSpec::priority_device: a GPU priority table
//                        (DeviceSelector) draws. Table::Sample copies its
//                        draws to the host; SampleToDevice draws and gathers
//                        on the device with no host round trip;
//                        UpdatePrioritiesFromDevice writes its priorities.
//   DeviceUniformDraws   a uniform table with priority_device: the host's
//                        UniformSelector draws for Table::Sample and mirrors
//                        its live items into the DeviceTier, so that
//                        SampleToDevice draws inside the gather kernel.
//
// The table does the rest of a sample (the rate limiter, times sampled, the
// windows, the gather) the same way for every kind.
//
// Thread safety: the owning table's mutex guards every call.
#ifndef REPLAYDB_ENGINE_TABLE_DRAW_STRATEGY_H_
#define REPLAYDB_ENGINE_TABLE_DRAW_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "engine/gpu/device_tier.h"
#include "index/selectors/selector.h"
#include "index/trajectory_store.h"
#include "kernels/priority/device_priority_table.h"
#include "replaydb/device.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"
#include "util/random.h"

namespace replaydb::engine {

class DrawStrategy {
 public:
  // The strategy (and selector) for `spec` (REQUIRES: spec.Validate().ok()),
  // given `gpus` usable CUDA devices (`why_none` says why there are none).
  // NotSupported when the spec's priority_device cannot be used.
  static Result<std::unique_ptr<DrawStrategy>> Create(const TableSpec& spec, int gpus,
                                                      const std::string& why_none);
  virtual ~DrawStrategy() = default;
  DrawStrategy(const DrawStrategy&) = delete;
  DrawStrategy& operator=(const DrawStrategy&) = delete;

  index::Selector& selector() { return *selector_; }
  const index::Selector& selector() const { return *selector_; }

  // What the table's device tier must keep for these draws
  // (DeviceTier::Options::item_steps and uniform_draws).
  virtual void ConfigureTier(DeviceTier::Options* /*options*/) const {}
  // Called once, with the table's device tier (null: none) once it exists.
  virtual void AttachTier(DeviceTier* /*tier*/) {}

  // ---- Table::Sample's draws, one at a time: draw b of a batch comes after
  // the side effects of the draws before it (an item sampled
  // max_times_sampled times leaves the selector in between).

  // Before the first draw of a batch of `batch`. `store` resolves drawn
  // keys; `stream` is the device tier's (when there is one).
  virtual Status PrepareHostDraws(int64_t /*batch*/, const SampleOptions& /*options*/,
                                  const index::TrajectoryStore& /*store*/, void* /*stream*/) {
    return Status::OK();
  }
  // Draw `b`. REQUIRES: the selector has mass; PrepareHostDraws returned OK.
  virtual index::Selection HostDraw(int64_t /*b*/, util::Random& rng, index::Stratum stratum) {
    return selector_->Select(rng, stratum);
  }
  // Draws 0 .. out.size() - 1 at once, where nothing the caller does
  // between draws changes the selector (the host's draws: the selector's
  // SelectMany).
  virtual void HostDrawMany(util::Random& rng, bool stratified, std::span<index::Selection> out) {
    const int64_t n = static_cast<int64_t>(out.size());
    for (int64_t b = 0; b < n; ++b) {
      out[b] = HostDraw(b, rng, stratified ? index::Stratum{b, n} : index::Stratum{});
    }
  }
  // Draw b's importance weight with exponent `beta` divided by the largest
  // any live item could get (WeightNormalization::kBuffer), right after
  // HostDraw(b) drew an item of `priority`: 2^(beta * log2(P_min / P))
  // from the selector here.
  virtual double HostDrawBufferWeight(int64_t /*b*/, double beta, double priority) const;

  // ---- SampleToDevice

  // OK, or the error that stops every draw (a GPU priority table's first
  // staging error: a broken invariant).
  virtual Status status() const { return Status::OK(); }
  // Whether SampleToDevice draws on the device (DrawAndGather), with no host
  // round trip; otherwise the table draws on the host and the tier gathers.
  virtual bool draws_on_device() const { return false; }
  // Draws `batch` items and gathers their windows into `out` on `stream`.
  // REQUIRES: draws_on_device(), the selector has mass.
  virtual Status DrawAndGather(DeviceTier& tier, int64_t batch, const SampleOptions& options,
                               util::Random& rng, const DeviceSampleOutput& out, void* stream);

  // ---- priorities on a GPU

  // The GPU priority table (UpdatePrioritiesFromDevice writes it; Info and
  // ItemPriorities read it), or null.
  virtual kernels::DevicePriorityTable* device_priorities() { return nullptr; }
  // OK when device_priorities() can be used; otherwise FailedPrecondition
  // saying why there are none (or the device table's first error).
  virtual Status DevicePrioritiesStatus() const;

 protected:
  DrawStrategy(std::string table, std::unique_ptr<index::Selector> selector)
      : table_(std::move(table)), selector_(std::move(selector)) {}

  const std::string table_;  // the table's name, for messages
  std::unique_ptr<index::Selector> selector_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_DRAW_STRATEGY_H_
