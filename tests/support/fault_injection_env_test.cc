// FaultInjectionEnv: power loss, injected failures, full disk, counters.
#include "tests/support/fault_injection_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "replaydb/env.h"
#include "replaydb/status.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::FaultInjectionEnv;

using ::testing::HasSubstr;
using testing_util::TempDir;
using testing_util::TestSeed;

class FaultInjectionEnvTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.Sub(name); }

  // Contents through the base Env, or "<absent>".
  std::string Contents(const std::string& path) {
    std::string out;
    const Status s = Env::Default()->ReadFileToString(path, &out);
    if (s.code() == Status::Code::kNotFound) return "<absent>";
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  std::unique_ptr<WritableFile> Open(const std::string& path, bool truncate = false) {
    std::unique_ptr<WritableFile> file;
    const Status s = env_.NewWritableFile(path, truncate, &file);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return file;
  }

  TempDir dir_;
  FaultInjectionEnv env_;
};

TEST_F(FaultInjectionEnvTest, ForwardsToTheBaseEnv) {
  EXPECT_EQ(env_.base(), Env::Default());
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_NE(file, nullptr);
  ASSERT_OK(file->Append("abc"));
  ASSERT_OK(file->Append("def"));
  EXPECT_EQ(file->size(), 6u);
  ASSERT_OK(file->Truncate(4));
  ASSERT_OK(file->Append("!"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(file->Close());
  EXPECT_EQ(Contents(path), "abcd!");

  uint64_t size = 0;
  ASSERT_OK(env_.GetFileSize(path, &size));
  EXPECT_EQ(size, 5u);
  std::unique_ptr<SequentialFile> in;
  ASSERT_OK(env_.NewSequentialFile(path, &in));
  char scratch[8];
  std::string_view got;
  ASSERT_OK(in->Read(sizeof(scratch), &got, scratch));
  EXPECT_EQ(got, "abcd!");

  ASSERT_OK(env_.CreateDirIfMissing(Path("sub")));
  ASSERT_OK(env_.WriteFileAtomic(Path("CATALOG"), "catalog"));
  std::string text;
  ASSERT_OK(env_.ReadFileToString(Path("CATALOG"), &text));
  EXPECT_EQ(text, "catalog");
  std::vector<std::string> names;
  ASSERT_OK(env_.GetChildren(dir_.path(), &names));
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("wal", "sub", "CATALOG"));
  ASSERT_OK(env_.TruncateFile(Path("CATALOG"), 3));
  EXPECT_EQ(Contents(Path("CATALOG")), "cat");
  ASSERT_OK(env_.RemoveFile(Path("CATALOG")));
  EXPECT_FALSE(env_.FileExists(Path("CATALOG")));
  EXPECT_EQ(env_.RemoveFile(Path("CATALOG")).code(), Status::Code::kNotFound);

  std::unique_ptr<FileLock> lock;
  ASSERT_OK(env_.LockFile(Path("LOCK"), &lock));
  std::unique_ptr<FileLock> second;
  EXPECT_EQ(env_.LockFile(Path("LOCK"), &second).code(), Status::Code::kBusy);
}

TEST_F(FaultInjectionEnvTest, FailNthWriteFailsThatAppendOnly) {
  const std::string path = Path("wal");
  auto file = Open(path);
  env_.FailNthWrite(3);
  ASSERT_OK(file->Append("one,"));
  ASSERT_OK(file->Append("two,"));
  const Status s = file->Append("three,");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "write " + path + ": injected write failure");
  EXPECT_EQ(file->size(), 8u);
  ASSERT_OK(file->Append("four"));
  ASSERT_OK(file->Append("."));
  EXPECT_EQ(Contents(path), "one,two,four.");
}

