// Gather and Scatter of hot-tier blocks, byte for byte against a CPU
// reference computed from the same blocks: step sizes from 1 byte to 64 KiB
// (odd ones too), odd column offsets, block strides and output addresses,
// many columns (more than one launch), windows inside one block and across
// several (L > block_steps, and chains longer than a CTA caches at once),
// padding, slot -1, entries the device must not trust, the mask, small
// copies; scatter, then gather of what it wrote. Output buffers are poisoned
// (0xAB) before every run and compared whole, guard bytes included.
//
// Every scenario runs on the host through the kernels' own per-CTA code
// (block_gather_agent.h), which needs no GPU, and on the GPU with the blocks
// in device memory and in pinned host memory (zero-copy); GPU tests skip,
// with the reason, where no GPU can be used. Also: the index's staging,
// argument checks (before any CUDA call, so also without a GPU), device
// memory and DeviceEvent.
#include "kernels/gather/block_gather.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/gather/block_gather_agent.h"
#include "kernels/gather/block_gather_plan.h"
#include "kernels/gather/block_index_staging.h"
#include "kernels/runtime/device_memory.h"
#include "kernels/runtime/gpu.h"
#include "replaydb/device.h"
#include "tests/test_util.h"

namespace replaydb::kernels {
namespace {

using ::testing::HasSubstr;

constexpr uint8_t kPoison = 0xAB;
constexpr size_t kGuard = 48;  // poisoned bytes after every output

bool HaveGpu(std::string* why) {
  return CudaDeviceCount(why) > 0;
}

// ------------------------------------------------------------- the model

struct Spec {
  const char* name;
  int64_t num_blocks;
  int64_t block_steps;
  std::vector<size_t> step_bytes;  // per column
  int64_t batch;
  int64_t sequence_length;
  bool odd = false;         // odd column offsets, block stride and output addresses
  bool item_steps = false;  // window lengths from the index instead of the request
  bool faults = false;      // entries the device must not trust (see block_gather.h)
  bool mask = true;
  int copies = 0;
};

std::string Describe(const Spec& s) {
  std::string d = std::string(s.name) + ": blocks " + std::to_string(s.num_blocks) + " x " +
                  std::to_string(s.block_steps) + " steps, B " + std::to_string(s.batch) + ", L " +
                  std::to_string(s.sequence_length) + ", step bytes";
  for (size_t b : s.step_bytes) d += " " + std::to_string(b);
  return d;
}

// Blocks in host memory as the engine lays them out, and the chains.
struct Blocks {
  int64_t num_blocks = 0;
  int64_t block_steps = 0;
  std::vector<size_t> step_bytes;
  std::vector<size_t> column_offset;
  size_t block_stride = 0;
  std::vector<uint8_t> image;  // num_blocks * block_stride
  std::vector<int64_t> next;   // -1: none
  std::set<int64_t> unset;     // blocks whose address is never set
  std::vector<std::vector<int64_t>> chains;
  std::vector<int64_t> chain_steps;

  int64_t num_slots() const { return num_blocks * block_steps; }
  size_t Where(int64_t block, int64_t step, size_t c) const {
    return static_cast<size_t>(block) * block_stride + column_offset[c] +
           static_cast<size_t>(step) * step_bytes[c];
  }
};

Blocks MakeBlocks(int64_t num_blocks, int64_t block_steps, const std::vector<size_t>& step_bytes,
                  bool odd, int64_t max_chain, std::mt19937_64& rng) {
  Blocks b;
  b.num_blocks = num_blocks;
  b.block_steps = block_steps;
  b.step_bytes = step_bytes;
  size_t at = odd ? 1 : 0;
  for (size_t c = 0; c < step_bytes.size(); ++c) {
    b.column_offset.push_back(at);
    at += static_cast<size_t>(block_steps) * step_bytes[c];
    at = odd ? at + 3 + c % 5 : (at + 15) / 16 * 16;
  }
  b.block_stride = std::max<size_t>(16, odd ? at + 7 : (at + 255) / 256 * 256);
  b.image.resize(static_cast<size_t>(num_blocks) * b.block_stride);
  for (auto& x : b.image) x = static_cast<uint8_t>(rng());
  b.next.assign(static_cast<size_t>(num_blocks), -1);
  std::vector<int64_t> order(static_cast<size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < order.size();) {
    const size_t m = std::min<size_t>(order.size() - i, 1 + rng() % max_chain);
    std::vector<int64_t> chain(order.begin() + i, order.begin() + i + m);
    for (size_t j = 0; j + 1 < m; ++j) b.next[chain[j]] = chain[j + 1];
    const int64_t last_fill = 1 + static_cast<int64_t>(rng() % block_steps);
    b.chain_steps.push_back(static_cast<int64_t>(m - 1) * block_steps + last_fill);
    b.chains.push_back(std::move(chain));
    i += m;
  }
  return b;
}

struct CopySpec {
  size_t bytes;
  size_t src_offset;
  size_t dst_offset;
  std::vector<uint8_t> src;  // src_offset + bytes
};

struct World {
  Spec spec;
  Blocks blocks;
  std::vector<int64_t> slots;   // per window
  std::vector<uint32_t> steps;  // per window: the request's, or the index's for the slot
  std::map<int64_t, uint32_t> item_steps;
  std::vector<size_t> out_offset;  // per column
  size_t mask_offset = 0;
  std::vector<CopySpec> copies;
};

World MakeWorld(const Spec& spec, std::mt19937_64& rng) {
  World w;
  w.spec = spec;
  const int64_t L = spec.sequence_length;
  const int64_t bs = spec.block_steps;
  w.blocks = MakeBlocks(spec.num_blocks, bs, spec.step_bytes, spec.odd, (L + bs - 1) / bs + 3, rng);
  Blocks& b = w.blocks;
  if (spec.faults) b.unset.insert(static_cast<int64_t>(rng() % spec.num_blocks));
  for (int64_t i = 0; i < spec.batch; ++i) {
    const uint64_t kind = rng() % 12;
    if (kind == 0) {  // no item
      w.slots.push_back(-1);
      w.steps.push_back(static_cast<uint32_t>(1 + rng() % L));
      continue;
    }
    if (spec.faults && kind == 1) {  // beyond the tier: no item
      w.slots.push_back(b.num_slots() + static_cast<int64_t>(rng() % 4));
      w.steps.push_back(static_cast<uint32_t>(L));
      continue;
    }
    const size_t chain = rng() % b.chains.size();
    const int64_t p = static_cast<int64_t>(rng() % b.chain_steps[chain]);
    const int64_t slot = b.chains[chain][p / bs] * bs + p % bs;
    const int64_t remaining = b.chain_steps[chain] - p;
    int64_t n = std::min(L, remaining);
    if (rng() % 2 == 0) n = 1 + static_cast<int64_t>(rng() % n);
    if (spec.faults && kind == 2) n = L + 3;  // capped at L; may run off the chain
    if (spec.faults && kind == 3) n = 0;      // no real step
    if (spec.faults && kind == 4) n = std::min(L, remaining + 2);  // off the chain's end
    if (spec.item_steps) {
      auto [it, fresh] = w.item_steps.emplace(slot, static_cast<uint32_t>(n));
      n = it->second;
    }
    w.slots.push_back(slot);
    w.steps.push_back(static_cast<uint32_t>(n));
  }
  for (size_t c = 0; c < spec.step_bytes.size(); ++c) {
    w.out_offset.push_back(spec.odd ? 1 + 2 * (c % 8) : 16 * (c % 3));
  }
  w.mask_offset = spec.odd ? 3 : 0;
  for (int i = 0; i < spec.copies; ++i) {
    CopySpec copy;
    copy.bytes = 1 + rng() % 3000;
    copy.src_offset = spec.odd ? rng() % 16 : 0;
    copy.dst_offset = spec.odd ? rng() % 16 : 0;
    copy.src.resize(copy.src_offset + copy.bytes);
    for (auto& x : copy.src) x = static_cast<uint8_t>(rng());
    w.copies.push_back(std::move(copy));
  }
  return w;
}

// Every output buffer of a gather, whole (guards included).
struct Outputs {
  std::vector<std::vector<uint8_t>> columns;
  std::vector<uint8_t> mask;
  std::vector<std::vector<uint8_t>> copies;
};

size_t ColumnBufferBytes(const World& w, size_t c) {
  return w.out_offset[c] +
         static_cast<size_t>(w.spec.batch * w.spec.sequence_length) * w.spec.step_bytes[c] + kGuard;
}
size_t MaskBufferBytes(const World& w) {
  return w.mask_offset + static_cast<size_t>(w.spec.batch * w.spec.sequence_length) + kGuard;
}
size_t CopyBufferBytes(const CopySpec& c) {
  return c.dst_offset + c.bytes + kGuard;
}

// The reference: window b's step t comes from block k = (o + t) / block_steps
// of its chain, unless the slot is outside the tier, t >= min(steps, L), the
// chain ends before block k or block k's address was never set.
Outputs Expected(const World& w) {
  const Blocks& b = w.blocks;
  const int64_t L = w.spec.sequence_length;
  const int64_t bs = b.block_steps;
  Outputs e;
  for (size_t c = 0; c < w.spec.step_bytes.size(); ++c) {
    e.columns.emplace_back(ColumnBufferBytes(w, c), kPoison);
  }
  if (w.spec.mask) e.mask.assign(MaskBufferBytes(w), kPoison);
  for (int64_t i = 0; i < w.spec.batch; ++i) {
    const int64_t slot = w.slots[static_cast<size_t>(i)];
    const bool item = slot >= 0 && slot < b.num_slots();
    const int64_t n = item ? std::min<int64_t>(w.steps[static_cast<size_t>(i)], L) : 0;
    for (int64_t t = 0; t < L; ++t) {
      if (w.spec.mask) e.mask[w.mask_offset + static_cast<size_t>(i * L + t)] = t < n ? 1 : 0;
      int64_t block = -1;
      int64_t step = 0;
      if (t < n) {
        const int64_t pos = slot % bs + t;
        block = slot / bs;
        for (int64_t k = 0; k < pos / bs && block >= 0; ++k) block = b.next[block];
        if (block >= 0 && b.unset.count(block)) block = -1;
        step = pos % bs;
      }
      for (size_t c = 0; c < e.columns.size(); ++c) {
        const size_t sb = w.spec.step_bytes[c];
        uint8_t* dst = e.columns[c].data() + w.out_offset[c] + static_cast<size_t>(i * L + t) * sb;
        if (block >= 0) {
          std::memcpy(dst, b.image.data() + b.Where(block, step, c), sb);
        } else {
          std::memset(dst, 0, sb);
        }
      }
    }
  }
  for (const CopySpec& copy : w.copies) {
    e.copies.emplace_back(CopyBufferBytes(copy), kPoison);
    std::memcpy(e.copies.back().data() + copy.dst_offset, copy.src.data() + copy.src_offset,
                copy.bytes);
  }
  return e;
}

// The first difference of two buffers, or "".
std::string FirstDifference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  }
  size_t diffs = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && diffs++ == 0) first = i;
  }
  if (diffs == 0) return "";
  return std::to_string(diffs) + " bytes differ; the first at byte " + std::to_string(first) +
         ": got " + std::to_string(got[first]) + ", want " + std::to_string(want[first]);
}

