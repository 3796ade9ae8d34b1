// RocksDB's info log through replaydb's Env (engine/cold/rocksdb_info_log.h):
// lines that cannot be written are dropped and counted, never torn, never a
// crash; the file starts again at its size limit.
#include "engine/cold/rocksdb_info_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rocksdb/env.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/cold/cold_store.h"
#include "tests/support/fault_injection_env.h"
#include "tests/test_util.h"

namespace replaydb::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::FaultInjectionEnv;
using testing_util::TempDir;
using testing_util::TestSeed;

// Logs through the virtual interface, as RocksDB does.
void LogAt(rocksdb::Logger& logger, rocksdb::InfoLogLevel level, const char* format, ...) {
  va_list ap;
  va_start(ap, format);
  logger.Logv(level, format, ap);
  va_end(ap);
}
#define Log(logger, ...) LogAt(logger, rocksdb::InfoLogLevel::INFO_LEVEL, __VA_ARGS__)

std::vector<std::string> Lines(Env* env, const std::string& path) {
  std::string text;
  EXPECT_OK(env->ReadFileToString(path, &text));
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "the log ends in a torn line";
  return lines;
}

// "2026/11/23-19:27:02.123456 1a2b <message>" -> <message>; empty when the
// line does not have that form.
std::string Message(const std::string& line) {
  static const std::regex kLine(R"(^\d{4}/\d\d/\d\d-\d\d:\d\d:\d\d\.\d{6} [0-9a-f]+ (.*)$)");
  std::smatch m;
  if (!std::regex_match(line, m, kLine)) return "";
  return m[1];
}

TEST(RocksdbInfoLogTest, WritesLinesAcrossOpensAndLevels) {
  TempDir dir;
  const std::string path = dir.Sub("LOG");
  {
    auto logger = NewRocksdbInfoLog(Env::Default(), path);
    Log(*logger, "first %d", 1);
    Log(*logger, "ends in a newline\n");
    LogAt(*logger, rocksdb::InfoLogLevel::DEBUG_LEVEL, "below the level");
    LogAt(*logger, rocksdb::InfoLogLevel::WARN_LEVEL, "a warning");
  }
  auto logger = NewRocksdbInfoLog(Env::Default(), path);
  Log(*logger, "%s", std::string(2000, 'x').c_str());  // past the stack buffer
  const std::vector<std::string> lines = Lines(Env::Default(), path);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(Message(lines[0]), "first 1");
  EXPECT_EQ(Message(lines[1]), "ends in a newline");
  EXPECT_EQ(Message(lines[2]), "[WARN] a warning");
  EXPECT_EQ(Message(lines[3]), std::string(2000, 'x'));
  size_t bytes = 0;
  for (const std::string& line : lines) bytes += line.size() + 1;
  EXPECT_EQ(logger->GetLogFileSize(), bytes);
}

// A full disk at random points: every line in the file is whole (written
// or not at all), and once there is room the next line says how many were
// dropped and why.
TEST(RocksdbInfoLogTest, FullDiskDropsWholeLinesAndSaysSo) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  const std::string path = dir.Sub("LOG");
  auto logger = NewRocksdbInfoLog(&env, path);
  std::set<std::string> logged;
  int dropped_runs = 0;
  for (int round = 0; round < 50; ++round) {
    env.SetSpaceLimit(env.bytes_written() + rng() % 300);
    for (int i = 0; i < 5; ++i) {
      const std::string msg = "line " + std::to_string(round) + "." + std::to_string(i) + " " +
                              std::string(rng() % 100, 'a' + static_cast<char>(rng() % 26));
      Log(*logger, "%s", msg.c_str());
      logged.insert(msg);
    }
    env.ClearSpaceLimit();
    Log(*logger, "room again %d", round);
    logged.insert("room again " + std::to_string(round));
    const std::vector<std::string> lines = Lines(&env, path);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(Message(lines.back()), "room again " + std::to_string(round));
    if (lines.size() >= 2 &&
        Message(lines[lines.size() - 2]).find("were dropped") != std::string::npos) {
      ++dropped_runs;
    }
  }
  const std::regex kNote(
      R"(^\[replaydb\] \d+ lines of this log were dropped; the first failure: write .*LOG: No space left on device \(FaultInjectionEnv space limit of \d+ bytes\)$)");
  for (const std::string& line : Lines(&env, path)) {
    const std::string msg = Message(line);
    ASSERT_FALSE(msg.empty()) << "malformed line: " << line;
    if (msg.rfind("[replaydb]", 0) == 0) {
      EXPECT_TRUE(std::regex_match(msg, kNote)) << msg;
    } else {
      EXPECT_EQ(logged.count(msg), 1u) << "a line never logged: " << msg;
    }
  }
  EXPECT_GT(dropped_runs, 0);
}

