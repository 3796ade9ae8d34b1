// DeviceSamplerImpl: Table::NewDeviceSampler. A background thread keeps
// `in_flight` batch buffers filled by Table::SampleToDevice on the
// sampler's own stream; the learner's stream waits for a batch's gather
// through an event (Next) and the sampler's stream waits for the learner's
// release through another (Release), so the GPU is never waited for on the
// host hot path.
#ifndef REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_
#define REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_

#include <memory>

#include "replaydb/table.h"

namespace replaydb::engine {

class TableImpl;

// InvalidArgument for bad options (naming them); errors from allocating the
// buffers and the stream.
Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(std::shared_ptr<TableImpl> table,
                                                        const DeviceSamplerOptions& options);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_DEVICE_SAMPLER_H_
