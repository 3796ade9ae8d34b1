#include "engine/cold/rocksdb_env.h"

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/io_status.h>

#include <string>
#include <string_view>
#include <utility>

namespace replaydb::engine {
namespace {

// replaydb Status -> RocksDB IOStatus, keeping the message. A full disk stays
// a plain IOError: as NoSpace, RocksDB would start its own background
// recovery, which makes a manual Resume (ColdStore::Write) return Busy.
rocksdb::IOStatus ToIOStatus(const Status& s) {
  if (s.ok()) return rocksdb::IOStatus::OK();
  const std::string& msg = s.message();
  switch (s.code()) {
    case Status::Code::kNotFound:
      return rocksdb::IOStatus::NotFound(msg);
    case Status::Code::kInvalidArgument:
      return rocksdb::IOStatus::InvalidArgument(msg);
    case Status::Code::kNotSupported:
      return rocksdb::IOStatus::NotSupported(msg);
    case Status::Code::kCorruption:
      return rocksdb::IOStatus::Corruption(msg);
    default:
      break;
  }
  return rocksdb::IOStatus::IOError(msg);
}

// A RocksDB writable file over a replaydb WritableFile. RocksDB buffers its
// writes itself (WritableFileWriter), so each Append is already large.
class WritableFileAdapter final : public rocksdb::FSWritableFile {
 public:
  explicit WritableFileAdapter(std::unique_ptr<WritableFile> file) : file_(std::move(file)) {}
  ~WritableFileAdapter() override { (void)file_->Close(); }

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions&,
                           rocksdb::IODebugContext*) override {
    return ToIOStatus(file_->Append(std::string_view(data.data(), data.size())));
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo&,
                           rocksdb::IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions&,
                             rocksdb::IODebugContext*) override {
    return ToIOStatus(file_->Truncate(size));
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return ToIOStatus(file_->Close());
  }
  // Append already hands the bytes to the operating system.
  rocksdb::IOStatus Flush(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return ToIOStatus(file_->Sync());
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return Sync(options, dbg);
  }
  uint64_t GetFileSize(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return file_->size();
  }

 private:
  std::unique_ptr<WritableFile> file_;
};

// A directory whose fsync is replaydb's SyncDir.
class DirectoryAdapter final : public rocksdb::FSDirectory {
 public:
  DirectoryAdapter(Env* env, std::string dir) : env_(env), dir_(std::move(dir)) {}
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return ToIOStatus(env_->SyncDir(dir_));
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions&, rocksdb::IODebugContext*) override {
    return rocksdb::IOStatus::OK();
  }

 private:
  Env* const env_;
  const std::string dir_;
};

class ReplaydbFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit ReplaydbFileSystem(Env* env)
      : rocksdb::FileSystemWrapper(rocksdb::FileSystem::Default()), env_(env) {}

  const char* Name() const override { return "ReplaydbFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& path, const rocksdb::FileOptions&,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext*) override {
    return Open(path, /*truncate=*/true, result);
  }
  rocksdb::IOStatus ReopenWritableFile(const std::string& path, const rocksdb::FileOptions&,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext*) override {
    return Open(path, /*truncate=*/false, result);
  }
  // Rename (through the base file system), then a fresh file through ours.
  rocksdb::IOStatus ReuseWritableFile(const std::string& path, const std::string& old_path,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = RenameFile(old_path, path, options.io_options, dbg);
    if (!s.ok()) return s;
    return Open(path, /*truncate=*/true, result);
  }
  rocksdb::IOStatus NewDirectory(const std::string& dir, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override {
    // Let the base file system check the directory exists, as RocksDB expects.
    std::unique_ptr<rocksdb::FSDirectory> base;
    rocksdb::IOStatus s = target()->NewDirectory(dir, options, &base, dbg);
    if (!s.ok()) return s;
    *result = std::make_unique<DirectoryAdapter>(env_, dir);
    return rocksdb::IOStatus::OK();
  }

 private:
  rocksdb::IOStatus Open(const std::string& path, bool truncate,
                         std::unique_ptr<rocksdb::FSWritableFile>* result) {
    result->reset();
    std::unique_ptr<WritableFile> file;
    rocksdb::IOStatus s = ToIOStatus(env_->NewWritableFile(path, truncate, &file));
    if (!s.ok()) return s;
    *result = std::make_unique<WritableFileAdapter>(std::move(file));
    return rocksdb::IOStatus::OK();
  }

  Env* const env_;
};

}  // namespace

std::unique_ptr<rocksdb::Env> NewRocksdbEnv(Env* env) {
  return rocksdb::NewCompositeEnv(std::make_shared<ReplaydbFileSystem>(env));
}

}  // namespace replaydb::engine
