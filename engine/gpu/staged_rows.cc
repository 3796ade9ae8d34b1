#include "engine/gpu/staged_rows.h"

namespace replaydb::engine {

Status StagedRows::Prepare(int device, std::span<const ColumnSpec> schema,
                           const TableLayout& table_layout, size_t count) {
  columns = schema;
  layout = &table_layout;
  const size_t num_columns = columns.size();
  size_t bytes = 0;
  offsets.resize(num_columns);
  for (size_t c = 0; c < num_columns; ++c) {
    offsets[c] = bytes;
    bytes += (layout->column_bytes[c] * count + 255) / 256 * 256;
  }
  if (stream.handle() == nullptr) {
    REPLAYDB_ASSIGN_OR_RETURN(stream, DeviceStream::Create(device));
  }
  // The last scatter has usually finished long before the next rows come.
  if (reading) {
    REPLAYDB_RETURN_IF_ERROR(stream.Synchronize());
    reading = false;
  }
  if (rows.size() < bytes) {
    rows = PinnedBuffer();
    REPLAYDB_ASSIGN_OR_RETURN(rows, PinnedBuffer::Allocate(bytes));
  }
  return Status::OK();
}

void StagedRows::CopyRows(const std::byte* const* column_base, size_t first_row, size_t count,
                          util::ForkJoin* fork_join, size_t row_bytes) {
  const size_t num_columns = offsets.size();
  const bool packed =
      row_bytes == 0 || (num_columns == 1 && row_bytes == layout->column_bytes[0]);
  if (packed) {
    // Each column's rows are contiguous on both sides: one range per
    // column, its bytes split over the parts (a vector table's one row of
    // megabytes too).
    ranges.resize(num_columns);
    for (size_t c = 0; c < num_columns; ++c) {
      const size_t cb = layout->column_bytes[c];
      ranges[c] = {column(c), column_base[c] + first_row * cb, count * cb};
    }
  } else {
    // Rows whose columns lie side by side (a log record's): one range per
    // row and column.
    ranges.resize(num_columns * count);
    for (size_t i = 0; i < count; ++i) {
      for (size_t c = 0; c < num_columns; ++c) {
        const size_t cb = layout->column_bytes[c];
        ranges[i * num_columns + c] = {column(c) + i * cb,
                                       column_base[c] + (first_row + i) * row_bytes, cb};
      }
    }
  }
  util::CopyRanges(fork_join, ranges);
}

Status StagedRows::Scatter(DeviceTier& tier, std::span<const int64_t> slots, size_t first_row) {
  RowTensors(
      columns, *layout, slots.size(),
      [&](size_t c) { return column(c) + first_row * layout->column_bytes[c]; }, &tensors);
  // Until it is done, the next Prepare waits before it overwrites `rows`.
  reading = true;
  return tier.Scatter(slots, tensors, stream.handle());
}

}  // namespace replaydb::engine
