// Kernels of the device priority table, and the device-side structures they
// share: the sum tree (TreeView) and the key -> slot hash table (HashView).
// Device code only (.cuh); launched from priority_device.cuh.
//
// Sum tree: level 0 is priority^alpha per slot (float); level k >= 1 holds
// the fp64 sums of level k-1's segments of kSegmentItems entries
// (priority_warp.cuh). Every level is padded with zeros to whole segments.
// Levels are added until one has at most kSegmentItems entries: the top,
// which a draw scans whole. There are always at least two levels.
//
// Hash table: open addressing, linear probing, 16-byte entries. An entry's
// slot is kHashEmpty (never used: ends a probe), kHashTombstone (deleted:
// probes go on) or the item's slot. Inserts claim only empty entries, so the
// host knows exactly how many entries are used (live + tombstones) and
// rebuilds the table before it passes 3/4 full. An entry's `claim` is -1
// except inside UpdateCooperativeKernel, where it holds the index of the
// last update of its key.
#ifndef REPLAYDB_KERNELS_PRIORITY_PRIORITY_KERNELS_CUH_
#define REPLAYDB_KERNELS_PRIORITY_PRIORITY_KERNELS_CUH_

#include <cooperative_groups.h>
#include <curand_kernel.h>

#include <cfloat>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "kernels/priority/priority_warp.cuh"

namespace replaydb::kernels::priority {

inline constexpr int kMaxLevels = 4;  // capacity <= 2^31 - 1 needs levels 0..3
inline constexpr int kWarpsPerBlock = 8;
inline constexpr int kBlockThreads = kWarpsPerBlock * kWarpThreads;
// Sample and update kernels: 32 warps a block, so that one block can finish
// the grid's work (the weights) and grid syncs have few blocks to wait for.
inline constexpr int kBigBlockWarps = 32;
inline constexpr int kBigBlockThreads = kBigBlockWarps * kWarpThreads;
// UpdatePriorities of at most this many items runs as one cooperative kernel
// (when the device supports cooperative launches); larger ones sort.
inline constexpr int kCooperativeMaxUpdates = 65536;
// Sample batches of at most this many draws get their weights in the
// sampling kernel itself.
inline constexpr long long kFusedWeightsMaxBatch = 16384;

struct TreeView {
  float* d_values;               // level 0: priority^alpha per slot
  double* d_levels[kMaxLevels];  // [k] for k >= 1; [0] unused
  int top;                       // index of the top level, >= 1
};

inline constexpr int32_t kHashEmpty = -1;
inline constexpr int32_t kHashTombstone = -2;

struct alignas(16) HashEntry {
  unsigned long long key;
  int32_t slot;
  int32_t claim;
};

struct HashView {
  HashEntry* d_entries;
  unsigned long long mask;  // entries - 1 (a power of two)
};

// A staged write of one slot's whole content; priority < 0 empties it.
struct SlotWrite {
  unsigned long long key;
  double priority;
  int32_t slot;
  int32_t unused;
};

// A staged hash insert.
struct KeySlot {
  unsigned long long key;
  int32_t slot;
  int32_t unused;
};

// ------------------------------------------------------------ device helpers

// Level `level` (>= 1) of the tree, chosen by selects rather than by indexing
// the parameter array (which would copy it to local memory).
__device__ __forceinline__ double* LevelSums(const TreeView& tree, int level) {
  double* p = tree.d_levels[1];
  p = level == 2 ? tree.d_levels[2] : p;
  p = level == 3 ? tree.d_levels[3] : p;
  return p;
}

__device__ __forceinline__ unsigned long long MixKey(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The index of the live entry of `key`, or -1; its slot in *slot.
__device__ __forceinline__ long long HashFindEntry(const HashView& h, unsigned long long key,
                                                   int32_t* slot) {
  for (unsigned long long i = MixKey(key) & h.mask;; i = (i + 1) & h.mask) {
    const ulonglong2 raw = *reinterpret_cast<const ulonglong2*>(h.d_entries + i);
    const int32_t s = static_cast<int32_t>(raw.y & 0xffffffffULL);
    if (s == kHashEmpty) return -1;
    if (s >= 0 && raw.x == key) {
      *slot = s;
      return static_cast<long long>(i);
    }
  }
}

// The slot of `key`, or -1.
__device__ __forceinline__ int32_t HashFind(const HashView& h, unsigned long long key) {
  int32_t slot = -1;
  HashFindEntry(h, key, &slot);
  return slot;
}

// Claims the first empty entry of key's probe run. REQUIRES: key absent,
// an empty entry exists.
__device__ __forceinline__ void HashInsert(const HashView& h, unsigned long long key,
                                           int32_t slot) {
  for (unsigned long long i = MixKey(key) & h.mask;; i = (i + 1) & h.mask) {
    HashEntry* e = h.d_entries + i;
    if (e->slot == kHashEmpty && atomicCAS(&e->slot, kHashEmpty, slot) == kHashEmpty) {
      e->key = key;
      return;
    }
  }
}

// What a slot holds for `priority`: priority^alpha as float, 0 for a
// priority of 0. A positive priority never becomes 0 (it is raised to the
// smallest positive float) nor infinite (it is capped at FLT_MAX), so the
// host's "has a positive item" always agrees with the tree.
__device__ __forceinline__ float PriorityToValue(double priority, double alpha) {
  if (!(priority > 0.0)) return 0.0f;
  const double v = alpha == 1.0 ? priority : pow(priority, alpha);
  if (!(v < static_cast<double>(FLT_MAX))) return FLT_MAX;
  const float f = static_cast<float>(v);
  return f > 0.0f ? f : FLT_TRUE_MIN;
}

// Uniform in [0, 1) with 53 random bits: Philox4x32-10 keyed by `seed`, at
// subsequence `draw` and offset 4 * `call`, so every (call, draw) pair reads
// its own counter.
__device__ __forceinline__ double Uniform53(unsigned long long seed, unsigned long long draw,
                                            unsigned long long call) {
  curandStatePhilox4_32_10_t state;
  curand_init(seed, draw, call * 4ULL, &state);
  const uint4 r = curand4(&state);
  return (static_cast<double>(r.x >> 5) * 67108864.0 + static_cast<double>(r.y >> 6)) *
         (1.0 / 9007199254740992.0);
}

struct MinOp {
  __device__ __forceinline__ double operator()(double a, double b) const { return a < b ? a : b; }
};
struct MinFloatOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a < b ? a : b; }
};

