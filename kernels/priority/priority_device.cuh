// Device-wide entry points of the priority table, CUB style: each takes a
// stream, launches its kernels (priority_kernels.cuh) on it, checks every
// launch and returns the first cudaError_t. Calls that need scratch memory
// take (d_temp_storage, temp_storage_bytes): called with d_temp_storage ==
// nullptr they only write the bytes needed. Host code (in .cu files only).
#ifndef REPLAYDB_KERNELS_PRIORITY_PRIORITY_DEVICE_CUH_
#define REPLAYDB_KERNELS_PRIORITY_PRIORITY_DEVICE_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include "kernels/priority/priority_kernels.cuh"

namespace replaydb::kernels::priority {

inline constexpr int kElementwiseThreads = 256;

inline unsigned GridFor(long long items, long long per_block) {
  return static_cast<unsigned>(std::max<long long>(1, (items + per_block - 1) / per_block));
}

// Launch check: the launch's own error (bad configuration) or an earlier
// asynchronous one.
inline cudaError_t LaunchError() {
  return cudaGetLastError();
}

// Entries per lane for scanning a top level of `top_count` entries.
inline int TopItemsPerLane(long long top_count) {
  int items = 1;
  while (items * kWarpThreads < top_count) items *= 2;
  return items;
}

// ---------------------------------------------------------------- staging

inline cudaError_t DeviceFill(double* d_out, long long n, double value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<double>
      <<<GridFor(n, kElementwiseThreads * 8LL), kElementwiseThreads, 0, stream>>>(d_out, n, value);
  return LaunchError();
}

inline cudaError_t DeviceApplySlotWrites(const SlotWrite* d_writes, int n,
                                         unsigned long long* d_slot_keys, double* d_priorities,
                                         float* d_values, double alpha, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ApplySlotWritesKernel<<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      d_writes, n, d_slot_keys, d_priorities, d_values, alpha);
  return LaunchError();
}

inline cudaError_t DeviceHashDelete(const HashView& hash, const unsigned long long* d_keys, int n,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  HashDeleteKernel<<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(hash,
                                                                                        d_keys, n);
  return LaunchError();
}

inline cudaError_t DeviceHashInsert(const HashView& hash, const KeySlot* d_pairs, int n,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  HashInsertKernel<<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(hash,
                                                                                        d_pairs, n);
  return LaunchError();
}

// Empties the table and inserts the key of every occupied slot.
inline cudaError_t DeviceHashRebuild(const HashView& hash, const unsigned long long* d_slot_keys,
                                     const double* d_priorities, long long capacity,
                                     cudaStream_t stream) {
  // 0xff bytes: key ~0, slot -1 (kHashEmpty).
  cudaError_t err =
      cudaMemsetAsync(hash.d_entries, 0xff, sizeof(HashEntry) * (hash.mask + 1), stream);
  if (err != cudaSuccess) return err;
  HashRebuildKernel<<<GridFor(capacity, kElementwiseThreads * 16LL), kElementwiseThreads, 0,
                      stream>>>(hash, d_slot_keys, d_priorities, capacity);
  return LaunchError();
}

// Recomputes the listed entries of `level` (>= 1) from level - 1.
inline cudaError_t DeviceRecomputeEntries(const TreeView& tree, int level, const int32_t* d_entries,
                                          int count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  RecomputeEntriesKernel<<<GridFor(count, kWarpsPerBlock), kBlockThreads, 0, stream>>>(
      tree, level, d_entries, count);
  return LaunchError();
}

inline cudaError_t DeviceLookupPriorities(const HashView& hash, const unsigned long long* d_keys,
                                          int n, const double* d_priorities, double* d_out,
                                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  LookupPrioritiesKernel<<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      hash, d_keys, n, d_priorities, d_out);
  return LaunchError();
}

// ---------------------------------------------------------------- updates

