// Kernels of the block gather, scatter and index updates, and their
// device-wide entry points, CUB style: each entry point takes a stream,
// launches on it and returns the launch's cudaError_t. The per-CTA work is
// in block_gather_agent.h (shared with the host runner the tests use); the
// launch shapes come from block_gather_plan.h. For the .cu files of kernels/.
#ifndef REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_CUH_
#define REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gather/block_gather_agent.h"

namespace replaydb::kernels::gather {

inline constexpr int kUpdateThreads = 256;
// Resident gather CTAs per multiprocessor the compiler must allow (it caps
// registers to fit): more CTAs hide more of each one's chain-walk latency.
inline constexpr int kMinGatherCtasPerSm = 8;

// Programmatic dependent launch (Hopper): a gather is launched so that it
// may start while the kernel before it on the stream still runs
// (DeviceGather). Its CTAs let the next launch start as soon as they all
// run (LaunchDependents), and wait for the kernel before them to finish,
// with its writes visible, before their first write (WaitForPriorGrid,
// through a PriorGate), so that a gather's index reads and chain walk, and
// with GatherArgs::early_reads the loads of its first vectors, overlap the
// previous kernel (often the previous gather into the same output). Work
// that the stream waits for through an event (index flushes, scatters on
// other streams) is complete before the gather starts at all, as without
// the attribute. Both are no-ops in a kernel launched without it.
__device__ __forceinline__ void LaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

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
  LaunchDependents();
  if (blockIdx.x < args.copy_ctas) {
    WaitForPriorGrid();
    GatherSmallCopies(args, tid, threads);
    return;
  }
  const uint32_t cta = blockIdx.x - args.copy_ctas;  // the work CTA
  if (tid == 0) {
    GatherPrepare(args, cta, &shared);
    GatherWalk(args, &shared, 0);
  }
  __syncthreads();
  // Waits at once, or (early_reads) between the first loads and stores.
  PriorGate gate{.passed = !args.early_reads};
  if (!args.early_reads) WaitForPriorGrid();
  const int64_t rounds = GatherRounds(shared);
  for (int64_t r = 0; r < rounds; ++r) {
    if (r > 0) {
      __syncthreads();  // every thread is done with the last round's addresses
      if (tid == 0) GatherWalk(args, &shared, r);
      __syncthreads();
    }
    GatherCopyRound(args, cta, shared, r, tid, threads, &gate);
  }
  gate.Pass();  // a thread that wrote nothing yet
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

// `overlap`: launch with programmatic stream serialization (see
// LaunchDependents), on devices of compute capability 9.0 and later.
inline cudaError_t DeviceGather(const GatherArgs& args, uint32_t grid, uint32_t threads,
                                cudaStream_t stream, bool overlap) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (overlap) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&config, GatherKernel, args);
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

#endif  // REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_CUH_
