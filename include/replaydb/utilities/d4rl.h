// D4RL import: an HDF5 file in the D4RL layout (the offline-RL datasets of
// D4RL, as h5py writes them) into a new table of a database.
//
//   auto table = replaydb::ImportD4rl(*db, "hopper-medium-v2.hdf5", spec);
//
// An optional part of replaydb, kept out of the core library so that only
// its users need libhdf5: the static library replaydb_d4rl
// (utilities/d4rl/), which CMake builds where it finds libhdf5's C headers
// (Debian: libhdf5-dev). Link replaydb_d4rl beside replaydb;
// libreplaydb.so does not hold it. The replaydb shell's import-d4rl
// command calls it.
#ifndef REPLAYDB_UTILITIES_D4RL_H_
#define REPLAYDB_UTILITIES_D4RL_H_

#include <memory>
#include <string>

#include "replaydb/db.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "replaydb/table.h"

namespace replaydb {

// Imports an HDF5 file in the D4RL layout (observations, actions,
// rewards, terminals, timeouts, and any other dataset as a column named
// by its path with '.' for '/'; trajectories cut after each terminal or
// timeout) as a new table of `db` with `spec`'s name and options. Empty
// spec.columns take the file's; otherwise they must match it exactly.
// Items get priority 1. Errors name the file, dataset and values; on any
// error the new table is dropped. Details: utilities/d4rl/d4rl_hdf5.h and
// docs/cold_tier.md.
//
// Like DB::ImportTable, trajectories go to the cold tier, then a
// checkpoint is taken, then as many as fit go into the hot tier.
// FailedPrecondition on a read-only opener. options.cancel stops it with
// Cancelled (nothing is kept); options.progress is told of the steps
// imported, as operation "import PATH".
//
// REQUIRES: `db` was opened in this process by DB::Open or
// DB::OpenReadOnly (the import writes into the engine's cold tier
// directly).
Result<std::shared_ptr<Table>> ImportD4rl(DB& db, const std::string& path, const TableSpec& spec,
                                          const LongOperationOptions& options = {});

}  // namespace replaydb

#endif  // REPLAYDB_UTILITIES_D4RL_H_