// Scratch of the sorting DeviceUpdatePriorities: four arrays of n uint32 and
// CUB's radix-sort storage, each aligned to 256 bytes.
struct UpdateScratch {
  uint32_t* d_slots_in;
  uint32_t* d_index_in;
  uint32_t* d_slots_out;
  uint32_t* d_index_out;
  void* d_sort_temp;
  size_t sort_temp_bytes;
};

inline size_t AlignUp(size_t bytes) {
  return (bytes + 255) & ~size_t{255};
}

// Bits of a slot index or the sentinel `capacity`.
inline int SlotBits(uint32_t capacity) {
  int bits = 1;
  while (bits < 32 && (uint64_t{1} << bits) <= capacity) ++bits;
  return bits;
}

inline bool UseCooperativeUpdate(int n, int cooperative_grid) {
  return cooperative_grid > 0 && n <= kCooperativeMaxUpdates;
}

inline cudaError_t CarveUpdateScratch(void* d_temp_storage, size_t& temp_storage_bytes, int n,
                                      uint32_t capacity, int cooperative_grid,
                                      UpdateScratch* scratch) {
  if (UseCooperativeUpdate(n, cooperative_grid)) {
    if (d_temp_storage == nullptr) temp_storage_bytes = 0;
    return cudaSuccess;
  }
  size_t sort_bytes = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), n, 0,
      SlotBits(capacity));
  if (err != cudaSuccess) return err;
  const size_t array_bytes = AlignUp(sizeof(uint32_t) * static_cast<size_t>(n));
  const size_t needed = 4 * array_bytes + AlignUp(sort_bytes);
  if (d_temp_storage == nullptr) {
    temp_storage_bytes = needed;
    return cudaSuccess;
  }
  if (temp_storage_bytes < needed) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(d_temp_storage);
  scratch->d_slots_in = reinterpret_cast<uint32_t*>(p);
  scratch->d_index_in = reinterpret_cast<uint32_t*>(p + array_bytes);
  scratch->d_slots_out = reinterpret_cast<uint32_t*>(p + 2 * array_bytes);
  scratch->d_index_out = reinterpret_cast<uint32_t*>(p + 3 * array_bytes);
  scratch->d_sort_temp = p + 4 * array_bytes;
  scratch->sort_temp_bytes = AlignUp(sort_bytes);
  return cudaSuccess;
}

