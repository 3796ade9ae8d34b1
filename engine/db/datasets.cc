// DB's dataset calls: export a table to a new database, import one from
// another database. Each copies trajectories straight into the cold tier
// (TableImpl::ImportStored), takes a checkpoint, then fills the hot tier
// with what fits. See docs/cold_tier.md. The D4RL import, which does the
// same from an HDF5 file, is an optional library of its own
// (utilities/d4rl/d4rl_import.cc).
#include <filesystem>
#include <string>
#include <vector>

#include "engine/db/db_impl.h"
#include "util/format.h"

namespace replaydb::engine {

using util::Quoted;
namespace {

// Cancelled when *cancel was set, naming how far the copy got.
Status CheckCancel(const std::atomic<bool>* cancel, const util::ProgressReporter& progress) {
  if (cancel == nullptr || !cancel->load(std::memory_order_relaxed)) return Status::OK();
  return Status::Cancelled("interrupted after " + std::to_string(progress.done()) +
                           " steps; nothing was kept");
}

}  // namespace

Result<std::pair<std::shared_ptr<TableImpl>, uint32_t>> DBImpl::FindTable(
    std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  auto spec = specs_.find(name);
  if (it == tables_.end() || spec == specs_.end()) {
    return Status::NotFound("no table named " + Quoted(name) + " in " + path_);
  }
  return std::make_pair(it->second, spec->second.id);
}

std::string DBImpl::TableName(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, entry] : specs_) {
    if (entry.id == id) return name;
  }
  return "";
}

Status DBImpl::CopyTrajectories(ColdStore& store, uint32_t table_id, TableImpl& dst,
                                util::ProgressReporter& progress, const std::atomic<bool>* cancel) {
  // Ids first: reading each trajectory inside the scan would nest reads.
  std::vector<uint64_t> ids;
  REPLAYDB_RETURN_IF_ERROR(store.ForEachTrajectory(table_id, [&](uint64_t id, std::string_view) {
    ids.push_back(id);
    return Status::OK();
  }));
  StoredTrajectory stored;
  for (uint64_t id : ids) {
    REPLAYDB_RETURN_IF_ERROR(CheckCancel(cancel, progress));
    REPLAYDB_RETURN_IF_ERROR(
        TableImpl::ReadStoredFrom(store, table_id, dst.layout().step_bytes, id, &stored));
    if (stored.length == 0) continue;
    REPLAYDB_RETURN_IF_ERROR(dst.ImportStored(stored));
    progress.Add(stored.length);
  }
  return Status::OK();
}

Status DBImpl::AbandonImport(const std::string& name, const Status& error) {
  (void)DropTable(name);
  return error;
}

Status DBImpl::ExportTable(std::string_view table, const std::string& dir,
                           const LongOperationOptions& long_options) {
  REPLAYDB_ASSIGN_OR_RETURN(auto found, FindTable(table));
  auto& [source, source_id] = found;
  const TableSpec spec = source->spec();
  // Everything of the table is in the cold store after a checkpoint; a
  // read-only opener's store already holds all it has.
  if (!read_only_) REPLAYDB_RETURN_IF_ERROR(Checkpoint().WithContext("export of " + Quoted(table)));
  const TableInfo info = source->Info();
  DBOptions options;
  options.error_if_exists = true;
  options.env = options_.env;
  options.cold_compression = options_.cold_compression;
  const bool existed = env_->FileExists(dir);
  Status s;
  {
    Result<std::unique_ptr<DB>> opened = DBImpl::Open(options, dir);
    if (!opened.ok()) return opened.status().WithContext("export of " + Quoted(table));
    auto* dest = static_cast<DBImpl*>(opened->get());
    Result<std::shared_ptr<Table>> created = dest->CreateTable(spec);
    s = created.status();
    if (s.ok()) {
      util::ProgressReporter progress("export " + std::string(table),
                                      info.num_steps + info.cold_steps, "steps",
                                      long_options.progress);
      auto* dst = static_cast<TableImpl*>(created->get());
      s = CopyTrajectories(*cold_, source_id, *dst, progress, long_options.cancel);
      if (s.ok()) s = dest->Checkpoint();
      if (s.ok()) s = dst->FillHot();
    }
  }
  if (!s.ok()) {
    std::error_code ec;
    if (existed) {
      for (const char* sub : {"CATALOG", "LOCK", "wal", "cold"}) {
        std::filesystem::remove_all(dir + "/" + sub, ec);
      }
    } else {
      std::filesystem::remove_all(dir, ec);
    }
    return s.WithContext("export of " + Quoted(table) + " to " + dir);
  }
  return Status::OK();
}

Result<std::shared_ptr<Table>> DBImpl::ImportTable(const std::string& source_dir,
                                                   std::string_view source_table,
                                                   std::string_view name,
                                                   const LongOperationOptions& options) {
  REPLAYDB_RETURN_IF_ERROR(CheckWritable("ImportTable"));
  const std::string what = "import of table " + Quoted(source_table) + " from " + source_dir;
  Result<std::unique_ptr<DB>> opened = DBImpl::OpenReadOnly({}, source_dir);
  if (!opened.ok()) return opened.status().WithContext(what);
  auto* source_db = static_cast<DBImpl*>(opened->get());
  REPLAYDB_ASSIGN_OR_RETURN(auto found, source_db->FindTable(source_table));
  auto& [source, source_id] = found;
  TableSpec spec = source->spec();
  if (!name.empty()) spec.name = std::string(name);
  Result<std::shared_ptr<Table>> created = CreateTable(spec);
  if (!created.ok()) return created.status().WithContext(what);
  auto* dst = static_cast<TableImpl*>(created->get());
  const TableInfo info = source->Info();
  util::ProgressReporter progress("import " + spec.name, info.num_steps + info.cold_steps, "steps",
                                  options.progress);
  Status s = CopyTrajectories(*source_db->cold_, source_id, *dst, progress, options.cancel);
  if (s.ok()) s = Checkpoint();
  if (s.ok()) s = dst->FillHot();
  if (!s.ok()) return AbandonImport(spec.name, s.WithContext(what));
  return created;
}

}  // namespace replaydb::engine
