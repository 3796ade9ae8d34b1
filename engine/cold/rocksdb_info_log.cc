#include "engine/cold/rocksdb_info_log.h"

#include <rocksdb/env.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace replaydb::engine {
namespace {

class RocksdbInfoLog final : public rocksdb::Logger {
 public:
  RocksdbInfoLog(Env* env, std::string path, uint64_t max_bytes)
      : rocksdb::Logger(rocksdb::InfoLogLevel::INFO_LEVEL),
        env_(env),
        path_(std::move(path)),
        max_bytes_(max_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    (void)OpenLocked();  // else the first line tries again
  }
  ~RocksdbInfoLog() override {
    if (!closed_) {
      closed_ = true;
      (void)CloseImpl();
    }
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    std::string line = Prefix();
    const size_t prefix = line.size();
    char stack[512];
    va_list copy;
    va_copy(copy, ap);
    const int n = std::vsnprintf(stack, sizeof(stack), format, copy);
    va_end(copy);
    if (n < 0) return;
    if (static_cast<size_t>(n) < sizeof(stack)) {
      line.append(stack, static_cast<size_t>(n));
    } else {
      // As RocksDB's own logger: at most 64 KiB of one line.
      const size_t len = std::min<size_t>(static_cast<size_t>(n), 65535);
      line.resize(prefix + len + 1);
      va_copy(copy, ap);
      (void)std::vsnprintf(line.data() + prefix, len + 1, format, copy);
      va_end(copy);
      line.resize(prefix + len);
    }
    if (line.empty() || line.back() != '\n') line.push_back('\n');
    Write(line);
  }

  // Every line is handed to the operating system as it is logged.
  void Flush() override {}

  size_t GetLogFileSize() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return file_ ? static_cast<size_t>(file_->size()) : 0;
  }

 protected:
  rocksdb::Status CloseImpl() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!file_) return rocksdb::Status::OK();
    const Status s = file_->Close();
    file_.reset();
    return s.ok() ? rocksdb::Status::OK() : rocksdb::Status::IOError(s.message());
  }

 private:
  // "2026/11/23-19:27:02.123456 1a2b " as RocksDB's logger starts its lines.
  static std::string Prefix() {
    timeval now{};
    ::gettimeofday(&now, nullptr);
    const time_t seconds = now.tv_sec;
    tm t{};
    ::localtime_r(&seconds, &t);
    char buf[64];
    const int n =
        std::snprintf(buf, sizeof(buf), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %llx ",
                      t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                      static_cast<long>(now.tv_usec), static_cast<unsigned long long>(::gettid()));
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }

  // Opens the file if it is not open. REQUIRES: mu_ held.
  Status OpenLocked() {
    if (file_) return Status::OK();
    return env_->NewWritableFile(path_, /*truncate=*/false, &file_);
  }

  // Counts a line not written. REQUIRES: mu_ held.
  void DropLocked(const Status& cause) {
    if (dropped_ == 0) first_error_ = cause.message();
    ++dropped_;
  }

  // Appends `text`; on failure cuts the partial write off again or, if that
  // fails too, closes the file (the next line reopens it). REQUIRES: mu_ held.
  Status AppendLocked(std::string_view text) {
    const uint64_t before = file_->size();
    const Status s = file_->Append(text);
    if (!s.ok() && !file_->Truncate(before).ok()) {
      (void)file_->Close();
      file_.reset();
    }
    return s;
  }

  void Write(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    Status s = OpenLocked();
    if (!s.ok()) {
      DropLocked(s);
      return;
    }
    // The note on dropped lines goes in the same Append as the line.
    std::string text;
    if (file_->size() + line.size() > max_bytes_) {
      const uint64_t reached = file_->size();
      s = file_->Truncate(0);
      if (!s.ok()) {
        DropLocked(s);
        return;
      }
      text = Prefix() + "[replaydb] this log started again: it had reached " +
             std::to_string(reached) + " bytes (the limit is " + std::to_string(max_bytes_) + ")\n";
    }
    if (dropped_ > 0) {
      text += Prefix() + "[replaydb] " + std::to_string(dropped_) +
              " lines of this log were dropped; the first failure: " + first_error_ + "\n";
    }
    text += line;
    s = AppendLocked(text);
    if (!s.ok()) {
      DropLocked(s);
      return;
    }
    dropped_ = 0;
    first_error_.clear();
  }

  Env* const env_;
  const std::string path_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::unique_ptr<WritableFile> file_;  // guarded by mu_; null while it cannot be opened
  uint64_t dropped_ = 0;                // guarded by mu_; lines not written since the last note
  std::string first_error_;             // guarded by mu_; why the first of them was not
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewRocksdbInfoLog(Env* env, const std::string& path,
                                                   uint64_t max_bytes) {
  return std::make_shared<RocksdbInfoLog>(env, path, max_bytes);
}

}  // namespace replaydb::engine
