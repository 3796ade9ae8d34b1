// The build without a CUDA compiler: no device memory can be had.
#include "replaydb/device.h"

namespace replaydb {
namespace {

Status NoCuda(const char* call) {
  return Status::NotSupported(std::string(call) +
                              ": built without CUDA (no nvcc at configure time)");
}

}  // namespace

DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;
void DeviceBuffer::Release() {}

Result<DeviceBuffer> DeviceBuffer::Allocate(int, size_t) {
  return NoCuda("DeviceBuffer::Allocate");
}
Status DeviceBuffer::CopyFromHost(const void*, size_t, size_t, void*) {
  return NoCuda("DeviceBuffer::CopyFromHost");
}
Status DeviceBuffer::CopyToHost(void*, size_t, size_t, void*) const {
  return NoCuda("DeviceBuffer::CopyToHost");
}
Status DeviceBuffer::Fill(uint8_t, void*) {
  return NoCuda("DeviceBuffer::Fill");
}

DeviceStream::~DeviceStream() = default;
DeviceStream::DeviceStream(DeviceStream&&) noexcept = default;
DeviceStream& DeviceStream::operator=(DeviceStream&&) noexcept = default;
void DeviceStream::Release() {}

Result<DeviceStream> DeviceStream::Create(int) {
  return NoCuda("DeviceStream::Create");
}
Status DeviceStream::Synchronize() const {
  return NoCuda("DeviceStream::Synchronize");
}

Status CopyDeviceToHost(void*, const void*, size_t, void*) {
  return NoCuda("CopyDeviceToHost");
}

PinnedBuffer::~PinnedBuffer() = default;
PinnedBuffer::PinnedBuffer(PinnedBuffer&&) noexcept = default;
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&&) noexcept = default;
void PinnedBuffer::Release() {}

Result<PinnedBuffer> PinnedBuffer::Allocate(size_t) {
  return NoCuda("PinnedBuffer::Allocate");
}

Status CopyDeviceToDeviceAsync(void*, const void*, size_t, void*) {
  return NoCuda("CopyDeviceToDeviceAsync");
}
Status CopyHostToDeviceAsync(void*, const void*, size_t, void*) {
  return NoCuda("CopyHostToDeviceAsync");
}

Status DeviceSynchronize(int) {
  return NoCuda("DeviceSynchronize");
}

Status StreamWaitEvent(void*, void* event) {
  if (event == nullptr) return Status::InvalidArgument("StreamWaitEvent: null event");
  return NoCuda("StreamWaitEvent");
}

Status RecordEvent(void* event, void*) {
  if (event == nullptr) return Status::InvalidArgument("RecordEvent: null event");
  return NoCuda("RecordEvent");
}

Status StreamWait(void* waiting, void* on) {
  if (waiting == on) return Status::OK();  // as with CUDA: nothing to order
  return NoCuda("StreamWait");
}

}  // namespace replaydb
