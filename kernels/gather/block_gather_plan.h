// Argument checks and launch plans of Gather and Scatter (block_gather.h),
// shared by block_gather.cu, block_gather_nocuda.cc (which checks arguments
// before it answers NotSupported) and the tests (which run the planned
// launches on the host, block_gather_agent.h). Plain C++: no CUDA header.
//
// Launch shape. A launch carries up to kMaxColumnsPerLaunch columns in its
// parameters (more columns: more launches; the mask and the small copies go
// with the first). Its work CTAs each take chunk_bytes of one window's work
// layout: chunk_bytes is the launch's total bytes over kCtasPerSm CTAs per
// multiprocessor, rounded up to a power of two and kept within
// [kMinChunkBytes, kMaxChunkBytes], so that big windows (L = 32 steps of
// 64 KiB: 2 MiB) spread over many CTAs and small ones take one CTA each.
// A CTA has a thread per kBytesPerThread bytes of its chunk, a multiple of 32
// in [kMinThreads, kMaxThreads]. One more CTA, the first, does the small
// copies.
#ifndef REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_PLAN_H_
#define REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/gather/block_gather.h"
#include "kernels/gather/block_gather_agent.h"
#include "replaydb/status.h"

namespace replaydb::kernels {

namespace gather {

inline constexpr uint64_t kMinChunkBytes = 4096;
inline constexpr uint64_t kMaxChunkBytes = 65536;
inline constexpr int64_t kCtasPerSm = 16;
inline constexpr uint64_t kBytesPerThread = 16 * kUnroll;
inline constexpr uint32_t kMinThreads = 64;
inline constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;
// Bytes a request may reach in all: far below 2^64, so sums never wrap.
inline constexpr uint64_t kMaxRequestBytes = uint64_t{1} << 62;
inline constexpr int64_t kMaxIndexSlots = int64_t{1} << 40;

inline uint64_t RoundUp16(uint64_t x) {
  return (x + 15) & ~uint64_t{15};
}

inline uint64_t CeilDiv(uint64_t a, uint64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// Chunk bytes and threads of a launch of `items` windows (or environments)
// of `item_bytes` bytes each.
inline void ChooseChunks(int64_t items, uint64_t item_bytes, int num_sms, uint64_t* chunk_bytes,
                         uint32_t* chunks_per_item, uint32_t* threads) {
  const uint64_t target = static_cast<uint64_t>(Max(num_sms, 1)) * kCtasPerSm;
  const uint64_t want = CeilDiv(static_cast<uint64_t>(items) * item_bytes, target);
  uint64_t chunk = kMinChunkBytes;
  while (chunk < want && chunk < kMaxChunkBytes) chunk *= 2;
  *chunk_bytes = chunk;
  *chunks_per_item = item_bytes == 0 ? 1 : static_cast<uint32_t>(CeilDiv(item_bytes, chunk));
  const uint64_t per_cta = Min(chunk, item_bytes);
  const uint64_t warps = CeilDiv(CeilDiv(per_cta, kBytesPerThread), 32);
  *threads = static_cast<uint32_t>(Clamp<uint64_t>(warps * 32, kMinThreads, kMaxThreads));
}

// Bytes of the work layout of `count` columns starting at columns[first];
// false if it passes kMaxRequestBytes.
template <typename Column>
bool LayoutBytes(const Column* columns, size_t count, uint64_t steps, uint64_t* bytes) {
  uint64_t end = 0;
  for (size_t c = 0; c < count; ++c) {
    const uint64_t sb = columns[c].step_bytes;
    if (sb > kMaxRequestBytes / steps) return false;
    end = RoundUp16(end) + sb * steps;
    if (end > kMaxRequestBytes) return false;
  }
  *bytes = end;
  return true;
}

}  // namespace gather

// InvalidArgument naming the option when `options` breaks a REQUIRES.
inline Status ValidateIndexOptions(const DeviceBlockIndex::Options& options) {
  const std::string call = "DeviceBlockIndex::Create: ";
  if (options.device < 0) {
    return Status::InvalidArgument(call + "options.device " + std::to_string(options.device) +
                                   " is < 0");
  }
  if (options.num_blocks < 1) {
    return Status::InvalidArgument(call + "options.num_blocks " +
                                   std::to_string(options.num_blocks) + " is < 1");
  }
  if (options.block_steps < 1) {
    return Status::InvalidArgument(call + "options.block_steps " +
                                   std::to_string(options.block_steps) + " is < 1");
  }
  if (options.block_steps > gather::kMaxIndexSlots / options.num_blocks) {
    return Status::InvalidArgument(call + "options.num_blocks * options.block_steps (" +
                                   std::to_string(options.num_blocks) + " * " +
                                   std::to_string(options.block_steps) + ") is > 2^40");
  }
  if (options.uniform_draws &&
      (!options.item_steps || options.num_blocks * options.block_steps >= (int64_t{1} << 32))) {
    return Status::InvalidArgument(call +
                                   "options.uniform_draws needs options.item_steps and fewer "
                                   "than 2^32 slots");
  }
  return Status::OK();
}

// InvalidArgument naming the argument when `request` is malformed; checks
// nothing the device holds.
inline Status ValidateGatherRequest(const DeviceBlockIndex::Options& index,
                                    const GatherRequest& request) {
  const std::string call = "Gather: ";
  if (request.batch < 1) {
    return Status::InvalidArgument(call + "request.batch " + std::to_string(request.batch) +
                                   " is < 1");
  }
  if (request.sequence_length < 1) {
    return Status::InvalidArgument(call + "request.sequence_length " +
                                   std::to_string(request.sequence_length) + " is < 1");
  }
  if (request.slots == nullptr &&
      (request.draw.live < 1 || !index.uniform_draws || request.steps != nullptr)) {
    return Status::InvalidArgument(
        call + "request.slots is null, which draws uniformly: that needs request.draw.live >= 1 "
               "(it is " + std::to_string(request.draw.live) +
        "), request.steps null and an index with Options::uniform_draws");
  }
  if (request.slots == nullptr &&
      (request.draw.lanes < 1 ||
       request.draw.live > (int64_t{1} << 62) / std::max<int64_t>(request.draw.lanes, 1))) {
    return Status::InvalidArgument(call + "request.draw.lanes " +
                                   std::to_string(request.draw.lanes) +
                                   " is < 1, or live * lanes overflows");
  }
  if (request.steps == nullptr && !index.item_steps) {
    return Status::InvalidArgument(call +
                                   "request.steps is null and the index keeps no item steps "
                                   "(DeviceBlockIndex::Options::item_steps is false)");
  }
  if (request.copies.size() > static_cast<size_t>(gather::kMaxSmallCopies)) {
    return Status::InvalidArgument(call + "request.copies has " +
                                   std::to_string(request.copies.size()) + " entries; at most " +
                                   std::to_string(gather::kMaxSmallCopies));
  }
  for (size_t i = 0; i < request.copies.size(); ++i) {
    const SmallCopy& copy = request.copies[i];
    if (copy.bytes == 0) continue;
    const std::string name = "request.copies[" + std::to_string(i) + "]";
    if (copy.src == nullptr) return Status::InvalidArgument(call + name + ".src is null");
    if (copy.dst == nullptr) return Status::InvalidArgument(call + name + ".dst is null");
  }
  for (size_t c = 0; c < request.columns.size(); ++c) {
    const GatherColumn& col = request.columns[c];
    const std::string name = "request.columns[" + std::to_string(c) + "]";
    if (col.step_bytes == 0) return Status::InvalidArgument(call + name + ".step_bytes is 0");
    if (col.d_out == nullptr) return Status::InvalidArgument(call + name + ".d_out is null");
  }
  const uint64_t batch = static_cast<uint64_t>(request.batch);
  const uint64_t steps = static_cast<uint64_t>(request.sequence_length);
  uint64_t window = 0;
  if (steps > gather::kMaxRequestBytes / batch ||
      !gather::LayoutBytes(request.columns.data(), request.columns.size(), steps, &window) ||
      window > gather::kMaxRequestBytes / batch) {
    return Status::InvalidArgument(
        call + "request.batch * request.sequence_length * the columns' step_bytes overflows");
  }
  const uint64_t chunks = gather::Max<uint64_t>(1, gather::CeilDiv(window, gather::kMinChunkBytes));
  if (chunks > static_cast<uint64_t>(gather::kMaxGrid - 1) / batch) {
    return Status::InvalidArgument(call + "request.batch " + std::to_string(request.batch) +
                                   " of " + std::to_string(window) +
                                   "-byte windows needs more than 2^31 - 2 CTAs");
  }
  return Status::OK();
}

inline Status ValidateScatterRequest(const ScatterRequest& request) {
  const std::string call = "Scatter: ";
  if (request.n < 1) {
    return Status::InvalidArgument(call + "request.n " + std::to_string(request.n) + " is < 1");
  }
  if (request.slots == nullptr) return Status::InvalidArgument(call + "request.slots is null");
  if (request.rows < 1) {
    return Status::InvalidArgument(call + "request.rows " + std::to_string(request.rows) +
                                   " is < 1");
  }
  for (size_t c = 0; c < request.columns.size(); ++c) {
    const ScatterColumn& col = request.columns[c];
    const std::string name = "request.columns[" + std::to_string(c) + "]";
    if (col.step_bytes == 0) return Status::InvalidArgument(call + name + ".step_bytes is 0");
    if (col.d_src == nullptr) return Status::InvalidArgument(call + name + ".d_src is null");
  }
  const uint64_t n = static_cast<uint64_t>(request.n);
  uint64_t env = 0;
  if (!gather::LayoutBytes(request.columns.data(), request.columns.size(),
                           static_cast<uint64_t>(request.rows), &env) ||
      env > gather::kMaxRequestBytes / n) {
    return Status::InvalidArgument(call +
                                   "request.n * request.rows * the columns' step_bytes overflows");
  }
  const uint64_t chunks = gather::Max<uint64_t>(1, gather::CeilDiv(env, gather::kMinChunkBytes));
  if (chunks > static_cast<uint64_t>(gather::kMaxGrid) / n) {
    return Status::InvalidArgument(call + "request.n " + std::to_string(request.n) + " of " +
                                   std::to_string(env) +
                                   "-byte steps needs more than 2^31 - 1 CTAs");
  }
  return Status::OK();
}

// ------------------------------------------------------------------ plans

struct GatherLaunch {
  gather::GatherArgs args;
  uint32_t grid;
  uint32_t threads;
};

struct ScatterLaunch {
  gather::ScatterArgs args;
  uint32_t grid;
  uint32_t threads;
};

inline int LaunchCount(size_t columns) {
  return columns == 0 ? 1
                      : static_cast<int>((columns + gather::kMaxColumnsPerLaunch - 1) /
                                         gather::kMaxColumnsPerLaunch);
}

// Launch `launch` (0 .. LaunchCount(columns) - 1) of a request that
// ValidateGatherRequest accepted, on a device of `num_sms` multiprocessors.
inline void PlanGather(const gather::IndexView& index, const GatherRequest& request, int launch,
                       int num_sms, GatherLaunch* out) {
  gather::GatherArgs& a = out->args;
  a = gather::GatherArgs{};
  a.index = index;
  a.num_slots = index.num_blocks * index.block_steps;
  a.d_slots = request.slots;
  a.d_steps = request.steps;
  a.d_mask = launch == 0 ? request.d_mask : nullptr;
  a.draw_live = request.draw.live;
  a.draw_lanes = request.draw.lanes;
  a.draw_seed = request.draw.seed;
  if (launch == 0) {
    a.d_draw_keys = request.draw.d_keys;
    a.d_draw_probabilities = request.draw.d_probabilities;
    a.d_draw_weights = request.draw.d_weights;
  }
  a.sequence_length = request.sequence_length;
  a.early_reads = request.overlap_prior && request.early_reads;
  const size_t first = static_cast<size_t>(launch) * gather::kMaxColumnsPerLaunch;
  const size_t count =
      first >= request.columns.size()
          ? 0
          : gather::Min<size_t>(gather::kMaxColumnsPerLaunch, request.columns.size() - first);
  const uint64_t steps = static_cast<uint64_t>(request.sequence_length);
  uint64_t window = 0;
  for (size_t i = 0; i < count; ++i) {
    const GatherColumn& col = request.columns[first + i];
    const uint64_t begin = gather::RoundUp16(window);
    a.columns[i] = gather::GatherColumnArgs{col.step_bytes, col.block_offset,
                                            static_cast<uint8_t*>(col.d_out), begin};
    window = begin + steps * col.step_bytes;
  }
  a.num_columns = static_cast<int32_t>(count);
  a.window_bytes = window;
  gather::ChooseChunks(request.batch, window, num_sms, &a.chunk_bytes, &a.chunks_per_window,
                       &out->threads);
  if (launch == 0) {
    for (const SmallCopy& copy : request.copies) {
      if (copy.bytes == 0) continue;
      a.copies[a.num_copies++] = gather::SmallCopyArgs{static_cast<const uint8_t*>(copy.src),
                                                       static_cast<uint8_t*>(copy.dst), copy.bytes};
    }
  }
  a.copy_ctas = a.num_copies > 0 ? 1 : 0;
  out->grid = a.copy_ctas + static_cast<uint32_t>(request.batch) * a.chunks_per_window;
}

// Launch `launch` (0 .. LaunchCount(columns) - 1) of a request with at least
// one column that ValidateScatterRequest accepted.
inline void PlanScatter(const gather::IndexView& index, const ScatterRequest& request, int launch,
                        int num_sms, ScatterLaunch* out) {
  gather::ScatterArgs& a = out->args;
  a = gather::ScatterArgs{};
  a.index = index;
  a.num_slots = index.num_blocks * index.block_steps;
  a.d_slots = request.slots;
  a.rows = request.rows;
  const size_t first = static_cast<size_t>(launch) * gather::kMaxColumnsPerLaunch;
  const size_t count =
      gather::Min<size_t>(gather::kMaxColumnsPerLaunch, request.columns.size() - first);
  uint64_t env = 0;
  for (size_t i = 0; i < count; ++i) {
    const ScatterColumn& col = request.columns[first + i];
    const uint64_t begin = gather::RoundUp16(env);
    a.columns[i] = gather::ScatterColumnArgs{col.step_bytes, col.block_offset,
                                             static_cast<const uint8_t*>(col.d_src), begin};
    env = begin + col.step_bytes * static_cast<uint64_t>(request.rows);
  }
  a.num_columns = static_cast<int32_t>(count);
  a.env_bytes = env;
  gather::ChooseChunks(request.n, env, num_sms, &a.chunk_bytes, &a.chunks_per_env, &out->threads);
  out->grid = static_cast<uint32_t>(request.n) * a.chunks_per_env;
}

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_PLAN_H_
