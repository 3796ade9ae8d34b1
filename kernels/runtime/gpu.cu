#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/runtime/gpu.h"
#include "replaydb/device.h"

namespace replaydb::kernels {
namespace {

Status CudaStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::OK();
  return Status::Internal(std::string(call) + ": " + cudaGetErrorString(err));
}

__global__ void FillIotaKernel(unsigned* d_out, int n, unsigned salt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d_out[i] = static_cast<unsigned>(i) * 2654435761u ^ salt;
}

// Spins until *release is non-zero, or for about `limit` clock cycles, then
// says in *timed_out which.
__global__ void HoldKernel(const volatile int* release, long long limit, int* timed_out) {
  const long long start = clock64();
  while (*release == 0) {
    if (clock64() - start > limit) {
      *timed_out = 1;
      return;
    }
  }
}

}  // namespace

bool BuiltWithCuda() { return true; }

int CudaDeviceCount(std::string* why_none) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_none) *why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    return 0;
  }
  if (count == 0 && why_none) *why_none = "cudaGetDeviceCount: 0 devices";
  return count;
}

Result<int> CurrentDevice() {
  std::string why;
  if (CudaDeviceCount(&why) == 0) return Status::FailedPrecondition("no GPU: " + why);
  int device = 0;
  REPLAYDB_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  return device;
}

Status UseDevice(int device) { return CudaStatus(cudaSetDevice(device), "cudaSetDevice"); }

Status GpuSelfTest(int device, int n) {
  if (n <= 0) return Status::InvalidArgument("GpuSelfTest: n must be > 0");
  Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
  if (!s.ok()) return s;
  unsigned* d_out = nullptr;
  s = CudaStatus(cudaMalloc(&d_out, sizeof(unsigned) * n), "cudaMalloc");
  if (!s.ok()) return s;
  const unsigned salt = 0x9e3779b9u;
  // Poison first so an unwritten element is caught.
  s = CudaStatus(cudaMemset(d_out, 0xAB, sizeof(unsigned) * n), "cudaMemset");
  if (s.ok()) {
    FillIotaKernel<<<(n + 255) / 256, 256>>>(d_out, n, salt);
    s = CudaStatus(cudaGetLastError(), "FillIotaKernel launch");
  }
  std::vector<unsigned> host(n);
  if (s.ok()) {
    s = CudaStatus(cudaMemcpy(host.data(), d_out, sizeof(unsigned) * n, cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
  }
  cudaFree(d_out);
  if (!s.ok()) return s;
  for (int i = 0; i < n; ++i) {
    if (host[i] != (static_cast<unsigned>(i) * 2654435761u ^ salt)) {
      return Status::Internal("GpuSelfTest: element " + std::to_string(i) + " is wrong");
    }
  }
  return Status::OK();
}


}  // namespace replaydb::kernels

namespace replaydb {

using kernels::CudaStatus;
using kernels::HoldKernel;

int CudaDeviceCount(std::string* why_none) { return kernels::CudaDeviceCount(why_none); }

Result<double> DeviceMicrosPerCall(int device, void* stream, int calls,
                                   const std::function<Status()>& call) {
  if (calls < 1) return Status::InvalidArgument("DeviceMicrosPerCall: calls must be >= 1");
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  int previous = 0;
  Status s = CudaStatus(cudaGetDevice(&previous), "cudaGetDevice");
  if (!s.ok()) return s;
  s = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
  if (!s.ok()) return s;
  int clock_khz = 0;
  int* flags = nullptr;  // [0]: release, [1]: timed out; pinned, mapped
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  float ms = 0;
  s = CudaStatus(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device),
                 "cudaDeviceGetAttribute(clock rate)");
  if (s.ok()) {
    s = CudaStatus(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  }
  if (s.ok()) s = CudaStatus(cudaEventCreate(&start), "cudaEventCreate");
  if (s.ok()) s = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate");
  if (s.ok()) {
    volatile int* f = flags;
    f[0] = 0;
    f[1] = 0;
    int* d_flags = nullptr;
    s = CudaStatus(cudaHostGetDevicePointer(&d_flags, flags, 0), "cudaHostGetDevicePointer");
    if (s.ok()) {
      const long long limit = static_cast<long long>(clock_khz) * 1000 * 10;  // ~10 s
      HoldKernel<<<1, 1, 0, st>>>(d_flags, limit, d_flags + 1);
      s = CudaStatus(cudaGetLastError(), "HoldKernel launch");
    }
    if (s.ok()) s = CudaStatus(cudaEventRecord(start, st), "cudaEventRecord");
    for (int i = 0; s.ok() && i < calls; ++i) s = call();
    if (s.ok()) s = CudaStatus(cudaEventRecord(stop, st), "cudaEventRecord");
    f[0] = 1;  // release, whatever happened
    const Status synced = CudaStatus(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    if (s.ok()) s = synced;
    if (s.ok() && f[1] != 0) {
      s = Status::Internal("DeviceMicrosPerCall: the stream was held for 10 s: queueing " +
                           std::to_string(calls) + " calls blocked the host");
    }
    if (s.ok()) s = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  }
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (flags != nullptr) (void)cudaFreeHost(flags);
  (void)cudaSetDevice(previous);
  if (!s.ok()) return s;
  return static_cast<double>(ms) * 1e3 / calls;
}

}  // namespace replaydb
