// How a table's steps are laid out in hot-tier blocks, and the size limits.
// A vector table's step is all its environments' rows (StoredColumns).
//
// A block holds `block_steps` consecutive steps of one trajectory, column by
// column (structure of arrays): column c occupies bytes
// [column_offset[c], column_offset[c] + block_steps * column_bytes[c]) of the
// block, step s of the block at column_offset[c] + s * column_bytes[c]. A
// window of L steps is then one contiguous run per column per block it
// touches, which is what the gather copies. Column regions start at
// multiples of kColumnAlignment bytes, so that kernels can use 16-byte
// accesses when the step size allows.
#ifndef REPLAYDB_ENGINE_TABLE_TABLE_LAYOUT_H_
#define REPLAYDB_ENGINE_TABLE_TABLE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "replaydb/options.h"

namespace replaydb::engine {

// Limits that keep sizes within 64-bit arithmetic and sane allocations
// (with kMaxStepBytes of replaydb/options.h, 256 MiB per step; the public
// header documents these in words).
inline constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;  // 1 GiB per block
inline constexpr int64_t kMaxBlockSteps = 65536;
inline constexpr int64_t kMaxBlocks = int64_t{1} << 28;
inline constexpr int64_t kMaxTimesSampledLimit = int64_t{1} << 31;
inline constexpr size_t kColumnAlignment = 16;

// Hot-tier capacity in blocks for a spec whose sizes are positive; never
// overflows (a step size that does saturates, giving 0 blocks).
int64_t CapacityBlocks(const TableSpec& spec);

// The columns a step of `spec` stores: its columns, or in a vector table
// (lanes > 1) each with shape [lanes, shape...]. REQUIRES: spec.Validate().ok()
std::vector<ColumnSpec> StoredColumns(const TableSpec& spec);

struct TableLayout {
  std::vector<size_t> column_bytes;   // bytes of one step of column c
  std::vector<size_t> column_offset;  // start of column c's region in a block
  size_t step_bytes = 0;
  size_t block_bytes = 0;
  int64_t block_steps = 0;
  int64_t num_blocks = 0;

  // REQUIRES: spec.Validate().ok()
  static TableLayout For(const TableSpec& spec);
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_TABLE_LAYOUT_H_
