// What the writers keep per trajectory and between calls, and what they
// hand to TableImpl's write paths (engine/table/table_write.cc,
// table_vector_write.cc): a writer's slot per trajectory it writes, the
// room reserved for one step, a vector step's rows, and a vector writer's
// scratch, which lets an append allocate nothing once it has grown.
#ifndef REPLAYDB_ENGINE_TABLE_WRITER_STATE_H_
#define REPLAYDB_ENGINE_TABLE_WRITER_STATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/gpu/staged_rows.h"
#include "index/selectors/selector.h"
#include "index/trajectory_store.h"
#include "replaydb/types.h"
#include "util/fork_join.h"

namespace replaydb::engine {

// What a writer keeps per trajectory it writes.
struct WriterSlot {
  // Null: the next step starts one.
  std::shared_ptr<index::Trajectory> trajectory;
  // The trajectory's last block as of its `num_blocks` blocks (a vector
  // append then reads neither the blocks nor their count from elsewhere):
  // valid while trajectory->blocks.size() == num_blocks.
  int64_t last_block = -1;
  size_t num_blocks = 0;
  // A remote writer's key (its records'), logged with the steps the
  // engine encodes for it; 0: none.
  uint64_t writer_key = 0;
};

// Room made for one step by TableImpl::ReserveStepLocked.
struct StepReservation {
  bool completes_item = false;  // an item was reserved with the rate limiter
  bool created = false;         // the step starts the trajectory
  int64_t block = -1;           // where the step goes
  int64_t step_in_block = 0;
};

// Steps of a writer's trajectory reserved for bytes that arrive later
// straight into their blocks (TableImpl::PlaceSteps): pinned until
// published or abandoned.
struct PlacedSteps {
  std::shared_ptr<index::Trajectory> trajectory;  // null: nothing placed
  int64_t first = 0;                              // the trajectory's step of run[0]
  std::vector<StepReservation> run;
};

// Rows of steps in host memory that a trajectory writer hands to
// TableImpl: column c of row r at base[c] + r * stride, the stride
// row_bytes where it is set (rows whose columns lie side by side, as a log
// record's data holds them: base[c] then points at column c of row 0), else
// the column's bytes (each column's rows packed, a tensor [rows, shape...]).
struct HostRows {
  const std::byte* const* base = nullptr;
  size_t row_bytes = 0;

  const std::byte* Row(size_t c, size_t row, size_t column_bytes) const {
    return base[c] + row * (row_bytes != 0 ? row_bytes : column_bytes);
  }
};

// One step for each of n environments (TableImpl::AppendVectorStep): row
// env of column c is at columns[c] + env * the row stride, row_bytes where
// it is set (host rows whose columns lie side by side, as a log record's
// data holds them), else the column's bytes.
struct VectorSteps {
  std::span<const std::byte* const> columns;
  bool device = false;     // device pointers (AppendFromDevice); else host
  void* stream = nullptr;  // device: the caller's cudaStream_t
  size_t row_bytes = 0;    // host rows only

  const std::byte* Row(size_t c, size_t env, size_t column_bytes) const {
    return columns[c] + env * (row_bytes != 0 ? row_bytes : column_bytes);
  }
};

// VectorScratch::dest of an environment that a vector append's shared pass
// (TableImpl::SharedFastReserveLocked) left for the serial one.
inline constexpr int64_t kReserveLater = -2;

// What a vector writer keeps between appends, so that an append allocates
// nothing once these have grown. Used only by the writer's calls.
struct VectorScratch {
  std::vector<StepReservation> reserved;  // per environment
  std::vector<int64_t> dest;              // its step's hot-tier slot; -1: none
  std::vector<const std::byte*> columns;  // a chunk's rows, per column
  std::vector<ConstTensor> tensors;       // the same, for the scatter
  // Each environment's block address, for a copy outside the table's mutex.
  std::vector<std::byte*> blocks;
  // The copies of a step with fewer rows than the writer has parts, whose
  // bytes the parts split (CopyRanges).
  std::vector<util::CopyRange> ranges;
  // A device table fed from host memory: a chunk's rows, copied into
  // pinned host memory (TableImpl::StageVectorRows) that one scatter kernel
  // reads over the bus into their blocks.
  StagedRows device_rows;
  // New items, for the selector. SharedPublishLocked's parts write theirs
  // in place and it only grows it (resizing it to each call's count would
  // have the caller write every element before the parts do); the serial
  // publish appends to it. A writer uses one of the two, never both.
  std::vector<index::ItemRef> items;
  // With more than one part (WriterOptions::threads): the threads that
  // share the per-environment passes, and each part's tallies.
  std::unique_ptr<util::ForkJoin> fork_join;
  struct alignas(64) PartTally {
    size_t todo = 0;         // environments the shared pass left to the caller
    int64_t items = 0;       // items the part's environments complete
    int64_t first_item = 0;  // the index of its first among the call's items
    int64_t published = 0;
    int64_t draws = 0;
    double max_priority = 0;
  };
  std::vector<PartTally> parts;
  // parts[p].items holds the items of part p's share of the whole vector
  // (environments whose step completes one and that hold a reservation):
  // SharedFastReserveLocked counted them when it reserved every environment.
  // Cleared when an environment loses its reservation after that
  // (TableImpl::DropVectorStepLocked).
  bool items_tallied = false;
  // When not empty, one flag per environment: those set take no step in
  // this call (a resent step they hold already:
  // VectorWriterImpl::AppendRecordFrom). Empty for every other call.
  std::vector<uint8_t> skip;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_WRITER_STATE_H_
