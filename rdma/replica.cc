#include "rdma/replica.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "rdma/remote_db.h"
#include "rdma/rpc.h"
#include "replaydb/env.h"
#include "util/format.h"

namespace replaydb::rdma {

namespace fb = wire::fb;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kSaveEvery{100};

// A FetchLog (rdma/WIRE.md) of replica `name` from `from`.
std::function<std::string(const HeaderFields&)> FetchLogRequest(const std::string& name,
                                                                wal::LogPosition from,
                                                                size_t max_bytes,
                                                                std::chrono::milliseconds wait,
                                                                uint64_t saved_segment) {
  return [=](const HeaderFields& f) {
    flatbuffers::FlatBufferBuilder b(128);
    b.ForceDefaults(true);
    const auto n = b.CreateString(name);
    return EncodeHeader(b, f, fb::Body::FetchLog,
                        fb::CreateFetchLog(b, n, from.segment, from.offset, max_bytes,
                                           static_cast<uint32_t>(wait.count()), saved_segment));
  };
}

class Replica::Impl {
 public:
  Impl(engine::DBImpl* db, ReplicaOptions options, std::string host, uint16_t port,
       wal::LogPosition from)
      : db_(db), options_(std::move(options)), host_(std::move(host)), port_(port) {
    state_.position = from;
  }
  ~Impl() { Stop(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // It follows nothing now (promoted, or closing): no snapshot is wanted.
    std::lock_guard<std::mutex> lock(mu_);
    state_.needs_snapshot = false;
  }
  void StartThread() {
    saved_ = state_.position;
    thread_ = std::thread([this] {
      Loop();
      const Status s = SavePosition();
      if (!s.ok()) Log("its place was not saved: " + s.ToString());
    });
  }

  ReplicaState state() const {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

 private:
  void Log(const std::string& line) {
    if (options_.log) options_.log("replica of " + options_.primary + ": " + line);
  }
  // Sleeps `d` unless stopped first; false when stopped.
  bool Pause(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, d, [&] { return stop_; });
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }
  void Failed(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    state_.last_error = s.ToString();
  }

  void Loop() {
    std::chrono::milliseconds backoff{100};
    const std::chrono::milliseconds kMaxBackoff{2000};
    while (!stopping()) {
      RpcClientOptions o;
      o.client_name = "replica " + options_.name;
      o.connect_timeout = options_.connect_timeout;
      o.transport.heartbeat = options_.heartbeat;
      o.token = options_.token;
      Result<std::unique_ptr<RpcClient>> client = RpcClient::Connect(host_, port_, o);
      if (!client.ok()) {
        Failed(client.status());
        {
          std::lock_guard<std::mutex> lock(mu_);
          state_.needs_snapshot = false;  // (not known while it cannot ask)
        }
        if (client.status().ToString() != last_logged_) {
          last_logged_ = client.status().ToString();
          Log("cannot connect (" + last_logged_ + "); trying again");
        }
        if (!Pause(backoff)) return;
        backoff = std::min(backoff * 2, kMaxBackoff);
        continue;
      }
      backoff = std::chrono::milliseconds(100);
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.connected = true;
      }
      if (last_logged_.empty() || connected_logged_ != state_.position) {
        connected_logged_ = state_.position;
        Log("connected; applying from segment " + std::to_string(state_.position.segment) +
            ", offset " + std::to_string(state_.position.offset));
      }
      const Status ended = Follow(**client);
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.connected = false;
      }
      if (stopping()) return;
      Failed(ended);
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.needs_snapshot =
            ended.code() == Status::Code::kFailedPrecondition &&
            ended.message().find(engine::DBImpl::kSnapshotNeededMarker) != std::string::npos;
      }
      if (ended.ToString() != last_logged_) {  // (once while it stays the same)
        last_logged_ = ended.ToString();
        Log("stopped following (" + last_logged_ + "); trying again");
      }
      if (!Pause(
              std::chrono::milliseconds(ended.code() == Status::Code::kUnavailable ? 100 : 1000))) {
        return;
      }
    }
  }

  // Reads and applies until the connection fails or the replica stops.
  Status Follow(RpcClient& client) {
    while (!stopping()) {
      const wal::LogPosition from = state().position;
      Result<Message> reply = client.Call(
          FetchLogRequest(options_.name, from, options_.max_bytes, options_.wait, saved_.segment),
          "", options_.wait + std::chrono::seconds(10));
      if (!reply.ok()) return reply.status();
      const fb::LogRecords* got = reply->header()->body_as_LogRecords();
      if (got == nullptr) {
        return Status::Corruption(options_.primary + " answered a FetchLog with a " +
                                  fb::EnumNameBody(reply->header()->body_type()));
      }
      // Epochs (docs/replication.md, "Failover"): a later one is this
      // replica's from here on; an earlier one is a deposed primary's.
      if (got->epoch() < db_->epoch()) {
        return Status::FailedPrecondition(
            options_.primary + " is in epoch " + std::to_string(got->epoch()) +
            ", behind this replica's epoch " + std::to_string(db_->epoch()) +
            ": it was deposed (another replica was promoted); follow the new primary");
      }
      if (got->epoch() > db_->epoch()) REPLAYDB_RETURN_IF_ERROR(db_->BeginEpoch(got->epoch()));
      const wal::LogPosition next{got->segment(), got->offset()};
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.primary_end = wal::LogPosition{got->end_segment(), got->end_offset()};
        state_.connected = true;
        state_.needs_snapshot = false;
      }
      if (got->count() > 0) {
        REPLAYDB_RETURN_IF_ERROR(db_->ApplyShipped(reply->payload, options_.primary));
        // (The next read tells the primary these are applied, and synced
        // where this log syncs every write.)
        if (db_->log_syncs_always()) REPLAYDB_RETURN_IF_ERROR(db_->SyncLog());
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        state_.last_read = Clock::now();
        if (next >= state_.primary_end) state_.caught_up_at = state_.last_read;
        if (next != from) {
          state_.position = next;
          state_.last_error.clear();
        }
      }
      if (next != from) last_logged_.clear();
      if (Clock::now() - saved_at_ >= kSaveEvery) REPLAYDB_RETURN_IF_ERROR(SavePosition());
    }
    return Status::OK();
  }

  // Where to go on from after a restart, written once the records before
  // it are durable in this database's log; at most every kSaveEvery (a
  // replica restarted reads again what it applied since, which changes
  // nothing).
  Status SavePosition() {
    saved_at_ = Clock::now();
    const wal::LogPosition at = state().position;
    if (at == saved_) return Status::OK();
    REPLAYDB_RETURN_IF_ERROR(db_->SyncLog());
    REPLAYDB_RETURN_IF_ERROR(
        engine::DBImpl::WriteReplicaFile(Env::Default(), db_->path(), options_.primary, at));
    saved_ = at;
    return Status::OK();
  }

  engine::DBImpl* const db_;
  const ReplicaOptions options_;
  const std::string host_;  // the primary's (ReplicaOptions::primary)
  const uint16_t port_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  ReplicaState state_;
  // The position in DIR/REPLICA, and when it was last looked at (the
  // follower's thread only).
  wal::LogPosition saved_;
  // What the log was told last (once while it stays the same; cleared by
  // progress), and where the follower stood then (the follower's thread).
  std::string last_logged_;
  wal::LogPosition connected_logged_{~uint64_t{0}, 0};
  Clock::time_point saved_at_{};
  std::thread thread_;
};

