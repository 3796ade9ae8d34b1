// The shell's commands that read experience (tools/replaydb/shell/shell_data.h). Each reads
// through the public Table API: ListTrajectories, ReadTrajectory, Sample
// with SampleOptions::peek (so looking records nothing) and ItemPriorities.
#include "tools/replaydb/shell/shell_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tools/replaydb/tool_util.h"

namespace replaydb::tools {
namespace {

constexpr int64_t kDefaultPage = 20;
constexpr int64_t kDefaultShowSteps = 10;
constexpr int64_t kDefaultBins = 10;
constexpr int64_t kMaxSample = 65536;
// Values of one column and step printed in the text view before eliding.
constexpr int64_t kTextValues = 16;
// Values a sample's "first" shows per column.
constexpr int64_t kFirstValues = 8;

template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float HalfToFloat(uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
  if (exponent == 31) {
    return mantissa != 0 ? std::numeric_limits<float>::quiet_NaN()
                         : sign * std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(sign * std::ldexp(mantissa | 0x400, exponent - 25));
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// The shortest decimal that reads back as `f`, as a double (so that JSON
// prints 0.1 for 0.1f rather than 0.10000000149011612).
double ShortestFloat(float f) {
  if (!std::isfinite(f)) return f;
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return f;
}

// The element's text for the table view.
std::string ElementText(DType dtype, const std::byte* p) {
  return JsonText(ElementJson(dtype, p));
}

// Nested JSON arrays of `dims` over elements from `p`.
Json NestedJson(DType dtype, const std::byte* p, std::span<const int64_t> dims) {
  if (dims.empty()) return ElementJson(dtype, p);
  const int64_t inner =
      std::max<int64_t>(1, Shape::FromSpan(dims.subspan(1)).num_elements());
  const size_t stride = static_cast<size_t>(inner) * DTypeSize(dtype);
  Json a = Json::array();
  for (int64_t i = 0; i < dims[0]; ++i) {
    a.push_back(NestedJson(dtype, p + static_cast<size_t>(i) * stride, dims.subspan(1)));
  }
  return a;
}

// One step of a column as text: the scalar, nested brackets for up to
// kTextValues values, or the first of them and the count.
std::string ValuesText(DType dtype, const Shape& shape, const std::byte* p) {
  const int64_t n = shape.num_elements();
  if (shape.rank() == 0) return ElementText(dtype, p);
  const size_t es = DTypeSize(dtype);
  if (n <= kTextValues) {
    std::string text = JsonText(NestedJson(dtype, p, shape.dims()));
    // "[1,2]" -> "[1, 2]"
    std::string spaced;
    for (char ch : text) {
      spaced += ch;
      if (ch == ',') spaced += ' ';
    }
    return spaced;
  }
  std::string text = "[";
  for (int64_t i = 0; i < kTextValues / 2; ++i) {
    text += ElementText(dtype, p + static_cast<size_t>(i) * es) + ", ";
  }
  return text + "...] (" + FormatCount(n) + " values)";
}

Result<std::shared_ptr<Table>> OpenTable(Shell& shell, const ParsedCommand& c) {
  Result<std::shared_ptr<Table>> table = shell.db().GetTable(c.args[0]);
  if (!table.ok()) return table.status().WithContext(c.spec->name);
  return table;
}

Status Named(const ParsedCommand& c, const Status& s) {
  return s.ok() ? s : s.WithContext(c.spec->name);
}

// `--name`'s integer value in [min, max], or `fallback` when not given.
Status IntFlag(const ParsedCommand& c, std::string_view name, int64_t min, int64_t max,
               int64_t fallback, int64_t* out) {
  if (!c.HasFlag(name)) {
    *out = fallback;
    return Status::OK();
  }
  return ParseInteger(*c.spec, "--" + std::string(name), c.Flag(name), min, max, out);
}

// The columns to report: all, or the one --column names (index into the
// schema). InvalidArgument naming the columns there are otherwise.
Status PickColumns(const ParsedCommand& c, const TableSpec& spec, std::vector<size_t>* picked) {
  picked->clear();
  if (!c.HasFlag("column")) {
    for (size_t i = 0; i < spec.columns.size(); ++i) picked->push_back(i);
    return Status::OK();
  }
  const std::string name = c.Flag("column");
  std::string names;
  for (size_t i = 0; i < spec.columns.size(); ++i) {
    if (spec.columns[i].name == name) {
      picked->push_back(i);
      return Status::OK();
    }
    names += (i > 0 ? ", " : "") + spec.columns[i].name;
  }
  return UsageError(*c.spec, "table '" + spec.name + "' has no column '" + name +
                                 "' (its columns: " + names + ")");
}

std::string StateName(bool ended, EndReason reason) {
  return ended ? std::string(EndReasonName(reason)) : "open";
}

Json TrajectoryJson(const TrajectoryInfo& t) {
  return {{"id", t.id},
          {"length", t.length},
          {"ended", t.ended},
          {"end_reason", t.ended ? Json(EndReasonName(t.end_reason)) : Json()},
          {"tier", TierName(t.tier)},
          {"live_items", t.live_items}};
}

// Running min, max and mean of values.
struct Stats {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  int64_t count = 0;
  void Add(double v) {
    min = std::min(min, v);
    max = std::max(max, v);
    sum += v;
    ++count;
  }
  Json Min() const { return count > 0 ? Json(min) : Json(); }
  Json Max() const { return count > 0 ? Json(max) : Json(); }
  double mean_value() const { return sum / static_cast<double>(count); }
  Json Mean() const { return count > 0 ? Json(mean_value()) : Json(); }
};

}  // namespace

double ElementValue(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kBool: return Load<uint8_t>(p) != 0 ? 1.0 : 0.0;
    case DType::kU8: return Load<uint8_t>(p);
    case DType::kI8: return Load<int8_t>(p);
    case DType::kI16: return Load<int16_t>(p);
    case DType::kI32: return Load<int32_t>(p);
    case DType::kI64: return static_cast<double>(Load<int64_t>(p));
    case DType::kF16: return HalfToFloat(Load<uint16_t>(p));
    case DType::kBF16: return Bf16ToFloat(Load<uint16_t>(p));
    case DType::kF32: return Load<float>(p);
    case DType::kF64: return Load<double>(p);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

Json ElementJson(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::kBool: return Json(Load<uint8_t>(p) != 0);
    case DType::kU8: return Json(static_cast<int64_t>(Load<uint8_t>(p)));
    case DType::kI8: return Json(static_cast<int64_t>(Load<int8_t>(p)));
    case DType::kI16: return Json(static_cast<int64_t>(Load<int16_t>(p)));
    case DType::kI32: return Json(static_cast<int64_t>(Load<int32_t>(p)));
    case DType::kI64: return Json(Load<int64_t>(p));
    case DType::kF16: return Json(ShortestFloat(HalfToFloat(Load<uint16_t>(p))));
    case DType::kBF16: return Json(ShortestFloat(Bf16ToFloat(Load<uint16_t>(p))));
    case DType::kF32: return Json(ShortestFloat(Load<float>(p)));
    case DType::kF64: return Json(Load<double>(p));
  }
  return Json();
}

// ---- trajectories TABLE [--from ID] [--limit N] [--min-length N]
//      [--max-length N] [--ended yes|no] [--tier hot|cold]

Status TrajectoriesCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, OpenTable(shell, c));
  TrajectoryFilter filter;
  int64_t from = 0;
  int64_t limit = 0;
  REPLAYDB_RETURN_IF_ERROR(
      IntFlag(c, "from", 0, static_cast<int64_t>(kMaxTrajectoryId), 0, &from));
  REPLAYDB_RETURN_IF_ERROR(IntFlag(c, "limit", 1, 1'000'000, kDefaultPage, &limit));
  REPLAYDB_RETURN_IF_ERROR(
      IntFlag(c, "min-length", 0, kMaxTrajectorySteps, 0, &filter.min_length));
  REPLAYDB_RETURN_IF_ERROR(IntFlag(c, "max-length", 0, kMaxTrajectorySteps,
                                   std::numeric_limits<int64_t>::max(), &filter.max_length));
  if (c.HasFlag("ended")) {
    const std::string v = c.Flag("ended");
    if (v != "yes" && v != "no") {
      return UsageError(*c.spec, "--ended takes yes or no, not '" + v + "'");
    }
    filter.ended = v == "yes";
  }
  if (c.HasFlag("tier")) {
    const std::string v = c.Flag("tier");
    if (v != "hot" && v != "cold") {
      return UsageError(*c.spec, "--tier takes hot or cold, not '" + v + "'");
    }
    filter.tier = v == "hot" ? Tier::kHot : Tier::kCold;
  }
  filter.from = static_cast<uint64_t>(from);
  filter.limit = static_cast<size_t>(limit) + 1;  // one more tells whether a next page exists
  std::vector<TrajectoryInfo> rows;
  REPLAYDB_RETURN_IF_ERROR(Named(c, table->ListTrajectories(filter, &rows)));
  Json next;
  if (rows.size() > static_cast<size_t>(limit)) {
    next = rows[static_cast<size_t>(limit)].id;
    rows.resize(static_cast<size_t>(limit));
  }
  Json list = Json::array();
  std::string text;
  Json view = Json::array();
  for (const TrajectoryInfo& t : rows) {
    list.push_back(TrajectoryJson(t));
    view.push_back(Json{{"id", t.id},
                        {"length", t.length},
                        {"state", StateName(t.ended, t.end_reason)},
                        {"tier", TierName(t.tier)},
                        {"live_items", t.live_items}});
  }
  out->json = {{"table", table->name()}, {"trajectories", list}, {"next", next}};
  out->text = rows.empty() ? "(no trajectories match)\n" : RenderText(view);
  if (!next.is_null()) {
    out->text += "more: trajectories " + table->name() + " --from " + JsonText(next) + "\n";
  }
  return Status::OK();
}

// ---- show TABLE TRAJECTORY [--first STEP] [--steps N] [--column NAME]

Status ShowCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, OpenTable(shell, c));
  const TableSpec spec = table->spec();
  int64_t id = 0;
  int64_t first = 0;
  int64_t steps = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseInteger(*c.spec, "TRAJECTORY", c.args[1], 1,
                                        static_cast<int64_t>(kMaxTrajectoryId), &id));
  REPLAYDB_RETURN_IF_ERROR(IntFlag(c, "first", 0, kMaxTrajectorySteps, 0, &first));
  REPLAYDB_RETURN_IF_ERROR(IntFlag(c, "steps", 1, kMaxTrajectorySteps, kDefaultShowSteps, &steps));
  std::vector<size_t> picked;
  REPLAYDB_RETURN_IF_ERROR(PickColumns(c, spec, &picked));
  TrajectorySteps ts;
  REPLAYDB_RETURN_IF_ERROR(
      Named(c, table->ReadTrajectory(static_cast<uint64_t>(id), first, steps, &ts)));
  const TrajectoryInfo& t = ts.info;
  const int64_t n = static_cast<int64_t>(ts.step_priorities.size());
  Json columns = Json::array();
  for (size_t ci : picked) {
    const ColumnSpec& col = spec.columns[ci];
    const Tensor& tensor = ts.columns[ci];
    Json values = Json::array();
    for (int64_t i = 0; i < n; ++i) {
      values.push_back(NestedJson(
          col.dtype, tensor.data() + static_cast<size_t>(i) * col.step_bytes(), col.shape.dims()));
    }
    columns.push_back(Json{{"name", col.name},
                           {"dtype", DTypeName(col.dtype)},
                           {"shape", col.shape.dims()},
                           {"values", std::move(values)}});
  }
  out->json = TrajectoryJson(t);
  out->json["table"] = table->name();
  out->json["first"] = ts.first;
  out->json["steps"] = n;
  out->json["step_priorities"] = ts.step_priorities;
  out->json["columns"] = std::move(columns);

  std::string& text = out->text;
  text = "trajectory " + std::to_string(t.id) + " of table '" + table->name() + "': " +
         FormatCount(t.length) + " steps, " + StateName(t.ended, t.end_reason) + ", " +
         std::string(TierName(t.tier)) + ", " + FormatCount(t.live_items) + " live items\n";
  if (n == 0) {
    text += "(no steps from step " + std::to_string(first) + ")\n";
    return Status::OK();
  }
  text += "steps " + std::to_string(first) + " to " + std::to_string(first + n - 1) + ":\n";
  size_t name_width = 0;
  size_t type_width = 0;
  std::vector<std::string> types;
  for (size_t ci : picked) {
    name_width = std::max(name_width, spec.columns[ci].name.size());
    types.push_back(std::string(DTypeName(spec.columns[ci].dtype)) +
                    spec.columns[ci].shape.ToString());
    type_width = std::max(type_width, types.back().size());
  }
  for (int64_t i = 0; i < n; ++i) {
    text += "step " + std::to_string(first + i) + "  priority " +
            JsonText(ts.step_priorities[static_cast<size_t>(i)]) + "\n";
    for (size_t k = 0; k < picked.size(); ++k) {
      const ColumnSpec& col = spec.columns[picked[k]];
      const std::byte* p =
          ts.columns[picked[k]].data() + static_cast<size_t>(i) * col.step_bytes();
      text += "  " + col.name + std::string(name_width - col.name.size() + 2, ' ') + types[k] +
              std::string(type_width - types[k].size() + 2, ' ') +
              ValuesText(col.dtype, col.shape, p) + "\n";
    }
  }
  if (first + n < t.length) {
    text += "more: show " + table->name() + " " + std::to_string(t.id) + " --first " +
            std::to_string(first + n) + "\n";
  }
  return Status::OK();
}

