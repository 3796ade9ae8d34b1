#include "engine/table/draw_strategy.h"

#include <cmath>

#include "engine/gpu/device_draws.h"
#include "engine/table/table_layout.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

// The host's selector draws (priority_device = -1).
class HostDraws final : public DrawStrategy {
 public:
  HostDraws(std::string table, std::unique_ptr<index::Selector> selector)
      : DrawStrategy(std::move(table), std::move(selector)) {}

  void HostDrawMany(util::Random& rng, bool stratified,
                    std::span<index::Selection> out) override {
    selector_->SelectMany(rng, stratified, out);
  }
};

}  // namespace

Result<std::unique_ptr<DrawStrategy>> DrawStrategy::Create(const TableSpec& spec, int gpus,
                                                           const std::string& why_none) {
  // Items are found by their hot-tier slot where the selector can.
  const int64_t slots = CapacityBlocks(spec) * spec.block_steps;
  if (spec.priority_device < 0) {
    return std::unique_ptr<DrawStrategy>(std::make_unique<HostDraws>(
        spec.name, index::NewSelector({spec.selector, spec.priority_exponent, slots,
                                       spec.block_steps})));
  }
  if (spec.selector == SelectorKind::kUniform) {
    return DeviceUniformDraws::Create(spec, gpus, why_none);
  }
  return DevicePriorityDraws::Create(spec);
}

double DrawStrategy::HostDrawBufferWeight(int64_t /*b*/, double beta, double priority) const {
  return std::exp2(beta * selector_->Log2MinProbabilityRatio(priority));
}

Status DrawStrategy::DrawAndGather(DeviceTier& /*tier*/, int64_t /*batch*/,
                                   const SampleOptions& /*options*/, util::Random& /*rng*/,
                                   const DeviceSampleOutput& /*out*/, void* /*stream*/) {
  return Status::Internal("table " + Quoted(table_) + ": its draws do not run on the device");
}

Status DrawStrategy::DevicePrioritiesStatus() const {
  return Status::FailedPrecondition("table " + Quoted(table_) +
                                    " keeps its priorities on the host (priority_device = -1)");
}

}  // namespace replaydb::engine