std::string DefaultReplicaName(const std::string& dir) {
  // Unique among a primary's replicas: this host's name and the directory.
  char hostname[256] = {0};
  if (::gethostname(hostname, sizeof(hostname) - 1) != 0) hostname[0] = '\0';
  return std::string(hostname) + ":" + dir;
}

namespace {

constexpr const char* kPartial = "snapshot.partial";

// Whether `dir` is to get a snapshot: it is missing, holds nothing (but a
// lock file), or an install was cut short.
bool NeedsSnapshot(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  if (fs::exists(dir + "/CATALOG", ec)) return false;
  if (fs::exists(dir + "/" + kPartial, ec)) return true;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() != "LOCK") return false;  // (Open tells what it is)
  }
  return true;
}

// Whether the primary `client` reaches no longer holds the place in
// DIR/REPLICA (its FetchLog refused with DBImpl::kSnapshotNeeded), and
// that place. False when DIR/REPLICA names another primary (Replica::Start
// tells what it is) or the primary cannot be asked.
bool PlaceGone(RpcClient* client, Env* env, const std::string& dir, const ReplicaOptions& options,
               wal::LogPosition* at) {
  std::string primary;
  if (client == nullptr || !engine::DBImpl::ReadReplicaFile(env, dir, &primary, at).ok() ||
      primary != options.primary) {
    return false;
  }
  const Result<Message> read =
      client->Call(FetchLogRequest(options.name, *at, 1, std::chrono::milliseconds(0), at->segment),
                   "", std::chrono::seconds(10));
  return !read.ok() && read.status().code() == Status::Code::kFailedPrecondition &&
         read.status().message().find(engine::DBImpl::kSnapshotNeededMarker) != std::string::npos;
}

