// DeviceBlockIndex, Gather and Scatter on CUDA: the index's device arrays,
// its flushes, and the host entry points that check a request, plan its
// launches (block_gather_plan.h) and queue them (block_gather.cuh).
//
// Device state of an index: block addresses (uint64, 0 until set), next
// blocks (int64, -1 until set) and optionally item steps (uint32 per slot,
// 0 until set). A flush takes the staged changes, coalesced
// (block_index_staging.h), into a pinned, mapped upload buffer and queues one
// kernel on the caller's stream that reads them from there (zero-copy) and
// applies them. A buffer is refilled only after the event recorded behind
// the last kernel that read it has completed, so the host never writes what
// the device may still be reading: a flush takes a buffer whose kernel is
// done, adds one while all are in use (up to kMaxUploads), and only then
// waits for one, so that a flush rarely blocks behind a busy stream.
// nvcc warns (2810) when a [[nodiscard]] class such as Status is assigned.
#pragma nv_diag_suppress 2810

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gather/block_gather.cuh"
#include "kernels/gather/block_gather.h"
#include "kernels/gather/block_gather_plan.h"
#include "kernels/gather/block_index_staging.h"
#include "kernels/runtime/cuda_status.cuh"
#include "kernels/runtime/gpu.h"
#include "kernels/runtime/launch_faults.h"

namespace replaydb::kernels {
namespace {

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

// An allocation's failure as Status, cleared from CUDA's last-error slot so
// that the next launch check (cudaGetLastError) does not report it again.
Status AllocationFailed(cudaError_t err, const std::string& call) {
  (void)cudaGetLastError();
  return CudaStatus(err, call);
}

// cudaMalloc with the bytes and purpose in the error.
template <typename T>
Status DeviceAlloc(T** ptr, size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    return AllocationFailed(err,
                            "cudaMalloc(" + std::to_string(bytes) + " bytes for " + what + ")");
  }
  *ptr = static_cast<T*>(p);
  return Status::OK();
}

class DeviceBlockIndexImpl final : public DeviceBlockIndex {
 public:
  explicit DeviceBlockIndexImpl(const Options& options)
      : options_(options),
        staging_(options.num_blocks, options.block_steps, options.item_steps,
                 options.uniform_draws) {}
  ~DeviceBlockIndexImpl() override;

  Status Init();

  void SetBlockAddress(int64_t block, const void* address) override {
    staging_.SetBlockAddress(block, address);
  }
  void SetNext(int64_t block, int64_t next) override { staging_.SetNext(block, next); }
  void SetItemSteps(int64_t slot, uint32_t steps) override { staging_.SetItemSteps(slot, steps); }
  void SetBlockKey(int64_t block, uint64_t key) override { staging_.SetBlockKey(block, key); }
  void SetLive(int64_t position, int64_t slot) override { staging_.SetLive(position, slot); }
  bool dirty() const override { return staging_.dirty(); }
  Status Flush(void* stream) override;
  const Options& options() const override { return options_; }

  gather::IndexView view() const {
    return gather::IndexView{d_addresses_,        d_next_, d_item_steps_, options_.num_blocks,
                             options_.block_steps, d_live_, d_block_keys_};
  }
  int num_sms() const { return num_sms_; }
  // Programmatic dependent launch (compute capability >= 9.0).
  bool overlap() const { return overlap_; }

 private:
  // A pinned, mapped buffer of update records and the event behind the last
  // kernel that read it.
  struct Upload {
    gather::IndexUpdate* host = nullptr;
    const gather::IndexUpdate* device = nullptr;
    size_t capacity = 0;  // records
    cudaEvent_t done = nullptr;
  };
  static constexpr size_t kMaxUploads = 8;

  // An upload buffer no kernel reads any more. REQUIRES: options_.device is
  // current.
  Result<Upload*> FreeUpload();
  Status EnsureCapacity(Upload* upload, size_t records);

