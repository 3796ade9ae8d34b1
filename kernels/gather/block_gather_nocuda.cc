// The build without a CUDA compiler: requests are checked as with CUDA, then
// every call answers NotSupported.
#include <memory>
#include <string>

#include "kernels/gather/block_gather.h"
#include "kernels/gather/block_gather_plan.h"

namespace replaydb::kernels {
namespace {

Status NoCuda(const char* call) {
  return Status::NotSupported(std::string(call) +
                              ": built without CUDA (no nvcc at configure time)");
}

}  // namespace

Result<std::unique_ptr<DeviceBlockIndex>> DeviceBlockIndex::Create(const Options& options) {
  REPLAYDB_RETURN_IF_ERROR(ValidateIndexOptions(options));
  return NoCuda("DeviceBlockIndex::Create");
}

Status Gather(const DeviceBlockIndex& index, const GatherRequest& request, void*) {
  REPLAYDB_RETURN_IF_ERROR(ValidateGatherRequest(index.options(), request));
  return NoCuda("Gather");
}

Status Scatter(const DeviceBlockIndex&, const ScatterRequest& request, void*) {
  REPLAYDB_RETURN_IF_ERROR(ValidateScatterRequest(request));
  return NoCuda("Scatter");
}

}  // namespace replaydb::kernels
