// The draw strategies of tables whose draws happen on a GPU
// (TableSpec::priority_device >= 0; engine/table/draw_strategy.h):
// DevicePriorityDraws keeps the priorities in a GPU priority table
// (DeviceSelector) that draws for both Table::Sample and SampleToDevice;
// DeviceUniformDraws draws uniformly inside the gather kernel from the live
// items that the host's UniformSelector mirrors into the DeviceTier.
//
// Thread safety: the owning table's mutex guards every call.
#ifndef REPLAYDB_ENGINE_GPU_DEVICE_DRAWS_H_
#define REPLAYDB_ENGINE_GPU_DEVICE_DRAWS_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/gpu/device_selector.h"
#include "engine/table/draw_strategy.h"
#include "index/selectors/uniform_selector.h"
#include "replaydb/device.h"

namespace replaydb::engine {

class DevicePriorityDraws final : public DrawStrategy {
 public:
  // NotSupported (naming the table and device) where the GPU priority table
  // cannot be made.
  static Result<std::unique_ptr<DrawStrategy>> Create(const TableSpec& spec);

  void ConfigureTier(DeviceTier::Options* options) const override;
  // Draws the whole batch on the device and copies it to the host:
  // FailedPrecondition when a drawn key is no item (every priority set to 0
  // from the device: the host cannot see device updates in advance).
  Status PrepareHostDraws(int64_t batch, const SampleOptions& options,
                          const index::TrajectoryStore& store, void* stream) override;
  index::Selection HostDraw(int64_t b, util::Random& rng, index::Stratum stratum) override;
  // The weight the device wrote with the draws (PrepareHostDraws asks for
  // table-wide weights when options ask for kBuffer ones).
  double HostDrawBufferWeight(int64_t b, double beta, double priority) const override;
  Status status() const override { return device_->error(); }
  bool draws_on_device() const override { return true; }
  Status DrawAndGather(DeviceTier& tier, int64_t batch, const SampleOptions& options,
                       util::Random& rng, const DeviceSampleOutput& out, void* stream) override;
  kernels::DevicePriorityTable* device_priorities() override { return &device_->table(); }
  Status DevicePrioritiesStatus() const override { return device_->error(); }

 private:
  DevicePriorityDraws(const TableSpec& spec, std::unique_ptr<DeviceSelector> selector);

  DeviceSelector* const device_;  // the selector
  const int device_id_;
  // Table::Sample's draws land here on the device (on the tier's stream)
  // and in draws_ on the host.
  // A host draw's outputs on the device, back to back so that one copy
  // brings them over: [batch keys][batch probabilities][batch weights].
  DeviceBuffer drawn_;
  std::vector<std::byte> drawn_host_;
  std::vector<index::Selection> draws_;
  std::vector<float> weights_host_;
};

class DeviceUniformDraws final : public DrawStrategy {
 public:
  // NotSupported (naming the table and device) when `gpus` has no
  // spec.priority_device.
  static Result<std::unique_ptr<DrawStrategy>> Create(const TableSpec& spec, int gpus,
                                                      const std::string& why_none);

  void ConfigureTier(DeviceTier::Options* options) const override;
  // The selector's live items are mirrored into `tier` from now on.
  void AttachTier(DeviceTier* tier) override;
  bool draws_on_device() const override { return true; }
  Status DrawAndGather(DeviceTier& tier, int64_t batch, const SampleOptions& options,
                       util::Random& rng, const DeviceSampleOutput& out, void* stream) override;
  Status DevicePrioritiesStatus() const override;

 private:
  DeviceUniformDraws(std::string table, std::unique_ptr<index::UniformSelector> selector)
      : DrawStrategy(std::move(table), std::move(selector)) {}
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_DEVICE_DRAWS_H_
