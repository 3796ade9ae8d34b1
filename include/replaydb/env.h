// Env: the seam all replaydb file I/O goes through, so tests can substitute
// an in-memory or fault-injecting file system. Env::Default() is POSIX.
//
// Thread safety: implementations must be safe for concurrent use.
#ifndef REPLAYDB_ENV_H_
#define REPLAYDB_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

// A file opened for appending (the WAL's segments). Not thread-safe: one
// owner calls it at a time, with one exception: Sync may run on one thread
// while another calls Append, Truncate or size() (the WAL fsyncs outside its
// append lock). Close must not overlap any other call.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends `data`. Once it returns OK the bytes are in the operating
  // system's hands: they survive a crash of this process, not of the
  // machine. On failure a prefix of `data` may have been written; size()
  // then still reports the bytes before this call, and Truncate(size())
  // removes the partial write.
  virtual Status Append(std::string_view data) = 0;
  // Appends `pieces` one after another, as Append of their concatenation
  // would, without first copying them together. On failure a prefix may
  // have been written and size() may count it: Truncate to the size before
  // the call removes it. The default calls Append once per piece.
  virtual Status AppendV(std::span<const std::string_view> pieces) {
    for (std::string_view piece : pieces) {
      if (Status s = Append(piece); !s.ok()) return s;
    }
    return Status::OK();
  }
  // Makes every appended byte durable (fdatasync): it survives a machine
  // crash once this returns OK.
  virtual Status Sync() = 0;
  // Cuts the file back to `size` bytes (<= size()).
  virtual Status Truncate(uint64_t size) = 0;
  // Closes the file; later calls fail. Does not sync.
  virtual Status Close() = 0;
  // Bytes in the file: those it had when opened plus those appended.
  virtual uint64_t size() const = 0;
};

// A file read front to back. Not thread-safe.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `n` bytes into `scratch` (>= n bytes) and points `*result`
  // at the bytes read: fewer than n only at the end of the file, none there.
  virtual Status Read(size_t n, std::string_view* result, char* scratch) = 0;
  // Moves on `n` bytes without reading them (past the end: the end). The
  // default reads and drops them.
  virtual Status Skip(uint64_t n);
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

  // Opens `path` for appending, creating it if missing; with `truncate` an
  // existing file is emptied first. A new file's directory entry becomes
  // durable only after SyncDir of its directory.
  virtual Status NewWritableFile(const std::string& path, bool truncate,
                                 std::unique_ptr<WritableFile>* file) = 0;
  // Like NewWritableFile(path, /*truncate=*/true, file), for a file written
  // by many small appends (the WAL's segments). The POSIX Env maps the file's
  // end into memory in preallocated (fallocate) chunks, so Append is a memcpy
  // rather than a system call, with the same guarantees (once it returns the
  // bytes survive a crash of this process; a full disk is an IOError from
  // Append). The difference a reader sees: until Close, and after a crash
  // before Close, the file may be longer than size() on disk, the extra tail
  // zero-filled. Readers of such files treat a zero tail as unwritten.
  // The default forwards to NewWritableFile.
  virtual Status NewMappedWritableFile(const std::string& path,
                                       std::unique_ptr<WritableFile>* file) {
    return NewWritableFile(path, /*truncate=*/true, file);
  }
  // NotFound if absent.
  virtual Status NewSequentialFile(const std::string& path,
                                   std::unique_ptr<SequentialFile>* file) = 0;
  // NotFound if absent.
  virtual Status GetFileSize(const std::string& path, uint64_t* size) = 0;
  // Cuts `path` back to `size` bytes. NotFound if absent.
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  // Makes the directory's entries (created, renamed, removed files) durable.
  virtual Status SyncDir(const std::string& dir) = 0;
};

}  // namespace replaydb

#endif  // REPLAYDB_ENV_H_