void ExpectSame(const World& w, const Outputs& got, const Outputs& want, const std::string& run) {
  for (size_t c = 0; c < want.columns.size(); ++c) {
    const std::string d = FirstDifference(got.columns[c], want.columns[c]);
    const size_t sb = w.spec.step_bytes[c];
    EXPECT_EQ(d, "") << run << ", column " << c << " (step bytes " << sb << ", output at +"
                     << w.out_offset[c] << "; byte = " << w.out_offset[c]
                     << " + (b * L + t) * step_bytes + j)";
  }
  EXPECT_EQ(FirstDifference(got.mask, want.mask), "") << run << ", mask";
  for (size_t i = 0; i < want.copies.size(); ++i) {
    EXPECT_EQ(FirstDifference(got.copies[i], want.copies[i]), "") << run << ", copy " << i;
  }
}

// The request of a world, over given buffers.
struct RequestStorage {
  std::vector<GatherColumn> columns;
  std::vector<SmallCopy> copies;
  GatherRequest request;
};

void BuildRequest(const World& w, const int64_t* slots, const uint32_t* steps,
                  const std::vector<uint8_t*>& outs, uint8_t* mask,
                  const std::vector<const uint8_t*>& copy_src,
                  const std::vector<uint8_t*>& copy_dst, RequestStorage* r) {
  r->columns.clear();
  for (size_t c = 0; c < w.spec.step_bytes.size(); ++c) {
    r->columns.push_back(
        GatherColumn{w.spec.step_bytes[c], w.blocks.column_offset[c], outs[c] + w.out_offset[c]});
  }
  r->copies.clear();
  for (size_t i = 0; i < w.copies.size(); ++i) {
    r->copies.push_back(SmallCopy{copy_src[i] + w.copies[i].src_offset,
                                  copy_dst[i] + w.copies[i].dst_offset, w.copies[i].bytes});
  }
  r->request = GatherRequest{};
  r->request.batch = w.spec.batch;
  r->request.sequence_length = w.spec.sequence_length;
  r->request.slots = slots;
  r->request.steps = w.spec.item_steps ? nullptr : steps;
  r->request.columns = r->columns;
  r->request.d_mask = mask == nullptr ? nullptr : mask + w.mask_offset;
  r->request.copies = r->copies;
}

// ----------------------------------------------------- runs on the host

// The device arrays of an index, in host memory, filled through the same
// staging and update code as the device's.
struct HostIndex {
  std::vector<uint64_t> addresses;
  std::vector<int64_t> next;
  std::vector<uint32_t> item_steps;
  DeviceBlockIndex::Options options;

  gather::IndexView view() const {
    return gather::IndexView{addresses.data(), next.data(),
                             item_steps.empty() ? nullptr : item_steps.data(), options.num_blocks,
                             options.block_steps};
  }
};

// Stages the world's blocks (at `base`), chains and item steps into
// `staging` (a BlockIndexStaging or a DeviceBlockIndex).
template <typename Stager>
void StageWorld(const World& w, const uint8_t* base, Stager* staging) {
  const Blocks& b = w.blocks;
  for (int64_t i = 0; i < b.num_blocks; ++i) {
    if (!b.unset.count(i)) {
      staging->SetBlockAddress(i, base + static_cast<size_t>(i) * b.block_stride);
    }
    if (b.next[i] >= 0 || i % 3 == 0) staging->SetNext(i, b.next[i]);
  }
  for (const auto& [slot, steps] : w.item_steps) staging->SetItemSteps(slot, steps);
}

void MakeHostIndex(const World& w, const uint8_t* base, HostIndex* index) {
  const Blocks& b = w.blocks;
  index->options.num_blocks = b.num_blocks;
  index->options.block_steps = b.block_steps;
  index->options.item_steps = w.spec.item_steps;
  index->addresses.assign(static_cast<size_t>(b.num_blocks), 0);
  index->next.assign(static_cast<size_t>(b.num_blocks), -1);
  index->item_steps.assign(w.spec.item_steps ? static_cast<size_t>(b.num_slots()) : 0, 0);
  BlockIndexStaging staging(b.num_blocks, b.block_steps, w.spec.item_steps);
  StageWorld(w, base, &staging);
  std::vector<gather::IndexUpdate> updates;
  const Status s = staging.Take(&updates);
  EXPECT_TRUE(s.ok()) << s.ToString();
  const gather::IndexArrays arrays{index->addresses.data(), index->next.data(),
                                   index->item_steps.empty() ? nullptr : index->item_steps.data()};
  for (const gather::IndexUpdate& u : updates) gather::ApplyIndexUpdate(arrays, u);
}

// Runs the planned launches' CTAs on the host, as on a device of `num_sms`.
Outputs GatherOnHost(const World& w, int num_sms) {
  std::vector<uint8_t> blocks = w.blocks.image;
  HostIndex index;
  MakeHostIndex(w, blocks.data(), &index);
  Outputs out;
  std::vector<uint8_t*> outs;
  for (size_t c = 0; c < w.spec.step_bytes.size(); ++c) {
    out.columns.emplace_back(ColumnBufferBytes(w, c), kPoison);
    outs.push_back(out.columns.back().data());
  }
  if (w.spec.mask) out.mask.assign(MaskBufferBytes(w), kPoison);
  std::vector<const uint8_t*> copy_src;
  std::vector<uint8_t*> copy_dst;
  for (const CopySpec& copy : w.copies) {
    out.copies.emplace_back(CopyBufferBytes(copy), kPoison);
    copy_src.push_back(copy.src.data());
    copy_dst.push_back(out.copies.back().data());
  }
  RequestStorage r;
  BuildRequest(w, w.slots.data(), w.steps.data(), outs, w.spec.mask ? out.mask.data() : nullptr,
               copy_src, copy_dst, &r);
  const Status valid = ValidateGatherRequest(index.options, r.request);
  EXPECT_TRUE(valid.ok()) << valid.ToString();
  GatherLaunch launch;
  for (int i = 0; i < LaunchCount(r.columns.size()); ++i) {
    PlanGather(index.view(), r.request, i, num_sms, &launch);
    gather::RunGatherOnHost(launch.args, launch.grid, launch.threads);
  }
  return out;
}

// ------------------------------------------------------ runs on the GPU

// Device and pinned allocations of one test, freed together.
class GpuArena {
 public:
  GpuArena() = default;
  GpuArena(const GpuArena&) = delete;
  GpuArena& operator=(const GpuArena&) = delete;
  ~GpuArena() {
    for (const auto& [p, pinned] : allocations_) {
      if (pinned) {
        FreePinned(p);
      } else {
        FreeDevice(0, p);
      }
    }
  }

