#include "tests/support/fault_injection_env.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace replaydb::testing_util {
namespace {

// The directory part of `path` as SyncDir is expected to name it: "." for a
// bare name, "/" for "/name".
std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// `dir` without trailing slashes ("/" stays "/").
std::string WithoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

}  // namespace

// A WritableFile whose calls go through its FaultInjectionEnv. Every call
// takes the Env's mutex, so bookkeeping and the base file's I/O happen as one
// step with respect to DropUnsyncedData and the fault counters.
class FaultInjectionEnv::TrackedWritableFile final : public WritableFile {
 public:
  TrackedWritableFile(FaultInjectionEnv* env, std::string path, uint64_t id, uint64_t epoch,
                      std::unique_ptr<WritableFile> base)
      : env_(env),
        path_(std::move(path)),
        id_(id),
        epoch_(epoch),
        base_(std::move(base)),
        size_(base_->size()) {}
  TrackedWritableFile(const TrackedWritableFile&) = delete;
  TrackedWritableFile& operator=(const TrackedWritableFile&) = delete;

  Status Append(std::string_view data) override {
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (Stale()) return StaleError("append");
    ++env_->writes_;
    REPLAYDB_RETURN_IF_ERROR(CutTornBytes());

    uint64_t allowed = data.size();
    Status fault;
    if (Fires(&env_->write_countdown_)) {
      allowed = std::min<uint64_t>(allowed, env_->write_partial_bytes_);
      fault = Status::IOError("write " + path_ + ": injected write failure");
    }
    const uint64_t fits = env_->SpaceFor(allowed);
    if (fits < allowed) {
      allowed = fits;
      if (fault.ok()) fault = Status::IOError(env_->NoSpaceMessage(path_));
    }

    if (fault.ok()) {
      Status s = base_->Append(data);
      if (s.ok()) {
        size_ += data.size();
        env_->bytes_written_ += data.size();
      }
      return s;
    }
    if (allowed > 0) {
      // The torn prefix; base_->size() now exceeds size_ until cut off.
      REPLAYDB_RETURN_IF_ERROR(base_->Append(data.substr(0, allowed)));
      env_->bytes_written_ += allowed;
    }
    return fault;
  }

  // The base file's fsync runs without the Env's lock, so Appends go on
  // meanwhile (env.h allows it, and the WAL relies on it): it makes durable
  // the bytes the file had when it began, not those appended since.
  Status Sync() override {
    uint64_t target = 0;
    uint64_t ticket = 0;
    const std::string dir = DirName(path_);
    {
      std::lock_guard<std::mutex> lock(env_->mu_);
      if (Stale()) return StaleError("sync");
      ++env_->syncs_;
      if (Fires(&env_->sync_countdown_)) {
        return Status::IOError("fdatasync " + path_ + ": injected fsync failure");
      }
      // Torn bytes not yet cut off are in the file, so they are synced too.
      target = base_->size();
      low_water_ = target;
      ticket = ++env_->sync_tickets_[dir].begun;
    }
    const Status s = base_->Sync();
    std::lock_guard<std::mutex> lock(env_->mu_);
    // A power loss while it ran: what it did is lost with the rest.
    if (Stale()) return StaleError("sync");
    REPLAYDB_RETURN_IF_ERROR(s);
    if (FileState* state = env_->Tracked(path_, id_)) {
      // Bytes cut off while it ran were not made durable by it.
      state->durable_size = std::max(state->durable_size, std::min(target, low_water_));
    }
    uint64_t& completed = env_->sync_tickets_[dir].completed;
    completed = std::max(completed, ticket);
    return Status::OK();
  }

  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (Stale()) return StaleError("truncate");
    REPLAYDB_RETURN_IF_ERROR(base_->Truncate(size));
    size_ = size;
    low_water_ = std::min(low_water_, size);
    if (FileState* state = env_->Tracked(path_, id_)) {
      state->durable_size = std::min(state->durable_size, size);
    }
    return Status::OK();
  }

  Status Close() override {
    std::lock_guard<std::mutex> lock(env_->mu_);
    if (Stale()) {
      (void)base_->Close();  // release the descriptor all the same
      return StaleError("close");
    }
    return base_->Close();
  }

  uint64_t size() const override { return size_; }

 private:
  // REQUIRES: env_->mu_ held.
  bool Stale() const { return epoch_ != env_->epoch_; }

  Status StaleError(std::string_view call) const {
    std::string msg(call);
    msg += ' ';
    msg += path_;
    msg += ": file was open across a simulated power loss";
    return Status::IOError(std::move(msg));
  }

  // Removes the bytes a failed Append left past size_, so that appending
  // continues at size() as env.h promises. REQUIRES: env_->mu_ held.
  Status CutTornBytes() {
    if (base_->size() <= size_) return Status::OK();
    REPLAYDB_RETURN_IF_ERROR(base_->Truncate(size_));
    low_water_ = std::min(low_water_, size_);
    if (FileState* state = env_->Tracked(path_, id_)) {
      state->durable_size = std::min(state->durable_size, size_);
    }
    return Status::OK();
  }

  FaultInjectionEnv* const env_;
  const std::string path_;
  const uint64_t id_;
  const uint64_t epoch_;  // env_->epoch_ when opened
  const std::unique_ptr<WritableFile> base_;
  uint64_t size_;  // bytes before any torn write; base_->size() may be larger
  // The least size the file had since the running Sync began (guarded by
  // env_->mu_).
  uint64_t low_water_ = 0;
};

