// The checks of a device sample's arguments (Table::SampleToDevice and
// LookupToDevice), shared by local tables and remote ones (rdma/), so that
// both refuse the same calls with the same words.
#ifndef REPLAYDB_ENGINE_TABLE_DEVICE_OUTPUT_H_
#define REPLAYDB_ENGINE_TABLE_DEVICE_OUTPUT_H_

#include <span>
#include <string_view>

#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb::engine {

// InvalidArgument naming table `table` when `out` lacks the keys pointer
// (or the weights one with `weights`), or has column pointers that are null
// or not one per column of `columns`.
Status CheckDeviceOutput(std::string_view table, std::span<const ColumnSpec> columns,
                         const DeviceSampleOutput& out, bool weights);

// SampleToDevice's: no peek, CheckDeviceOutput, and a probabilities pointer.
Status CheckSampleToDevice(std::string_view table, std::span<const ColumnSpec> columns,
                           const SampleOptions& options, const DeviceSampleOutput& out);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_TABLE_DEVICE_OUTPUT_H_
