// Hot-tier memory and ordering primitives for host code: pinned (page-locked,
// mapped) host memory, plain device memory, synchronous copies, and events.
// Plain C++: host code includes this, never a CUDA header. Built from
// device_memory.cu with nvcc, otherwise from device_memory_nocuda.cc, where
// every call returns NotSupported ("built without CUDA").
//
// Streams are passed as void* (a cudaStream_t); nullptr is the legacy
// default stream. Arguments are checked before any CUDA call: a null
// out-pointer or copy address (with bytes > 0) is InvalidArgument, as is a
// device outside [0, device count); without a usable GPU every call is
// NotSupported, naming the call and why.
#ifndef REPLAYDB_KERNELS_RUNTIME_DEVICE_MEMORY_H_
#define REPLAYDB_KERNELS_RUNTIME_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "replaydb/status.h"

namespace replaydb::kernels {

// Page-locked host memory, mapped into every device's address space
// (cudaHostAlloc with cudaHostAllocPortable | cudaHostAllocMapped). With
// unified addressing (every 64-bit Linux build) the returned pointer is also
// the address kernels use. ResourceExhausted (naming the bytes) when the
// system cannot pin that much. bytes == 0 gives null.
Status AllocatePinned(size_t bytes, void** host_ptr);
// REQUIRES: p came from AllocatePinned (or is null).
void FreePinned(void* p);
// Page-locks host memory that came from elsewhere (cudaHostRegister,
// portable and mapped), so that copies from any device reach it at pinned
// speed and kernels can write it (HostMemoryOnDevice).
// REQUIRES: [p, p + bytes) is not page-locked yet; UnregisterHost(p) before
// it is freed.
Status RegisterHost(void* p, size_t bytes);
void UnregisterHost(void* p);
// The address through which kernels reach page-locked host memory `p`
// (from AllocatePinned or RegisterHost).
Result<void*> HostMemoryOnDevice(void* p);

// Device memory on `device` (cudaMalloc; never managed memory).
// ResourceExhausted (naming the bytes and the device) when it is full.
// bytes == 0 gives null.
Status AllocateDevice(int device, size_t bytes, void** device_ptr);
// REQUIRES: p came from AllocateDevice(device, ...) (or is null).
void FreeDevice(int device, void* p);

// Copies `bytes` between host memory and memory a kernel of `device` can
// address (device or pinned), on an internal per-thread stream of `device`;
// the copy is complete when the call returns. That stream is the calling
// thread's default stream (cudaStreamPerThread): it waits for work queued
// before on the legacy default stream, not for other streams' work, which
// the caller must wait for first (a DeviceEvent, a stream synchronize).
Status CopyToDevice(int device, void* dst, const void* src, size_t bytes);
Status CopyFromDevice(int device, void* dst, const void* src, size_t bytes);

// Waits until the work queued on `stream` (a cudaStream_t; nullptr: the
// legacy default stream) is done.
Status StreamSynchronize(void* stream);

// A number that identifies `stream` (cudaStreamGetId) for as long as the
// process runs: unlike the handle, never reused by a later stream. The
// per-thread default stream and the legacy one have their own ids.
Result<uint64_t> StreamId(void* stream);

// A CUDA event of one device (timing disabled). Movable, not copyable.
// Calls on an event that is not valid() return FailedPrecondition.
class DeviceEvent {
 public:
  DeviceEvent() = default;
  ~DeviceEvent();
  DeviceEvent(DeviceEvent&& other) noexcept;
  DeviceEvent& operator=(DeviceEvent&& other) noexcept;
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;

  static Result<DeviceEvent> Create(int device);

  // Captures the work queued on `stream` so far.
  Status Record(void* stream);
  // Makes `stream` wait (on the device, not the host) for the last Record.
  // A never-recorded event is complete.
  Status MakeStreamWait(void* stream) const;
  // True when the recorded work is done (never blocks).
  Result<bool> Done() const;
  // Blocks the host until the recorded work is done.
  Status Synchronize() const;

  bool valid() const { return event_ != nullptr; }

 private:
  void Release();
  void* event_ = nullptr;  // cudaEvent_t
  int device_ = 0;
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_RUNTIME_DEVICE_MEMORY_H_
