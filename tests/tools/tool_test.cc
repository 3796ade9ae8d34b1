// Runs the `replaydb` binary (path in REPLAYDB_TOOL_PATH) as a child process
// in a fresh temporary directory and checks its exit status and output.
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <utility>

#include "tests/tools/tool_runner.h"

namespace replaydb {
namespace {

using testing_util::JsonParser;
using testing_util::JsonValue;
using testing_util::Lines;
using testing_util::ReadFile;
using testing_util::ToolRun;
namespace fs = std::filesystem;

class ToolTest : public testing_util::ToolDirTest {};


// Empty if `line` is a `replaydb bench --json` record of benchmark `bench`;
// otherwise what is wrong with it.
std::string CheckBenchRecord(std::string_view line, std::string_view bench) {
  JsonValue v;
  if (!JsonParser::Parse(line, &v)) return "not valid JSON";
  if (v.type != JsonValue::Type::kObject) return "not a JSON object";
  std::vector<std::string> in_order = {"bench",   "params",       "value", "unit",
                                       "ceiling", "ceiling_name", "ratio"};
  // Optional, in this order after them: note; target and target_text (a
  // case with a target: "met" or "MISSED", and the target's text).
  if (std::find(v.keys.begin(), v.keys.end(), "note") != v.keys.end()) in_order.push_back("note");
  if (std::find(v.keys.begin(), v.keys.end(), "target") != v.keys.end()) {
    in_order.push_back("target");
    in_order.push_back("target_text");
  }
  if (v.keys != in_order) {
    std::string got;
    for (const std::string& k : v.keys) got += (got.empty() ? "" : ",") + k;
    return "keys are [" + got + "]";
  }
  using T = JsonValue::Type;
  if (const JsonValue* target = v.Find("target"); target != nullptr) {
    if (target->type != T::kString || (target->string != "met" && target->string != "MISSED")) {
      return "target is not \"met\" or \"MISSED\"";
    }
    if (v.Find("target_text")->type != T::kString || v.Find("target_text")->string.empty()) {
      return "target_text is not a non-empty string";
    }
  }
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
    EXPECT_TRUE(name.rfind("stdin.", 0) == 0 || name.rfind("stdout.", 0) == 0 ||
                name.rfind("stderr.", 0) == 0)
        << name;
  }
}

// The remote rows run against a `replaydb serve` process of their own and
// carry ucx_perftest's ceiling from the same run (ucx-utils, which
// tools/scripts/install-deps.sh installs); the server is stopped after.
TEST_F(ToolTest, BenchRemoteSmallRowsCarryUcxPerftestsCeiling) {
  ToolRun run = Run({"bench", "--json", "--quick", "--filter", "remote_small"},
                    std::chrono::seconds(300));
  ASSERT_EQ(run.exit_code, 0) << "stderr:\n" << run.err << "\nstdout:\n" << run.out;
  std::set<std::string> calls;  // "TRANSPORT CALL"
  for (const std::string& line : Lines(run.out)) {
    SCOPED_TRACE(line);
    ASSERT_EQ(CheckBenchRecord(line, "remote_small"), "");
    JsonValue v;
    ASSERT_TRUE(JsonParser::Parse(line, &v));
    const std::string transport = v.Find("params")->Find("transport")->string;
    calls.insert(transport + " " + v.Find("params")->Find("call")->string);
    EXPECT_EQ(v.Find("unit")->string, "us");
    EXPECT_GT(v.Find("value")->number, 0);
    EXPECT_EQ(v.Find("ceiling")->type, JsonValue::Type::kNumber) << "no ucx_perftest ceiling";
    EXPECT_EQ(v.Find("ceiling_name")->string, "am_lat_rtt+local " + transport);
    EXPECT_NE(v.Find("note")->string.find("am_lat round trip"), std::string::npos);
  }
  EXPECT_EQ(calls, (std::set<std::string>{"tcp sample_B1_64B", "tcp update_1_key",
                                          "sm sample_B1_64B", "sm update_1_key"}))
      << run.out;
}

// The sharded exactness row: four served shards, the total-variation
// distance of their draws against one table's, near 1 (the exact method;
// statistically, far from the 1.5 target), and an equal quota per shard far
// off the exact distribution.
TEST_F(ToolTest, BenchShardedExactnessRowComparesWithOneTablesNoise) {
  ToolRun run = Run({"bench", "--json", "--quick", "--filter", "sharded_exactness"},
                    std::chrono::seconds(300));
  ASSERT_EQ(run.exit_code, 0) << "stderr:\n" << run.err << "\nstdout:\n" << run.out;
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 1u) << run.out;
  ASSERT_EQ(CheckBenchRecord(lines[0], "sharded_exactness"), "");
  JsonValue v;
  ASSERT_TRUE(JsonParser::Parse(lines[0], &v));
  EXPECT_EQ(v.Find("unit")->string, "TV");
  EXPECT_EQ(v.Find("ceiling_name")->string, "one table's TV");
  EXPECT_GT(v.Find("value")->number, 0);
  const double ratio = v.Find("ratio")->number;
  EXPECT_GT(ratio, 0.7);
  EXPECT_LT(ratio, 1.3);
  EXPECT_EQ(v.Find("target")->string, "met");
  EXPECT_NE(v.Find("note")->string.find("an equal quota per shard 0.6"), std::string::npos)
      << v.Find("note")->string;
}

// The transport's one-sided reads: a row over shared memory against
// ucx_perftest's ucp_get, saying the reads were one-sided (none over TCP,
// where UCX only emulates reads).
TEST_F(ToolTest, BenchRemoteReadRowsSayWhetherReadsWereOneSided) {
  ToolRun run = Run({"bench", "--json", "--quick", "--filter", "remote_read"},
                    std::chrono::seconds(300));
  ASSERT_EQ(run.exit_code, 0) << "stderr:\n" << run.err << "\nstdout:\n" << run.out;
  std::set<std::string> transports;
  for (const std::string& line : Lines(run.out)) {
    SCOPED_TRACE(line);
    ASSERT_EQ(CheckBenchRecord(line, "remote_read"), "");
    JsonValue v;
    ASSERT_TRUE(JsonParser::Parse(line, &v));
    const std::string transport = v.Find("params")->Find("transport")->string;
    transports.insert(transport);
    EXPECT_EQ(v.Find("unit")->string, "B/s");
    EXPECT_GT(v.Find("value")->number, 0);
    EXPECT_EQ(v.Find("ceiling")->type, JsonValue::Type::kNumber) << "no ucx_perftest ceiling";
    EXPECT_EQ(v.Find("ceiling_name")->string, "ucp_get 32MiB " + transport);
    EXPECT_EQ(v.Find("note")->string.rfind("one-sided", 0), 0u) << v.Find("note")->string;
    EXPECT_NE(v.Find("target"), nullptr);
  }
  EXPECT_EQ(transports, (std::set<std::string>{"sm"})) << run.out;
}

}  // namespace
}  // namespace replaydb
