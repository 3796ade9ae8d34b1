// The shell's commands (tools/replaydb/shell/shell.h). Each fills a CommandOutput from the
// public API; errors name the command and, for bad arguments, its usage.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tools/replaydb/bench/bench.h"
#include "tools/replaydb/progress_bar.h"
#include "tools/replaydb/shell/shell.h"
#include "tools/replaydb/shell/shell_d4rl.h"
#include "tools/replaydb/shell/shell_data.h"
#include "tools/replaydb/tool_util.h"
#ifdef REPLAYDB_HAVE_D4RL
#include "replaydb/utilities/d4rl.h"
#endif

namespace replaydb::tools {
namespace {

using Handler = Status (*)(Shell&, const ParsedCommand&, CommandOutput*);

Json ShapeJson(const Shape& shape) {
  Json dims = Json::array();
  for (int64_t d : shape.dims()) dims.push_back(d);
  return dims;
}

// A bound of the rate limiter's diff: null (shown as "-") for the sentinel
// that means none, +-numeric_limits<double>::max().
Json DiffBound(double bound) {
  return std::fabs(bound) == std::numeric_limits<double>::max() ? Json() : Json(bound);
}

Json RateLimiterSpecJson(const RateLimiterSpec& r) {
  return {{"samples_per_insert", r.samples_per_insert},
          {"min_size_to_sample", r.min_size_to_sample},
          {"min_diff", DiffBound(r.min_diff)},
          {"max_diff", DiffBound(r.max_diff)}};
}

Json SpecJson(const TableSpec& spec) {
  Json columns = Json::array();
  for (const ColumnSpec& c : spec.columns) {
    columns.push_back(Json{{"name", c.name},
                           {"dtype", DTypeName(c.dtype)},
                           {"shape", ShapeJson(c.shape)},
                           {"step_bytes", static_cast<int64_t>(c.step_bytes())}});
  }
  return {{"name", spec.name},
          {"columns", columns},
          {"step_bytes", static_cast<int64_t>(spec.step_bytes())},
          {"capacity_steps", spec.capacity_steps},
          {"capacity_bytes", spec.capacity_bytes},
          {"block_steps", spec.block_steps},
          {"sequence_length", spec.sequence_length},
          {"padding", PaddingName(spec.padding)},
          {"selector", SelectorKindName(spec.selector)},
          {"eviction", EvictionPolicyName(spec.eviction)},
          {"priority_exponent", spec.priority_exponent},
          {"step_priority", StepPriorityName(spec.step_priority)},
          {"priority_device", static_cast<int64_t>(spec.priority_device)},
          {"placement", spec.placement.ToString()},
          {"logging", TableLoggingName(spec.logging)},
          {"acks", AcksName(spec.acks)},
          {"max_lag_ms", spec.max_lag_ms},
          {"spill", spec.spill},
          {"rotation_fraction", spec.rotation_fraction},
          {"rotation_every_samples", spec.rotation_every_samples},
          {"max_times_sampled", spec.max_times_sampled},
          {"lanes", spec.lanes},
          {"rate_limiter", RateLimiterSpecJson(spec.rate_limiter)}};
}

Json InfoJson(const TableInfo& i, const TableSpec& spec) {
  const RateLimiterInfo& r = i.rate_limiter;
  return {{"name", i.name},
          {"hot",
           {{"trajectories", i.num_trajectories},
            {"open_trajectories", i.num_open_trajectories},
            {"steps", i.num_steps},
            {"items", i.num_items},
            {"placement", i.placement},
            {"device", static_cast<int64_t>(i.device)},
            {"bytes_used", i.bytes_used},
            {"bytes_reserved", i.bytes_reserved},
            {"bytes_capacity", i.bytes_capacity},
            {"blocks_used", i.blocks_used},
            {"blocks_capacity", i.blocks_capacity}}},
          {"cold",
           {{"trajectories", i.cold_trajectories},
            {"steps", i.cold_steps},
            {"bytes", i.cold_bytes},
            {"spilled_trajectories", i.spilled_trajectories},
            {"spilled_bytes", i.spilled_bytes},
            {"loaded_trajectories", i.loaded_trajectories},
            {"rotations", i.rotations},
            {"spill_queue", i.spill_queue}}},
          {"counters",
           {{"steps_inserted", i.steps_inserted},
            {"items_inserted", i.items_inserted},
            {"items_sampled", i.items_sampled},
            {"items_removed", i.items_removed},
            {"evicted_trajectories", i.evicted_trajectories},
            {"evicted_items", i.evicted_items},
            {"priority_updates", i.priority_updates},
            {"priority_updates_skipped", i.priority_updates_skipped},
            {"max_priority_seen", i.max_priority_seen}}},
          {"rate_limiter",
           {{"spec", RateLimiterSpecJson(r.spec)},
            {"inserts", r.inserts},
            {"samples", r.samples},
            {"deletes", r.deletes},
            {"blocked_inserts", r.blocked_inserts},
            {"blocked_samples", r.blocked_samples}}},
          {"selector",
           {{"kind", SelectorKindName(spec.selector)},
            {"priority_exponent", spec.priority_exponent},
            {"eviction", EvictionPolicyName(spec.eviction)},
            {"max_times_sampled", spec.max_times_sampled}}}};
}

Result<std::shared_ptr<Table>> GetTable(Shell& shell, const ParsedCommand& c,
                                        const std::string& name) {
  Result<std::shared_ptr<Table>> table = shell.db().GetTable(name);
  if (!table.ok()) return table.status().WithContext(c.spec->name);
  return table;
}

// Prefixes an engine error with the command's name.
Status Named(const ParsedCommand& c, const Status& s) {
  return s.ok() ? s : s.WithContext(c.spec->name);
}

// A long command's options: Ctrl-C cancels it, `bar` draws its progress
// (on a terminal).
LongOperationOptions LongOperation(const Shell& shell, ProgressBar& bar) {
  LongOperationOptions options;
  options.cancel = shell.interrupt();
  options.progress = bar.Callback();
  return options;
}

// ---- commands

Status Help(Shell&, const ParsedCommand& c, CommandOutput* out) {
  if (!c.args.empty()) {
    const ShellCommandSpec* spec = FindShellCommand(c.args[0]);
    if (spec == nullptr) {
      return UsageError(*c.spec, "unknown command '" + c.args[0] + "'");
    }
    out->json = {{"usage", spec->usage}, {"summary", spec->summary}};
    out->text = "usage: " + std::string(spec->usage) + "\n  " + std::string(spec->summary) + "\n";
    return Status::OK();
  }
  Json commands = Json::array();
  for (const ShellCommandSpec& s : ShellCommands()) {
    commands.push_back(Json{{"usage", s.usage}, {"summary", s.summary}});
  }
  out->text = "commands:\n" + FormatCommandList();
  out->json = {{"commands", commands}};
  return Status::OK();
}

Status Tables(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Json rows = Json::array();
  for (const std::string& name : shell.db().ListTables()) {
    REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, GetTable(shell, c, name));
    const TableInfo i = table->Info();
    rows.push_back(Json{{"name", name},
                        {"columns", static_cast<int64_t>(table->spec().columns.size())},
                        {"trajectories", i.num_trajectories + i.cold_trajectories},
                        {"hot_steps", i.num_steps},
                        {"cold_steps", i.cold_steps},
                        {"items", i.num_items},
                        {"placement", i.placement}});
  }
  if (rows.empty()) out->text = "(no tables)\n";
  out->json = {{"tables", std::move(rows)}};
  return Status::OK();
}

Status Describe(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, GetTable(shell, c, c.args[0]));
  const TableSpec spec = table->spec();
  out->json = SpecJson(spec);
  out->text = FormatTableSpec(spec, "");
  return Status::OK();
}

