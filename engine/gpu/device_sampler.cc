#include "engine/gpu/device_sampler.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/rate_limiter/rate_limiter.h"
#include "kernels/runtime/device_memory.h"
#include "kernels/runtime/gpu.h"
#include "replaydb/device.h"
#include "util/checked_math.h"
#include "util/format.h"

namespace replaydb::engine {
namespace {

constexpr int kMaxInFlight = 16;
// The background thread re-checks for shutdown this often while the rate
// limiter holds it back.
constexpr std::chrono::milliseconds kPollInterval{20};

size_t Align(size_t n) { return (n + 255) / 256 * 256; }

class DeviceSamplerImpl final : public DeviceSampler {
 public:
  DeviceSamplerImpl(SamplerSource source, const DeviceSamplerOptions& options)
      : source_(std::move(source)), table_(source_.table.get()), options_(options) {}

  ~DeviceSamplerImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    (void)stream_.Synchronize();
  }

  Status Init() {
    if (source_.device.has_value()) {
      device_ = *source_.device;
    } else {
      REPLAYDB_ASSIGN_OR_RETURN(device_, kernels::CurrentDevice());
    }
    REPLAYDB_ASSIGN_OR_RETURN(stream_, DeviceStream::Create(device_));
    const int64_t B = options_.batch_size;
    const int64_t L = source_.sequence_length;
    const auto& columns = source_.columns;
    std::vector<size_t> column_bytes;
    size_t bytes = 0;
    for (size_t c = 0; c < columns.size(); ++c) {
      column_bytes.push_back(static_cast<size_t>(B * L) * columns[c].step_bytes());
      bytes += Align(column_bytes.back());
    }
    const bool weights = options_.sample.importance_beta >= 0;
    bytes += Align(B * sizeof(uint64_t)) + 2 * Align(B * sizeof(float)) + Align(B * L);
    slots_.resize(options_.in_flight);
    for (Slot& slot : slots_) {
      REPLAYDB_ASSIGN_OR_RETURN(slot.memory, DeviceBuffer::Allocate(device_, bytes));
      REPLAYDB_ASSIGN_OR_RETURN(slot.ready, kernels::DeviceEvent::Create(device_));
      REPLAYDB_ASSIGN_OR_RETURN(slot.released, kernels::DeviceEvent::Create(device_));
      auto* p = slot.memory.as<std::byte>();
      DeviceBatch& b = slot.batch;
      b.batch_size = B;
      b.sequence_length = L;
      for (size_t c = 0; c < columns.size(); ++c) {
        b.columns.push_back(p);
        p += Align(column_bytes[c]);
      }
      b.keys = reinterpret_cast<uint64_t*>(p);
      p += Align(B * sizeof(uint64_t));
      b.probabilities = reinterpret_cast<float*>(p);
      p += Align(B * sizeof(float));
      b.weights = weights ? reinterpret_cast<float*>(p) : nullptr;
      p += Align(B * sizeof(float));
      b.mask = reinterpret_cast<uint8_t*>(p);
      b.id = &slot - slots_.data();
      free_.push_back(b.id);
    }
    thread_ = std::thread([this] { Produce(); });
    return Status::OK();
  }

  Status Next(void* stream, DeviceBatch* out, std::chrono::milliseconds timeout) override {
    if (out == nullptr) return Status::InvalidArgument("DeviceSampler::Next: out is null");
    std::unique_lock<std::mutex> lock(mu_);
    if (lent_ == static_cast<int>(slots_.size())) {
      return Status::ResourceExhausted(
          "DeviceSampler::Next: all " + std::to_string(slots_.size()) +
          " batches are lent out; Release one first (or raise in_flight)");
    }
    const auto has_batch = [&] { return !ready_.empty() || !error_.ok(); };
    if (timeout < std::chrono::milliseconds::zero()) {
      cv_.wait(lock, has_batch);
    } else if (!cv_.wait_for(lock, timeout, has_batch)) {
      return Status::DeadlineExceeded("DeviceSampler::Next: no batch within " +
                                      std::to_string(timeout.count()) + " ms");
    }
    if (ready_.empty()) {
      Status s = error_;
      if (s.code() == Status::Code::kDeadlineExceeded) {
        // Reported: the background thread tries again.
        error_ = Status::OK();
        cv_.notify_all();
      }
      return s;
    }
    Slot& slot = slots_[ready_.front()];
    REPLAYDB_RETURN_IF_ERROR(slot.ready.MakeStreamWait(stream));
    ready_.pop_front();
    slot.lent = true;
    ++lent_;
    *out = slot.batch;
    return Status::OK();
  }

  Status Release(const DeviceBatch& batch, void* stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch.id < 0 || batch.id >= static_cast<int64_t>(slots_.size()) ||
        !slots_[batch.id].lent) {
      return Status::InvalidArgument("DeviceSampler::Release: batch " + std::to_string(batch.id) +
                                     " is not lent out by this sampler");
    }
    Slot& slot = slots_[batch.id];
    REPLAYDB_RETURN_IF_ERROR(slot.released.Record(stream));
    slot.lent = false;
    --lent_;
    free_.push_back(batch.id);
    cv_.notify_all();
    return Status::OK();
  }

 private:
  struct Slot {
    DeviceBuffer memory;
    DeviceBatch batch;
    kernels::DeviceEvent ready;     // the gather into it is done
    kernels::DeviceEvent released;  // the learner is done with it
    bool lent = false;
  };

