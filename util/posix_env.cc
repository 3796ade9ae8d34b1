// PosixEnv: Env::Default(), replaydb's file I/O on a POSIX file system.
//
// Every failure is a Status naming the system call, the path and the system
// error, e.g. "open /db/CATALOG.tmp: No space left on device". Missing files
// are NotFound where env.h says so (ReadFileToString, RemoveFile); every other
// failure is IOError.
//
// Thread safety: PosixEnv holds no state; every method may be called from any
// thread. WriteFileAtomic REQUIRES that no other thread or process writes the
// same path at the same time (both would use `path`.tmp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replaydb/env.h"
#include "replaydb/status.h"

namespace replaydb {
namespace {

// strerror_r comes in two flavours (GNU returns the text, XSI fills `buf`);
// overload resolution picks the one this libc has.
[[maybe_unused]] const char* StrerrorResult(const char* text, const char* /*buf*/) {
  return text;
}
[[maybe_unused]] const char* StrerrorResult(int rc, const char* buf) {
  return rc == 0 ? buf : "Unknown error";
}

std::string ErrnoText(int err) {
  char buf[256] = {};
  return StrerrorResult(strerror_r(err, buf, sizeof(buf)), buf);
}

// "<op> <path>: <strerror(err)>".
std::string ErrorMessage(std::string_view op, const std::string& path, int err) {
  std::string msg(op);
  msg += ' ';
  msg += path;
  msg += ": ";
  msg += ErrnoText(err);
  return msg;
}

Status IOErrorFor(std::string_view op, const std::string& path, int err) {
  return Status::IOError(ErrorMessage(op, path, err));
}

// NotFound for a missing file, IOError otherwise.
Status NotFoundOrIOError(std::string_view op, const std::string& path, int err) {
  if (err == ENOENT) return Status::NotFound(ErrorMessage(op, path, err));
  return IOErrorFor(op, path, err);
}

// open(2), retried on EINTR. Returns the fd or -1 with errno set.
int OpenRetrying(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// Writes all of `data`, looping over partial writes and EINTR.
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IOErrorFor("write", path, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status FsyncFd(int fd, const std::string& path) {
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return IOErrorFor("fsync", path, errno);
  return Status::OK();
}

Status FdatasyncFd(int fd, const std::string& path) {
  int rc;
  do {
    rc = ::fdatasync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return IOErrorFor("fdatasync", path, errno);
  return Status::OK();
}

// Writes every byte of `pieces` at `offset` (pwritev, looping over partial
// writes and EINTR; at most IOV_MAX pieces per call), adding each byte that
// lands to *written.
Status PwritevAll(int fd, std::span<const std::string_view> pieces, uint64_t offset,
                  const std::string& path, uint64_t* written) {
  constexpr size_t kMaxIov = 64;
  size_t next = 0;      // the first piece not wholly written
  size_t skip = 0;      // bytes of it already written
  while (next < pieces.size()) {
    iovec iov[kMaxIov];
    int count = 0;
    for (size_t i = next; i < pieces.size() && count < static_cast<int>(kMaxIov); ++i) {
      const size_t from = i == next ? skip : 0;
      if (pieces[i].size() == from) continue;
      iov[count].iov_base = const_cast<char*>(pieces[i].data() + from);
      iov[count].iov_len = pieces[i].size() - from;
      ++count;
    }
    if (count == 0) break;
    const ssize_t w = ::pwritev(fd, iov, count, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IOErrorFor("write", path, errno);
    }
    offset += static_cast<uint64_t>(w);
    *written += static_cast<uint64_t>(w);
    size_t left = static_cast<size_t>(w);
    while (next < pieces.size() && left >= pieces[next].size() - skip) {
      left -= pieces[next].size() - skip;
      skip = 0;
      ++next;
    }
    skip += left;
  }
  return Status::OK();
}

// The directory holding `path`: "." for a bare name, "/" for "/name".
std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status SyncDirectory(const std::string& dir) {
  const int fd = OpenRetrying(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return IOErrorFor("open", dir, errno);
  Status s = FsyncFd(fd, dir);
  ::close(fd);
  return s;
}

// The pid recorded in a lock file, or 0 if it holds none.
long ReadLockHolderPid(int fd) {
  char buf[32] = {};
  ssize_t n;
  do {
    n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;
  long pid = 0;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; ++i) {
    if (pid > 100000000) return 0;  // not a pid
    pid = pid * 10 + (buf[i] - '0');
  }
  return pid;
}

// Holds flock(LOCK_EX) on its own open file description of the lock file.
// flock locks belong to the open file description, so a second open of the
// same path, in this process or another, conflicts with it. (POSIX record
// locks, fcntl(F_SETLK), would not do: they belong to the process, so a second
// opener in the same process would get the lock too, and closing any
// descriptor of the file would drop it.) A child forked
// while the lock is held inherits the description and with it the lock, until
// the child exits or closes the descriptor (O_CLOEXEC covers exec).
class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  PosixFileLock(const PosixFileLock&) = delete;
  PosixFileLock& operator=(const PosixFileLock&) = delete;

  ~PosixFileLock() override {
    // Forget the holder's pid so a stale one is never reported; best effort.
    (void)!::ftruncate(fd_, 0);
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }

 private:
  const int fd_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  PosixWritableFile(const PosixWritableFile&) = delete;
  PosixWritableFile& operator=(const PosixWritableFile&) = delete;
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return Status::IOError("append to closed file " + path_);
    Status s = WriteAll(fd_, data, path_);
    if (s.ok()) {
      size_ += data.size();
    } else if (::lseek(fd_, static_cast<off_t>(size_), SEEK_SET) < 0) {
      // Keep appending where size() says, whatever the partial write did.
      s = IOErrorFor("lseek", path_, errno);
    }
    return s;
  }

  Status Sync() override {
    if (fd_ < 0) return Status::IOError("sync of closed file " + path_);
    return FdatasyncFd(fd_, path_);
  }

  Status Truncate(uint64_t size) override {
    if (fd_ < 0) return Status::IOError("truncate of closed file " + path_);
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return IOErrorFor("ftruncate", path_, errno);
    }
    if (::lseek(fd_, static_cast<off_t>(size), SEEK_SET) < 0) {
      return IOErrorFor("lseek", path_, errno);
    }
    size_ = size;
    return Status::OK();
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return IOErrorFor("close", path_, errno);
    return Status::OK();
  }

  uint64_t size() const override { return size_; }

 private:
  const std::string path_;
  int fd_;
  uint64_t size_;
};

// A file appended through a shared memory mapping of its end: Append is a
// memcpy into the page cache, with no system call, and the bytes are the
// kernel's at once (a crash of this process cannot lose them). The file is
// extended in chunks of kChunkBytes with fallocate before a chunk is mapped,
// so a full disk is an error from Append, never a SIGBUS. Until Close the
// file's size on disk is the preallocated size: the bytes past size() read
// as zeros (also after a crash, when Close never ran).
class PosixMappedWritableFile final : public WritableFile {
 public:
  static constexpr uint64_t kChunkBytes = uint64_t{4} << 20;
  // Appends of this many bytes or more are written with pwritev.
  static constexpr size_t kWriteBytes = 4096;
  // Mapped pages are made writable this many bytes at a time, ahead of the
  // appends that need them.
  static constexpr uint64_t kPopulateBytes = uint64_t{256} << 10;

  PosixMappedWritableFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  PosixMappedWritableFile(const PosixMappedWritableFile&) = delete;
  PosixMappedWritableFile& operator=(const PosixMappedWritableFile&) = delete;
  ~PosixMappedWritableFile() override { (void)Close(); }

  Status Append(std::string_view data) override {
    return AppendV(std::span<const std::string_view>(&data, 1));
  }

  Status AppendV(std::span<const std::string_view> pieces) override {
    if (fd_ < 0) return Status::IOError("append to closed file " + path_);
    size_t total = 0;
    for (std::string_view piece : pieces) total += piece.size();
    // `end` advances as bytes land; size_ only once all of them did, so that
    // after a failure size() still reports the bytes before this call (the
    // landed prefix is zeroed again: unwritten, as env.h's cut back expects).
    uint64_t end = size_;
    Status s;
    if (total >= kWriteBytes) {
      // Large appends: one pwritev into the preallocated range (the same
      // page cache pages the mapping shows), which the kernel fills without
      // a page fault per page, and without joining the pieces first.
      while (end + total > allocated_ && s.ok()) s = Preallocate();
      if (s.ok()) s = PwritevAll(fd_, pieces, end, path_, &end);
    } else {
      for (std::string_view piece : pieces) {
        s = CopyIntoMapping(piece, &end);
        if (!s.ok()) break;
      }
    }
    if (s.ok()) {
      size_ = end;
    } else if (end > size_) {
      (void)ZeroRange(size_, end);
    }
    return s;
  }

  Status Sync() override {
    if (fd_ < 0) return Status::IOError("sync of closed file " + path_);
    // fdatasync writes back the pages dirtied through the mapping too (on
    // Linux msync(MS_SYNC) is the same flush), and the size fallocate set.
    return FdatasyncFd(fd_, path_);
  }

  Status Truncate(uint64_t size) override {
    if (fd_ < 0) return Status::IOError("truncate of closed file " + path_);
    if (size > size_) {
      return Status::InvalidArgument("truncate " + path_ + " to " + std::to_string(size) +
                                     " bytes: the file has only " + std::to_string(size_));
    }
    // Zero the cut bytes, so they read as the unwritten preallocated tail
    // they now are (the range is allocated: this cannot run out of space).
    REPLAYDB_RETURN_IF_ERROR(ZeroRange(size, size_));
    size_ = size;
    return Status::OK();
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    Unmap();
    // Give back the preallocated tail (never extend: the file may have been
    // cut shorter under us, as a simulated power loss does).
    Status s;
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      s = IOErrorFor("fstat", path_, errno);
    } else if (static_cast<uint64_t>(st.st_size) > size_ &&
               ::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      s = IOErrorFor("ftruncate", path_, errno);
    }
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && s.ok()) s = IOErrorFor("close", path_, errno);
    return s;
  }

