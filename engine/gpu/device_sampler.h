// DeviceSamplerImpl: Table::NewDeviceSampler, for local tables and for
// remote ones (whose SampleToDevice is the served Sample and a copy from the
// client's host memory). A background thread keeps `in_flight` batch
// buffers filled by Table::SampleToDevice on the sampler's own stream; the learner's stream waits for a batch's gather
// through an event (Next) and the sampler's stream waits for the learner's
// release through another (Release), so the GPU is never waited for on the
// host hot path.
#ifndef REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_
#define REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_

#include <memory>
#include <optional>
#include <vector>

#include "replaydb/table.h"

namespace replaydb::engine {

// What a sampler draws from.
struct SamplerSource {
  std::shared_ptr<Table> table;
  // The device of the batches and the sampler's stream; none: the calling
  // thread's current CUDA device (a remote table's sampler).
  std::optional<int> device;
  int64_t sequence_length = 1;
  std::vector<ColumnSpec> columns;  // an item's (an environment's row in a vector table)
};

// The options' checks, before anything looks for a GPU: InvalidArgument
// naming the option, ResourceExhausted for batches over kMaxSampleBytes.
Status CheckDeviceSampler(const SamplerSource& source, const DeviceSamplerOptions& options);

// CheckDeviceSampler, then the device (FailedPrecondition where there is
// none), the buffers and the stream (their errors).
Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(SamplerSource source,
                                                        const DeviceSamplerOptions& options);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_