  // One batch into `slot`, retrying while the rate limiter holds it back,
  // up to options_.sample.timeout.
  Status Fill(Slot& slot) {
    REPLAYDB_RETURN_IF_ERROR(slot.released.MakeStreamWait(stream_.handle()));
    DeviceSampleOutput out;
    out.keys = slot.batch.keys;
    out.probabilities = slot.batch.probabilities;
    out.weights = slot.batch.weights;
    out.columns = slot.batch.columns;
    out.mask = slot.batch.mask;
    const auto limit = options_.sample.timeout;
    const Deadline deadline = DeadlineAfter(limit);
    while (true) {
      SampleOptions chunk = options_.sample;
      auto wait = kPollInterval;
      if (limit >= std::chrono::milliseconds::zero()) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        wait = std::clamp(left, std::chrono::milliseconds::zero(), kPollInterval);
      }
      chunk.timeout = wait;
      Status s = table_->SampleToDevice(options_.batch_size, chunk, out, stream_.handle());
      if (s.code() != Status::Code::kDeadlineExceeded) {
        if (s.ok()) s = slot.ready.Record(stream_.handle());
        return s;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return Status::Cancelled("DeviceSampler: shutting down");
      }
      if (limit >= std::chrono::milliseconds::zero() && Clock::now() >= deadline) {
        return Status::DeadlineExceeded("DeviceSampler: the rate limiter admitted no batch of " +
                                        std::to_string(options_.batch_size) + " within " +
                                        std::to_string(limit.count()) + " ms");
      }
    }
  }

  void Produce() {
    // Copies into the batches (a remote table's) run on this thread's
    // device.
    const Status on_device = kernels::UseDevice(device_);
    std::unique_lock<std::mutex> lock(mu_);
    if (!on_device.ok()) {
      error_ = on_device;
      cv_.notify_all();
      return;
    }
    while (true) {
      cv_.wait(lock, [&] { return stop_ || (!free_.empty() && error_.ok()); });
      if (stop_) return;
      const int64_t id = free_.front();
      free_.pop_front();
      lock.unlock();
      Status s = Fill(slots_[id]);
      lock.lock();
      if (s.ok()) {
        ready_.push_back(id);
      } else {
        free_.push_front(id);
        if (!stop_) error_ = s;
      }
      cv_.notify_all();
    }
  }

  const SamplerSource source_;
  Table* const table_;  // source_.table
  const DeviceSamplerOptions options_;
  int device_ = 0;
  DeviceStream stream_;
  std::vector<Slot> slots_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int64_t> free_;   // to fill, oldest released first
  std::deque<int64_t> ready_;  // filled, in order
  int lent_ = 0;
  Status error_;  // from the background thread; Next returns it
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

Status CheckDeviceSampler(const SamplerSource& source, const DeviceSamplerOptions& options) {
  const std::string where = "table " + util::Quoted(source.table->name()) + ": DeviceSampler";
  const int64_t B = options.batch_size;
  if (B < 1) {
    return Status::InvalidArgument(where + " batch_size is " + std::to_string(B) +
                                   "; it must be >= 1");
  }
  if (B > kMaxBatchSize) {
    return Status::InvalidArgument(where + " batch_size is " + std::to_string(B) +
                                   "; it must be at most " + std::to_string(kMaxBatchSize) +
                                   ", as Table::Sample's");
  }
  // Each of its in_flight batches in device memory: B x L steps of every
  // column and the mask.
  uint64_t step_bytes = 1;
  for (const ColumnSpec& c : source.columns) step_bytes += c.step_bytes();
  uint64_t bytes = 0;
  const bool fits = util::CheckedMul(static_cast<uint64_t>(B),
                                     static_cast<uint64_t>(source.sequence_length), &bytes) &&
                    util::CheckedMul(bytes, step_bytes, &bytes);
  if (!fits || bytes > kMaxSampleBytes) {
    return Status::ResourceExhausted(
        where + ": a batch of " + std::to_string(B) + " items of " +
        std::to_string(source.sequence_length) + " steps needs " +
        (fits ? std::to_string(bytes) : "more than 2^64") +
        " bytes of device memory, more than the limit of " + std::to_string(kMaxSampleBytes) +
        " (kMaxSampleBytes)");
  }
  if (options.in_flight < 1 || options.in_flight > kMaxInFlight) {
    return Status::InvalidArgument(where + " in_flight is " + std::to_string(options.in_flight) +
                                   "; it must be between 1 and " + std::to_string(kMaxInFlight));
  }
  if (options.sample.peek) {
    return Status::InvalidArgument(where + " does not peek (SampleOptions::peek is for "
                                   "Table::Sample)");
  }
  if (!options.sample.gather) {
    return Status::InvalidArgument(where + " needs sample.gather = true (it gathers batches)");
  }
  return Status::OK();
}

Result<std::unique_ptr<DeviceSampler>> NewDeviceSampler(SamplerSource source,
                                                        const DeviceSamplerOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckDeviceSampler(source, options));
  const std::string where = "table " + util::Quoted(source.table->name()) + ": DeviceSampler";
  auto sampler = std::make_unique<DeviceSamplerImpl>(std::move(source), options);
  REPLAYDB_RETURN_IF_ERROR(sampler->Init().WithContext(where));
  return std::unique_ptr<DeviceSampler>(std::move(sampler));
}

}  // namespace replaydb::engine
