// StagedRows: rows of host steps on their way into device blocks. Each
// column's rows are copied into pinned host memory (the copy's bytes split
// over a ForkJoin's parts), from where one scatter kernel (DeviceTier::
// Scatter, on the StagedRows' own stream) reads them into their blocks.
// Writers into device tables keep one or two; replay keeps one.
//
// Thread safety: one user at a time (a writer's own, or the table's under
// its mutex).
#ifndef REPLAYDB_ENGINE_GPU_STAGED_ROWS_H_
#define REPLAYDB_ENGINE_GPU_STAGED_ROWS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/gpu/device_tier.h"
#include "engine/table/table_layout.h"
#include "replaydb/device.h"
#include "replaydb/options.h"
#include "replaydb/types.h"
#include "util/fork_join.h"

namespace replaydb::engine {

struct StagedRows {
  DeviceStream stream;
  PinnedBuffer rows;
  // A scatter queued on `stream` may still read `rows`.
  bool reading = false;
  std::vector<size_t> offsets;  // each column's rows in `rows`
  // The schema of the prepared rows (the table's, which outlives them).
  std::span<const ColumnSpec> columns;
  const TableLayout* layout = nullptr;
  std::vector<ConstTensor> tensors;  // Scatter's rows, per column
  std::vector<util::CopyRange> ranges;     // CopyRows' copies, per column

  // The most bytes of rows a caller stages at a time (or one row): the
  // pinned memory a StagedRows keeps.
  static constexpr size_t kMaxBytes = size_t{16} << 20;
  // Rows of `step_bytes` staged at a time: as many as kMaxBytes holds, >= 1.
  static size_t RowsPerStage(size_t step_bytes) {
    return std::max<size_t>(1, kMaxBytes / std::max<size_t>(1, step_bytes));
  }

  StagedRows() = default;
  StagedRows(const StagedRows&) = delete;
  StagedRows& operator=(const StagedRows&) = delete;
  ~StagedRows() {
    if (reading) (void)stream.Synchronize();
  }
  // Room for `count` rows of each of `columns` (column c's at offsets[c],
  // 256-byte aligned) on `device`, once the scatter that last read `rows`
  // is done.
  Status Prepare(int device, std::span<const ColumnSpec> columns, const TableLayout& layout,
                 size_t count);
  std::byte* column(size_t c) const { return static_cast<std::byte*>(rows.data()) + offsets[c]; }
  // Copies host rows [first_row, first_row + count) of every column (column
  // c's row i at column_base[c] + i * row_bytes, or i * its bytes where
  // row_bytes is 0) into the prepared rows, their bytes split over
  // `fork_join`'s parts (null: on this thread).
  void CopyRows(const std::byte* const* column_base, size_t first_row, size_t count,
                util::ForkJoin* fork_join, size_t row_bytes = 0);
  // Queues the scatter of prepared rows [first_row, first_row +
  // slots.size()) to `slots` (< 0: skip).
  Status Scatter(DeviceTier& tier, std::span<const int64_t> slots, size_t first_row = 0);
};

// (*out)[c]: `count` rows of column c at column(c), shaped [count, ...], for
// a scatter.
template <typename ColumnData>
void RowTensors(std::span<const ColumnSpec> columns, const TableLayout& layout, size_t count,
                const ColumnData& column, std::vector<ConstTensor>* out) {
  out->resize(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    (*out)[c] = ConstTensor{columns[c].dtype, columns[c].shape.Prepend(static_cast<int64_t>(count)),
                            column(c), layout.column_bytes[c] * count};
  }
}

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_STAGED_ROWS_H_
