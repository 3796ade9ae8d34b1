// The shell's commands (tools/replaydb/shell/shell.h). Each fills a CommandOutput from the
// public API; errors name the command and, for bad arguments, its usage.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tools/replaydb/bench/bench.h"
#include "tools/replaydb/shell/shell.h"
#include "tools/replaydb/shell/shell_data.h"
#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {
namespace {

using Handler = Status (*)(Shell&, const ParsedCommand&, CommandOutput*);

Json ShapeJson(const Shape& shape) {
  Json dims = Json::MakeArray();
  for (int64_t d : shape.dims()) dims.Push(d);
  return dims;
}

// A bound of the rate limiter's diff: null (shown as "-") for the sentinel
// that means none, +-numeric_limits<double>::max().
Json DiffBound(double bound) {
  return std::fabs(bound) == std::numeric_limits<double>::max() ? Json() : Json(bound);
}

Json RateLimiterSpecJson(const RateLimiterSpec& r) {
  return Json::MakeObject()
      .Set("samples_per_insert", r.samples_per_insert)
      .Set("min_size_to_sample", r.min_size_to_sample)
      .Set("min_diff", DiffBound(r.min_diff))
      .Set("max_diff", DiffBound(r.max_diff));
}

Json SpecJson(const TableSpec& spec) {
  Json columns = Json::MakeArray();
  for (const ColumnSpec& c : spec.columns) {
    columns.Push(Json::MakeObject()
                     .Set("name", c.name)
                     .Set("dtype", DTypeName(c.dtype))
                     .Set("shape", ShapeJson(c.shape))
                     .Set("step_bytes", static_cast<int64_t>(c.step_bytes())));
  }
  return Json::MakeObject()
      .Set("name", spec.name)
      .Set("columns", columns)
      .Set("step_bytes", static_cast<int64_t>(spec.step_bytes()))
      .Set("capacity_steps", spec.capacity_steps)
      .Set("capacity_bytes", spec.capacity_bytes)
      .Set("block_steps", spec.block_steps)
      .Set("sequence_length", spec.sequence_length)
      .Set("padding", PaddingName(spec.padding))
      .Set("selector", SelectorKindName(spec.selector))
      .Set("eviction", EvictionPolicyName(spec.eviction))
      .Set("priority_exponent", spec.priority_exponent)
      .Set("step_priority", StepPriorityName(spec.step_priority))
      .Set("priority_device", static_cast<int64_t>(spec.priority_device))
      .Set("placement", spec.placement.ToString())
      .Set("logging", TableLoggingName(spec.logging))
      .Set("spill", spec.spill)
      .Set("rotation_fraction", spec.rotation_fraction)
      .Set("rotation_every_samples", spec.rotation_every_samples)
      .Set("max_times_sampled", spec.max_times_sampled)
      .Set("lanes", spec.lanes)
      .Set("rate_limiter", RateLimiterSpecJson(spec.rate_limiter));
}

Json InfoJson(const TableInfo& i, const TableSpec& spec) {
  const RateLimiterInfo& r = i.rate_limiter;
  return Json::MakeObject()
      .Set("name", i.name)
      .Set("hot", Json::MakeObject()
                      .Set("trajectories", i.num_trajectories)
                      .Set("open_trajectories", i.num_open_trajectories)
                      .Set("steps", i.num_steps)
                      .Set("items", i.num_items)
                      .Set("placement", i.placement)
                      .Set("device", static_cast<int64_t>(i.device))
                      .Set("bytes_used", i.bytes_used)
                      .Set("bytes_reserved", i.bytes_reserved)
                      .Set("bytes_capacity", i.bytes_capacity)
                      .Set("blocks_used", i.blocks_used)
                      .Set("blocks_capacity", i.blocks_capacity))
      .Set("cold", Json::MakeObject()
                       .Set("trajectories", i.cold_trajectories)
                       .Set("steps", i.cold_steps)
                       .Set("bytes", i.cold_bytes)
                       .Set("spilled_trajectories", i.spilled_trajectories)
                       .Set("spilled_bytes", i.spilled_bytes)
                       .Set("loaded_trajectories", i.loaded_trajectories)
                       .Set("rotations", i.rotations)
                       .Set("spill_queue", i.spill_queue))
      .Set("counters", Json::MakeObject()
                           .Set("steps_inserted", i.steps_inserted)
                           .Set("items_inserted", i.items_inserted)
                           .Set("items_sampled", i.items_sampled)
                           .Set("items_removed", i.items_removed)
                           .Set("evicted_trajectories", i.evicted_trajectories)
                           .Set("evicted_items", i.evicted_items)
                           .Set("priority_updates", i.priority_updates)
                           .Set("priority_updates_skipped", i.priority_updates_skipped)
                           .Set("max_priority_seen", i.max_priority_seen))
      .Set("rate_limiter", Json::MakeObject()
                               .Set("spec", RateLimiterSpecJson(r.spec))
                               .Set("inserts", r.inserts)
                               .Set("samples", r.samples)
                               .Set("deletes", r.deletes)
                               .Set("blocked_inserts", r.blocked_inserts)
                               .Set("blocked_samples", r.blocked_samples))
      .Set("selector", Json::MakeObject()
                           .Set("kind", SelectorKindName(spec.selector))
                           .Set("priority_exponent", spec.priority_exponent)
                           .Set("eviction", EvictionPolicyName(spec.eviction))
                           .Set("max_times_sampled", spec.max_times_sampled));
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

// ---- commands

Status Help(Shell&, const ParsedCommand& c, CommandOutput* out) {
  if (!c.args.empty()) {
    const ShellCommandSpec* spec = FindShellCommand(c.args[0]);
    if (spec == nullptr) {
      return UsageError(*c.spec, "unknown command '" + c.args[0] + "'");
    }
    out->json.Set("usage", spec->usage).Set("summary", spec->summary);
    out->text = "usage: " + std::string(spec->usage) + "\n  " + std::string(spec->summary) + "\n";
    return Status::OK();
  }
  Json commands = Json::MakeArray();
  for (const ShellCommandSpec& s : ShellCommands()) {
    commands.Push(Json::MakeObject().Set("usage", s.usage).Set("summary", s.summary));
  }
  out->text = "commands:\n" + FormatCommandList();
  out->json.Set("commands", commands);
  return Status::OK();
}

Status Tables(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Json rows = Json::MakeArray();
  for (const std::string& name : shell.db().ListTables()) {
    REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, GetTable(shell, c, name));
    const TableInfo i = table->Info();
    rows.Push(Json::MakeObject()
                  .Set("name", name)
                  .Set("columns", static_cast<int64_t>(table->spec().columns.size()))
                  .Set("trajectories", i.num_trajectories + i.cold_trajectories)
                  .Set("hot_steps", i.num_steps)
                  .Set("cold_steps", i.cold_steps)
                  .Set("items", i.num_items)
                  .Set("placement", i.placement));
  }
  out->json.Set("tables", rows);
  if (rows.array().empty()) out->text = "(no tables)\n";
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
  out->json.Set("checkpoint", "written");
  return Status::OK();
}

Status Export(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_RETURN_IF_ERROR(Named(c, shell.db().ExportTable(c.args[0], c.args[1], shell.interrupt())));
  out->json.Set("exported", c.args[0]).Set("to", c.args[1]);
  return Status::OK();
}

Status Import(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  const std::string& name = c.args.size() > 2 ? c.args[2] : c.args[1];
  Result<std::shared_ptr<Table>> table = shell.db().ImportTable(c.args[0], c.args[1], name,
                                                                shell.interrupt());
  REPLAYDB_RETURN_IF_ERROR(Named(c, table.status()));
  const TableInfo i = (*table)->Info();
  out->json.Set("imported", name)
      .Set("trajectories", i.num_trajectories + i.cold_trajectories)
      .Set("steps", i.num_steps + i.cold_steps);
  return Status::OK();
}

Status ImportD4rl(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  TableSpec spec;
  spec.name = c.args[1];
  Result<std::shared_ptr<Table>> table = shell.db().ImportD4rl(c.args[0], spec, shell.interrupt());
  REPLAYDB_RETURN_IF_ERROR(Named(c, table.status()));
  const TableInfo i = (*table)->Info();
  out->json.Set("imported", spec.name)
      .Set("trajectories", i.num_trajectories + i.cold_trajectories)
      .Set("steps", i.num_steps + i.cold_steps);
  return Status::OK();
}

Status WalCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Result<WalInfo> wal = shell.db().Wal();
  REPLAYDB_RETURN_IF_ERROR(Named(c, wal.status()));
  const WalInfo& w = *wal;
  out->json.Set("dir", w.dir)
      .Set("enabled", w.enabled)
      .Set("sync", w.sync)
      .Set("segments", w.segments)
      .Set("first_segment", w.first_segment)
      .Set("last_segment", w.last_segment)
      .Set("bytes", w.bytes)
      .Set("checkpoint_sequence", w.checkpoint_sequence)
      .Set("checkpoint_segment", w.checkpoint_segment)
      .Set("records_since_checkpoint", w.records_since_checkpoint)
      .Set("bytes_since_checkpoint", w.bytes_since_checkpoint);
  if (!w.note.empty()) out->json.Set("note", w.note);
  return Status::OK();
}

