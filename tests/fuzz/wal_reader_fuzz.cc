// libFuzzer target: the input is one WAL segment file (segment 1); it is
// replayed in each recovery mode and every payload decoded by its type.
// Nothing may crash, leak or read out of bounds; any non-OK Status is fine.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "replaydb/env.h"
#include "wal/log_reader.h"
#include "wal/records.h"

namespace {

using namespace replaydb;        // NOLINT
using namespace replaydb::wal;   // NOLINT

// A per-process directory for the segment file, removed at exit.
const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/replaydb_wal_fuzz_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) std::abort();
    std::string d = tmpl;
    static std::string remove = d;
    std::atexit([] {
      std::vector<std::string> names;
      (void)Env::Default()->GetChildren(remove, &names);
      for (auto& n : names) (void)Env::Default()->RemoveFile(remove + "/" + n);
      ::rmdir(remove.c_str());
    });
    return d;
  }();
  return dir;
}

// Env::Default() without fsyncs (recovery syncs what it cuts; a fuzzer does
// not need that to be durable, and fsyncs would dominate its time).
class NoSyncEnv final : public Env {
 public:
  Status CreateDirIfMissing(const std::string& d) override { return base_->CreateDirIfMissing(d); }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  Status ReadFileToString(const std::string& p, std::string* out) override {
    return base_->ReadFileToString(p, out);
  }
  Status WriteFileAtomic(const std::string& p, std::string_view d) override {
    return base_->WriteFileAtomic(p, d);
  }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Status GetChildren(const std::string& d, std::vector<std::string>* n) override {
    return base_->GetChildren(d, n);
  }
  Status LockFile(const std::string& p, std::unique_ptr<FileLock>* l) override {
    return base_->LockFile(p, l);
  }
  Status NewWritableFile(const std::string& p, bool truncate,
                         std::unique_ptr<WritableFile>* file) override {
    std::unique_ptr<WritableFile> f;
    REPLAYDB_RETURN_IF_ERROR(base_->NewWritableFile(p, truncate, &f));
    *file = std::make_unique<File>(std::move(f));
    return Status::OK();
  }
  Status NewSequentialFile(const std::string& p, std::unique_ptr<SequentialFile>* f) override {
    return base_->NewSequentialFile(p, f);
  }
  Status GetFileSize(const std::string& p, uint64_t* s) override { return base_->GetFileSize(p, s); }
  Status TruncateFile(const std::string& p, uint64_t s) override { return base_->TruncateFile(p, s); }
  Status SyncDir(const std::string&) override { return Status::OK(); }

 private:
  class File final : public WritableFile {
   public:
    explicit File(std::unique_ptr<WritableFile> f) : f_(std::move(f)) {}
    Status Append(std::string_view d) override { return f_->Append(d); }
    Status Sync() override { return Status::OK(); }
    Status Truncate(uint64_t s) override { return f_->Truncate(s); }
    Status Close() override { return f_->Close(); }
    uint64_t size() const override { return f_->size(); }

   private:
    std::unique_ptr<WritableFile> f_;
  };
  Env* const base_ = Env::Default();
};

template <typename R>
void DecodeAs(std::span<const std::byte> p) {
  R r;
  if (Decode(p, &r).ok()) {
    if constexpr (std::is_same_v<R, AppendStepsRecord>) {
      // Touch the data, so a bad span shows up under ASan.
      volatile uint8_t sum = 0;
      for (std::byte b : r.data) sum = static_cast<uint8_t>(sum + static_cast<uint8_t>(b));
    }
  }
}

Status DecodeByType(RecordType type, std::span<const std::byte> p) {
  switch (type) {
    case RecordType::kCreateTable: DecodeAs<CreateTableRecord>(p); break;
    case RecordType::kDropTable: DecodeAs<DropTableRecord>(p); break;
    case RecordType::kAppendSteps: DecodeAs<AppendStepsRecord>(p); break;
    case RecordType::kEndTrajectory: DecodeAs<EndTrajectoryRecord>(p); break;
    case RecordType::kUpdatePriorities: DecodeAs<UpdatePrioritiesRecord>(p); break;
    case RecordType::kRemoveItems: DecodeAs<RemoveItemsRecord>(p); break;
    case RecordType::kRemoveTrajectory: DecodeAs<RemoveTrajectoryRecord>(p); break;
    case RecordType::kClearTable: DecodeAs<ClearTableRecord>(p); break;
    case RecordType::kItemClock:
      DecodeAs<ItemClockRecord>(p);
      break;
    case RecordType::kTableSpec:
      DecodeAs<TableSpecRecord>(p);
      break;
  }
  return Status::OK();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static NoSyncEnv no_sync_env;
  Env* env = &no_sync_env;
  const std::string path = Dir() + "/" + SegmentFileName(1);
  for (RecoveryMode mode : {RecoveryMode::kAbsoluteConsistency, RecoveryMode::kTolerateTornTail,
                            RecoveryMode::kPointInTime}) {
    // Recovery may cut the file: write it afresh for every mode.
    // (Removed rather than truncated: ext4 flushes a file truncated to 0
    // bytes on close, which would slow the fuzzer down a hundredfold.)
    (void)env->RemoveFile(path);
    std::unique_ptr<WritableFile> file;
    if (!env->NewWritableFile(path, /*truncate=*/false, &file).ok()) std::abort();
    if (!file->Append(std::string_view(reinterpret_cast<const char*>(data), size)).ok()) std::abort();
    (void)file->Close();
    ReplayReport report;
    (void)Replay(env, Dir(), 0, mode, DecodeByType, &report);
  }
  return 0;
}