// Copies file `name` (`size` bytes) of snapshot `id` into `path` in chunks
// of options.max_bytes, synced; `copied` is told each chunk's size.
Status CopySnapshotFile(RpcClient& client, Env* env, const ReplicaOptions& options, uint64_t id,
                        const std::string& name, uint64_t size, const std::string& path,
                        const std::function<void(size_t)>& copied) {
  std::unique_ptr<WritableFile> file;
  REPLAYDB_RETURN_IF_ERROR(env->NewWritableFile(path, /*truncate=*/true, &file));
  uint64_t offset = 0;
  while (offset < size) {
    REPLAYDB_ASSIGN_OR_RETURN(
        Message got, client.Call(
                         [&](const HeaderFields& h) {
                           flatbuffers::FlatBufferBuilder b(128);
                           b.ForceDefaults(true);
                           const auto f = b.CreateString(name);
                           return EncodeHeader(
                               b, h, fb::Body::ReadSnapshot,
                               fb::CreateReadSnapshot(b, id, f, offset, options.max_bytes));
                         },
                         "", std::chrono::minutes(1)));
    if (got.header()->body_type() != fb::Body::SnapshotBytes || got.payload.empty()) {
      return Status::Corruption(options.primary + " answered a ReadSnapshot of " + name + " at " +
                                std::to_string(offset) + " with " +
                                std::to_string(got.payload.size()) + " bytes of a " +
                                fb::EnumNameBody(got.header()->body_type()));
    }
    REPLAYDB_RETURN_IF_ERROR(file->Append(got.payload));
    offset += got.payload.size();
    copied(got.payload.size());
  }
  REPLAYDB_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace

Status CopySnapshotIfNew(const std::string& dir, ReplicaOptions options,
                         const ProgressCallback& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool database = fs::exists(dir + "/CATALOG", ec);
  if (!database && !NeedsSnapshot(dir)) return Status::OK();
  if (options.name.empty()) options.name = DefaultReplicaName(dir);
  std::string host;
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseAddress(options.primary, &host, &port));
  Env* env = Env::Default();
  REPLAYDB_RETURN_IF_ERROR(env->CreateDirIfMissing(dir));
  std::unique_ptr<FileLock> lock;
  REPLAYDB_RETURN_IF_ERROR(env->LockFile(dir + "/LOCK", &lock));
  RpcClientOptions o;
  o.client_name = "replica " + options.name;
  o.connect_timeout = options.connect_timeout;
  o.transport.heartbeat = options.heartbeat;
  o.token = options.token;
  const std::string staged = dir + "/" + kPartial;
  if (database) {
    fs::remove_all(staged, ec);  // (installed, cut short before this went)
    // A replica whose place its primary's log no longer holds copies a new
    // snapshot (a primary that cannot be asked: it starts as it is, and
    // its follower tries again).
    wal::LogPosition at;
    Result<std::unique_ptr<RpcClient>> probe = RpcClient::Connect(host, port, o);
    if (!PlaceGone(probe.ok() ? probe->get() : nullptr, env, dir, options, &at)) {
      return Status::OK();
    }
    if (options.log) {
      options.log("replica of " + options.primary + ": its log no longer holds this replica's " +
                  "place (segment " + std::to_string(at.segment) + ", offset " +
                  std::to_string(at.offset) + "): copying a new snapshot into " + dir);
    }
    // From here the directory is no database: a copy cut short is made
    // afresh at the next start.
    fs::create_directories(staged, ec);
    if (ec) return Status::IOError("cannot make " + staged + ": " + ec.message());
    fs::remove(dir + "/CATALOG", ec);
    if (ec) return Status::IOError("cannot remove " + dir + "/CATALOG: " + ec.message());
  }
  // What a cut-short install (or the database a new snapshot replaces)
  // left goes; the snapshot's files come to DIR/snapshot.partial, then
  // move into place.
  for (const char* leftover : {kPartial, "cold", "wal", engine::DBImpl::kReplicaFile,
                               wal::ReplicaSet::kFile, "snapshots"}) {
    fs::remove_all(dir + "/" + leftover, ec);
    if (ec) return Status::IOError("cannot remove " + dir + "/" + leftover + ": " + ec.message());
  }
  fs::create_directories(staged, ec);
  if (ec) return Status::IOError("cannot make " + staged + ": " + ec.message());

  Result<std::unique_ptr<RpcClient>> connected = RpcClient::Connect(host, port, o);
  if (!connected.ok()) {
    return connected.status().WithContext("a snapshot of " + options.primary + " for " + dir +
                                          " (a new replica starts from one)");
  }
  std::unique_ptr<RpcClient> client = std::move(connected).value();
  // The primary checkpoints first: that may take a while.
  constexpr std::chrono::minutes kMakeTimeout{30};
  Result<Message> made = client->Call(
      [&](const HeaderFields& f) {
        flatbuffers::FlatBufferBuilder b(128);
        b.ForceDefaults(true);
        const auto name = b.CreateString(options.name);
        return EncodeHeader(b, f, fb::Body::GetSnapshot, fb::CreateGetSnapshot(b, name));
      },
      "", kMakeTimeout);
  if (!made.ok()) {
    return made.status().WithContext("a snapshot of " + options.primary + " for " + dir);
  }
  const fb::SnapshotMade* m = made->header()->body_as_SnapshotMade();
  if (m == nullptr || m->files() == nullptr) {
    return Status::Corruption(options.primary + " answered a GetSnapshot with a " +
                              fb::EnumNameBody(made->header()->body_type()));
  }
  const uint64_t id = m->id();
  const wal::LogPosition from{m->segment(), m->offset()};
  int64_t total = 0;
  for (const fb::SnapshotFile* f : *m->files()) total += static_cast<int64_t>(f->size());
  const std::string operation = "snapshot of " + options.primary;
  int64_t done = 0;
  auto last_report = Clock::now();
  const auto report = [&](bool finished) {
    if (!progress) return;
    if (!finished && Clock::now() - last_report < std::chrono::milliseconds(100)) return;
    last_report = Clock::now();
    progress(ProgressUpdate{operation, done, total, "bytes", finished});
  };
  if (progress) progress(ProgressUpdate{operation, 0, total, "bytes", false});
  Status s;
  for (const fb::SnapshotFile* f : *m->files()) {
    const std::string name = f->name() == nullptr ? std::string() : f->name()->str();
    const fs::path rel(name);
    if (name.empty() || rel.is_absolute() ||
        std::any_of(rel.begin(), rel.end(), [](const fs::path& p) { return p == ".."; })) {
      s = Status::Corruption(options.primary + " listed a snapshot file named " +
                             util::Quoted(name) + ", outside the snapshot");
      break;
    }
    const std::string path = staged + "/" + name;
    fs::create_directories(fs::path(path).parent_path(), ec);
    s = CopySnapshotFile(*client, env, options, id, name, f->size(), path, [&](size_t n) {
      done += static_cast<int64_t>(n);
      report(false);
    });
    if (!s.ok()) break;
  }
  report(true);
  if (!s.ok()) return s.WithContext("copying the snapshot of " + options.primary + " into " + dir);
  // (`lock` is let go after this: Open takes it again.)
  return engine::DBImpl::InstallSnapshot(env, dir, staged, options.primary, from);
}

