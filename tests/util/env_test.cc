// Env::Default(): the POSIX file system.
#include "replaydb/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace replaydb {
namespace {

using ::testing::HasSubstr;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "replaydb_env_test.XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << "mkdtemp " << templ;
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string Read(const std::string& path) {
    std::string out;
    const Status s = env_->ReadFileToString(path, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  // Runs `child` in a forked process and returns its exit code (-1 if it did
  // not exit normally). The child leaves through _exit, skipping destructors
  // and atexit handlers it shares with this process.
  template <typename F>
  static int RunInChild(F child) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(child());
    if (pid < 0) return -1;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }

  Env* const env_ = Env::Default();
  std::string dir_;
};

TEST_F(EnvTest, DefaultIsOneInstance) {
  EXPECT_EQ(Env::Default(), Env::Default());
}

TEST_F(EnvTest, WriteFileAtomicCreatesAndReplaces) {
  const std::string path = Path("CATALOG");
  EXPECT_FALSE(env_->FileExists(path));
  ASSERT_TRUE(env_->WriteFileAtomic(path, "first version").ok());
  EXPECT_TRUE(env_->FileExists(path));
  EXPECT_EQ(Read(path), "first version");

  ASSERT_TRUE(env_->WriteFileAtomic(path, "v2").ok());
  EXPECT_EQ(Read(path), "v2");
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));

  ASSERT_TRUE(env_->WriteFileAtomic(path, "").ok());
  EXPECT_EQ(Read(path), "");

  // Binary data, larger than one read buffer.
  std::string big(200 * 1024 + 7, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131);
  ASSERT_TRUE(env_->WriteFileAtomic(path, big).ok());
  EXPECT_EQ(Read(path), big);
}

TEST_F(EnvTest, WriteFileAtomicOverwritesStaleTmp) {
  const std::string path = Path("CATALOG");
  ASSERT_TRUE(env_->WriteFileAtomic(path + ".tmp", "left over by a crash, much longer").ok());
  ASSERT_TRUE(env_->WriteFileAtomic(path, "new").ok());
  EXPECT_EQ(Read(path), "new");
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
}

TEST_F(EnvTest, WriteFileAtomicIntoMissingDirectoryIsIOErrorNamingPath) {
  const std::string path = Path("no/such/dir/CATALOG");
  const Status s = env_->WriteFileAtomic(path, "x");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "open " + path + ".tmp: No such file or directory");
}

TEST_F(EnvTest, WriteFileAtomicRenameFailureKeepsTargetAndRemovesTmp) {
  // A non-empty directory cannot be replaced by a file.
  const std::string path = Path("target");
  ASSERT_TRUE(env_->CreateDirIfMissing(path).ok());
  ASSERT_TRUE(env_->WriteFileAtomic(path + "/inner", "keep").ok());

  const Status s = env_->WriteFileAtomic(path, "data");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("rename " + path + ".tmp to " + path + ": "));
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
  EXPECT_EQ(Read(path + "/inner"), "keep");
}

TEST_F(EnvTest, WriteFileAtomicWriteFailureKeepsOldContents) {
  // In a child, limit file size so that write(2) stops short and then fails
  // with EFBIG; the old file must survive and the temporary must go.
  const std::string path = Path("CATALOG");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "old").ok());
  const int code = RunInChild([&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit limit = {10, 10};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    const Status s = Env::Default()->WriteFileAtomic(path, std::string(100, 'x'));
    if (s.code() != Status::Code::kIOError) return 11;
    if (s.message() != "write " + path + ".tmp: File too large") return 12;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(Read(path), "old");
  EXPECT_FALSE(env_->FileExists(path + ".tmp"));
}

TEST_F(EnvTest, ReadFileToStringMissingIsNotFound) {
  std::string out = "unchanged?";
  const Status s = env_->ReadFileToString(Path("absent"), &out);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "open " + Path("absent") + ": No such file or directory");
  EXPECT_TRUE(out.empty());
}

