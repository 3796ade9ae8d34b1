#include "engine/db_impl.h"

#include "engine/catalog.h"

namespace replaydb {

Result<std::unique_ptr<DB>> DB::Open(const DBOptions& options, const std::string& path) {
  return engine::DBImpl::Open(options, path);
}

namespace engine {
namespace {

std::string Q(std::string_view s) { return "'" + std::string(s) + "'"; }

}  // namespace

DBImpl::DBImpl(Env* env, std::string path, std::unique_ptr<FileLock> lock)
    : env_(env),
      path_(std::move(path)),
      catalog_path_(path_ + "/CATALOG"),
      lock_(std::move(lock)) {}

DBImpl::~DBImpl() {
  std::map<std::string, std::shared_ptr<TableImpl>, std::less<>> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tables.swap(tables_);
  }
  for (auto& [name, table] : tables) table->CloseWithReason("closed (its database was closed)");
}

Result<std::unique_ptr<DB>> DBImpl::Open(const DBOptions& options, const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("DB::Open: the database path is empty");
  Env* env = options.env != nullptr ? options.env : Env::Default();
  const std::string catalog_path = path + "/CATALOG";

  const bool exists = env->FileExists(catalog_path);
  if (exists && options.error_if_exists) {
    return Status::AlreadyExists("database " + path + " already exists (error_if_exists is set)");
  }
  if (!exists) {
    if (!options.create_if_missing) {
      return Status::NotFound("no database at " + path + " (no " + catalog_path +
                              "; create_if_missing is false)");
    }
    REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(path));
  }

  std::unique_ptr<FileLock> lock;
  REPLAYDB_RETURN_IF_ERROR(env->LockFile(path + "/LOCK", &lock));

  std::vector<TableSpec> specs;
  if (exists) {
    REPLAYDB_RETURN_IF_ERROR(LoadCatalog(env, catalog_path, &specs));
  } else {
    REPLAYDB_RETURN_IF_ERROR(SaveCatalog(env, catalog_path, specs));
  }

  std::unique_ptr<DBImpl> db(new DBImpl(env, path, std::move(lock)));
  for (const TableSpec& spec : specs) {
    Status s = spec.Validate();
    if (!s.ok()) {
      return Status::Corruption("catalog " + catalog_path + ": stored spec of table " +
                                Q(spec.name) + " is invalid: " + s.message());
    }
    if (db->specs_.count(spec.name) != 0) {
      return Status::Corruption("catalog " + catalog_path + ": table " + Q(spec.name) +
                                " appears twice");
    }
    REPLAYDB_ASSIGN_OR_RETURN(auto table, db->MakeTable(spec));
    db->specs_.emplace(spec.name, spec);
    db->tables_.emplace(spec.name, std::move(table));
  }
  return std::unique_ptr<DB>(std::move(db));
}

Result<std::shared_ptr<TableImpl>> DBImpl::MakeTable(const TableSpec& spec) {
  return TableImpl::Create(spec, [this](const TableSpec& s) { return PersistSpec(s); });
}

Status DBImpl::SaveCatalogLocked(const std::map<std::string, TableSpec, std::less<>>& specs) {
  std::vector<TableSpec> list;
  list.reserve(specs.size());
  for (const auto& [name, spec] : specs) list.push_back(spec);
  return SaveCatalog(env_, catalog_path_, list);
}

Result<std::shared_ptr<Table>> DBImpl::CreateTable(const TableSpec& spec) {
  REPLAYDB_RETURN_IF_ERROR(spec.Validate());
  std::lock_guard<std::mutex> lock(mu_);
  if (specs_.count(spec.name) != 0) {
    return Status::AlreadyExists("table " + Q(spec.name) + " already exists in " + path_);
  }
  // The table is made (it may need a GPU), then the catalog written: if
  // either fails, nothing changed.
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<TableImpl> table, MakeTable(spec));
  auto specs = specs_;
  specs.emplace(spec.name, spec);
  REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs));
  specs_.swap(specs);
  tables_.emplace(spec.name, table);
  return std::shared_ptr<Table>(table);
}

Result<std::shared_ptr<Table>> DBImpl::GetTable(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    return Status::NotFound("no table named " + Q(name) + " in " + path_);
  }
  return std::shared_ptr<Table>(it->second);
}

Status DBImpl::DropTable(std::string_view name) {
  std::shared_ptr<TableImpl> table;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tables_.find(name);
    if (it == tables_.end()) return Status::NotFound("no table named " + Q(name) + " in " + path_);
    auto specs = specs_;
    specs.erase(specs.find(name));
    REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs));
    specs_.swap(specs);
    table = std::move(it->second);
    tables_.erase(it);
  }
  // Outside mu_: closing takes the table's locks, which SetRateLimiter holds
  // while it calls back into PersistSpec.
  table->CloseWithReason("dropped");
  return Status::OK();
}

std::vector<std::string> DBImpl::ListTables() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  names.reserve(specs_.size());
  for (const auto& [name, spec] : specs_) names.push_back(name);
  return names;
}

Status DBImpl::PersistSpec(const TableSpec& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = specs_.find(spec.name);
  if (it == specs_.end()) {
    return Status::FailedPrecondition("table " + Q(spec.name) + " was dropped");
  }
  auto specs = specs_;
  specs[spec.name] = spec;
  REPLAYDB_RETURN_IF_ERROR(SaveCatalogLocked(specs));
  specs_.swap(specs);
  return Status::OK();
}

}  // namespace engine
}  // namespace replaydb
