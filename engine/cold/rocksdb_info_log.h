// RocksDB's info log (its diagnostic text: opens, flushes, compactions,
// background errors, statistics) written through replaydb's Env, in place of
// the logger RocksDB would make for itself.
//
// Why not RocksDB's own: it writes through its default file system, which a
// fault-injecting Env cannot reach, and it aborts the process on a full disk.
// Its logger buffers lines in a WritableFileWriter; once a write of that
// buffer fails (ENOSPC, EFBIG), the next line logged trips an assertion in
// the writer (`sync_without_flush_called_`), and Debian's librocksdb is built
// with assertions on. RocksDB logs from its background threads right after a
// failed flush, so a disk that filled during a checkpoint killed the process.
//
// This logger never fails a caller and never aborts: a line it cannot write
// is dropped (the partial write cut off again), and once a write works again
// a line saying how many were dropped, and the first error, goes first. If
// the cut itself fails, the file is closed and the next line reopens it
// (appending after whatever the failed write left). Each line is one Append
// (handed to the operating system at once, never synced: nothing in it is
// durable state).
//
// The file is appended across opens. When a line would take it past
// `max_bytes`, it is cut back to empty and starts again with a line saying
// so, so it never grows without bound (RocksDB's rotation to LOG.old.* files
// does not apply: replaydb's Env has no rename).
//
// Thread safety: RocksDB logs from any thread; every call is serialised by
// one mutex.
#ifndef REPLAYDB_ENGINE_COLD_ROCKSDB_INFO_LOG_H_
#define REPLAYDB_ENGINE_COLD_ROCKSDB_INFO_LOG_H_

#include <cstdint>
#include <memory>
#include <string>

#include "replaydb/env.h"

namespace rocksdb {
class Logger;
}  // namespace rocksdb

namespace replaydb::engine {

// The size at which the info log starts again. 8 MiB: a day of RocksDB's
// periodic statistics (every 10 minutes) and many opens.
inline constexpr uint64_t kRocksdbInfoLogMaxBytes = uint64_t{8} << 20;

// A logger appending to `path` through `env`, at RocksDB's INFO level. While
// `path` cannot be opened, lines are dropped (and counted), and each line
// tries again: the log is diagnostic only, the store works without it.
// `env` must outlive the logger.
std::shared_ptr<rocksdb::Logger> NewRocksdbInfoLog(Env* env, const std::string& path,
                                                   uint64_t max_bytes = kRocksdbInfoLogMaxBytes);

}  // namespace replaydb::engine

#endif  // REPLAYDB_ENGINE_COLD_ROCKSDB_INFO_LOG_H_
