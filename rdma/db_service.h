// A local database served over an RpcServer (rdma/rpc.h): the requests of
// rdma/WIRE.md ("Tables and samples") run against it. The client side is
// rdma/remote_db.h.
//
// Thread safety: the handler runs on the server's executor threads at once;
// DB and Table are thread-safe.
#ifndef REPLAYDB_RDMA_DB_SERVICE_H_
#define REPLAYDB_RDMA_DB_SERVICE_H_

#include <memory>
#include <string>

#include "rdma/rpc.h"
#include "replaydb/db.h"
#include "replaydb/table.h"

namespace replaydb::rdma {

// The handler for an RpcServer that serves `db` (which must outlive the
// server). A request of a kind it does not serve is NotSupported, naming it.
RequestHandler DbRequestHandler(DB* db);

// A sample's payload (WIRE.md, "A sample's payload"): keys, probabilities,
// priorities, weights (when present), times sampled, the mask, then each
// column's bytes in schema order.
std::string EncodeSamplePayload(const SampleBatch& batch);
// The batch that `payload` holds for a table of `spec`, `batch_size` items
// of windows of `sequence_length`; Corruption naming `from` when its size
// does not add up.
Status DecodeSamplePayload(std::string_view payload, const TableSpec& spec, int64_t batch_size,
                           int64_t sequence_length, bool has_weights, const std::string& from,
                           SampleBatch* out);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_DB_SERVICE_H_
