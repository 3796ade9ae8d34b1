// GPU presence and a self-test. Plain C++: host code includes this, never a
// CUDA header. Built from gpu.cu when nvcc is available, otherwise from
// gpu_nocuda.cc, which reports that no GPU can be used.
#ifndef REPLAYDB_KERNELS_RUNTIME_GPU_H_
#define REPLAYDB_KERNELS_RUNTIME_GPU_H_

#include <functional>
#include <string>

#include "replaydb/status.h"

namespace replaydb::kernels {

// True when this build contains CUDA kernels.
bool BuiltWithCuda();

// Number of CUDA devices this process can use. When it is 0, *why_none (if
// not null) says why: "built without CUDA", or the failing CUDA call and its
// error ("cudaGetDeviceCount: no CUDA-capable device is detected").
int CudaDeviceCount(std::string* why_none);

// The calling thread's current CUDA device (cudaGetDevice);
// FailedPrecondition "no GPU: ..." (with CudaDeviceCount's reason) where
// there is none.
Result<int> CurrentDevice();

// Makes `device` the calling thread's current device (cudaSetDevice).
Status UseDevice(int device);

// Launches a kernel on `device` that writes n values, copies them back and
// checks every one. The Status names the failing CUDA call.
Status GpuSelfTest(int device, int n);

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_RUNTIME_GPU_H_
