// Warp-level pieces of the device priority table: one warp sums, or searches,
// one segment of a level of the sum tree. Device code only (.cuh).
//
// The tree (priority_kernels.cuh): level 0 holds priority^alpha per slot as
// float; level k+1 holds, in fp64, the sum of each segment of kSegmentItems
// consecutive entries of level k. A segment is read by one warp with 16-byte
// loads that are coalesced across the warp: load i of lane l covers entries
// i * 32 * V + l * V + [0, V) (V entries per 16 bytes). The segment's *order*
// (the order in which a draw accumulates mass) is lane-major: lane 0's
// entries in load order, then lane 1's, ... Any fixed order samples
// correctly; this one keeps every load coalesced. Per segment:
//   lane_sum  = sequential fp64 sum of the lane's entries, in order
//   inclusive = cub::WarpScan inclusive sum of lane_sum over lanes 0..lane
//   total     = inclusive of lane 31
// A search picks the first lane whose inclusive sum exceeds the target and
// scans that lane's entries across the warp (one per lane).
//
// The same code computes a segment's sum when it is stored in the parent
// level and the segment's total when a draw descends through it, so a
// parent's entry always equals the total the draw sees below it, bit for bit
// (no deltas, no drift).
#ifndef REPLAYDB_KERNELS_PRIORITY_PRIORITY_WARP_CUH_
#define REPLAYDB_KERNELS_PRIORITY_PRIORITY_WARP_CUH_

#include <cub/warp/warp_scan.cuh>
#include <type_traits>

namespace replaydb::kernels::priority {

inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kWarpThreads = 32;
inline constexpr int kSegmentBits = 10;
inline constexpr int kSegmentItems = 1 << kSegmentBits;  // entries per segment
inline constexpr int kLaneItems = kSegmentItems / kWarpThreads;

using WarpScanDouble = cub::WarpScan<double>;

// How a segment is read: kCached through L1; kL2 with ld.global.cg, for data
// that other blocks of the running kernel wrote (L1 is not coherent).
enum class LoadMode { kCached, kL2 };

template <LoadMode kMode, typename V>
__device__ __forceinline__ V LoadGlobal(const V* p) {
  if constexpr (kMode == LoadMode::kL2) {
    return __ldcg(p);
  } else {
    return *p;
  }
}

// Vector type of V entries of T.
template <typename T, int V>
struct Vector;
template <>
struct Vector<float, 4> {
  using Type = float4;
};
template <>
struct Vector<float, 2> {
  using Type = float2;
};
template <>
struct Vector<float, 1> {
  using Type = float;
};
template <>
struct Vector<double, 2> {
  using Type = double2;
};
template <>
struct Vector<double, 1> {
  using Type = double;
};

template <typename VecT>
__device__ __forceinline__ double Component(const VecT& v, int c) {
  if constexpr (std::is_same_v<VecT, float> || std::is_same_v<VecT, double>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_same_v<VecT, float2> || std::is_same_v<VecT, double2>) {
    return static_cast<double>(c == 0 ? v.x : v.y);
  } else {
    return static_cast<double>(c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w);
  }
}

// Where a draw lands inside one segment.
struct SegmentHit {
  int index;         // entry (position in memory) within the segment; -1: none positive
  double remaining;  // target minus the mass before `index`, in [0, value]
  double value;      // the entry's value
};

// One warp's view of a segment of 32 * kItems entries of type T (float for
// level 0, double above). Every lane of the warp must take part in each call.
template <typename T, int kItems, LoadMode kMode = LoadMode::kCached>
struct WarpSegment {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  static_assert(kItems >= 1 && kItems <= kLaneItems && (kItems & (kItems - 1)) == 0);
  static constexpr int kVec = (16 / sizeof(T)) < kItems ? (16 / sizeof(T)) : kItems;
  static constexpr int kLoads = kItems / kVec;
  using VecT = typename Vector<T, kVec>::Type;

  // Memory position of the j-th entry (in segment order) of lane `lane`.
  __device__ __forceinline__ static int Entry(int lane, int j) {
    return (j / kVec) * (kWarpThreads * kVec) + lane * kVec + j % kVec;
  }

