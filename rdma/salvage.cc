#include "rdma/salvage.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "engine/db/db_impl.h"
#include "engine/table/table_impl.h"
#include "rdma/remote_db.h"
#include "wal/log_reader.h"
#include "wal/log_tail.h"
#include "wal/records.h"

namespace replaydb::rdma {
namespace {

// Steps copied per call (ReadTrajectory, then AppendMany).
constexpr int64_t kChunkSteps = 1024;

// The trajectories (table id, trajectory id) that records of `dir`'s log
// from `from` on gave steps to, in the order the log first names them.
Status TouchedTrajectories(Env* env, const std::string& dir, wal::LogPosition from,
                           std::vector<std::pair<uint32_t, uint64_t>>* out,
                           const std::function<void(const std::string&)>& log) {
  const std::string wal_dir = dir + "/wal";
  std::vector<uint64_t> segments;
  REPLAYDB_RETURN_IF_ERROR(wal::ListSegments(env, wal_dir, &segments));
  if (segments.empty() || segments.back() < from.segment) return Status::OK();
  uint64_t last_size = 0;
  REPLAYDB_RETURN_IF_ERROR(
      env->GetFileSize(wal_dir + "/" + wal::SegmentFileName(segments.back()), &last_size));
  const wal::LogPosition end{segments.back(), last_size};
  std::set<std::pair<uint32_t, uint64_t>> seen;
  const auto take = [&](const wal::LogChunk& chunk) {
    return wal::ForEachShippedRecord(chunk.records, wal_dir,
                                     [&](wal::RecordType type, std::span<const std::byte> payload) {
                                       if (type != wal::RecordType::kAppendSteps)
                                         return Status::OK();
                                       wal::AppendStepsRecord r;
                                       REPLAYDB_RETURN_IF_ERROR(wal::Decode(payload, &r));
                                       for (const uint64_t id : r.trajectory_ids) {
                                         if (seen.emplace(r.table_id, id).second)
                                           out->emplace_back(r.table_id, id);
                                       }
                                       return Status::OK();
                                     });
  };
  wal::LogPosition at = from;
  for (int round = 0; round < (1 << 30) && at < end; ++round) {
    wal::LogChunk chunk;
    const Status read = wal::ReadLogRange(env, wal_dir, at, end, 4 << 20, &chunk);
    // (A damaged record: the records before it still count. A tail a kill
    // cut short is one, and acknowledged writes lie before it.)
    REPLAYDB_RETURN_IF_ERROR(take(chunk));
    if (!read.ok()) {
      if (log) log("salvage: reading the log of " + dir + " stopped: " + read.ToString());
      return Status::OK();
    }
    if (chunk.count == 0 && chunk.next == at) break;
    at = chunk.next;
  }
  return Status::OK();
}

}  // namespace

Status WriteSalvageFile(Env* env, const std::string& dir, const SalvageState& state) {
  std::string text = "replaydb salvage 1\nsegment " + std::to_string(state.from.segment) +
                     "\noffset " + std::to_string(state.from.offset) + "\ncopied " +
                     std::to_string(state.copied) + "\nfinished " + (state.finished ? "1" : "0") +
                     "\n";
  if (state.listed) {
    text += "trajectories " + std::to_string(state.trajectories.size()) + "\n";
    for (const auto& [table, id] : state.trajectories) {
      text += std::to_string(table) + " " + std::to_string(id) + "\n";
    }
  }
  return env->WriteFileAtomic(dir + "/" + kSalvageFile, text);
}

Status ReadSalvageFile(Env* env, const std::string& dir, SalvageState* state) {
  const std::string path = dir + "/" + kSalvageFile;
  std::string text;
  REPLAYDB_RETURN_IF_ERROR(env->ReadFileToString(path, &text));
  const Status bad = Status::Corruption(
      path +
      " does not parse as a salvage (\"replaydb salvage 1\", then segment, offset, copied and "
      "finished, a line each, and the trajectories listed)");
  std::istringstream in(text);
  std::string word[6];
  int version = 0;
  uint64_t segment = 0, offset = 0, copied = 0;
  int finished = -1;
  if (!(in >> word[0] >> word[1] >> version >> word[2] >> segment >> word[3] >> offset >> word[4] >>
        copied >> word[5] >> finished) ||
      word[0] != "replaydb" || word[1] != "salvage" || version != 1 || word[2] != "segment" ||
      word[3] != "offset" || word[4] != "copied" || word[5] != "finished" ||
      (finished != 0 && finished != 1)) {
    return bad;
  }
  SalvageState s{wal::LogPosition{segment, offset}, copied, finished == 1, false, {}};
  std::string key;
  uint64_t count = 0;
  if (in >> key) {
    if (key != "trajectories" || !(in >> count) || count > (uint64_t{1} << 32)) return bad;
    s.listed = true;
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t table = 0, id = 0;
      if (!(in >> table >> id) || table > UINT32_MAX) return bad;
      s.trajectories.emplace_back(static_cast<uint32_t>(table), id);
    }
    if (in >> key) return bad;
  }
  if (s.copied > s.trajectories.size() && s.listed) return bad;
  *state = std::move(s);
  return Status::OK();
}

