// DeviceSelector: the selector of a table whose draws happen on a GPU
// (TableSpec::priority_device >= 0). Insert, Remove and Update are staged
// into a kernels::DevicePriorityTable, each item at the slot where its
// window starts (ItemRef::slot), so a drawn slot leads a gather kernel
// straight to the window; draws happen in batches on the device
// (TableImpl::Sample and SampleToDevice), never through Select. (Uniform
// tables drawing on a device use an index::UniformSelector mirrored into the
// DeviceTier instead.)
#ifndef REPLAYDB_ENGINE_GPU_DEVICE_SELECTOR_H_
#define REPLAYDB_ENGINE_GPU_DEVICE_SELECTOR_H_

#include <memory>

#include "index/selectors/selector.h"
#include "kernels/priority/device_priority_table.h"

namespace replaydb::engine {

class DeviceSelector final : public index::Selector {
 public:
  // NotSupported (naming the device and why) where it cannot be used.
  static Result<std::unique_ptr<DeviceSelector>> Create(int device, int64_t capacity,
                                                        double alpha);

  void Insert(const index::ItemRef& item) override;
  void Remove(const index::ItemRef& item) override;
  void Update(const index::ItemRef& item, double new_priority) override;
  size_t size() const override { return static_cast<size_t>(table_->size()); }
  // Not used: draws are batched on the device. Returns {0, 0}.
  index::Selection Select(util::Random& rng, index::Stratum stratum) const override;

  kernels::DevicePriorityTable& table() { return *table_; }
  // The first staging error (a broken invariant: capacity is the hot tier's
  // step capacity, so the table cannot fill up), OK if none.
  const Status& error() const { return error_; }

 private:
  explicit DeviceSelector(std::unique_ptr<kernels::DevicePriorityTable> table)
      : table_(std::move(table)) {}
  void Note(Status s) {
    if (error_.ok() && !s.ok()) error_ = std::move(s);
  }

  std::unique_ptr<kernels::DevicePriorityTable> table_;
  Status error_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_DEVICE_SELECTOR_H_
