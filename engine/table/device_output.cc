#include "engine/table/device_output.h"

#include <string>

#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;

Status CheckDeviceOutput(std::string_view table, std::span<const ColumnSpec> columns,
                         const DeviceSampleOutput& out, bool weights) {
  if (out.keys == nullptr || (weights && out.weights == nullptr)) {
    return Status::InvalidArgument("table " + Quoted(table) +
                                   ": a device sample needs device pointers for keys and "
                                   "probabilities (and weights when importance_beta >= 0)");
  }
  if (!out.columns.empty() && out.columns.size() != columns.size()) {
    return Status::InvalidArgument("table " + Quoted(table) + ": DeviceSampleOutput has " +
                                   std::to_string(out.columns.size()) +
                                   " column pointers; the table has " +
                                   std::to_string(columns.size()) + " columns (or give none)");
  }
  for (size_t c = 0; c < out.columns.size(); ++c) {
    if (out.columns[c] == nullptr) {
      return Status::InvalidArgument("table " + Quoted(table) + ": DeviceSampleOutput column " +
                                     Quoted(columns[c].name) + " is null");
    }
  }
  return Status::OK();
}

Status CheckSampleToDevice(std::string_view table, std::span<const ColumnSpec> columns,
                           const SampleOptions& options, const DeviceSampleOutput& out) {
  if (options.peek) {
    return Status::InvalidArgument("table " + Quoted(table) +
                                   ": SampleToDevice does not peek (SampleOptions::peek is for "
                                   "Table::Sample)");
  }
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceOutput(table, columns, out, options.importance_beta >= 0));
  if (out.probabilities == nullptr) {
    return Status::InvalidArgument("table " + Quoted(table) +
                                   ": SampleToDevice needs a device pointer for probabilities");
  }
  return Status::OK();
}

}  // namespace replaydb::engine
