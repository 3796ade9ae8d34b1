// nvcc warns (2810) when a [[nodiscard]] class such as Status is assigned.
#pragma nv_diag_suppress 2810

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/runtime/cuda_status.cuh"
#include "kernels/runtime/device_memory.h"
#include "replaydb/device.h"

namespace replaydb {
using kernels::CudaStatus;
using kernels::ScopedDevice;

namespace {

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

}  // namespace

DeviceBuffer::~DeviceBuffer() {
  Release();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceBuffer::Release() {
  if (data_ == nullptr) return;
  ScopedDevice on(device_);
  (void)cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
}

Result<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  DeviceBuffer buffer;
  buffer.device_ = device;
  if (bytes == 0) return Result<DeviceBuffer>(std::move(buffer));
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMalloc(&buffer.data_, bytes),
                                "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  buffer.size_ = bytes;
  return Result<DeviceBuffer>(std::move(buffer));
}

Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes, size_t offset, void* stream) {
  if (offset + bytes > size_) {
    return Status::InvalidArgument("DeviceBuffer::CopyFromHost: " + std::to_string(bytes) +
                                   " bytes at offset " + std::to_string(offset) +
                                   " overrun a buffer of " + std::to_string(size_));
  }
  if (bytes == 0) return Status::OK();
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(static_cast<char*>(data_) + offset, src, bytes,
                                                cudaMemcpyHostToDevice, AsStream(stream)),
                                "cudaMemcpyAsync(host to device)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize");
  return Status::OK();
}

Status DeviceBuffer::CopyToHost(void* dst, size_t bytes, size_t offset, void* stream) const {
  if (offset + bytes > size_) {
    return Status::InvalidArgument("DeviceBuffer::CopyToHost: " + std::to_string(bytes) +
                                   " bytes at offset " + std::to_string(offset) +
                                   " overrun a buffer of " + std::to_string(size_));
  }
  if (bytes == 0) return Status::OK();
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(dst, static_cast<const char*>(data_) + offset,
                                                bytes, cudaMemcpyDeviceToHost, AsStream(stream)),
                                "cudaMemcpyAsync(device to host)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize");
  return Status::OK();
}

Status DeviceBuffer::Fill(uint8_t value, void* stream) {
  if (size_ == 0) return Status::OK();
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(data_, value, size_, AsStream(stream)),
                                "cudaMemsetAsync");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize");
  return Status::OK();
}

DeviceStream::~DeviceStream() {
  Release();
}

DeviceStream::DeviceStream(DeviceStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

DeviceStream& DeviceStream::operator=(DeviceStream&& other) noexcept {
  if (this != &other) {
    Release();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void DeviceStream::Release() {
  if (stream_ == nullptr) return;
  ScopedDevice on(device_);
  (void)cudaStreamDestroy(AsStream(stream_));
  stream_ = nullptr;
}

Result<DeviceStream> DeviceStream::Create(int device) {
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  DeviceStream s;
  s.device_ = device;
  cudaStream_t stream = nullptr;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags");
  s.stream_ = stream;
  return Result<DeviceStream>(std::move(s));
}

Status DeviceStream::Synchronize() const {
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(AsStream(stream_)), "cudaStreamSynchronize");
  return Status::OK();
}

PinnedBuffer::~PinnedBuffer() {
  Release();
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PinnedBuffer::Release() {
  kernels::FreePinned(data_);
  data_ = nullptr;
  size_ = 0;
}

Result<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return Result<PinnedBuffer>(std::move(buffer));
  REPLAYDB_RETURN_IF_ERROR(kernels::AllocatePinned(bytes, &buffer.data_)
                               .WithContext("PinnedBuffer::Allocate"));
  buffer.size_ = bytes;
  return Result<PinnedBuffer>(std::move(buffer));
}

namespace {

// Queues one cudaMemcpyAsync of `kind`; `name` is the public call's name.
// A copy may be issued to a stream of any device, so the current device is
// left alone.
Status QueueCopy(void* dst, const void* src, size_t bytes, void* stream, cudaMemcpyKind kind,
                 const char* name) {
  if (bytes == 0) return Status::OK();
  if (dst == nullptr || src == nullptr) {
    return Status::InvalidArgument(std::string(name) + ": null " +
                                   (dst == nullptr ? "destination" : "source") + " for " +
                                   std::to_string(bytes) + " bytes");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(dst, src, bytes, kind, AsStream(stream)),
      std::string(name) + ": cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)");
  return Status::OK();
}

}  // namespace

Status CopyDeviceToHost(void* host_dst, const void* device_src, size_t bytes, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(QueueCopy(host_dst, device_src, bytes, stream, cudaMemcpyDeviceToHost,
                                     "CopyDeviceToHost"));
  if (bytes == 0) return Status::OK();
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(AsStream(stream)),
                                "CopyDeviceToHost: cudaStreamSynchronize");
  return Status::OK();
}

Status CopyDeviceToDeviceAsync(void* device_dst, const void* device_src, size_t bytes,
                               void* stream) {
  return QueueCopy(device_dst, device_src, bytes, stream, cudaMemcpyDeviceToDevice,
                   "CopyDeviceToDeviceAsync");
}

Status CopyHostToDeviceAsync(void* device_dst, const void* host_src, size_t bytes, void* stream) {
  return QueueCopy(device_dst, host_src, bytes, stream, cudaMemcpyHostToDevice,
                   "CopyHostToDeviceAsync");
}

Status StreamWaitEvent(void* stream, void* event) {
  if (event == nullptr) return Status::InvalidArgument("StreamWaitEvent: null event");
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    return Status::NotSupported("StreamWaitEvent: no GPU can be used (" + why + ")");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaStreamWaitEvent(AsStream(stream), static_cast<cudaEvent_t>(event), 0),
      "StreamWaitEvent: cudaStreamWaitEvent");
  return Status::OK();
}

Status RecordEvent(void* event, void* stream) {
  if (event == nullptr) return Status::InvalidArgument("RecordEvent: null event");
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    return Status::NotSupported("RecordEvent: no GPU can be used (" + why + ")");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event), AsStream(stream)),
                                "RecordEvent: cudaEventRecord");
  return Status::OK();
}

Status StreamWait(void* waiting, void* on) {
  if (waiting == on) return Status::OK();
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    return Status::NotSupported("StreamWait: no GPU can be used (" + why + ")");
  }
  // The event belongs to the device of the stream it is recorded on.
  int device = 0;
  if (on != nullptr) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamGetDevice(AsStream(on), &device),
                                  "StreamWait: cudaStreamGetDevice");
  } else {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device), "StreamWait: cudaGetDevice");
  }
  ScopedDevice scoped(device);
  REPLAYDB_RETURN_IF_ERROR(scoped.status());
  cudaEvent_t event = nullptr;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                "StreamWait: cudaEventCreateWithFlags");
  cudaError_t err = cudaEventRecord(event, AsStream(on));
  const char* call = "StreamWait: cudaEventRecord";
  if (err == cudaSuccess) {
    err = cudaStreamWaitEvent(AsStream(waiting), event, 0);
    call = "StreamWait: cudaStreamWaitEvent";
  }
  // Destroying an event that work still waits for is safe: CUDA frees it
  // once the wait is done.
  cudaEventDestroy(event);
  if (err != cudaSuccess) return kernels::CudaStatus(err, call);
  return Status::OK();
}

Status DeviceSynchronize(int device) {
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return Status::OK();
}

}  // namespace replaydb
