// The replaydb shell (tools/shell*.cc): its parser and JSON directly, and
// the `replaydb DIR` binary driven with -c, standard input and --json
// against databases the tests create with the public API.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "replaydb/db.h"
#include "tests/test_util.h"
#include "tests/tools/tool_runner.h"
#include "tools/replaydb/json.h"
#include "tools/replaydb/shell/shell_parser.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::JsonLines;
using testing_util::JsonValue;
using testing_util::Lines;
using testing_util::ToolRun;
using tools::DumpJson;
using tools::Json;
using tools::JsonText;
using tools::ParseCommandLine;
using tools::ParsedCommand;
using tools::SplitWords;
using T = JsonValue::Type;

// ------------------------------------------------------------ parser

TEST(ShellParserTest, SplitsWordsWithQuotesAndEscapes) {
  std::vector<std::string> w;
  ASSERT_OK(SplitWords("  show  'my table' \"a \\\"b\\\" c\" x\\ y ''  ", &w));
  EXPECT_EQ(w, (std::vector<std::string>{"show", "my table", "a \"b\" c", "x y", ""}));
  ASSERT_OK(SplitWords("", &w));
  EXPECT_TRUE(w.empty());
  ASSERT_OK(SplitWords("a'b'\"c\"d", &w));
  EXPECT_EQ(w, (std::vector<std::string>{"abcd"}));
  Status s = SplitWords("show 'open", &w);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unterminated ' quote at column 6"));
  s = SplitWords("x \"open \\\"", &w);
  EXPECT_THAT(s.message(), HasSubstr("unterminated \" quote at column 3"));
}

TEST(ShellParserTest, ParsesArgumentsAndFlagsAnywhere) {
  ParsedCommand c;
  ASSERT_OK(ParseCommandLine("sample --seq=4 t 16 --column obs --seq 8", &c));
  ASSERT_NE(c.spec, nullptr);
  EXPECT_EQ(c.spec->name, "sample");
  EXPECT_EQ(c.args, (std::vector<std::string>{"t", "16"}));
  EXPECT_EQ(c.Flag("seq"), "8") << "the last one wins";
  EXPECT_EQ(c.Flag("column"), "obs");
  EXPECT_FALSE(c.HasFlag("other"));
  ASSERT_OK(ParseCommandLine("   # a comment", &c));
  EXPECT_EQ(c.spec, nullptr);
  ASSERT_OK(ParseCommandLine("bench --quick --filter x", &c));
  EXPECT_EQ(c.args, (std::vector<std::string>{"--quick", "--filter", "x"})) << "passed through";
}

TEST(ShellParserTest, EveryMalformedLineNamesTheProblemAndTheUsage) {
  const struct {
    const char* line;
    const char* message;
  } cases[] = {
      {"frobnicate", "unknown command 'frobnicate' (type help for the commands)"},
      {"describe", "describe: takes 1 argument, got 0 (usage: describe TABLE)"},
      {"stats a b", "stats: takes 1 argument, got 2 (usage: stats TABLE)"},
      {"import a", "import: takes 2 to 3 arguments, got 1 (usage: import DIR TABLE [NAME])"},
      {"sample t 4 --bins 3", "sample: unknown flag --bins (usage: sample TABLE N"},
      {"sample t 4 --seq", "sample: --seq needs a value (usage: sample TABLE N"},
      {"tables 'x", "unterminated ' quote"},
  };
  for (const auto& c : cases) {
    ParsedCommand parsed;
    const Status s = ParseCommandLine(c.line, &parsed);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.line;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.line;
  }
  int64_t v = 0;
  const Status s = tools::ParseInteger(*tools::FindShellCommand("sample"), "N", "12x", 1, 100, &v);
  EXPECT_THAT(s.message(), HasSubstr("sample: N must be an integer from 1 to 100, not '12x'"));
  ASSERT_OK(tools::ParseInteger(*tools::FindShellCommand("sample"), "N", "100", 1, 100, &v));
  EXPECT_EQ(v, 100);
}