// Called once by every thread of every block after the block's global
// writes: true (in all its threads) for the block that finishes last, which
// then sees every other block's writes through L2 (LoadMode::kL2 or
// __ldcg). Resets *d_counter for the next launch. The classic threadfence
// reduction pattern: each block's fence orders its writes before its count.
__device__ __forceinline__ bool LastBlockToFinish(unsigned* d_counter) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned done = atomicAdd(d_counter, 1u);
    last = done == gridDim.x - 1;
    if (last) atomicExch(d_counter, 0u);  // every block has counted: safe to reset
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Importance weight of a draw of probability p, normalised by the batch's
// largest: (N * p)^-beta / (N * p_min)^-beta = (p_min / p)^beta. N cancels
// and no power of a huge or tiny number is formed. 0 for a failed draw.
// Capped at 1: a table-wide p_min (TableMinKernel) sums the total in
// another order than the draws, so it may exceed the smallest drawn p by an
// ulp.
__device__ __forceinline__ float ImportanceWeight(double p, double p_min, double beta) {
  return p > 0.0 ? fminf(1.0f, static_cast<float>(pow(p_min / p, beta))) : 0.0f;
}

// The same from log2 p (+inf for a failed draw): the exponent
// beta * (log2 p_min - log2 p) is formed in fp64 and only the final 2^x in
// fp32 (relative error about 2e-6 for ratios up to 2^40).
__device__ __forceinline__ float ImportanceWeightLog2(double log2_p, double log2_p_min,
                                                      double beta) {
  if (isinf(log2_p)) return 0.0f;
  return fminf(1.0f, exp2f(static_cast<float>(beta * (log2_p_min - log2_p))));
}