// ---- sample TABLE N [--seq L] [--column NAME]

Status SampleCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, OpenTable(shell, c));
  const TableSpec spec = table->spec();
  int64_t n = 0;
  int64_t L = 0;
  REPLAYDB_RETURN_IF_ERROR(ParseInteger(*c.spec, "N", c.args[1], 1, kMaxSample, &n));
  REPLAYDB_RETURN_IF_ERROR(
      IntFlag(c, "seq", 1, kMaxTrajectorySteps, spec.sequence_length, &L));
  std::vector<size_t> picked;
  REPLAYDB_RETURN_IF_ERROR(PickColumns(c, spec, &picked));
  SampleOptions options;
  options.peek = true;  // looking records nothing
  // Windows of another length are read from the items' trajectories.
  options.gather = L == spec.sequence_length;
  Result<SampleBatch> drawn = table->Sample(n, options);
  REPLAYDB_RETURN_IF_ERROR(Named(c, drawn.status()));
  const SampleBatch& batch = *drawn;

  // Per item: its window's real steps and, per column, where they are.
  std::vector<int64_t> real(static_cast<size_t>(n), 0);
  std::vector<TrajectorySteps> windows;
  if (options.gather) {
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t s = 0; s < L; ++s) real[b] += batch.mask[static_cast<size_t>(b * L + s)];
    }
  } else {
    windows.resize(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; ++b) {
      const ItemKey key = batch.keys[static_cast<size_t>(b)];
      REPLAYDB_RETURN_IF_ERROR(Named(c, table->ReadTrajectory(ItemKeyTrajectory(key),
                                                              ItemKeyStart(key), L,
                                                              &windows[b])));
      real[b] = static_cast<int64_t>(windows[b].step_priorities.size());
    }
  }
  const auto step_data = [&](size_t ci, int64_t b, int64_t s) -> const std::byte* {
    const size_t sb = spec.columns[ci].step_bytes();
    if (options.gather) {
      return batch.columns[ci].data() + static_cast<size_t>(b * L + s) * sb;
    }
    return windows[b].columns[ci].data() + static_cast<size_t>(s) * sb;
  };

  Json items = Json::array();
  for (int64_t b = 0; b < n; ++b) {
    const size_t i = static_cast<size_t>(b);
    items.push_back(Json{{"key", batch.keys[i]},
                         {"trajectory", ItemKeyTrajectory(batch.keys[i])},
                         {"start", ItemKeyStart(batch.keys[i])},
                         {"priority", batch.priorities[i]},
                         {"probability", batch.probabilities[i]},
                         {"times_sampled", static_cast<int64_t>(batch.times_sampled[i])},
                         {"real_steps", real[i]}});
  }
  Json columns = Json::array();
  Json column_view = Json::array();
  for (size_t ci : picked) {
    const ColumnSpec& col = spec.columns[ci];
    const int64_t per_step = col.shape.num_elements();
    const size_t es = DTypeSize(col.dtype);
    Stats stats;
    Json first_values = Json::array();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t s = 0; s < real[b]; ++s) {
        const std::byte* p = step_data(ci, b, s);
        for (int64_t e = 0; e < per_step; ++e) {
          const std::byte* v = p + static_cast<size_t>(e) * es;
          stats.Add(ElementValue(col.dtype, v));
          if (b == 0 && static_cast<int64_t>(first_values.size()) < kFirstValues) {
            first_values.push_back(ElementJson(col.dtype, v));
          }
        }
      }
    }
    const Shape batch_shape = col.shape.Prepend(L).Prepend(n);
    // min and max are values of the column: printed as its type prints them.
    const bool floating = col.dtype == DType::kF16 || col.dtype == DType::kBF16 ||
                          col.dtype == DType::kF32;
    const auto value = [&](double v) {
      return stats.count == 0 ? Json() : Json(floating ? ShortestFloat(static_cast<float>(v)) : v);
    };
    columns.push_back(Json{{"name", col.name},
                           {"dtype", DTypeName(col.dtype)},
                           {"shape", batch_shape.dims()},
                           {"min", value(stats.min)},
                           {"max", value(stats.max)},
                           {"mean", stats.Mean()},
                           {"first", first_values}});
    std::string firsts = JsonText(first_values);
    for (size_t pos = 0; (pos = firsts.find(',', pos)) != std::string::npos; pos += 2) {
      firsts.replace(pos, 1, ", ");
    }
    column_view.push_back(
        Json{{"name", col.name},
             {"shape", std::string(DTypeName(col.dtype)) + batch_shape.ToString()},
             {"min", JsonText(value(stats.min))},
             {"max", JsonText(value(stats.max))},
             {"mean", stats.count > 0 ? FormatDouble(stats.mean_value()) : "-"},
             {"first", firsts}});
  }
  Json item_view = Json::array();
  for (int64_t b = 0; b < n; ++b) {
    const size_t i = static_cast<size_t>(b);
    item_view.push_back(Json{{"key", batch.keys[i]},
                             {"trajectory", ItemKeyTrajectory(batch.keys[i])},
                             {"start", ItemKeyStart(batch.keys[i])},
                             {"priority", FormatDouble(batch.priorities[i])},
                             {"probability", FormatDouble(batch.probabilities[i])},
                             {"times_sampled", static_cast<int64_t>(batch.times_sampled[i])},
                             {"steps", real[i]}});
  }
  out->text = std::to_string(n) + " items of table '" + table->name() + "', windows of " +
              std::to_string(L) + " steps, drawn without taking (nothing recorded):\n" +
              RenderText(item_view) + "columns (statistics over real steps):\n" +
              RenderText(column_view);
  out->json = {{"table", table->name()},
               {"batch_size", n},
               {"sequence_length", L},
               {"note", "drawn without taking: nothing recorded; statistics over real steps"},
               {"items", std::move(items)},
               {"columns", std::move(columns)}};
  return Status::OK();
}

