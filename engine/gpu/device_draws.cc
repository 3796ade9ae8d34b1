#include "engine/gpu/device_draws.h"

#include <cstring>

#include "engine/table/table_layout.h"
#include "kernels/runtime/gpu.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

// ---- DevicePriorityDraws

namespace {

// The device table's "no item of priority > 0", said as the table's.
Status NoPositivePriority(const Status& s, const std::string& table, int device) {
  if (s.code() != Status::Code::kFailedPrecondition) return s;
  return s.WithContext("table " + Quoted(table) + " draws on CUDA device " +
                       std::to_string(device) +
                       ", which needs an item of priority > 0 (a table drawing on the host "
                       "draws uniformly when every priority is 0)");
}

}  // namespace

Result<std::unique_ptr<DrawStrategy>> DevicePriorityDraws::Create(const TableSpec& spec) {
  const int64_t capacity = CapacityBlocks(spec) * spec.block_steps;
  auto selector = DeviceSelector::Create(spec.priority_device, capacity, spec.priority_exponent);
  if (!selector.ok()) return selector.status().WithContext("table " + Quoted(spec.name));
  return std::unique_ptr<DrawStrategy>(
      new DevicePriorityDraws(spec, std::move(selector).value()));
}

DevicePriorityDraws::DevicePriorityDraws(const TableSpec& spec,
                                         std::unique_ptr<DeviceSelector> selector)
    : DrawStrategy(spec.name, nullptr), device_(selector.get()), device_id_(spec.priority_device) {
  selector_ = std::move(selector);
}

void DevicePriorityDraws::ConfigureTier(DeviceTier::Options* options) const {
  // Windows drawn on the device: their lengths must be there too.
  options->item_steps = true;
}

Status DevicePriorityDraws::PrepareHostDraws(int64_t batch, const SampleOptions& options,
                                             const index::TrajectoryStore& store, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(device_->error());
  kernels::DevicePriorityTable::SampleParams params;
  params.stratified = options.stratified;
  // kBuffer weights need the table-wide smallest probability, which only
  // the device knows (kBatch ones the table forms from the probabilities).
  const bool weights = options.importance_beta >= 0 &&
                       options.weight_normalization == WeightNormalization::kBuffer;
  if (weights) {
    params.beta = options.importance_beta;
    params.table_weights = true;
  }
  const size_t n = static_cast<size_t>(batch);
  const size_t probabilities_at = n * sizeof(uint64_t);
  const size_t weights_at = probabilities_at + n * sizeof(float);
  const size_t bytes = weights_at + (weights ? n * sizeof(float) : 0);
  if (drawn_.size() < weights_at + n * sizeof(float)) {
    drawn_ = DeviceBuffer();
    REPLAYDB_ASSIGN_OR_RETURN(drawn_,
                              DeviceBuffer::Allocate(device_id_, weights_at + n * sizeof(float)));
  }
  std::byte* d = drawn_.as<std::byte>();
  REPLAYDB_RETURN_IF_ERROR(NoPositivePriority(
      device_->table().Sample(batch, params, reinterpret_cast<uint64_t*>(d),
                              reinterpret_cast<float*>(d + probabilities_at),
                              weights ? reinterpret_cast<float*>(d + weights_at) : nullptr, stream),
      table_, device_id_));
  drawn_host_.resize(bytes);
  REPLAYDB_RETURN_IF_ERROR(drawn_.CopyToHost(drawn_host_.data(), bytes, 0, stream));
  weights_host_.resize(weights ? n : 0);
  if (weights) {
    std::memcpy(weights_host_.data(), drawn_host_.data() + weights_at, n * sizeof(float));
  }
  draws_.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t key;
    float probability;
    std::memcpy(&key, drawn_host_.data() + b * sizeof(uint64_t), sizeof(key));
    std::memcpy(&probability, drawn_host_.data() + probabilities_at + b * sizeof(float),
                sizeof(probability));
    // With every priority set to 0 from the device, the device draws a
    // sentinel (the host cannot see device updates in advance).
    const index::Trajectory* t = store.Find(ItemKeyTrajectory(key));
    if (t == nullptr || ItemKeyStart(key) >= t->items_created) {
      return Status::FailedPrecondition(
          "table " + Quoted(table_) + ": the device drew no item (key " + std::to_string(key) +
          "); every priority on the device may be 0");
    }
    draws_[b] = {key, probability};
  }
  return Status::OK();
}

index::Selection DevicePriorityDraws::HostDraw(int64_t b, util::Random& /*rng*/,
                                               index::Stratum /*stratum*/) {
  return draws_[static_cast<size_t>(b)];
}

double DevicePriorityDraws::HostDrawBufferWeight(int64_t b, double /*beta*/,
                                                 double /*priority*/) const {
  return weights_host_[static_cast<size_t>(b)];
}

Status DevicePriorityDraws::DrawAndGather(DeviceTier& tier, int64_t batch,
                                          const SampleOptions& options, util::Random& /*rng*/,
                                          const DeviceSampleOutput& out, void* stream) {
  kernels::DevicePriorityTable::SampleParams params;
  params.beta = options.importance_beta;
  params.table_weights = options.weight_normalization == WeightNormalization::kBuffer;
  params.stratified = options.stratified;
  return NoPositivePriority(tier.DrawAndGather(device_->table(), batch, params, out, stream),
                            table_, device_id_);
}

// ---- DeviceUniformDraws

Result<std::unique_ptr<DrawStrategy>> DeviceUniformDraws::Create(const TableSpec& spec, int gpus,
                                                                 const std::string& why_none) {
  if (gpus <= spec.priority_device) {
    return Status::NotSupported("table " + Quoted(spec.name) + ": uniform draws on CUDA device " +
                                std::to_string(spec.priority_device) + " need that GPU, but " +
                                (gpus == 0 ? "no GPU can be used (" + why_none + ")"
                                           : "only " + std::to_string(gpus) + " can be used"));
  }
  // Items found by slot where slots fit (a uniform device index needs
  // fewer than 2^32 anyway; DeviceTier::Create says so).
  const int64_t slots = CapacityBlocks(spec) * spec.block_steps;
  auto selector = slots <= index::UniformSelector::kMaxSlots
                      ? std::make_unique<index::UniformSelector>(slots, spec.block_steps)
                      : std::make_unique<index::UniformSelector>();
  return std::unique_ptr<DrawStrategy>(new DeviceUniformDraws(spec.name, std::move(selector)));
}

void DeviceUniformDraws::ConfigureTier(DeviceTier::Options* options) const {
  options->item_steps = true;
  options->uniform_draws = true;
}

void DeviceUniformDraws::AttachTier(DeviceTier* tier) {
  if (tier == nullptr) return;
  static_cast<index::UniformSelector&>(*selector_).set_on_place(
      [tier](size_t position, int64_t slot) { tier->PlaceLive(position, slot); });
}

Status DeviceUniformDraws::DrawAndGather(DeviceTier& tier, int64_t batch,
                                         const SampleOptions& options, util::Random& rng,
                                         const DeviceSampleOutput& out, void* stream) {
  // Drawn inside the gather kernel: nothing passes through the host.
  DeviceSampleOutput drawn = out;
  if (options.importance_beta < 0) drawn.weights = nullptr;
  return tier.DrawUniformAndGather(static_cast<int64_t>(selector_->size()), rng.Next(), batch,
                                   drawn, stream);
}

Status DeviceUniformDraws::DevicePrioritiesStatus() const {
  return Status::FailedPrecondition("table " + Quoted(table_) +
                                    ": the uniform selector has no priorities to update");
}

}  // namespace replaydb::engine
