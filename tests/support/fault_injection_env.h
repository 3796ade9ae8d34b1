// FaultInjectionEnv: an Env for tests (the test-support library,
// replaydb_test_support; not part of libreplaydb) that forwards to a base
// Env and can simulate a power loss, failed writes and fsyncs, torn writes and
// a full disk.
//
// Durability model. For every file written through this Env (opened by
// NewWritableFile or written by WriteFileAtomic) it tracks
//   - the durable size: the file's size when its last successful
//     WritableFile::Sync through this Env began (bytes appended while it ran
//     are not made durable by it), or the whole file after WriteFileAtomic;
//   - whether its creation is durable: a successful SyncDir of its directory
//     after it was created, or WriteFileAtomic (which syncs the directory).
// Files the Env has not written, directories, removals and truncations are
// treated as durable at once (removed or cut-off bytes cannot be brought back).
// A file opened by NewWritableFile that already existed, and that this Env was
// not tracking, is assumed durable as it stood (size and creation).
// DropUnsyncedData() then does what a power loss would: every tracked file is
// cut back to its durable size and those whose creation was not durable are
// removed.
//
// Paths are compared as spelled: SyncDir(dir) covers the files whose path is
// `dir` + "/" + name (a trailing '/' on `dir` is ignored; a path without '/'
// is in "."), so spell a directory the same way in every call.
//
// Injected errors are IOError in PosixEnv's style, "<call> <path>: <text>":
//   "write <path>: injected write failure"            (FailNthWrite)
//   "write <path>.tmp: injected write failure"        (FailNthWriteFileAtomic)
//   "fdatasync <path>: injected fsync failure"        (FailNthSync, WritableFile)
//   "fsync <dir>: injected fsync failure"             (FailNthSync, SyncDir)
//   "write <path>: No space left on device (...)"     (SetSpaceLimit; <path>.tmp
//                                                      for WriteFileAtomic)
//   "append <path>: file was open across a simulated power loss" (and
//     "sync", "truncate", "close" for the other WritableFile calls)
//   "<call> <path>: the machine is off (simulated power loss)"  (PowerOff;
//     <call> is open, write, remove, truncate, fsync or mkdir)
//
// Thread safety: every method may be called from any thread. One mutex
// serialises the bookkeeping together with the base Env's writes and
// truncations made through this Env (so a DropUnsyncedData never interleaves
// with an Append), which makes it slow under contention: a test tool, not a
// production Env. A WritableFile's fsync runs without it, so that Appends
// overlap a Sync as env.h allows (a Sync that a power loss overtakes counts
// for nothing). Calls that change no file data (ReadFileToString,
// NewSequentialFile, FileExists, GetFileSize, GetChildren, LockFile) are
// forwarded without the lock. The WritableFiles it returns keep env.h's
// contract (one owner at a time; Sync may overlap Append and Truncate).
//
// Lifetime: the base Env and this Env must outlive every WritableFile this Env
// returned.
#ifndef REPLAYDB_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_
#define REPLAYDB_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/env.h"
#include "replaydb/status.h"

namespace replaydb::testing_util {

class FaultInjectionEnv final : public Env {
 public:
  // Default: Env::Default(). "*base" must outlive this Env.
  explicit FaultInjectionEnv(Env* base = Env::Default());
  FaultInjectionEnv(const FaultInjectionEnv&) = delete;
  FaultInjectionEnv& operator=(const FaultInjectionEnv&) = delete;
  ~FaultInjectionEnv() override;

  Env* base() const { return base_; }

