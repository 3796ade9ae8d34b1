// replaydb::LabelBatchRuns (include/replaydb/device.h), a sharded batch's
// finish on the device: its argument checks, shared by batch_runs.cu and
// batch_runs_nocuda.cc (NotSupported).
#ifndef REPLAYDB_KERNELS_GATHER_BATCH_RUNS_H_
#define REPLAYDB_KERNELS_GATHER_BATCH_RUNS_H_

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "replaydb/device.h"
#include "replaydb/status.h"

namespace replaydb::kernels {

// The argument checks of LabelBatchRuns (both builds).
inline Status CheckBatchRuns(std::span<const BatchRun> runs, const float* local,
                             const double* probabilities, const int64_t* shards) {
  if (runs.size() > kMaxBatchRuns) {
    return Status::InvalidArgument("LabelBatchRuns: " + std::to_string(runs.size()) +
                                   " runs; at most " + std::to_string(kMaxBatchRuns));
  }
  int64_t rows = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].rows < 0) {
      return Status::InvalidArgument("LabelBatchRuns: run " + std::to_string(r) + " has " +
                                     std::to_string(runs[r].rows) + " rows");
    }
    if (!std::isfinite(runs[r].share) || runs[r].share < 0) {
      return Status::InvalidArgument("LabelBatchRuns: run " + std::to_string(r) +
                                     "'s share is " + std::to_string(runs[r].share) +
                                     "; it must be finite and >= 0");
    }
    rows += runs[r].rows;
  }
  if (rows > 0 && (local == nullptr || probabilities == nullptr || shards == nullptr)) {
    return Status::InvalidArgument(
        std::string("LabelBatchRuns: ") +
        (local == nullptr ? "local" : probabilities == nullptr ? "probabilities" : "shards") +
        " is null");
  }
  return Status::OK();
}

}  // namespace replaydb::kernels

#endif  // REPLAYDB_KERNELS_GATHER_BATCH_RUNS_H_