// Sets the priorities of n items given by key from device arrays: looks up
// each key's slot (unknown keys and negative or non-finite priorities are
// dropped and counted in *d_skipped), keeps the last occurrence of each key,
// applies the updates and recomputes each touched sum of every level once.
//   n <= kCooperativeMaxUpdates and cooperative_grid > 0: one cooperative
//     launch of UpdateCooperativeKernel on cooperative_grid blocks (every
//     one resident; one grid.sync()); no scratch. Work O(n + touched
//     segments * 1024).
//   otherwise: UpdateLookupKernel, cub::DeviceRadixSort::SortPairs by slot
//     (stable: the last occurrence wins), UpdateApplyKernel, then
//     UpdateLevelKernel per upper level. Work O(n log capacity + touched
//     segments * 1024).
inline cudaError_t DeviceUpdatePriorities(void* d_temp_storage, size_t& temp_storage_bytes,
                                          UpdateArgs args, const ClaimState& claims,
                                          int cooperative_grid, cudaStream_t stream) {
  const int n = args.n;
  UpdateScratch s{};
  cudaError_t err = CarveUpdateScratch(d_temp_storage, temp_storage_bytes, n, args.capacity,
                                       cooperative_grid, &s);
  if (err != cudaSuccess || d_temp_storage == nullptr || n == 0) return err;
  if (UseCooperativeUpdate(n, cooperative_grid)) {
    ClaimState c = claims;
    void* params[] = {&args, &c};
    return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&UpdateCooperativeKernel),
                                       dim3(static_cast<unsigned>(cooperative_grid)),
                                       dim3(kBigBlockThreads), params, 0, stream);
  }
  UpdateLookupKernel<<<GridFor(n, kElementwiseThreads), kElementwiseThreads, 0, stream>>>(
      args.hash, args.d_keys, args.d_new_priorities, n, args.capacity, s.d_slots_in, s.d_index_in,
      args.d_skipped);
  if ((err = LaunchError()) != cudaSuccess) return err;
  size_t sort_bytes = s.sort_temp_bytes;
  err = cub::DeviceRadixSort::SortPairs(s.d_sort_temp, sort_bytes, s.d_slots_in, s.d_slots_out,
                                        s.d_index_in, s.d_index_out, n, 0, SlotBits(args.capacity),
                                        stream);
  if (err != cudaSuccess) return err;
  args.d_sorted_slots = s.d_slots_out;
  args.d_sorted_index = s.d_index_out;
  UpdateApplyKernel<<<GridFor(n, kBigBlockWarps), kBigBlockThreads, 0, stream>>>(args);
  if ((err = LaunchError()) != cudaSuccess) return err;
  for (int level = 1; level < args.tree.top; ++level) {
    UpdateLevelKernel<<<GridFor(n, kWarpsPerBlock), kBlockThreads, 0, stream>>>(
        args.tree, level, s.d_slots_out, n, args.capacity);
    if ((err = LaunchError()) != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// ------------------------------------------------------- marked slots

// CollectMarkedKernel over `capacity` slots, *d_count zeroed first.
inline cudaError_t DeviceCollectMarked(uint8_t* d_marks, uint8_t mark,
                                       const unsigned long long* d_slot_keys,
                                       const double* d_priorities, long long capacity,
                                       long long max, unsigned long long* d_count,
                                       unsigned long long* out_keys, double* out_priorities,
                                       cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(d_count, 0, sizeof(unsigned long long), stream);
  if (err != cudaSuccess) return err;
  const unsigned grid = std::min(GridFor(capacity, kElementwiseThreads * 4LL), 4096u);
  CollectMarkedKernel<<<grid, kElementwiseThreads, 0, stream>>>(
      d_marks, mark, d_slot_keys, d_priorities, capacity, max, d_count, out_keys, out_priorities);
  return LaunchError();
}

// ---------------------------------------------------------------- samples

// Scratch of DeviceSample when weights are wanted: the batch's log2
// probabilities (up to kFusedWeightsMaxBatch draws) or probabilities in fp64
// with their minimum and cub::DeviceReduce's storage (larger batches).
struct SampleScratch {
  double* d_probabilities64;
  double* d_min;
  void* d_reduce_temp;
  size_t reduce_temp_bytes;
};

inline cudaError_t CarveSampleScratch(void* d_temp_storage, size_t& temp_storage_bytes,
                                      long long batch, bool weights, SampleScratch* scratch) {
  size_t needed = 0;
  size_t reduce_bytes = 0;
  if (weights) {
    needed = AlignUp(sizeof(double) * static_cast<size_t>(batch));
    if (batch > kFusedWeightsMaxBatch) {
      cudaError_t err =
          cub::DeviceReduce::Min(nullptr, reduce_bytes, static_cast<const double*>(nullptr),
                                 static_cast<double*>(nullptr), batch);
      if (err != cudaSuccess) return err;
      needed += AlignUp(sizeof(double)) + AlignUp(reduce_bytes);
    }
  }
  if (d_temp_storage == nullptr) {
    temp_storage_bytes = needed;
    return cudaSuccess;
  }
  if (temp_storage_bytes < needed) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(d_temp_storage);
  *scratch = SampleScratch{};
  if (weights) {
    scratch->d_probabilities64 = reinterpret_cast<double*>(p);
    p += AlignUp(sizeof(double) * static_cast<size_t>(batch));
    if (batch > kFusedWeightsMaxBatch) {
      scratch->d_min = reinterpret_cast<double*>(p);
      scratch->d_reduce_temp = p + AlignUp(sizeof(double));
      scratch->reduce_temp_bytes = AlignUp(reduce_bytes);
    }
  }
  return cudaSuccess;
}

// Draws args.batch slots (SampleKernel) and, when d_weights is not null,
// their importance weights with exponent `beta`: in the same kernel for
// batches up to kFusedWeightsMaxBatch, else through cub::DeviceReduce::Min
// and ImportanceWeightsKernel. With `table_values` > 0 (level 0's padded
// length) the weights are divided by the table-wide largest weight
// (TableMinKernel over level 0 first, O(table_values)) instead of the
// batch's. `args` supplies the tree, keys, batch, seed, call, outputs,
// d_counter and d_min_bits; the rest is filled in here.
inline cudaError_t DeviceSample(void* d_temp_storage, size_t& temp_storage_bytes, SampleArgs args,
                                long long top_count, float* d_weights, cudaStream_t stream,
                                long long table_values = 0) {
  const bool weights = d_weights != nullptr;
  SampleScratch s{};
  cudaError_t err = CarveSampleScratch(d_temp_storage, temp_storage_bytes, args.batch, weights, &s);
  if (err != cudaSuccess || d_temp_storage == nullptr || args.batch == 0) return err;
  const bool fused = weights && args.batch <= kFusedWeightsMaxBatch;
  args.d_probabilities64 = weights && !fused ? s.d_probabilities64 : nullptr;
  args.d_log2_probabilities = fused ? s.d_probabilities64 : nullptr;
  args.d_weights = fused ? d_weights : nullptr;
  const bool table_min = weights && table_values > 0;
  if (table_min) {
    // *d_min_bits is ~0 between calls: the table's smallest p goes in first.
    TableMinKernel<<<std::min(GridFor(table_values, kBlockThreads * 16LL), 1024u), kBlockThreads,
                     0, stream>>>(args.tree, table_values, top_count, args.d_min_bits);
    if ((err = LaunchError()) != cudaSuccess) return err;
  }
  const unsigned grid = GridFor(args.batch, kBigBlockWarps);
  switch (TopItemsPerLane(top_count)) {
#define REPLAYDB_SAMPLE_CASE(ITEMS)                                   \
  case ITEMS:                                                         \
    SampleKernel<ITEMS><<<grid, kBigBlockThreads, 0, stream>>>(args); \
    break;
    REPLAYDB_SAMPLE_CASE(1)
    REPLAYDB_SAMPLE_CASE(2)
    REPLAYDB_SAMPLE_CASE(4)
    REPLAYDB_SAMPLE_CASE(8)
    REPLAYDB_SAMPLE_CASE(16)
    REPLAYDB_SAMPLE_CASE(32)
#undef REPLAYDB_SAMPLE_CASE
    default:
      return cudaErrorInvalidValue;
  }
  if ((err = LaunchError()) != cudaSuccess || !weights || fused) return err;
  size_t reduce_bytes = s.reduce_temp_bytes;
  err = cub::DeviceReduce::Min(s.d_reduce_temp, reduce_bytes, s.d_probabilities64, s.d_min,
                               args.batch, stream);
  if (err != cudaSuccess) return err;
  if (table_min) {
    FoldTableMinKernel<<<1, 1, 0, stream>>>(s.d_min, args.d_min_bits);
    if ((err = LaunchError()) != cudaSuccess) return err;
  }
  ImportanceWeightsKernel<<<GridFor(args.batch, kElementwiseThreads * 4LL), kElementwiseThreads, 0,
                            stream>>>(s.d_probabilities64, args.batch, s.d_min, args.beta,
                                      d_weights);
  return LaunchError();
}

}  // namespace replaydb::kernels::priority

#endif  // REPLAYDB_KERNELS_PRIORITY_PRIORITY_DEVICE_CUH_