  // ---- Env: forwarded to the base, with the bookkeeping and faults above.
  Status CreateDirIfMissing(const std::string& dir) override;
  bool FileExists(const std::string& path) override;
  Status ReadFileToString(const std::string& path, std::string* out) override;
  // Counts as a write (writes(), bytes_written() on success) and as space
  // used. Fails, writing nothing and leaving `path` as it was, when armed by
  // FailNthWriteFileAtomic or when `data` does not fit under the space limit.
  Status WriteFileAtomic(const std::string& path, std::string_view data) override;
  // A removed file is no longer tracked.
  Status RemoveFile(const std::string& path) override;
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override;
  Status LockFile(const std::string& path, std::unique_ptr<FileLock>* lock) override;
  // The returned file's Append, Sync, Truncate and Close go through this Env
  // (faults, counters, durability tracking). With `truncate`, the emptying is
  // durable at once (durable size 0).
  Status NewWritableFile(const std::string& path, bool truncate,
                         std::unique_ptr<WritableFile>* file) override;
  // The same, over the base Env's mapped file.
  Status NewMappedWritableFile(const std::string& path,
                               std::unique_ptr<WritableFile>* file) override;
  Status NewSequentialFile(const std::string& path, std::unique_ptr<SequentialFile>* file) override;
  Status GetFileSize(const std::string& path, uint64_t* size) override;
  // The durable size of a tracked file becomes at most `size`.
  Status TruncateFile(const std::string& path, uint64_t size) override;
  // Counts as a sync (syncs()) and can be failed by FailNthSync. On success
  // the creation of every tracked file in `dir` is durable.
  Status SyncDir(const std::string& dir) override;

  // ---- Power loss.

  // Simulates a machine crash and restart: every tracked file is cut back,
  // through the base Env's TruncateFile, to its durable size, and every
  // tracked file whose creation was not durable is removed (and forgotten).
  // Every WritableFile opened before the call becomes unusable: its Append,
  // Sync, Truncate and Close return IOError "<call> <path>: file was open
  // across a simulated power loss" (Close still releases the base file).
  // Pending faults and counters are unchanged. Returns the first base Env
  // error, having tried every file; a tracked file found already gone is
  // forgotten without error.
  Status DropUnsyncedData();

  // A power loss that lasts: DropUnsyncedData, then the machine stays off
  // until PowerOn, so that nothing the program still does (a database being
  // closed: its last checkpoint, its log's final fsync) can reach the files
  // that a restart would find. While off, every call that would change a
  // file fails with IOError "<call> <path>: the machine is off (simulated
  // power loss)" and changes nothing: NewWritableFile, NewMappedWritableFile
  // ("open"), WriteFileAtomic ("write"), RemoveFile ("remove"),
  // TruncateFile ("truncate"), SyncDir ("fsync"), CreateDirIfMissing
  // ("mkdir"); WritableFiles opened before fail as after DropUnsyncedData.
  // Reads go on. Returns DropUnsyncedData's result.
  Status PowerOff();
  // Ends PowerOff: calls work again (files opened before stay unusable).
  void PowerOn();

  // ---- Injected failures. Each is one-shot: it fires once and disarms.
  // n == 0 disarms it; arming again replaces the earlier setting.

  // The n-th WritableFile::Append from now (1 = the next), counted over all
  // files of this Env, fails with IOError "write <path>: injected write
  // failure" after writing the first min(partial_bytes, data.size()) bytes of
  // its data to the base file: a torn write. As env.h requires, size() still
  // reports the bytes before the call; the torn bytes stay in the base file
  // until the next Append or Truncate through that WritableFile cuts them off
  // first (where a POSIX file would overwrite them), and a Sync before that
  // makes them durable.
  void FailNthWrite(uint64_t n, size_t partial_bytes = 0);
  // The n-th WritableFile::Sync or SyncDir from now fails with IOError
  // "fdatasync <path>: injected fsync failure" (for SyncDir: "fsync <dir>:
  // ..."), without calling the base Env: nothing becomes durable.
  void FailNthSync(uint64_t n);
  // The n-th WriteFileAtomic from now fails with IOError "write <path>.tmp:
  // injected write failure", writing nothing: `path` keeps its old contents.
  void FailNthWriteFileAtomic(uint64_t n);

  // ---- Full disk.

  // Bytes appended through this Env (bytes_written(): WritableFile::Append and
  // WriteFileAtomic, counted since construction and never given back by
  // truncation or removal) may not exceed `bytes`. An Append that does not fit
  // writes the prefix that does (a torn write, as FailNthWrite describes) and
  // fails with IOError "write <path>: No space left on device (...)"; a
  // WriteFileAtomic that does not fit writes nothing, fails likewise naming
  // "<path>.tmp", and leaves `path` as it was. Later writes fail the same way
  // until ClearSpaceLimit, ResetFaults or a higher limit. If an armed
  // FailNthWrite fires on the same Append, its error is the one returned.
  // Default: no limit.
  void SetSpaceLimit(uint64_t bytes);
  void ClearSpaceLimit();

