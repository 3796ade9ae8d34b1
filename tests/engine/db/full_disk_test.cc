// A disk that fills while the database writes: checkpoints, compactions,
// spills and the background checkpoint loop meet a full disk (the
// fault-injecting Env's space limit) at random points. Each call that hits
// it returns IOError naming the file, the process never aborts, and once
// there is room again the database reopens with every acknowledged step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing_util::FaultInjectionEnv;
using testing_util::ManualCheckpoints;
using testing_util::TempDir;
using testing_util::TestSeed;

TableSpec Spec(std::mt19937_64& rng, bool spill = false) {
  TableSpec spec;
  spec.name = "t";
  spec.columns = {{"obs", DType::kF32, Shape{4}},
                  {"raw", DType::kU8, Shape{static_cast<int64_t>(16 + rng() % 200)}}};
  spec.block_steps = 8;
  spec.capacity_steps = spill ? 8 * 8 : 1 << 14;
  spec.spill = spill;
  return spec;
}

// Per trajectory id, the bytes of each acknowledged step (columns in order).
using Model = std::map<uint64_t, std::vector<std::string>>;

std::string StepBytes(const testing_util::StepData& s) {
  std::string out;
  for (const auto& c : s.columns) out.append(reinterpret_cast<const char*>(c.data()), c.size());
  return out;
}

// Writes `n` ended trajectories of 1..20 steps; every acknowledged step goes
// into `acked`. Returns the first error (the trajectory it hit keeps the
// steps acknowledged before it).
Status WriteSome(Table& table, std::mt19937_64& rng, int n, Model* acked, WriterOptions wo = {}) {
  const TableSpec spec = table.spec();
  for (int i = 0; i < n; ++i) {
    auto writer = table.NewWriter(wo);
    if (!writer.ok()) return writer.status();
    const int steps = 1 + static_cast<int>(rng() % 20);
    for (int s = 0; s < steps; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng);
      REPLAYDB_RETURN_IF_ERROR((*writer)->Append(step.tensors));
      (*acked)[(*writer)->trajectory_id()].push_back(StepBytes(step));
    }
    REPLAYDB_RETURN_IF_ERROR((*writer)->End(EndReason::kTerminal));
  }
  return Status::OK();
}

// Every acknowledged step of `model` is in table "t" (hot or cold),
// byte-identical, and no trajectory holds steps that were never written.
void VerifyTable(Table& table, const Model& model) {
  const std::vector<TrajectoryInfo> listed = table.ListTrajectories();
  std::map<uint64_t, TrajectoryInfo> by_id;
  for (const TrajectoryInfo& t : listed) by_id[t.id] = t;
  for (const auto& [id, steps] : model) {
    if (steps.empty()) continue;
    auto it = by_id.find(id);
    ASSERT_NE(it, by_id.end()) << "trajectory " << id << " (" << steps.size()
                               << " acknowledged steps) is missing";
    ASSERT_GE(it->second.length, static_cast<int64_t>(steps.size())) << "trajectory " << id;
    TrajectorySteps read;
    ASSERT_OK(table.ReadTrajectory(id, 0, static_cast<int64_t>(steps.size()), &read));
    for (size_t s = 0; s < steps.size(); ++s) {
      std::string got;
      for (const Tensor& col : read.columns) {
        const size_t per = col.size_bytes() / steps.size();
        got.append(reinterpret_cast<const char*>(col.data()) + s * per, per);
      }
      ASSERT_EQ(got, steps[s]) << "trajectory " << id << " step " << s << " differs";
    }
  }
}

// The message of an error a full disk caused: names the space limit and a
// path inside the database.
void ExpectFullDiskError(const Status& s, const std::string& db_path) {
  EXPECT_THAT(s.message(), HasSubstr("No space left on device")) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(db_path + "/")) << s.ToString();
}

// Room for 0 bytes to 2^max_log2 - 1 more, log-uniform, so that small and
// large writes both meet the limit.
uint64_t RandomRoom(std::mt19937_64& rng, int max_log2) {
  return rng() % (uint64_t{1} << (rng() % static_cast<uint64_t>(max_log2 + 1)));
}

