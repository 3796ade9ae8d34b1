// GPU helpers for callers that do not use CUDA directly (tools, tests,
// bindings): device memory, streams, and whether a GPU can be used at all.
// A learner with its own CUDA code passes its own device pointers and
// cudaStream_t (as void*) to the Table calls instead. Plain C++: no CUDA
// header. In a build without nvcc every call returns NotSupported and
// CudaDeviceCount returns 0.
//
// Streams are passed as void* (a cudaStream_t); nullptr is the legacy default
// stream. Every copy is ordered after the work already queued on `stream` and
// returns once the copy is done (it synchronises that stream), except the
// ...Async copies, which only queue it.
//
// Thread safety: not thread-safe; distinct objects may be used from distinct
// threads.
#ifndef REPLAYDB_DEVICE_H_
#define REPLAYDB_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "replaydb/status.h"

namespace replaydb {

// Number of CUDA devices this process can use. When it is 0, *why_none (if
// not null) says why (built without CUDA, no driver, no device).
int CudaDeviceCount(std::string* why_none = nullptr);


// Owns `size()` bytes of memory on one device; freed on destruction.
// Movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // ResourceExhausted (naming the bytes) when the device is out of memory;
  // NotSupported without CUDA. `bytes` may be 0 (data() is then null).
  static Result<DeviceBuffer> Allocate(int device, size_t bytes);

  // Copies `bytes` from host `src` to data() + offset.
  // REQUIRES: offset + bytes <= size().
  Status CopyFromHost(const void* src, size_t bytes, size_t offset = 0, void* stream = nullptr);
  // Copies `bytes` from data() + offset to host `dst`.
  // REQUIRES: offset + bytes <= size().
  Status CopyToHost(void* dst, size_t bytes, size_t offset = 0, void* stream = nullptr) const;
  // Sets every byte to `value` (e.g. 0xFF to poison outputs before a call).
  Status Fill(uint8_t value, void* stream = nullptr);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  void Release();

  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = 0;
};

// A non-blocking CUDA stream (it does not synchronise with the legacy default
// stream), destroyed with the object. Movable, not copyable.
class DeviceStream {
 public:
  DeviceStream() = default;
  ~DeviceStream();
  DeviceStream(DeviceStream&& other) noexcept;
  DeviceStream& operator=(DeviceStream&& other) noexcept;
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  static Result<DeviceStream> Create(int device);

  // The cudaStream_t, for calls that take a void* stream.
  void* handle() const { return stream_; }
  // Waits until all work queued on the stream is done.
  Status Synchronize() const;

 private:
  void Release();

  void* stream_ = nullptr;
  int device_ = 0;
};

// Copies `bytes` from device memory (any device pointer, e.g. a
// DeviceBatch column) to host memory, ordered after the work queued on
// `stream`; returns once the copy is done.
Status CopyDeviceToHost(void* host_dst, const void* device_src, size_t bytes,
                        void* stream = nullptr);

// Owns `size()` bytes of page-locked (pinned) host memory, mapped into every
// device's address space (cudaHostAlloc, portable and mapped); freed on
// destruction. Copies from it to a device run as DMA at the link's full
// speed and overlap host work; kernels may also read it directly. Movable,
// not copyable.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // ResourceExhausted (naming the bytes) when the system cannot pin that
  // much; NotSupported without CUDA. `bytes` may be 0 (data() is then null).
  // The memory is not initialised.
  static Result<PinnedBuffer> Allocate(size_t bytes);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void Release();

  void* data_ = nullptr;
  size_t size_ = 0;
};

// Queue a copy of `bytes` on `stream`, ordered after the work already queued
// there, and return without waiting for it: the copy is done for the work
// queued on `stream` afterwards, and for the host after
// DeviceStream::Synchronize (or DeviceSynchronize). Until then both buffers
// must stay allocated and the source unchanged. `stream` may belong to any
// device. InvalidArgument for a null pointer with bytes > 0; 0 bytes is a
// no-op.
//
// Device memory to device memory (the same device, or peers).
Status CopyDeviceToDeviceAsync(void* device_dst, const void* device_src, size_t bytes,
                               void* stream = nullptr);
// Host memory to device memory. From pinned memory (PinnedBuffer) this is a
// DMA the call only queues; from pageable memory CUDA stages the bytes and
// the call may return only once the copy is done.
Status CopyHostToDeviceAsync(void* device_dst, const void* host_src, size_t bytes,
                             void* stream = nullptr);

// Waits until all work on `device` is done (cudaDeviceSynchronize).
Status DeviceSynchronize(int device);

// Makes the work queued on `waiting` from now on wait, on the device, for the
// work queued on `on` so far (an event recorded on `on` that `waiting` waits
// for); returns without waiting on the host. nullptr is the legacy default
// stream (of the current device); the same stream twice is a no-op. For a
// consumer reading on its own stream what was written on another (DLPack's
// stream hand-over).
Status StreamWait(void* waiting, void* on);

// Ordering by a caller's own events, for callers whose events come from
// elsewhere (replaydb.distributed: interprocess events opened from another
// process's IPC handles): `event` is a cudaEvent_t and `stream` a
// cudaStream_t of the same device, as void*. StreamWaitEvent makes the work
// queued on `stream` from now on wait, on the device, for the last record of
// `event` (a never-recorded event is complete); RecordEvent records `event`
// on `stream`. InvalidArgument for a null event.
Status StreamWaitEvent(void* stream, void* event);
Status RecordEvent(void* event, void* stream);

// For benchmarks: the device's time per call of `calls` calls of `call`
// (each queues work on `stream`, a cudaStream_t of `device`), without the
// host's: a one-thread kernel holds the stream while the host queues them,
// then lets them run back to back; the result is the time in microseconds
// from its release to the end of the last call, over `calls`. Keep calls *
// the launches of one call well below the driver's queue (some hundreds): a
// host blocked on a full queue behind the held stream waits for the hold's
// time limit (10 s), and the result is then an error. Make `call` once
// before, outside the hold: CUDA loads kernels lazily, on first use, and
// loading one waits for the device to be idle, so a first use behind the
// hold blocks the host until the hold times out. InvalidArgument when
// calls < 1; NotSupported in a build without CUDA.
Result<double> DeviceMicrosPerCall(int device, void* stream, int calls,
                                   const std::function<Status()>& call);

// A run of rows of a batch drawn from several shards (replaydb.distributed):
// `rows` consecutive rows drawn from shard `shard`, whose share of the whole
// table's sampling mass is `share`.
struct BatchRun {
  int64_t rows = 0;
  int64_t shard = 0;
  double share = 0;
};

// The most runs one LabelBatchRuns takes.
inline constexpr size_t kMaxBatchRuns = 64;

// A batch made of runs from several shards gets its global probabilities and
// shard ids in one launch, on `stream` of GPU `device`: for row b of run r
// (runs in order), probabilities[b] = local[b] * runs[r].share (float64) and
// shards[b] = runs[r].shard. The arrays hold the runs' rows in all.
// InvalidArgument (naming what) for more than kMaxBatchRuns runs, negative
// rows, a share that is not finite and >= 0, or a null array with rows.
Status LabelBatchRuns(int device, std::span<const BatchRun> runs, const float* local,
                      double* probabilities, int64_t* shards, void* stream);

}  // namespace replaydb

#endif  // REPLAYDB_DEVICE_H_