TEST_F(FaultInjectionEnvTest, FailNthWriteCountsAcrossFiles) {
  auto a = Open(Path("a"));
  auto b = Open(Path("b"));
  env_.FailNthWrite(2);
  ASSERT_OK(a->Append("x"));
  const Status s = b->Append("y");
  EXPECT_EQ(s.message(), "write " + Path("b") + ": injected write failure");
  ASSERT_OK(a->Append("x"));
  ASSERT_OK(b->Append("y"));
}

TEST_F(FaultInjectionEnvTest, FailNthWriteLeavesTornPrefixThatTheNextAppendCutsOff) {
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(file->Append("head|"));
  env_.FailNthWrite(1, /*partial_bytes=*/4);
  const Status s = file->Append("abcdefgh");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "write " + path + ": injected write failure");
  EXPECT_EQ(file->size(), 5u) << "size() reports the bytes before the failed call";
  EXPECT_EQ(Contents(path), "head|abcd") << "the torn prefix is in the file";

  ASSERT_OK(file->Append("XY"));
  EXPECT_EQ(file->size(), 7u);
  EXPECT_EQ(Contents(path), "head|XY");

  // partial_bytes is clamped to the data's size.
  env_.FailNthWrite(1, /*partial_bytes=*/100);
  EXPECT_FALSE(file->Append("123").ok());
  EXPECT_EQ(Contents(path), "head|XY123");
  ASSERT_OK(file->Truncate(file->size()));
  EXPECT_EQ(Contents(path), "head|XY");
}

TEST_F(FaultInjectionEnvTest, FailNthSyncFailsFileSyncAndNothingBecomesDurable) {
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(file->Append("synced"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(file->Append("+lost"));
  env_.FailNthSync(1);
  const Status s = file->Sync();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "fdatasync " + path + ": injected fsync failure");
  ASSERT_OK(env_.DropUnsyncedData());
  EXPECT_EQ(Contents(path), "synced");
}

TEST_F(FaultInjectionEnvTest, FailNthSyncFailsSyncDirAndTheCreationIsNotDurable) {
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(file->Append("data"));
  ASSERT_OK(file->Sync());
  env_.FailNthSync(1);
  const Status s = env_.SyncDir(dir_.path());
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "fsync " + dir_.path() + ": injected fsync failure");
  ASSERT_OK(env_.DropUnsyncedData());
  EXPECT_EQ(Contents(path), "<absent>");
}

TEST_F(FaultInjectionEnvTest, FailNthWriteFileAtomicKeepsTheOldFile) {
  const std::string path = Path("CATALOG");
  ASSERT_OK(env_.WriteFileAtomic(path, "v1"));
  env_.FailNthWriteFileAtomic(2);
  ASSERT_OK(env_.WriteFileAtomic(path, "v2"));
  const Status s = env_.WriteFileAtomic(path, "v3");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "write " + path + ".tmp: injected write failure");
  EXPECT_EQ(Contents(path), "v2");
  EXPECT_FALSE(env_.FileExists(path + ".tmp"));
  ASSERT_OK(env_.WriteFileAtomic(path, "v4"));
  EXPECT_EQ(Contents(path), "v4");
}

// Random appends to several files with random syncs: a power loss keeps
// exactly the bytes each file had at its last Sync.
TEST_F(FaultInjectionEnvTest, DropUnsyncedDataKeepsExactlyTheSyncedPrefix) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE("REPLAYDB_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  constexpr int kFiles = 3;
  std::vector<std::string> paths;
  std::vector<std::string> written(kFiles);  // everything appended
  std::vector<size_t> synced(kFiles, 0);     // bytes at the last Sync
  std::vector<std::unique_ptr<WritableFile>> files;
  for (int f = 0; f < kFiles; ++f) {
    paths.push_back(Path("wal-" + std::to_string(f)));
    files.push_back(Open(paths.back()));
  }
  ASSERT_OK(env_.SyncDir(dir_.path()));

  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (int op = 0; op < 200; ++op) {
      const int f = static_cast<int>(rng() % kFiles);
      std::string data(rng() % 300, '\0');
      for (char& c : data) c = static_cast<char>(rng());
      ASSERT_OK(files[f]->Append(data));
      written[f] += data;
      if (rng() % 8 == 0) {
        ASSERT_OK(files[f]->Sync());
        synced[f] = written[f].size();
      }
    }
    ASSERT_OK(env_.DropUnsyncedData());
    for (int f = 0; f < kFiles; ++f) {
      SCOPED_TRACE(paths[f]);
      written[f].resize(synced[f]);
      const std::string back = Contents(paths[f]);
      EXPECT_EQ(back.size(), synced[f]);
      EXPECT_TRUE(back == written[f]) << "contents differ from the synced prefix";
      // The old writer is dead; reopen to go on where the file now ends.
      EXPECT_FALSE(files[f]->Append("x").ok());
      files[f] = Open(paths[f]);
      EXPECT_EQ(files[f]->size(), synced[f]);
    }
  }
}