Status Stats(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, GetTable(shell, c, c.args[0]));
  out->json = InfoJson(table->Info(), table->spec());
  return Status::OK();
}

Status CheckpointCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_RETURN_IF_ERROR(Named(c, shell.db().Checkpoint()));
  out->json = {{"checkpoint", "written"}};
  return Status::OK();
}

Status Export(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  ProgressBar bar;
  REPLAYDB_RETURN_IF_ERROR(
      Named(c, shell.db().ExportTable(c.args[0], c.args[1], LongOperation(shell, bar))));
  out->json = {{"exported", c.args[0]}, {"to", c.args[1]}};
  return Status::OK();
}

Status Import(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  const std::string& name = c.args.size() > 2 ? c.args[2] : c.args[1];
  ProgressBar bar;
  Result<std::shared_ptr<Table>> table =
      shell.db().ImportTable(c.args[0], c.args[1], name, LongOperation(shell, bar));
  REPLAYDB_RETURN_IF_ERROR(Named(c, table.status()));
  const TableInfo i = (*table)->Info();
  out->json = {{"imported", name},
               {"trajectories", i.num_trajectories + i.cold_trajectories},
               {"steps", i.num_steps + i.cold_steps}};
  return Status::OK();
}

Status ImportD4rlCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
#ifdef REPLAYDB_HAVE_D4RL
  TableSpec spec;
  spec.name = c.args[1];
  ProgressBar bar;
  Result<std::shared_ptr<Table>> table =
      replaydb::ImportD4rl(shell.db(), c.args[0], spec, LongOperation(shell, bar));
  REPLAYDB_RETURN_IF_ERROR(Named(c, table.status()));
  const TableInfo i = (*table)->Info();
  out->json = {{"imported", spec.name},
               {"trajectories", i.num_trajectories + i.cold_trajectories},
               {"steps", i.num_steps + i.cold_steps}};
  return Status::OK();