  const Options options_;
  BlockIndexStaging staging_;
  std::vector<gather::IndexUpdate> updates_;  // reused by every flush
  int num_sms_ = 1;
  bool overlap_ = false;
  uint64_t* d_addresses_ = nullptr;
  int64_t* d_next_ = nullptr;
  uint32_t* d_item_steps_ = nullptr;
  uint32_t* d_live_ = nullptr;
  uint64_t* d_block_keys_ = nullptr;
  std::vector<Upload> uploads_;
  size_t next_wait_ = 0;  // the upload to wait for when all are in use
};

DeviceBlockIndexImpl::~DeviceBlockIndexImpl() {
  ScopedDevice on(options_.device);
  for (Upload& u : uploads_) {
    if (u.done != nullptr) {
      (void)cudaEventSynchronize(u.done);
      (void)cudaEventDestroy(u.done);
    }
    if (u.host != nullptr) (void)cudaFreeHost(u.host);
  }
  for (void* p : {static_cast<void*>(d_addresses_), static_cast<void*>(d_next_),
                  static_cast<void*>(d_item_steps_), static_cast<void*>(d_live_),
                  static_cast<void*>(d_block_keys_)}) {
    if (p != nullptr) (void)cudaFree(p);
  }
}

Status DeviceBlockIndexImpl::Init() {
  ScopedDevice on(options_.device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, options_.device),
      "cudaDeviceGetAttribute(multiprocessors)");
  int major = 0;
  REPLAYDB_RETURN_IF_CUDA_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options_.device),
      "cudaDeviceGetAttribute(compute capability)");
  overlap_ = major >= 9;
  const size_t blocks = static_cast<size_t>(options_.num_blocks);
  REPLAYDB_RETURN_IF_ERROR(
      DeviceAlloc(&d_addresses_, sizeof(uint64_t) * blocks, "block addresses"));
  REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_next_, sizeof(int64_t) * blocks, "next blocks"));
  const cudaStream_t stream = cudaStreamPerThread;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_addresses_, 0, sizeof(uint64_t) * blocks, stream),
                                "cudaMemsetAsync(block addresses)");
  // All-ones bytes: -1, no next block.
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_next_, 0xff, sizeof(int64_t) * blocks, stream),
                                "cudaMemsetAsync(next blocks)");
  if (options_.item_steps) {
    const size_t slots = static_cast<size_t>(options_.num_blocks * options_.block_steps);
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_item_steps_, sizeof(uint32_t) * slots, "item steps"));
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(d_item_steps_, 0, sizeof(uint32_t) * slots, stream),
        "cudaMemsetAsync(item steps)");
  }
  if (options_.uniform_draws) {
    const size_t slots = static_cast<size_t>(options_.num_blocks * options_.block_steps);
    REPLAYDB_RETURN_IF_ERROR(DeviceAlloc(&d_live_, sizeof(uint32_t) * slots, "live slots"));
    REPLAYDB_RETURN_IF_ERROR(
        DeviceAlloc(&d_block_keys_, sizeof(uint64_t) * blocks, "block keys"));
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(d_live_, 0, sizeof(uint32_t) * slots, stream),
                                  "cudaMemsetAsync(live slots)");
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(d_block_keys_, 0, sizeof(uint64_t) * blocks, stream),
        "cudaMemsetAsync(block keys)");
  }
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return Status::OK();
}

Result<DeviceBlockIndexImpl::Upload*> DeviceBlockIndexImpl::FreeUpload() {
  for (Upload& u : uploads_) {
    const cudaError_t err = cudaEventQuery(u.done);
    if (err == cudaSuccess) return &u;
    if (err != cudaErrorNotReady) return CudaStatus(err, "cudaEventQuery");
    (void)cudaGetLastError();  // not ready is no error: keep it from the next launch check
  }
  if (uploads_.size() < kMaxUploads) {
    Upload u;
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventCreateWithFlags(&u.done, cudaEventDisableTiming),
                                  "cudaEventCreateWithFlags");
    uploads_.push_back(u);
    return &uploads_.back();
  }
  Upload& u = uploads_[next_wait_++ % uploads_.size()];
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(u.done), "cudaEventSynchronize");
  return &u;
}

Status DeviceBlockIndexImpl::EnsureCapacity(Upload* upload, size_t records) {
  if (upload->capacity >= records) return Status::OK();
  if (upload->host != nullptr) {
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaFreeHost(upload->host), "cudaFreeHost");
    upload->host = nullptr;
    upload->device = nullptr;
    upload->capacity = 0;
  }
  const size_t capacity = std::max<size_t>(records + records / 2, 1024);
  const size_t bytes = sizeof(gather::IndexUpdate) * capacity;
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err != cudaSuccess) {
    return AllocationFailed(
        err, "cudaHostAlloc(" + std::to_string(bytes) + " bytes for staged index changes)");
  }
  upload->host = static_cast<gather::IndexUpdate*>(p);
  void* d = nullptr;
  REPLAYDB_RETURN_IF_CUDA_ERROR(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer");
  upload->device = static_cast<const gather::IndexUpdate*>(d);
  upload->capacity = capacity;
  return Status::OK();
}