  uint64_t size() const override { return size_; }

 private:
  // Copies `data` through the mapping to *end, advancing *end past every
  // byte that landed.
  Status CopyIntoMapping(std::string_view data, uint64_t* end) {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      if (map_ == nullptr || *end < map_offset_ || *end >= map_offset_ + map_bytes_) {
        REPLAYDB_RETURN_IF_ERROR(MapChunkAt(*end));
      }
      const size_t take = std::min<uint64_t>(left, map_offset_ + map_bytes_ - *end);
      if (*end + take > populated_end_) PopulateFrom(*end);
      std::memcpy(map_ + (*end - map_offset_), p, take);
      p += take;
      left -= take;
      *end += take;
    }
    return Status::OK();
  }

  // Writes zeros over [from, to) (preallocated, so this cannot run out of
  // space), through the file so that mapped and unmapped bytes alike change.
  Status ZeroRange(uint64_t from, uint64_t to) {
    static const char kZeros[64 << 10] = {};
    while (from < to) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(to - from, sizeof(kZeros)));
      const std::string_view zeros(kZeros, n);
      REPLAYDB_RETURN_IF_ERROR(
          PwritevAll(fd_, std::span<const std::string_view>(&zeros, 1), from, path_, &from));
    }
    return Status::OK();
  }

  // Extends the preallocated range by a chunk.
  Status Preallocate() {
    const int rc = ::posix_fallocate(fd_, static_cast<off_t>(allocated_),
                                     static_cast<off_t>(kChunkBytes));
    if (rc != 0) return IOErrorFor("fallocate", path_, rc);
    allocated_ += kChunkBytes;
    return Status::OK();
  }

  // Makes the mapping's pages from the one holding `pos` on writable, up to
  // kPopulateBytes, with one madvise(MADV_POPULATE_WRITE) rather than a
  // page fault per page (each fault is a trip into the kernel, and a costly
  // one in a virtual machine). Contents do not change. Where the kernel
  // lacks it (before Linux 5.14) or refuses, the page faults do the work.
  void PopulateFrom(uint64_t pos) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t from = std::max(populated_end_, pos / page * page);
    const uint64_t to = std::min(map_offset_ + map_bytes_, from + kPopulateBytes);
    populated_end_ = to;
