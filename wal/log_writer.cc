// LogWriter (wal/log_writer.h): record framing, segment files, sync modes
// and group commit.
//
// Locking: State::mu guards everything in State. Appends build the record
// and hand it to the OS under mu (one WritableFile::Append per record). An
// fsync runs WITHOUT mu, by one "leader" at a time (sync_running), so
// appends continue while it runs; everyone else waits on State::cv. Only
// Sync may overlap Append/Truncate on the same WritableFile (env.h allows
// exactly that). A segment switch (Roll, or an Append past segment_bytes)
// waits until no sync is running, then syncs the old file itself before
// closing it, so a leader never holds a closed file. A switch that cannot
// create the next segment (a full disk) changes nothing and is not sticky.
#include "wal/log_writer.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "util/crc32c.h"
#include "wal/log_reader.h"

namespace replaydb::wal {

namespace {

void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

std::string SegmentHeader(uint64_t number) {
  std::string h(kSegmentHeaderBytes, '\0');
  std::memcpy(h.data(), kSegmentMagic.data(), kSegmentMagic.size());
  PutU32(h.data() + 8, kFormatVersion);
  PutU64(h.data() + 12, number);
  return h;
}

}  // namespace

struct LogWriter::State {
  std::mutex mu;
  // Signalled when a sync finishes, the writer fails, or it stops.
  std::condition_variable cv;
  // Wakes the kBatch thread early (batch_bytes reached, or stopping).
  std::condition_variable batch_cv;

  // The current segment. Replaced only by SwitchSegment, with mu held and no
  // sync running.
  std::unique_ptr<WritableFile> file;
  std::string path;
  uint64_t segment = 0;

  // The reusable record buffer: header then payload.
  std::unique_ptr<char[]> buf;
  size_t buf_capacity = 0;

  uint64_t last_seq = 0;        // the last record appended
  uint64_t synced_seq = 0;      // every record <= this is durable
  uint64_t unsynced_bytes = 0;  // appended since the last sync started
  bool sync_running = false;    // a leader is fsyncing without mu
  // kNone only: closed segments with unsynced records, which a forced Sync
  // reopens and fsyncs.
  std::vector<std::string> unsynced_closed;

  // Sticky failure: set once; every later Append/Sync returns it.
  bool failed = false;
  Status failure;
  // Seal's: every later Append returns it (Sync and Roll go on).
  Status sealed;

  bool stop = false;
  // Signalled after an append while someone waits in WaitPast.
  mutable std::condition_variable appended;
  mutable int end_waiters = 0;
  std::thread batch_thread;
  LogWriterStats stats;
};

LogWriter::LogWriter(Env* env, std::string dir, const WalOptions& options)
    : env_(env), dir_(std::move(dir)), options_(options), state_(std::make_unique<State>()) {}

namespace {

// Creates segment `number`, writes its header and makes its directory entry
// durable; unless kNone, the header too: a segment that a later one follows
// must never be found empty after a machine crash (replay takes that for
// damage inside the log), and a segment left without records is synced by
// nothing else. A segment that holds just its header (no records: a writer
// closed with nothing logged) is taken over; AlreadyExists rather than
// overwriting one that holds anything else.
Status CreateSegment(Env* env, const std::string& dir, const WalOptions& options,
                     uint64_t number, std::unique_ptr<WritableFile>* file, std::string* path) {
  *path = dir + "/" + SegmentFileName(number);
  bool header_only = false;
  if (env->FileExists(*path)) {
    uint64_t size = 0;
    REPLAYDB_RETURN_IF_ERROR(env->GetFileSize(*path, &size));
    std::string bytes;
    header_only = size == kSegmentHeaderBytes && env->ReadFileToString(*path, &bytes).ok() &&
                  bytes == SegmentHeader(number);
    if (size > 0 && !header_only) {
      return Status::AlreadyExists(*path + ": WAL segment already exists (" +
                                   std::to_string(size) + " bytes); not overwriting it");
    }
  }
  REPLAYDB_RETURN_IF_ERROR(env->NewMappedWritableFile(*path, file));
  Status s = (*file)->Append(SegmentHeader(number));
  if (s.ok() && options.sync != WalSyncMode::kNone) s = (*file)->Sync();
  if (s.ok()) s = env->SyncDir(dir);
  if (!s.ok()) {
    (void)(*file)->Close();
    file->reset();
    if (header_only) {
      // Put the header back (best effort): a checkpoint may name this
      // segment as where the log continues. Failing that, an empty last
      // segment is a torn tail to recovery.
      std::unique_ptr<WritableFile> plain;
      if (env->NewWritableFile(*path, /*truncate=*/true, &plain).ok()) {
        if (plain->Append(SegmentHeader(number)).ok()) (void)plain->Sync();
        (void)plain->Close();
      }
    } else {
      (void)env->RemoveFile(*path);
    }
    return s.WithContext("creating WAL segment " + *path);
  }
  return Status::OK();
}

}  // namespace

// The implementation's helpers: a friend of LogWriter, so they can reach State.
struct LogWriterInternal {
  // Marks the writer failed (if not already) and returns the sticky error.
  // REQUIRES: mu held.
  static Status Fail(LogWriter::State* st, std::string_view what, const Status& cause) {
    if (!st->failed) {
      st->failed = true;
      st->failure = Status::IOError("write-ahead log " + st->path + " is unusable after the earlier " +
                                    std::string(what) +
                                    " failure; the database must be reopened: " + cause.message());
      st->cv.notify_all();
      st->appended.notify_all();
    }
    return st->failure;
  }