TEST_F(EnvTest, ReadFileToStringOfDirectoryIsIOError) {
  std::string out;
  const Status s = env_->ReadFileToString(dir_, &out);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "read " + dir_ + ": Is a directory");
}

TEST_F(EnvTest, CreateDirIfMissing) {
  const std::string sub = Path("sub");
  ASSERT_TRUE(env_->CreateDirIfMissing(sub).ok());
  EXPECT_TRUE(env_->FileExists(sub));
  EXPECT_TRUE(env_->CreateDirIfMissing(sub).ok()) << "existing directory is fine";

  const Status nested = env_->CreateDirIfMissing(Path("a/b"));
  EXPECT_EQ(nested.code(), Status::Code::kIOError);
  EXPECT_EQ(nested.message(), "mkdir " + Path("a/b") + ": No such file or directory");

  ASSERT_TRUE(env_->WriteFileAtomic(Path("file"), "x").ok());
  const Status on_file = env_->CreateDirIfMissing(Path("file"));
  EXPECT_EQ(on_file.code(), Status::Code::kIOError);
  EXPECT_THAT(on_file.message(), HasSubstr(Path("file")));
}

TEST_F(EnvTest, GetChildren) {
  std::vector<std::string> names = {"stale"};
  ASSERT_TRUE(env_->GetChildren(dir_, &names).ok());
  EXPECT_TRUE(names.empty());

  ASSERT_TRUE(env_->WriteFileAtomic(Path("CATALOG"), "c").ok());
  ASSERT_TRUE(env_->WriteFileAtomic(Path("wal-000001.log"), "w").ok());
  ASSERT_TRUE(env_->CreateDirIfMissing(Path("cold")).ok());
  ASSERT_TRUE(env_->GetChildren(dir_, &names).ok());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"CATALOG", "cold", "wal-000001.log"}));

  const Status s = env_->GetChildren(Path("absent"), &names);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "opendir " + Path("absent") + ": No such file or directory");
  EXPECT_TRUE(names.empty());
}

TEST_F(EnvTest, RemoveFile) {
  const std::string path = Path("x");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "x").ok());
  ASSERT_TRUE(env_->RemoveFile(path).ok());
  EXPECT_FALSE(env_->FileExists(path));

  const Status s = env_->RemoveFile(path);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "unlink " + path + ": No such file or directory");
}

TEST_F(EnvTest, LockIsBusyForASecondOpenerInTheSameProcess) {
  const std::string path = Path("LOCK");
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(path, &lock).ok());
  ASSERT_NE(lock, nullptr);

  std::unique_ptr<FileLock> second;
  const Status s = env_->LockFile(path, &second);
  EXPECT_EQ(s.code(), Status::Code::kBusy) << s.ToString();
  EXPECT_EQ(s.message(), "database lock " + path + " is held by another read-write opener (pid " +
                             std::to_string(::getpid()) + ", this process)");
  EXPECT_EQ(second, nullptr);
}

TEST_F(EnvTest, LockIsBusyForAnotherProcess) {
  const std::string path = Path("LOCK");
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(path, &lock).ok());
  const std::string expected = "database lock " + path +
                               " is held by another read-write opener (pid " +
                               std::to_string(::getpid()) + ")";
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<FileLock> child_lock;
    const Status s = Env::Default()->LockFile(path, &child_lock);
    if (s.ok()) return 1;
    if (s.code() != Status::Code::kBusy) return 2;
    if (s.message() != expected) return 3;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1: child got the lock, 2: not Busy, 3: wrong message";
}

TEST_F(EnvTest, LockIsReleasedOnDestruction) {
  const std::string path = Path("LOCK");
  std::unique_ptr<FileLock> lock;
  ASSERT_TRUE(env_->LockFile(path, &lock).ok());
  lock.reset();

  // Another process can take it now (and its exit releases it again).
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<FileLock> child_lock;
    return Env::Default()->LockFile(path, &child_lock).ok() ? 0 : 1;
  });
  EXPECT_EQ(code, 0);

  // So can this one, again and again.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(env_->LockFile(path, &lock).ok()) << i;
    lock.reset();
  }
}

