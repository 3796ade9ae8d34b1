#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/gpu.h"
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

int CudaDeviceCount(std::string* why_none) { return kernels::CudaDeviceCount(why_none); }

}  // namespace replaydb
