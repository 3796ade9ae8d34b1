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

// Launches a kernel on `device` that writes n values, copies them back and
// checks every one. The Status names the failing CUDA call.
Status GpuSelfTest(int device, int n);

// The device's time per call of `calls` calls of `call` (each queues work
// on `stream`, on `device`), without the host's: a one-thread kernel holds
// the stream while the host queues them, then lets them run back to back;
// the result is the time from its release to the end of the last call,
// over `calls`. Keep calls * the launches of one call well below the
// driver's queue (some hundreds): a host blocked on a full queue behind the
// held stream would wait for the hold's time limit (10 s), and the result
// would be an error. For benchmarks.
Result<double> DeviceMicrosPerCall(int device, void* stream, int calls,
                                   const std::function<Status()>& call);

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_RUNTIME_GPU_H_