Status VerifyCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  Result<VerifyReport> report = shell.db().Verify(shell.interrupt());
  REPLAYDB_RETURN_IF_ERROR(Named(c, report.status()));
  const VerifyReport& r = *report;
  Json problems = Json::MakeArray();
  for (const std::string& p : r.problems) problems.Push(p);
  out->json.Set("ok", r.problems.empty())
      .Set("tables", r.tables)
      .Set("hot_trajectories", r.hot_trajectories)
      .Set("cold_trajectories", r.cold_trajectories)
      .Set("steps", r.steps)
      .Set("bytes", r.bytes)
      .Set("wal_records", r.wal_records)
      .Set("problems", problems);
  if (!r.problems.empty()) {
    // Printed, and the command fails so scripts notice.
    std::fputs(RenderText(out->json).c_str(), stdout);
    return Status::Corruption("verify: " + std::to_string(r.problems.size()) +
                              " problem(s) found; the first: " + r.problems[0]);
  }
  return Status::OK();
}

Status CompactCmd(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_RETURN_IF_ERROR(Named(c, shell.db().Compact(shell.interrupt())));
  out->json.Set("compacted", true);
  return Status::OK();
}

Status Bench(Shell&, const ParsedCommand& c, CommandOutput* out) {
  std::fflush(stdout);
  const int rc = BenchCommand(c.args);
  std::fflush(stdout);
  if (rc != kExitOk) {
    return Status::Internal("bench: exited with status " + std::to_string(rc));
  }
  out->json.Set("bench", "done");
  return Status::OK();
}

struct Entry {
  std::string_view name;
  Handler run;
};

constexpr Entry kHandlers[] = {
    {"help", &Help},         {"tables", &Tables},         {"describe", &Describe},
    {"stats", &Stats},       {"checkpoint", &CheckpointCmd}, {"export", &Export},
    {"import", &Import},     {"import-d4rl", &ImportD4rl}, {"bench", &Bench},
    {"wal", &WalCmd},        {"verify", &VerifyCmd},       {"compact", &CompactCmd},
    {"trajectories", &TrajectoriesCommand}, {"show", &ShowCommand},
    {"sample", &SampleCommand},             {"priorities", &PrioritiesCommand},
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
