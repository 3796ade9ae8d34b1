// Helpers shared by the tests: temporary directories, Status assertions,
// random step data.
#ifndef REPLAYDB_TESTS_TEST_UTIL_H_
#define REPLAYDB_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replaydb/db.h"
#include "replaydb/status.h"

#define ASSERT_OK(expr)                                \
  do {                                                 \
    const ::replaydb::Status _s = (expr);              \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                \
  do {                                                 \
    const ::replaydb::Status _s = (expr);              \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)

// Declares or assigns `lhs` from the value of a Result that must be OK.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                        \
  auto REPLAYDB_CONCAT_(_r_, __LINE__) = (rexpr);                               \
  ASSERT_TRUE(REPLAYDB_CONCAT_(_r_, __LINE__).ok())                             \
      << #rexpr << ": " << REPLAYDB_CONCAT_(_r_, __LINE__).status().ToString(); \
  lhs = std::move(REPLAYDB_CONCAT_(_r_, __LINE__)).value()

namespace replaydb::testing_util {

// A fresh directory under TMPDIR, removed with everything in it on
// destruction.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/replaydb_test_XXXXXX";
    char* made = mkdtemp(tmpl.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A seed for this test, printed so a failure can be replayed with
// REPLAYDB_TEST_SEED.
inline uint64_t TestSeed() {
  if (const char* env = std::getenv("REPLAYDB_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  const uint64_t seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  std::cerr << "[ seed     ] REPLAYDB_TEST_SEED=" << seed << "\n";
  return seed;
}

// One step's bytes for every column of a spec, filled with random bytes.
struct StepData {
  std::vector<std::vector<std::byte>> columns;
  std::vector<ConstTensor> tensors;
};

inline StepData RandomStep(const TableSpec& spec, std::mt19937_64& rng) {
  StepData step;
  step.columns.resize(spec.columns.size());
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    const ColumnSpec& col = spec.columns[c];
    auto& bytes = step.columns[c];
    bytes.resize(col.step_bytes());
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    if (col.dtype == DType::kBool) {
      for (auto& b : bytes) b = static_cast<std::byte>(static_cast<uint8_t>(b) & 1);
    }
    step.tensors.push_back({col.dtype, col.shape, bytes.data(), bytes.size()});
  }
  return step;
}

// Everything a table holds, as text: each trajectory's state and bytes,
// each item's priority.
inline std::string TableContents(Table& table) {
  std::string out;
  std::vector<TrajectoryInfo> infos;
  Status s = table.ListTrajectories({}, &infos);
  if (!s.ok()) return "ListTrajectories: " + s.ToString();
  for (const TrajectoryInfo& t : infos) {
    out += "trajectory " + std::to_string(t.id) + " length " + std::to_string(t.length) +
           " ended " + std::to_string(t.ended) + " reason " +
           std::to_string(static_cast<int>(t.end_reason)) + " items " +
           std::to_string(t.live_items) + "\n";
    TrajectorySteps steps;
    s = table.ReadTrajectory(t.id, 0, t.length, &steps);
    if (!s.ok()) return out + "ReadTrajectory: " + s.ToString();
    for (const Tensor& c : steps.columns) {
      out.append(reinterpret_cast<const char*>(c.data()), c.size_bytes());
    }
    for (double p : steps.step_priorities) out += " " + std::to_string(p);
    out += "\n";
  }
  std::vector<ItemKey> keys;
  std::vector<double> priorities;
  s = table.ItemPriorities(&keys, &priorities);
  if (!s.ok()) return out + "ItemPriorities: " + s.ToString();
  for (size_t i = 0; i < keys.size(); ++i) {
    out += "item " + std::to_string(keys[i]) + " " + std::to_string(priorities[i]) + "\n";
  }
  return out;
}

// Upper-tail standard normal quantile: z with P(Z > z) = p, by bisection on
// erfc (accurate to ~1e-12, no table).
inline double NormalUpperQuantile(double p) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return (lo + hi) / 2;
}

// Upper critical value of a chi-square distribution with `dof` degrees of
// freedom, `z` standard deviations out (Wilson-Hilferty). z = 5.3 is about
// p = 6e-8: the suite's ~75 such checks on fresh random seeds, in three
// builds per CI run, then fail by chance about once in 70,000 runs.
inline double ChiSquareCritical(double dof, double z = 5.3) {
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - a + z * std::sqrt(a), 3);
}

// The chi-square statistic a fair draw exceeds with probability p, for `dof`
// degrees of freedom.
inline double ChiSquareCriticalAt(double dof, double p) {
  return ChiSquareCritical(dof, NormalUpperQuantile(p));
}

// The chi-square statistic of `counts` (draws per outcome: a range of
// numbers, or a map to them) against `expected` draws for each.
template <typename Counts>
double UniformChiSquare(const Counts& counts, double expected) {
  double chi2 = 0;
  for (const auto& entry : counts) {
    double count;
    if constexpr (requires { entry.second; }) {
      count = static_cast<double>(entry.second);
    } else {
      count = static_cast<double>(entry);
    }
    chi2 += (count - expected) * (count - expected) / expected;
  }
  return chi2;
}

// Options that take checkpoints only when asked (DB::Checkpoint): nothing
// automatic, not even on close, so a reopen replays the log.
inline DBOptions ManualCheckpoints() {
  DBOptions o;
  o.checkpoint.on_close = false;
  o.checkpoint.every_wal_bytes = 0;
  o.checkpoint.every = std::chrono::seconds(0);
  return o;
}

// What `command` (a shell line) prints on stdout.
inline std::string ShellOutput(const std::string& command) {
  std::string out;
  FILE* f = ::popen(command.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

inline std::unique_ptr<DB> OpenDB(const std::string& path) {
  auto db = DB::Open({}, path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

// db->CreateTable(spec), or null after a failure naming its status.
inline std::shared_ptr<Table> CreateTable(DB* db, const TableSpec& spec) {
  auto t = db->CreateTable(spec);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

// This test binary again, in a process of its own, running only the tests
// of `filter` with `env_name`=`env_value` set (a child test skips itself
// without it); its stdout read through a pipe. Killed (SIGKILL) and reaped
// on destruction: a test never leaves one behind.
class ChildTest {
 public:
  ChildTest(const std::string& filter, const char* env_name, const std::string& env_value) {
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      // The parent's sockets stay the parent's (UCX's have no close-on-exec:
      // an inherited listener would hold its port).
      ::close_range(3, ~0U, 0);
      ::setenv(env_name, env_value.c_str(), 1);
      const std::string gtest_filter = "--gtest_filter=" + filter;
      const char* argv[] = {"/proc/self/exe", gtest_filter.c_str(), "--gtest_brief=1", nullptr};
      ::execv("/proc/self/exe", const_cast<char* const*>(argv));
      std::_Exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
  }
  ~ChildTest() {
    Kill();
    if (out_ != nullptr) std::fclose(out_);
  }
  ChildTest(const ChildTest&) = delete;
  ChildTest& operator=(const ChildTest&) = delete;

  // The first line the child prints that starts with `prefix`, or "" when
  // its output ends first.
  std::string LineStartingWith(const std::string& prefix) {
    char line[4096];
    while (out_ != nullptr && std::fgets(line, sizeof(line), out_) != nullptr) {
      if (std::string(line).rfind(prefix, 0) == 0) return line;
    }
    return "";
  }
  void Kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

// Waits up to `timeout` for `pred`, looking every 10 ms; whether it came
// true (it is asked once more when the time is up).
template <typename Pred>
bool WaitUntil(std::chrono::milliseconds timeout, Pred pred) {
  for (const auto until = std::chrono::steady_clock::now() + timeout;
       std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    if (pred()) return true;
  }
  return pred();
}

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_TEST_UTIL_H_
