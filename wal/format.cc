// Segment file names (wal/format.h).
#include "wal/format.h"

#include <cstdio>

namespace replaydb::wal {

namespace {
constexpr size_t kDigits = 20;
constexpr std::string_view kSuffix = ".log";
}  // namespace

std::string SegmentFileName(uint64_t number) {
  char buf[kDigits + 1];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(number));
  std::string name(buf, kDigits);
  name += kSuffix;
  return name;
}

bool ParseSegmentFileName(std::string_view name, uint64_t* number) {
  if (name.size() != kDigits + kSuffix.size() || !name.ends_with(kSuffix)) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < kDigits; ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;  // past 2^64 - 1
    value = value * 10 + digit;
  }
  *number = value;
  return true;
}

}  // namespace replaydb::wal
