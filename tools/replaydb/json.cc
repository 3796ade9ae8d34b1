#include "tools/replaydb/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace replaydb::tools {
namespace {

constexpr auto kReplaceInvalidUtf8 = Json::error_handler_t::replace;

std::string NumberText(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  // The shortest text that reads back as the same double.
  for (int digits = 6; digits < 17; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof(shorter), "%.*g", digits, d);
    if (std::strtod(shorter, nullptr) == d) return shorter;
  }
  return buf;
}

// nlohmann writes the strings, integers, booleans and null; the doubles are
// written here. nlohmann's dump has no option for their format and would
// change the text: it writes 1.0 for 1 and 1000000.0 for 1e+06, and its
// Grisu2 digits are at times one longer than the shortest (0.8108320999999999
// for the float 0.8108321f, whose shortest text show and sample print).
void DumpTo(const Json& j, std::string* out) {
  switch (j.type()) {
    case Json::value_t::object: {
      *out += '{';
      bool first = true;
      for (const auto& member : j.items()) {
        if (!first) *out += ',';
        first = false;
        *out += Json(member.key()).dump(-1, ' ', false, kReplaceInvalidUtf8);
        *out += ':';
        DumpTo(member.value(), out);
      }
      *out += '}';
      return;
    }
    case Json::value_t::array: {
      *out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i > 0) *out += ',';
        DumpTo(j[i], out);
      }
      *out += ']';
      return;
    }
    case Json::value_t::number_float:
      *out += NumberText(j.get<double>());
      return;
    default:
      *out += j.dump(-1, ' ', false, kReplaceInvalidUtf8);
  }
}

}  // namespace

std::string DumpJson(const Json& j) {
  std::string out;
  DumpTo(j, &out);
  return out;
}

std::string JsonText(const Json& j) {
  if (j.is_string()) return j.get_ref<const std::string&>();
  if (j.is_null()) return "-";
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  }
  return DumpJson(j);
}

}  // namespace replaydb::tools
