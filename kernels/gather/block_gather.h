// Gather of sampled windows out of hot-tier blocks, and scatter of a vector
// writer's steps into them, by CUDA kernels. Plain C++: host code includes
// this, never a CUDA header. Built from block_gather.cu with nvcc, otherwise
// from block_gather_nocuda.cc (every call returns NotSupported).
//
// Model (engine/table/table_layout.h): the hot tier is `num_blocks` blocks of
// `block_steps` steps; column c of step s of a block lives at
// block + column offset + s * column step bytes. A step position in the tier
// is a *slot*: block * block_steps + step-in-block. A trajectory is a chain
// of blocks; an item is a window of L steps starting at a slot, of which the
// first `steps` (1..L) are real and the rest padding.
//
// Blocks live in device memory or in pinned mapped host memory, which
// kernels read and write over PCIe (zero-copy); both are just addresses
// here.
#ifndef REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_H_
#define REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "replaydb/status.h"

namespace replaydb::kernels {

// The device's copy of what the kernels need to follow a window: each
// block's address, each block's successor in its trajectory, and optionally
// each slot's real window length (for windows drawn on the device, whose
// lengths the host never sees). Host calls stage changes in host memory;
// Flush applies them on a stream, in order.
//
// Thread safety: not thread-safe; the owning table serialises calls.
class DeviceBlockIndex {
 public:
  struct Options {
    int device = 0;
    // REQUIRES: num_blocks >= 1, block_steps >= 1,
    // num_blocks * block_steps <= 2^40.
    int64_t num_blocks = 0;
    int64_t block_steps = 0;
    // Keep item_steps per slot (4 bytes of device memory per slot).
    bool item_steps = false;
    // Keep what uniform draws on the device need: the live items' slots,
    // densely (SetLive; 4 bytes per slot), and each block's first item key
    // (SetBlockKey; 8 bytes per block). REQUIRES: item_steps,
    // num_blocks * block_steps < 2^32.
    bool uniform_draws = false;
  };

  // InvalidArgument naming the option that breaks a REQUIRES (checked
  // first, also without a GPU); NotSupported without a usable GPU;
  // ResourceExhausted when device memory runs out (naming the bytes).
  // Until set, a block's address is null and its next -1, and a slot's
  // item steps 0 (a window of no real steps).
  static Result<std::unique_ptr<DeviceBlockIndex>> Create(const Options& options);
  virtual ~DeviceBlockIndex() = default;

  // ---- staged until the next Flush ----
  // A change that breaks its REQUIRES is dropped, and the next Flush
  // returns InvalidArgument naming the first such change (after applying
  // the others). Repeated changes of one entry: the last one counts.
  // REQUIRES: 0 <= block < num_blocks; `address` device-addressable.
  virtual void SetBlockAddress(int64_t block, const void* address) = 0;
  // The block after `block` in its trajectory (-1: none).
  // REQUIRES: -1 <= next < num_blocks.
  virtual void SetNext(int64_t block, int64_t next) = 0;
  // The real steps (1..L) of the window starting at `slot`.
  // REQUIRES: options.item_steps, 0 <= slot < num_blocks * block_steps.
  virtual void SetItemSteps(int64_t slot, uint32_t steps) = 0;
  // The item key of `block`'s first step (trajectory id << 24 | the step's
  // place in its trajectory). REQUIRES: options.uniform_draws.
  virtual void SetBlockKey(int64_t block, uint64_t key) = 0;
  // Live item number `position` (0 <= position < the live count a Gather
  // draws from) starts at `slot`. REQUIRES: options.uniform_draws.
  virtual void SetLive(int64_t position, int64_t slot) = 0;
  // True when changes are staged.
  virtual bool dirty() const = 0;

  // Applies the staged changes on `stream`. The host buffers are free for
  // new changes when this returns. With nothing staged: nothing (OK).
  virtual Status Flush(void* stream) = 0;

