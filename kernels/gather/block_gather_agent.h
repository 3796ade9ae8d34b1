// One CTA's share of the gather, scatter and index-update kernels
// (block_gather.cuh), written so that both nvcc's device pass and a plain
// host compiler build it: the kernels call these functions with blockIdx and
// threadIdx, and RunGatherOnHost / RunScatterOnHost run the very same CTAs
// one thread at a time over host memory, so that tests check the work split
// byte for byte on machines without a GPU. Plain C++: no CUDA header.
//
// Gather work layout. Every window has the same output size: for each column
// c, L * step_bytes[c] bytes (steps 0..n-1 real, the rest zeros). A launch
// lays one window's columns one after the other, each starting at a multiple
// of 16 (GatherColumnArgs::begin), and cuts that layout into chunks of
// chunk_bytes; work CTA i does chunk i % chunks_per_window of window
// i / chunks_per_window. (CTA 0 does the small copies when there are any,
// and the work CTAs follow it, so that the copies start first rather than
// in the last wave.) Within its chunk a CTA copies each column's real
// bytes run by run: a *run* is the part of the window inside one block of the
// chain, which is contiguous per column (steps of a block are adjacent), so
// it is one flat copy. Run k of a window starting at in-block offset o holds
// its steps [k * block_steps - o, (k + 1) * block_steps - o) (clipped at 0).
//
// Chain walk. Thread 0 reads the window's slot and real steps, then follows
// the chain (next) from the slot's block to the last run the chunk needs,
// keeping the block addresses of up to kChainCacheRuns runs in shared memory
// (more runs, as with L > 256 * block_steps, take several rounds, each
// continuing the walk). A chain that ends (next outside [0, num_blocks)) or
// reaches a block whose address is 0 before the window's real steps do
// leaves those steps zero; a slot outside [0, num_blocks * block_steps) is
// treated as no item. No read ever leaves the blocks the index names.
//
// Copies use the widest access (16, 8, 4, 2 or 1 bytes) that the source and
// destination addresses allow once the destination is aligned (the bytes
// before and after go one by one), kUnroll loads in flight per thread.
#ifndef REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_AGENT_H_
#define REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_AGENT_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__CUDACC__)
#define REPLAYDB_HD __host__ __device__ __forceinline__
#else
#define REPLAYDB_HD inline
#endif
#if defined(__CUDA_ARCH__)
#define REPLAYDB_UNROLL _Pragma("unroll")
#else
#define REPLAYDB_UNROLL
#endif

namespace replaydb::kernels::gather {

// ----------------------------------------------------------------- tunables

// Columns one launch carries in its parameters; more take more launches.
inline constexpr int kMaxColumnsPerLaunch = 16;
inline constexpr int kMaxSmallCopies = 4;
// Block addresses a CTA keeps in shared memory at once (2 KiB).
inline constexpr int kChainCacheRuns = 256;
// Vector loads each thread issues before its stores.
inline constexpr int kUnroll = 4;
inline constexpr int kMaxThreads = 256;

// ---------------------------------------------------------- small helpers

template <typename T>
REPLAYDB_HD T Min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
REPLAYDB_HD T Max(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
REPLAYDB_HD T Clamp(T x, T lo, T hi) {
  return x < lo ? lo : (hi < x ? hi : x);
}

struct alignas(16) Vec16 {
  uint32_t x, y, z, w;
};
struct alignas(8) Vec8 {
  uint32_t x, y;
};

// A plain load and store on the device. On the host: memcpy (the bytes were
// written as other types), and an abort where the device would fault on a
// misaligned access, so that host runs catch what a GPU would.
template <typename V>
REPLAYDB_HD V LoadVec(const V* p) {
#if defined(__CUDA_ARCH__)
  return *p;
#else
  if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) std::abort();
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
#endif
}
template <typename V>
REPLAYDB_HD void StoreVec(V* p, const V& v) {
#if defined(__CUDA_ARCH__)
  *p = v;
#else
  if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) std::abort();
  std::memcpy(p, &v, sizeof(V));
#endif
}