TEST(RocksdbInfoLogTest, StartsAgainAtItsSizeLimit) {
  TempDir dir;
  const std::string path = dir.Sub("LOG");
  constexpr uint64_t kMax = 4096;
  auto logger = NewRocksdbInfoLog(Env::Default(), path, kMax);
  for (int i = 0; i < 200; ++i) {
    Log(*logger, "line %d", i);
    ASSERT_LE(logger->GetLogFileSize(), kMax);
  }
  const std::vector<std::string> lines = Lines(Env::Default(), path);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_THAT(Message(lines[0]), StartsWith("[replaydb] this log started again: it had reached "));
  EXPECT_THAT(Message(lines[0]), HasSubstr("(the limit is 4096)"));
  EXPECT_EQ(Message(lines.back()), "line 199");
  // The lines since the restart follow one another.
  const int first = std::stoi(Message(lines[1]).substr(5));
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(Message(lines[i]), "line " + std::to_string(first + static_cast<int>(i) - 1));
  }
}

// A directory that does not exist yet: lines are dropped until it does.
TEST(RocksdbInfoLogTest, OpensOnceItCan) {
  TempDir dir;
  const std::string sub = dir.Sub("later");
  auto logger = NewRocksdbInfoLog(Env::Default(), sub + "/LOG");
  Log(*logger, "lost");
  ASSERT_OK(Env::Default()->CreateDirIfMissing(sub));
  Log(*logger, "kept");
  const std::vector<std::string> lines = Lines(Env::Default(), sub + "/LOG");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(Message(lines[0]), StartsWith("[replaydb] 1 lines of this log were dropped; "));
  EXPECT_THAT(Message(lines[0]), HasSubstr(sub + "/LOG"));
  EXPECT_EQ(Message(lines[1]), "kept");
}

// Threads logging while the disk fills and empties: no line is torn or
// mixed with another.
TEST(RocksdbInfoLogTest, ConcurrentLinesStayWhole) {
  TempDir dir;
  std::mt19937_64 rng(TestSeed());
  FaultInjectionEnv env;
  const std::string path = dir.Sub("LOG");
  auto logger = NewRocksdbInfoLog(&env, path);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) Log(*logger, "thread %d line %d %s", t, i, "payload");
    });
  }
  for (int i = 0; i < 50; ++i) {
    env.SetSpaceLimit(env.bytes_written() + rng() % 500);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    env.ClearSpaceLimit();
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
  }
  stop = true;
  for (auto& t : threads) t.join();
  const std::regex kLine(
      R"(^thread \d line \d+ payload$|^\[replaydb\] \d+ lines of this log were dropped; .*$)");
  for (const std::string& line : Lines(&env, path)) {
    EXPECT_TRUE(std::regex_match(Message(line), kLine)) << line;
  }
}

// The cold store's RocksDB writes its info log through the Env: the
// fault-injecting Env sees it (it went to RocksDB's own file system before,
// out of reach of a fault test).
TEST(RocksdbInfoLogTest, ColdStoreLogsThroughTheEnv) {
  TempDir dir;
  FaultInjectionEnv env;
  { ASSERT_OK_AND_ASSIGN(auto store, ColdStore::Open(dir.Sub("cold"), &env)); }
  std::string text;
  ASSERT_OK(env.ReadFileToString(dir.Sub("cold/LOG"), &text));
  EXPECT_THAT(text, HasSubstr("RocksDB version"));
  // The Env tracked it: never synced, a power loss takes its lines.
  ASSERT_OK(env.DropUnsyncedData());
  text.clear();
  const Status s = env.ReadFileToString(dir.Sub("cold/LOG"), &text);
  EXPECT_TRUE(s.ok() || s.code() == Status::Code::kNotFound) << s.ToString();
  EXPECT_EQ(text, "");
}

}  // namespace
}  // namespace replaydb::engine
