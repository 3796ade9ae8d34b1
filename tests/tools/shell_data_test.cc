// The shell's commands that read experience (tools/replaydb/shell/shell_data.cc):
// trajectories, show, sample and priorities, driven through the `replaydb`
// binary with --json and in the table view, against databases the tests
// write with the public API, and every bad input they can get.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "engine/db/catalog.h"
#include "replaydb/db.h"
#include "replaydb/env.h"
#include "tests/test_util.h"
#include "tests/tools/tool_runner.h"

namespace replaydb {
namespace {

using ::testing::HasSubstr;
using testing_util::JsonLines;
using testing_util::JsonValue;
using testing_util::ToolRun;
using T = JsonValue::Type;

// One trajectory as written.
struct Traj {
  uint64_t id = 0;
  int64_t length = 0;
  bool ended = true;
  std::string reason = "terminal";
};

class ShellDataTest : public testing_util::ToolDirTest {
 protected:
  std::string Db() const { return (dir_ / "db").string(); }

  // Table "t": column x (i32, the step's index in its trajectory) and y
  // (f32[2]); `n` ended trajectories of random lengths with priority
  // 1 + (step % 5). With `hot_steps` > 0 (at least 12: a trajectory's 9
  // steps take 3 blocks) and spill, the oldest go cold.
  void Write(int n, int64_t hot_steps = 0) {
    auto db = testing_util::OpenDB(Db());
    TableSpec spec;
    spec.name = "t";
    spec.columns = {{"x", DType::kI32, Shape{}}, {"y", DType::kF32, Shape{2}}};
    spec.block_steps = 4;
    spec.capacity_steps = hot_steps > 0 ? hot_steps : 4096;
    spec.spill = hot_steps > 0;
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int i = 0; i < n; ++i) {
      Traj t;
      t.length = 1 + static_cast<int64_t>(rng_() % 9);
      for (int64_t s = 0; s < t.length; ++s) {
        const int32_t x = static_cast<int32_t>(s);
        const float y[2] = {static_cast<float>(rng_() % 1000) / 8.0f, -1.5f};
        const ConstTensor step[] = {{DType::kI32, {}, &x, sizeof(x)},
                                    {DType::kF32, {2}, y, sizeof(y)}};
        ASSERT_OK(writer->Append(step, 1.0 + static_cast<double>(s % 5)));
        t.id = writer->trajectory_id();
      }
      if (rng_() % 3 == 0) t.reason = "truncated";
      ASSERT_OK(writer->End(t.reason == "terminal" ? EndReason::kTerminal : EndReason::kTruncated));
      written_.push_back(t);
    }
  }

  JsonValue One(const std::string& command) {
    const ToolRun run = Run({Db(), "--json", "-c", command});
    EXPECT_EQ(run.exit_code, 0) << command << ": " << run.err;
    const std::vector<JsonValue> out = JsonLines(run);
    EXPECT_EQ(out.size(), 1u) << run.out;
    return out.empty() ? JsonValue{} : out[0];
  }

