// A returning primary's salvage (docs/replication.md, "A returning
// primary's writes"). A primary that is killed (or cut off) and replaced
// may have acknowledged writes its successor never applied: under `leader`
// and `leader_durable` an acknowledgment waits for no replica. They are in
// its own log, after the place where its successor took over
// (coord::Coordinator::HandedOver). When it comes back, ClusterNode moves
// its directory aside and makes it a replica of the new primary; Salvage
// then copies the trajectories those records gave steps to, whole, from the
// directory aside to the cluster's primary, as new trajectories (new ids).
//
// Tables acknowledged replicated(k) are left out: what they acknowledged
// is on the successor. Only steps are salvaged: priority updates, removals and ends of
// trajectories whose steps all reached the successor (which ended them,
// truncated) are not. A trajectory that began before the handover is
// copied whole, so the successor's truncated copy of its first steps stays
// beside it; except a remote writer's that the writer resumed on the
// successor (docs/replication.md, "Writers through a failover"): where the
// successor's trajectory of the same writer key holds at least as many
// steps (its writer sent again, in order, what was not acknowledged
// there), it is left (SalvageReport::resumed). The place it got to is kept in DIR/SALVAGE after
// each trajectory, so a node restarted meanwhile goes on from there (copying at most the one
// trajectory it was writing again).
//
// Thread safety: functions; one Salvage per directory at a time.
#ifndef REPLAYDB_RDMA_SALVAGE_H_
#define REPLAYDB_RDMA_SALVAGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/env.h"
#include "replaydb/options.h"
#include "replaydb/status.h"
#include "wal/format.h"

namespace replaydb::rdma {

// DIR/SALVAGE: "replaydb salvage 1", then "segment S", "offset O",
// "copied N" and "finished 0|1", a line each; once listed, "trajectories
// K" and K lines "TABLE_ID TRAJECTORY_ID".
inline constexpr const char* kSalvageFile = "SALVAGE";
struct SalvageState {
  wal::LogPosition from;  // the records from here on (in this log)
  uint64_t copied = 0;    // trajectories done, in the order of `trajectories`
  bool finished = false;
  // What the records from `from` on gave steps to (table id, trajectory
  // id), in the order the log first names them: listed by Salvage's first
  // call, before the directory is opened (whose recovery's checkpoint
  // removes the log it read them from).
  bool listed = false;
  std::vector<std::pair<uint32_t, uint64_t>> trajectories;
};
Status WriteSalvageFile(Env* env, const std::string& dir, const SalvageState& state);
// NotFound when there is none; Corruption naming the file when it does not
// parse.
Status ReadSalvageFile(Env* env, const std::string& dir, SalvageState* state);

struct SalvageReport {
  int64_t trajectories = 0;  // copied by this call
  int64_t steps = 0;
  int64_t skipped = 0;  // gone from the directory since (dropped, removed)
  // Left since their remote writers resumed them on the successor, which
  // holds at least their steps (found by writer key).
  int64_t resumed = 0;
  // Of tables acknowledged replicated(k): left, since what they
  // acknowledged is on the successor (and copying the rest would store
  // twice what their writers retried).
  int64_t replicated = 0;
};

// Copies what DIR/SALVAGE says is left of `dir`'s trajectories to the
// primary at `primary` (an address DB::Connect takes: etcd://... reaches
// whichever node is the primary), recording its progress there; DIR/SALVAGE
// ends finished. `dir` is opened (recovered: its log replayed, its open
// trajectories left open, then checkpointed) with `options`, automatic
// checkpoints off. A log that no
// longer holds the place, or whose tail is damaged, salvages what it
// holds up to there (said through `log`). An error (the primary out of
// reach, a refused append) returns with the progress kept: call it again.
// `stop` set: Cancelled at the next trajectory.
Result<SalvageReport> Salvage(const std::string& dir, const DBOptions& options,
                              const std::string& primary, const ConnectOptions& connect,
                              const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log);

}  // namespace replaydb::rdma

#endif  // REPLAYDB_RDMA_SALVAGE_H_