TEST_F(FaultInjectionEnvTest, FilesNeverDirSyncedVanish) {
  auto early = Open(Path("early"));
  ASSERT_OK(early->Append("early"));
  ASSERT_OK(env_.WriteFileAtomic(Path("CATALOG"), "catalog"));
  ASSERT_OK(env_.SyncDir(dir_.path() + "/"));  // a trailing '/' names the same directory

  auto late = Open(Path("late"));
  ASSERT_OK(late->Append("late"));
  ASSERT_OK(late->Sync());  // data synced, but the directory entry is not
  ASSERT_OK(env_.CreateDirIfMissing(Path("sub")));
  auto nested = Open(Path("sub/nested"));
  ASSERT_OK(nested->Sync());
  ASSERT_OK(env_.SyncDir(Path("sub")));  // covers sub/nested only

  ASSERT_OK(env_.DropUnsyncedData());
  EXPECT_EQ(Contents(Path("early")), "") << "creation durable, data never synced";
  EXPECT_EQ(Contents(Path("CATALOG")), "catalog");
  EXPECT_EQ(Contents(Path("late")), "<absent>");
  EXPECT_EQ(Contents(Path("sub/nested")), "");
}

TEST_F(FaultInjectionEnvTest, UntrackedFilesAreDurableAsTheyStood) {
  ASSERT_OK(Env::Default()->WriteFileAtomic(Path("old"), "before"));
  auto file = Open(Path("old"));
  EXPECT_EQ(file->size(), 6u);
  ASSERT_OK(file->Append(" and after"));
  ASSERT_OK(env_.DropUnsyncedData());
  EXPECT_EQ(Contents(Path("old")), "before");
}

