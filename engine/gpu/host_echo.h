// Copies of device arrays into pinned host memory, made in stream order and
// taken in the order they were made: how a logged table learns the
// priorities UpdatePrioritiesFromDevice gave its GPU without making the
// caller wait for the caller's stream (docs/durability.md, "Priorities set
// on the GPU"). Push queues the copies on the caller's stream and returns;
// Pop (another thread, holding no table lock) waits for the oldest to land
// and hands its bytes over. Pinned buffers are kept for reuse.
#ifndef REPLAYDB_ENGINE_GPU_HOST_ECHO_H_
#define REPLAYDB_ENGINE_GPU_HOST_ECHO_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kernels/runtime/device_memory.h"
#include "replaydb/status.h"

namespace replaydb::engine {

class HostEcho {
 public:
  // Device memory to copy: `bytes` at `data`.
  struct Part {
    const void* data;
    size_t bytes;
  };

  explicit HostEcho(int device) : device_(device) {}
  ~HostEcho();
  HostEcho(const HostEcho&) = delete;
  HostEcho& operator=(const HostEcho&) = delete;

  // Queues copies of `parts`, one after the other into one buffer, on
  // `stream` (the caller's: the copies see what was queued there before).
  Status Push(std::span<const Part> parts, void* stream);
  // Waits for the oldest copy to land and puts its bytes into *out (the
  // parts, back to back). FailedPrecondition when nothing is queued. One
  // thread at a time pops.
  Status Pop(std::string* out);
  size_t queued() const;

 private:
  struct Buffer {
    void* data = nullptr;  // pinned
    size_t capacity = 0;
    kernels::DeviceEvent done;
  };
  struct Entry {
    std::unique_ptr<Buffer> buffer;
    size_t bytes = 0;
  };

  const int device_;
  mutable std::mutex mu_;
  std::deque<Entry> queued_;  // oldest first
  std::vector<std::unique_ptr<Buffer>> free_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_HOST_ECHO_H_