// ----------------------------------------------------------- index arrays

// The device arrays of a DeviceBlockIndex, read by the gather and scatter.
struct IndexView {
  const uint64_t* d_addresses;   // [num_blocks]; 0: not set
  const int64_t* d_next;         // [num_blocks]; -1: none
  const uint32_t* d_item_steps;  // [num_blocks * block_steps] or null
  int64_t num_blocks;
  int64_t block_steps;
  // Uniform draws (or null): the live items' slots, densely, and each
  // block's item key of its first step.
  const uint32_t* d_live;        // [num_blocks * block_steps]
  const uint64_t* d_block_keys;  // [num_blocks]
};

// The same arrays, written by the update kernel.
struct IndexArrays {
  uint64_t* d_addresses;
  int64_t* d_next;
  uint32_t* d_item_steps;
  uint32_t* d_live;
  uint64_t* d_block_keys;
};

// One staged change of the index, as the update kernel reads it: `target`
// is the field (IndexField) in its top two bits and the entry below them.
enum IndexField : uint64_t {
  kFieldAddress = 0,
  kFieldNext = 1,
  kFieldItemSteps = 2,
  kFieldBlockKey = 3,
  kFieldLive = 4,
};
inline constexpr int kFieldShift = 61;
inline constexpr uint64_t kEntryMask = (uint64_t{1} << kFieldShift) - 1;

struct alignas(16) IndexUpdate {
  uint64_t target;
  uint64_t value;
};

REPLAYDB_HD uint64_t UpdateTarget(IndexField field, int64_t entry) {
  return (static_cast<uint64_t>(field) << kFieldShift) | static_cast<uint64_t>(entry);
}

REPLAYDB_HD void ApplyIndexUpdate(const IndexArrays& arrays, const IndexUpdate& update) {
  const uint64_t entry = update.target & kEntryMask;
  switch (update.target >> kFieldShift) {
    case kFieldAddress:
      arrays.d_addresses[entry] = update.value;
      break;
    case kFieldNext:
      arrays.d_next[entry] = static_cast<int64_t>(update.value);
      break;
    case kFieldItemSteps:
      arrays.d_item_steps[entry] = static_cast<uint32_t>(update.value);
      break;
    case kFieldBlockKey:
      arrays.d_block_keys[entry] = update.value;
      break;
    default:
      arrays.d_live[entry] = static_cast<uint32_t>(update.value);
      break;
  }
}

// Programmatic dependent launch, seen from one thread. A gather launched so
// that it may start while the kernel before it on the stream still runs
// (block_gather.cuh) waits for that kernel before its first write; one with
// GatherArgs::early_reads also issues the loads of its first vectors before
// that wait (the kernel before it wrote no block), so that their latency
// overlaps that kernel's tail. Pass() waits the first time; later calls do
// nothing. Without the launch attribute, and on the host, there is nothing
// to wait for.
REPLAYDB_HD void WaitForPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
struct PriorGate {
  bool passed = true;
  REPLAYDB_HD void Pass() {
    if (!passed) {
      passed = true;
      WaitForPriorGrid();
    }
  }
};

// ------------------------------------------------------------ flat copies

// count elements of V, thread tid of `threads` taking every threads-th one;
// `gate` (may be null) is passed between the first loads and stores.
template <typename V>
REPLAYDB_HD void CopyVectors(V* __restrict__ dst, const V* __restrict__ src, uint32_t count,
                             uint32_t tid, uint32_t threads, PriorGate* gate) {
  for (uint32_t base = tid; base < count; base += kUnroll * threads) {
    V v[kUnroll];
    REPLAYDB_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * threads;
      v[u] = i < count ? LoadVec(src + i) : V{};
    }
    if (gate != nullptr) gate->Pass();
    REPLAYDB_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = base + u * threads;
      if (i < count) StoreVec(dst + i, v[u]);
    }
  }
}