Result<SalvageReport> Salvage(const std::string& dir, const DBOptions& options,
                              const std::string& primary, const ConnectOptions& connect,
                              const std::atomic<bool>& stop,
                              const std::function<void(const std::string&)>& log) {
  Env* env = options.env != nullptr ? options.env : Env::Default();
  SalvageState state;
  REPLAYDB_RETURN_IF_ERROR(ReadSalvageFile(env, dir, &state));
  SalvageReport report;
  if (state.finished) return report;
  if (!state.listed) {
    REPLAYDB_RETURN_IF_ERROR(TouchedTrajectories(env, dir, state.from, &state.trajectories, log)
                                 .WithContext("salvaging " + dir));
    state.listed = true;
    REPLAYDB_RETURN_IF_ERROR(WriteSalvageFile(env, dir, state));
  }
  const std::vector<std::pair<uint32_t, uint64_t>>& touched = state.trajectories;
  if (state.copied < touched.size()) {
    DBOptions o = options;
    o.checkpoint.every_wal_bytes = 0;
    o.checkpoint.every = std::chrono::seconds(0);
    o.checkpoint.on_close = false;
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> source,
                              engine::DBImpl::Open(o, dir, nullptr, /*replica=*/true));
    const auto* impl = dynamic_cast<const engine::DBImpl*>(source.get());
    if (impl == nullptr) return Status::Internal("salvage: " + dir + " opened as no engine");
    REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<DB> target, DB::Connect(primary, connect));
    if (log) {
      log("salvage: copying " + std::to_string(touched.size() - state.copied) +
          " trajectories that " + dir + "'s log wrote after segment " +
          std::to_string(state.from.segment) + ", offset " + std::to_string(state.from.offset) +
          " (where its successor took over) to " + target->path());
    }
    for (; state.copied < touched.size(); ++state.copied) {
      if (stop.load()) return Status::Cancelled("salvage of " + dir + " stopped");
      const auto [table_id, id] = touched[state.copied];
      const std::string name = impl->TableName(table_id);
      Result<std::shared_ptr<Table>> from = Status::NotFound("");
      if (!name.empty()) from = source->GetTable(name);
      TrajectorySteps steps;
      Status read = from.ok() ? (*from)->ReadTrajectory(id, 0, kChunkSteps, &steps) : from.status();
      if (read.code() == Status::Code::kNotFound) {
        ++report.skipped;  // its table dropped, or it was removed, since
      } else if ((*from)->spec().acks.mode == AckMode::kReplicated) {
        // What such a table acknowledged is on the successor; the rest
        // was never acknowledged (its writers were told so, and retried).
        ++report.replicated;
      } else {
        REPLAYDB_RETURN_IF_ERROR(read);
        Result<std::shared_ptr<Table>> to = target->GetTable(name);
        if (to.status().code() == Status::Code::kNotFound)
          to = target->CreateTable((*from)->spec());
        REPLAYDB_RETURN_IF_ERROR(
            to.status().WithContext("salvage: table '" + name + "' at " + target->path()));
        const TrajectoryInfo info = steps.info;
        // A remote writer's trajectory that the writer resumed on the
        // successor holds these steps already, as its first ones (the
        // writer sent again, in order, what was not acknowledged there):
        // found by its key.
        const auto* from_impl = dynamic_cast<const engine::TableImpl*>(from->get());
        const uint64_t key = from_impl != nullptr ? from_impl->WriterKeyOf(id) : 0;
        if (key != 0) {
          TrajectorySteps there;
          const Status found = ReadTrajectoryOfWriterKey(**to, key, 0, 0, &there);
          if (!found.ok() && found.code() != Status::Code::kNotFound) {
            return found.WithContext("salvage: trajectory " + std::to_string(id) + " of table '" +
                                     name + "' at " + target->path());
          }
          if (found.ok() && there.info.length >= info.length) {
            ++report.resumed;
            SalvageState next = state;
            ++next.copied;
            REPLAYDB_RETURN_IF_ERROR(WriteSalvageFile(env, dir, next));
            continue;
          }
        }
        WriterOptions wo;
        wo.timeout = std::chrono::seconds(30);
        REPLAYDB_ASSIGN_OR_RETURN(std::unique_ptr<TrajectoryWriter> w, (*to)->NewWriter(wo));
        for (int64_t first = 0; first < info.length;) {
          if (first > 0)
            REPLAYDB_RETURN_IF_ERROR((*from)->ReadTrajectory(id, first, kChunkSteps, &steps));
          const int64_t n = steps.columns.empty() ? 0 : steps.columns[0].shape().dim(0);
          if (n <= 0) break;
          std::vector<ConstTensor> tensors;
          for (const Tensor& c : steps.columns) {
            tensors.push_back(ConstTensor{c.dtype(), c.shape(), c.data(), c.size_bytes()});
          }
          bool priorities = steps.step_priorities.size() == static_cast<size_t>(n);
          for (const double p : steps.step_priorities)
            priorities = priorities && std::isfinite(p) && p >= 0;
          REPLAYDB_RETURN_IF_ERROR(
              w->AppendMany(tensors, priorities ? std::span<const double>(steps.step_priorities)
                                                : std::span<const double>())
                  .WithContext("salvage: trajectory " + std::to_string(id) + " of table '" + name +
                               "' to " + target->path()));
          first += n;
          report.steps += n;
        }
        REPLAYDB_RETURN_IF_ERROR(w->End(info.ended ? info.end_reason : EndReason::kTruncated)
                                     .WithContext("salvage: ending trajectory " +
                                                  std::to_string(id) + " of table '" + name +
                                                  "' at " + target->path()));
        ++report.trajectories;
      }
      SalvageState next = state;
      ++next.copied;
      REPLAYDB_RETURN_IF_ERROR(WriteSalvageFile(env, dir, next));
    }
  }
  state.finished = true;
  REPLAYDB_RETURN_IF_ERROR(WriteSalvageFile(env, dir, state));
  if (log) {
    log("salvage of " + dir + " finished: " + std::to_string(report.trajectories) +
        " trajectories (" + std::to_string(report.steps) + " steps) copied to " + primary +
        (report.skipped > 0 ? ", " + std::to_string(report.skipped) + " gone since" : "") +
        (report.resumed > 0 ? ", " + std::to_string(report.resumed) +
                                  " left that their writers resumed there (holding them whole)"
                            : "") +
        (report.replicated > 0 ? ", " + std::to_string(report.replicated) +
                                     " of replicated(k) tables left (none was acknowledged)"
                               : ""));
  }
  return report;
}

}  // namespace replaydb::rdma
