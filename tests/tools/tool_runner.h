// Test support for running the `replaydb` binary (path in REPLAYDB_TOOL_PATH)
// as a child process in a fresh temporary directory (ToolDirTest::Run), and a
// tiny JSON parser to check what it prints with --json.
#ifndef REPLAYDB_TESTS_TOOLS_TOOL_RUNNER_H_
#define REPLAYDB_TESTS_TOOLS_TOOL_RUNNER_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// ------------------------------------------------------------ tiny JSON
// Just enough of RFC 8259 to check the shape of `replaydb bench --json`
// lines: objects keep their keys in order; numbers follow the JSON grammar
// strictly (no NaN, no inf, no leading '+' or '.').

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
    JsonParser p(text);
    if (!p.ParseValue(out, 0)) return false;
    p.SkipSpace();
    return p.pos_ == text.size();
  }

 private:
  static constexpr int kMaxDepth = 32;

  explicit JsonParser(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  bool Digits() {
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    return pos_ > start;
  }

  bool ParseValue(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return false;
    SkipSpace();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') return ParseObject(out, depth);
    if (c == '[') return ParseArray(out, depth);
    if (c == '"') {
      out->type = JsonValue::Type::kString;
      return ParseString(&out->string);
    }
    if (c == 't' || c == 'f') {
      out->type = JsonValue::Type::kBool;
      out->boolean = c == 't';
      return ConsumeWord(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      out->type = JsonValue::Type::kNull;
      return ConsumeWord("null");
    }
    return ParseNumber(out);
  }

  bool ParseObject(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kObject;
    ++pos_;  // '{'
    if (Consume('}')) return true;
    for (;;) {
      SkipSpace();
      std::string key;
      if (pos_ >= text_.size() || text_[pos_] != '"' || !ParseString(&key)) return false;
      if (!Consume(':')) return false;
      JsonValue value;
      if (!ParseValue(&value, depth + 1)) return false;
      out->keys.push_back(std::move(key));
      out->values.push_back(std::move(value));
      if (Consume('}')) return true;
      if (!Consume(',')) return false;
    }
  }

  bool ParseArray(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kArray;
    ++pos_;  // '['
    if (Consume(']')) return true;
    for (;;) {
      JsonValue value;
      if (!ParseValue(&value, depth + 1)) return false;
      out->values.push_back(std::move(value));
      if (Consume(']')) return true;
      if (!Consume(',')) return false;
    }
  }

  // REQUIRES: text_[pos_] == '"'. Escapes are decoded, \uXXXX only below
  // 0x80 (others are checked and kept as written).
  bool ParseString(std::string* out) {
    ++pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return false;
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u':
          if (pos_ + 4 > text_.size()) return false;
          for (int i = 0; i < 4; ++i) {
            if (!std::isxdigit(static_cast<unsigned char>(text_[pos_ + i]))) return false;
          }
          if (const unsigned long cp = std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16);
              cp < 0x80) {
            out->push_back(static_cast<char>(cp));  // ASCII: decoded
          } else {
            out->append("\\u");
            out->append(text_.substr(pos_, 4));
          }
          pos_ += 4;
          break;
        default:
          return false;
      }
    }
    return false;  // unterminated
  }

  bool ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (!Digits()) {
      return false;
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!Digits()) return false;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!Digits()) return false;
    }
    const std::string number(text_.substr(start, pos_ - start));
    char* end = nullptr;
    out->type = JsonValue::Type::kNumber;
    out->number = std::strtod(number.c_str(), &end);
    return end == number.c_str() + number.size() && std::isfinite(out->number);
  }

  std::string_view text_;
  size_t pos_ = 0;
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
