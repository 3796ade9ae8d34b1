// The write-ahead log's record payloads (FlatBuffers, schema wal/wal.fbs):
// encoders that write straight into a LogWriter record, and decoders that
// verify the buffer and return plain structs.
//
// Tables are named by id (TableDef.id in the catalog), never by name, so a
// table dropped and created again under the same name is a different table.
#ifndef REPLAYDB_WAL_RECORDS_H_
#define REPLAYDB_WAL_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::wal {

struct CreateTableRecord {
  uint32_t table_id = 0;
  // The table's spec in the catalog's encoding (a one-table catalog, see
  // engine/db/CATALOG.md): the WAL does not interpret it.
  std::string spec;
};
// A table's changed spec (RecordType::kTableSpec): CreateTable's payload.
using TableSpecRecord = CreateTableRecord;

struct DropTableRecord {
  uint32_t table_id = 0;
};

// Steps appended to one or more trajectories: entry i is step steps[i] of
// trajectory trajectory_ids[i]; its bytes are data[i * step_bytes, ...),
// the columns' bytes one after another in column order.
struct AppendStepsRecord {
  uint32_t table_id = 0;
  uint32_t step_bytes = 0;
  std::vector<uint64_t> trajectory_ids;
  std::vector<int64_t> steps;
  // Empty: no entry had a priority. Otherwise one per entry; NaN for an
  // entry without one.
  std::vector<double> priorities;
  std::span<const std::byte> data;  // points into the decoded payload
  // The remote writer that sent the rows (its random key; 0: none said).
  uint64_t writer_key = 0;
  // A remote vector writer's: empty, or one key per entry.
  std::vector<uint64_t> writer_keys;
  // Entry i's writer key (0: none said).
  uint64_t KeyOf(size_t i) const { return writer_keys.empty() ? writer_key : writer_keys[i]; }
};

struct EndTrajectoryRecord {
  uint32_t table_id = 0;
  uint64_t trajectory_id = 0;
  uint8_t reason = 0;  // replaydb::EndReason
};

struct UpdatePrioritiesRecord {
  uint32_t table_id = 0;
  std::vector<uint64_t> keys;
  std::vector<double> priorities;
};

// Items that left the table (sampled max_times_sampled times).
struct RemoveItemsRecord {
  uint32_t table_id = 0;
  std::vector<uint64_t> keys;
  bool deleted = false;  // Table::DeleteItems (else consumed by max_times_sampled)
};

// A trajectory that left the hot tier, with all its items.
struct RemoveTrajectoryRecord {
  uint32_t table_id = 0;
  uint64_t trajectory_id = 0;
  bool evicted = false;  // false: all its items were consumed
};

// Table::Clear: every trajectory with an id below below_trajectory_id left
// the table (hot and cold, with its items); the rate limiter starts afresh.
struct ClearTableRecord {
  uint32_t table_id = 0;
  uint64_t below_trajectory_id = 0;
};

// A FIFO, LIFO or heap table's clock (RecordType::kItemClock): the items
// created after it have insertion orders of at least time_ns.
struct ItemClockRecord {
  uint32_t table_id = 0;
  uint64_t time_ns = 0;
};

// Builds a payload. Small records build into a reusable buffer; AppendSteps
// reserves its data bytes so the caller fills them in place. Every scalar is
// stored, defaults included. Not thread-safe: one builder per thread.
class RecordBuilder {
 public:
  RecordBuilder();
  ~RecordBuilder();
  RecordBuilder(const RecordBuilder&) = delete;
  RecordBuilder& operator=(const RecordBuilder&) = delete;

  void CreateTable(const CreateTableRecord& r);
  void DropTable(const DropTableRecord& r);
  // Everything but the data, which the returned pointer (n * step_bytes
  // bytes, valid until the next call) must be filled with. `writer_key`
  // (a remote writer's; 0: none) and `writer_keys` (a remote vector
  // writer's, one per entry; empty: none) are stored only when set, so the
  // engine's own records keep their bytes.
  std::byte* AppendSteps(uint32_t table_id, uint32_t step_bytes,
                         std::span<const uint64_t> trajectory_ids, std::span<const int64_t> steps,
                         std::span<const double> priorities, uint64_t writer_key = 0,
                         std::span<const uint64_t> writer_keys = {});
  void EndTrajectory(const EndTrajectoryRecord& r);
  void UpdatePriorities(uint32_t table_id, std::span<const uint64_t> keys,
                        std::span<const double> priorities);
  void RemoveItems(uint32_t table_id, std::span<const uint64_t> keys, bool deleted = false);
  void RemoveTrajectory(const RemoveTrajectoryRecord& r);
  void ClearTable(const ClearTableRecord& r);
  void ItemClock(const ItemClockRecord& r);

  // The finished payload of the last call.
  std::span<const std::byte> payload() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Decoders: Corruption (naming the record type and what is wrong) when the
// payload does not verify or its fields disagree (e.g. data size versus
// entries x step_bytes, array lengths). REQUIRES: payload.data() is 8-byte
// aligned (Replay's payloads and RecordBuilder::payload() are);
// InvalidArgument otherwise. Never crash on any bytes. *out is left
// unspecified on error. AppendStepsRecord::data points into `payload`.
Status Decode(std::span<const std::byte> payload, CreateTableRecord* out);
Status Decode(std::span<const std::byte> payload, DropTableRecord* out);
Status Decode(std::span<const std::byte> payload, AppendStepsRecord* out);
Status Decode(std::span<const std::byte> payload, EndTrajectoryRecord* out);
Status Decode(std::span<const std::byte> payload, UpdatePrioritiesRecord* out);
Status Decode(std::span<const std::byte> payload, RemoveItemsRecord* out);
Status Decode(std::span<const std::byte> payload, RemoveTrajectoryRecord* out);
Status Decode(std::span<const std::byte> payload, ClearTableRecord* out);
Status Decode(std::span<const std::byte> payload, ItemClockRecord* out);

// Writes, in place, trajectory id `trajectory_id` into every entry of the
// AppendSteps payload and step numbers first_step, first_step + 1, ...:
// a remote writer's record names neither (the server knows them), and the
// server logs the record's own bytes once they are filled in. The payload
// must decode (Decode's errors otherwise); nothing else in it changes.
Status FillAppendSteps(std::span<std::byte> payload, uint64_t trajectory_id, int64_t first_step);
// The same with an id and a step number per entry (a vector step's, one per
// environment): InvalidArgument unless the payload has ids.size() entries
// and steps.size() == ids.size().
Status FillAppendSteps(std::span<std::byte> payload, std::span<const uint64_t> ids,
                       std::span<const int64_t> steps);

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_RECORDS_H_