  // Disarms every FailNth* and clears the space limit. Counters and
  // durability tracking are unchanged.
  void ResetFaults();

  // ---- Counters, since construction.

  // WritableFile::Append and WriteFileAtomic calls, failed ones included
  // (calls on files open across a simulated power loss, and calls while
  // PowerOff lasts, excluded).
  uint64_t writes() const;
  // WritableFile::Sync and SyncDir calls, failed ones included (as above).
  uint64_t syncs() const;
  // Bytes written to base files by Append (torn prefixes included) and by
  // successful WriteFileAtomic calls.
  uint64_t bytes_written() const;
  // Which writes a power loss may take. SyncTicket(dir) counts the
  // WritableFile::Sync calls begun so far on files in `dir` (spelled as for
  // SyncDir); take it after an Append returns. SyncedSince(dir, ticket) is
  // true once a Sync on a file in `dir` that began after the ticket was
  // taken has completed successfully (before any power loss since): that
  // Sync made the Append durable if it was of the same file. A test of a
  // log that syncs its older files before starting newer ones (the WAL)
  // needs no more.
  uint64_t SyncTicket(const std::string& dir) const;
  bool SyncedSince(const std::string& dir, uint64_t ticket) const;

 private:
  class TrackedWritableFile;

  struct FileState {
    uint64_t id;            // tells a re-created file from the one a writer opened
    uint64_t durable_size;  // bytes that survive DropUnsyncedData
    bool creation_durable;  // false: DropUnsyncedData removes the file
  };

  // Opens a base file through `open_base` and wraps it for tracking.
  Status OpenTracked(const std::string& path, bool truncate, std::unique_ptr<WritableFile>* file,
                     const std::function<Status(std::unique_ptr<WritableFile>*)>& open_base);
  // DropUnsyncedData. REQUIRES: mu_ held.
  Status DropUnsyncedDataLocked();
  // One-shot countdown: true on the n-th call after arming. REQUIRES: mu_ held.
  static bool Fires(uint64_t* countdown);
  // "write <path>: No space left on device (...)". REQUIRES: mu_ held.
  std::string NoSpaceMessage(const std::string& path) const;
  // Bytes of `wanted` that still fit under the space limit. REQUIRES: mu_ held.
  uint64_t SpaceFor(uint64_t wanted) const;
  // The tracked state of `path` if it is still the file with `id`.
  // REQUIRES: mu_ held.
  FileState* Tracked(const std::string& path, uint64_t id);
  // IOError "<call> <path>: the machine is off ..." while PowerOff lasts,
  // else OK. REQUIRES: mu_ held.
  Status OffError(std::string_view call, const std::string& path) const;

  Env* const base_;

  mutable std::mutex mu_;
  std::map<std::string, FileState> files_;  // guarded by mu_
  uint64_t next_file_id_ = 1;               // guarded by mu_
  uint64_t epoch_ = 0;                      // guarded by mu_; +1 per DropUnsyncedData
  uint64_t write_countdown_ = 0;            // guarded by mu_
  size_t write_partial_bytes_ = 0;          // guarded by mu_
  uint64_t sync_countdown_ = 0;             // guarded by mu_
  uint64_t atomic_write_countdown_ = 0;     // guarded by mu_
  std::optional<uint64_t> space_limit_;     // guarded by mu_
  uint64_t writes_ = 0;                     // guarded by mu_
  uint64_t syncs_ = 0;                      // guarded by mu_
  uint64_t bytes_written_ = 0;              // guarded by mu_
  bool off_ = false;                        // guarded by mu_; PowerOff until PowerOn
  struct SyncTickets {
    uint64_t begun = 0;      // WritableFile::Sync calls begun
    uint64_t completed = 0;  // the latest-begun of those that succeeded
  };
  std::map<std::string, SyncTickets> sync_tickets_;  // guarded by mu_; by directory
};

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_SUPPORT_FAULT_INJECTION_ENV_H_