  Result<uint8_t*> Device(size_t bytes) {
    void* p = nullptr;
    REPLAYDB_RETURN_IF_ERROR(AllocateDevice(0, bytes, &p));
    allocations_.emplace_back(p, false);
    return static_cast<uint8_t*>(p);
  }
  Result<uint8_t*> Pinned(size_t bytes) {
    void* p = nullptr;
    REPLAYDB_RETURN_IF_ERROR(AllocatePinned(bytes, &p));
    allocations_.emplace_back(p, true);
    return static_cast<uint8_t*>(p);
  }
  // Device (or pinned) memory holding a copy of src.
  Result<uint8_t*> Copy(const void* src, size_t bytes, bool pinned = false) {
    REPLAYDB_ASSIGN_OR_RETURN(uint8_t * p, pinned ? Pinned(bytes) : Device(bytes));
    REPLAYDB_RETURN_IF_ERROR(CopyToDevice(0, p, src, bytes));
    return p;
  }
  // Device memory of `bytes` poisoned bytes.
  Result<uint8_t*> Poisoned(size_t bytes) {
    const std::vector<uint8_t> poison(bytes, kPoison);
    return Copy(poison.data(), bytes);
  }

 private:
  std::vector<std::pair<void*, bool>> allocations_;
};

Status Poison(uint8_t* d_buffer, size_t bytes) {
  const std::vector<uint8_t> poison(bytes, kPoison);
  return CopyToDevice(0, d_buffer, poison.data(), bytes);
}

Status ReadBack(const uint8_t* d_buffer, std::vector<uint8_t>* out) {
  return CopyFromDevice(0, out->data(), d_buffer, out->size());
}

Result<std::unique_ptr<DeviceBlockIndex>> MakeIndex(const World& w, const uint8_t* base,
                                                    void* stream) {
  DeviceBlockIndex::Options options;
  options.num_blocks = w.blocks.num_blocks;
  options.block_steps = w.blocks.block_steps;
  options.item_steps = w.spec.item_steps;
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBlockIndex> index,
                            DeviceBlockIndex::Create(options));
  StageWorld(w, base, index.get());
  if (!index->dirty()) return Status::Internal("staged changes do not make the index dirty");
  REPLAYDB_RETURN_IF_ERROR(index->Flush(stream));
  if (index->dirty()) return Status::Internal("the index is dirty after Flush");
  return index;
}

// Gathers the world on GPU 0 twice (on `stream`, then on the legacy default
// stream), the outputs poisoned before each run; both results in *runs.
Status GatherOnGpu(const World& w, bool pinned_blocks, void* stream, std::vector<Outputs>* runs) {
  GpuArena arena;
  REPLAYDB_ASSIGN_OR_RETURN(
      uint8_t * blocks, arena.Copy(w.blocks.image.data(), w.blocks.image.size(), pinned_blocks));
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DeviceBlockIndex> index, MakeIndex(w, blocks, stream));
  REPLAYDB_ASSIGN_OR_RETURN(uint8_t * d_slots,
                            arena.Copy(w.slots.data(), sizeof(int64_t) * w.slots.size()));
  REPLAYDB_ASSIGN_OR_RETURN(uint8_t * d_steps,
                            arena.Copy(w.steps.data(), sizeof(uint32_t) * w.steps.size()));
  Outputs out;
  std::vector<uint8_t*> outs;
  for (size_t c = 0; c < w.spec.step_bytes.size(); ++c) {
    out.columns.emplace_back(ColumnBufferBytes(w, c));
    REPLAYDB_ASSIGN_OR_RETURN(uint8_t * p, arena.Device(out.columns.back().size()));
    outs.push_back(p);
  }
  uint8_t* d_mask = nullptr;
  if (w.spec.mask) {
    out.mask.resize(MaskBufferBytes(w));
    REPLAYDB_ASSIGN_OR_RETURN(d_mask, arena.Device(out.mask.size()));
  }
  std::vector<const uint8_t*> copy_src;
  std::vector<uint8_t*> copy_dst;
  for (const CopySpec& copy : w.copies) {
    // Small copies come from pinned staging, as the contract has them.
    REPLAYDB_ASSIGN_OR_RETURN(uint8_t * src, arena.Copy(copy.src.data(), copy.src.size(), true));
    out.copies.emplace_back(CopyBufferBytes(copy));
    REPLAYDB_ASSIGN_OR_RETURN(uint8_t * dst, arena.Device(out.copies.back().size()));
    copy_src.push_back(src);
    copy_dst.push_back(dst);
  }
  RequestStorage r;
  BuildRequest(w, reinterpret_cast<const int64_t*>(d_slots),
               reinterpret_cast<const uint32_t*>(d_steps), outs, d_mask, copy_src, copy_dst, &r);
  // The second run (legacy stream) queues, right before the request, a
  // gather of no items (zeros and mask 0) into the same outputs, and
  // launches the request with overlap_prior: it may start early but must
  // not write before that gather is done, or zeros would show.
  const std::vector<int64_t> none(w.slots.size(), -1);
  REPLAYDB_ASSIGN_OR_RETURN(uint8_t * d_none, arena.Copy(none.data(), sizeof(int64_t) * none.size()));
  GatherRequest blank = r.request;
  blank.slots = reinterpret_cast<const int64_t*>(d_none);
  blank.draw = {};
  GatherRequest overlapped = r.request;
  overlapped.overlap_prior = true;
  for (void* s : {stream, static_cast<void*>(nullptr)}) {
    for (size_t c = 0; c < outs.size(); ++c) {
      REPLAYDB_RETURN_IF_ERROR(Poison(outs[c], out.columns[c].size()));
    }
    if (d_mask != nullptr) REPLAYDB_RETURN_IF_ERROR(Poison(d_mask, out.mask.size()));
    for (size_t i = 0; i < copy_dst.size(); ++i) {
      REPLAYDB_RETURN_IF_ERROR(Poison(copy_dst[i], out.copies[i].size()));
    }
    if (s == nullptr && r.request.slots != nullptr) {
      REPLAYDB_RETURN_IF_ERROR(Gather(*index, blank, s));
      REPLAYDB_RETURN_IF_ERROR(Gather(*index, overlapped, s));
    } else {
      REPLAYDB_RETURN_IF_ERROR(Gather(*index, r.request, s));
    }
    REPLAYDB_RETURN_IF_ERROR(DeviceSynchronize(0));
    for (size_t c = 0; c < outs.size(); ++c) {
      REPLAYDB_RETURN_IF_ERROR(ReadBack(outs[c], &out.columns[c]));
    }
    if (d_mask != nullptr) REPLAYDB_RETURN_IF_ERROR(ReadBack(d_mask, &out.mask));
    for (size_t i = 0; i < copy_dst.size(); ++i) {
      REPLAYDB_RETURN_IF_ERROR(ReadBack(copy_dst[i], &out.copies[i]));
    }
    runs->push_back(out);
  }
  // The blocks are read, never written.
  std::vector<uint8_t> after(w.blocks.image.size());
  REPLAYDB_RETURN_IF_ERROR(ReadBack(blocks, &after));
  if (after != w.blocks.image) return Status::Internal("Gather wrote into the blocks");
  return Status::OK();
}

// ------------------------------------------------------------- scenarios

std::vector<Spec> GatherSpecs() {
  std::vector<Spec> specs;
  specs.push_back({"one byte, one block", 16, 8, {1}, 40, 3, false, false, false, true, 1});
  specs.push_back({"one byte, L = 1", 16, 8, {1, 4}, 37, 1});
  specs.push_back(
      {"odd sizes, odd offsets", 24, 5, {3, 7, 13}, 33, 7, true, false, false, true, 4});
  specs.push_back({"windows across several blocks", 40, 4, {100, 255}, 25, 19, true});
  specs.push_back({"aligned 256 B steps", 20, 8, {256, 16}, 30, 32, false, false, false, true, 2});
  specs.push_back({"4 KiB steps, 32 per window", 8, 16, {4096}, 8, 32});
  specs.push_back({"4 KiB + 4 steps", 12, 3, {4096 + 4}, 9, 5, true, false, false, true, 3});
  specs.push_back({"64 KiB steps", 10, 4, {65536, 4}, 6, 6, false, false, false, true, 1});
  specs.push_back({"64 KiB steps, L = 1, odd", 6, 2, {65536}, 5, 1, true});
  specs.push_back({"item steps from the index", 30, 8, {16, 256, 1}, 40, 10, false, true});
  specs.push_back({"no mask", 12, 4, {8, 24}, 20, 6, false, false, false, false});
  specs.push_back({"entries the device must not trust", 20, 4, {12, 3}, 60, 9, true, false, true});
  specs.push_back({"faults with item steps", 20, 3, {32}, 40, 7, false, true, true});
  specs.push_back(
      {"chains longer than a CTA caches", 800, 1, {1, 3}, 4, 700, false, false, false, true, 1});
  specs.push_back({"many columns",
                   14,
                   6,
                   {1, 2, 3, 4, 5, 8, 16, 17, 32, 33, 64, 100, 128, 255, 256, 4, 12, 7, 1000, 2},
                   21,
                   8,
                   true,
                   false,
                   false,
                   true,
                   4});
  specs.push_back(
      {"zero columns: mask and copies only", 4, 4, {}, 9, 5, false, false, false, true, 2});
  return specs;
}

// The scenarios on the host: the kernels' CTAs, as on a small and on a
// large GPU (large chunks, few CTAs; small chunks cut inside runs).
TEST(BlockGatherHostTest, MatchesReferenceByteForByte) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const Spec& spec : GatherSpecs()) {
    SCOPED_TRACE(Describe(spec));
    const World w = MakeWorld(spec, rng);
    const Outputs want = Expected(w);
    for (int sms : {1, 132}) {
      ExpectSame(w, GatherOnHost(w, sms), want, "host run as on " + std::to_string(sms) + " SMs");
    }
  }
}

class BlockGatherGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_F(BlockGatherGpuTest, MatchesReferenceByteForByte) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  for (const Spec& spec : GatherSpecs()) {
    SCOPED_TRACE(Describe(spec));
    const World w = MakeWorld(spec, rng);
    const Outputs want = Expected(w);
    for (bool pinned : {false, true}) {
      std::vector<Outputs> runs;
      ASSERT_OK(GatherOnGpu(w, pinned, stream.handle(), &runs));
      ASSERT_EQ(runs.size(), 2u);
      for (size_t i = 0; i < runs.size(); ++i) {
        ExpectSame(
            w, runs[i], want,
            std::string(pinned ? "blocks in pinned host memory" : "blocks in device memory") +
                (i == 0 ? ", own stream" : ", legacy stream, overlapping a prior gather"));
      }
    }
  }
}

// --------------------------------------------------------------- scatter

struct ScatterWorld {
  Blocks blocks;
  int64_t n = 0;
  int64_t rows = 1;  // slots per entry
  std::vector<int64_t> slots;
  std::vector<std::vector<uint8_t>> src;  // per column, [n, rows, step_bytes]

  // Whether entry i's run lands: a real slot, in a block with an address,
  // not leaving its block.
  bool Written(int64_t i) const {
    const int64_t slot = slots[static_cast<size_t>(i)];
    return slot >= 0 && slot < blocks.num_slots() &&
           !blocks.unset.count(slot / blocks.block_steps) &&
           slot % blocks.block_steps + rows <= blocks.block_steps;
  }
};

// Entries at random runs of `rows` slots that start at multiples of rows
// in their block, with some -1, past the end, and (rows > 1) leaving their
// block.
ScatterWorld MakeScatterWorld(int64_t num_blocks, int64_t block_steps,
                              const std::vector<size_t>& step_bytes, int64_t n, int64_t rows,
                              bool odd, std::mt19937_64& rng) {
  ScatterWorld s;
  s.blocks = MakeBlocks(num_blocks, block_steps, step_bytes, odd, 4, rng);
  s.blocks.unset.insert(static_cast<int64_t>(rng() % num_blocks));
  s.n = n;
  s.rows = rows;
  std::vector<int64_t> runs;
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int64_t k = 0; (k + 1) * rows <= block_steps; ++k)
      runs.push_back(b * block_steps + k * rows);
  }
  EXPECT_LE(n, static_cast<int64_t>(runs.size())) << "a scatter spec with too few runs";
  std::shuffle(runs.begin(), runs.end(), rng);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t kind = rng() % 10;
    if (kind == 0) {
      s.slots.push_back(-1);
    } else if (kind == 1) {
      s.slots.push_back(s.blocks.num_slots() + static_cast<int64_t>(rng() % 3));
    } else if (kind == 2 && rows > 1) {
      // The run's last row would be the next block's first step.
      s.slots.push_back(static_cast<int64_t>(rng() % num_blocks) * block_steps + block_steps -
                        rows + 1);
    } else {
      s.slots.push_back(runs[static_cast<size_t>(i)]);
    }
  }
  for (size_t sb : step_bytes) {
    s.src.emplace_back(static_cast<size_t>(n * rows) * sb);
    for (auto& x : s.src.back()) x = static_cast<uint8_t>(rng());
  }
  return s;
}

// The blocks after the scatter: only the runs Written says land.
std::vector<uint8_t> ExpectedScatter(const ScatterWorld& s) {
  std::vector<uint8_t> image = s.blocks.image;
  const Blocks& b = s.blocks;
  for (int64_t i = 0; i < s.n; ++i) {
    if (!s.Written(i)) continue;
    const int64_t slot = s.slots[static_cast<size_t>(i)];
    for (int64_t r = 0; r < s.rows; ++r) {
      for (size_t c = 0; c < b.step_bytes.size(); ++c) {
        const size_t sb = b.step_bytes[c];
        std::memcpy(image.data() + b.Where(slot / b.block_steps, slot % b.block_steps + r, c),
                    s.src[c].data() + static_cast<size_t>(i * s.rows + r) * sb, sb);
      }
    }
  }
  return image;
}

// A gather of one step at each scattered row: L = 1, steps 1 (no item
// where the entry's run was not written).
World RoundTripWorld(const ScatterWorld& s, const std::vector<uint8_t>& image) {
  World w;
  const int64_t windows = s.n * s.rows;
  w.spec = Spec{
      "round trip", s.blocks.num_blocks, s.blocks.block_steps, s.blocks.step_bytes, windows, 1};
  w.blocks = s.blocks;
  w.blocks.image = image;
  for (int64_t i = 0; i < s.n; ++i) {
    for (int64_t r = 0; r < s.rows; ++r) {
      w.slots.push_back(s.Written(i) ? s.slots[static_cast<size_t>(i)] + r : -1);
    }
  }
  w.steps.assign(static_cast<size_t>(windows), 1);
  w.out_offset.assign(s.blocks.step_bytes.size(), 0);
  return w;
}

// What the round trip must read: the scattered rows (zeros where the run
// was not written).
void ExpectRoundTrip(const ScatterWorld& s, const Outputs& got) {
  const Blocks& b = s.blocks;
  for (size_t c = 0; c < b.step_bytes.size(); ++c) {
    const size_t sb = b.step_bytes[c];
    const size_t entry = static_cast<size_t>(s.rows) * sb;
    std::vector<uint8_t> want(static_cast<size_t>(s.n) * entry + kGuard, kPoison);
    for (int64_t i = 0; i < s.n; ++i) {
      uint8_t* dst = want.data() + static_cast<size_t>(i) * entry;
      if (s.Written(i)) {
        std::memcpy(dst, s.src[c].data() + static_cast<size_t>(i) * entry, entry);
      } else {
        std::memset(dst, 0, entry);
      }
    }
    EXPECT_EQ(FirstDifference(got.columns[c], want), "") << "round trip, column " << c;
  }
}

struct ScatterSpec {
  int64_t num_blocks;
  int64_t block_steps;
  std::vector<size_t> step_bytes;
  int64_t n;
  bool odd;
  int64_t rows = 1;
};

std::vector<ScatterSpec> ScatterSpecs() {
  return {
      {12, 8, {1, 3, 16}, 50, true},
      {10, 4, {4096 + 4, 65536}, 20, false},
      {10, 4, {4096, 256}, 30, false},
      {8, 5, {1, 2, 3, 4, 5, 8, 16, 17, 32, 33, 64, 100, 128, 255, 256, 4, 12, 7}, 25, true},
      // Runs of rows (a vector table's steps).
      {12, 8, {1, 3, 16}, 20, true, 4},
      {10, 6, {4096 + 4, 256}, 12, false, 3},
      {6, 8, {1000}, 5, false, 8},
  };
}

void BuildScatter(const ScatterWorld& s, const int64_t* slots,
                  const std::vector<const uint8_t*>& src, std::vector<ScatterColumn>* columns,
                  ScatterRequest* request) {
  columns->clear();
  for (size_t c = 0; c < s.blocks.step_bytes.size(); ++c) {
    columns->push_back(ScatterColumn{s.blocks.step_bytes[c], s.blocks.column_offset[c], src[c]});
  }
  *request = ScatterRequest{};
  request->n = s.n;
  request->slots = slots;
  request->columns = *columns;
  request->rows = s.rows;
}