  // Fsyncs as leader: every record appended before it starts is durable
  // when it returns OK. REQUIRES: lock holds mu, !st->sync_running.
  static Status LeaderSync(Env* env, LogWriter::State* st, std::unique_lock<std::mutex>& lock) {
    st->sync_running = true;
    const uint64_t target = st->last_seq;
    const uint64_t bytes = st->unsynced_bytes;
    WritableFile* file = st->file.get();
    std::vector<std::string> closed = std::move(st->unsynced_closed);
    st->unsynced_closed.clear();
    lock.unlock();

    Status s;
    uint64_t syncs = 0;
    for (const std::string& path : closed) {
      // fsync acts on the file, not the descriptor: a fresh one will do.
      std::unique_ptr<WritableFile> f;
      s = env->NewWritableFile(path, /*truncate=*/false, &f);
      if (s.ok()) s = f->Sync();
      if (s.ok()) s = f->Close();
      if (!s.ok()) break;
      ++syncs;
    }
    if (s.ok()) {
      s = file->Sync();
      if (s.ok()) ++syncs;
    }

    lock.lock();
    st->sync_running = false;
    st->cv.notify_all();
    st->stats.syncs += syncs;
    if (!s.ok()) return Fail(st, "fsync", s);
    st->synced_seq = std::max(st->synced_seq, target);
    st->unsynced_bytes -= std::min(st->unsynced_bytes, bytes);
    return Status::OK();
  }

  // Waits for a running sync, then (unless `seq` is durable by then) leads
  // one. REQUIRES: lock holds mu.
  static Status GroupSync(Env* env, LogWriter::State* st, std::unique_lock<std::mutex>& lock,
                          uint64_t seq) {
    while (true) {
      if (st->failed) return st->failure;
      if (st->synced_seq >= seq) return Status::OK();
      if (!st->sync_running) break;
      st->cv.wait(lock);
    }
    return LeaderSync(env, st, lock);
  }

  // Waits until no sync runs.
  // REQUIRES: lock holds mu.
  static void WaitNoSync(LogWriter::State* st, std::unique_lock<std::mutex>& lock) {
    st->cv.wait(lock, [st] { return !st->sync_running; });
  }

  // Syncs (unless kNone) the current segment, starts the next and closes
  // the current one. The sync comes first, so that after a machine crash no
  // segment follows one with records missing (replay would take that for
  // damage inside the log). If the next segment cannot be made (a full
  // disk), the error is not sticky: appends go on into the current segment,
  // and a later switch tries again. REQUIRES: lock holds mu, no sync
  // running, !failed.
  static Status SwitchSegment(Env* env, const std::string& dir, const WalOptions& options,
                              LogWriter::State* st) {
    const bool unsynced = st->last_seq > st->synced_seq || st->unsynced_bytes > 0;
    if (unsynced && options.sync != WalSyncMode::kNone) {
      // Under mu: a roll is rare, and this keeps the old file's records
      // ahead of the new file's.
      Status s = st->file->Sync();
      if (!s.ok()) return Fail(st, "fsync", s);
      ++st->stats.syncs;
      st->synced_seq = st->last_seq;
      st->unsynced_bytes = 0;
      st->cv.notify_all();
    }
    std::unique_ptr<WritableFile> next;
    std::string next_path;
    REPLAYDB_RETURN_IF_ERROR(CreateSegment(env, dir, options, st->segment + 1, &next, &next_path));
    if (options.sync != WalSyncMode::kNone) ++st->stats.syncs;  // its header
    if (unsynced && options.sync == WalSyncMode::kNone) st->unsynced_closed.push_back(st->path);
    st->unsynced_bytes = 0;
    Status s = st->file->Close();
    if (!s.ok()) {
      // The log's state on disk is unknown: sticky, and the new segment (a
      // header only) goes again.
      (void)next->Close();
      (void)env->RemoveFile(next_path);
      return Fail(st, "close", s);
    }
    st->file = std::move(next);
    st->path = std::move(next_path);
    ++st->segment;
    st->stats.segment = st->segment;
    return Status::OK();
  }

