// Test support for running the `replaydb` binary (path in REPLAYDB_TOOL_PATH)
// as a child process in a fresh temporary directory (ToolDirTest::Run), and
// its --json output parsed into a tree the tests walk (JsonLines).
#ifndef REPLAYDB_TESTS_TOOLS_TOOL_RUNNER_H_
#define REPLAYDB_TESTS_TOOLS_TOOL_RUNNER_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

#ifndef REPLAYDB_TOOL_PATH
#error "REPLAYDB_TOOL_PATH must name the replaydb binary (set by CMakeLists.txt)"
#endif

extern char** environ;

namespace replaydb::testing_util {

namespace fs = std::filesystem;

// ------------------------------------------------------------------ JSON
// What `replaydb ... --json` prints, parsed strictly by nlohmann::json (RFC
// 8259: no NaN, no inf, no leading '+' or '.', no trailing commas) into a
// plain tree for the tests to walk: objects keep their keys in order,
// numbers become doubles.

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kObject, kArray };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<std::string> keys;  // kObject, in order; parallel to `values`
  std::vector<JsonValue> values;  // kObject values or kArray elements

  // The value of `key` in an object, or null.
  const JsonValue* Find(std::string_view key) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return &values[i];
    }
    return nullptr;
  }
};

class JsonParser {
 public:
  // True if `text` is exactly one JSON value (surrounding whitespace allowed).
  static bool Parse(std::string_view text, JsonValue* out) {
    const nlohmann::ordered_json j =
        nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return false;
    *out = From(j);
    return true;
  }

 private:
  static JsonValue From(const nlohmann::ordered_json& j) {
    JsonValue v;
    if (j.is_boolean()) {
      v.type = JsonValue::Type::kBool;
      v.boolean = j.get<bool>();
    } else if (j.is_number()) {
      v.type = JsonValue::Type::kNumber;
      v.number = j.get<double>();
    } else if (j.is_string()) {
      v.type = JsonValue::Type::kString;
      v.string = j.get<std::string>();
    } else if (j.is_object()) {
      v.type = JsonValue::Type::kObject;
      for (const auto& member : j.items()) {
        v.keys.push_back(member.key());
        v.values.push_back(From(member.value()));
      }
    } else if (j.is_array()) {
      v.type = JsonValue::Type::kArray;
      for (const auto& element : j) v.values.push_back(From(element));
    }
    return v;
  }
};

// ------------------------------------------------------- running the tool

struct ToolRun {
  int exit_code = -1;  // 128 + signal number if killed by a signal
  std::string out;
  std::string err;
};

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The integer after "key:" on its line of `text` (digits with optional

// Each line of a `--json` run's stdout, parsed; a line that is not JSON
// fails the test.
inline std::vector<JsonValue> JsonLines(const ToolRun& run) {
  std::vector<JsonValue> out;
  for (const std::string& line : Lines(run.out)) {
    JsonValue v;
    EXPECT_TRUE(JsonParser::Parse(line, &v)) << "not JSON: " << line;
    out.push_back(v);
  }
  return out;
}

class ToolDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "replaydb-tool-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
  }

  void TearDown() override {
    // The directory is this test's own.
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Runs the tool with `args` in dir_ (also its TMPDIR), killing it after
  // `timeout`.
  // Its standard input is `input` (never the test's own terminal).
  ToolRun Run(const std::vector<std::string>& args,
              std::chrono::seconds timeout = std::chrono::seconds(120),
              const std::string& input = "") {
    ToolRun run;
    const int n = next_run_++;
    const fs::path in_path = dir_ / ("stdin." + std::to_string(n));
    const fs::path out_path = dir_ / ("stdout." + std::to_string(n));
    const fs::path err_path = dir_ / ("stderr." + std::to_string(n));
    std::ofstream(in_path, std::ios::binary) << input;

    std::vector<std::string> argv_storage = {REPLAYDB_TOOL_PATH};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);

    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "TMPDIR=", 7) != 0) env_storage.emplace_back(*e);
    }
    env_storage.push_back("TMPDIR=" + dir_.string());
    std::vector<char*> envp;
    for (std::string& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, in_path.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
    // Only 0, 1 and 2: the test's own sockets (UCX's have no close-on-exec)
    // stay the test's.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    pid_t pid = -1;
    const int spawn_error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawn_error != 0) {
      ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(spawn_error);
      return run;
    }

    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int wait_status = 0;
    for (;;) {
      const pid_t r = waitpid(pid, &wait_status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) {
        ADD_FAILURE() << "waitpid: " << std::strerror(errno);
        return run;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &wait_status, 0);
        ADD_FAILURE() << "replaydb " << testing::PrintToString(args) << " ran longer than "
                      << timeout.count() << " s and was killed";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (WIFEXITED(wait_status)) {
      run.exit_code = WEXITSTATUS(wait_status);
    } else if (WIFSIGNALED(wait_status)) {
      run.exit_code = 128 + WTERMSIG(wait_status);
    }
    run.out = ReadFile(out_path);
    run.err = ReadFile(err_path);
    return run;
  }

  fs::path dir_;
  int next_run_ = 0;
};

}  // namespace replaydb::testing_util

#endif  // REPLAYDB_TESTS_TOOLS_TOOL_RUNNER_H_