// Uniform draws inside the gather (request.slots null), run on the host:
// one trajectory over blocks 2 -> 0, L = 3 so windows cross the blocks; each
// window is the drawn live item's, keys come from the block keys,
// probabilities are 1 / live, weights 1, and every live item is drawn about
// equally often.
TEST(BlockGatherHostTest, UniformDrawsPickLiveItemsAndTheirWindows) {
  constexpr int64_t kBlocks = 4, kBlockSteps = 4, kL = 3;
  const uint64_t seed = testing_util::TestSeed();
  // Block b's step s holds the value 1000 * b + s.
  std::vector<uint64_t> image(kBlocks * kBlockSteps);
  for (int64_t i = 0; i < kBlocks * kBlockSteps; ++i) image[i] = 1000 * (i / kBlockSteps) + i % kBlockSteps;
  BlockIndexStaging staging(kBlocks, kBlockSteps, /*item_steps=*/true, /*uniform_draws=*/true);
  for (int64_t b = 0; b < kBlocks; ++b) staging.SetBlockAddress(b, &image[b * kBlockSteps]);
  staging.SetNext(2, 0);
  staging.SetBlockKey(2, (uint64_t{7} << 24) | 0);
  staging.SetBlockKey(0, (uint64_t{7} << 24) | 4);
  // Items at the trajectory's steps 0..5 (slots 8..11, then 0, 1); its
  // length is 6, so the last windows are padded.
  const std::vector<int64_t> live = {8, 9, 10, 11, 0, 1};
  std::vector<int64_t> starts;
  for (size_t i = 0; i < live.size(); ++i) {
    staging.SetLive(static_cast<int64_t>(i), live[i]);
    const int64_t start = live[i] >= 8 ? live[i] - 8 : live[i] + 4;
    starts.push_back(start);
    staging.SetItemSteps(live[i], static_cast<uint32_t>(std::min<int64_t>(kL, 6 - start)));
  }
  std::vector<uint64_t> addresses(kBlocks, 0), block_keys(kBlocks, 0);
  std::vector<int64_t> next(kBlocks, -1);
  std::vector<uint32_t> item_steps(kBlocks * kBlockSteps, 0), live_slots(kBlocks * kBlockSteps, 0);
  std::vector<gather::IndexUpdate> updates;
  ASSERT_OK(staging.Take(&updates));
  const gather::IndexArrays arrays{addresses.data(), next.data(), item_steps.data(),
                                   live_slots.data(), block_keys.data()};
  for (const gather::IndexUpdate& u : updates) gather::ApplyIndexUpdate(arrays, u);
  const gather::IndexView view{addresses.data(), next.data(), item_steps.data(), kBlocks,
                               kBlockSteps, live_slots.data(), block_keys.data()};

  constexpr int64_t kBatch = 3000;
  std::vector<uint64_t> out(kBatch * kL, 0xABABABABABABABABull), keys(kBatch, 0);
  std::vector<float> probabilities(kBatch, -1), weights(kBatch, -1);
  std::vector<uint8_t> mask(kBatch * kL, 0xAB);
  const GatherColumn column{8, 0, out.data()};
  GatherRequest r;
  r.batch = kBatch;
  r.sequence_length = kL;
  r.columns = {&column, 1};
  r.d_mask = mask.data();
  r.draw.live = static_cast<int64_t>(live.size());
  r.draw.seed = seed;
  r.draw.d_keys = keys.data();
  r.draw.d_probabilities = probabilities.data();
  r.draw.d_weights = weights.data();
  DeviceBlockIndex::Options options;
  options.num_blocks = kBlocks;
  options.block_steps = kBlockSteps;
  options.item_steps = true;
  options.uniform_draws = true;
  ASSERT_OK(ValidateGatherRequest(options, r));
  GatherLaunch launch;
  PlanGather(view, r, 0, 132, &launch);
  gather::RunGatherOnHost(launch.args, launch.grid, launch.threads);

  std::map<int64_t, int64_t> drawn;  // start -> count
  for (int64_t b = 0; b < kBatch; ++b) {
    ASSERT_EQ(keys[b] >> 24, 7u) << "window " << b;
    const int64_t start = static_cast<int64_t>(keys[b] & 0xFFFFFF);
    ASSERT_TRUE(std::count(starts.begin(), starts.end(), start)) << "start " << start;
    ++drawn[start];
    ASSERT_FLOAT_EQ(probabilities[b], 1.0f / live.size());
    ASSERT_EQ(weights[b], 1.0f);
    for (int64_t l = 0; l < kL; ++l) {
      const int64_t p = start + l;
      if (p < 6) {
        const uint64_t want = p < 4 ? 2000 + p : static_cast<uint64_t>(p - 4);
        ASSERT_EQ(out[b * kL + l], want) << "window " << b << " step " << l;
        ASSERT_EQ(mask[b * kL + l], 1);
      } else {
        ASSERT_EQ(out[b * kL + l], 0u) << "padded step";
        ASSERT_EQ(mask[b * kL + l], 0);
      }
    }
  }
  ASSERT_EQ(drawn.size(), live.size());
  for (const auto& [start, count] : drawn) {
    // 3000 / 6 = 500 each; the standard deviation is about 20.
    EXPECT_GT(count, 380) << "start " << start;
    EXPECT_LT(count, 620) << "start " << start;
  }
}

TEST(BlockGatherHostTest, ScatterThenGather) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const ScatterSpec& spec : ScatterSpecs()) {
    const ScatterWorld s = MakeScatterWorld(spec.num_blocks, spec.block_steps, spec.step_bytes,
                                            spec.n, spec.rows, spec.odd, rng);
    SCOPED_TRACE("scatter of " + std::to_string(spec.step_bytes.size()) + " columns, first " +
                 std::to_string(spec.step_bytes[0]) + " bytes, rows " + std::to_string(spec.rows));
    const std::vector<uint8_t> want = ExpectedScatter(s);
    for (int sms : {1, 132}) {
      std::vector<uint8_t> blocks = s.blocks.image;
      World w = RoundTripWorld(s, want);
      HostIndex index;
      MakeHostIndex(w, blocks.data(), &index);
      std::vector<const uint8_t*> src;
      for (const auto& col : s.src) src.push_back(col.data());
      std::vector<ScatterColumn> columns;
      ScatterRequest request;
      BuildScatter(s, s.slots.data(), src, &columns, &request);
      ASSERT_OK(ValidateScatterRequest(request));
      ScatterLaunch launch;
      for (int i = 0; i < LaunchCount(columns.size()); ++i) {
        PlanScatter(index.view(), request, i, sms, &launch);
        gather::RunScatterOnHost(launch.args, launch.grid, launch.threads);
      }
      EXPECT_EQ(FirstDifference(blocks, want), "") << "blocks after the scatter, " << sms << " SMs";
      w.blocks.image = blocks;
      ExpectRoundTrip(s, GatherOnHost(w, sms));
    }
  }
}

TEST_F(BlockGatherGpuTest, ScatterThenGather) {
  const uint64_t seed = testing_util::TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  for (const ScatterSpec& spec : ScatterSpecs()) {
    const ScatterWorld s = MakeScatterWorld(spec.num_blocks, spec.block_steps, spec.step_bytes,
                                            spec.n, spec.rows, spec.odd, rng);
    SCOPED_TRACE("scatter of " + std::to_string(spec.step_bytes.size()) + " columns, first " +
                 std::to_string(spec.step_bytes[0]) + " bytes, rows " + std::to_string(spec.rows));
    const std::vector<uint8_t> want = ExpectedScatter(s);
    for (bool pinned : {false, true}) {
      GpuArena arena;
      ASSERT_OK_AND_ASSIGN(uint8_t * blocks,
                           arena.Copy(s.blocks.image.data(), s.blocks.image.size(), pinned));
      World w = RoundTripWorld(s, want);
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceBlockIndex> index,
                           MakeIndex(w, blocks, stream.handle()));
      ASSERT_OK_AND_ASSIGN(uint8_t * d_slots,
                           arena.Copy(s.slots.data(), sizeof(int64_t) * s.slots.size()));
      std::vector<const uint8_t*> src;
      for (const auto& col : s.src) {
        ASSERT_OK_AND_ASSIGN(uint8_t * p, arena.Copy(col.data(), col.size()));
        src.push_back(p);
      }
      std::vector<ScatterColumn> columns;
      ScatterRequest request;
      BuildScatter(s, reinterpret_cast<const int64_t*>(d_slots), src, &columns, &request);
      ASSERT_OK(Scatter(*index, request, stream.handle()));
      ASSERT_OK(stream.Synchronize());
      std::vector<uint8_t> got(s.blocks.image.size());
      ASSERT_OK(ReadBack(blocks, &got));
      EXPECT_EQ(FirstDifference(got, want), "")
          << "blocks after the scatter, " << (pinned ? "pinned" : "device") << " memory";
      w.blocks.image = got;
      std::vector<Outputs> runs;
      ASSERT_OK(GatherOnGpu(w, pinned, stream.handle(), &runs));
      for (const Outputs& run : runs) ExpectRoundTrip(s, run);
    }
  }
}

// ---------------------------------------------------------- index staging

TEST(BlockIndexStagingTest, CoalescesAndSorts) {
  BlockIndexStaging staging(8, 4, true);
  EXPECT_FALSE(staging.dirty());
  int dummy[4];
  staging.SetNext(3, 5);
  staging.SetItemSteps(30, 2);
  staging.SetBlockAddress(3, &dummy[0]);
  staging.SetNext(3, -1);
  staging.SetNext(1, 2);
  staging.SetBlockAddress(3, &dummy[1]);
  staging.SetItemSteps(30, 7);
  staging.SetNext(3, 7);
  EXPECT_TRUE(staging.dirty());
  std::vector<gather::IndexUpdate> updates;
  ASSERT_OK(staging.Take(&updates));
  EXPECT_FALSE(staging.dirty());
  ASSERT_EQ(updates.size(), 4u);
  EXPECT_EQ(updates[0].target, gather::UpdateTarget(gather::kFieldAddress, 3));
  EXPECT_EQ(updates[0].value, reinterpret_cast<uintptr_t>(&dummy[1]));
  EXPECT_EQ(updates[1].target, gather::UpdateTarget(gather::kFieldNext, 1));
  EXPECT_EQ(updates[1].value, 2u);
  EXPECT_EQ(updates[2].target, gather::UpdateTarget(gather::kFieldNext, 3));
  EXPECT_EQ(updates[2].value, 7u);
  EXPECT_EQ(updates[3].target, gather::UpdateTarget(gather::kFieldItemSteps, 30));
  EXPECT_EQ(updates[3].value, 7u);

  // Applied to arrays, in any order, they give the last value of each entry.
  std::vector<uint64_t> addresses(8, 0);
  std::vector<int64_t> next(8, -1);
  std::vector<uint32_t> steps(32, 0);
  const gather::IndexArrays arrays{addresses.data(), next.data(), steps.data()};
  std::reverse(updates.begin(), updates.end());
  for (const auto& u : updates) gather::ApplyIndexUpdate(arrays, u);
  EXPECT_EQ(addresses[3], reinterpret_cast<uintptr_t>(&dummy[1]));
  EXPECT_EQ(next, (std::vector<int64_t>{-1, 2, -1, 7, -1, -1, -1, -1}));
  EXPECT_EQ(steps[30], 7u);

  ASSERT_OK(staging.Take(&updates));
  EXPECT_TRUE(updates.empty());
}

