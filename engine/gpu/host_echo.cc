#include "engine/gpu/host_echo.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace replaydb::engine {

HostEcho::~HostEcho() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : queued_) {
    (void)e.buffer->done.Synchronize();  // the copy must not land in freed memory
    kernels::FreePinned(e.buffer->data);
  }
  for (const std::unique_ptr<Buffer>& b : free_) kernels::FreePinned(b->data);
}

Status HostEcho::Push(std::span<const Part> parts, void* stream) {
  size_t bytes = 0;
  for (const Part& p : parts) bytes += p.bytes;
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i]->capacity >= bytes) {
        buffer = std::move(free_[i]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  if (buffer == nullptr) {  // none large enough: a new one, twice the size
    buffer = std::make_unique<Buffer>();
    REPLAYDB_ASSIGN_OR_RETURN(buffer->done, kernels::DeviceEvent::Create(device_));
    buffer->capacity = std::max<size_t>(bytes * 2, 4096);
    REPLAYDB_RETURN_IF_ERROR(kernels::AllocatePinned(buffer->capacity, &buffer->data));
  }
  size_t at = 0;
  Status s;
  for (const Part& p : parts) {
    s = kernels::CopyFromDeviceAsync(device_, static_cast<std::byte*>(buffer->data) + at, p.data,
                                     p.bytes, stream);
    if (!s.ok()) break;
    at += p.bytes;
  }
  if (s.ok()) s = buffer->done.Record(stream);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) {
    // Copies already queued may still land in it: keep it only after them.
    (void)buffer->done.Record(stream);
    (void)buffer->done.Synchronize();
    free_.push_back(std::move(buffer));
    return s;
  }
  queued_.push_back(Entry{std::move(buffer), bytes});
  return Status::OK();
}

Status HostEcho::Pop(std::string* out) {
  Buffer* oldest = nullptr;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queued_.empty()) return Status::FailedPrecondition("HostEcho::Pop: nothing queued");
    oldest = queued_.front().buffer.get();  // only Pop takes entries: it stays
    bytes = queued_.front().bytes;
  }
  const Status landed = oldest->done.Synchronize();
  if (landed.ok()) out->assign(static_cast<const char*>(oldest->data), bytes);
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(queued_.front().buffer));
  queued_.pop_front();
  return landed;
}

size_t HostEcho::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_.size();
}

}  // namespace replaydb::engine