// ---- priorities TABLE [--bins N]

Status PrioritiesCommand(Shell& shell, const ParsedCommand& c, CommandOutput* out) {
  REPLAYDB_ASSIGN_OR_RETURN(std::shared_ptr<Table> table, OpenTable(shell, c));
  int64_t bins = 0;
  REPLAYDB_RETURN_IF_ERROR(IntFlag(c, "bins", 1, 1000, kDefaultBins, &bins));
  std::vector<ItemKey> keys;
  std::vector<double> priorities;
  REPLAYDB_RETURN_IF_ERROR(Named(c, table->ItemPriorities(&keys, &priorities)));
  Stats stats;
  int64_t zero = 0;
  for (double p : priorities) {
    stats.Add(p);
    zero += p == 0 ? 1 : 0;
  }
  out->json = {{"table", table->name()}, {"items", stats.count}, {"min", stats.Min()},
               {"max", stats.Max()},     {"mean", stats.Mean()}, {"zero", zero}};
  Json rows = Json::array();
  if (stats.count == 0) {
    out->json["bins"] = rows;
    out->text = "table '" + table->name() + "': no live items in the hot tier\n";
    return Status::OK();
  }
  // Equal widths over [min, max]; the last bin includes max. One bin when
  // every priority is the same.
  if (stats.max == stats.min) bins = 1;
  const double width = (stats.max - stats.min) / static_cast<double>(bins);
  std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
  for (double p : priorities) {
    int64_t bin = width > 0 ? static_cast<int64_t>((p - stats.min) / width) : 0;
    counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, bins - 1))] += 1;
  }
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<std::string> from_text;
  std::vector<std::string> to_text;
  size_t from_width = 0;
  size_t to_width = 0;
  for (int64_t i = 0; i < bins; ++i) {
    const double from = stats.min + width * static_cast<double>(i);
    const double to = i + 1 == bins ? stats.max : stats.min + width * static_cast<double>(i + 1);
    rows.push_back(Json{{"from", from}, {"to", to}, {"count", counts[i]}});
    from_text.push_back(FormatDouble(from));
    to_text.push_back(FormatDouble(to));
    from_width = std::max(from_width, from_text.back().size());
    to_width = std::max(to_width, to_text.back().size());
  }
  out->json["bins"] = std::move(rows);
  std::string& text = out->text;
  text = "table '" + table->name() + "': " + FormatCount(stats.count) +
         " live items, priority min " + FormatDouble(stats.min) + ", max " +
         FormatDouble(stats.max) + ", mean " + FormatDouble(stats.mean_value()) + ", " +
         FormatCount(zero) + " at 0\n";
  for (int64_t i = 0; i < bins; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int64_t bar = most > 0 ? (counts[k] * 40 + most - 1) / most : 0;
    text += "  [" + std::string(from_width - from_text[k].size(), ' ') + from_text[k] + ", " +
            to_text[k] + (i + 1 == bins ? "]" : ")") + std::string(to_width - to_text[k].size(), ' ') +
            "  " + std::string(12 - std::min<size_t>(12, FormatCount(counts[k]).size()), ' ') +
            FormatCount(counts[k]) + "  " + std::string(static_cast<size_t>(bar), '#') + "\n";
  }
  return Status::OK();
}

}  // namespace replaydb::tools
