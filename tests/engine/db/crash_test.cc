// Crash test: a child process writes with WalSyncMode::kAlways and reports
// every acknowledged step on a pipe; the parent kills it with SIGKILL at a
// random moment, reopens the database and checks that every acknowledged
// step is there, byte-identical. 20 iterations; REPLAYDB_CRASH_ITERATIONS
// sets another count (the long mode is 500).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "tests/test_util.h"

namespace replaydb {
namespace {

using testing_util::TempDir;
using testing_util::TestSeed;

constexpr const char* kChildEnv = "REPLAYDB_CRASH_CHILD_DIR";
constexpr size_t kStepBytes = 48;

TableSpec CrashSpec() {
  TableSpec spec;
  spec.name = "crash";
  spec.columns = {{"x", DType::kU8, Shape{kStepBytes}}};
  spec.capacity_steps = 1 << 20;
  spec.block_steps = 32;
  return spec;
}

// The bytes of step `step` of trajectory `id`: the parent recomputes them.
std::vector<uint8_t> StepContent(uint64_t id, int64_t step) {
  std::mt19937_64 rng(id * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(step));
  std::vector<uint8_t> out(kStepBytes);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

DBOptions CrashOptions() {
  DBOptions o;
  o.wal.sync = WalSyncMode::kAlways;
  o.checkpoint.every_wal_bytes = 64 << 10;  // checkpoints happen during the run too
  return o;
}

// Runs in the child (started by the parent with kChildEnv set): appends
// steps forever, writing "id step\n" to stdout after each acknowledged one.
TEST(CrashTest, ChildWriter) {
  const char* dir = std::getenv(kChildEnv);
  if (dir == nullptr) GTEST_SKIP() << "runs only as the crash test's child process";
  auto db = DB::Open(CrashOptions(), dir);
  if (!db.ok()) {
    std::fprintf(stderr, "child: %s\n", db.status().ToString().c_str());
    std::_Exit(2);
  }
  auto table = (*db)->GetTable("crash");
  if (!table.ok()) table = (*db)->CreateTable(CrashSpec());
  if (!table.ok()) std::_Exit(3);
  std::mt19937_64 rng(std::random_device{}());
  while (true) {
    auto writer = (*table)->NewWriter();
    if (!writer.ok()) std::_Exit(4);
    const int steps = 1 + static_cast<int>(rng() % 50);
    for (int s = 0; s < steps; ++s) {
      // The first Append assigns the id (0 before it), so content comes
      // from the id known before the append, reported with it.
      const uint64_t id = (*writer)->trajectory_id();
      std::vector<uint8_t> bytes = StepContent(id, s);
      ConstTensor t{DType::kU8, Shape{kStepBytes}, bytes.data(), bytes.size()};
      if (!(*writer)->Append({&t, 1}).ok()) std::_Exit(5);
      char line[64];
      const int n = std::snprintf(line, sizeof(line), "%llu %d %llu\n",
                                  static_cast<unsigned long long>((*writer)->trajectory_id()), s,
                                  static_cast<unsigned long long>(id));
      if (::write(1, line, static_cast<size_t>(n)) != n) std::_Exit(6);
    }
    if (rng() % 2 == 0 && !(*writer)->End(EndReason::kTerminal).ok()) std::_Exit(7);
  }
}

TEST(CrashTest, KilledWriterLosesNothingAcknowledged) {
  const char* env_iterations = std::getenv("REPLAYDB_CRASH_ITERATIONS");
  const int iterations = env_iterations != nullptr ? std::atoi(env_iterations) : 20;
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  // trajectory id -> (step -> the id its content was derived from)
  std::map<uint64_t, std::map<int64_t, uint64_t>> acked;
  for (int it = 0; it < iterations; ++it) {
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(pipefd[1], 1);
      ::close(pipefd[0]);
      ::close(pipefd[1]);
      ::setenv(kChildEnv, dir.path().c_str(), 1);
      const char* argv[] = {"/proc/self/exe", "--gtest_filter=CrashTest.ChildWriter",
                            "--gtest_brief=1", nullptr};
      ::execv("/proc/self/exe", const_cast<char* const*>(argv));
      std::_Exit(127);
    }
    ::close(pipefd[1]);
    // Every other iteration waits for a first acknowledged step (bounded),
    // so that a loaded machine (a sanitizer build, other tests) still kills
    // writers that have written; the others may kill one inside Open.
    if (it % 2 == 1) {
      pollfd p{pipefd[0], POLLIN, 0};
      (void)::poll(&p, 1, 30000);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 300));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with status " << WEXITSTATUS(status);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(pipefd[0]);
    // Complete lines are acknowledged steps; a cut last line is not.
    size_t pos = 0;
    while (true) {
      const size_t nl = out.find('\n', pos);
      if (nl == std::string::npos) break;
      unsigned long long id = 0, from = 0;
      long long step = 0;
      ASSERT_EQ(std::sscanf(out.c_str() + pos, "%llu %lld %llu", &id, &step, &from), 3);
      acked[id][step] = from;
      pos = nl + 1;
    }

    auto db = DB::Open(CrashOptions(), dir.path());
    ASSERT_TRUE(db.ok()) << "iteration " << it << ": " << db.status().ToString();
    auto table = (*db)->GetTable("crash");
    if (acked.empty()) continue;
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    std::vector<ItemKey> keys;
    std::vector<std::vector<uint8_t>> expected;
    for (const auto& [id, steps] : acked) {
      for (const auto& [step, from] : steps) {
        keys.push_back(MakeItemKey(id, step));
        expected.push_back(StepContent(from, step));
      }
    }
    SampleBatch batch;
    ASSERT_TRUE((*table)->Lookup(keys, &batch).ok());
    const auto* data = reinterpret_cast<const uint8_t*>(batch.columns[0].data());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(batch.mask[i], 1) << "iteration " << it << ": acknowledged step of trajectory "
                                  << ItemKeyTrajectory(keys[i]) << " is missing";
      ASSERT_EQ(std::memcmp(data + i * kStepBytes, expected[i].data(), kStepBytes), 0)
          << "iteration " << it << ": acknowledged step of trajectory "
          << ItemKeyTrajectory(keys[i]) << " differs";
    }
  }
  EXPECT_FALSE(acked.empty());
}

}  // namespace
}  // namespace replaydb
