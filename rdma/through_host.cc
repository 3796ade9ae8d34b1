// through_host.h: GPU calls through this host's memory.
#include "rdma/through_host.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/gpu/device_sampler.h"
#include "engine/table/device_output.h"
#include "kernels/runtime/device_memory.h"
#include "replaydb/device.h"

namespace replaydb::rdma {
namespace {

std::string Named(const Table& table) {
  return "table '" + table.name() + "'";
}

// A host batch into the caller's device arrays, waited for.
Status CopyBatchToDevice(const SampleBatch& batch, const DeviceSampleOutput& out, void* stream) {
  const size_t n = batch.keys.size();
  REPLAYDB_RETURN_IF_ERROR(
      CopyHostToDeviceAsync(out.keys, batch.keys.data(), n * sizeof(uint64_t), stream));
  const std::vector<float> probabilities(batch.probabilities.begin(), batch.probabilities.end());
  if (out.probabilities != nullptr) {
    REPLAYDB_RETURN_IF_ERROR(CopyHostToDeviceAsync(out.probabilities, probabilities.data(),
                                                   probabilities.size() * sizeof(float), stream));
  }
  const std::vector<float> weights(batch.weights.begin(), batch.weights.end());
  if (out.weights != nullptr && !weights.empty()) {
    REPLAYDB_RETURN_IF_ERROR(
        CopyHostToDeviceAsync(out.weights, weights.data(), weights.size() * sizeof(float), stream));
  }
  for (size_t c = 0; c < out.columns.size() && c < batch.columns.size(); ++c) {
    REPLAYDB_RETURN_IF_ERROR(CopyHostToDeviceAsync(out.columns[c], batch.columns[c].data(),
                                                   batch.columns[c].size_bytes(), stream));
  }
  if (out.mask != nullptr) {
    REPLAYDB_RETURN_IF_ERROR(
        CopyHostToDeviceAsync(out.mask, batch.mask.data(), batch.mask.size(), stream));
  }
  return kernels::StreamSynchronize(stream);
}

}  // namespace

Status SampleToDeviceThroughHost(Table& table, const TableSpec& spec, int64_t batch_size,
                                 const SampleOptions& options, const DeviceSampleOutput& out,
                                 void* stream) {
  REPLAYDB_RETURN_IF_ERROR(engine::CheckSampleToDevice(table.name(), spec.columns, options, out));
  SampleOptions host = options;
  host.gather = !out.columns.empty();
  SampleBatch batch;
  REPLAYDB_RETURN_IF_ERROR(table.Sample(batch_size, host, &batch));
  return CopyBatchToDevice(batch, out, stream).WithContext(Named(table));
}

Status LookupToDeviceThroughHost(Table& table, const TableSpec& spec, std::span<const ItemKey> keys,
                                 const DeviceSampleOutput& out, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(
      engine::CheckDeviceOutput(table.name(), spec.columns, out, /*weights=*/false));
  SampleBatch batch;
  REPLAYDB_RETURN_IF_ERROR(table.Lookup(keys, &batch));
  return CopyBatchToDevice(batch, out, stream).WithContext(Named(table));
}

Status UpdatePrioritiesFromDeviceThroughHost(Table& table, const uint64_t* keys,
                                             const float* priorities, int64_t n, void* stream) {
  if (n < 0 || (n > 0 && (keys == nullptr || priorities == nullptr))) {
    return Status::InvalidArgument(Named(table) +
                                   ": UpdatePrioritiesFromDevice needs n >= 0 and device "
                                   "pointers for keys and priorities");
  }
  if (n == 0) return Status::OK();
  std::vector<ItemKey> host_keys(static_cast<size_t>(n));
  std::vector<float> host_priorities(static_cast<size_t>(n));
  const std::string context = Named(table) + ": UpdatePrioritiesFromDevice";
  REPLAYDB_RETURN_IF_ERROR(
      CopyDeviceToHost(host_keys.data(), keys, host_keys.size() * sizeof(uint64_t), stream)
          .WithContext(context));
  REPLAYDB_RETURN_IF_ERROR(CopyDeviceToHost(host_priorities.data(), priorities,
                                            host_priorities.size() * sizeof(float), stream)
                               .WithContext(context));
  std::vector<ItemKey> valid_keys;
  std::vector<double> valid_priorities;
  valid_keys.reserve(host_keys.size());
  valid_priorities.reserve(host_keys.size());
  for (size_t i = 0; i < host_keys.size(); ++i) {
    if (!std::isfinite(host_priorities[i]) || host_priorities[i] < 0) continue;
    valid_keys.push_back(host_keys[i]);
    valid_priorities.push_back(host_priorities[i]);
  }
  return table.UpdatePriorities(valid_keys, valid_priorities, nullptr);
}

Result<std::unique_ptr<DeviceSampler>> DeviceSamplerThroughHost(
    std::shared_ptr<Table> table, const TableSpec& spec, const DeviceSamplerOptions& options) {
  return engine::NewDeviceSampler(
      {std::move(table), std::nullopt, spec.sequence_length, spec.columns}, options);
}

}  // namespace replaydb::rdma
