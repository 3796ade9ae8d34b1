// The build without a CUDA compiler: no GPU can be used.
#include "kernels/runtime/gpu.h"
#include "replaydb/device.h"

namespace replaydb::kernels {

bool BuiltWithCuda() { return false; }

int CudaDeviceCount(std::string* why_none) {
  if (why_none) *why_none = "built without CUDA (no nvcc at configure time)";
  return 0;
}

Result<int> CurrentDevice() {
  return Status::FailedPrecondition("no GPU: built without CUDA (no nvcc at configure time)");
}

Status UseDevice(int) {
  return Status::FailedPrecondition("no GPU: built without CUDA (no nvcc at configure time)");
}

Status GpuSelfTest(int, int) {
  return Status::NotSupported("GpuSelfTest: built without CUDA (no nvcc at configure time)");
}


}  // namespace replaydb::kernels

namespace replaydb {

int CudaDeviceCount(std::string* why_none) { return kernels::CudaDeviceCount(why_none); }

Result<double> DeviceMicrosPerCall(int, void*, int calls, const std::function<Status()>&) {
  if (calls < 1) return Status::InvalidArgument("DeviceMicrosPerCall: calls must be >= 1");
  return Status::NotSupported("DeviceMicrosPerCall: built without CUDA (no nvcc at configure time)");
}

}  // namespace replaydb
