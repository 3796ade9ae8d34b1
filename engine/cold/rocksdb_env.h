// RocksDB's file I/O through replaydb's Env (include/replaydb/env.h), so the
// cold store's writes meet the same seam as the WAL's and the catalog's: a
// fault-injecting Env fails the cold store's writes and fsyncs too, fills its
// disk, and drops what RocksDB did not sync.
//
// What goes through `env`: every file RocksDB writes (SST files, MANIFEST,
// CURRENT's temporary, OPTIONS, its own log files) by Append, Sync, Truncate
// and Close, and every directory fsync. RocksDB's info LOG goes through `env`
// too, but by another road: ColdStore gives RocksDB a logger of its own
// (engine/cold/rocksdb_info_log.h), since the one this Env would make writes
// through RocksDB's default file system. What does not go through `env`:
// reads, renames (CURRENT's temporary onto CURRENT), deletions and locking,
// which go to RocksDB's default file system (replaydb's Env has no
// random-access reads and no rename). A fault test therefore cannot fail
// them, and a simulated power loss takes a rename or a deletion as durable
// at once (RocksDB fsyncs the directory after each all the same).
//
// Thread safety: as RocksDB requires of an Env; `env` must be thread-safe (it
// is, per env.h).
#ifndef REPLAYDB_ENGINE_COLD_ROCKSDB_ENV_H_
#define REPLAYDB_ENGINE_COLD_ROCKSDB_ENV_H_

#include <memory>

#include "replaydb/env.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace replaydb::engine {

// A RocksDB Env over `env` as above. `env` must outlive it; the result must
// outlive every RocksDB database opened with it.
std::unique_ptr<rocksdb::Env> NewRocksdbEnv(Env* env);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_COLD_ROCKSDB_ENV_H_