TEST_F(FaultInjectionEnvTest, TrackedFileRemovedBehindItsBackIsNewWhenReopened) {
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(file->Append("abc"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(file->Close());
  ASSERT_OK(Env::Default()->RemoveFile(path));

  file = Open(path);
  ASSERT_OK(file->Append("new"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(env_.DropUnsyncedData());
  EXPECT_EQ(Contents(path), "<absent>") << "its creation was never made durable";
}

TEST_F(FaultInjectionEnvTest, WritersOpenAcrossAPowerLossFail) {
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(file->Append("abc"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(env_.DropUnsyncedData());

  const std::string tail = " " + path + ": file was open across a simulated power loss";
  Status s = file->Append("x");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "append" + tail);
  s = file->Sync();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "sync" + tail);
  s = file->Truncate(0);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "truncate" + tail);
  s = file->Close();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "close" + tail);
  EXPECT_EQ(Contents(path), "abc");

  // A writer opened after the power loss works.
  file = Open(path);
  ASSERT_OK(file->Append("def"));
  ASSERT_OK(file->Close());
  EXPECT_EQ(Contents(path), "abcdef");
}

TEST_F(FaultInjectionEnvTest, PowerOffDropsUnsyncedDataAndRefusesChangesUntilPowerOn) {
  const std::string synced = Path("synced");
  const std::string catalog = Path("CATALOG");
  ASSERT_OK(env_.WriteFileAtomic(catalog, "old"));
  auto file = Open(synced);
  ASSERT_OK(file->Append("kept"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(file->Append(" lost"));
  const uint64_t writes = env_.writes();
  const uint64_t syncs = env_.syncs();

  ASSERT_OK(env_.PowerOff());
  EXPECT_EQ(Contents(synced), "kept");
  // Nothing the program still does reaches the files.
  const std::string off = ": the machine is off (simulated power loss)";
  std::unique_ptr<WritableFile> other;
  Status s = env_.NewWritableFile(Path("new"), /*truncate=*/true, &other);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.message(), "open " + Path("new") + off);
  EXPECT_EQ(other, nullptr);
  EXPECT_EQ(Contents(Path("new")), "<absent>");
  s = env_.NewMappedWritableFile(Path("mapped"), &other);
  EXPECT_EQ(s.message(), "open " + Path("mapped") + off);
  s = env_.WriteFileAtomic(catalog, "new");
  EXPECT_EQ(s.message(), "write " + catalog + ".tmp" + off);
  EXPECT_EQ(Contents(catalog), "old");
  s = env_.RemoveFile(synced);
  EXPECT_EQ(s.message(), "remove " + synced + off);
  s = env_.TruncateFile(synced, 0);
  EXPECT_EQ(s.message(), "truncate " + synced + off);
  EXPECT_EQ(Contents(synced), "kept");
  s = env_.SyncDir(dir_.path());
  EXPECT_EQ(s.message(), "fsync " + dir_.path() + off);
  s = env_.CreateDirIfMissing(Path("sub"));
  EXPECT_EQ(s.message(), "mkdir " + Path("sub") + off);
  EXPECT_FALSE(env_.FileExists(Path("sub")));
  EXPECT_THAT(file->Append("x").message(), HasSubstr("open across a simulated power loss"));
  // Reads go on; the refused calls are not counted.
  std::string text;
  ASSERT_OK(env_.ReadFileToString(synced, &text));
  EXPECT_EQ(text, "kept");
  EXPECT_EQ(env_.writes(), writes);
  EXPECT_EQ(env_.syncs(), syncs);
  (void)file->Close();

  env_.PowerOn();
  ASSERT_OK(env_.WriteFileAtomic(catalog, "new"));
  EXPECT_EQ(Contents(catalog), "new");
  auto again = Open(synced);
  ASSERT_OK(again->Append("!"));
  ASSERT_OK(again->Close());
  EXPECT_EQ(Contents(synced), "kept!");
  ASSERT_OK(env_.RemoveFile(synced));
}

TEST_F(FaultInjectionEnvTest, SyncTicketsTellWhichAppendsASyncCovered) {
  ASSERT_OK(env_.CreateDirIfMissing(Path("wal")));
  ASSERT_OK(env_.CreateDirIfMissing(Path("cold")));
  auto wal = Open(Path("wal/1.log"));
  auto cold = Open(Path("cold/1.sst"));
  ASSERT_OK(wal->Append("a"));
  const uint64_t after_a = env_.SyncTicket(Path("wal"));
  EXPECT_EQ(after_a, 0u);
  EXPECT_FALSE(env_.SyncedSince(Path("wal"), after_a));
  ASSERT_OK(cold->Sync());               // another directory
  ASSERT_OK(env_.SyncDir(Path("wal")));  // a directory's fsync, not a file's
  EXPECT_FALSE(env_.SyncedSince(Path("wal"), after_a));
  env_.FailNthSync(1);
  EXPECT_FALSE(wal->Sync().ok());  // failed: covers nothing
  EXPECT_FALSE(env_.SyncedSince(Path("wal"), after_a));
  ASSERT_OK(wal->Sync());
  EXPECT_TRUE(env_.SyncedSince(Path("wal"), after_a));
  EXPECT_TRUE(env_.SyncedSince(Path("wal") + "/", after_a));
  ASSERT_OK(wal->Append("b"));
  const uint64_t after_b = env_.SyncTicket(Path("wal"));
  EXPECT_EQ(after_b, 1u);  // the injected failure never began an fsync
  EXPECT_FALSE(env_.SyncedSince(Path("wal"), after_b));
  EXPECT_FALSE(env_.SyncedSince(dir_.path(), 0));
  // A power loss: nothing since counts, and "b" is gone.
  ASSERT_OK(env_.PowerOff());
  EXPECT_FALSE(wal->Sync().ok());
  EXPECT_FALSE(env_.SyncedSince(Path("wal"), after_b));
  EXPECT_EQ(Contents(Path("wal/1.log")), "a");
  env_.PowerOn();
}

// Appends while a Sync runs (the WAL's leader fsyncs without its lock): the
// Sync makes durable what the file held when it began, never more.
TEST_F(FaultInjectionEnvTest, AppendsDuringASyncAreNotMadeDurableByIt) {
  std::mt19937_64 rng(TestSeed());
  const std::string path = Path("wal");
  auto file = Open(path);
  ASSERT_OK(env_.SyncDir(dir_.path()));
  std::atomic<bool> stop{false};
  std::thread syncer([&] {
    while (!stop.load() && file->Sync().ok()) {
    }
  });
  std::string written;
  std::vector<std::pair<uint64_t, size_t>> tickets;  // after each Append: ticket, bytes
  // At least 2000 Appends, and on until a Sync begun after the first is done.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < 2000 || !env_.SyncedSince(dir_.path(), tickets.front().first); ++i) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    const std::string chunk(1 + rng() % 64, static_cast<char>('a' + i % 26));
    ASSERT_OK(file->Append(chunk));
    written += chunk;
    tickets.emplace_back(env_.SyncTicket(dir_.path()), written.size());
  }
  // The syncer stops, then one last Append that no Sync covers: the syncer
  // could otherwise finish a Sync of everything before the power goes.
  stop = true;
  syncer.join();
  const std::string last(1 + rng() % 64, '!');
  ASSERT_OK(file->Append(last));
  written += last;
  tickets.emplace_back(env_.SyncTicket(dir_.path()), written.size());
  ASSERT_OK(env_.PowerOff());
  const std::string kept = Contents(path);
  // A prefix of what was written: at least every Append a completed Sync
  // covered, and no more than a Sync had begun with.
  EXPECT_EQ(kept, written.substr(0, kept.size()));
  size_t covered = 0;
  for (const auto& [ticket, bytes] : tickets) {
    if (env_.SyncedSince(dir_.path(), ticket)) covered = bytes;
  }
  EXPECT_GE(kept.size(), covered);
  EXPECT_GT(covered, 0u) << "no Sync completed while appending";
  EXPECT_LT(kept.size(), written.size()) << "the last Append was never synced";
  env_.PowerOn();
}

TEST_F(FaultInjectionEnvTest, SpaceLimitWritesThePrefixThatFitsUntilCleared) {
  const std::string path = Path("wal");
  const std::string catalog = Path("CATALOG");
  ASSERT_OK(env_.WriteFileAtomic(catalog, "old"));
  auto file = Open(path);
  env_.SetSpaceLimit(env_.bytes_written() + 10);
  const std::string no_space = ": No space left on device";

  ASSERT_OK(file->Append("123456"));
  Status s = file->Append("abcdefgh");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("write " + path + no_space));
  EXPECT_EQ(file->size(), 6u);
  EXPECT_EQ(Contents(path), "123456abcd") << "the prefix that fits is written";

  s = file->Append("z");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("write " + path + no_space));
  EXPECT_EQ(Contents(path), "123456") << "the torn bytes are cut before the next append";

  s = env_.WriteFileAtomic(catalog, "new");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("write " + catalog + ".tmp" + no_space));
  EXPECT_EQ(Contents(catalog), "old");
  EXPECT_FALSE(env_.FileExists(catalog + ".tmp"));

  env_.ClearSpaceLimit();
  ASSERT_OK(file->Append("789"));
  ASSERT_OK(env_.WriteFileAtomic(catalog, "new"));
  EXPECT_EQ(Contents(path), "123456789");
  EXPECT_EQ(Contents(catalog), "new");
}