// ------------------------------------------------------------------ kernels

template <typename T>
__global__ void FillKernel(T* d_out, long long n, T value) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    d_out[i] = value;
  }
}

// Applies staged slot writes (distinct slots).
__global__ void ApplySlotWritesKernel(const SlotWrite* d_writes, int n,
                                      unsigned long long* d_slot_keys, double* d_priorities,
                                      float* d_values, double alpha) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const SlotWrite w = d_writes[i];
  d_slot_keys[w.slot] = w.key;
  d_priorities[w.slot] = w.priority;
  d_values[w.slot] = PriorityToValue(w.priority, alpha);
}

// Turns the entries of staged deleted keys (distinct, present) into tombstones.
__global__ void HashDeleteKernel(HashView h, const unsigned long long* d_keys, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned long long key = d_keys[i];
  for (unsigned long long j = MixKey(key) & h.mask;; j = (j + 1) & h.mask) {
    HashEntry* e = h.d_entries + j;
    if (e->slot == kHashEmpty) return;  // absent: nothing to delete
    if (e->slot >= 0 && e->key == key) {
      e->slot = kHashTombstone;
      return;
    }
  }
}

// Inserts staged keys (distinct, absent).
__global__ void HashInsertKernel(HashView h, const KeySlot* d_pairs, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const KeySlot p = d_pairs[i];
  HashInsert(h, p.key, p.slot);
}

// Inserts every occupied slot's key into an emptied table.
__global__ void HashRebuildKernel(HashView h, const unsigned long long* d_slot_keys,
                                  const double* d_priorities, long long capacity) {
  for (long long s = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; s < capacity;
       s += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (d_priorities[s] >= 0.0) HashInsert(h, d_slot_keys[s], static_cast<int32_t>(s));
  }
}

// One warp per listed entry of level `level` (>= 1): recomputes it as the sum
// of its segment of level - 1.
__global__ void __launch_bounds__(kBlockThreads)
    RecomputeEntriesKernel(TreeView tree, int level, const int32_t* d_entries, int count) {
  __shared__ WarpScanDouble::TempStorage temp[kWarpsPerBlock];
  const int warp = threadIdx.x / kWarpThreads;
  const int lane = threadIdx.x % kWarpThreads;
  const long long j = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp;
  if (j >= count) return;  // warp-uniform
  const long long e = d_entries[j];
  double sum;
  if (level == 1) {
    sum = WarpSegmentSum(tree.d_values + e * kSegmentItems, lane, temp[warp]);
  } else {
    sum = WarpSegmentSum(LevelSums(tree, level - 1) + e * kSegmentItems, lane, temp[warp]);
  }
  if (lane == 0) LevelSums(tree, level)[e] = sum;
}

// d_out[i] = the priority held for d_keys[i], or -1.
__global__ void LookupPrioritiesKernel(HashView h, const unsigned long long* d_keys, int n,
                                       const double* d_priorities, double* d_out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t slot = HashFind(h, d_keys[i]);
  d_out[i] = slot < 0 ? -1.0 : d_priorities[slot];
}

// The sorting UpdatePriorities, step 1: each update's slot as a sort key
// (`sentinel`, which sorts last, for an unknown key or a bad value, counted
// in *d_skipped) and its index as the value.
__global__ void UpdateLookupKernel(HashView h, const unsigned long long* d_keys,
                                   const float* d_new_priorities, int n, uint32_t sentinel,
                                   uint32_t* d_sort_slots, uint32_t* d_sort_index,
                                   unsigned long long* d_skipped) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool skipped = false;
  if (i < n) {
    const float p = d_new_priorities[i];
    int32_t slot = -1;
    if (isfinite(p) && p >= 0.0f) slot = HashFind(h, d_keys[i]);
    skipped = slot < 0;
    d_sort_slots[i] = skipped ? sentinel : static_cast<uint32_t>(slot);
    d_sort_index[i] = static_cast<uint32_t>(i);
  }
  // One atomic per warp. Every thread of the block reaches here.
  const unsigned skipped_mask = __ballot_sync(kFullMask, skipped);
  if ((threadIdx.x % kWarpThreads) == 0 && skipped_mask != 0) {
    atomicAdd(d_skipped, static_cast<unsigned long long>(__popc(skipped_mask)));
  }
}