#else
  (void)shell;
  (void)out;
  return Named(c, D4rlNotBuilt());
#endif
}

Status WalCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Result<WalInfo> wal = shell.db().Wal();
  REPLAYDB_RETURN_IF_ERROR(Named(c, wal.status()));
  const WalInfo& w = *wal;
  out->json = {{"dir", w.dir},
               {"enabled", w.enabled},
               {"sync", w.sync},
               {"segments", w.segments},
               {"first_segment", w.first_segment},
               {"last_segment", w.last_segment},
               {"bytes", w.bytes},
               {"checkpoint_sequence", w.checkpoint_sequence},
               {"checkpoint_segment", w.checkpoint_segment},
               {"records_since_checkpoint", w.records_since_checkpoint},
               {"bytes_since_checkpoint", w.bytes_since_checkpoint}};
  if (!w.note.empty()) out->json["note"] = w.note;
  return Status::OK();
}

Status ReplicationCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Result<ReplicationInfo> info = shell.db().Replication();
  REPLAYDB_RETURN_IF_ERROR(Named(c, info.status()));
  const ReplicationInfo& r = *info;
  out->json = {{"role", r.role}, {"epoch", r.epoch}, {"segment", r.segment}, {"offset", r.offset}};
  if (!r.epochs.empty()) {
    Json epochs = Json::array();
    for (const EpochStart& e : r.epochs) {
      epochs.push_back({{"epoch", e.epoch}, {"segment", e.segment}, {"offset", e.offset}});
    }
    out->json["epochs"] = epochs;
  }
  if (!r.fenced_by.empty()) {
    // A deposed primary: where writes go now.
    out->json["fenced_by"] = r.fenced_by;
    out->json["fenced_epoch"] = r.fenced_epoch;
  }
  if (r.role == "replica") {
    out->json["primary"] = r.primary;
    if (r.primary_segment > 0) {
      out->json["primary_segment"] = r.primary_segment;
      out->json["primary_offset"] = r.primary_offset;
      // Behind by bytes within one segment; by segments across them.
      out->json["behind"] =
          r.primary_segment == r.segment
              ? std::to_string(r.primary_offset - std::min(r.primary_offset, r.offset)) + " bytes"
              : std::to_string(r.primary_segment - std::min(r.primary_segment, r.segment)) +
                    " segments";
    }
    // (Known where a server follows the primary; a directory's view has none.)
    if (r.connected || r.primary_segment > 0 || !r.last_error.empty()) {
      out->json["connected"] = r.connected;
    }
    if (!r.last_error.empty()) out->json["last_error"] = r.last_error;
    return Status::OK();
  }
  Json replicas = Json::array();
  for (const ReplicaProgress& p : r.replicas) {
    Json one = {
        {"name", p.name}, {"segment", p.segment}, {"seconds_since_read", p.seconds_since_read}};
    if (p.applied_segment > 0) {  // (read since this primary opened)
      one["applied_segment"] = p.applied_segment;
      one["applied_offset"] = p.applied_offset;
      one["lag_seconds"] = p.lag_seconds;
      one["in_sync"] = p.in_sync;
    }
    replicas.push_back(std::move(one));
  }
  out->json["replicas"] = replicas;
  return Status::OK();
}