TEST_F(EnvTest, LockHeldByExitedProcessIsFree) {
  const std::string path = Path("LOCK");
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<FileLock> child_lock;
    if (!Env::Default()->LockFile(path, &child_lock).ok()) return 1;
    (void)child_lock.release();  // leaked: exiting must release it
    return 0;
  });
  ASSERT_EQ(code, 0);
  std::unique_ptr<FileLock> lock;
  EXPECT_TRUE(env_->LockFile(path, &lock).ok());
}

TEST_F(EnvTest, LockInMissingDirectoryIsIOError) {
  std::unique_ptr<FileLock> lock;
  const Status s = env_->LockFile(Path("absent/LOCK"), &lock);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "open " + Path("absent/LOCK") + ": No such file or directory");
}

TEST_F(EnvTest, WritableFileAppendsAndReportsSize) {
  const std::string path = Path("wal-000001.log");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(path, /*truncate=*/false, &file).ok());
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->size(), 0u);
  ASSERT_TRUE(file->Append("hello").ok());
  ASSERT_TRUE(file->Append("").ok());
  ASSERT_TRUE(file->Append(" world").ok());
  EXPECT_EQ(file->size(), 11u);
  ASSERT_TRUE(file->Sync().ok());
  EXPECT_EQ(Read(path), "hello world") << "appended bytes are visible before Close";
  ASSERT_TRUE(file->Close().ok());
  EXPECT_TRUE(file->Close().ok()) << "a second Close is harmless";
  EXPECT_EQ(Read(path), "hello world");

  // Reopened without truncate: appends continue at the end.
  ASSERT_TRUE(env_->NewWritableFile(path, /*truncate=*/false, &file).ok());
  EXPECT_EQ(file->size(), 11u);
  ASSERT_TRUE(file->Append("!").ok());
  EXPECT_EQ(file->size(), 12u);
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(Read(path), "hello world!");

  // Reopened with truncate: empty.
  ASSERT_TRUE(env_->NewWritableFile(path, /*truncate=*/true, &file).ok());
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(Read(path), "");
  ASSERT_TRUE(file->Append("new").ok());
  file.reset();  // the destructor closes without an explicit Close
  EXPECT_EQ(Read(path), "new");
}

TEST_F(EnvTest, WritableFileTruncateThenAppendContinuesAtNewEnd) {
  const std::string path = Path("wal");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(path, false, &file).ok());
  ASSERT_TRUE(file->Append("abcdef").ok());
  ASSERT_TRUE(file->Truncate(3).ok());
  EXPECT_EQ(file->size(), 3u);
  EXPECT_EQ(Read(path), "abc");
  ASSERT_TRUE(file->Append("XY").ok());
  EXPECT_EQ(file->size(), 5u);
  EXPECT_EQ(Read(path), "abcXY");
  ASSERT_TRUE(file->Truncate(0).ok());
  ASSERT_TRUE(file->Append("z").ok());
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(Read(path), "z");
}

TEST_F(EnvTest, WritableFileCallsAfterCloseFailNamingPath) {
  const std::string path = Path("wal");
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(path, false, &file).ok());
  ASSERT_TRUE(file->Append("x").ok());
  ASSERT_TRUE(file->Close().ok());
  Status s = file->Append("y");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "append to closed file " + path);
  s = file->Sync();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "sync of closed file " + path);
  s = file->Truncate(0);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "truncate of closed file " + path);
  EXPECT_EQ(file->size(), 1u);
  EXPECT_EQ(Read(path), "x");
}