FaultInjectionEnv::FaultInjectionEnv(Env* base) : base_(base) {}

FaultInjectionEnv::~FaultInjectionEnv() = default;

bool FaultInjectionEnv::Fires(uint64_t* countdown) {
  if (*countdown == 0) return false;
  return --*countdown == 0;
}

std::string FaultInjectionEnv::NoSpaceMessage(const std::string& path) const {
  return "write " + path + ": No space left on device (FaultInjectionEnv space limit of " +
         std::to_string(*space_limit_) + " bytes)";
}

uint64_t FaultInjectionEnv::SpaceFor(uint64_t wanted) const {
  if (!space_limit_) return wanted;
  if (bytes_written_ >= *space_limit_) return 0;
  return std::min(wanted, *space_limit_ - bytes_written_);
}

FaultInjectionEnv::FileState* FaultInjectionEnv::Tracked(const std::string& path, uint64_t id) {
  const auto it = files_.find(path);
  if (it == files_.end() || it->second.id != id) return nullptr;
  return &it->second;
}

Status FaultInjectionEnv::OffError(std::string_view call, const std::string& path) const {
  if (!off_) return Status::OK();
  return Status::IOError(std::string(call) + " " + path +
                         ": the machine is off (simulated power loss)");
}

Status FaultInjectionEnv::CreateDirIfMissing(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(OffError("mkdir", dir));
  return base_->CreateDirIfMissing(dir);
}

bool FaultInjectionEnv::FileExists(const std::string& path) {
  return base_->FileExists(path);
}

Status FaultInjectionEnv::ReadFileToString(const std::string& path, std::string* out) {
  return base_->ReadFileToString(path, out);
}

Status FaultInjectionEnv::WriteFileAtomic(const std::string& path, std::string_view data) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string tmp = path + ".tmp";
  REPLAYDB_RETURN_IF_ERROR(OffError("write", tmp));
  ++writes_;
  if (Fires(&atomic_write_countdown_)) {
    return Status::IOError("write " + tmp + ": injected write failure");
  }
  if (SpaceFor(data.size()) < data.size()) return Status::IOError(NoSpaceMessage(tmp));
  REPLAYDB_RETURN_IF_ERROR(base_->WriteFileAtomic(path, data));
  bytes_written_ += data.size();
  // A new file (renamed over the old one): writers of the old one no longer
  // update it.
  files_[path] = FileState{next_file_id_++, data.size(), true};
  return Status::OK();
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(OffError("remove", path));
  REPLAYDB_RETURN_IF_ERROR(base_->RemoveFile(path));
  files_.erase(path);
  return Status::OK();
}

Status FaultInjectionEnv::GetChildren(const std::string& dir, std::vector<std::string>* names) {
  return base_->GetChildren(dir, names);
}

Status FaultInjectionEnv::LockFile(const std::string& path, std::unique_ptr<FileLock>* lock) {
  return base_->LockFile(path, lock);
}

Status FaultInjectionEnv::NewWritableFile(const std::string& path, bool truncate,
                                          std::unique_ptr<WritableFile>* file) {
  return OpenTracked(path, truncate, file, [&](std::unique_ptr<WritableFile>* base_file) {
    return base_->NewWritableFile(path, truncate, base_file);
  });
}

Status FaultInjectionEnv::NewMappedWritableFile(const std::string& path,
                                                std::unique_ptr<WritableFile>* file) {
  return OpenTracked(path, /*truncate=*/true, file, [&](std::unique_ptr<WritableFile>* base_file) {
    return base_->NewMappedWritableFile(path, base_file);
  });
}