TEST(ShellJsonTest, DumpsValidJsonThatReadsBack) {
  std::mt19937_64 rng(testing_util::TestSeed());
  std::string text;
  for (int i = 0; i < 64; ++i) text += static_cast<char>(1 + rng() % 127);
  const double d = std::uniform_real_distribution<double>(-1e9, 1e9)(rng);
  const Json j = {{"s", text},
                  {"d", d},
                  {"i", int64_t{-5}},
                  {"nan", std::nan("")},
                  {"a", Json::array({true, nullptr})}};
  const std::string dumped = DumpJson(j);
  EXPECT_EQ(dumped.find('\n'), std::string::npos) << "one line";
  const nlohmann::json v = nlohmann::json::parse(dumped, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(v.is_discarded()) << dumped;
  EXPECT_EQ(v.at("s").get<std::string>(), text);
  EXPECT_EQ(v.at("d").get<double>(), d) << "round-trip text";
  EXPECT_EQ(v.at("i").get<int64_t>(), -5);
  EXPECT_TRUE(v.at("nan").is_null()) << "JSON has no NaN";
  EXPECT_EQ(v.at("a"), nlohmann::json::parse("[true,null]"));
}

TEST(ShellJsonTest, WritesKeysInOrderAndDoublesAsTheShortestText) {
  const Json j = {{"z", 1.0},
                  {"a", 0.1},
                  {"float", 0.8108321},
                  {"big", 1e6},
                  {"digits", 1234567.0},
                  {"small", 1e-5},
                  {"negative_zero", -0.0},
                  {"inf", std::numeric_limits<double>::infinity()},
                  {"i64", std::numeric_limits<int64_t>::min()},
                  {"u64", std::numeric_limits<uint64_t>::max()},
                  {"flags", Json::array({true, false, nullptr})},
                  {"empty", Json::object()},
                  {"none", Json::array()},
                  {"text", "q\"b\\n\nt\tc\x01 caf\xc3\xa9"},
                  {"bad", "x\xffy"}};
  EXPECT_EQ(DumpJson(j),
            "{\"z\":1,\"a\":0.1,\"float\":0.8108321,\"big\":1e+06,\"digits\":1234567,"
            "\"small\":1e-05,\"negative_zero\":-0,\"inf\":null,\"i64\":-9223372036854775808,"
            "\"u64\":18446744073709551615,\"flags\":[true,false,null],\"empty\":{},\"none\":[],"
            "\"text\":\"q\\\"b\\\\n\\nt\\tc\\u0001 caf\xc3\xa9\",\"bad\":\"x\xef\xbf\xbdy\"}");
}

TEST(ShellJsonTest, TextIsWhatTheTableViewShows) {
  EXPECT_EQ(JsonText("two words"), "two words") << "unquoted";
  EXPECT_EQ(JsonText(Json()), "-");
  EXPECT_EQ(JsonText(std::nan("")), "nan");
  EXPECT_EQ(JsonText(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(JsonText(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(JsonText(2.0), "2");
  EXPECT_EQ(JsonText(0.25), "0.25");
  EXPECT_EQ(JsonText(int64_t{-3}), "-3");
  EXPECT_EQ(JsonText(true), "true");
  EXPECT_EQ(JsonText(Json::array({1.5, std::nan(""), "s"})), "[1.5,null,\"s\"]");
}

// ------------------------------------------------------------ the binary

class ShellTest : public testing_util::ToolDirTest {
 protected:
  // A database in dir_/db with table `name` of random columns holding
  // `trajectories` ended trajectories of random lengths.
  void MakeDatabase(const std::string& name, int trajectories) {
    db_path_ = (dir_ / "db").string();
    auto db = testing_util::OpenDB(db_path_);
    spec_.name = name;
    const int ncols = 1 + static_cast<int>(rng_() % 3);
    for (int c = 0; c < ncols; ++c) {
      const DType types[] = {DType::kF32, DType::kI32, DType::kU8, DType::kF64};
      spec_.columns.push_back(
          {"col" + std::to_string(c) + "_" + std::to_string(rng_() % 100), types[rng_() % 4],
           c == 0 ? Shape{static_cast<int64_t>(1 + rng_() % 5)} : Shape{}});
    }
    spec_.capacity_steps = 4096;
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec_));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int t = 0; t < trajectories; ++t) {
      const int64_t len = 1 + static_cast<int64_t>(rng_() % 20);
      for (int64_t s = 0; s < len; ++s) {
        ASSERT_OK(writer->Append(testing_util::RandomStep(spec_, rng_).tensors));
      }
      steps_ += len;
      ASSERT_OK(writer->End(EndReason::kTerminal));
    }
    ASSERT_OK(db->Checkpoint());
  }

  std::mt19937_64 rng_{testing_util::TestSeed()};
  std::string db_path_;
  TableSpec spec_;
  int64_t steps_ = 0;
};

TEST_F(ShellTest, JsonOfTablesDescribeAndStatsMatchesTheDatabase) {
  MakeDatabase("exp", 1 + static_cast<int>(rng_() % 8));
  const ToolRun run = Run({db_path_, "--json", "-c", "tables", "-c", "describe exp", "-c",
                           "stats exp"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 3u) << run.out;
  const JsonValue& tables = *out[0].Find("tables");
  ASSERT_EQ(tables.values.size(), 1u);
  EXPECT_EQ(tables.values[0].Find("name")->string, "exp");
  EXPECT_EQ(tables.values[0].Find("hot_steps")->number, static_cast<double>(steps_));
  const JsonValue& columns = *out[1].Find("columns");
  ASSERT_EQ(columns.values.size(), spec_.columns.size());
  for (size_t c = 0; c < spec_.columns.size(); ++c) {
    EXPECT_EQ(columns.values[c].Find("name")->string, spec_.columns[c].name);
    EXPECT_EQ(columns.values[c].Find("dtype")->string, DTypeName(spec_.columns[c].dtype));
    EXPECT_EQ(columns.values[c].Find("shape")->values.size(),
              static_cast<size_t>(spec_.columns[c].shape.rank()));
  }
  EXPECT_EQ(out[2].Find("hot")->Find("steps")->number, static_cast<double>(steps_));
  EXPECT_EQ(out[2].Find("selector")->Find("kind")->string, "uniform");
  // MinSize(1), the default, bounds neither side of the diff: null, not
  // +-1.8e308.
  const JsonValue& limiter = *out[1].Find("rate_limiter");
  EXPECT_EQ(limiter.Find("min_size_to_sample")->number, 1);
  EXPECT_EQ(limiter.Find("min_diff")->type, JsonValue::Type::kNull);
  EXPECT_EQ(limiter.Find("max_diff")->type, JsonValue::Type::kNull);
}

TEST_F(ShellTest, RateLimiterBoundsShowAsNumbersAndNoBoundAsADash) {
  db_path_ = (dir_ / "db").string();
  {
    auto db = testing_util::OpenDB(db_path_);
    TableSpec spec;
    spec.name = "ratio";
    spec.columns = {{"x", DType::kF32, {}}};
    spec.rate_limiter = RateLimiterSpec::SampleToInsertRatio(2.0, 3, 10.0);
    ASSERT_OK(db->CreateTable(spec).status());
    spec.name = "plain";
    spec.rate_limiter = RateLimiterSpec::MinSize(1);
    ASSERT_OK(db->CreateTable(spec).status());
    ASSERT_OK(db->Checkpoint());
  }
  const ToolRun run = Run({db_path_, "--json", "-c", "describe ratio"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 1u) << run.out;
  const JsonValue& limiter = *out[0].Find("rate_limiter");
  EXPECT_EQ(limiter.Find("samples_per_insert")->number, 2.0);
  EXPECT_EQ(limiter.Find("min_diff")->number, 3 * 2.0 - 10.0);
  EXPECT_EQ(limiter.Find("max_diff")->number, 3 * 2.0 + 10.0);
  const ToolRun text = Run({db_path_, "-c", "stats plain"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("min_diff: -\n"));
  EXPECT_THAT(text.out, HasSubstr("max_diff: -\n"));
  EXPECT_THAT(text.out, Not(HasSubstr("e+308")));
}

TEST_F(ShellTest, TextViewAndTheShellSubcommandAndStdin) {
  MakeDatabase("exp", 3);
  ToolRun run = Run({"shell", db_path_, "-c", "stats exp"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("hot:\n  trajectories: 3\n"));
  EXPECT_THAT(run.out, HasSubstr("steps: " + std::to_string(steps_)));
  // A script on standard input: every line runs, errors included.
  run = Run({db_path_, "--json"}, std::chrono::seconds(60),
            "tables\n# a comment\n\nstats nosuch\ndescribe exp\n");
  EXPECT_EQ(run.exit_code, 1) << "a failed line makes the exit status non-zero";
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 3u) << run.out;
  EXPECT_NE(out[0].Find("tables"), nullptr);
  EXPECT_EQ(out[1].Find("error")->string, "stats: no table named 'nosuch' in " + db_path_);
  EXPECT_EQ(out[1].Find("code")->string, "NotFound");
  EXPECT_EQ(out[2].Find("name")->string, "exp");
  EXPECT_EQ(run.err, "error: stats: no table named 'nosuch' in " + db_path_ + "\n");
}

TEST_F(ShellTest, EveryBadInputIsOneLineWithTheUsageAndExitsNonZero) {
  MakeDatabase("exp", 2);
  const struct {
    std::string command;
    std::string error;
  } cases[] = {
      {"nosuch", "error: unknown command 'nosuch' (type help for the commands)"},
      {"describe", "error: describe: takes 1 argument, got 0 (usage: describe TABLE)"},
      {"describe nope", "error: describe: no table named 'nope' in " + db_path_},
      {"stats exp extra", "error: stats: takes 1 argument, got 2 (usage: stats TABLE)"},
      {"tables --limit 3", "error: tables: unknown flag --limit (usage: tables)"},
      {"help nosuch", "error: help: unknown command 'nosuch' (usage: help [COMMAND])"},
      {"describe 'exp", "error: unterminated ' quote at column 10"},
  };
  for (const auto& c : cases) {
    // -c stops at the first error: the `tables` after it never runs.
    const ToolRun run = Run({db_path_, "-c", c.command, "-c", "tables"});
    EXPECT_EQ(run.exit_code, 1) << c.command;
    EXPECT_EQ(run.err, c.error + "\n") << c.command;
    EXPECT_EQ(run.out, "") << c.command;
  }
  ToolRun run = Run({dir_.string() + "/missing", "-c", "tables"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("replaydb: cannot open " + dir_.string() + "/missing: "));
  run = Run({"shell", db_path_, "--bogus"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("replaydb shell: unknown flag '--bogus'"));
  run = Run({"shell", db_path_, "-c"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("replaydb shell: -c needs a command"));
}

TEST_F(ShellTest, OpensReadOnlyWhenAnotherProcessHoldsTheDatabase) {
  MakeDatabase("exp", 2);
  auto holder = testing_util::OpenDB(db_path_);  // read-write, in this process
  ToolRun run = Run({db_path_, "--json", "-c", "stats exp", "-c", "checkpoint"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("replaydb: another process holds " + db_path_ +
                                 " read-write; opened it read-only"));
  EXPECT_THAT(run.err, HasSubstr("error: checkpoint: "));
  EXPECT_THAT(run.err, HasSubstr("read-only"));
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].Find("hot")->Find("steps")->number, static_cast<double>(steps_));
  EXPECT_EQ(out[1].Find("code")->string, "FailedPrecondition");
}

TEST_F(ShellTest, ExportAndImportRoundTrip) {
  MakeDatabase("exp", 1 + static_cast<int>(rng_() % 6));
  const std::string out_dir = (dir_ / "exported").string();
  ToolRun run = Run({db_path_, "--json", "-c", "export exp " + out_dir, "-c",
                     "import " + out_dir + " exp copy", "-c", "tables"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "") << "no progress bar where stderr is no terminal";
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].Find("steps")->number, static_cast<double>(steps_));
  std::set<std::string> names;
  for (const JsonValue& t : out[2].Find("tables")->values) names.insert(t.Find("name")->string);
  EXPECT_EQ(names, (std::set<std::string>{"copy", "exp"}));
  // Exporting onto an existing database fails and says so.
  run = Run({db_path_, "-c", "export exp " + out_dir});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("error: export: "));
}

TEST_F(ShellTest, WalVerifyAndCompact) {
  MakeDatabase("exp", 1 + static_cast<int>(rng_() % 6));
  const ToolRun run =
      Run({db_path_, "--json", "-c", "wal", "-c", "verify", "-c", "compact", "-c", "verify"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "") << "no progress bar where stderr is no terminal";
  const std::vector<JsonValue> out = JsonLines(run);
  ASSERT_EQ(out.size(), 4u) << run.out;
  EXPECT_EQ(out[0].Find("dir")->string, db_path_ + "/wal");
  EXPECT_GE(out[0].Find("segments")->number, 1);
  EXPECT_GE(out[0].Find("checkpoint_sequence")->number, 1);
  for (const JsonValue* v : {&out[1], &out[3]}) {
    EXPECT_EQ(v->Find("ok")->type, T::kBool);
    EXPECT_TRUE(v->Find("ok")->boolean);
    EXPECT_EQ(v->Find("steps")->number, static_cast<double>(steps_));
    EXPECT_TRUE(v->Find("problems")->values.empty());
  }
  EXPECT_TRUE(out[2].Find("compacted")->boolean);
  // A reader cannot compact, and says why.
  const ToolRun ro = Run({db_path_, "--read-only", "-c", "compact"});
  EXPECT_EQ(ro.exit_code, 1);
  EXPECT_THAT(ro.err, HasSubstr("error: compact: Compact: database " + db_path_ +
                                " was opened read-only"));
}

// The newest log segment of the database at `db`.
std::string LastSegment(const std::string& db) {
  std::string last;
  for (const auto& e : std::filesystem::directory_iterator(db + "/wal")) {
    if (e.path().extension() == ".log" && e.path().string() > last) last = e.path().string();
  }
  return last;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(ShellTest, VerifyReportsATornLogTailWithoutCuttingIt) {
  MakeDatabase("t", 1 + static_cast<int>(rng_() % 6));
  const std::string segment = LastSegment(db_path_);
  ASSERT_FALSE(segment.empty());
  {
    // Half a record header, as a crash in the middle of a write leaves.
    std::ofstream out(segment, std::ios::binary | std::ios::app);
    for (int i = 0; i < 5; ++i) out.put(static_cast<char>(1 + rng_() % 250));
  }
  const std::string before = ReadAll(segment);
  const ToolRun run = Run({db_path_, "-c", "verify"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.out + run.err, HasSubstr(segment));
  EXPECT_THAT(run.out + run.err, HasSubstr("incomplete record header"));
  EXPECT_EQ(ReadAll(segment), before) << "verify changed the log it checked";
  // A read-write open lets recovery drop the torn tail (the default mode),
  // and that opener's verify still reports what was dropped.
  const ToolRun rw = Run({db_path_, "-c", "tables", "-c", "verify"});
  EXPECT_EQ(rw.exit_code, 1) << rw.out << rw.err;
  EXPECT_THAT(rw.out + rw.err, HasSubstr("recovery at open dropped 5 bytes from " + segment));
  EXPECT_NE(ReadAll(segment), before);
  // Afterwards the log is clean.
  const ToolRun again = Run({db_path_, "-c", "verify"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
}

TEST_F(ShellTest, InspectingLeavesTheLogWhereItWas) {
  MakeDatabase("t", 1 + static_cast<int>(rng_() % 6));
  auto segments = [&] {
    const ToolRun run = Run({db_path_, "--json", "--read-only", "-c", "wal"});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::vector<JsonValue> out = JsonLines(run);
    if (out.size() != 1) return std::string("?");
    return std::to_string(static_cast<int64_t>(out[0].Find("first_segment")->number)) + ".." +
           std::to_string(static_cast<int64_t>(out[0].Find("last_segment")->number)) + " from " +
           std::to_string(static_cast<int64_t>(out[0].Find("checkpoint_segment")->number));
  };
  // The first read-write open after the writer may settle the log once.
  ASSERT_EQ(Run({db_path_, "-c", "tables"}).exit_code, 0);
  const std::string settled = segments();
  for (const char* command : {"tables", "stats t", "describe t", "tables"}) {
    const ToolRun run = Run({db_path_, "-c", command});
    ASSERT_EQ(run.exit_code, 0) << command << ": " << run.err;
    EXPECT_EQ(segments(), settled) << "after -c " << command;
  }
}

}  // namespace
}  // namespace replaydb
