// RocksDB's file I/O through replaydb's Env (include/replaydb/env.h), so the
// cold store's writes meet the same seam as the WAL's and the catalog's: a
// fault-injecting Env fails the cold store's writes and fsyncs too, fills its
// disk, and drops what RocksDB did not sync.
//
// What goes through `env`: every file RocksDB writes (SST files, MANIFEST,
// CURRENT's temporary, OPTIONS, its own log files) by Append, Sync, Truncate
// and Close, and every directory fsync. What does not: reads, renames,
// deletions, locking and RocksDB's info LOG, which go to RocksDB's default
// file system (replaydb's Env has no random-access reads; nothing there is
// durable state that a fault test needs to tear).
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