// Checkpoints meet the full disk at every kind of point: the log's roll,
// RocksDB's SST, MANIFEST, CURRENT and info LOG writes, and those of its
// background compactions. Each fails with IOError naming the file, or
// succeeds when it fits; none aborts, and the one after it works: the log
// keeps its current segment when the next cannot be made, and RocksDB,
// which refuses writes after a failed flush or compaction, is reopened.
TEST(FullDiskTest, CheckpointsFailingAtRandomPointsReturnIOErrorAndLoseNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  Model acked;
  int failed = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(rng)));
    for (int round = 0; round < 15; ++round) {
      ASSERT_OK(WriteSome(*table, rng, 1 + static_cast<int>(rng() % 4), &acked));
      // Room for up to 64 KiB more: a checkpoint of this much writes a few
      // KiB to some tens (the log's next segment, an SST, the MANIFEST,
      // CURRENT, the info LOG).
      env.SetSpaceLimit(env.bytes_written() + RandomRoom(rng, 16));
      const Status s = db->Checkpoint();
      env.ClearSpaceLimit();
      if (s.ok()) continue;
      ++failed;
      EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
      ExpectFullDiskError(s, dir.path());
      // Room again: the next checkpoint works, and writers never stopped.
      ASSERT_OK(WriteSome(*table, rng, 1, &acked));
      ASSERT_OK(db->Checkpoint());
    }
    ASSERT_OK(db->Checkpoint());
    ASSERT_OK(WriteSome(*table, rng, 3, &acked));
  }
  EXPECT_GT(failed, 0) << "no checkpoint met the full disk";
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  VerifyTable(*table, acked);
}

// A compaction rewrites every SST of the cold store: the full disk fails it
// with IOError naming the file; once there is room, checkpoints and
// compactions work again (RocksDB, which stops writing after a failed
// compaction, is reopened).
TEST(FullDiskTest, CompactionsFailingAtRandomPointsReturnIOErrorAndLoseNothing) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o = ManualCheckpoints();
  o.env = &env;
  Model acked;
  int failed = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(rng)));
    for (int round = 0; round < 6; ++round) {
      for (int i = 0; i < 3; ++i) {  // a few SSTs to rewrite
        ASSERT_OK(WriteSome(*table, rng, 3, &acked));
        ASSERT_OK(db->Checkpoint());
      }
      env.SetSpaceLimit(env.bytes_written() + RandomRoom(rng, 18));
      const Status s = db->Compact();
      env.ClearSpaceLimit();
      if (s.ok()) continue;
      ++failed;
      EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
      EXPECT_THAT(s.message(), HasSubstr("cold store " + dir.Sub("cold")));
      ExpectFullDiskError(s, dir.path());
      ASSERT_OK(WriteSome(*table, rng, 1, &acked));
      ASSERT_OK(db->Checkpoint());
      ASSERT_OK(db->Compact());
    }
    ASSERT_OK(WriteSome(*table, rng, 2, &acked));
  }
  EXPECT_GT(failed, 0) << "no compaction met the full disk";
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  VerifyTable(*table, acked);
}