Status FaultInjectionEnv::OpenTracked(
    const std::string& path, bool truncate, std::unique_ptr<WritableFile>* file,
    const std::function<Status(std::unique_ptr<WritableFile>*)>& open_base) {
  file->reset();
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(OffError("open", path));
  const bool existed = base_->FileExists(path);
  std::unique_ptr<WritableFile> base_file;
  REPLAYDB_RETURN_IF_ERROR(open_base(&base_file));
  auto it = files_.find(path);
  if (it == files_.end() || !existed) {
    // A file this Env has not tracked is taken as durable as it stands; a
    // missing one (perhaps removed behind this Env's back) is new.
    const FileState state{next_file_id_++, existed ? base_file->size() : 0, existed};
    it = files_.insert_or_assign(path, state).first;
  } else if (truncate) {
    it->second.durable_size = 0;
  }
  *file = std::make_unique<TrackedWritableFile>(this, path, it->second.id, epoch_,
                                                std::move(base_file));
  return Status::OK();
}

Status FaultInjectionEnv::NewSequentialFile(const std::string& path,
                                            std::unique_ptr<SequentialFile>* file) {
  return base_->NewSequentialFile(path, file);
}

Status FaultInjectionEnv::GetFileSize(const std::string& path, uint64_t* size) {
  return base_->GetFileSize(path, size);
}

Status FaultInjectionEnv::TruncateFile(const std::string& path, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(OffError("truncate", path));
  REPLAYDB_RETURN_IF_ERROR(base_->TruncateFile(path, size));
  const auto it = files_.find(path);
  if (it != files_.end()) it->second.durable_size = std::min(it->second.durable_size, size);
  return Status::OK();
}

Status FaultInjectionEnv::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  REPLAYDB_RETURN_IF_ERROR(OffError("fsync", dir));
  ++syncs_;
  if (Fires(&sync_countdown_)) return Status::IOError("fsync " + dir + ": injected fsync failure");
  REPLAYDB_RETURN_IF_ERROR(base_->SyncDir(dir));
  const std::string synced = WithoutTrailingSlash(dir);
  for (auto& [path, state] : files_) {
    if (DirName(path) == synced) state.creation_durable = true;
  }
  return Status::OK();
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::lock_guard<std::mutex> lock(mu_);
  return DropUnsyncedDataLocked();
}

Status FaultInjectionEnv::PowerOff() {
  std::lock_guard<std::mutex> lock(mu_);
  off_ = true;
  return DropUnsyncedDataLocked();
}

void FaultInjectionEnv::PowerOn() {
  std::lock_guard<std::mutex> lock(mu_);
  off_ = false;
}

Status FaultInjectionEnv::DropUnsyncedDataLocked() {
  ++epoch_;
  Status first_error;
  const auto note = [&first_error](const Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& path = it->first;
    FileState& state = it->second;
    if (!state.creation_durable) {
      const Status s = base_->RemoveFile(path);
      if (s.code() != Status::Code::kNotFound) note(s);
      it = files_.erase(it);
      continue;
    }
    uint64_t size = 0;
    const Status s = base_->GetFileSize(path, &size);
    if (s.code() == Status::Code::kNotFound) {
      it = files_.erase(it);
      continue;
    }
    note(s);
    if (s.ok() && size > state.durable_size) note(base_->TruncateFile(path, state.durable_size));
    ++it;
  }
  return first_error;
}

void FaultInjectionEnv::FailNthWrite(uint64_t n, size_t partial_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  write_countdown_ = n;
  write_partial_bytes_ = partial_bytes;
}

void FaultInjectionEnv::FailNthSync(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_countdown_ = n;
}

void FaultInjectionEnv::FailNthWriteFileAtomic(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  atomic_write_countdown_ = n;
}

void FaultInjectionEnv::SetSpaceLimit(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  space_limit_ = bytes;
}

void FaultInjectionEnv::ClearSpaceLimit() {
  std::lock_guard<std::mutex> lock(mu_);
  space_limit_.reset();
}

void FaultInjectionEnv::ResetFaults() {
  std::lock_guard<std::mutex> lock(mu_);
  write_countdown_ = 0;
  write_partial_bytes_ = 0;
  sync_countdown_ = 0;
  atomic_write_countdown_ = 0;
  space_limit_.reset();
}

uint64_t FaultInjectionEnv::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

uint64_t FaultInjectionEnv::syncs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return syncs_;
}

uint64_t FaultInjectionEnv::bytes_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_written_;
}

uint64_t FaultInjectionEnv::SyncTicket(const std::string& dir) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sync_tickets_.find(WithoutTrailingSlash(dir));
  return it == sync_tickets_.end() ? 0 : it->second.begun;
}

bool FaultInjectionEnv::SyncedSince(const std::string& dir, uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sync_tickets_.find(WithoutTrailingSlash(dir));
  return it != sync_tickets_.end() && it->second.completed > ticket;
}
}  // namespace replaydb::testing_util