// Everything UpdatePriorities needs.
struct UpdateArgs {
  TreeView tree;
  HashView hash;
  double* d_priorities;              // per slot
  const unsigned long long* d_keys;  // the caller's update keys [n]
  const float* d_new_priorities;     // the caller's update values [n]
  int n;
  uint32_t capacity;  // also the sort sentinel
  double alpha;
  unsigned long long* d_skipped;
  const uint32_t* d_sorted_slots;  // UpdateApplyKernel: updates sorted by slot
  const uint32_t* d_sorted_index;  //   ... and the update each came from
  uint8_t* d_marks;                // per slot, or null: set to kAllMarks for each slot written
};

// Marks of a slot whose priority an update set, each cleared by its own
// collection (CollectMarkedKernel).
inline constexpr uint8_t kAllMarks = 3;

// Device state of UpdateCooperativeKernel, owned by the table. Per entry e
// of level k >= 1, all zero between launches:
//   marks[k][e]     1 once an update under e has been counted
//   expected[k][e]  arrivals to wait for before e is recomputed: the valid
//                   updates under e (k = 1), or e's touched children (k > 1)
//   arrived[k][e]   arrivals so far
struct ClaimState {
  long long* d_entry_of;  // [kCooperativeMaxUpdates]: hash entry of each update, or -1
  int32_t* d_marks[kMaxLevels];
  int32_t* d_expected[kMaxLevels];
  int32_t* d_arrived[kMaxLevels];
};

__device__ __forceinline__ int32_t* LevelArray(int32_t* const (&arrays)[kMaxLevels], int level) {
  int32_t* p = arrays[1];
  p = level == 2 ? arrays[2] : p;
  p = level == 3 ? arrays[3] : p;
  return p;
}

