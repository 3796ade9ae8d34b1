// ApplyLogRecord: the one path by which a logged change reaches the tables
// again. Recovery replays the write-ahead log through it (DBImpl::Recover);
// a replica applies the records its primary ships through it.
//
// A record is decoded (Corruption when it does not parse) and handed to the
// table it names (TableImpl::Apply). Records of a table that is not open
// (dropped later in the log) change nothing, and so do the catalog's own
// records (CreateTable, DropTable: the catalog, written before them, has
// them already). Idempotent against the checkpoint the records are applied
// onto: steps and ends the tables already hold are skipped, so a record the
// checkpoint already holds, or one applied twice, changes nothing more.
// Records of one table must come in log order.
#ifndef REPLAYDB_ENGINE_DB_LOG_APPLY_H_
#define REPLAYDB_ENGINE_DB_LOG_APPLY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "engine/table/table_impl.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::engine {

// The open table with id `id`, or null when there is none.
using TableById = std::function<TableImpl*(uint32_t id)>;

// Applies the record of `type` in `payload` (wal/FORMAT.md) to the table
// `table` finds.
Status ApplyLogRecord(wal::RecordType type, std::span<const std::byte> payload,
                      const TableById& table);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_DB_LOG_APPLY_H_
