// DBImpl: the database directory, its lock, its catalog and open tables.
#ifndef REPLAYDB_ENGINE_DB_IMPL_H_
#define REPLAYDB_ENGINE_DB_IMPL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/table_impl.h"
#include "replaydb/db.h"
#include "replaydb/env.h"

namespace replaydb::engine {

class DBImpl final : public DB {
 public:
  static Result<std::unique_ptr<DB>> Open(const DBOptions& options, const std::string& path);
  ~DBImpl() override;

  Result<std::shared_ptr<Table>> CreateTable(const TableSpec& spec) override;
  Result<std::shared_ptr<Table>> GetTable(std::string_view name) override;
  Status DropTable(std::string_view name) override;
  std::vector<std::string> ListTables() const override;
  const std::string& path() const override { return path_; }

 private:
  DBImpl(Env* env, std::string path, std::unique_ptr<FileLock> lock);

  Result<std::shared_ptr<TableImpl>> MakeTable(const TableSpec& spec);
  // Writes the catalog of `specs`. REQUIRES: mu_ held.
  Status SaveCatalogLocked(const std::map<std::string, TableSpec, std::less<>>& specs);
  // Records a table's changed spec (SetRateLimiter).
  Status PersistSpec(const TableSpec& spec);

  Env* const env_;
  const std::string path_;
  const std::string catalog_path_;
  std::unique_ptr<FileLock> lock_;

  mutable std::mutex mu_;
  std::map<std::string, TableSpec, std::less<>> specs_;
  std::map<std::string, std::shared_ptr<TableImpl>, std::less<>> tables_;
};

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_DB_IMPL_H_