TEST(BlockIndexStagingTest, DropsChangesThatBreakARequirement) {
  BlockIndexStaging staging(8, 4, false);
  staging.SetNext(8, 0);
  EXPECT_TRUE(staging.dirty());
  staging.SetNext(2, 3);
  staging.SetNext(2, -2);
  staging.SetBlockAddress(-1, nullptr);
  staging.SetItemSteps(0, 1);
  std::vector<gather::IndexUpdate> updates;
  const Status s = staging.Take(&updates);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("4 staged change(s) dropped"));
  EXPECT_THAT(s.message(), HasSubstr("SetNext(block 8, next 0)"));
  ASSERT_EQ(updates.size(), 1u);  // the valid change still goes
  EXPECT_EQ(updates[0].target, gather::UpdateTarget(gather::kFieldNext, 2));
  EXPECT_EQ(updates[0].value, 3u);
  EXPECT_FALSE(staging.dirty());
  ASSERT_OK(staging.Take(&updates));

  BlockIndexStaging with_steps(2, 4, true);
  with_steps.SetItemSteps(8, 1);
  const Status t = with_steps.Take(&updates);
  EXPECT_THAT(t.message(), HasSubstr("SetItemSteps(slot 8): slot is outside [0, 8)"));
  with_steps.SetItemSteps(0, 1);
  BlockIndexStaging without(2, 4, false);
  without.SetItemSteps(0, 1);
  EXPECT_THAT(without.Take(&updates).message(), HasSubstr("keeps no item steps"));
}

TEST_F(BlockGatherGpuTest, FlushReportsDroppedChangesAndAppliesTheRest) {
  DeviceBlockIndex::Options options;
  options.num_blocks = 4;
  options.block_steps = 2;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceBlockIndex> index, DeviceBlockIndex::Create(options));
  EXPECT_FALSE(index->dirty());
  ASSERT_OK(index->Flush(nullptr));  // nothing staged
  // One block of two 4-byte steps, read through the index.
  const uint32_t values[2] = {0x11223344u, 0x55667788u};
  GpuArena arena;
  ASSERT_OK_AND_ASSIGN(uint8_t * block, arena.Copy(values, sizeof(values)));
  index->SetBlockAddress(1, block);
  index->SetNext(1, 9);       // dropped
  index->SetItemSteps(0, 1);  // dropped: no item steps kept
  const Status s = index->Flush(nullptr);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("DeviceBlockIndex::Flush"));
  EXPECT_THAT(s.message(), HasSubstr("2 staged change(s) dropped"));
  EXPECT_FALSE(index->dirty());
  const int64_t slots[2] = {3, 2};  // block 1, steps 1 and 0
  const uint32_t steps[2] = {1, 2};
  ASSERT_OK_AND_ASSIGN(uint8_t * d_slots, arena.Copy(slots, sizeof(slots)));
  ASSERT_OK_AND_ASSIGN(uint8_t * d_steps, arena.Copy(steps, sizeof(steps)));
  ASSERT_OK_AND_ASSIGN(uint8_t * d_out, arena.Poisoned(16));
  const GatherColumn column{4, 0, d_out};
  GatherRequest request;
  request.batch = 2;
  request.sequence_length = 2;
  request.slots = reinterpret_cast<const int64_t*>(d_slots);
  request.steps = reinterpret_cast<const uint32_t*>(d_steps);
  request.columns = {&column, 1};
  ASSERT_OK(Gather(*index, request, nullptr));
  uint32_t out[4];
  ASSERT_OK(CopyFromDevice(0, out, d_out, sizeof(out)));
  // Window 0: step 1 of block 1, then padding. Window 1: steps 0 and 1.
  EXPECT_EQ(out[0], values[1]);
  EXPECT_EQ(out[1], 0u);
  EXPECT_EQ(out[2], values[0]);
  EXPECT_EQ(out[3], values[1]);
}

// ------------------------------------------------------- argument checks

// An index Gather and Scatter did not make: checks run against its options.
class FakeIndex : public DeviceBlockIndex {
 public:
  explicit FakeIndex(bool item_steps) {
    options_.num_blocks = 4;
    options_.block_steps = 4;
    options_.item_steps = item_steps;
  }
  void SetBlockAddress(int64_t, const void*) override {}
  void SetNext(int64_t, int64_t) override {}
  void SetItemSteps(int64_t, uint32_t) override {}
  void SetBlockKey(int64_t, uint64_t) override {}
  void SetLive(int64_t, int64_t) override {}
  bool dirty() const override { return false; }
  Status Flush(void*) override { return Status::OK(); }
  const Options& options() const override { return options_; }

 private:
  Options options_;
};

void ExpectInvalid(const Status& s, const std::string& names) {
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(names)) << s.ToString();
}

// A well-formed request to `call` with a FakeIndex passes every argument
// check: with CUDA it stops at the index check, without at NotSupported.
void ExpectPastArgumentChecks(const Status& s, const std::string& call) {
  if (BuiltWithCuda()) {
    ExpectInvalid(s, call + ": the index was not made by DeviceBlockIndex::Create");
  } else {
    EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(call + ": built without CUDA"));
  }
}

TEST(BlockGatherArgumentsTest, GatherNamesTheBadArgument) {
  FakeIndex index(false);
  const int64_t slots[1] = {0};
  const uint32_t steps[1] = {1};
  uint8_t out[64];
  uint8_t small[8];
  const GatherColumn good{4, 0, out};
  const auto valid = [&] {
    GatherRequest r;
    r.batch = 1;
    r.sequence_length = 2;
    r.slots = slots;
    r.steps = steps;
    r.columns = {&good, 1};
    return r;
  };
  GatherRequest r = valid();
  r.batch = 0;
  ExpectInvalid(Gather(index, r, nullptr), "request.batch 0 is < 1");
  r = valid();
  r.sequence_length = -3;
  ExpectInvalid(Gather(index, r, nullptr), "request.sequence_length -3 is < 1");
  r = valid();
  r.slots = nullptr;
  ExpectInvalid(Gather(index, r, nullptr),
                "request.slots is null, which draws uniformly: that needs request.draw.live >= 1 "
                "(it is 0)");
  r = valid();
  r.steps = nullptr;
  ExpectInvalid(Gather(index, r, nullptr), "request.steps is null and the index keeps no item");
  r = valid();
  const SmallCopy copies[5] = {{small, small, 1},
                               {small, small, 1},
                               {small, small, 1},
                               {small, small, 1},
                               {small, small, 1}};
  r.copies = {copies, 5};
  ExpectInvalid(Gather(index, r, nullptr), "request.copies has 5 entries; at most 4");
  const SmallCopy null_src[2] = {{small, small, 0}, {nullptr, small, 3}};
  r.copies = {null_src, 2};
  ExpectInvalid(Gather(index, r, nullptr), "request.copies[1].src is null");
  const SmallCopy null_dst[1] = {{small, nullptr, 3}};
  r.copies = {null_dst, 1};
  ExpectInvalid(Gather(index, r, nullptr), "request.copies[0].dst is null");
  r = valid();
  const GatherColumn no_out[2] = {good, {4, 0, nullptr}};
  r.columns = {no_out, 2};
  ExpectInvalid(Gather(index, r, nullptr), "request.columns[1].d_out is null");
  const GatherColumn empty[1] = {{0, 0, out}};
  r.columns = {empty, 1};
  ExpectInvalid(Gather(index, r, nullptr), "request.columns[0].step_bytes is 0");
  const GatherColumn huge[1] = {{size_t{1} << 61, 0, out}};
  r.columns = {huge, 1};
  r.batch = 4;
  ExpectInvalid(Gather(index, r, nullptr), "overflows");
  r = valid();
  r.batch = int64_t{1} << 30;
  const GatherColumn wide[1] = {{4096, 0, out}};
  r.columns = {wide, 1};
  ExpectInvalid(Gather(index, r, nullptr), "needs more than 2^31 - 2 CTAs");

  // Steps may come from an index that keeps them.
  FakeIndex with_steps(true);
  r = valid();
  r.steps = nullptr;
  ExpectPastArgumentChecks(Gather(with_steps, r, nullptr), "Gather");
}

