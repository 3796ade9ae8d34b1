#include "tools/replaydb/tool_util.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "replaydb/types.h"

namespace replaydb::tools {
namespace {

// printf into a std::string.
template <typename... Args>
std::string Printf(const char* format, Args... args) {
  char buf[128];
  const int n = std::snprintf(buf, sizeof(buf), format, args...);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, args...);
  out.resize(static_cast<size_t>(n));
  return out;
}

// Three significant digits of a value in [1, 1000).
std::string ThreeDigits(double v) {
  if (v >= 100) return Printf("%.0f", v);
  if (v >= 10) return Printf("%.1f", v);
  return Printf("%.2f", v);
}

// Splits `value` into a mantissa in [1, 1000) and an SI prefix.
std::string SiParts(double value, std::string_view* prefix) {
  static constexpr std::string_view kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  const bool negative = value < 0;
  double v = std::fabs(value);
  size_t p = 0;
  while (v >= 999.5 && p + 1 < std::size(kPrefixes)) {
    v /= 1000;
    ++p;
  }
  *prefix = kPrefixes[p];
  std::string digits;
  if (p == 0 && v == std::floor(v)) {
    digits = Printf("%.0f", v);
  } else {
    digits = ThreeDigits(v);
  }
  return negative ? "-" + digits : digits;
}

void AddLine(std::string* out, std::string_view indent, std::string_view key,
             const std::string& value) {
  out->append(indent);
  out->append(key);
  out->append(": ");
  // Align values in one column: the longest key, "rate_limiter.blocked_samples",
  // is 28 characters.
  if (key.size() < 28) out->append(28 - key.size(), ' ');
  out->append(value);
  out->push_back('\n');
}

}  // namespace

Status ParseFlags(std::span<const std::string> args, std::span<const FlagSpec> flags,
                  std::vector<std::string>* positional) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      positional->insert(positional->end(), args.begin() + static_cast<ptrdiff_t>(i) + 1,
                         args.end());
      return Status::OK();
    }
    std::string_view name;
    std::string_view inline_value;
    bool has_inline_value = false;
    if (arg == "-h") {
      name = "help";
    } else if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
      name = std::string_view(arg).substr(2);
      if (size_t eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline_value = true;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      return Status::InvalidArgument("unknown flag '" + arg + "'");
    } else {
      positional->push_back(arg);
      continue;
    }

    const FlagSpec* flag = nullptr;
    for (const FlagSpec& f : flags) {
      if (f.name == name) {
        flag = &f;
        break;
      }
    }
    if (flag == nullptr) return Status::InvalidArgument("unknown flag '" + arg + "'");
    if (flag->value == nullptr) {
      if (has_inline_value) {
        return Status::InvalidArgument("flag '--" + std::string(name) + "' takes no value");
      }
    } else if (has_inline_value) {
      *flag->value = std::string(inline_value);
    } else {
      if (i + 1 >= args.size()) {
        return Status::InvalidArgument("flag '--" + std::string(name) + "' needs a value");
      }
      *flag->value = args[++i];
    }
    if (flag->present != nullptr) *flag->present = true;
  }
  return Status::OK();
}

