// The build without a CUDA compiler: no pinned or device memory, no events.
#include <string>

#include "kernels/runtime/device_memory.h"

namespace replaydb::kernels {
namespace {

Status NoCuda(const char* call) {
  return Status::NotSupported(std::string(call) +
                              ": built without CUDA (no nvcc at configure time)");
}

}  // namespace

Status AllocatePinned(size_t, void** host_ptr) {
  if (host_ptr != nullptr) *host_ptr = nullptr;
  return NoCuda("AllocatePinned");
}
void FreePinned(void*) {}
Status RegisterHost(void*, size_t) {
  return NoCuda("RegisterHost");
}
void UnregisterHost(void*) {}
Result<void*> HostMemoryOnDevice(void*) {
  return NoCuda("HostMemoryOnDevice");
}

Status AllocateDevice(int, size_t, void** device_ptr) {
  if (device_ptr != nullptr) *device_ptr = nullptr;
  return NoCuda("AllocateDevice");
}
void FreeDevice(int, void*) {}

Status StreamSynchronize(void*) {
  return NoCuda("StreamSynchronize");
}
Result<uint64_t> StreamId(void*) {
  return NoCuda("StreamId");
}
Status CopyToDevice(int, void*, const void*, size_t) {
  return NoCuda("CopyToDevice");
}
Status CopyFromDevice(int, void*, const void*, size_t) {
  return NoCuda("CopyFromDevice");
}

DeviceEvent::~DeviceEvent() = default;
DeviceEvent::DeviceEvent(DeviceEvent&&) noexcept = default;
DeviceEvent& DeviceEvent::operator=(DeviceEvent&&) noexcept = default;
void DeviceEvent::Release() {}

Result<DeviceEvent> DeviceEvent::Create(int) {
  return NoCuda("DeviceEvent::Create");
}
Status DeviceEvent::Record(void*) {
  return NoCuda("DeviceEvent::Record");
}
Status DeviceEvent::MakeStreamWait(void*) const {
  return NoCuda("DeviceEvent::MakeStreamWait");
}
Result<bool> DeviceEvent::Done() const {
  return NoCuda("DeviceEvent::Done");
}
Status DeviceEvent::Synchronize() const {
  return NoCuda("DeviceEvent::Synchronize");
}

}  // namespace replaydb::kernels
