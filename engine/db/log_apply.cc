#include "engine/db/log_apply.h"

#include <string>

#include "wal/records.h"

namespace replaydb::engine {
namespace {

// Decodes a table's record and applies it to its table, if open.
template <typename Record>
Status ApplyTo(std::span<const std::byte> payload, const TableById& table) {
  Record r;
  REPLAYDB_RETURN_IF_ERROR(wal::Decode(payload, &r));
  TableImpl* t = table(r.table_id);
  return t == nullptr ? Status::OK() : t->Apply(r);
}

}  // namespace

Status ApplyLogRecord(wal::RecordType type, std::span<const std::byte> payload,
                      const TableById& table) {
  switch (type) {
    case wal::RecordType::kCreateTable: {
      // The catalog, written before the record, already has the table (or
      // it was dropped later): nothing to do.
      wal::CreateTableRecord r;
      return wal::Decode(payload, &r);
    }
    case wal::RecordType::kDropTable: {
      wal::DropTableRecord r;
      return wal::Decode(payload, &r);
    }
    case wal::RecordType::kTableSpec: {
      // The catalog, written before the record, holds the change.
      wal::TableSpecRecord r;
      return wal::Decode(payload, &r);
    }
    case wal::RecordType::kAppendSteps:
      return ApplyTo<wal::AppendStepsRecord>(payload, table);
    case wal::RecordType::kEndTrajectory:
      return ApplyTo<wal::EndTrajectoryRecord>(payload, table);
    case wal::RecordType::kUpdatePriorities:
      return ApplyTo<wal::UpdatePrioritiesRecord>(payload, table);
    case wal::RecordType::kRemoveItems:
      return ApplyTo<wal::RemoveItemsRecord>(payload, table);
    case wal::RecordType::kRemoveTrajectory:
      return ApplyTo<wal::RemoveTrajectoryRecord>(payload, table);
    case wal::RecordType::kClearTable:
      return ApplyTo<wal::ClearTableRecord>(payload, table);
    case wal::RecordType::kItemClock:
      return ApplyTo<wal::ItemClockRecord>(payload, table);
  }
  return Status::Corruption("record type " + std::to_string(static_cast<int>(type)) +
                            " is not known to this build");
}

}  // namespace replaydb::engine
