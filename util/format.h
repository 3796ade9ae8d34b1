// Number formatting shared by messages.
#ifndef REPLAYDB_UTIL_FORMAT_H_
#define REPLAYDB_UTIL_FORMAT_H_

#include <charconv>
#include <limits>
#include <string>
#include <string_view>

namespace replaydb::util {

// `s` in single quotes, as messages name tables, columns and files: 'obs'.
inline std::string Quoted(std::string_view s) {
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) about the
  // temporary that "'" + std::string(s) makes.
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

// `v` with up to 10 significant digits ("1.5", "10", "1e-05"; rounding noise
// such as 1.4000000000000004 prints as "1.4"); the unbounded sentinels (+-max
// and +-inf) print as "inf" and "-inf".
inline std::string FormatDouble(double v) {
  constexpr double kMax = std::numeric_limits<double>::max();
  if (v >= kMax) return "inf";
  if (v <= -kMax) return "-inf";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 10);
  return std::string(buf, result.ptr);
}

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_FORMAT_H_
