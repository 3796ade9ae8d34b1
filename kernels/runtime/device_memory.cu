// Pinned and device memory, synchronous copies and events on CUDA. Arguments
// are checked before any CUDA call; then the device must be usable
// (NotSupported naming the call and why not).
//
// Copies run on the calling thread's default stream of the device
// (cudaStreamPerThread) and then wait for that stream: cudaMemcpyAsync may
// return before the copy is done (also from or to pageable host memory),
// so the copy is complete on return only because of the synchronize.
// nvcc warns (2810) when a [[nodiscard]] class such as Status is assigned.
#pragma nv_diag_suppress 2810

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/runtime/cuda_status.cuh"
#include "kernels/runtime/device_memory.h"
#include "kernels/runtime/gpu.h"

namespace replaydb::kernels {
namespace {

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

// OK when `device` names a usable GPU.
Status UsableDevice(int device, const std::string& call) {
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) return Status::NotSupported(call + ": no usable GPU: " + why);
  if (device < 0 || device >= count) {
    return Status::InvalidArgument(call + ": device " + std::to_string(device) +
                                   " is outside [0, " + std::to_string(count) + ")");
  }
  return Status::OK();
}

Status Copy(const char* call, int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::OK();
  if (dst == nullptr) return Status::InvalidArgument(std::string(call) + ": dst is null");
  if (src == nullptr) return Status::InvalidArgument(std::string(call) + ": src is null");
  REPLAYDB_RETURN_IF_ERROR(UsableDevice(device, call));
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  const std::string what = std::string(call) + ": ";
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread),
      what + "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)");
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(cudaStreamPerThread),
                                what + "cudaStreamSynchronize");
  return Status::OK();
}

// An allocation's failure as Status, cleared from CUDA's last-error slot so
// that the next launch check (cudaGetLastError) does not report it again.
Status AllocationFailed(cudaError_t err, const std::string& call) {
  (void)cudaGetLastError();
  return CudaStatus(err, call);
}

Status NotValid(const char* call) {
  return Status::FailedPrecondition(std::string(call) +
                                    ": the event is not valid (default-constructed or moved from)");
}

}  // namespace

Status AllocatePinned(size_t bytes, void** host_ptr) {
  if (host_ptr == nullptr) return Status::InvalidArgument("AllocatePinned: host_ptr is null");
  *host_ptr = nullptr;
  if (bytes == 0) return Status::OK();
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    return Status::NotSupported("AllocatePinned: no usable GPU: " + why);
  }
  const cudaError_t err =
      cudaHostAlloc(host_ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err != cudaSuccess) {
    *host_ptr = nullptr;
    return AllocationFailed(err,
                            "AllocatePinned: cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
  }
  return Status::OK();
}

void FreePinned(void* p) {
  if (p != nullptr) (void)cudaFreeHost(p);
}

Status RegisterHost(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return Status::InvalidArgument("RegisterHost: nothing to register");
  std::string why;
  if (CudaDeviceCount(&why) == 0) return Status::NotSupported("RegisterHost: no usable GPU: " + why);
  const cudaError_t err =
      cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return AllocationFailed(err, "RegisterHost: cudaHostRegister(" + std::to_string(bytes) +
                                     " bytes)");
  }
  return Status::OK();
}

void UnregisterHost(void* p) {
  if (p != nullptr) (void)cudaHostUnregister(p);
}

Result<void*> HostMemoryOnDevice(void* p) {
  void* on_device = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&on_device, p, 0);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::InvalidArgument(std::string("HostMemoryOnDevice: cudaHostGetDevicePointer: ") +
                                   cudaGetErrorString(err));
  }
  return on_device;
}

Status AllocateDevice(int device, size_t bytes, void** device_ptr) {
  if (device_ptr == nullptr) return Status::InvalidArgument("AllocateDevice: device_ptr is null");
  *device_ptr = nullptr;
  REPLAYDB_RETURN_IF_ERROR(UsableDevice(device, "AllocateDevice"));
  if (bytes == 0) return Status::OK();
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  const cudaError_t err = cudaMalloc(device_ptr, bytes);
  if (err != cudaSuccess) {
    *device_ptr = nullptr;
    return AllocationFailed(err, "AllocateDevice: cudaMalloc(" + std::to_string(bytes) +
                                     " bytes on device " + std::to_string(device) + ")");
  }
  return Status::OK();
}

void FreeDevice(int device, void* p) {
  if (p == nullptr) return;
  ScopedDevice on(device);
  (void)cudaFree(p);
}

Status StreamSynchronize(void* stream) {
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::Internal(std::string("StreamSynchronize: ") + cudaGetErrorString(err));
  }
  return Status::OK();
}

Result<uint64_t> StreamId(void* stream) {
  unsigned long long id = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamGetId(static_cast<cudaStream_t>(stream), &id),
                                "cudaStreamGetId");
  return static_cast<uint64_t>(id);
}

Status CopyToDevice(int device, void* dst, const void* src, size_t bytes) {
  return Copy("CopyToDevice", device, dst, src, bytes);
}

Status CopyFromDevice(int device, void* dst, const void* src, size_t bytes) {
  return Copy("CopyFromDevice", device, dst, src, bytes);
}

// ------------------------------------------------------------------ events

DeviceEvent::~DeviceEvent() {
  Release();
}

DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

DeviceEvent& DeviceEvent::operator=(DeviceEvent&& other) noexcept {
  if (this != &other) {
    Release();
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void DeviceEvent::Release() {
  if (event_ == nullptr) return;
  ScopedDevice on(device_);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  event_ = nullptr;
}

Result<DeviceEvent> DeviceEvent::Create(int device) {
  REPLAYDB_RETURN_IF_ERROR(UsableDevice(device, "DeviceEvent::Create"));
  ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  DeviceEvent e;
  e.device_ = device;
  cudaEvent_t event = nullptr;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                "DeviceEvent::Create: cudaEventCreateWithFlags");
  e.event_ = event;
  return Result<DeviceEvent>(std::move(e));
}

Status DeviceEvent::Record(void* stream) {
  if (event_ == nullptr) return NotValid("DeviceEvent::Record");
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(static_cast<cudaEvent_t>(event_), AsStream(stream)),
                                "DeviceEvent::Record: cudaEventRecord");
  return Status::OK();
}

Status DeviceEvent::MakeStreamWait(void* stream) const {
  if (event_ == nullptr) return NotValid("DeviceEvent::MakeStreamWait");
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaStreamWaitEvent(AsStream(stream), static_cast<cudaEvent_t>(event_), 0),
      "DeviceEvent::MakeStreamWait: cudaStreamWaitEvent");
  return Status::OK();
}

Result<bool> DeviceEvent::Done() const {
  if (event_ == nullptr) return NotValid("DeviceEvent::Done");
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (err == cudaErrorNotReady) {
    // Not an error: clear it, so that a later launch check does not see it.
    (void)cudaGetLastError();
    return false;
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(err, "DeviceEvent::Done: cudaEventQuery");
  return true;
}

Status DeviceEvent::Synchronize() const {
  if (event_ == nullptr) return NotValid("DeviceEvent::Synchronize");
  ScopedDevice on(device_);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)),
                                "DeviceEvent::Synchronize: cudaEventSynchronize");
  return Status::OK();
}

}  // namespace replaydb::kernels
