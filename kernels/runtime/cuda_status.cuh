// CUDA errors as Status, and a scoped current-device switch. For the .cu
// files of kernels/ only: this is the edge where cudaError_t becomes Status.
#ifndef REPLAYDB_KERNELS_RUNTIME_CUDA_STATUS_CUH_
#define REPLAYDB_KERNELS_RUNTIME_CUDA_STATUS_CUH_

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "replaydb/status.h"

namespace replaydb::kernels {

// OK for cudaSuccess; otherwise "<call>: <CUDA's message>", as
// ResourceExhausted for an allocation failure and Internal for the rest.
inline Status CudaStatus(cudaError_t err, std::string_view call) {
  if (err == cudaSuccess) return Status::OK();
  std::string msg =
      std::string(call) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return Status::ResourceExhausted(std::move(msg));
  return Status::Internal(std::move(msg));
}

// Returns from the enclosing function (a Status or Result) when `expr`, a
// CUDA call, fails; the Status names `call`.
#define REPLAYDB_RETURN_IF_CUDA_ERROR(expr, call)                         \
  do {                                                                    \
    const cudaError_t _replaydb_cuda_err = (expr);                        \
    if (_replaydb_cuda_err != cudaSuccess) {                              \
      return ::replaydb::kernels::CudaStatus(_replaydb_cuda_err, (call)); \
    }                                                                     \
  } while (0)

// Makes `device` current for the object's lifetime and restores the caller's
// device afterwards, so that a library call never changes it.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    status_ = CudaStatus(cudaGetDevice(&previous_), "cudaGetDevice");
    if (status_.ok() && previous_ != device) {
      status_ = CudaStatus(cudaSetDevice(device), "cudaSetDevice");
      switched_ = status_.ok();
    }
  }
  ~ScopedDevice() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

  const Status& status() const { return status_; }

 private:
  Status status_;
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_RUNTIME_CUDA_STATUS_CUH_