  const T* d_segment;
  double lane_sum;
  double inclusive;
  double total;

  // Reads the segment and computes lane_sum, inclusive and total. REQUIRES:
  // `segment` is aligned to 16 bytes and has 32 * kItems entries (levels are
  // padded to whole segments).
  __device__ __forceinline__ void Scan(const T* segment, int lane,
                                       WarpScanDouble::TempStorage& temp) {
    d_segment = segment;
    const VecT* p = reinterpret_cast<const VecT*>(segment) + lane;
    VecT q[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) q[i] = LoadGlobal<kMode>(p + i * kWarpThreads);
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
#pragma unroll
      for (int c = 0; c < kVec; ++c) s += Component(q[i], c);
    }
    lane_sum = s;
    WarpScanDouble(temp).InclusiveSum(lane_sum, inclusive);
    total = __shfl_sync(kFullMask, inclusive, kWarpThreads - 1);
  }

  // The first entry, in segment order, whose running sum exceeds `target`,
  // among entries > 0: a zero entry is never returned. When rounding leaves
  // no crossing (target >= total, or partial sums that disagree in the last
  // bit), the last positive entry is returned instead. Same answer in every
  // lane. REQUIRES: Scan() was called.
  __device__ __forceinline__ SegmentHit Find(double target, int lane,
                                             WarpScanDouble::TempStorage& temp) const {
    // Step 1: the lane whose share holds the crossing.
    double exclusive = __shfl_up_sync(kFullMask, inclusive, 1);
    if (lane == 0) exclusive = 0.0;
    const unsigned positive = __ballot_sync(kFullMask, lane_sum > 0.0);
    if (positive == 0) return SegmentHit{-1, 0.0, 0.0};
    const unsigned crossing = __ballot_sync(kFullMask, lane_sum > 0.0 && inclusive > target);
    const int owner = crossing != 0 ? __ffs(crossing) - 1 : 31 - __clz(positive);
    const double t = fmax(target - __shfl_sync(kFullMask, exclusive, owner), 0.0);

    // Step 2: the owner's kItems entries, one per lane (re-read: they were
    // just loaded), scanned across the warp.
    const double x = lane < kItems
                         ? static_cast<double>(LoadGlobal<kMode>(d_segment + Entry(owner, lane)))
                         : 0.0;
    double run;
    WarpScanDouble(temp).InclusiveSum(x, run);
    double before = __shfl_up_sync(kFullMask, run, 1);
    if (lane == 0) before = 0.0;
    const unsigned item_positive = __ballot_sync(kFullMask, x > 0.0);
    if (item_positive == 0) return SegmentHit{-1, 0.0, 0.0};  // changed under us: never
    const unsigned item_crossing = __ballot_sync(kFullMask, x > 0.0 && run > t);
    // The owner's share has a positive entry (its lane_sum > 0); the clamp
    // takes the last one, with a target at its end.
    const bool clamped = item_crossing == 0;
    const int item = clamped ? 31 - __clz(item_positive) : __ffs(item_crossing) - 1;
    SegmentHit out;
    out.index = Entry(owner, item);
    out.value = __shfl_sync(kFullMask, x, item);
    const double item_before = __shfl_sync(kFullMask, before, item);
    out.remaining = clamped ? out.value : fmin(fmax(t - item_before, 0.0), out.value);
    return out;
  }
};

// The fp64 sum of one full segment (kSegmentItems entries) as its parent
// stores it. The result is valid in every lane.
template <typename T, LoadMode kMode = LoadMode::kCached>
__device__ __forceinline__ double WarpSegmentSum(const T* d_segment, int lane,
                                                 WarpScanDouble::TempStorage& temp) {
  WarpSegment<T, kLaneItems, kMode> seg;
  seg.Scan(d_segment, lane, temp);
  return seg.total;
}

}  // namespace replaydb::kernels::priority

#endif  // REPLAYDB_KERNELS_PRIORITY_PRIORITY_WARP_CUH_
