// Env: the seam all replaydb file I/O goes through, so tests can substitute
// an in-memory or fault-injecting file system. Env::Default() is POSIX.
//
// Thread safety: implementations must be safe for concurrent use.
#ifndef REPLAYDB_ENV_H_
#define REPLAYDB_ENV_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/status.h"

namespace replaydb {

// A held lock on a file; destroying it releases the lock.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX Env. Never destroyed.
  static Env* Default();

  // Creates `dir` (one level) if it does not exist. IOError naming the path
  // and the system error otherwise.
  virtual Status CreateDirIfMissing(const std::string& dir) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // NotFound if absent; IOError naming the path on a read failure.
  virtual Status ReadFileToString(const std::string& path, std::string* out) = 0;
  // Replaces `path` atomically and durably: writes `path`.tmp, fsyncs it,
  // renames it over `path`, fsyncs the directory. On failure `path` keeps its
  // old contents and the temporary file is removed.
  virtual Status WriteFileAtomic(const std::string& path, std::string_view data) = 0;
  // NotFound if absent.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Names (not paths) of the entries in `dir`, without "." and "..".
  virtual Status GetChildren(const std::string& dir, std::vector<std::string>* names) = 0;
  // Takes an exclusive lock on `path` (created if missing) that no other
  // opener, in this process or another, can take while it is held. Busy if
  // held elsewhere, with the holder's pid in the message when known.
  virtual Status LockFile(const std::string& path, std::unique_ptr<FileLock>* lock) = 0;
};

}  // namespace replaydb

#endif  // REPLAYDB_ENV_H_
