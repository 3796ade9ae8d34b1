// LabelBatchRuns (batch_runs.h): one thread a row; the runs travel by value
// in the launch's parameters, each row finding its run by its end.
#include "kernels/gather/batch_runs.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/runtime/cuda_status.cuh"

namespace replaydb {
namespace {

struct RunTable {
  int64_t ends[kMaxBatchRuns];  // exclusive end row of each run
  int64_t shards[kMaxBatchRuns];
  double shares[kMaxBatchRuns];
  int count;
};

__global__ void LabelKernel(RunTable table, int64_t n, const float* local,
                            double* probabilities, int64_t* shards) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= n) return;
  int r = 0;
  while (r + 1 < table.count && b >= table.ends[r]) ++r;
  probabilities[b] = static_cast<double>(local[b]) * table.shares[r];
  shards[b] = table.shards[r];
}

}  // namespace

Status LabelBatchRuns(int device, std::span<const BatchRun> runs, const float* local,
                      double* probabilities, int64_t* shards, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(kernels::CheckBatchRuns(runs, local, probabilities, shards));
  RunTable table{};
  int64_t n = 0;
  for (const BatchRun& run : runs) {
    if (run.rows == 0) continue;
    n += run.rows;
    table.ends[table.count] = n;
    table.shards[table.count] = run.shard;
    table.shares[table.count] = run.share;
    ++table.count;
  }
  if (n == 0) return Status::OK();
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) return Status::NotSupported("LabelBatchRuns: no usable GPU: " + why);
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("LabelBatchRuns: device " + std::to_string(device) +
                                   " is outside [0, " + std::to_string(count) + ")");
  }
  kernels::ScopedDevice on(device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  LabelKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, n, local,
                                                                         probabilities, shards);
  return kernels::CudaStatus(cudaGetLastError(), "LabelBatchRuns: launch");
}

}  // namespace replaydb
