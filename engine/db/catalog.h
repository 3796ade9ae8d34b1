// The catalog: the list of tables and their specs, stored in DIR/CATALOG as
// FlatBuffers (schema engine/db/catalog.fbs, byte format in engine/db/CATALOG.md)
// and replaced atomically through Env::WriteFileAtomic.
#ifndef REPLAYDB_ENGINE_DB_CATALOG_H_
#define REPLAYDB_ENGINE_DB_CATALOG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/env.h"
#include "replaydb/options.h"
#include "replaydb/status.h"

namespace replaydb::engine {

// One table of the catalog: its id (unique in the database, never reused)
// and spec.
struct CatalogEntry {
  uint32_t id = 0;
  TableSpec spec;
};

struct CatalogContents {
  uint32_t next_table_id = 1;  // > every entry's id
  std::vector<CatalogEntry> tables;
  // cold/ holds a checkpoint of this database (catalog.fbs).
  bool checkpointed = false;
};

std::string EncodeCatalog(const CatalogContents& catalog);
// Like the vector forms below, with ids. Files written before ids existed
// get ids 1, 2, ... in file order.
Status DecodeCatalog(std::string_view bytes, const std::string& source, CatalogContents* catalog);
Status LoadCatalog(Env* env, const std::string& path, CatalogContents* catalog);
Status SaveCatalog(Env* env, const std::string& path, const CatalogContents& catalog);

// The file bytes for `tables` (ids 1, 2, ... in order).
std::string EncodeCatalog(const std::vector<TableSpec>& tables);

// Parses file bytes. Corruption naming `source` (the file's path) and what is
// wrong (bad checksum, failed verification, unknown dtype, ...) for bad bytes;
// never crashes on any input.
Status DecodeCatalog(std::string_view bytes, const std::string& source,
                     std::vector<TableSpec>* tables);

// Reads and decodes `path`; NotFound if the file is absent.
Status LoadCatalog(Env* env, const std::string& path, std::vector<TableSpec>* tables);
// Encodes and atomically replaces `path`.
Status SaveCatalog(Env* env, const std::string& path, const std::vector<TableSpec>& tables);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_DB_CATALOG_H_