TEST(BlockGatherArgumentsTest, ScatterNamesTheBadArgument) {
  FakeIndex index(false);
  const int64_t slots[1] = {0};
  uint8_t src[64];
  const ScatterColumn good{4, 0, src};
  const auto valid = [&] {
    ScatterRequest r;
    r.n = 1;
    r.slots = slots;
    r.columns = {&good, 1};
    return r;
  };
  ScatterRequest r = valid();
  r.n = 0;
  ExpectInvalid(Scatter(index, r, nullptr), "Scatter: request.n 0 is < 1");
  r = valid();
  r.slots = nullptr;
  ExpectInvalid(Scatter(index, r, nullptr), "Scatter: request.slots is null");
  r = valid();
  r.rows = 0;
  ExpectInvalid(Scatter(index, r, nullptr), "Scatter: request.rows 0 is < 1");
  r = valid();
  r.rows = int64_t{1} << 61;  // 4-byte rows: 2^63 bytes
  ExpectInvalid(Scatter(index, r, nullptr),
                "request.n * request.rows * the columns' step_bytes overflows");
  const ScatterColumn no_src[2] = {good, {4, 0, nullptr}};
  r = valid();
  r.columns = {no_src, 2};
  ExpectInvalid(Scatter(index, r, nullptr), "request.columns[1].d_src is null");
  const ScatterColumn empty[1] = {{0, 0, src}};
  r.columns = {empty, 1};
  ExpectInvalid(Scatter(index, r, nullptr), "request.columns[0].step_bytes is 0");
  const ScatterColumn huge[1] = {{size_t{1} << 60, 0, src}};
  r.columns = {huge, 1};
  r.n = 8;
  ExpectInvalid(Scatter(index, r, nullptr), "overflows");
  r = valid();
  ExpectPastArgumentChecks(Scatter(index, r, nullptr), "Scatter");
}

TEST(BlockGatherArgumentsTest, CreateNamesTheBadOption) {
  DeviceBlockIndex::Options o;
  o.num_blocks = 0;
  o.block_steps = 4;
  ExpectInvalid(DeviceBlockIndex::Create(o).status(), "options.num_blocks 0 is < 1");
  o.num_blocks = 4;
  o.block_steps = 0;
  ExpectInvalid(DeviceBlockIndex::Create(o).status(), "options.block_steps 0 is < 1");
  o.block_steps = (int64_t{1} << 38) + 1;
  ExpectInvalid(DeviceBlockIndex::Create(o).status(), "options.num_blocks * options.block_steps");
  o.block_steps = 4;
  o.device = -1;
  ExpectInvalid(DeviceBlockIndex::Create(o).status(), "options.device -1 is < 0");
  o.device = 0;
  std::string why;
  const auto made = DeviceBlockIndex::Create(o);
  if (HaveGpu(&why)) {
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    o.device = 1 << 20;
    ExpectInvalid(DeviceBlockIndex::Create(o).status(), "options.device 1048576 is outside");
  } else {
    EXPECT_EQ(made.status().code(), Status::Code::kNotSupported) << made.status().ToString();
    EXPECT_THAT(made.status().message(), HasSubstr("DeviceBlockIndex::Create"));
    if (!BuiltWithCuda()) {
      EXPECT_THAT(made.status().message(), HasSubstr("built without CUDA"));
    }
  }
}

// ------------------------------------------------------------ device memory

TEST(DeviceMemoryTest, ArgumentsAreCheckedBeforeCuda) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA: every call is NotSupported";
  uint8_t host[8] = {};
  ExpectInvalid(AllocatePinned(8, nullptr), "AllocatePinned: host_ptr is null");
  ExpectInvalid(AllocateDevice(0, 8, nullptr), "AllocateDevice: device_ptr is null");
  ExpectInvalid(CopyToDevice(0, nullptr, host, 8), "CopyToDevice: dst is null");
  ExpectInvalid(CopyFromDevice(0, host, nullptr, 8), "CopyFromDevice: src is null");
  EXPECT_OK(CopyToDevice(0, nullptr, nullptr, 0));  // nothing to copy
  void* p = host;
  EXPECT_OK(AllocatePinned(0, &p));
  EXPECT_EQ(p, nullptr);
}

TEST(DeviceMemoryTest, WithoutGpuEveryCallSaysWhy) {
  std::string why;
  if (HaveGpu(&why)) GTEST_SKIP() << "a GPU is present";
  uint8_t host[8] = {};
  void* p = host;
  const auto expect = [&](const Status& s, const char* call) {
    EXPECT_EQ(s.code(), Status::Code::kNotSupported) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(call));
    EXPECT_THAT(s.message(), HasSubstr(BuiltWithCuda() ? "no usable GPU" : "built without CUDA"));
  };
  expect(AllocatePinned(64, &p), "AllocatePinned");
  EXPECT_EQ(p, nullptr);
  p = host;
  expect(AllocateDevice(0, 64, &p), "AllocateDevice");
  EXPECT_EQ(p, nullptr);
  expect(CopyToDevice(0, host, host, 8), "CopyToDevice");
  expect(CopyFromDevice(0, host, host, 8), "CopyFromDevice");
  expect(DeviceEvent::Create(0).status(), "DeviceEvent::Create");
  FreePinned(nullptr);
  FreeDevice(0, nullptr);
}

TEST(DeviceMemoryTest, CopiesRoundTripThroughDeviceAndPinnedMemory) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  const uint64_t seed = testing_util::TestSeed();
  std::mt19937_64 rng(seed);
  for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096 + 4}, (size_t{3} << 20) + 5}) {
    SCOPED_TRACE(std::to_string(bytes) + " bytes, REPLAYDB_TEST_SEED=" + std::to_string(seed));
    std::vector<uint8_t> src(bytes);
    for (auto& x : src) x = static_cast<uint8_t>(rng());
    void* d = nullptr;
    void* pinned = nullptr;
    ASSERT_OK(AllocateDevice(0, bytes, &d));
    ASSERT_OK(AllocatePinned(bytes, &pinned));
    // Pageable -> device -> pageable.
    ASSERT_OK(CopyToDevice(0, d, src.data(), bytes));
    std::vector<uint8_t> back(bytes, kPoison);
    ASSERT_OK(CopyFromDevice(0, back.data(), d, bytes));
    EXPECT_EQ(FirstDifference(back, src), "") << "through device memory";
    // Device -> pinned (a device-addressable destination), read on the host.
    std::memset(pinned, kPoison, bytes);
    ASSERT_OK(CopyFromDevice(0, pinned, d, bytes));
    EXPECT_EQ(std::memcmp(pinned, src.data(), bytes), 0) << "device to pinned";
    // Pinned -> device -> pageable, after poisoning the device copy.
    std::vector<uint8_t> poison(bytes, kPoison);
    ASSERT_OK(CopyToDevice(0, d, poison.data(), bytes));
    ASSERT_OK(CopyToDevice(0, d, pinned, bytes));
    std::fill(back.begin(), back.end(), kPoison);
    ASSERT_OK(CopyFromDevice(0, back.data(), d, bytes));
    EXPECT_EQ(FirstDifference(back, src), "") << "pinned to device";
    FreePinned(pinned);
    FreeDevice(0, d);
  }
}

TEST(DeviceMemoryTest, FailuresNameTheBytesAndDevice) {
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) GTEST_SKIP() << "no GPU: " << why;
  void* p = nullptr;
  const size_t huge = size_t{1} << 60;
  const Status d = AllocateDevice(0, huge, &p);
  EXPECT_EQ(d.code(), Status::Code::kResourceExhausted) << d.ToString();
  EXPECT_THAT(d.message(), HasSubstr(std::to_string(huge) + " bytes on device 0"));
  EXPECT_EQ(p, nullptr);
  const Status h = AllocatePinned(huge, &p);
  EXPECT_EQ(h.code(), Status::Code::kResourceExhausted) << h.ToString();
  EXPECT_THAT(h.message(), HasSubstr(std::to_string(huge) + " bytes"));
  ExpectInvalid(AllocateDevice(count, 8, &p),
                "AllocateDevice: device " + std::to_string(count) + " is outside");
  ExpectInvalid(DeviceEvent::Create(-1).status(), "DeviceEvent::Create: device -1 is outside");
}

// ------------------------------------------------------------------- events

TEST(DeviceEventTest, AnInvalidEventRefusesEveryCall) {
  DeviceEvent e;
  EXPECT_FALSE(e.valid());
  const Status::Code want =
      BuiltWithCuda() ? Status::Code::kFailedPrecondition : Status::Code::kNotSupported;
  EXPECT_EQ(e.Record(nullptr).code(), want);
  EXPECT_EQ(e.MakeStreamWait(nullptr).code(), want);
  EXPECT_EQ(e.Done().status().code(), want);
  EXPECT_EQ(e.Synchronize().code(), want);
  if (BuiltWithCuda()) {
    EXPECT_THAT(e.Record(nullptr).message(), HasSubstr("DeviceEvent::Record"));
  }
}

// A gather slow enough (about 64 MiB read from pinned memory over PCIe) to
// still run when the host checks on it.
struct SlowGather {
  static constexpr int64_t kBatch = 256;
  static constexpr int64_t kSteps = 32;
  static constexpr size_t kStepBytes = 8192;