  static void BatchLoop(Env* env, LogWriter::State* st, const WalOptions& options) {
    std::unique_lock<std::mutex> lock(st->mu);
    while (!st->stop) {
      st->batch_cv.wait_for(lock, options.batch_interval, [&] {
        return st->stop || (!st->failed && st->unsynced_bytes >= options.batch_bytes);
      });
      if (st->stop) break;
      if (st->failed) continue;  // nothing more to do; wait for stop
      if (st->last_seq > st->synced_seq) (void)GroupSync(env, st, lock, st->last_seq);
    }
  }
};

Result<std::unique_ptr<LogWriter>> LogWriter::Open(Env* env, std::string dir,
                                                   const WalOptions& options,
                                                   uint64_t first_segment) {
  std::unique_ptr<LogWriter> w(new LogWriter(env, std::move(dir), options));
  State* st = w->state_.get();
  REPLAYDB_RETURN_IF_ERROR(CreateSegment(env, w->dir_, options, first_segment, &st->file, &st->path));
  if (options.sync != WalSyncMode::kNone) st->stats.syncs = 1;  // its header
  st->segment = first_segment;
  st->stats.segment = first_segment;
  if (options.sync == WalSyncMode::kBatch) {
    st->batch_thread =
        std::thread(&LogWriterInternal::BatchLoop, env, st, std::cref(w->options_));
  }
  return w;
}

LogWriter::~LogWriter() {
  State* st = state_.get();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stop = true;
  }
  st->batch_cv.notify_all();
  st->cv.notify_all();
  st->appended.notify_all();
  if (st->batch_thread.joinable()) st->batch_thread.join();
  std::unique_lock<std::mutex> lock(st->mu);
  LogWriterInternal::WaitNoSync(st, lock);
  if (st->file == nullptr) return;
  if (!st->failed && options_.sync != WalSyncMode::kNone && st->last_seq > st->synced_seq) {
    (void)st->file->Sync();
  }
  (void)st->file->Close();
}

Result<uint64_t> LogWriter::AppendRaw(RecordType type, size_t payload_bytes,
                                      void (*fill)(void* ctx, std::byte* out), void* ctx,
                                      std::span<const std::span<const std::byte>> pieces) {
  if (payload_bytes > kMaxPayloadBytes) {
    return Status::InvalidArgument("WAL record of " + std::to_string(payload_bytes) +
                                   " bytes exceeds the maximum of " +
                                   std::to_string(kMaxPayloadBytes));
  }
  State* st = state_.get();
  const size_t record_bytes = kRecordHeaderBytes + payload_bytes;
  std::unique_lock<std::mutex> lock(st->mu);
  // Records never span segments: move on first if this one would take a
  // segment holding records past segment_bytes.
  if (!st->sealed.ok()) return st->sealed;
  while (true) {
    if (st->failed) return st->failure;
    const uint64_t size = st->file->size();
    if (size <= kSegmentHeaderBytes || size + record_bytes <= options_.segment_bytes) break;
    if (st->sync_running) {
      st->cv.wait(lock);
      continue;
    }
    Status s = LogWriterInternal::SwitchSegment(env_, dir_, options_, st);
    if (!s.ok()) return s;
  }

  const uint64_t before = st->file->size();
  Status s;
  if (fill != nullptr) {
    if (st->buf_capacity < record_bytes ||
        st->buf_capacity > std::max<size_t>(record_bytes * 4, 1 << 20)) {
      // Grow to fit; shrink back after an unusually large record.
      st->buf_capacity = std::max<size_t>(record_bytes, 4096);
      st->buf = std::make_unique<char[]>(st->buf_capacity);
    }
    char* rec = st->buf.get();
    if (payload_bytes > 0) fill(ctx, reinterpret_cast<std::byte*>(rec + kRecordHeaderBytes));
    PutU32(rec + 4, static_cast<uint32_t>(payload_bytes));
    rec[8] = static_cast<char>(static_cast<uint8_t>(type));
    PutU32(rec, MaskCrc(util::Crc32c(rec + 4, record_bytes - 4)));
    s = st->file->Append(std::string_view(rec, record_bytes));
  } else {
    // The header here, the payload where it lies: one vectored write.
    char header[kRecordHeaderBytes];
    PutU32(header + 4, static_cast<uint32_t>(payload_bytes));
    header[8] = static_cast<char>(static_cast<uint8_t>(type));
    uint32_t crc = util::Crc32c(header + 4, kRecordHeaderBytes - 4);
    constexpr size_t kInline = 8;
    std::string_view inline_views[kInline];
    std::vector<std::string_view> more;
    std::span<std::string_view> views(inline_views, 1 + pieces.size());
    if (1 + pieces.size() > kInline) {
      more.resize(1 + pieces.size());
      views = more;
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      crc = util::Crc32cExtend(crc, pieces[i].data(), pieces[i].size());
      views[i + 1] = std::string_view(reinterpret_cast<const char*>(pieces[i].data()),
                                      pieces[i].size());
    }
    PutU32(header, MaskCrc(crc));
    views[0] = std::string_view(header, kRecordHeaderBytes);
    s = st->file->AppendV(views);
  }
  if (!s.ok()) {
    Status cut = st->file->Truncate(before);
    if (!cut.ok()) {
      return LogWriterInternal::Fail(
          st, "write",
          Status::IOError(s.message() + "; cutting the segment back failed too: " + cut.message()));
    }
    return Status::IOError("WAL append to " + st->path + " at offset " + std::to_string(before) +
                           " failed (the segment was cut back): " + s.message());
  }
  const uint64_t seq = ++st->last_seq;
  st->unsynced_bytes += record_bytes;
  ++st->stats.records;
  st->stats.bytes += record_bytes;
  ++st->stats.records_since_roll;
  st->stats.bytes_since_roll += record_bytes;
  if (options_.sync == WalSyncMode::kBatch && st->unsynced_bytes >= options_.batch_bytes) {
    st->batch_cv.notify_one();
  }
  if (st->end_waiters > 0) st->appended.notify_all();
  return seq;
}