// UpdatePriorities of at most kCooperativeMaxUpdates items in one
// cooperative launch (every block resident) with a single grid.sync():
//   1. look up each update (unknown keys and bad values are counted and
//      dropped); atomicMax of the update's index into its hash entry's claim
//      makes the last occurrence of each key the winner; count, for every
//      touched entry of every level, the arrivals it will wait for;
//   -- grid.sync() --
//   2. one warp per update: the winner writes its slot; every valid update
//      then arrives at its level-1 entry (a fence first, so that the write is
//      visible). The arrival that completes an entry's count makes its warp
//      recompute the entry from level 0, reset its counters and arrive at
//      the parent; and so on up to the top. Each touched entry is recomputed
//      once, after everything below it.
// Data written by other blocks in the launch is read through L2
// (LoadMode::kL2, __ldcg): L1 is not coherent.
__global__ void __launch_bounds__(kBigBlockThreads)
    UpdateCooperativeKernel(UpdateArgs a, ClaimState c) {
  namespace cg = cooperative_groups;
  __shared__ WarpScanDouble::TempStorage warp_temp[kBigBlockWarps];
  const int lane = threadIdx.x % kWarpThreads;
  const int warp = threadIdx.x / kWarpThreads;
  const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long warps = threads / kWarpThreads;
  const long long first_warp =
      (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpThreads;
  const int n = a.n;
  const int top = a.tree.top;

  // Phase 1.
  for (long long base = first_warp * kWarpThreads; base < n; base += threads) {
    const long long i = base + lane;
    bool skipped = false;
    if (i < n) {
      const float p = a.d_new_priorities[i];
      long long entry = -1;
      int32_t slot = -1;
      if (isfinite(p) && p >= 0.0f) entry = HashFindEntry(a.hash, a.d_keys[i], &slot);
      skipped = entry < 0;
      c.d_entry_of[i] = entry;
      if (entry >= 0) {
        atomicMax(&a.hash.d_entries[entry].claim, static_cast<int32_t>(i));
        // One arrival per valid update at its level-1 entry; one per newly
        // touched entry at its parent.
        int32_t e = slot >> kSegmentBits;
        atomicAdd(&c.d_expected[1][e], 1);
        for (int level = 1; level < top; ++level) {
          if (atomicExch(&LevelArray(c.d_marks, level)[e], 1) != 0) break;
          e >>= kSegmentBits;
          atomicAdd(&LevelArray(c.d_expected, level + 1)[e], 1);
        }
      }
    }
    const unsigned skipped_mask = __ballot_sync(kFullMask, skipped);
    if (lane == 0 && skipped_mask != 0) {
      atomicAdd(a.d_skipped, static_cast<unsigned long long>(__popc(skipped_mask)));
    }
  }
  cg::this_grid().sync();

  // Phase 2: one update per warp, so that the recomputes it completes are
  // spread over the grid.
  for (long long u = first_warp; u < n; u += warps) {
    int32_t e = -1;
    int complete = 0;
    if (lane == 0) {
      const long long entry = __ldcg(&c.d_entry_of[u]);
      if (entry >= 0) {
        HashEntry* h = a.hash.d_entries + entry;
        const int32_t slot = h->slot;
        e = slot >> kSegmentBits;
        if (__ldcg(&h->claim) == static_cast<int32_t>(u)) {  // the winner
          h->claim = -1;                                     // the others only need "not mine"
          const double p = static_cast<double>(a.d_new_priorities[u]);
          a.d_priorities[slot] = p;
          a.tree.d_values[slot] = PriorityToValue(p, a.alpha);
          if (a.d_marks != nullptr) a.d_marks[slot] = kAllMarks;
        }
        __threadfence();  // release: the write before the arrival
        complete = atomicAdd(&c.d_arrived[1][e], 1) + 1 == __ldcg(&c.d_expected[1][e]);
      }
    }
    if (!__shfl_sync(kFullMask, complete, 0)) continue;
    // This arrival completed entry e of level 1: the warp recomputes it, and
    // goes on upwards for as long as it completes the parent.
    long long entry_index = __shfl_sync(kFullMask, e, 0);
    for (int level = 1; level <= top; ++level) {
      __threadfence();  // acquire: after the arrival that completed the entry
      double sum;
      if (level == 1) {
        sum = WarpSegmentSum<float, LoadMode::kL2>(a.tree.d_values + entry_index * kSegmentItems,
                                                   lane, warp_temp[warp]);
      } else {
        sum = WarpSegmentSum<double, LoadMode::kL2>(
            LevelSums(a.tree, level - 1) + entry_index * kSegmentItems, lane, warp_temp[warp]);
      }
      int parent_complete = 0;
      if (lane == 0) {
        LevelSums(a.tree, level)[entry_index] = sum;
        LevelArray(c.d_marks, level)[entry_index] = 0;
        LevelArray(c.d_expected, level)[entry_index] = 0;
        LevelArray(c.d_arrived, level)[entry_index] = 0;
        if (level < top) {
          __threadfence();  // release: the sum before the arrival
          const long long parent = entry_index >> kSegmentBits;
          parent_complete = atomicAdd(&LevelArray(c.d_arrived, level + 1)[parent], 1) + 1 ==
                            __ldcg(&LevelArray(c.d_expected, level + 1)[parent]);
        }
      }
      if (!__shfl_sync(kFullMask, parent_complete, 0)) break;
      entry_index >>= kSegmentBits;
    }
  }
}

// UpdatePriorities of more than kCooperativeMaxUpdates items (or without
// cooperative launches), after UpdateLookupKernel and
// cub::DeviceRadixSort::SortPairs by slot: one warp per sorted update; the
// warp holding the first update of a level-0 segment applies the segment's
// updates (the last occurrence of each slot wins: the sort is stable) and
// recomputes the segment's sum in level 1. UpdateLevelKernel follows for
// the upper levels.
__global__ void __launch_bounds__(kBigBlockThreads) UpdateApplyKernel(UpdateArgs a) {
  __shared__ WarpScanDouble::TempStorage warp_temp[kBigBlockWarps];
  const int warp = threadIdx.x / kWarpThreads;
  const int lane = threadIdx.x % kWarpThreads;
  const int n = a.n;
  const uint32_t capacity = a.capacity;
  const uint32_t* sorted_slots = a.d_sorted_slots;
  const long long j = static_cast<long long>(blockIdx.x) * kBigBlockWarps + warp;
  const uint32_t first = j < n ? sorted_slots[j] : capacity;
  const uint32_t segment = first >> kSegmentBits;
  // Warp-uniform: does this warp own a segment?
  if (first >= capacity || (j > 0 && (sorted_slots[j - 1] >> kSegmentBits) == segment)) return;
  for (long long base = j;; base += kWarpThreads) {
    const long long m = base + lane;
    const uint32_t s = m < n ? sorted_slots[m] : capacity;
    const bool in_segment = s < capacity && (s >> kSegmentBits) == segment;
    if (in_segment && (m + 1 >= n || sorted_slots[m + 1] != s)) {
      const double p = static_cast<double>(a.d_new_priorities[a.d_sorted_index[m]]);
      a.d_priorities[s] = p;
      a.tree.d_values[s] = PriorityToValue(p, a.alpha);
      if (a.d_marks != nullptr) a.d_marks[s] = kAllMarks;
    }
    if (!__all_sync(kFullMask, in_segment)) break;  // the run ends in this chunk
  }
  __syncwarp();  // orders the lanes' writes before the warp reads the segment
  const double sum = WarpSegmentSum(
      a.tree.d_values + static_cast<long long>(segment) * kSegmentItems, lane, warp_temp[warp]);
  if (lane == 0) LevelSums(a.tree, 1)[segment] = sum;
}

// The sorting UpdatePriorities, once per level `level` = 1 .. top-1 after
// UpdateApplyKernel: the warp of the first sorted update
// under each segment of level `level` recomputes the segment's sum in
// level + 1.
__global__ void __launch_bounds__(kBlockThreads)
    UpdateLevelKernel(TreeView tree, int level, const uint32_t* d_sorted_slots, int n,
                      uint32_t capacity) {
  __shared__ WarpScanDouble::TempStorage temp[kWarpsPerBlock];
  const int warp = threadIdx.x / kWarpThreads;
  const int lane = threadIdx.x % kWarpThreads;
  const long long j = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + warp;
  if (j >= n) return;
  const uint32_t s = d_sorted_slots[j];
  if (s >= capacity) return;
  const int shift = kSegmentBits * (level + 1);
  const uint32_t e = s >> shift;
  if (j > 0 && (d_sorted_slots[j - 1] >> shift) == e) return;
  const double sum = WarpSegmentSum(
      LevelSums(tree, level) + static_cast<long long>(e) * kSegmentItems, lane, temp[warp]);
  if (lane == 0) LevelSums(tree, level + 1)[e] = sum;
}

// Collects the held slots whose marks include `mark`: each one's key and
// priority go to out_keys[i], out_priorities[i] for i < max (host memory
// mapped for the device; a warp's finds are written contiguously), and its
// mark is cleared; *d_count ends as the number found, which may pass max
// (those past it keep their mark for the next collection). A slot marked
// but empty (its item removed) loses its mark.
__global__ void CollectMarkedKernel(uint8_t* d_marks, uint8_t mark,
                                    const unsigned long long* d_slot_keys,
                                    const double* d_priorities, long long capacity, long long max,
                                    unsigned long long* d_count, unsigned long long* out_keys,
                                    double* out_priorities) {
  const int lane = threadIdx.x % kWarpThreads;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  // Warp-uniform loop bounds: every lane reaches the ballot.
  for (long long base = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x - lane;
       base < capacity; base += stride) {
    const long long s = base + lane;
    const uint8_t m = s < capacity ? d_marks[s] : 0;
    bool found = false;
    double p = -1.0;
    if ((m & mark) != 0) {
      p = d_priorities[s];
      found = p >= 0.0;
      if (!found) d_marks[s] = m & ~mark;
    }
    const unsigned found_mask = __ballot_sync(kFullMask, found);
    if (found_mask == 0) continue;
    unsigned long long first = 0;
    if (lane == 0) first = atomicAdd(d_count, static_cast<unsigned long long>(__popc(found_mask)));
    first = __shfl_sync(kFullMask, first, 0);
    if (!found) continue;
    const long long at =
        static_cast<long long>(first) + __popc(found_mask & ((1u << lane) - 1u));
    if (at >= max) continue;
    out_keys[at] = d_slot_keys[s];
    out_priorities[at] = p;
    d_marks[s] = m & ~mark;
  }
}

// Everything a Sample call needs, for SampleKernel.
struct SampleArgs {
  TreeView tree;
  const unsigned long long* d_slot_keys;
  long long batch;
  bool stratified;
  unsigned long long seed;
  unsigned long long call;
  unsigned long long* d_keys;
  float* d_probabilities;
  long long* d_slots;            // [batch] each draw's slot (-1: no item), or null
  double* d_probabilities64;     // [batch] p in fp64 (weights by a second kernel), or null
  double* d_log2_probabilities;  // [batch] log2 p (weights here), or null
  double beta;
  float* d_weights;                // non-null: weights computed here by the last block
  unsigned* d_counter;             // LastBlockToFinish
  unsigned long long* d_min_bits;  // the batch's smallest p > 0 as bits; ~0 between calls
};

// One warp per draw: scans the top level (kTopItems entries per lane), then
// descends one segment per level to a slot. Writes the slot's key, its
// probability value / total and, when d_slots is set, the slot. With no
// positive mass (possible only after device updates set every priority to
// 0) a draw gets key ~0, probability 0 and slot -1. When d_weights is set,
// each draw also writes log2 p, each block folds its smallest p into
// *d_min_bits (positive doubles order as their bits), and the last block to
// finish writes every weight: one exp2f each, so the fp64 work is spread
// over the grid.
template <int kTopItems>
__global__ void __launch_bounds__(kBigBlockThreads) SampleKernel(SampleArgs a) {
  __shared__ WarpScanDouble::TempStorage temp[kBigBlockWarps];
  __shared__ double warp_min[kBigBlockWarps];
  const int warp = threadIdx.x / kWarpThreads;
  const int lane = threadIdx.x % kWarpThreads;
  const long long draw = static_cast<long long>(blockIdx.x) * kBigBlockWarps + warp;
  const TreeView& tree = a.tree;
  if (lane == 0) warp_min[warp] = DBL_MAX;
  if (draw < a.batch) {  // warp-uniform
    WarpSegment<double, kTopItems> top;
    top.Scan(LevelSums(tree, tree.top), lane, temp[warp]);
    const double total = top.total;

    const double u = Uniform53(a.seed, static_cast<unsigned long long>(draw), a.call);
    const double target =
        a.stratified ? (static_cast<double>(draw) + u) / static_cast<double>(a.batch) * total
                     : u * total;
    SegmentHit hit = top.Find(target, lane, temp[warp]);
    long long index = hit.index;
    for (int level = tree.top - 1; level >= 1 && index >= 0; --level) {
      WarpSegment<double, kLaneItems> seg;
      seg.Scan(LevelSums(tree, level) + index * kSegmentItems, lane, temp[warp]);
      hit = seg.Find(hit.remaining, lane, temp[warp]);
      index = hit.index < 0 ? -1 : index * kSegmentItems + hit.index;
    }
    if (index >= 0) {
      WarpSegment<float, kLaneItems> leaf;
      leaf.Scan(tree.d_values + index * kSegmentItems, lane, temp[warp]);
      hit = leaf.Find(hit.remaining, lane, temp[warp]);
      index = hit.index < 0 ? -1 : index * kSegmentItems + hit.index;
    }
    if (lane == 0) {
      const bool ok = index >= 0 && total > 0.0;
      const double p = ok ? hit.value / total : 0.0;
      a.d_keys[draw] = ok ? a.d_slot_keys[index] : ~0ULL;
      a.d_probabilities[draw] = static_cast<float>(p);
      if (a.d_slots != nullptr) a.d_slots[draw] = ok ? index : -1;
      if (a.d_probabilities64 != nullptr) a.d_probabilities64[draw] = p;
      if (a.d_log2_probabilities != nullptr) {
        a.d_log2_probabilities[draw] = p > 0.0 ? log2(p) : INFINITY;
        if (p > 0.0) warp_min[warp] = p;
      }
    }
  }
  if (a.d_weights == nullptr) return;  // grid-uniform
  __syncthreads();
  if (warp == 0) {
    double m = warp_min[lane];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      m = fmin(m, __shfl_xor_sync(kFullMask, m, offset));
    }
    if (lane == 0 && m < DBL_MAX) {
      atomicMin(a.d_min_bits, static_cast<unsigned long long>(__double_as_longlong(m)));
    }
  }
  if (!LastBlockToFinish(a.d_counter)) return;

  __shared__ double log2_min_p;
  if (threadIdx.x == 0) {
    const unsigned long long bits = atomicExch(a.d_min_bits, ~0ULL);  // read and reset
    log2_min_p = bits == ~0ULL ? 0.0 : log2(__longlong_as_double(static_cast<long long>(bits)));
  }
  __syncthreads();
  for (long long i = threadIdx.x; i < a.batch; i += kBigBlockThreads) {
    a.d_weights[i] = ImportanceWeightLog2(__ldcg(a.d_log2_probabilities + i), log2_min_p, a.beta);
  }
}