TEST_F(FaultInjectionEnvTest, Counters) {
  EXPECT_EQ(env_.writes(), 0u);
  EXPECT_EQ(env_.syncs(), 0u);
  EXPECT_EQ(env_.bytes_written(), 0u);
  auto file = Open(Path("wal"));
  ASSERT_OK(file->Append("12345"));
  ASSERT_OK(file->Append(""));
  ASSERT_OK(file->Sync());
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(env_.WriteFileAtomic(Path("CATALOG"), "abc"));
  EXPECT_EQ(env_.writes(), 3u);
  EXPECT_EQ(env_.syncs(), 2u);
  EXPECT_EQ(env_.bytes_written(), 8u);

  // Failed calls count; only the torn prefix counts as written.
  env_.FailNthWrite(1, 2);
  env_.FailNthSync(1);
  EXPECT_FALSE(file->Append("abcdef").ok());
  EXPECT_FALSE(file->Sync().ok());
  EXPECT_EQ(env_.writes(), 4u);
  EXPECT_EQ(env_.syncs(), 3u);
  EXPECT_EQ(env_.bytes_written(), 10u);
}

TEST_F(FaultInjectionEnvTest, ResetFaultsDisarmsEverything) {
  auto file = Open(Path("wal"));
  env_.FailNthWrite(1);
  env_.FailNthSync(1);
  env_.FailNthWriteFileAtomic(1);
  env_.SetSpaceLimit(0);
  env_.ResetFaults();
  ASSERT_OK(file->Append("data"));
  ASSERT_OK(file->Sync());
  ASSERT_OK(env_.SyncDir(dir_.path()));
  ASSERT_OK(env_.WriteFileAtomic(Path("CATALOG"), "c"));

  // n == 0 disarms one fault.
  env_.FailNthWrite(1);
  env_.FailNthWrite(0);
  ASSERT_OK(file->Append("more"));
}