Replica::Replica(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Replica::~Replica() = default;

Result<std::unique_ptr<Replica>> Replica::Start(engine::DBImpl* db, ReplicaOptions options) {
  std::string host;
  uint16_t port = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseAddress(options.primary, &host, &port));
  if (options.name.empty()) options.name = DefaultReplicaName(db->path());
  const std::string path = db->path() + "/" + engine::DBImpl::kReplicaFile;
  wal::LogPosition from;
  std::string primary;
  const Status read = engine::DBImpl::ReadReplicaFile(Env::Default(), db->path(), &primary, &from);
  if (read.ok()) {
    if (primary != options.primary) {
      return Status::FailedPrecondition(db->path() + " is a replica of " + primary + ", not of " +
                                        options.primary + " (" + path + ")");
    }
  } else if (read.code() != Status::Code::kNotFound) {
    return read;
  } else if (!db->ListTables().empty()) {
    return Status::FailedPrecondition(db->path() + " holds tables and was never a replica of " +
                                      options.primary +
                                      ": a replica starts from an empty directory");
  } else {
    // A replica from now on, before anything is applied (a restart then
    // finds it one, whatever it applied).
    REPLAYDB_RETURN_IF_ERROR(
        engine::DBImpl::WriteReplicaFile(Env::Default(), db->path(), options.primary, from));
  }
  auto impl = std::make_unique<Impl>(db, std::move(options), host, port, from);
  impl->StartThread();
  return std::unique_ptr<Replica>(new Replica(std::move(impl)));
}

void Replica::Stop() { impl_->Stop(); }

ReplicaState Replica::state() const {
  return impl_->state();
}

}  // namespace replaydb::rdma
