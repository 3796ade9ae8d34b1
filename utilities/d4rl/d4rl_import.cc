// ImportD4rl (include/replaydb/utilities/d4rl.h): reads the file with
// D4rlReader and writes its trajectories straight into the cold tier of a
// new table (TableImpl::ImportStored), takes a checkpoint, then fills the
// hot tier with what fits, as DB::ImportTable does (engine/db/datasets.cc).
// The public API creates, checkpoints and drops the table; the writes into
// the cold tier go through the engine's TableImpl.
#include "replaydb/utilities/d4rl.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "engine/table/table_impl.h"
#include "engine/table/table_layout.h"
#include "util/format.h"
#include "util/progress_reporter.h"
#include "utilities/d4rl/d4rl_hdf5.h"

namespace replaydb {

using util::Quoted;
namespace {

using engine::D4rlColumn;
using engine::D4rlReader;
using engine::D4rlTrajectory;

std::string Describe(const ColumnSpec& c) {
  return std::string(DTypeName(c.dtype)) + c.shape.ToString();
}

// Cancelled when *cancel was set, naming how far the import got.
Status CheckCancel(const std::atomic<bool>* cancel, const util::ProgressReporter& progress) {
  if (cancel == nullptr || !cancel->load(std::memory_order_relaxed)) return Status::OK();
  return Status::Cancelled("interrupted after " + std::to_string(progress.done()) +
                           " steps; nothing was kept");
}

// The table's columns: the file's when `spec` has none, else `spec`'s,
// which must match the file's column by column.
Status ResolveColumns(const std::string& path, const std::vector<D4rlColumn>& file_columns,
                      TableSpec* spec) {
  if (spec->columns.empty()) {
    for (const D4rlColumn& c : file_columns) spec->columns.push_back({c.name, c.dtype, c.shape});
    return Status::OK();
  }
  // Schema mismatch: say which column differs, and how.
  for (size_t i = 0; i < std::max(spec->columns.size(), file_columns.size()); ++i) {
    if (i >= spec->columns.size()) {
      return Status::InvalidArgument("'" + path + "': dataset '" + file_columns[i].dataset +
                                     "' (column " + Quoted(file_columns[i].name) +
                                     ") is not in the spec of table " + Quoted(spec->name));
    }
    if (i >= file_columns.size()) {
      return Status::InvalidArgument("'" + path + "': the spec of table " + Quoted(spec->name) +
                                     " has column " + Quoted(spec->columns[i].name) +
                                     ", which the file lacks");
    }
    const ColumnSpec& want = spec->columns[i];
    const D4rlColumn& got = file_columns[i];
    if (want.name != got.name || want.dtype != got.dtype || want.shape != got.shape) {
      return Status::InvalidArgument(
          "'" + path + "': column " + std::to_string(i) + " of table " + Quoted(spec->name) +
          " is " + Quoted(want.name) + " " + Describe(want) + ", but dataset '" + got.dataset +
          "' is " + Quoted(got.name) + " " + Describe({got.name, got.dtype, got.shape}));
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<Table>> ImportD4rl(DB& db, const std::string& path,
                                          const TableSpec& requested,
                                          const LongOperationOptions& options) {
  if (db.read_only()) {
    return Status::FailedPrecondition("ImportD4rl: database " + db.path() +
                                      " was opened read-only (DB::OpenReadOnly)");
  }
  REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<D4rlReader> reader, D4rlReader::Open(path));
  TableSpec spec = requested;
  REPLAYDB_RETURN_IF_ERROR(ResolveColumns(path, reader->columns(), &spec));
  REPLAYDB_RETURN_IF_ERROR(spec.Validate().WithContext("'" + path + "'"));
  for (const D4rlTrajectory& t : reader->trajectories()) {
    if (spec.sequence_length > 0 &&
        engine::TableLayout::For(spec).num_blocks * spec.block_steps < t.length) {
      return Status::InvalidArgument(
          "'" + path + "': the trajectory at step " + std::to_string(t.first_step) + " has " +
          std::to_string(t.length) + " steps, more than the hot tier of table " +
          Quoted(spec.name) + " holds; raise its capacity");
    }
  }
  Result<std::shared_ptr<Table>> created = db.CreateTable(spec);
  if (!created.ok()) return created.status().WithContext("'" + path + "'");
  // Every table of a database opened in this process is the engine's.
  auto* dst = static_cast<engine::TableImpl*>(created->get());
  const engine::TableLayout& layout = dst->layout();
  const size_t step_bytes = layout.step_bytes;
  util::ProgressReporter progress("import " + path, reader->num_steps(), "steps", options.progress);
  Status s;
  std::vector<std::vector<std::byte>> column(spec.columns.size());
  engine::StoredTrajectory stored;
  uint64_t next_id = 1;
  uint64_t next_seq = 1;
  for (const D4rlTrajectory& t : reader->trajectories()) {
    s = CheckCancel(options.cancel, progress);
    for (size_t c = 0; c < column.size() && s.ok(); ++c) {
      column[c].resize(static_cast<size_t>(t.length) * layout.column_bytes[c]);
      s = reader->Read(c, t.first_step, t.length, column[c].data());
    }
    if (!s.ok()) break;
    stored = {};
    stored.id = next_id++;
    stored.length = t.length;
    stored.ended = true;
    stored.end_reason = t.end_reason;
    stored.step_priorities.assign(static_cast<size_t>(t.length), 1.0);
    stored.steps.resize(static_cast<size_t>(t.length) * step_bytes);
    for (int64_t i = 0; i < t.length; ++i) {
      // Step-major: each step's columns one after another (the WAL's layout).
      std::byte* dst_step = reinterpret_cast<std::byte*>(stored.steps.data()) + i * step_bytes;
      for (size_t c = 0; c < column.size(); ++c) {
        const size_t cb = layout.column_bytes[c];
        std::memcpy(dst_step, column[c].data() + static_cast<size_t>(i) * cb, cb);
        dst_step += cb;
      }
    }
    const int64_t items = spec.padding == Padding::kTail
                              ? t.length
                              : std::max<int64_t>(0, t.length - spec.sequence_length + 1);
    for (int64_t i = 0; i < items; ++i) {
      engine::ItemState item;
      item.seq = next_seq++;
      item.priority = 1.0;
      stored.items.push_back(item);
      stored.live.push_back(true);
    }
    s = dst->ImportStored(stored);
    if (!s.ok()) break;
    progress.Add(t.length);
  }
  if (s.ok()) s = db.Checkpoint();
  if (s.ok()) s = dst->FillHot();
  if (!s.ok()) {
    // Nothing half-imported stays.
    (void)db.DropTable(spec.name);
    return s.WithContext("import of '" + path + "'");
  }
  return created;
}

}  // namespace replaydb