#ifdef MADV_POPULATE_WRITE
    if (populate_ && from < to &&
        ::madvise(map_ + (from - map_offset_), to - from, MADV_POPULATE_WRITE) != 0 &&
        errno == EINVAL) {
      populate_ = false;
    }
#endif
  }

  // Maps the chunk starting at the page holding `pos`, preallocating it.
  Status MapChunkAt(uint64_t pos) {
    Unmap();
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t offset = pos / page * page;
    while (offset + kChunkBytes > allocated_) REPLAYDB_RETURN_IF_ERROR(Preallocate());
    void* m = ::mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                     static_cast<off_t>(offset));
    if (m == MAP_FAILED) return IOErrorFor("mmap", path_, errno);
    map_ = static_cast<char*>(m);
    map_offset_ = offset;
    map_bytes_ = kChunkBytes;
    populated_end_ = offset;
    return Status::OK();
  }

  void Unmap() {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    map_ = nullptr;
    map_offset_ = 0;
    map_bytes_ = 0;
  }

  const std::string path_;
  int fd_;
  uint64_t size_;
  // The file is preallocated (fallocate) up to here: [size_, allocated_)
  // reads as zeros and can be written without running out of space.
  uint64_t allocated_ = 0;
  // Mapped pages below this offset were made writable ahead (PopulateFrom);
  // populate_ turns off where the kernel has no MADV_POPULATE_WRITE.
  uint64_t populated_end_ = 0;
  bool populate_ = true;
  // The mapped file range [map_offset_, map_offset_ + map_bytes_), if any.
  char* map_ = nullptr;
  uint64_t map_offset_ = 0;
  uint64_t map_bytes_ = 0;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  PosixSequentialFile(const PosixSequentialFile&) = delete;
  PosixSequentialFile& operator=(const PosixSequentialFile&) = delete;
  ~PosixSequentialFile() override { ::close(fd_); }

  Status Read(size_t n, std::string_view* result, char* scratch) override {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, scratch + got, n - got);
      if (r < 0) {
        if (errno == EINTR) continue;
        *result = {};
        return IOErrorFor("read", path_, errno);
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    *result = std::string_view(scratch, got);
    return Status::OK();
  }

  Status Skip(uint64_t n) override {
    if (::lseek(fd_, static_cast<off_t>(n), SEEK_CUR) < 0) return IOErrorFor("seek", path_, errno);
    return Status::OK();
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixEnv final : public Env {
 public:
  Status CreateDirIfMissing(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) == 0) return Status::OK();
    const int err = errno;
    if (err == EEXIST) {
      struct stat st;
      if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();
      return Status::IOError("mkdir " + dir + ": exists and is not a directory");
    }
    return IOErrorFor("mkdir", dir, err);
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  Status ReadFileToString(const std::string& path, std::string* out) override {
    out->clear();
    const int fd = OpenRetrying(path.c_str(), O_RDONLY);
    if (fd < 0) return NotFoundOrIOError("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      out->reserve(static_cast<size_t>(st.st_size));
    }
    char buf[64 * 1024];
    Status s;
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        s = IOErrorFor("read", path, errno);
        break;
      }
      if (n == 0) break;
      out->append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    if (!s.ok()) out->clear();
    return s;
  }

  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    const std::string tmp = path + ".tmp";
    const int fd = OpenRetrying(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return IOErrorFor("open", tmp, errno);
    Status s = WriteAll(fd, data, tmp);
    if (s.ok()) s = FsyncFd(fd, tmp);
    // close() may report a deferred write error (NFS); never retried, since
    // the descriptor is released even when it fails.
    if (::close(fd) != 0 && s.ok()) s = IOErrorFor("close", tmp, errno);
    if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      s = IOErrorFor("rename " + tmp + " to", path, errno);
    }
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
    // The rename is done: `path` already holds the new bytes, so a failure
    // from here on cannot restore the old ones. It means the replacement may
    // not survive a crash.
    return SyncDirectory(DirName(path));
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return NotFoundOrIOError("unlink", path, errno);
    return Status::OK();
  }

  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    names->clear();
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return IOErrorFor("opendir", dir, errno);
    Status s;
    while (true) {
      errno = 0;
      const struct dirent* entry = ::readdir(d);
      if (entry == nullptr) {
        if (errno != 0) s = IOErrorFor("readdir", dir, errno);
        break;
      }
      const std::string_view name(entry->d_name);
      if (name == "." || name == "..") continue;
      names->emplace_back(name);
    }
    ::closedir(d);
    if (!s.ok()) names->clear();
    return s;
  }

  Status LockFile(const std::string& path, std::unique_ptr<FileLock>* lock) override {
    lock->reset();
    const int fd = OpenRetrying(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) return IOErrorFor("open", path, errno);
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        // The holder writes its pid right after locking; it may not have yet.
        const long pid = ReadLockHolderPid(fd);
        ::close(fd);
        std::string msg = "database lock " + path + " is held by another read-write opener";
        if (pid == 0) {
          msg += " (pid unknown)";
        } else if (pid == static_cast<long>(::getpid())) {
          msg += " (pid " + std::to_string(pid) + ", this process)";
        } else {
          msg += " (pid " + std::to_string(pid) + ")";
        }
        return Status::Busy(std::move(msg));
      }
      ::close(fd);
      return IOErrorFor("flock", path, err);
    }
    // Record the holder for the Busy message of later openers. Best effort:
    // the lock is held whether or not this succeeds.
    const std::string pid_text = std::to_string(static_cast<long>(::getpid())) + "\n";
    if (::ftruncate(fd, 0) == 0) {
      (void)!::pwrite(fd, pid_text.data(), pid_text.size(), 0);
    }
    *lock = std::make_unique<PosixFileLock>(fd);
    return Status::OK();
  }

  Status NewWritableFile(const std::string& path, bool truncate,
                         std::unique_ptr<WritableFile>* file) override {
    file->reset();
    const int fd =
        OpenRetrying(path.c_str(), O_WRONLY | O_CREAT | (truncate ? O_TRUNC : 0), 0644);
    if (fd < 0) return IOErrorFor("open", path, errno);
    const off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) {
      const int err = errno;
      ::close(fd);
      return IOErrorFor("lseek", path, err);
    }
    *file = std::make_unique<PosixWritableFile>(path, fd, static_cast<uint64_t>(end));
    return Status::OK();
  }

  Status NewMappedWritableFile(const std::string& path,
                               std::unique_ptr<WritableFile>* file) override {
    file->reset();
    const int fd = OpenRetrying(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return IOErrorFor("open", path, errno);
    *file = std::make_unique<PosixMappedWritableFile>(path, fd, 0);
    return Status::OK();
  }

  Status NewSequentialFile(const std::string& path,
                           std::unique_ptr<SequentialFile>* file) override {
    file->reset();
    const int fd = OpenRetrying(path.c_str(), O_RDONLY);
    if (fd < 0) return NotFoundOrIOError("open", path, errno);
    *file = std::make_unique<PosixSequentialFile>(path, fd);
    return Status::OK();
  }

  Status GetFileSize(const std::string& path, uint64_t* size) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return NotFoundOrIOError("stat", path, errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }

  Status TruncateFile(const std::string& path, uint64_t size) override {
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
      return NotFoundOrIOError("truncate", path, errno);
    }
    return Status::OK();
  }

  Status SyncDir(const std::string& dir) override { return SyncDirectory(dir); }
};

}  // namespace

Status SequentialFile::Skip(uint64_t n) {
  char scratch[4096];
  while (n > 0) {
    std::string_view got;
    REPLAYDB_RETURN_IF_ERROR(
        Read(static_cast<size_t>(std::min<uint64_t>(n, sizeof(scratch))), &got, scratch));
    if (got.empty()) break;
    n -= got.size();
  }
  return Status::OK();
}

Env* Env::Default() {
  // Never destroyed, so it stays usable from other static destructors.
  static Env* const env = new PosixEnv;
  return env;
}

}  // namespace replaydb
