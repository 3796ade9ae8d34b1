// GPU calls of a table whose data lies elsewhere (a served table, a
// sharded one): the host call, and copies between this host's memory and
// the caller's device arrays on the caller's stream, waited for (so a call
// returns with its work on that stream done). Shared by RemoteDB's tables
// (remote_db.h) and ShardedDB's (shards/sharded_db.h).
#ifndef REPLAYDB_RDMA_THROUGH_HOST_H_
#define REPLAYDB_RDMA_THROUGH_HOST_H_

#include <cstdint>
#include <memory>
#include <span>

#include "replaydb/table.h"

namespace replaydb::rdma {

// table.Sample (gathering when out.columns is not empty), then the batch
// into `out`; the options and `out` checked as a local table checks them.
Status SampleToDeviceThroughHost(Table& table, const TableSpec& spec, int64_t batch_size,
                                 const SampleOptions& options, const DeviceSampleOutput& out,
                                 void* stream);
// table.Lookup, then the batch into `out`.
Status LookupToDeviceThroughHost(Table& table, const TableSpec& spec, std::span<const ItemKey> keys,
                                 const DeviceSampleOutput& out, void* stream);
// The device arrays copied to this host (after the work queued on
// `stream`), then table.UpdatePriorities of those whose priority is finite
// and >= 0 (the rest skipped, as a local table skips them).
Status UpdatePrioritiesFromDeviceThroughHost(Table& table, const uint64_t* keys,
                                             const float* priorities, int64_t n, void* stream);
// The engine's sampler over `table` (its SampleToDevice), into batches on
// the calling thread's current device.
Result<std::unique_ptr<DeviceSampler>> DeviceSamplerThroughHost(
    std::shared_ptr<Table> table, const TableSpec& spec, const DeviceSamplerOptions& options);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_THROUGH_HOST_H_
