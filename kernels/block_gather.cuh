// Kernels of the block gather, scatter and index updates, and their
// device-wide entry points, CUB style: each entry point takes a stream,
// launches on it and returns the launch's cudaError_t. The per-CTA work is
// in block_gather_agent.h (shared with the host runner the tests use); the
// launch shapes come from block_gather_plan.h. For the .cu files of kernels/.
#ifndef REPLAYDB_KERNELS_BLOCK_GATHER_CUH_
#define REPLAYDB_KERNELS_BLOCK_GATHER_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/block_gather_agent.h"

namespace replaydb::kernels::gather {

inline constexpr int kUpdateThreads = 256;
// Resident gather CTAs per multiprocessor the compiler must allow (it caps
// registers to fit): more CTAs hide more of each one's chain-walk latency.
inline constexpr int kMinGatherCtasPerSm = 8;

// One window chunk per CTA (see block_gather_agent.h): thread 0 reads the
// window and walks its chain into shared memory, then every thread copies
// its share of the chunk's runs, round by round when the chunk needs more
// than kChainCacheRuns blocks; then zeros and the mask. CTA 0 does the small
// copies when there are any; the work CTAs follow it.
__global__ void __launch_bounds__(kMaxThreads, kMinGatherCtasPerSm)
    GatherKernel(const __grid_constant__ GatherArgs args) {
  __shared__ GatherShared shared;
  const uint32_t tid = threadIdx.x;
  const uint32_t threads = blockDim.x;
  if (blockIdx.x < args.copy_ctas) {
    GatherSmallCopies(args, tid, threads);
    return;
  }
  const uint32_t cta = blockIdx.x - args.copy_ctas;  // the work CTA
  if (tid == 0) {
    GatherPrepare(args, cta, &shared);
    GatherWalk(args, &shared, 0);
  }
  __syncthreads();
  const int64_t rounds = GatherRounds(shared);
  for (int64_t r = 0; r < rounds; ++r) {
    if (r > 0) {
      __syncthreads();  // every thread is done with the last round's addresses
      if (tid == 0) GatherWalk(args, &shared, r);
      __syncthreads();
    }
    GatherCopyRound(args, cta, shared, r, tid, threads);
  }
  GatherFinish(args, cta, shared, tid, threads);
}

__global__ void __launch_bounds__(kMaxThreads)
    ScatterKernel(const __grid_constant__ ScatterArgs args) {
  ScatterCta(args, blockIdx.x, threadIdx.x, blockDim.x);
}

// d_updates: device-readable (the index reads them from pinned host memory).
__global__ void __launch_bounds__(kUpdateThreads)
    ApplyIndexUpdatesKernel(IndexArrays arrays, const IndexUpdate* d_updates, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) ApplyIndexUpdate(arrays, d_updates[i]);
}

// ------------------------------------------------------------ entry points

inline cudaError_t DeviceGather(const GatherArgs& args, uint32_t grid, uint32_t threads,
                                cudaStream_t stream) {
  GatherKernel<<<grid, threads, 0, stream>>>(args);
  return cudaGetLastError();
}

inline cudaError_t DeviceScatter(const ScatterArgs& args, uint32_t grid, uint32_t threads,
                                 cudaStream_t stream) {
  ScatterKernel<<<grid, threads, 0, stream>>>(args);
  return cudaGetLastError();
}

inline cudaError_t DeviceApplyIndexUpdates(const IndexArrays& arrays, const IndexUpdate* d_updates,
                                           int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t grid = (n + kUpdateThreads - 1) / kUpdateThreads;
  ApplyIndexUpdatesKernel<<<static_cast<unsigned>(grid), kUpdateThreads, 0, stream>>>(arrays,
                                                                                      d_updates, n);
  return cudaGetLastError();
}

}  // namespace replaydb::kernels::gather

#endif  // REPLAYDB_KERNELS_BLOCK_GATHER_CUH_