Result<uint64_t> LogWriter::AppendV(RecordType type,
                                    std::span<const std::span<const std::byte>> pieces) {
  size_t payload_bytes = 0;
  for (std::span<const std::byte> piece : pieces) payload_bytes += piece.size();
  return AppendRaw(type, payload_bytes, nullptr, nullptr, pieces);
}

Result<uint64_t> LogWriter::Append(RecordType type, std::span<const std::byte> payload) {
  return AppendV(type, std::span<const std::span<const std::byte>>(&payload, 1));
}

Status LogWriter::Sync(uint64_t seq, bool wait, bool force) {
  State* st = state_.get();
  std::unique_lock<std::mutex> lock(st->mu);
  if (st->failed) return st->failure;
  seq = std::min(seq, st->last_seq);
  if (st->synced_seq >= seq) return Status::OK();
  if (force || options_.sync == WalSyncMode::kAlways) {
    return LogWriterInternal::GroupSync(env_, st, lock, seq);
  }
  if (options_.sync == WalSyncMode::kNone || !wait) return Status::OK();
  // kBatch: the background thread's next fsync covers it.
  st->cv.wait(lock, [&] { return st->failed || st->stop || st->synced_seq >= seq; });
  if (st->failed) return st->failure;
  if (st->synced_seq < seq) return Status::Cancelled("WAL writer closed while waiting for a sync");
  return Status::OK();
}

LogPosition LogWriter::Seal(Status why) {
  State* st = state_.get();
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->sealed.ok()) st->sealed = std::move(why);
  return LogPosition{st->segment, st->file->size()};
}

Result<uint64_t> LogWriter::Roll(bool only_if_records) {
  State* st = state_.get();
  std::unique_lock<std::mutex> lock(st->mu);
  if (only_if_records && !st->failed && st->stats.records_since_roll == 0) return st->segment;
  while (true) {
    if (st->failed) return st->failure;
    if (!st->sync_running) break;
    st->cv.wait(lock);
  }
  REPLAYDB_RETURN_IF_ERROR(LogWriterInternal::SwitchSegment(env_, dir_, options_, st));
  st->stats.bytes_since_roll = 0;
  st->stats.records_since_roll = 0;
  return st->segment;
}

Status LogWriter::DeleteSegmentsBefore(uint64_t segment) {
  State* st = state_.get();
  {
    std::unique_lock<std::mutex> lock(st->mu);
    // A running sync may be reopening a closed segment; let it finish, and
    // drop the doomed ones from the list so none is reopened (recreated).
    LogWriterInternal::WaitNoSync(st, lock);
    segment = std::min(segment, st->segment);
    std::erase_if(st->unsynced_closed, [segment](const std::string& path) {
      uint64_t n = 0;
      const size_t slash = path.find_last_of('/');
      return ParseSegmentFileName(std::string_view(path).substr(slash + 1), &n) && n < segment;
    });
  }
  return RemoveSegmentsBefore(env_, dir_, segment);
}

LogPosition LogWriter::end() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return LogPosition{state_->segment, state_->file->size()};
}

LogPosition LogWriter::WaitPast(LogPosition position,
                                std::chrono::steady_clock::time_point until) const {
  State* st = state_.get();
  std::unique_lock<std::mutex> lock(st->mu);
  ++st->end_waiters;
  st->appended.wait_until(lock, until, [&] {
    return st->failed || st->stop || LogPosition{st->segment, st->file->size()} > position;
  });
  --st->end_waiters;
  return LogPosition{st->segment, st->file->size()};
}

LogWriterStats LogWriter::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace replaydb::wal