Status VerifyCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  ProgressBar bar;
  Result<VerifyReport> report = shell.db().Verify(LongOperation(shell, bar));
  REPLAYDB_RETURN_IF_ERROR(Named(c, report.status()));
  const VerifyReport& r = *report;
  out->json = {{"ok", r.problems.empty()},
               {"tables", r.tables},
               {"hot_trajectories", r.hot_trajectories},
               {"cold_trajectories", r.cold_trajectories},
               {"steps", r.steps},
               {"bytes", r.bytes},
               {"wal_records", r.wal_records},
               {"problems", r.problems}};
  if (!r.problems.empty()) {
    // Printed, and the command fails so scripts notice.
    std::fputs(RenderText(out->json).c_str(), stdout);
    return Status::Corruption("verify: " + std::to_string(r.problems.size()) +
                              " problem(s) found; the first: " + r.problems[0]);
  }
  return Status::OK();
}

Status CompactCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  ProgressBar bar;
  REPLAYDB_RETURN_IF_ERROR(Named(c, shell.db().Compact(LongOperation(shell, bar))));
  out->json = {{"compacted", true}};
  return Status::OK();
}

Status Bench(Shell&, const ParsedCommand& c, CommandOutput* out) {
  std::fflush(stdout);
  const int rc = BenchCommand(c.args);
  std::fflush(stdout);
  if (rc != kExitOk) {
    return Status::Internal("bench: exited with status " + std::to_string(rc));
  }
  out->json = {{"bench", "done"}};
  return Status::OK();
}

struct Entry {
  std::string_view name;
  Handler run;
};

constexpr Entry kHandlers[] = {
    {"help", &Help},
    {"tables", &Tables},
    {"describe", &Describe},
    {"stats", &Stats},
    {"checkpoint", &CheckpointCmd},
    {"export", &Export},
    {"import", &Import},
    {"import-d4rl", &ImportD4rlCmd},
    {"bench", &Bench},
    {"wal", &WalCmd},
    {"verify", &VerifyCmd},
    {"compact", &CompactCmd},
    {"replication", &ReplicationCmd},
    {"trajectories", &TrajectoriesCommand},
    {"show", &ShowCommand},
    {"sample", &SampleCommand},
    {"priorities", &PrioritiesCommand},
};

}  // namespace

std::string FormatCommandList() {
  constexpr size_t kWidth = 28;  // longer usages put their summary on the next line
  std::string text;
  for (const ShellCommandSpec& s : ShellCommands()) {
    text += "  " + std::string(s.usage);
    if (s.usage.size() + 2 <= kWidth) {
      text += std::string(kWidth - s.usage.size(), ' ');
    } else {
      text += "\n" + std::string(kWidth + 2, ' ');
    }
    text += std::string(s.summary) + "\n";
  }
  return text;
}

Status RunShellCommand(Shell& shell, const ParsedCommand& command, CommandOutput* out) {
  for (const Entry& e : kHandlers) {
    if (e.name == command.spec->name) return e.run(shell, command, out);
  }
  return Status::NotSupported(std::string(command.spec->name) + ": not implemented yet");
}

}  // namespace replaydb::tools