// Everything that writes in the background meets the full disk: spills of
// evicted trajectories (through RocksDB's own log), the checkpoint loop
// (every 8 KiB of log), and the log's own segments. Writers see IOError
// naming the log, or DeadlineExceeded naming the failed spill (or, when a
// spill is merely slow, the spill it waited for); the
// background work retries, and once there is room it catches up: spills
// land, a checkpoint succeeds, and the reopened database has every
// acknowledged step, hot or cold.
TEST(FullDiskTest, SpillsAndTheCheckpointLoopRetryUntilThereIsRoom) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  DBOptions o;
  o.env = &env;
  o.checkpoint.every_wal_bytes = 8 << 10;
  Model acked;
  int writer_errors = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(rng, /*spill=*/true)));
    WriterOptions wo;
    wo.timeout = std::chrono::milliseconds(200);
    // With room on the disk a write may still wait for spills to land: a
    // loaded machine (the tests run in parallel) takes longer than 200 ms.
    WriterOptions roomy;
    roomy.timeout = std::chrono::seconds(30);
    for (int round = 0; round < 8; ++round) {
      ASSERT_OK(WriteSome(*table, rng, 6, &acked, roomy));  // evicts (spills) some
      env.SetSpaceLimit(env.bytes_written() + RandomRoom(rng, 17));
      const Status s = WriteSome(*table, rng, 12, &acked, wo);
      // Let the background work meet the full disk too.
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));
      env.ClearSpaceLimit();
      if (!s.ok()) {
        if (s.code() == Status::Code::kDeadlineExceeded &&
            s.message().find("the last spill failed") == std::string::npos) {
          // A spill still being written (a reopen of the cold store after
          // the disk filled, a loaded machine) outlasted the 200 ms: the
          // writer says what it waited for, and nothing failed.
          EXPECT_THAT(s.message(), HasSubstr("are being spilled to the cold tier")) << s.ToString();
        } else {
          ++writer_errors;
          if (s.code() != Status::Code::kDeadlineExceeded) {
            EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
            EXPECT_THAT(s.message(), HasSubstr(dir.Sub("wal") + "/")) << s.ToString();
          }
          EXPECT_THAT(s.message(), HasSubstr("No space left on device")) << s.ToString();
        }
      }
      // The spills land and the checkpoint loop catches up, unasked.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      ASSERT_OK_AND_ASSIGN(const WalInfo before, db->Wal());
      while (true) {
        ASSERT_OK_AND_ASSIGN(const WalInfo now, db->Wal());
        if (table->Info().spill_queue == 0 &&
            (now.checkpoint_sequence > before.checkpoint_sequence ||
             now.bytes_since_checkpoint < o.checkpoint.every_wal_bytes)) {
          break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          // Why: what a checkpoint asked for now answers.
          FAIL() << "spills or checkpoints did not resume; spill queue "
                 << table->Info().spill_queue << ", log bytes since the checkpoint "
                 << now.bytes_since_checkpoint << ", a checkpoint now: "
                 << db->Checkpoint().ToString();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    EXPECT_GT(table->Info().spilled_trajectories, 0);
  }
  EXPECT_GT(writer_errors, 0) << "no writer met the full disk";
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(ManualCheckpoints(), dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  VerifyTable(*table, acked);
}

// A real file system that refuses writes: RLIMIT_FSIZE (no root needed, and
// RocksDB's own files, its info LOG among them, meet it too) makes every
// write past the limit fail with EFBIG, as a full disk fails it with ENOSPC.
// The child process below opens the database, then checkpoints with the limit
// set below the size of any SST and of the cold store's LOG; it must see errors, never
// abort (RocksDB's own info log aborted the process on its next line after a
// failed write: an assertion in its WritableFileWriter).
constexpr char kFileSizeChildEnv[] = "REPLAYDB_FULL_DISK_CHILD_DIR";

TEST(FullDiskTest, ChildUnderAFileSizeLimit) {
  const char* dir = std::getenv(kFileSizeChildEnv);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the file-size-limit test's child process";
  std::mt19937_64 rng(1);
  DBOptions o = ManualCheckpoints();
  o.wal.enabled = false;  // the log preallocates 4 MiB chunks: past any small limit
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir));
  ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(Spec(rng)));
  Model acked;
  ASSERT_OK(WriteSome(*table, rng, 10, &acked));
  ASSERT_OK(db->Checkpoint());
  std::error_code ec;
  const uint64_t log_size = std::filesystem::file_size(std::string(dir) + "/cold/LOG", ec);
  ASSERT_FALSE(ec) << ec.message();
  ::signal(SIGXFSZ, SIG_IGN);
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &limit), 0);
  const rlim_t hard = limit.rlim_max;
  // 512 bytes: below every SST a flush writes (a properties block alone is
  // some 850 bytes), so the first checkpoint's flush fails whatever the
  // sizes; and below the info LOG, whose next lines fail too. (Half the
  // LOG's size was sometimes above the SSTs of these small checkpoints:
  // nothing failed.)
  constexpr rlim_t kLimit = 512;
  ASSERT_GT(log_size, kLimit);
  limit.rlim_cur = kLimit;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  for (int round = 0; round < 4; ++round) {
    ASSERT_OK(WriteSome(*table, rng, 5, &acked));
    const Status s = db->Checkpoint();
    std::printf("checkpoint: %s\n", s.ToString().c_str());
  }
  limit.rlim_cur = hard;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const Status s = db->Checkpoint();
  int64_t steps = 0;
  for (const auto& [id, t] : acked) steps += static_cast<int64_t>(t.size());
  std::printf("after: %s, %lld steps\n", s.ToString().c_str(), static_cast<long long>(steps));
  std::fflush(stdout);
}

TEST(FullDiskTest, WritesFailingOnARealFileSystemDoNotAbort) {
  TempDir dir;
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    ::setenv(kFileSizeChildEnv, dir.path().c_str(), 1);
    const char* argv[] = {"/proc/self/exe", "--gtest_filter=FullDiskTest.ChildUnderAFileSizeLimit",
                          "--gtest_brief=1", nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    std::_Exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << WTERMSIG(status)
                                 << "; its output:\n"
                                 << out;
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  // The limit made checkpoints fail with the file system's error, naming the
  // cold store; once lifted, the next one worked.
  EXPECT_THAT(out, HasSubstr("checkpoint: IOError: checkpoint of " + dir.path() + ": cold store " +
                             dir.Sub("cold") + ": flush: IO error: write " + dir.Sub("cold") + "/"))
      << out;
  EXPECT_THAT(out, HasSubstr("File too large")) << out;
  const size_t after = out.find("after: OK, ");
  ASSERT_NE(after, std::string::npos) << out;
  const long long total = std::atoll(out.c_str() + after + std::strlen("after: OK, "));
  // RocksDB's info log lost the lines it could not write, and says so.
  std::string log;
  ASSERT_OK(Env::Default()->ReadFileToString(dir.Sub("cold/LOG"), &log));
  EXPECT_THAT(log, HasSubstr("lines of this log were dropped; the first failure: "));
  EXPECT_THAT(log, HasSubstr("File too large"));
  DBOptions o = ManualCheckpoints();
  o.wal.enabled = false;
  ASSERT_OK_AND_ASSIGN(auto db, DB::Open(o, dir.path()));
  ASSERT_OK_AND_ASSIGN(auto table, db->GetTable("t"));
  EXPECT_EQ(table->Info().num_steps, total);
}

}  // namespace
}  // namespace replaydb