// Four threads append, sync and sync the directory at once while one
// injected write failure is armed; TSan checks the locking.
TEST_F(FaultInjectionEnvTest, ConcurrentUseFromFourThreads) {
  constexpr int kThreads = 4;
  constexpr int kAppends = 200;
  constexpr size_t kRecord = 100;
  env_.FailNthWrite(kThreads * kAppends / 2);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string path = Path("wal-" + std::to_string(t));
      std::unique_ptr<WritableFile> file;
      ASSERT_OK(env_.NewWritableFile(path, false, &file));
      const std::string record(kRecord, static_cast<char>('a' + t));
      for (int i = 0; i < kAppends; ++i) {
        if (!file->Append(record).ok()) failures.fetch_add(1);
        if (i % 10 == 9) EXPECT_OK(file->Sync());
        if (i % 50 == 49) EXPECT_OK(env_.SyncDir(dir_.path()));
        (void)env_.writes();
        (void)env_.bytes_written();
      }
      EXPECT_OK(file->Close());
    });
  }
  for (auto& thread : threads) thread.join();

  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(env_.writes(), uint64_t{kThreads * kAppends});
  EXPECT_EQ(env_.syncs(), uint64_t{kThreads * (kAppends / 10 + kAppends / 50)});
  EXPECT_EQ(env_.bytes_written(), (kThreads * kAppends - 1) * kRecord);
  ASSERT_OK(env_.DropUnsyncedData());
  uint64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    uint64_t size = 0;
    ASSERT_OK(env_.GetFileSize(Path("wal-" + std::to_string(t)), &size));
    total += size;
  }
  EXPECT_EQ(total, (kThreads * kAppends - 1) * kRecord) << "everything was synced";
}

}  // namespace
}  // namespace replaydb
