// AccessEpochs: when the GPU is done with the accesses a DeviceTier launched.
//
// Every launch that reads or writes blocks gets the next epoch (1, 2, ...)
// and an event recorded behind it on its stream. Epoch e is complete when
// the events of epochs 1..e all are. Streams run independently, so events
// of different streams complete in any order; the events of one stream
// complete in the order they were recorded.
//
// Polling an event costs the host about a microsecond and a half (measured
// on an H200 machine, against 0.2 us to record one), so Completed() asks as
// few as it can: it takes the longest run at the front of the queue that
// was recorded on one stream, asks its last event, and if that is not done
// yet, bisects the run for the last done one (events of one stream finish
// in order). A sampler that keeps one stream busy pays one query per poll,
// however many launches it made since the last.
//
// `Event` is kernels::DeviceEvent in the engine and a fake in the tests:
// Result<bool> Done() const, Status Synchronize() const, movable.
// Not thread-safe (the owning table's mutex guards it).
#ifndef REPLAYDB_ENGINE_GPU_ACCESS_EPOCHS_H_
#define REPLAYDB_ENGINE_GPU_ACCESS_EPOCHS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "replaydb/status.h"

namespace replaydb::engine {

template <typename Event>
class AccessEpochs {
 public:
  // Appends an access whose `event` was recorded on the stream `stream_id`
  // (a process-unique id, not a handle: handles are reused); returns its
  // epoch.
  uint64_t Push(uint64_t stream_id, Event event) {
    in_flight_.push_back(Entry{++launched_, stream_id, std::move(event)});
    return launched_;
  }

  // Events of retired accesses, to record the next ones on.
  bool has_spare() const { return !spare_.empty(); }
  // REQUIRES: has_spare()
  Event TakeSpare() {
    Event e = std::move(spare_.back());
    spare_.pop_back();
    return e;
  }

  // The last epoch launched; 0 before any.
  uint64_t launched() const { return launched_; }
  // The last epoch known complete, without polling.
  uint64_t completed() const { return completed_; }
  size_t in_flight() const { return in_flight_.size(); }

  // Polls (never blocks) and returns the last epoch known complete. A
  // failing query counts as not done.
  uint64_t Completed() {
    while (!in_flight_.empty()) {
      // The run at the front recorded on one stream: [0, run).
      const uint64_t stream = in_flight_.front().stream;
      size_t run = 1;
      while (run < in_flight_.size() && in_flight_[run].stream == stream) ++run;
      // The number of its events done, a prefix: bisect for it, asking the
      // last first.
      size_t done = 0;
      if (IsDone(run - 1)) {
        done = run;
      } else {
        size_t lo = 0;  // events [0, lo) are done
        size_t hi = run - 1;  // event hi is not
        while (lo < hi) {
          const size_t mid = lo + (hi - lo) / 2;
          if (IsDone(mid)) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        done = lo;
      }
      Retire(done);
      if (done < run) break;
    }
    return completed_;
  }

  // Calls f(event) on the last event of each stream with accesses in flight
  // (together they cover every access in flight), returning the first
  // error.
  template <typename F>
  Status ForLastOfEachStream(F f) const {
    std::vector<uint64_t> seen;
    for (auto it = in_flight_.rbegin(); it != in_flight_.rend(); ++it) {
      if (std::find(seen.begin(), seen.end(), it->stream) != seen.end()) continue;
      seen.push_back(it->stream);
      REPLAYDB_RETURN_IF_ERROR(f(it->event));
    }
    return Status::OK();
  }

  // Blocks the host until `epoch` is complete (or nothing is in flight).
  Status WaitFor(uint64_t epoch) {
    while (completed_ < epoch && !in_flight_.empty()) {
      REPLAYDB_RETURN_IF_ERROR(in_flight_.front().event.Synchronize());
      Retire(1);
    }
    return Status::OK();
  }

  // Blocks until everything launched is complete; errors are ignored
  // (for destructors).
  void WaitAll() {
    for (Entry& e : in_flight_) (void)e.event.Synchronize();
    if (!in_flight_.empty()) completed_ = in_flight_.back().epoch;
    in_flight_.clear();
  }

 private:
  struct Entry {
    uint64_t epoch;
    uint64_t stream;
    Event event;
  };

  bool IsDone(size_t i) const {
    auto done = in_flight_[i].event.Done();
    return done.ok() && *done;
  }

  // Retires the first n entries (all done).
  void Retire(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      completed_ = in_flight_.front().epoch;
      spare_.push_back(std::move(in_flight_.front().event));
      in_flight_.pop_front();
    }
  }

  uint64_t launched_ = 0;
  uint64_t completed_ = 0;
  std::deque<Entry> in_flight_;
  std::vector<Event> spare_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_GPU_ACCESS_EPOCHS_H_