  std::mt19937_64 rng_{testing_util::TestSeed()};
  std::vector<Traj> written_;
};

TEST_F(ShellDataTest, TrajectoriesPagesThroughBothTiersWithFilters) {
  Write(12 + static_cast<int>(rng_() % 10), /*hot_steps=*/16);
  // Pages of `limit`, following "next", give every trajectory once, in order.
  const int limit = 1 + static_cast<int>(rng_() % 5);
  std::vector<uint64_t> seen;
  std::string from = "0";
  std::map<uint64_t, std::string> tiers;
  for (int page = 0; page < 100; ++page) {
    const JsonValue v =
        One("trajectories t --limit " + std::to_string(limit) + " --from " + from);
    const JsonValue& rows = *v.Find("trajectories");
    EXPECT_LE(rows.values.size(), static_cast<size_t>(limit));
    for (const JsonValue& r : rows.values) {
      seen.push_back(static_cast<uint64_t>(r.Find("id")->number));
      tiers[seen.back()] = r.Find("tier")->string;
      const Traj& t = written_[seen.size() - 1];
      EXPECT_EQ(r.Find("length")->number, static_cast<double>(t.length));
      EXPECT_TRUE(r.Find("ended")->boolean);
      EXPECT_EQ(r.Find("end_reason")->string, t.reason);
      EXPECT_EQ(r.Find("live_items")->number, static_cast<double>(t.length));
    }
    if (v.Find("next")->type == T::kNull) break;
    from = std::to_string(static_cast<uint64_t>(v.Find("next")->number));
  }
  std::vector<uint64_t> want;
  for (const Traj& t : written_) want.push_back(t.id);
  EXPECT_EQ(seen, want);
  int cold = 0;
  for (const auto& [id, tier] : tiers) cold += tier == "cold" ? 1 : 0;
  EXPECT_GT(cold, 0) << "16 hot steps cannot hold them all";

  // Filters: by length and tier.
  const int64_t min_len = 1 + static_cast<int64_t>(rng_() % 5);
  JsonValue v = One("trajectories t --limit 1000 --min-length " + std::to_string(min_len) +
                    " --max-length 8 --tier cold");
  std::vector<uint64_t> got;
  for (const JsonValue& r : v.Find("trajectories")->values) {
    got.push_back(static_cast<uint64_t>(r.Find("id")->number));
  }
  want.clear();
  for (const Traj& t : written_) {
    if (t.length >= min_len && t.length <= 8 && tiers[t.id] == "cold") want.push_back(t.id);
  }
  EXPECT_EQ(got, want);
  v = One("trajectories t --ended no");
  EXPECT_TRUE(v.Find("trajectories")->values.empty());

  // The table view: one row per trajectory and how to get the next page.
  ToolRun run = Run({Db(), "-c", "trajectories t --limit 2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("id  length  state"));
  EXPECT_THAT(run.out, HasSubstr("more: trajectories t --from " + std::to_string(written_[2].id)));
  run = Run({Db(), "-c", "trajectories t --ended no"});
  EXPECT_EQ(run.out, "(no trajectories match)\n");
}

// Every dtype, printed as its values: integers exactly, floats as the
// shortest text that reads back as the same value.
TEST_F(ShellDataTest, ShowPrintsEveryDtypeExactly) {
  struct Half {
    uint16_t bits;
    double value;
  };
  const Half halves[] = {{0x3C00, 1.0}, {0xC000, -2.0}, {0x3555, 0.333251953125},
                         {0x0001, 5.9604644775390625e-08}, {0x7BFF, 65504.0}, {0x0000, 0.0}};
  const Half bf16s[] = {{0x3F80, 1.0}, {0x4049, 3.140625}, {0xC2F7, -123.5}, {0x0000, 0.0}};
  TableSpec spec;
  spec.name = "types";
  spec.columns = {{"b", DType::kBool, Shape{2}},  {"u8", DType::kU8, Shape{}},
                  {"i8", DType::kI8, Shape{}},    {"i16", DType::kI16, Shape{}},
                  {"i32", DType::kI32, Shape{}},  {"i64", DType::kI64, Shape{}},
                  {"f16", DType::kF16, Shape{}},  {"bf16", DType::kBF16, Shape{}},
                  {"f32", DType::kF32, Shape{2, 2}}, {"f64", DType::kF64, Shape{}}};
  spec.capacity_steps = 1024;
  const int64_t len = 2 + static_cast<int64_t>(rng_() % 20);
  std::vector<testing_util::StepData> steps;
  std::vector<size_t> half_pick;
  std::vector<size_t> bf16_pick;
  {
    auto db = testing_util::OpenDB(Db());
    ASSERT_OK_AND_ASSIGN(auto table, db->CreateTable(spec));
    ASSERT_OK_AND_ASSIGN(auto writer, table->NewWriter());
    for (int64_t s = 0; s < len; ++s) {
      testing_util::StepData step = testing_util::RandomStep(spec, rng_);
      half_pick.push_back(rng_() % std::size(halves));
      bf16_pick.push_back(rng_() % std::size(bf16s));
      std::memcpy(step.columns[6].data(), &halves[half_pick.back()].bits, 2);
      std::memcpy(step.columns[7].data(), &bf16s[bf16_pick.back()].bits, 2);
      // Finite floats, so that every value has a JSON form.
      for (int i = 0; i < 4; ++i) {
        const float f = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng_);
        std::memcpy(step.columns[8].data() + 4 * i, &f, 4);
      }
      const double d = std::uniform_real_distribution<double>(-1e12, 1e12)(rng_);
      std::memcpy(step.columns[9].data(), &d, 8);
      ASSERT_OK(writer->Append(step.tensors, static_cast<double>(s) / 4));
      steps.push_back(std::move(step));
    }
    ASSERT_OK(writer->End(EndReason::kTerminal));
  }
  const int64_t first = static_cast<int64_t>(rng_() % static_cast<uint64_t>(len));
  const JsonValue v = One("show types 1 --first " + std::to_string(first) + " --steps 100");
  const int64_t n = len - first;
  EXPECT_EQ(v.Find("length")->number, static_cast<double>(len));
  EXPECT_EQ(v.Find("tier")->string, "hot");
  EXPECT_EQ(v.Find("steps")->number, static_cast<double>(n));
  const JsonValue& columns = *v.Find("columns");
  ASSERT_EQ(columns.values.size(), spec.columns.size());
  for (int64_t i = 0; i < n; ++i) {
    const testing_util::StepData& step = steps[static_cast<size_t>(first + i)];
    const auto value = [&](int c) -> const JsonValue& {
      return columns.values[static_cast<size_t>(c)].Find("values")->values[static_cast<size_t>(i)];
    };
    const auto bytes = [&](int c) { return step.columns[static_cast<size_t>(c)].data(); };
    EXPECT_EQ(v.Find("step_priorities")->values[static_cast<size_t>(i)].number,
              static_cast<double>(first + i) / 4);
    for (int e = 0; e < 2; ++e) {
      EXPECT_EQ(value(0).values[static_cast<size_t>(e)].boolean,
                std::to_integer<int>(bytes(0)[e]) != 0);
    }
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    double f64;
    std::memcpy(&i8, bytes(2), 1);
    std::memcpy(&i16, bytes(3), 2);
    std::memcpy(&i32, bytes(4), 4);
    std::memcpy(&i64, bytes(5), 8);
    std::memcpy(&f64, bytes(9), 8);
    EXPECT_EQ(value(1).number, std::to_integer<int>(bytes(1)[0]));
    EXPECT_EQ(value(2).number, i8);
    EXPECT_EQ(value(3).number, i16);
    EXPECT_EQ(value(4).number, i32);
    EXPECT_EQ(value(5).number, static_cast<double>(i64));
    // As its type reads back: the shortest text that is the same float.
    EXPECT_EQ(static_cast<float>(value(6).number),
              static_cast<float>(halves[half_pick[static_cast<size_t>(first + i)]].value));
    EXPECT_EQ(static_cast<float>(value(7).number),
              static_cast<float>(bf16s[bf16_pick[static_cast<size_t>(first + i)]].value));
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 2; ++c) {
        float f;
        std::memcpy(&f, bytes(8) + 4 * (2 * r + c), 4);
        EXPECT_EQ(static_cast<float>(value(8).values[r].values[c].number), f);
      }
    }
    EXPECT_EQ(value(9).number, f64);
  }
  // The table view: one line per step and column, with its type and shape.
  const ToolRun run = Run({Db(), "-c", "show types 1 --steps 1 --column f32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("trajectory 1 of table 'types': " + std::to_string(len) +
                                 " steps, terminal, hot, " + std::to_string(len) +
                                 " live items\nsteps 0 to 0:\nstep 0  priority 0\n  f32  f32[2, 2]  [["));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("i64")));
  EXPECT_THAT(run.out, HasSubstr("more: show types 1 --first 1"));
}