// The mapped file (the WAL's segments): same bytes as plain appends, across
// chunk boundaries; a zero-filled preallocated tail on disk until Close; cut
// bytes read as zeros; Close trims to size().
TEST_F(EnvTest, MappedWritableFileAppendsAcrossChunksAndTrimsOnClose) {
  const std::string path = Path("segment");
  std::random_device seed;
  std::mt19937_64 rng(seed());
  std::string want;
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewMappedWritableFile(path, &file).ok());
  EXPECT_EQ(file->size(), 0u);
  // Random-sized appends up to ~9 MiB: at least two 4 MiB chunk boundaries,
  // some appends straddling one; small ones (copied into the mapping) mixed
  // with large ones (written with pwrite).
  // Every third call is an AppendV of up to five pieces (some empty), small
  // in all (copied piece by piece) or large (one pwritev).
  while (want.size() < (9u << 20)) {
    const auto random_piece = [&] {
      std::string piece(rng() % 2 ? rng() % 4200 : rng() % 300000, '\0');
      for (char& c : piece) c = static_cast<char>(rng() | 1);  // never zero
      if (rng() % 8 == 0) piece.clear();
      return piece;
    };
    if (rng() % 3 == 0) {
      std::vector<std::string> pieces(1 + rng() % 5);
      for (std::string& piece : pieces) piece = random_piece().substr(0, 1 + rng() % 6000);
      const std::vector<std::string_view> views(pieces.begin(), pieces.end());
      ASSERT_TRUE(file->AppendV(views).ok());
      for (const std::string& piece : pieces) want += piece;
    } else {
      const std::string piece = random_piece();
      ASSERT_TRUE(file->Append(piece).ok());
      want += piece;
    }
    ASSERT_EQ(file->size(), want.size());
  }
  ASSERT_TRUE(file->Sync().ok());
  std::string on_disk = Read(path);
  ASSERT_GE(on_disk.size(), want.size());
  EXPECT_TRUE(on_disk.compare(0, want.size(), want) == 0) << "appended bytes are in the file";
  EXPECT_TRUE(std::all_of(on_disk.begin() + static_cast<std::ptrdiff_t>(want.size()),
                          on_disk.end(), [](char c) { return c == 0; }))
      << "the preallocated tail reads as zeros";

  // Cut back within the mapped chunk, then below it: the cut bytes are zero
  // (or gone), and appending continues at the new end.
  const uint64_t cut1 = want.size() - 1000;
  ASSERT_TRUE(file->Truncate(cut1).ok());
  want.resize(cut1);
  on_disk = Read(path);
  EXPECT_TRUE(std::all_of(on_disk.begin() + static_cast<std::ptrdiff_t>(cut1), on_disk.end(),
                          [](char c) { return c == 0; }));
  const uint64_t cut2 = 5000;
  ASSERT_TRUE(file->Truncate(cut2).ok());
  want.resize(cut2);
  ASSERT_TRUE(file->Append("tail").ok());
  want += "tail";
  const Status too_far = file->Truncate(want.size() + 1);
  EXPECT_EQ(too_far.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(too_far.message(), HasSubstr(path));
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(Read(path), want) << "Close trims the preallocated tail";
}

// A process killed with the file open leaves its appended bytes followed by
// zeros, never less than it appended.
TEST_F(EnvTest, MappedWritableFileSurvivesAKilledProcess) {
  const std::string path = Path("segment");
  const std::string data(10000, 'q');
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<WritableFile> file;
    if (!Env::Default()->NewMappedWritableFile(path, &file).ok()) return 10;
    if (!file->Append(data).ok()) return 11;
    ::raise(SIGKILL);
    return 12;
  });
  EXPECT_EQ(code, -1) << "the child dies by SIGKILL";
  const std::string on_disk = Read(path);
  ASSERT_GT(on_disk.size(), data.size());
  EXPECT_EQ(on_disk.substr(0, data.size()), data);
  EXPECT_TRUE(std::all_of(on_disk.begin() + static_cast<std::ptrdiff_t>(data.size()),
                          on_disk.end(), [](char c) { return c == 0; }));
}

