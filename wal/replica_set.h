// ReplicaSet: a primary's view of the replicas that read its write-ahead
// log (docs/replication.md), as their reads tell it (DBImpl::ReadLog):
// where each has applied the log to, whether it keeps up, which segments
// it still needs, and the writers waiting for them (AckMode::kReplicated,
// and kLeader's wait while a replica lags more than max_lag).
//
// A replica's read from position P says that it applied (and synced, where
// its log syncs kAlways) everything before P. It is in sync while it reads
// at least every kLiveTime and has caught up within kInSyncLag: its read
// reached where the log ended at its previous read (Kafka's rule for its
// in-sync replicas).
//
// Thread safety: every method may be called from any thread. Waiters'
// callbacks run on the thread of the read that satisfies them, or on the
// set's own timer thread (deadlines, replicas gone), never under its lock.
#ifndef REPLAYDB_WAL_REPLICA_SET_H_
#define REPLAYDB_WAL_REPLICA_SET_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/env.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::wal {

class ReplicaSet {
 public:
  using Clock = std::chrono::steady_clock;
  // Replicas remembered at most (the one that read least recently goes).
  static constexpr size_t kMaxReplicas = 64;
  // A replica that has not read for this long no longer holds segments.
  static constexpr std::chrono::minutes kHoldTime{10};
  // In sync: read within kLiveTime (a replica's reads wait at most 200 ms
  // for records), and caught up within kInSyncLag.
  static constexpr std::chrono::milliseconds kLiveTime{1000};
  static constexpr std::chrono::seconds kInSyncLag{10};
  // The file the replicas' held segments are kept in (SaveHolds).
  static constexpr const char* kFile = "REPLICAS";

  // `dir`: the database's directory (its REPLICAS file).
  ReplicaSet(Env* env, std::string dir);
  // Waiters left fail Cancelled.
  ~ReplicaSet();
  ReplicaSet(const ReplicaSet&) = delete;
  ReplicaSet& operator=(const ReplicaSet&) = delete;

  // Replica `name` reads from `from` (it applied everything before it) with
  // the log ending at `end`; checkpoints keep the segments from `hold` on.
  // Waiters it satisfies are called.
  void Read(const std::string& name, LogPosition from, LogPosition end, uint64_t hold);
  // Replica `name` will read from `segment` on (it copies a snapshot taken
  // there): checkpoints keep it for kHoldTime from now. Unlike a read, this
  // neither makes it live nor tells where it has applied to.
  void Hold(const std::string& name, uint64_t segment);

  // OK when at least `k` replicas are in sync; Unavailable naming `table`,
  // the mode and those in sync otherwise.
  Status CheckInSync(int k, const std::string& table) const;
  // `done` is called once: OK when `k` replicas have applied everything
  // before `position`; Unavailable when fewer than `k` could (the others
  // fell out of sync); DeadlineExceeded at `until`; Cancelled when the set
  // closes. May be called at once, on this thread.
  void WhenReplicated(LogPosition position, int k, Clock::time_point until,
                      const std::string& table, std::function<void(Status)> done);
  // `done` is called once no live replica lags more than `max_lag` (OK), or
  // at `until` (DeadlineExceeded naming the replica and its lag), or when
  // the set closes (Cancelled).
  void WhenCaughtUp(std::chrono::milliseconds max_lag, Clock::time_point until,
                    const std::string& table, std::function<void(Status)> done);
  // The two above, waited for.
  Status WaitReplicated(LogPosition position, int k, Clock::time_point until,
                        const std::string& table);
  Status WaitCaughtUp(std::chrono::milliseconds max_lag, Clock::time_point until,
                      const std::string& table);
  // Whether a live replica lags more than `max_lag` now (a cheap check
  // before WhenCaughtUp).
  bool Lagging(std::chrono::milliseconds max_lag) const;

  // The replicas that read within kHoldTime.
  std::vector<ReplicaProgress> Progress() const;
  // The first segment a replica read within kHoldTime still needs
  // (UINT64_MAX: none).
  uint64_t SegmentNeeded() const;
  // The held segments in DIR/REPLICAS, a line per replica: "SEGMENT
  // UNIX_SECONDS NAME" (best effort: a replica whose hold is lost reads
  // again from its own place, and is told when the log no longer has it).
  void SaveHolds() const;
  // DIR/REPLICAS's holds, as reads made when the file says.
  void LoadHolds();
  // DIR/REPLICAS's holds as Progress (a read-only opener's view).
  std::vector<ReplicaProgress> SavedProgress() const;

 private:
  struct Replica {
    uint64_t hold = 0;            // the segment its checkpoints keep
    Clock::time_point when;       // its last read
    LogPosition applied;          // everything before it applied
    LogPosition end_at_read;      // the log's end at its last read
    Clock::time_point caught_up;  // when it last caught up
    bool reads = false;           // read since this process opened the log
  };
  struct Waiter {
    bool replicated = false;  // WhenReplicated; WhenCaughtUp otherwise
    LogPosition position;
    int k = 0;
    std::chrono::milliseconds max_lag{0};
    Clock::time_point until;
    std::string table;
    std::function<void(Status)> done;
  };
  using Done = std::vector<std::pair<std::function<void(Status)>, Status>>;

  // Read since the log opened, within kLiveTime.
  static bool Live(const Replica& r, Clock::time_point now) {
    return r.reads && now - r.when <= kLiveTime;
  }
  static bool InSync(const Replica& r, Clock::time_point now) {
    return Live(r, now) && now - r.caught_up <= kInSyncLag;
  }
  // `name`'s entry, made when new (the stalest goes when there are
  // kMaxReplicas). REQUIRES: mu_ held.
  Replica& EntryLocked(const std::string& name);
  // The names of those in sync, or "none". REQUIRES: mu_ held.
  std::string InSyncNamesLocked(Clock::time_point now) const;
  // The waiter's outcome now, or OK with *finished false.
  Status Evaluate(const Waiter& w, Clock::time_point now, bool* finished) const;
  // Finished waiters out of waiters_, into *done. REQUIRES: mu_ held.
  void SweepLocked(Clock::time_point now, Done* done);
  void Add(Waiter w);
  void TimerLoop();
  std::map<std::string, Replica> ReadFile() const;

  Env* const env_;
  const std::string dir_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // the timer: a waiter came, or closing
  std::map<std::string, Replica> replicas_;
  std::list<Waiter> waiters_;
  bool closing_ = false;
  std::atomic<bool> any_read_{false};  // a replica read since the log opened
  std::thread timer_;                  // started with the first waiter
};

}  // namespace replaydb::wal

#endif  // REPLAYDB_WAL_REPLICA_SET_H_