// The table-wide smallest probability of a slot of positive value (its
// value over the total, in fp64 as SampleKernel forms a draw's), folded into
// *d_min_bits as SampleKernel folds the batch's: run before SampleKernel,
// the weights it writes are then divided by the largest weight any item
// present could get (SampleParams::table_weights). Each block sums the top
// level (at most kSegmentItems entries) itself; `values` is level 0's
// padded length (padding holds 0).
__global__ void __launch_bounds__(kBlockThreads)
    TableMinKernel(TreeView tree, long long values, long long top_count,
                   unsigned long long* d_min_bits) {
  using BlockMin = cub::BlockReduce<float, kBlockThreads>;
  __shared__ typename BlockMin::TempStorage temp;
  __shared__ double total;
  if (threadIdx.x == 0) {
    const double* top = LevelSums(tree, tree.top);
    double t = 0.0;
    for (long long i = 0; i < top_count; ++i) t += top[i];
    total = t;
  }
  float m = FLT_MAX;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < values;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = tree.d_values[i];
    if (v > 0.0f && v < m) m = v;
  }
  const float block_min = BlockMin(temp).Reduce(m, MinFloatOp{});
  __syncthreads();  // `total`
  if (threadIdx.x == 0 && block_min < FLT_MAX && total > 0.0) {
    const double p = static_cast<double>(block_min) / total;
    atomicMin(d_min_bits, static_cast<unsigned long long>(__double_as_longlong(p)));
  }
}

// Large batches with table-wide weights: *d_min (the batch's smallest p)
// becomes the smaller of it and *d_min_bits (TableMinKernel's), which is
// reset for the next call.
__global__ void FoldTableMinKernel(double* d_min, unsigned long long* d_min_bits) {
  const unsigned long long bits = atomicExch(d_min_bits, ~0ULL);
  if (bits != ~0ULL) *d_min = fmin(*d_min, __longlong_as_double(static_cast<long long>(bits)));
}

// Weights of a batch too large for SampleKernel's last block, once
// cub::DeviceReduce::Min has written the batch's smallest probability.
__global__ void ImportanceWeightsKernel(const double* d_probabilities64, long long batch,
                                        const double* d_min_probability, double beta,
                                        float* d_weights) {
  const double p_min = *d_min_probability;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < batch;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    d_weights[i] = ImportanceWeight(d_probabilities64[i], p_min, beta);
  }
}

}  // namespace replaydb::kernels::priority

#endif  // REPLAYDB_KERNELS_PRIORITY_PRIORITY_KERNELS_CUH_