// A file-size limit below the next chunk: Append fails with the system's
// error naming the file, nothing is signalled, and what fitted stays.
TEST_F(EnvTest, MappedWritableFileReportsAFailedPreallocation) {
  const std::string path = Path("segment");
  const int code = RunInChild([&]() -> int {
    ::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit limit = {1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    std::unique_ptr<WritableFile> file;
    if (!Env::Default()->NewMappedWritableFile(path, &file).ok()) return 11;
    const Status s = file->Append("x");
    if (s.code() != Status::Code::kIOError) return 12;
    if (s.message() != "fallocate " + path + ": File too large") return 13;
    if (file->size() != 0) return 14;
    if (!file->Close().ok()) return 15;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(Read(path), "");
}

// In a child process: limits file sizes to a 4 MiB chunk and 8 KiB, opens a
// mapped file at `path` and fills it with 'a's to within 1000-2000 bytes of
// the chunk's end, so that the next append of a few thousand bytes needs a
// second chunk that cannot be preallocated. 0, or the child's exit code.
constexpr uint64_t kMappedChunk = uint64_t{4} << 20;
int OpenNearlyFullChunk(const std::string& path, std::unique_ptr<WritableFile>* file) {
  ::signal(SIGXFSZ, SIG_IGN);
  const struct rlimit limit = {kMappedChunk + 8192, kMappedChunk + 8192};
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
  if (!Env::Default()->NewMappedWritableFile(path, file).ok()) return 11;
  const std::string piece(1000, 'a');
  while ((*file)->size() + piece.size() <= kMappedChunk - 1000) {
    if (!(*file)->Append(piece).ok()) return 12;
  }
  return 0;
}

// An append that straddles a chunk whose preallocation fails: the prefix that
// landed in the mapped chunk is zeroed again and size() is unchanged, as
// env.h promises, so the writer can cut back and go on.
TEST_F(EnvTest, MappedWritableFileFailedAppendLeavesNothingPastSize) {
  const std::string path = Path("segment");
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<WritableFile> file;
    if (const int failed = OpenNearlyFullChunk(path, &file); failed != 0) return failed;
    const uint64_t before = file->size();
    const Status s = file->Append(std::string(3000, 'b'));  // crosses into chunk 2
    if (s.code() != Status::Code::kIOError) return 13;
    if (s.message() != "fallocate " + path + ": File too large") return 14;
    if (file->size() != before) return 15;
    std::string open_bytes;  // before Close: preallocated tail included
    if (!Env::Default()->ReadFileToString(path, &open_bytes).ok()) return 16;
    if (open_bytes.find('b') != std::string::npos) return 17;  // the prefix was zeroed
    if (!file->Close().ok()) return 18;
    return 0;
  });
  ASSERT_EQ(code, 0);
  const std::string bytes = Read(path);
  EXPECT_GT(bytes.size(), 0u);
  EXPECT_EQ(bytes.find_first_not_of('a'), std::string::npos) << "no 'b' left behind";
}

// The same for an AppendV of pieces, small and large, that crosses into a
// chunk whose preallocation fails.
TEST_F(EnvTest, MappedWritableFileFailedAppendVLeavesNothingPastSize) {
  const std::string path = Path("segment");
  const int code = RunInChild([&]() -> int {
    std::unique_ptr<WritableFile> file;
    if (const int failed = OpenNearlyFullChunk(path, &file); failed != 0) return failed;
    for (const size_t big : {size_t{500}, size_t{20000}}) {  // copied; pwritev
      const uint64_t before = file->size();
      const std::string b1(700, 'b');
      const std::string b2(big, 'b');
      const std::string_view pieces[] = {b1, "", b2, b1};
      const Status s = file->AppendV(pieces);
      if (s.code() != Status::Code::kIOError) return 13;
      if (s.message() != "fallocate " + path + ": File too large") return 14;
      if (file->size() != before) return 15;
      std::string open_bytes;
      if (!Env::Default()->ReadFileToString(path, &open_bytes).ok()) return 16;
      if (open_bytes.find('b') != std::string::npos) return 17;
    }
    if (!file->Close().ok()) return 18;
    return 0;
  });
  ASSERT_EQ(code, 0);
  const std::string bytes = Read(path);
  EXPECT_GT(bytes.size(), 0u);
  EXPECT_EQ(bytes.find_first_not_of('a'), std::string::npos) << "no 'b' left behind";
}

TEST_F(EnvTest, NewWritableFileInMissingDirectoryIsIOError) {
  const std::string path = Path("absent/wal");
  std::unique_ptr<WritableFile> file;
  const Status s = env_->NewWritableFile(path, false, &file);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "open " + path + ": No such file or directory");
  EXPECT_EQ(file, nullptr);
}

