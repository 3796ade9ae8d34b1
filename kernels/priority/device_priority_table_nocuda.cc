// The build without a CUDA compiler: no device priority table can be made,
// whatever the options (caller_slots included), so no other member
// (Insert, InsertAt, Sample with SampleParams::d_slots, ...) is defined here.
#include "kernels/priority/device_priority_table.h"

namespace replaydb::kernels {

Result<std::unique_ptr<DevicePriorityTable>> DevicePriorityTable::Create(const Options&) {
  return Status::NotSupported(
      "DevicePriorityTable: built without CUDA (no nvcc at configure time)");
}

}  // namespace replaydb::kernels