// Copies len bytes with V accesses once dst is aligned to sizeof(V) (src
// then is too: REQUIRES (dst - src) % sizeof(V) == 0); the bytes before and
// after one by one. `gate` (may be null) is passed before the first write.
// REQUIRES: len / sizeof(V) < 2^32.
template <typename V>
REPLAYDB_HD void CopyWith(uint8_t* dst, const uint8_t* src, uint64_t len, uint32_t tid,
                          uint32_t threads, PriorGate* gate) {
  constexpr uint64_t kWidth = sizeof(V);
  const uint64_t head = Min<uint64_t>(
      len, (kWidth - (reinterpret_cast<uintptr_t>(dst) & (kWidth - 1))) & (kWidth - 1));
  const uint64_t count = (len - head) / kWidth;
  const uint64_t tail = head + count * kWidth;
  if (gate != nullptr && tid < head) gate->Pass();
  for (uint64_t i = tid; i < head; i += threads) dst[i] = src[i];
  CopyVectors(reinterpret_cast<V*>(dst + head), reinterpret_cast<const V*>(src + head),
              static_cast<uint32_t>(count), tid, threads, gate);
  if (gate != nullptr && tail + tid < len) gate->Pass();
  for (uint64_t i = tail + tid; i < len; i += threads) dst[i] = src[i];
}

// The CTA's threads copy len bytes (REQUIRES: len < 2^32), each its share;
// `gate` (may be null) is passed before each thread's first write.
REPLAYDB_HD void CopyBytes(uint8_t* dst, const uint8_t* src, uint64_t len, uint32_t tid,
                           uint32_t threads, PriorGate* gate = nullptr) {
  const uintptr_t skew = reinterpret_cast<uintptr_t>(dst) ^ reinterpret_cast<uintptr_t>(src);
  if ((skew & 15) == 0) {
    CopyWith<Vec16>(dst, src, len, tid, threads, gate);
  } else if ((skew & 7) == 0) {
    CopyWith<Vec8>(dst, src, len, tid, threads, gate);
  } else if ((skew & 3) == 0) {
    CopyWith<uint32_t>(dst, src, len, tid, threads, gate);
  } else if ((skew & 1) == 0) {
    CopyWith<uint16_t>(dst, src, len, tid, threads, gate);
  } else {
    CopyWith<uint8_t>(dst, src, len, tid, threads, gate);
  }
}