TEST_F(EnvTest, SequentialFileReadsBackInChunks) {
  const std::string path = Path("data");
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 251);
  ASSERT_TRUE(env_->WriteFileAtomic(path, data).ok());

  std::unique_ptr<SequentialFile> file;
  ASSERT_TRUE(env_->NewSequentialFile(path, &file).ok());
  ASSERT_NE(file, nullptr);
  std::vector<char> scratch(4096);
  std::string back;
  std::vector<size_t> chunks;
  while (true) {
    std::string_view got;
    ASSERT_TRUE(file->Read(scratch.size(), &got, scratch.data()).ok());
    if (got.empty()) break;
    chunks.push_back(got.size());
    back.append(got);
  }
  EXPECT_EQ(chunks, (std::vector<size_t>{4096, 4096, 1808}));
  EXPECT_EQ(back, data);

  // At the end, reads keep returning nothing.
  std::string_view got = "stale";
  ASSERT_TRUE(file->Read(1, &got, scratch.data()).ok());
  EXPECT_TRUE(got.empty());
}

TEST_F(EnvTest, NewSequentialFileMissingIsNotFound) {
  const std::string path = Path("absent");
  std::unique_ptr<SequentialFile> file;
  const Status s = env_->NewSequentialFile(path, &file);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "open " + path + ": No such file or directory");
  EXPECT_EQ(file, nullptr);
}

TEST_F(EnvTest, GetFileSize) {
  const std::string path = Path("f");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "12345").ok());
  uint64_t size = 0;
  ASSERT_TRUE(env_->GetFileSize(path, &size).ok());
  EXPECT_EQ(size, 5u);
  ASSERT_TRUE(env_->WriteFileAtomic(path, "").ok());
  ASSERT_TRUE(env_->GetFileSize(path, &size).ok());
  EXPECT_EQ(size, 0u);

  const Status s = env_->GetFileSize(Path("absent"), &size);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "stat " + Path("absent") + ": No such file or directory");
}

TEST_F(EnvTest, TruncateFile) {
  const std::string path = Path("f");
  ASSERT_TRUE(env_->WriteFileAtomic(path, "abcdef").ok());
  ASSERT_TRUE(env_->TruncateFile(path, 2).ok());
  EXPECT_EQ(Read(path), "ab");
  ASSERT_TRUE(env_->TruncateFile(path, 0).ok());
  EXPECT_EQ(Read(path), "");

  const Status s = env_->TruncateFile(Path("absent"), 0);
  EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message(), "truncate " + Path("absent") + ": No such file or directory");
}

TEST_F(EnvTest, SyncDir) {
  std::unique_ptr<WritableFile> file;
  ASSERT_TRUE(env_->NewWritableFile(Path("new"), false, &file).ok());
  EXPECT_TRUE(env_->SyncDir(dir_).ok());

  const Status s = env_->SyncDir(Path("absent"));
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(s.message(), "open " + Path("absent") + ": No such file or directory");
}

}  // namespace
}  // namespace replaydb