  Status Init(GpuArena* arena) {
    DeviceBlockIndex::Options options;
    options.num_blocks = kBatch;
    options.block_steps = kSteps;
    REPLAYDB_ASSIGN_OR_RETURN(index, DeviceBlockIndex::Create(options));
    const size_t block_bytes = kSteps * kStepBytes;
    REPLAYDB_ASSIGN_OR_RETURN(uint8_t * blocks, arena->Pinned(kBatch * block_bytes));
    std::memset(blocks, 0x5A, kBatch * block_bytes);
    std::vector<int64_t> slots(kBatch);
    std::vector<uint32_t> steps(kBatch, kSteps);
    for (int64_t b = 0; b < kBatch; ++b) {
      index->SetBlockAddress(b, blocks + b * block_bytes);
      slots[b] = b * kSteps;
    }
    REPLAYDB_RETURN_IF_ERROR(index->Flush(nullptr));
    REPLAYDB_ASSIGN_OR_RETURN(d_slots, arena->Copy(slots.data(), sizeof(int64_t) * kBatch));
    REPLAYDB_ASSIGN_OR_RETURN(d_steps, arena->Copy(steps.data(), sizeof(uint32_t) * kBatch));
    REPLAYDB_ASSIGN_OR_RETURN(d_out, arena->Device(kBatch * block_bytes));
    return DeviceSynchronize(0);
  }
  Status Run(void* stream) {
    const GatherColumn column{kStepBytes, 0, d_out};
    GatherRequest r;
    r.batch = kBatch;
    r.sequence_length = kSteps;
    r.slots = reinterpret_cast<const int64_t*>(d_slots);
    r.steps = reinterpret_cast<const uint32_t*>(d_steps);
    r.columns = {&column, 1};
    return Gather(*index, r, stream);
  }

  std::unique_ptr<DeviceBlockIndex> index;
  uint8_t* d_slots = nullptr;
  uint8_t* d_steps = nullptr;
  uint8_t* d_out = nullptr;
};

TEST(DeviceEventTest, RecordDoneSynchronize) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  ASSERT_OK_AND_ASSIGN(DeviceEvent e, DeviceEvent::Create(0));
  ASSERT_TRUE(e.valid());
  ASSERT_OK_AND_ASSIGN(bool done, e.Done());
  EXPECT_TRUE(done) << "a never-recorded event is complete";
  ASSERT_OK(e.Synchronize());
  ASSERT_OK(e.MakeStreamWait(nullptr));

  GpuArena arena;
  SlowGather slow;
  ASSERT_OK(slow.Init(&arena));
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  for (int i = 0; i < 4; ++i) ASSERT_OK(slow.Run(stream.handle()));
  ASSERT_OK(e.Record(stream.handle()));
  ASSERT_OK_AND_ASSIGN(done, e.Done());
  // With CUDA_LAUNCH_BLOCKING=1 (tools/scripts/gpu-run.sh's racecheck step) every
  // launch has finished when it returns: nothing is left to be in flight.
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (blocking == nullptr || std::string_view(blocking) != "1") {
    EXPECT_FALSE(done) << "four 64 MiB zero-copy gathers finished before the host looked";
  }
  ASSERT_OK(e.Synchronize());
  ASSERT_OK_AND_ASSIGN(done, e.Done());
  EXPECT_TRUE(done);
  // Done's not-ready answer leaves no error behind for the next launch check.
  ASSERT_OK(slow.Run(stream.handle()));
  ASSERT_OK(stream.Synchronize());

  DeviceEvent moved = std::move(e);
  EXPECT_TRUE(moved.valid());
  EXPECT_FALSE(e.valid());  // NOLINT(bugprone-use-after-move): moved from on purpose
  ASSERT_OK_AND_ASSIGN(done, moved.Done());
  EXPECT_TRUE(done);
}

// AccessEpochs keys in-flight accesses by stream id: ids must tell streams
// apart even when a new stream reuses a destroyed one's handle.
TEST(DeviceMemoryTest, StreamIdsAreStableAndNeverReused) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
    ASSERT_OK_AND_ASSIGN(uint64_t id, StreamId(stream.handle()));
    ASSERT_OK_AND_ASSIGN(uint64_t again, StreamId(stream.handle()));
    EXPECT_EQ(id, again);
    ids.push_back(id);
  }  // each stream is destroyed before the next is made: handles may repeat
  ASSERT_OK_AND_ASSIGN(uint64_t legacy, StreamId(nullptr));
  ids.push_back(legacy);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a stream id repeats";
}

// Stream B waits (on the device) for a scatter queued on stream A behind slow
// work, then gathers what the scatter wrote.
TEST(DeviceEventTest, MakeStreamWaitOrdersStreams) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  GpuArena arena;
  SlowGather slow;
  ASSERT_OK(slow.Init(&arena));
  ASSERT_OK_AND_ASSIGN(DeviceStream a, DeviceStream::Create(0));
  ASSERT_OK_AND_ASSIGN(DeviceStream b, DeviceStream::Create(0));
  ASSERT_OK_AND_ASSIGN(DeviceEvent scattered, DeviceEvent::Create(0));

  constexpr size_t kBytes = 4096;
  std::vector<uint8_t> fresh(kBytes);
  for (size_t i = 0; i < kBytes; ++i) fresh[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_OK_AND_ASSIGN(uint8_t * d_fresh, arena.Copy(fresh.data(), kBytes));
  const int64_t slot[1] = {5 * SlowGather::kSteps + 3};
  ASSERT_OK_AND_ASSIGN(uint8_t * d_slot, arena.Copy(slot, sizeof(slot)));
  const uint32_t one[1] = {1};
  ASSERT_OK_AND_ASSIGN(uint8_t * d_one, arena.Copy(one, sizeof(one)));
  ASSERT_OK_AND_ASSIGN(uint8_t * d_out, arena.Poisoned(kBytes));

  for (int i = 0; i < 4; ++i) ASSERT_OK(slow.Run(a.handle()));
  const ScatterColumn in{kBytes, 0, d_fresh};
  ScatterRequest s;
  s.n = 1;
  s.slots = reinterpret_cast<const int64_t*>(d_slot);
  s.columns = {&in, 1};
  ASSERT_OK(Scatter(*slow.index, s, a.handle()));
  ASSERT_OK(scattered.Record(a.handle()));
  ASSERT_OK(scattered.MakeStreamWait(b.handle()));
  const GatherColumn out{kBytes, 0, d_out};
  GatherRequest g;
  g.batch = 1;
  g.sequence_length = 1;
  g.slots = reinterpret_cast<const int64_t*>(d_slot);
  g.steps = reinterpret_cast<const uint32_t*>(d_one);
  g.columns = {&out, 1};
  ASSERT_OK(Gather(*slow.index, g, b.handle()));
  ASSERT_OK(b.Synchronize());
  std::vector<uint8_t> got(kBytes);
  ASSERT_OK(CopyFromDevice(0, got.data(), d_out, kBytes));
  EXPECT_EQ(FirstDifference(got, fresh), "") << "stream b did not wait for the scatter";
  ASSERT_OK(a.Synchronize());
}

// Many flushes queued behind slow work on one stream (more than the index
// keeps upload buffers, so some flush must wait for one): each applies in
// order, and the gather behind them sees the last.
TEST(DeviceEventTest, FlushesQueueInOrderBehindABusyStream) {
  std::string why;
  if (!HaveGpu(&why)) GTEST_SKIP() << "no GPU: " << why;
  GpuArena arena;
  SlowGather slow;
  ASSERT_OK(slow.Init(&arena));
  ASSERT_OK_AND_ASSIGN(DeviceStream stream, DeviceStream::Create(0));
  constexpr size_t kBytes = 256;
  std::vector<std::vector<uint8_t>> contents;
  std::vector<uint8_t*> buffers;
  for (int i = 0; i < 20; ++i) {
    contents.emplace_back(kBytes, static_cast<uint8_t>(i + 1));
    ASSERT_OK_AND_ASSIGN(uint8_t * p, arena.Copy(contents.back().data(), kBytes));
    buffers.push_back(p);
  }
  const int64_t slot[1] = {7 * SlowGather::kSteps};
  const uint32_t one[1] = {1};
  ASSERT_OK_AND_ASSIGN(uint8_t * d_slot, arena.Copy(slot, sizeof(slot)));
  ASSERT_OK_AND_ASSIGN(uint8_t * d_one, arena.Copy(one, sizeof(one)));
  ASSERT_OK_AND_ASSIGN(uint8_t * d_out, arena.Poisoned(kBytes));
  const GatherColumn out{kBytes, 0, d_out};
  GatherRequest g;
  g.batch = 1;
  g.sequence_length = 1;
  g.slots = reinterpret_cast<const int64_t*>(d_slot);
  g.steps = reinterpret_cast<const uint32_t*>(d_one);
  g.columns = {&out, 1};
  for (int i = 0; i < 4; ++i) ASSERT_OK(slow.Run(stream.handle()));
  for (size_t i = 0; i < buffers.size(); ++i) {
    slow.index->SetBlockAddress(7, buffers[i]);
    ASSERT_OK(slow.index->Flush(stream.handle()));
  }
  ASSERT_OK(Gather(*slow.index, g, stream.handle()));
  ASSERT_OK(stream.Synchronize());
  std::vector<uint8_t> got(kBytes);
  ASSERT_OK(CopyFromDevice(0, got.data(), d_out, kBytes));
  EXPECT_EQ(FirstDifference(got, contents.back()), "") << "the last flush did not win";
}

}  // namespace
}  // namespace replaydb::kernels