std::string FormatBytes(double bytes) {
  static constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  size_t u = 0;
  while (std::fabs(v) >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  std::string out = u == 0 ? Printf("%.0f", v) : ThreeDigits(std::fabs(v));
  if (u != 0 && v < 0) out = "-" + out;
  out.push_back(' ');
  out.append(kUnits[u]);
  return out;
}

std::string FormatCount(int64_t n) {
  const bool negative = n < 0;
  // Work on the unsigned magnitude so that INT64_MIN does not overflow.
  uint64_t m = negative ? uint64_t{0} - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(m);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3 + 1);
  if (negative) out.push_back('-');
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string FormatSi(double value) {
  if (!std::isfinite(value)) return FormatDouble(value);
  std::string_view prefix;
  std::string digits = SiParts(value, &prefix);
  if (prefix.empty()) return digits;
  return digits + " " + std::string(prefix);
}

std::string FormatRate(double per_second, std::string_view unit) {
  if (!std::isfinite(per_second)) return FormatDouble(per_second) + " " + std::string(unit);
  std::string_view prefix;
  std::string digits = SiParts(per_second, &prefix);
  // A prefix binds to a unit symbol ("GB/s") but reads badly on a word.
  const bool symbol = !unit.empty() && unit[0] == 'B';
  std::string out = digits + " " + std::string(prefix);
  if (!prefix.empty() && !symbol) out.push_back(' ');
  out.append(unit);
  return out;
}

std::string FormatDouble(double value) {
  if (value >= std::numeric_limits<double>::max()) return "inf";
  if (value <= -std::numeric_limits<double>::max()) return "-inf";
  if (std::isnan(value)) return "nan";
  return Printf("%.6g", value);
}

std::string FormatColumn(const ColumnSpec& column) {
  std::string shape = column.shape.ToString();
  // Shape::ToString() is "[8]" or "[]"; drop the space after commas so the
  // column reads as one token: "obs f32[84,84,3]".
  std::string compact;
  for (char c : shape) {
    if (c != ' ') compact.push_back(c);
  }
  return column.name + " " + std::string(DTypeName(column.dtype)) + compact;
}

std::string FormatRateLimiterSpec(const RateLimiterSpec& spec) {
  return "samples_per_insert=" + FormatDouble(spec.samples_per_insert) +
         " min_size_to_sample=" + std::to_string(spec.min_size_to_sample) +
         " min_diff=" + FormatDouble(spec.min_diff) + " max_diff=" + FormatDouble(spec.max_diff);
}

std::string FormatTableSpec(const TableSpec& spec, std::string_view indent) {
  std::string out;
  AddLine(&out, indent, "name", spec.name);
  for (size_t c = 0; c < spec.columns.size(); ++c) {
    AddLine(&out, indent, "column " + std::to_string(c), FormatColumn(spec.columns[c]));
  }
  AddLine(&out, indent, "step_bytes", FormatBytes(static_cast<double>(spec.step_bytes())));
  if (spec.capacity_steps > 0) {
    AddLine(&out, indent, "capacity_steps", FormatCount(spec.capacity_steps));
  } else {
    AddLine(&out, indent, "capacity_bytes", FormatBytes(static_cast<double>(spec.capacity_bytes)));
  }
  AddLine(&out, indent, "block_steps", FormatCount(spec.block_steps));
  AddLine(&out, indent, "sequence_length", FormatCount(spec.sequence_length));
  AddLine(&out, indent, "padding", std::string(PaddingName(spec.padding)));
  AddLine(&out, indent, "selector", std::string(SelectorKindName(spec.selector)));
  AddLine(&out, indent, "eviction", std::string(EvictionPolicyName(spec.eviction)));
  AddLine(&out, indent, "priority_exponent", FormatDouble(spec.priority_exponent));
  AddLine(&out, indent, "step_priority", std::string(StepPriorityName(spec.step_priority)));
  AddLine(&out, indent, "priority_device",
          spec.priority_device < 0 ? std::string("-1 (host)")
                                   : "CUDA device " + std::to_string(spec.priority_device));
  AddLine(&out, indent, "placement", spec.placement.ToString());
  AddLine(&out, indent, "logging", std::string(TableLoggingName(spec.logging)));
  AddLine(&out, indent, "acks",
          AcksName(spec.acks) + " (max_lag " + std::to_string(spec.max_lag_ms) + " ms)");
  AddLine(&out, indent, "spill", spec.spill ? "on" : "off");
  AddLine(&out, indent, "rotation",
          spec.rotation_every_samples == 0
              ? std::string("off")
              : FormatDouble(spec.rotation_fraction) + " of the hot tier every " +
                    FormatCount(spec.rotation_every_samples) + " samples");
  AddLine(&out, indent, "max_times_sampled",
          spec.max_times_sampled == 0 ? std::string("0 (unlimited)")
                                      : FormatCount(spec.max_times_sampled));
  AddLine(&out, indent, "lanes",
          spec.lanes == 1 ? std::string("1")
                          : FormatCount(spec.lanes) + " (a vector table: an item per environment)");
  AddLine(&out, indent, "rate_limiter", FormatRateLimiterSpec(spec.rate_limiter));
  return out;
}

std::string FormatTableInfo(const TableInfo& info, std::string_view indent) {
  std::string out;
  AddLine(&out, indent, "name", info.name);
  AddLine(&out, indent, "num_steps", FormatCount(info.num_steps));
  AddLine(&out, indent, "num_items", FormatCount(info.num_items));
  AddLine(&out, indent, "num_trajectories",
          FormatCount(info.num_trajectories) + " (" + FormatCount(info.num_open_trajectories) +
              " open)");
  AddLine(&out, indent, "bytes_used",
          FormatBytes(static_cast<double>(info.bytes_used)) + " of " +
              FormatBytes(static_cast<double>(info.bytes_capacity)));
  AddLine(&out, indent, "blocks_used",
          FormatCount(info.blocks_used) + " of " + FormatCount(info.blocks_capacity));
  AddLine(&out, indent, "steps_inserted", FormatCount(info.steps_inserted));
  AddLine(&out, indent, "items_inserted", FormatCount(info.items_inserted));
  AddLine(&out, indent, "items_sampled", FormatCount(info.items_sampled));
  AddLine(&out, indent, "items_removed", FormatCount(info.items_removed));
  AddLine(&out, indent, "evicted_trajectories", FormatCount(info.evicted_trajectories));
  AddLine(&out, indent, "evicted_items", FormatCount(info.evicted_items));
  AddLine(&out, indent, "priority_updates",
          FormatCount(info.priority_updates) + " (" + FormatCount(info.priority_updates_skipped) +
              " skipped)");
  AddLine(&out, indent, "max_priority_seen", FormatDouble(info.max_priority_seen));
  AddLine(&out, indent, "cold_trajectories",
          FormatCount(info.cold_trajectories) + " (" + FormatCount(info.cold_steps) + " steps, " +
              FormatBytes(static_cast<double>(info.cold_bytes)) + ")");
  AddLine(&out, indent, "spilled_trajectories",
          FormatCount(info.spilled_trajectories) + " (" +
              FormatBytes(static_cast<double>(info.spilled_bytes)) + "; " +
              FormatCount(info.spill_queue) + " queued)");
  AddLine(&out, indent, "loaded_trajectories", FormatCount(info.loaded_trajectories));
  AddLine(&out, indent, "rotations", FormatCount(info.rotations));
  const RateLimiterInfo& rl = info.rate_limiter;
  AddLine(&out, indent, "rate_limiter", FormatRateLimiterSpec(rl.spec));
  AddLine(&out, indent, "rate_limiter.inserts", FormatCount(rl.inserts));
  AddLine(&out, indent, "rate_limiter.samples", FormatCount(rl.samples));
  AddLine(&out, indent, "rate_limiter.deletes", FormatCount(rl.deletes));
  AddLine(&out, indent, "rate_limiter.blocked_inserts", FormatCount(rl.blocked_inserts));
  AddLine(&out, indent, "rate_limiter.blocked_samples", FormatCount(rl.blocked_samples));
  return out;
}

}  // namespace replaydb::tools
