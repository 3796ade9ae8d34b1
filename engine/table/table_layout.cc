#include "engine/table/table_layout.h"

#include <algorithm>

#include "util/checked_math.h"

namespace replaydb::engine {

int64_t CapacityBlocks(const TableSpec& spec) {
  if (spec.block_steps <= 0) return 0;
  if (spec.capacity_steps > 0) return util::CeilDiv(spec.capacity_steps, spec.block_steps);
  const uint64_t block_bytes = util::SaturatingMul<uint64_t>(
      util::SaturatingMul<uint64_t>(static_cast<uint64_t>(spec.block_steps), spec.step_bytes()),
      static_cast<uint64_t>(std::max<int64_t>(1, spec.lanes)));
  if (block_bytes == 0 || spec.capacity_bytes <= 0) return 0;
  return static_cast<int64_t>(static_cast<uint64_t>(spec.capacity_bytes) / block_bytes);
}

std::vector<ColumnSpec> StoredColumns(const TableSpec& spec) {
  std::vector<ColumnSpec> columns = spec.columns;
  if (spec.lanes > 1) {
    for (ColumnSpec& c : columns) c.shape = c.shape.Prepend(spec.lanes);
  }
  return columns;
}

TableLayout TableLayout::For(const TableSpec& spec) {
  TableLayout layout;
  layout.block_steps = spec.block_steps;
  layout.num_blocks = CapacityBlocks(spec);
  size_t offset = 0;
  for (const ColumnSpec& c : StoredColumns(spec)) {
    offset = (offset + kColumnAlignment - 1) / kColumnAlignment * kColumnAlignment;
    const size_t bytes = c.step_bytes();
    layout.column_bytes.push_back(bytes);
    layout.column_offset.push_back(offset);
    offset += bytes * static_cast<size_t>(spec.block_steps);
    layout.step_bytes += bytes;
  }
  layout.block_bytes = (offset + kColumnAlignment - 1) / kColumnAlignment * kColumnAlignment;
  return layout;
}

}  // namespace replaydb::engine