  virtual const Options& options() const = 0;
};

struct GatherColumn {
  size_t step_bytes = 0;    // bytes of one step of the column (>= 1)
  size_t block_offset = 0;  // where the column's region starts in a block
  void* d_out = nullptr;    // device output [batch, L, step_bytes]
};

// A small array copied from device-readable memory (e.g. pinned host
// staging) to device memory as part of a Gather launch.
struct SmallCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

struct GatherRequest {
  int64_t batch = 0;            // B >= 1
  int64_t sequence_length = 0;  // L >= 1
  // [B] device-readable: the slot where window b starts; < 0: no item (the
  // window is all padding, mask 0). Null: draw uniformly (see `draw`).
  const int64_t* slots = nullptr;
  // When slots is null: window b starts at live item number
  // hash(seed, b) mod `live` (an index with uniform_draws and item_steps,
  // flushed with `live` items), and its key (its block's key plus its place
  // in the block), probability 1 / live and importance weight 1 go to these
  // device arrays, each optional.
  // With lanes > 1 (a vector table's environments), each live item stands
  // for `lanes` rows that follow its slot: the draw is row
  // hash(seed, b) mod (live * lanes), i.e. live item row / lanes, slot + row
  // % lanes; the row's real steps are read at the item's slot, and its
  // probability is 1 / (live * lanes).
  struct UniformDraw {
    int64_t live = 0;
    int64_t lanes = 1;
    uint64_t seed = 0;
    uint64_t* d_keys = nullptr;
    float* d_probabilities = nullptr;
    float* d_weights = nullptr;
  } draw;
  // [B] device-readable real steps of each window (1..L); null: read from
  // the index's item_steps (which it must keep).
  const uint32_t* steps = nullptr;
  // Host memory; copied into the launch. Any number of columns.
  std::span<const GatherColumn> columns;
  // Optional [B * L] device output: 1 for a real step, 0 for padding.
  uint8_t* d_mask = nullptr;
  // Optional small copies (at most 4) done by the same launch.
  std::span<const SmallCopy> copies;
  // Lets the launch start while the kernel before it on `stream` still runs
  // (programmatic dependent launch, compute capability >= 9.0): it reads
  // the index, and `slots` and `steps`, at once, and waits for that kernel
  // only before its first write and its first read of a block. Set it only
  // when that kernel writes none of those: the index flushed on another
  // stream that `stream` waits for through an event, `slots` and `steps`
  // written by the host (pinned memory) or absent.
  bool overlap_prior = false;
  // With overlap_prior: the launch also loads the first bytes it copies out
  // of the blocks before that wait (their latency then overlaps the kernel
  // before it). Set it only when that kernel writes no block either (it is
  // not a scatter).
  bool early_reads = false;
};

// Writes window b's steps 0..steps-1 of every column to
// d_out[b, 0..steps-1] and zeros to the padded steps after them. Uses
// 16-byte accesses where the step size, offsets and output addresses allow
// (8-, 4-, 2-, 1-byte otherwise). Queues the work on `stream` and returns:
// one launch per 16 columns (the mask and copies go with the first).
// REQUIRES: the index flushed (on `stream`, or on a stream `stream` waits
// for) after the blocks and items read were set.
// InvalidArgument naming the argument for a malformed request (checked
// before any CUDA call) or an index not made by DeviceBlockIndex::Create.
// What the device finds is not checked but never read past: a slot outside
// [0, num_blocks * block_steps) is no item; steps are capped at L (0: no
// real step); steps in blocks past the end of the chain, or in a block whose
// address is null, read as zeros (mask 1).
// Tests make launches fail with kernels::LaunchFaults (launch_faults.h).
Status Gather(const DeviceBlockIndex& index, const GatherRequest& request, void* stream);

struct ScatterColumn {
  size_t step_bytes = 0;  // >= 1
  size_t block_offset = 0;
  // Device-readable input [n, step_bytes]: device memory, or mapped pinned
  // host memory (read over the bus).
  const void* d_src = nullptr;
};

struct ScatterRequest {
  int64_t n = 0;  // environments, >= 1
  // [n] device-readable: the slot receiving environment i's step; < 0: skip.
  const int64_t* slots = nullptr;
  std::span<const ScatterColumn> columns;  // host memory, any number
  // Steps per entry (>= 1): entry i of each column is `rows` steps,
  // d_src[i] being [rows, step_bytes], written to slots slots[i] ..
  // slots[i] + rows - 1, which must lie in one block (a vector table's
  // step, its environments' rows seen as steps of one row each).
  int64_t rows = 1;
};

// Writes d_src[i] of every column to its place at slot slots[i] (and the
// rows - 1 slots after it). Queues the work on `stream` and returns (one
// launch per 16 columns). REQUIRES: the destination blocks' addresses
// flushed; runs of slots that do not overlap. A slot outside
// [0, num_blocks * block_steps), in a block whose address is null, or whose
// run would leave its block, is skipped. InvalidArgument as for Gather.
Status Scatter(const DeviceBlockIndex& index, const ScatterRequest& request, void* stream);

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_GATHER_BLOCK_GATHER_H_
