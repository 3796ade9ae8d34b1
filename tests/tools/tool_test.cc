// Runs the `replaydb` binary (path in REPLAYDB_TOOL_PATH) as a child process
// in a fresh temporary directory and checks its exit status and output.
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
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#ifndef REPLAYDB_TOOL_PATH
#error "REPLAYDB_TOOL_PATH must name the replaydb binary (set by CMakeLists.txt)"
#endif

extern char** environ;

namespace replaydb {
namespace {

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

  // REQUIRES: text_[pos_] == '"'. Escapes other than \uXXXX are decoded;
  // \uXXXX is checked and kept as written.
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
          out->append("\\u");
          out->append(text_.substr(pos_, 4));
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

// Empty if `line` is a `replaydb bench --json` record of benchmark `bench`;
// otherwise what is wrong with it.
std::string CheckBenchRecord(std::string_view line, std::string_view bench) {
  JsonValue v;
  if (!JsonParser::Parse(line, &v)) return "not valid JSON";
  if (v.type != JsonValue::Type::kObject) return "not a JSON object";
  const std::vector<std::string> in_order = {"bench",   "params",       "value", "unit",
                                             "ceiling", "ceiling_name", "ratio"};
  if (v.keys != in_order) {
    std::string got;
    for (const std::string& k : v.keys) got += (got.empty() ? "" : ",") + k;
    return "keys are [" + got + "]";
  }
  using T = JsonValue::Type;
  const JsonValue& name = *v.Find("bench");
  if (name.type != T::kString || name.string != bench) {
    return "bench is not \"" + std::string(bench) + "\"";
  }
  const JsonValue& params = *v.Find("params");
  if (params.type != T::kObject) return "params is not an object";
  for (const JsonValue& p : params.values) {
    // A number, or a text value such as wal=on (Param::text).
    if (p.type != T::kNumber && (p.type != T::kString || p.string.empty())) {
      return "a param is neither a number nor a non-empty string";
    }
  }
  const JsonValue& value = *v.Find("value");
  if (value.type != T::kNumber || !(value.number > 0)) return "value is not a positive number";
  const JsonValue& unit = *v.Find("unit");
  if (unit.type != T::kString || unit.string.empty()) return "unit is not a non-empty string";
  const JsonValue& ceiling = *v.Find("ceiling");
  if (ceiling.type != T::kNull && (ceiling.type != T::kNumber || !(ceiling.number > 0))) {
    return "ceiling is neither null nor a positive number";
  }
  const JsonValue& ceiling_name = *v.Find("ceiling_name");
  if (ceiling_name.type != T::kString) return "ceiling_name is not a string";
  const JsonValue& ratio = *v.Find("ratio");
  if (ceiling.type == T::kNull) {
    if (ratio.type != T::kNull) return "ratio is not null while ceiling is";
  } else {
    if (ratio.type != T::kNumber) return "ratio is not a number";
    const double want = value.number / ceiling.number;
    if (std::fabs(ratio.number - want) > 1e-9 * want) return "ratio is not value / ceiling";
  }
  return "";
}

TEST(JsonShapeCheckTest, AcceptsAWellFormedRecord) {
  EXPECT_EQ(CheckBenchRecord(R"({"bench": "insert", "params": {"step_bytes": 64, "writers": 1},)"
                             R"( "value": 2e6, "unit": "steps/s", "ceiling": 4e6,)"
                             R"( "ceiling_name": "memcpy_ring", "ratio": 0.5})",
                             "insert"),
            "");
  EXPECT_EQ(CheckBenchRecord(R"({"bench": "insert", "params": {"step_bytes": 64, "wal": "on"},)"
                             R"( "value": 2e6, "unit": "steps/s", "ceiling": 4e6,)"
                             R"( "ceiling_name": "memcpy_ring", "ratio": 0.5})",
                             "insert"),
            "");
  EXPECT_EQ(CheckBenchRecord(R"({"bench":"insert","params":{},"value":1.5,"unit":"B/s",)"
                             R"("ceiling":null,"ceiling_name":"","ratio":null})",
                             "insert"),
            "");
}

TEST(JsonShapeCheckTest, RejectsMalformedRecords) {
  const std::string good_tail =
      R"("unit": "B/s", "ceiling": 4, "ceiling_name": "c", "ratio": 0.5})";
  const std::string prefix = R"({"bench": "insert", "params": {"a": 1}, "value": 2, )";
  EXPECT_EQ(CheckBenchRecord(prefix + good_tail, "insert"), "");
  EXPECT_NE(CheckBenchRecord(prefix + good_tail, "sample_uniform"), "");
  EXPECT_NE(CheckBenchRecord(prefix + good_tail + "x", "insert"), "");      // trailing junk
  EXPECT_NE(CheckBenchRecord(prefix + good_tail.substr(1), "insert"), "");  // broken string
  EXPECT_NE(CheckBenchRecord(
                R"({"bench": "insert", "params": {"a": 1}, "value": nan, )" + good_tail, "insert"),
            "");
  EXPECT_NE(CheckBenchRecord(R"({"bench": "insert", "params": {"a": 1}, "value": .5, )" + good_tail,
                             "insert"),
            "");
  EXPECT_NE(CheckBenchRecord(R"({"bench": "insert", "params": {"a": 1}, "value": 2, )"
                             R"("unit": "B/s", "ceiling": 4, "ceiling_name": "c", "ratio": 0.7})",
                             "insert"),
            "");  // ratio != value / ceiling
  EXPECT_NE(CheckBenchRecord(R"({"bench": "insert", "params": {"a": 1}, "value": 2, )"
                             R"("unit": "B/s", "ceiling": 4, "ceiling_name": "c"})",
                             "insert"),
            "");  // missing key
  EXPECT_NE(CheckBenchRecord(R"({"bench": "insert", "params": {"a": 1}, "value": 2, )"
                             R"("unit": "B/s", "ceiling": 4, "ceiling_name": "c", "ratio": 0.5,)"
                             R"( "extra": 1})",
                             "insert"),
            "");  // extra key
  EXPECT_NE(CheckBenchRecord("[1, 2]", "insert"), "");
  EXPECT_NE(CheckBenchRecord("", "insert"), "");
}

// ------------------------------------------------------- running the tool

struct ToolRun {
  int exit_code = -1;  // 128 + signal number if killed by a signal
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The integer after "key:" on its line of `text` (digits with optional
// thousands separators), or -1 if there is none.
int64_t CounterAfter(const std::string& text, std::string_view key) {
  const std::string needle = std::string(key) + ":";
  const size_t at = text.find(needle);
  if (at == std::string::npos) return -1;
  size_t i = at + needle.size();
  while (i < text.size() && text[i] == ' ') ++i;
  int64_t value = -1;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == ',');
       ++i) {
    if (text[i] == ',') continue;
    value = (value < 0 ? 0 : value * 10) + (text[i] - '0');
  }
  return value;
}

class ToolTest : public ::testing::Test {
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
  ToolRun Run(const std::vector<std::string>& args,
              std::chrono::seconds timeout = std::chrono::seconds(120)) {
    ToolRun run;
    const int n = next_run_++;
    const fs::path out_path = dir_ / ("stdout." + std::to_string(n));
    const fs::path err_path = dir_ / ("stderr." + std::to_string(n));

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

TEST_F(ToolTest, HelpListsTheCommands) {
  for (const char* help : {"help", "--help"}) {
    ToolRun run = Run({help});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("demo"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("bench"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("version"), std::string::npos) << run.out;
  }
}

TEST_F(ToolTest, VersionPrintsTheVersion) {
  ToolRun run = Run({"version"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("replaydb ", 0), 0u) << run.out;
}

TEST_F(ToolTest, UnknownCommandExitsTwoWithAnErrorOnStderr) {
  ToolRun run = Run({"nosuch"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err.rfind("replaydb: unknown command 'nosuch'\n", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("usage:"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST_F(ToolTest, NoCommandPrintsUsageAndExitsTwo) {
  ToolRun run = Run({});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("usage:"), std::string::npos) << run.err;
}

TEST_F(ToolTest, BenchRejectsAnUnknownFlag) {
  ToolRun run = Run({"bench", "--nosuch"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--nosuch"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST_F(ToolTest, DemoRunsAndRunsAgainOnTheSameDirectory) {
  const std::string db_dir = (dir_ / "demo").string();
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("run " + std::to_string(attempt + 1));
    ToolRun run = Run({"demo", db_dir});
    ASSERT_EQ(run.exit_code, 0) << "stderr:\n" << run.err << "\nstdout:\n" << run.out;
    EXPECT_NE(run.out.find("experience"), std::string::npos) << run.out;
    EXPECT_GT(CounterAfter(run.out, "items_sampled"), 0) << run.out;
    EXPECT_GT(CounterAfter(run.out, "steps_inserted"), 0) << run.out;
    if (attempt == 1) {
      EXPECT_NE(run.out.find("dropped table 'experience'"), std::string::npos) << run.out;
    }
  }
}

TEST_F(ToolTest, DemoLeavesADirectoryThatIsNotADatabaseAlone) {
  const fs::path other = dir_ / "not-a-database";
  fs::create_directory(other);
  { std::ofstream(other / "keep.txt") << "precious\n"; }
  ToolRun run = Run({"demo", other.string()});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_EQ(run.err.rfind("replaydb demo: ", 0), 0u) << run.err;
  EXPECT_EQ(ReadFile(other / "keep.txt"), "precious\n");
  std::vector<std::string> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(other)) {
    entries.push_back(e.path().filename().string());
  }
  EXPECT_EQ(entries, std::vector<std::string>{"keep.txt"});
}

TEST_F(ToolTest, BenchJsonQuickInsertPrintsOnlyInsertRecords) {
  ToolRun run =
      Run({"bench", "--json", "--quick", "--filter", "insert/step_bytes"},
          std::chrono::seconds(300));
  ASSERT_EQ(run.exit_code, 0) << "stderr:\n" << run.err << "\nstdout:\n" << run.out;
  std::set<std::tuple<double, double, std::string>> configs;  // (step_bytes, writers, wal)
  for (const std::string& line : Lines(run.out)) {
    SCOPED_TRACE(line);
    ASSERT_EQ(CheckBenchRecord(line, "insert"), "");
    JsonValue v;
    ASSERT_TRUE(JsonParser::Parse(line, &v));
    const JsonValue& params = *v.Find("params");
    ASSERT_EQ(params.keys, (std::vector<std::string>{"step_bytes", "writers", "wal"}));
    const double step_bytes = params.Find("step_bytes")->number;
    configs.insert({step_bytes, params.Find("writers")->number, params.Find("wal")->string});
    EXPECT_EQ(v.Find("unit")->string, step_bytes == 64 ? "steps/s" : "B/s");
    EXPECT_EQ(v.Find("ceiling")->type, JsonValue::Type::kNumber);
    EXPECT_EQ(v.Find("ceiling_name")->string, "memcpy_ring");
  }
  std::set<std::tuple<double, double, std::string>> want;
  for (double step_bytes : {64.0, 16384.0}) {
    for (double writers : {1.0, 4.0}) {
      for (const char* wal : {"on", "off"}) want.insert({step_bytes, writers, wal});
    }
  }
  EXPECT_EQ(configs, want) << run.out;
  // The bench cleans up after itself: only the captured output files remain.
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.rfind("stdout.", 0) == 0 || name.rfind("stderr.", 0) == 0) << name;
  }
}

}  // namespace
}  // namespace replaydb
