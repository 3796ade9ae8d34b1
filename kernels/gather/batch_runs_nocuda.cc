// The build without a CUDA compiler: the runs are checked as with CUDA, then
// the call answers NotSupported.
#include "kernels/gather/batch_runs.h"

namespace replaydb {

Status LabelBatchRuns(int, std::span<const BatchRun> runs, const float* local,
                      double* probabilities, int64_t* shards, void*) {
  REPLAYDB_RETURN_IF_ERROR(kernels::CheckBatchRuns(runs, local, probabilities, shards));
  int64_t rows = 0;
  for (const BatchRun& run : runs) rows += run.rows;
  if (rows == 0) return Status::OK();
  return Status::NotSupported("LabelBatchRuns: built without CUDA (no nvcc at configure time)");
}

}  // namespace replaydb
