#include "engine/gpu/device_selector.h"

#include <random>
#include <string>

namespace replaydb::engine {

Result<std::unique_ptr<DeviceSelector>> DeviceSelector::Create(int device, int64_t capacity,
                                                               double alpha) {
  kernels::DevicePriorityTable::Options options;
  options.device = device;
  options.capacity = capacity;
  options.alpha = alpha;
  options.caller_slots = true;
  options.track_updates = true;  // for the log and checkpoints (TableImpl)
  options.seed = std::random_device{}();
  auto table = kernels::DevicePriorityTable::Create(options);
  if (!table.ok()) {
    return table.status().WithContext("priorities on CUDA device " + std::to_string(device));
  }
  return std::unique_ptr<DeviceSelector>(new DeviceSelector(std::move(table).value()));
}

void DeviceSelector::Insert(const index::ItemRef& item) {
  Note(table_->InsertAt(item.key, item.priority, item.slot));
}

void DeviceSelector::Remove(const index::ItemRef& item) { Note(table_->Remove(item.key)); }

void DeviceSelector::Update(const index::ItemRef& item, double new_priority) {
  Note(table_->SetPriority(item.key, new_priority));
}

index::Selection DeviceSelector::Select(util::Random&, index::Stratum) const { return {0, 0}; }

}  // namespace replaydb::engine
