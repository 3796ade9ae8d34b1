#include "wal/replica_set.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <future>
#include <limits>

namespace replaydb::wal {

namespace {

double Seconds(ReplicaSet::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string Millis(ReplicaSet::Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

// Seconds since the Unix epoch of a steady clock's `when` (REPLICAS keeps
// wall-clock times: a steady clock's do not outlive the process).
double WallSeconds(ReplicaSet::Clock::time_point when) {
  const auto ago = ReplicaSet::Clock::now() - when;
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch() - ago)
      .count();
}

}  // namespace

ReplicaSet::ReplicaSet(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}

ReplicaSet::~ReplicaSet() {
  Done done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    for (Waiter& w : waiters_) {
      done.emplace_back(std::move(w.done),
                        Status::Cancelled("table '" + w.table +
                                          "': the database closed while an append waited for "
                                          "its replicas (it is stored on the primary)"));
    }
    waiters_.clear();
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  for (auto& [f, s] : done) f(s);
}

ReplicaSet::Replica& ReplicaSet::EntryLocked(const std::string& name) {
  if (replicas_.size() >= kMaxReplicas && replicas_.count(name) == 0) {
    // The one that read least recently goes (it reads again from its own place).
    auto stalest = std::min_element(
        replicas_.begin(), replicas_.end(),
        [](const auto& a, const auto& b) { return a.second.when < b.second.when; });
    replicas_.erase(stalest);
  }
  return replicas_[name];
}

void ReplicaSet::Hold(const std::string& name, uint64_t segment) {
  std::lock_guard<std::mutex> lock(mu_);
  Replica& r = EntryLocked(name);
  r.hold = segment;
  r.when = Clock::now();
}

void ReplicaSet::Read(const std::string& name, LogPosition from, LogPosition end, uint64_t hold) {
  const Clock::time_point now = Clock::now();
  Done done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Replica& r = EntryLocked(name);
    if (!r.reads || from >= end) {
      r.caught_up = now;  // new here (Kafka's followers start caught up), or at the end
    } else if (from >= r.end_at_read) {
      r.caught_up = std::max(r.caught_up, r.when);  // where the log ended at its last read
    }
    r.reads = true;
    any_read_.store(true, std::memory_order_relaxed);
    r.hold = hold;
    r.when = now;
    r.applied = std::max(r.applied, from);
    r.end_at_read = end;
    if (!waiters_.empty()) SweepLocked(now, &done);
  }
  for (auto& [f, s] : done) f(s);
}

std::string ReplicaSet::InSyncNamesLocked(Clock::time_point now) const {
  std::string names;
  for (const auto& [name, r] : replicas_) {
    if (InSync(r, now)) names += (names.empty() ? "" : ", ") + name;
  }
  return names.empty() ? "none" : names;
}

Status ReplicaSet::CheckInSync(int k, const std::string& table) const {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  int in_sync = 0;
  for (const auto& [name, r] : replicas_) in_sync += InSync(r, now) ? 1 : 0;
  if (in_sync >= k) return Status::OK();
  return Status::Unavailable(
      "table '" + table + "': acks replicated(" + std::to_string(k) + ") needs " +
      std::to_string(k) + " in-sync replica" + (k == 1 ? "" : "s") + "; " +
      std::to_string(in_sync) + (in_sync == 1 ? " is" : " are") + " in sync (" +
      InSyncNamesLocked(now) + "): nothing was appended; try again once replicas follow");
}

Status ReplicaSet::Evaluate(const Waiter& w, Clock::time_point now, bool* finished) const {
  *finished = true;
  if (w.replicated) {
    int have = 0, could = 0;
    for (const auto& [name, r] : replicas_) {
      if (r.applied >= w.position) {
        ++have;
      } else if (InSync(r, now)) {
        ++could;
      }
    }
    if (have >= w.k) return Status::OK();
    const std::string where = "table '" + w.table + "': an append waiting for replicated(" +
                              std::to_string(w.k) + ") (segment " +
                              std::to_string(w.position.segment) + ", offset " +
                              std::to_string(w.position.offset) + ")";
    if (have + could < w.k) {
      return Status::Unavailable(
          where + " has " + std::to_string(have) + " replica" + (have == 1 ? "" : "s") +
          " with it and " + std::to_string(could) + " more in sync (" + InSyncNamesLocked(now) +
          "): it is stored on the primary, not acknowledged by " + std::to_string(w.k));
    }
    if (now >= w.until) {
      return Status::DeadlineExceeded(where + " timed out with " + std::to_string(have) +
                                      " replica" + (have == 1 ? "" : "s") +
                                      " applying it; it is stored on the primary");
    }
  } else {
    const Replica* slowest = nullptr;
    std::string slowest_name;
    for (const auto& [name, r] : replicas_) {
      if (!Live(r, now) || now - r.caught_up <= w.max_lag) continue;
      if (slowest == nullptr || r.caught_up < slowest->caught_up) {
        slowest = &r;
        slowest_name = name;
      }
    }
    if (slowest == nullptr) return Status::OK();
    if (now >= w.until) {
      return Status::DeadlineExceeded("table '" + w.table + "': timed out waiting for replica " +
                                      slowest_name + ", " + Millis(now - slowest->caught_up) +
                                      " behind the primary (max_lag_ms " +
                                      std::to_string(w.max_lag.count()) + ")");
    }
  }
  *finished = false;
  return Status::OK();
}

void ReplicaSet::SweepLocked(Clock::time_point now, Done* done) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    bool finished = false;
    Status s = Evaluate(*it, now, &finished);
    if (!finished) {
      ++it;
      continue;
    }
    done->emplace_back(std::move(it->done), std::move(s));
    it = waiters_.erase(it);
  }
}