// The CTA's threads write len zero bytes (REQUIRES: len < 2^32).
REPLAYDB_HD void ZeroBytes(uint8_t* dst, uint64_t len, uint32_t tid, uint32_t threads) {
  const uint64_t head = Min<uint64_t>(len, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  const uint64_t count = (len - head) / 16;
  const uint64_t tail = head + count * 16;
  for (uint64_t i = tid; i < head; i += threads) dst[i] = 0;
  Vec16* body = reinterpret_cast<Vec16*>(dst + head);
  for (uint64_t i = tid; i < count; i += threads) StoreVec(body + i, Vec16{0, 0, 0, 0});
  for (uint64_t i = tail + tid; i < len; i += threads) dst[i] = 0;
}

// ------------------------------------------------------------------ gather

struct GatherColumnArgs {
  uint64_t step_bytes;    // >= 1
  uint64_t block_offset;  // of the column's region in a block
  uint8_t* d_out;         // [batch, L, step_bytes]
  uint64_t begin;         // of the column in the window's work layout (multiple of 16)
};

struct SmallCopyArgs {
  const uint8_t* src;
  uint8_t* dst;
  uint64_t bytes;
};

// A gather launch's parameters (passed by value, __grid_constant__).
struct GatherArgs {
  IndexView index;
  int64_t num_slots;           // num_blocks * block_steps
  const int64_t* d_slots;      // [batch]
  const uint32_t* d_steps;     // [batch]; null: index.d_item_steps[slot]
  uint8_t* d_mask;             // [batch, L]; null: none in this launch
  // d_slots null: window b's slot is index.d_live[DrawIndex(draw_seed, b,
  // draw_live)], and chunk 0 of the window writes its key, probability
  // (1 / draw_live) and weight (1) where those pointers are not null.
  int64_t draw_live;
  int64_t draw_lanes;  // rows per live item (>= 1), GatherRequest::UniformDraw::lanes
  uint64_t draw_seed;
  uint64_t* d_draw_keys;
  float* d_draw_probabilities;
  float* d_draw_weights;
  int64_t sequence_length;     // L
  uint64_t window_bytes;       // of the work layout
  uint64_t chunk_bytes;        // of the work layout per CTA (< 2^32)
  uint32_t chunks_per_window;  // ceil(window_bytes / chunk_bytes), >= 1
  uint32_t copy_ctas;          // 1: CTA 0 does the copies, work CTA i is CTA i + 1; else 0
  // Work CTAs load their first vectors before they wait for the kernel
  // before them (PriorGate; GatherRequest::early_reads).
  bool early_reads;
  int32_t num_columns;
  int32_t num_copies;
  GatherColumnArgs columns[kMaxColumnsPerLaunch];
  SmallCopyArgs copies[kMaxSmallCopies];
};

// Column c's part of the CTA's chunk, in bytes of the window's output of the
// column: [begin, split) is copied, [split, end) zeroed. Runs first_run ..
// last_run hold [begin, split) (none when first_run > last_run).
struct GatherColumnState {
  uint64_t begin;
  uint64_t split;
  uint64_t end;
  int64_t first_run;
  int64_t last_run;
};

// What thread 0 works out for the CTA (shared memory on the device).
struct GatherShared {
  int64_t slot;       // where the window starts (-1: no item)
  int64_t steps;      // the window's real steps (0..L)
  int64_t offset;     // its first step's place in its first block
  int64_t first_run;  // the runs the chunk copies
  int64_t last_run;
  int64_t walk_block;  // the walker: the block of run walk_run; -1: the chain ended
  int64_t walk_run;
  uint64_t walk_address;  // walk_block's address
  int64_t walk_next;      // walk_block's next block if read already, else kNextUnread
  uint64_t draw_key;      // drawn windows, chunk 0: the item's key
  GatherColumnState columns[kMaxColumnsPerLaunch];
  uint64_t run_address[kChainCacheRuns];  // this round's runs from first_run + round * cache
};

// Uniform draw b of a launch: an index in [0, live), from a counter-based
// hash of (seed, b), so every CTA of a window agrees without talking.
REPLAYDB_HD uint64_t MulHi64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

REPLAYDB_HD uint64_t DrawIndex(uint64_t seed, uint64_t b, int64_t live) {
  uint64_t x = seed + (b + 1) * 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return MulHi64(x, static_cast<uint64_t>(live));
}

REPLAYDB_HD int64_t NextBlock(const IndexView& index, int64_t block) {
  const int64_t next = index.d_next[block];
  return next >= 0 && next < index.num_blocks ? next : -1;
}

inline constexpr int64_t kNextUnread = -2;

// Thread 0: the window's slot and steps, the chunk's part of each column, and
// the walker at the window's first block. The loads go out in two waves: the
// slot with the request's steps, then what depends on the slot alone, all
// at once: the first block's address, the index's item steps, the first
// block's next block when the window may reach past it, and a drawn item's
// key. So a window of two blocks costs three dependent loads, not four.
REPLAYDB_HD void GatherPrepare(const GatherArgs& a, uint32_t cta, GatherShared* sh) {
  const uint32_t window = cta / a.chunks_per_window;
  const uint32_t chunk = cta % a.chunks_per_window;
  const int64_t bs = a.index.block_steps;
  // A drawn row: live item row / lanes, lane row % lanes.
  int64_t lane = 0;
  int64_t slot;
  if (a.d_slots != nullptr) {
    slot = a.d_slots[window];
  } else {
    const uint64_t row = DrawIndex(a.draw_seed, window, a.draw_live * a.draw_lanes);
    const uint64_t item = row / static_cast<uint64_t>(a.draw_lanes);
    lane = static_cast<int64_t>(row - item * static_cast<uint64_t>(a.draw_lanes));
    slot = static_cast<int64_t>(a.index.d_live[item]) + lane;
  }
  const uint32_t request_steps = a.d_steps != nullptr ? a.d_steps[window] : 0;
  int64_t steps = 0;
  int64_t offset = 0;
  int64_t block = -1;
  uint64_t address = 0;
  int64_t next = kNextUnread;
  uint64_t key = ~uint64_t{0};
  if (slot >= 0 && slot < a.num_slots) {
    block = slot / bs;
    offset = slot - block * bs;
    address = a.index.d_addresses[block];
    const uint32_t s = a.d_steps != nullptr ? request_steps : a.index.d_item_steps[slot - lane];
    if (offset + a.sequence_length > bs) next = NextBlock(a.index, block);
    if (a.d_slots == nullptr && a.d_draw_keys != nullptr && chunk == 0) {
      key = a.index.d_block_keys[block] + static_cast<uint64_t>(offset);
    }
    steps = Min<int64_t>(s, a.sequence_length);
  }
  sh->slot = block >= 0 ? slot : -1;
  sh->steps = steps;
  sh->offset = offset;
  sh->walk_block = block;
  sh->walk_run = 0;
  sh->walk_address = address;
  sh->walk_next = next;
  sh->draw_key = key;

  const uint64_t lo = uint64_t{chunk} * a.chunk_bytes;
  const uint64_t hi = Min(lo + a.chunk_bytes, a.window_bytes);
  int64_t first = INT64_MAX;
  int64_t last = -1;
  for (int c = 0; c < a.num_columns; ++c) {
    const GatherColumnArgs& col = a.columns[c];
    const uint64_t sb = col.step_bytes;
    const uint64_t end = col.begin + static_cast<uint64_t>(a.sequence_length) * sb;
    GatherColumnState& cs = sh->columns[c];
    cs.begin = Clamp(lo, col.begin, end) - col.begin;
    cs.end = Clamp(hi, col.begin, end) - col.begin;
    cs.split = Clamp(static_cast<uint64_t>(steps) * sb, cs.begin, cs.end);
    if (cs.begin < cs.split) {
      cs.first_run = (offset + static_cast<int64_t>(cs.begin / sb)) / bs;
      cs.last_run = (offset + static_cast<int64_t>((cs.split - 1) / sb)) / bs;
      first = Min(first, cs.first_run);
      last = Max(last, cs.last_run);
    } else {
      cs.first_run = 0;
      cs.last_run = -1;
    }
  }
  sh->first_run = last >= 0 ? first : 0;
  sh->last_run = last;
}

REPLAYDB_HD int64_t GatherRounds(const GatherShared& sh) {
  return sh.last_run < sh.first_run ? 0 : (sh.last_run - sh.first_run) / kChainCacheRuns + 1;
}

// Thread 0: the block addresses of round `round`'s runs, walking on from
// where the last round stopped (0 for a block past the chain's end).
REPLAYDB_HD void GatherWalk(const GatherArgs& a, GatherShared* sh, int64_t round) {
  if (sh->last_run < sh->first_run) return;
  const int64_t lo = sh->first_run + round * kChainCacheRuns;
  const int64_t hi = Min<int64_t>(sh->last_run, lo + kChainCacheRuns - 1);
  int64_t block = sh->walk_block;
  int64_t run = sh->walk_run;
  uint64_t address = sh->walk_address;
  int64_t next = sh->walk_next;
  for (int64_t k = lo; k <= hi; ++k) {
    if (run < k && block >= 0) {
      while (run < k && block >= 0) {
        block = next != kNextUnread ? next : NextBlock(a.index, block);
        next = kNextUnread;
        ++run;
      }
      address = block >= 0 ? a.index.d_addresses[block] : 0;
    }
    sh->run_address[k - lo] = block >= 0 ? address : 0;
  }
  sh->walk_block = block;
  sh->walk_run = run;
  sh->walk_address = address;
  sh->walk_next = next;
}

// Every thread: its share of the runs of round `round`.
REPLAYDB_HD void GatherCopyRound(const GatherArgs& a, uint32_t cta, const GatherShared& sh,
                                 int64_t round, uint32_t tid, uint32_t threads,
                                 PriorGate* gate = nullptr) {
  const int64_t lo = sh.first_run + round * kChainCacheRuns;
  const int64_t hi = Min<int64_t>(sh.last_run, lo + kChainCacheRuns - 1);
  const uint64_t window = cta / a.chunks_per_window;
  const int64_t bs = a.index.block_steps;
  const int64_t o = sh.offset;
  for (int c = 0; c < a.num_columns; ++c) {
    const GatherColumnState& cs = sh.columns[c];
    const int64_t k0 = Max(cs.first_run, lo);
    const int64_t k1 = Min(cs.last_run, hi);
    if (k0 > k1) continue;
    const GatherColumnArgs& col = a.columns[c];
    const uint64_t sb = col.step_bytes;
    uint8_t* out = col.d_out + window * static_cast<uint64_t>(a.sequence_length) * sb;
    for (int64_t k = k0; k <= k1; ++k) {
      const uint64_t run_begin = k == 0 ? 0 : static_cast<uint64_t>(k * bs - o) * sb;
      const uint64_t run_end = static_cast<uint64_t>((k + 1) * bs - o) * sb;
      const uint64_t x0 = Max(cs.begin, run_begin);
      const uint64_t x1 = Min(cs.split, run_end);
      const uint64_t address = sh.run_address[k - lo];
      if (address == 0) {
        if (gate != nullptr) gate->Pass();
        ZeroBytes(out + x0, x1 - x0, tid, threads);
        continue;
      }
      // Output byte x is byte x % sb of window step x / sb, which block k
      // holds as its step o + x / sb - k * bs.
      const uint64_t src = address + col.block_offset + static_cast<uint64_t>(o) * sb -
                           static_cast<uint64_t>(k * bs) * sb + x0;
      CopyBytes(out + x0, reinterpret_cast<const uint8_t*>(src), x1 - x0, tid, threads, gate);
    }
  }
}

// Every thread, after the copies: zeros after each column's real steps, and
// (chunk 0) the window's mask.
REPLAYDB_HD void GatherFinish(const GatherArgs& a, uint32_t cta, const GatherShared& sh,
                              uint32_t tid, uint32_t threads) {
  const uint64_t window = cta / a.chunks_per_window;
  const uint64_t L = static_cast<uint64_t>(a.sequence_length);
  for (int c = 0; c < a.num_columns; ++c) {
    const GatherColumnState& cs = sh.columns[c];
    if (cs.split >= cs.end) continue;
    uint8_t* out = a.columns[c].d_out + window * L * a.columns[c].step_bytes;
    ZeroBytes(out + cs.split, cs.end - cs.split, tid, threads);
  }
  if (a.d_slots == nullptr && tid == 0 && cta % a.chunks_per_window == 0) {
    if (a.d_draw_keys != nullptr) a.d_draw_keys[window] = sh.draw_key;
    if (a.d_draw_probabilities != nullptr) {
      a.d_draw_probabilities[window] =
          a.draw_lanes == 1
              ? 1.0f / static_cast<float>(a.draw_live)
              : static_cast<float>(1.0 / (static_cast<double>(a.draw_live) * a.draw_lanes));
    }
    if (a.d_draw_weights != nullptr) a.d_draw_weights[window] = 1.0f;
  }
  if (a.d_mask != nullptr && cta % a.chunks_per_window == 0) {
    for (uint64_t t = tid; t < L; t += threads) {
      a.d_mask[window * L + t] = t < static_cast<uint64_t>(sh.steps) ? 1 : 0;
    }
  }
}

// CTA 0 when there are copies: the small copies, one after the other.
REPLAYDB_HD void GatherSmallCopies(const GatherArgs& a, uint32_t tid, uint32_t threads) {
  constexpr uint64_t kPiece = uint64_t{1} << 30;
  for (int i = 0; i < a.num_copies; ++i) {
    const SmallCopyArgs& copy = a.copies[i];
    for (uint64_t at = 0; at < copy.bytes; at += kPiece) {
      CopyBytes(copy.dst + at, copy.src + at, Min(kPiece, copy.bytes - at), tid, threads);
    }
  }
}

// ----------------------------------------------------------------- scatter

struct ScatterColumnArgs {
  uint64_t step_bytes;  // >= 1, of one slot in a block
  uint64_t block_offset;
  const uint8_t* d_src;  // [n, rows, step_bytes]
  uint64_t begin;        // of the column in an environment's work layout
};

// CTA i writes chunk i % chunks_per_env of environment i / chunks_per_env's
// step (its columns laid out as for the gather).
struct ScatterArgs {
  IndexView index;
  int64_t num_slots;
  const int64_t* d_slots;  // [n]
  int64_t rows;            // slots per entry, in one block
  uint64_t env_bytes;
  uint64_t chunk_bytes;
  uint32_t chunks_per_env;
  int32_t num_columns;
  ScatterColumnArgs columns[kMaxColumnsPerLaunch];
};

// Every thread (no shared state): its share of the CTA's chunk. A slot
// outside [0, num_slots), a block whose address is 0, or a run of rows
// that would leave its block is skipped.
REPLAYDB_HD void ScatterCta(const ScatterArgs& a, uint32_t cta, uint32_t tid, uint32_t threads) {
  const uint64_t env = cta / a.chunks_per_env;
  const uint64_t chunk = cta % a.chunks_per_env;
  const int64_t slot = a.d_slots[env];
  if (slot < 0 || slot >= a.num_slots) return;
  const int64_t block = slot / a.index.block_steps;
  const int64_t step_in_block = slot - block * a.index.block_steps;
  if (step_in_block > a.index.block_steps - a.rows) return;
  const uint64_t step = static_cast<uint64_t>(step_in_block);
  const uint64_t address = a.index.d_addresses[block];
  if (address == 0) return;
  const uint64_t lo = chunk * a.chunk_bytes;
  const uint64_t hi = Min(lo + a.chunk_bytes, a.env_bytes);
  for (int c = 0; c < a.num_columns; ++c) {
    const ScatterColumnArgs& col = a.columns[c];
    const uint64_t sb = col.step_bytes;
    const uint64_t run = sb * static_cast<uint64_t>(a.rows);  // one entry's bytes
    const uint64_t b = Clamp(lo, col.begin, col.begin + run) - col.begin;
    const uint64_t e = Clamp(hi, col.begin, col.begin + run) - col.begin;
    if (b >= e) continue;
    uint8_t* dst = reinterpret_cast<uint8_t*>(address + col.block_offset + step * sb + b);
    CopyBytes(dst, col.d_src + env * run + b, e - b, tid, threads);
  }
}

// ------------------------------------------------- the same CTAs on the host

// Runs a gather launch of `grid` CTAs of `threads` threads on the host, in
// the order GatherKernel's barriers allow. For tests.
inline void RunGatherOnHost(const GatherArgs& a, uint32_t grid, uint32_t threads) {
  GatherShared sh;
  for (uint32_t block = 0; block < grid; ++block) {
    if (block < a.copy_ctas) {
      for (uint32_t t = 0; t < threads; ++t) GatherSmallCopies(a, t, threads);
      continue;
    }
    const uint32_t cta = block - a.copy_ctas;
    GatherPrepare(a, cta, &sh);
    GatherWalk(a, &sh, 0);
    const int64_t rounds = GatherRounds(sh);
    for (int64_t r = 0; r < rounds; ++r) {
      if (r > 0) GatherWalk(a, &sh, r);
      for (uint32_t t = 0; t < threads; ++t) GatherCopyRound(a, cta, sh, r, t, threads);
    }
    for (uint32_t t = 0; t < threads; ++t) GatherFinish(a, cta, sh, t, threads);
  }
}

inline void RunScatterOnHost(const ScatterArgs& a, uint32_t grid, uint32_t threads) {
  for (uint32_t cta = 0; cta < grid; ++cta) {
    for (uint32_t t = 0; t < threads; ++t) ScatterCta(a, cta, t, threads);
  }
}

}  // namespace replaydb::kernels::gather

#endif  // REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_AGENT_H_
