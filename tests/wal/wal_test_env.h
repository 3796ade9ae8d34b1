// A test-local Env for the WAL tests: forwards to Env::Default() and counts
// syncs, and can inject failures (a write that fails after writing half of
// its bytes, a failing fsync or truncate), slow fsyncs (so concurrent syncs
// overlap and group commit shows), or skip fsyncs (fast corruption tests).
//
// Thread safety: all knobs are atomics; files follow the WritableFile
// contract (Sync may overlap Append/Truncate).
#ifndef REPLAYDB_TESTS_WAL_WAL_TEST_ENV_H_
#define REPLAYDB_TESTS_WAL_WAL_TEST_ENV_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/env.h"

namespace replaydb::testing_util {

class WalTestEnv final : public Env {
 public:
  std::atomic<int> file_syncs{0};     // WritableFile::Sync calls that succeeded
  std::atomic<int> dir_syncs{0};
  std::atomic<int> fail_appends{0};   // fail this many next appends (half written)
  std::atomic<int> fail_truncates{0}; // fail this many next WritableFile truncates
  std::atomic<int> fail_syncs{0};     // fail this many next WritableFile syncs
  std::atomic<bool> skip_syncs{false};  // Sync/SyncDir succeed without fsync
  std::atomic<int> sync_delay_us{0};  // each WritableFile::Sync sleeps this long

  Status CreateDirIfMissing(const std::string& dir) override { return base_->CreateDirIfMissing(dir); }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  Status ReadFileToString(const std::string& path, std::string* out) override {
    return base_->ReadFileToString(path, out);
  }
  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    return base_->WriteFileAtomic(path, data);
  }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Status GetChildren(const std::string& dir, std::vector<std::string>* names) override {
    return base_->GetChildren(dir, names);
  }
  Status LockFile(const std::string& path, std::unique_ptr<FileLock>* lock) override {
    return base_->LockFile(path, lock);
  }
  Status NewWritableFile(const std::string& path, bool truncate,
                         std::unique_ptr<WritableFile>* file) override {
    std::unique_ptr<WritableFile> base;
    Status s = base_->NewWritableFile(path, truncate, &base);
    if (!s.ok()) return s;
    *file = std::make_unique<File>(this, path, std::move(base));
    return Status::OK();
  }
  Status NewMappedWritableFile(const std::string& path,
                               std::unique_ptr<WritableFile>* file) override {
    std::unique_ptr<WritableFile> base;
    Status s = base_->NewMappedWritableFile(path, &base);
    if (!s.ok()) return s;
    *file = std::make_unique<File>(this, path, std::move(base));
    return Status::OK();
  }
  Status NewSequentialFile(const std::string& path,
                           std::unique_ptr<SequentialFile>* file) override {
    return base_->NewSequentialFile(path, file);
  }
  Status GetFileSize(const std::string& path, uint64_t* size) override {
    return base_->GetFileSize(path, size);
  }
  Status TruncateFile(const std::string& path, uint64_t size) override {
    return base_->TruncateFile(path, size);
  }
  Status SyncDir(const std::string& dir) override {
    ++dir_syncs;
    return skip_syncs ? Status::OK() : base_->SyncDir(dir);
  }

 private:
  static bool Take(std::atomic<int>& counter) {
    int n = counter.load();
    while (n > 0) {
      if (counter.compare_exchange_weak(n, n - 1)) return true;
    }
    return false;
  }

  class File final : public WritableFile {
   public:
    File(WalTestEnv* env, std::string path, std::unique_ptr<WritableFile> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)), size_(base_->size()) {}
    Status Append(std::string_view data) override {
      if (Take(env_->fail_appends)) {
        // Leave a partial write behind, as a full disk would.
        (void)base_->Append(data.substr(0, data.size() / 2));
        return Status::IOError("write " + path_ + ": injected write failure");
      }
      Status s = base_->Append(data);
      if (s.ok()) size_.fetch_add(data.size());
      return s;
    }
    Status Sync() override {
      if (const int us = env_->sync_delay_us.load(); us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
      }
      if (Take(env_->fail_syncs)) return Status::IOError("fdatasync " + path_ + ": injected fsync failure");
      Status s = env_->skip_syncs ? Status::OK() : base_->Sync();
      if (s.ok()) ++env_->file_syncs;
      return s;
    }
    Status Truncate(uint64_t size) override {
      if (Take(env_->fail_truncates)) return Status::IOError("ftruncate " + path_ + ": injected truncate failure");
      Status s = base_->Truncate(size);
      if (s.ok()) size_.store(size);
      return s;
    }
    Status Close() override { return base_->Close(); }
    uint64_t size() const override { return size_.load(); }

   private:
    WalTestEnv* const env_;
    const std::string path_;
    const std::unique_ptr<WritableFile> base_;
    std::atomic<uint64_t> size_;
  };

  Env* const base_ = Env::Default();
};

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_WAL_WAL_TEST_ENV_H_