void ReplicaSet::Add(Waiter w) {
  Status s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool finished = false;
    s = closing_ ? Status::Cancelled("table '" + w.table + "': the database is closing")
                 : Evaluate(w, Clock::now(), &finished);
    if (!closing_ && !finished) {
      waiters_.push_back(std::move(w));
      if (!timer_.joinable()) timer_ = std::thread([this] { TimerLoop(); });
      cv_.notify_all();
      return;
    }
  }
  w.done(s);
}

void ReplicaSet::WhenReplicated(LogPosition position, int k, Clock::time_point until,
                                const std::string& table, std::function<void(Status)> done) {
  Waiter w;
  w.replicated = true;
  w.position = position;
  w.k = k;
  w.until = until;
  w.table = table;
  w.done = std::move(done);
  Add(std::move(w));
}

void ReplicaSet::WhenCaughtUp(std::chrono::milliseconds max_lag, Clock::time_point until,
                              const std::string& table, std::function<void(Status)> done) {
  Waiter w;
  w.max_lag = max_lag;
  w.until = until;
  w.table = table;
  w.done = std::move(done);
  Add(std::move(w));
}

Status ReplicaSet::WaitReplicated(LogPosition position, int k, Clock::time_point until,
                                  const std::string& table) {
  std::promise<Status> promise;
  std::future<Status> result = promise.get_future();
  WhenReplicated(position, k, until, table, [&promise](Status s) { promise.set_value(s); });
  return result.get();
}

Status ReplicaSet::WaitCaughtUp(std::chrono::milliseconds max_lag, Clock::time_point until,
                                const std::string& table) {
  std::promise<Status> promise;
  std::future<Status> result = promise.get_future();
  WhenCaughtUp(max_lag, until, table, [&promise](Status s) { promise.set_value(s); });
  return result.get();
}

bool ReplicaSet::Lagging(std::chrono::milliseconds max_lag) const {
  if (!any_read_.load(std::memory_order_relaxed)) return false;  // (the common case, unlocked)
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, r] : replicas_) {
    if (Live(r, now) && now - r.caught_up > max_lag) return true;
  }
  return false;
}

void ReplicaSet::TimerLoop() {
  // Deadlines and replicas falling out of sync are seen within kTick.
  constexpr std::chrono::milliseconds kTick{20};
  std::unique_lock<std::mutex> lock(mu_);
  while (!closing_) {
    if (waiters_.empty()) {
      cv_.wait(lock, [&] { return closing_ || !waiters_.empty(); });
      continue;
    }
    cv_.wait_for(lock, kTick);
    if (closing_) break;
    Done done;
    SweepLocked(Clock::now(), &done);
    if (done.empty()) continue;
    lock.unlock();
    for (auto& [f, s] : done) f(s);
    lock.lock();
  }
}

std::vector<ReplicaProgress> ReplicaSet::Progress() const {
  const Clock::time_point now = Clock::now();
  std::vector<ReplicaProgress> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, r] : replicas_) {
    if (now - r.when > kHoldTime) continue;
    ReplicaProgress p;
    p.name = name;
    p.segment = r.hold;
    p.seconds_since_read = Seconds(now - r.when);
    if (r.reads) {
      p.applied_segment = r.applied.segment;
      p.applied_offset = r.applied.offset;
      p.lag_seconds = Seconds(now - r.caught_up);
      p.in_sync = InSync(r, now);
    }
    out.push_back(std::move(p));
  }
  return out;
}

uint64_t ReplicaSet::SegmentNeeded() const {
  const Clock::time_point now = Clock::now();
  uint64_t need = std::numeric_limits<uint64_t>::max();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, r] : replicas_) {
    if (now - r.when > kHoldTime) continue;
    // Segment 0: it reads from the log's beginning.
    need = std::min(need, std::max<uint64_t>(r.hold, 1));
  }
  return need;
}

void ReplicaSet::SaveHolds() const {
  std::string text;
  {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    if (replicas_.empty()) return;
    for (const auto& [name, r] : replicas_) {
      if (now - r.when > kHoldTime) continue;
      char when[32];
      std::snprintf(when, sizeof(when), "%.3f", WallSeconds(r.when));
      text += std::to_string(r.hold) + " " + when + " " + name + "\n";
    }
  }
  (void)env_->WriteFileAtomic(dir_ + "/" + kFile, text);
}

void ReplicaSet::LoadHolds() {
  std::map<std::string, Replica> replicas = ReadFile();
  std::lock_guard<std::mutex> lock(mu_);
  replicas_.swap(replicas);
}

std::vector<ReplicaProgress> ReplicaSet::SavedProgress() const {
  const Clock::time_point now = Clock::now();
  std::vector<ReplicaProgress> out;
  for (const auto& [name, r] : ReadFile()) {
    if (now - r.when > kHoldTime) continue;
    out.push_back(ReplicaProgress{name, r.hold, Seconds(now - r.when)});
  }
  return out;
}

std::map<std::string, ReplicaSet::Replica> ReplicaSet::ReadFile() const {
  std::map<std::string, Replica> replicas;
  std::string text;
  if (!env_->ReadFileToString(dir_ + "/" + kFile, &text).ok()) return replicas;
  const Clock::time_point now = Clock::now();
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    uint64_t segment = 0;
    double wall = 0;
    int name_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNu64 " %lf %n", &segment, &wall, &name_at) != 2 ||
        name_at == 0 || static_cast<size_t>(name_at) >= line.size()) {
      continue;  // not a line of this format: a hold forgotten, not an error
    }
    const double ago =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
        wall;
    Replica r;
    r.hold = segment;
    r.when = now - std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(std::max(ago, 0.0)));
    replicas[line.substr(static_cast<size_t>(name_at))] = r;
  }
  return replicas;
}

}  // namespace replaydb::wal