TEST_F(ShellDataTest, ShowReadsColdTrajectoriesWithoutLoadingThem) {
  Write(10, /*hot_steps=*/12);
  const JsonValue list = One("trajectories t --tier cold --limit 1");
  ASSERT_EQ(list.Find("trajectories")->values.size(), 1u);
  const uint64_t id = static_cast<uint64_t>(list.Find("trajectories")->values[0].Find("id")->number);
  const JsonValue v = One("show t " + std::to_string(id));
  EXPECT_EQ(v.Find("tier")->string, "cold");
  const std::vector<JsonValue>& xs = v.Find("columns")->values[0].Find("values")->values;
  ASSERT_FALSE(xs.empty());
  for (size_t s = 0; s < xs.size(); ++s) EXPECT_EQ(xs[s].number, static_cast<double>(s));
  EXPECT_EQ(One("stats t").Find("cold")->Find("loaded_trajectories")->number, 0);
}

TEST_F(ShellDataTest, SampleLooksWithoutTakingAndItsStatisticsMatchTheWindows) {
  Write(4 + static_cast<int>(rng_() % 8));
  const int64_t n = 1 + static_cast<int64_t>(rng_() % 16);
  const int64_t L = 1 + static_cast<int64_t>(rng_() % 6);
  const JsonValue v =
      One("sample t " + std::to_string(n) + " --seq " + std::to_string(L) + " --column x");
  EXPECT_EQ(v.Find("batch_size")->number, static_cast<double>(n));
  EXPECT_EQ(v.Find("sequence_length")->number, static_cast<double>(L));
  std::map<uint64_t, int64_t> lengths;
  for (const Traj& t : written_) lengths[t.id] = t.length;
  // x is the step's index: each window holds start .. start + real - 1.
  double lo = 1e9;
  double hi = -1e9;
  double sum = 0;
  int64_t count = 0;
  const JsonValue& items = *v.Find("items");
  ASSERT_EQ(items.values.size(), static_cast<size_t>(n));
  for (const JsonValue& item : items.values) {
    const uint64_t traj = static_cast<uint64_t>(item.Find("trajectory")->number);
    const int64_t start = static_cast<int64_t>(item.Find("start")->number);
    ASSERT_EQ(lengths.count(traj), 1u);
    const int64_t real = std::min(L, lengths[traj] - start);
    EXPECT_EQ(item.Find("real_steps")->number, static_cast<double>(real));
    EXPECT_EQ(item.Find("times_sampled")->number, 0) << "nothing recorded";
    EXPECT_EQ(item.Find("priority")->number, 1.0 + static_cast<double>(start % 5));
    for (int64_t s = start; s < start + real; ++s) {
      lo = std::min(lo, static_cast<double>(s));
      hi = std::max(hi, static_cast<double>(s));
      sum += static_cast<double>(s);
      ++count;
    }
  }
  const JsonValue& columns = *v.Find("columns");
  ASSERT_EQ(columns.values.size(), 1u) << "--column x";
  const JsonValue& x = columns.values[0];
  EXPECT_EQ(x.Find("name")->string, "x");
  EXPECT_EQ(x.Find("min")->number, lo);
  EXPECT_EQ(x.Find("max")->number, hi);
  EXPECT_NEAR(x.Find("mean")->number, sum / static_cast<double>(count), 1e-9);
  ASSERT_EQ(x.Find("shape")->values.size(), 2u);
  EXPECT_EQ(x.Find("shape")->values[1].number, static_cast<double>(L));
  // Nothing was recorded.
  const JsonValue stats = One("stats t");
  EXPECT_EQ(stats.Find("counters")->Find("items_sampled")->number, 0);
  EXPECT_EQ(stats.Find("rate_limiter")->Find("samples")->number, 0);
  // The table view.
  const ToolRun run = Run({Db(), "-c", "sample t 2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("2 items of table 't', windows of 1 steps, drawn without taking"));
  EXPECT_THAT(run.out, HasSubstr("y     f32[2, 1, 2]"));
}

TEST_F(ShellDataTest, PrioritiesHistogramCountsEveryLiveItem) {
  Write(3 + static_cast<int>(rng_() % 8));
  int64_t items = 0;
  std::map<int, int64_t> by_priority;  // priority 1..5
  for (const Traj& t : written_) {
    for (int64_t s = 0; s < t.length; ++s) ++by_priority[1 + static_cast<int>(s % 5)];
    items += t.length;
  }
  const JsonValue v = One("priorities t --bins 4");
  EXPECT_EQ(v.Find("items")->number, static_cast<double>(items));
  EXPECT_EQ(v.Find("min")->number, 1);
  EXPECT_EQ(v.Find("max")->number, by_priority.rbegin()->first);
  EXPECT_EQ(v.Find("zero")->number, 0);
  const JsonValue& bins = *v.Find("bins");
  int64_t total = 0;
  for (const JsonValue& b : bins.values) {
    int64_t want = 0;
    for (const auto& [p, count] : by_priority) {
      const bool last = &b == &bins.values.back();
      if (p >= b.Find("from")->number && (p < b.Find("to")->number || (last && p <= b.Find("to")->number))) {
        want += count;
      }
    }
    EXPECT_EQ(b.Find("count")->number, static_cast<double>(want))
        << "[" << b.Find("from")->number << ", " << b.Find("to")->number << ")";
    total += static_cast<int64_t>(b.Find("count")->number);
  }
  EXPECT_EQ(total, items);
  const ToolRun run = Run({Db(), "-c", "priorities t"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("table 't': " + std::to_string(items) + " live items"));
  EXPECT_THAT(run.out, HasSubstr("########################################"));
}

TEST_F(ShellDataTest, EveryBadInputNamesTheProblem) {
  Write(2);
  {
    // A second, empty table.
    auto db = testing_util::OpenDB(Db());
    TableSpec spec;
    spec.name = "empty";
    spec.columns = {{"x", DType::kI32, Shape{}}};
    spec.capacity_steps = 64;
    ASSERT_OK(db->CreateTable(spec).status());
  }
  const std::string len0 = std::to_string(written_[0].length);
  const struct {
    std::string command;
    std::string error;
  } cases[] = {
      {"trajectories nope", "error: trajectories: no table named 'nope' in " + Db()},
      {"trajectories t --ended maybe",
       "error: trajectories: --ended takes yes or no, not 'maybe' (usage: trajectories TABLE"},
      {"trajectories t --tier warm",
       "error: trajectories: --tier takes hot or cold, not 'warm' (usage: trajectories"},
      {"trajectories t --limit 0",
       "error: trajectories: --limit must be an integer from 1 to 1000000, not '0'"},
      {"trajectories t --from -3", "error: trajectories: --from must be an integer from 0 to"},
      {"show t", "error: show: takes 2 arguments, got 1 (usage: show TABLE TRAJECTORY"},
      {"show t abc", "error: show: TRAJECTORY must be an integer from 1 to"},
      {"show t 999", "error: show: table 't' has no trajectory 999 in either tier"},
      {"show t 1 --first " + std::to_string(written_[0].length + 1),
       "error: show: table 't': trajectory 1 has " + len0 + " steps; cannot read from step " +
           std::to_string(written_[0].length + 1)},
      {"show t 1 --steps 0", "error: show: --steps must be an integer from 1 to"},
      {"show t 1 --column z",
       "error: show: table 't' has no column 'z' (its columns: x, y) (usage: show TABLE"},
      {"show nope 1", "error: show: no table named 'nope' in " + Db()},
      {"sample t 0", "error: sample: N must be an integer from 1 to 65536, not '0'"},
      {"sample t 2 --seq 0", "error: sample: --seq must be an integer from 1 to"},
      {"sample t 2 --column q", "error: sample: table 't' has no column 'q' (its columns: x, y)"},
      {"sample empty 1", "error: sample: table 'empty' has nothing to draw: 0 live items"},
      {"priorities t --bins 0", "error: priorities: --bins must be an integer from 1 to 1000"},
      {"priorities t extra", "error: priorities: takes 1 argument, got 2"},
  };
  for (const auto& c : cases) {
    const ToolRun run = Run({Db(), "-c", c.command, "-c", "tables"});
    EXPECT_EQ(run.exit_code, 1) << c.command;
    EXPECT_THAT(run.err, HasSubstr(c.error)) << c.command;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << "one line: " << run.err;
    EXPECT_EQ(run.out, "") << c.command;
  }
  // Not errors: an empty table's histogram, and a page past the end.
  ToolRun run = Run({Db(), "-c", "priorities empty", "-c", "trajectories t --from 99"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("table 'empty': no live items in the hot tier"));
  EXPECT_THAT(run.out, HasSubstr("(no trajectories match)"));
}

// A column whose bytes per step overflow 64 bits (f32[2^62]: 2^64 bytes,
// wrapped to 0) was accepted by older builds, whose `show` and `sample` then
// crashed on the table. It cannot be created any more, and a catalog that
// still holds one fails the shell's open with a message naming the table
// and column, in every mode, never a signal.
TEST_F(ShellDataTest, ShowAndSampleOfAColumnWhoseBytesOverflowFailCleanly) {
  Write(1 + static_cast<int>(rng_() % 3));
  // At least 2^62 f32 values: 2^64 bytes or more; exactly 2^62 wrapped to
  // 0 bytes, which every later check let through.
  const int64_t huge = (int64_t{1} << 62) +
                       (rng_() % 2 ? 0 : static_cast<int64_t>(rng_() % (uint64_t{1} << 61)));
  TableSpec spec;
  spec.name = "huge";
  spec.columns = {{"obs", DType::kF32, Shape{huge}}};
  spec.capacity_steps = 64;
  const std::string overflow = "column 'obs' has shape [" + std::to_string(huge) +
                               "] of f32, whose bytes per step overflow 64 bits";
  {
    auto db = testing_util::OpenDB(Db());
    auto made = db->CreateTable(spec);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(made.status().message(), HasSubstr("table 'huge': " + overflow));
  }
  // As an older build left it: table "t" with the overflowing shape.
  const std::string catalog = Db() + "/CATALOG";
  engine::CatalogContents contents;
  ASSERT_OK(engine::LoadCatalog(Env::Default(), catalog, &contents));
  ASSERT_EQ(contents.tables.size(), 1u);
  contents.tables[0].spec.columns[1].shape = Shape{huge};
  ASSERT_OK(engine::SaveCatalog(Env::Default(), catalog, contents));
  const std::string expected = "replaydb: cannot open " + Db() + ": catalog " + catalog +
                               ": stored spec of table 't' is invalid: table 't': column 'y' "
                               "has shape [" + std::to_string(huge) +
                               "] of f32, whose bytes per step overflow 64 bits";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{Db(), "-c", "show t 1"},
        std::vector<std::string>{Db(), "-c", "sample t 2"},
        std::vector<std::string>{Db(), "--json", "-c", "sample t 2 --seq 3"},
        std::vector<std::string>{Db(), "--read-only", "-c", "show t 1 --steps 5"}}) {
    const ToolRun run = Run(args);
    SCOPED_TRACE(args.back());
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_THAT(run.err, HasSubstr(expected));
  }
}

}  // namespace
}  // namespace replaydb