Status DeviceBlockIndexImpl::Flush(void* stream) {
  if (!staging_.dirty()) return Status::OK();
  const Status rejected = staging_.Take(&updates_);
  if (!updates_.empty()) {
    ScopedDevice on(options_.device);
    REPLAYDB_RETURN_IF_ERROR(on.status());
    Result<Upload*> free = FreeUpload();
    REPLAYDB_RETURN_IF_ERROR(free.status().WithContext("DeviceBlockIndex::Flush"));
    Upload& upload = *free.value();
    REPLAYDB_RETURN_IF_ERROR(
        EnsureCapacity(&upload, updates_.size()).WithContext("DeviceBlockIndex::Flush"));
    std::memcpy(upload.host, updates_.data(), sizeof(gather::IndexUpdate) * updates_.size());
    const gather::IndexArrays arrays{d_addresses_, d_next_, d_item_steps_, d_live_,
                                     d_block_keys_};
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        gather::DeviceApplyIndexUpdates(arrays, upload.device,
                                        static_cast<int64_t>(updates_.size()), AsStream(stream)),
        "DeviceBlockIndex::Flush: ApplyIndexUpdatesKernel launch");
    REPLAYDB_RETURN_IF_CUDA_ERROR(cudaEventRecord(upload.done, AsStream(stream)),
                                  "DeviceBlockIndex::Flush: cudaEventRecord");
  }
  return rejected.WithContext("DeviceBlockIndex::Flush");
}

}  // namespace

Result<std::unique_ptr<DeviceBlockIndex>> DeviceBlockIndex::Create(const Options& options) {
  REPLAYDB_RETURN_IF_ERROR(ValidateIndexOptions(options));
  std::string why;
  const int count = CudaDeviceCount(&why);
  if (count == 0) return Status::NotSupported("DeviceBlockIndex::Create: no usable GPU: " + why);
  if (options.device >= count) {
    return Status::InvalidArgument("DeviceBlockIndex::Create: options.device " +
                                   std::to_string(options.device) + " is outside [0, " +
                                   std::to_string(count) + ")");
  }
  auto index = std::make_unique<DeviceBlockIndexImpl>(options);
  REPLAYDB_RETURN_IF_ERROR(index->Init().WithContext("DeviceBlockIndex::Create"));
  return std::unique_ptr<DeviceBlockIndex>(std::move(index));
}

Status Gather(const DeviceBlockIndex& index, const GatherRequest& request, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(ValidateGatherRequest(index.options(), request));
  const auto* impl = dynamic_cast<const DeviceBlockIndexImpl*>(&index);
  if (impl == nullptr) {
    return Status::InvalidArgument("Gather: the index was not made by DeviceBlockIndex::Create");
  }
  ScopedDevice on(index.options().device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  GatherLaunch launch;
  const int launches = LaunchCount(request.columns.size());
  for (int i = 0; i < launches; ++i) {
    PlanGather(impl->view(), request, i, impl->num_sms(), &launch);
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        LaunchFaults::Take()
            ? cudaErrorLaunchOutOfResources
            : gather::DeviceGather(launch.args, launch.grid, launch.threads, AsStream(stream),
                                   request.overlap_prior && impl->overlap()),
        "Gather: GatherKernel launch (" + std::to_string(launch.grid) + " x " +
            std::to_string(launch.threads) + ")");
  }
  return Status::OK();
}

Status Scatter(const DeviceBlockIndex& index, const ScatterRequest& request, void* stream) {
  REPLAYDB_RETURN_IF_ERROR(ValidateScatterRequest(request));
  const auto* impl = dynamic_cast<const DeviceBlockIndexImpl*>(&index);
  if (impl == nullptr) {
    return Status::InvalidArgument("Scatter: the index was not made by DeviceBlockIndex::Create");
  }
  if (request.columns.empty()) return Status::OK();
  ScopedDevice on(index.options().device);
  REPLAYDB_RETURN_IF_ERROR(on.status());
  ScatterLaunch launch;
  const int launches = LaunchCount(request.columns.size());
  for (int i = 0; i < launches; ++i) {
    PlanScatter(impl->view(), request, i, impl->num_sms(), &launch);
    REPLAYDB_RETURN_IF_CUDA_ERROR(
        LaunchFaults::Take()
            ? cudaErrorLaunchOutOfResources
            : gather::DeviceScatter(launch.args, launch.grid, launch.threads, AsStream(stream)),
        "Scatter: ScatterKernel launch (" + std::to_string(launch.grid) + " x " +
            std::to_string(launch.threads) + ")");
  }
  return Status::OK();
}

}  // namespace replaydb::kernels
