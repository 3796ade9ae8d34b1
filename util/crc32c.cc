// Table-driven CRC32C, slicing-by-8: eight 256-entry tables let the main loop
// fold eight input bytes per step with eight lookups and no bit loop. Tables
// are computed at compile time. Loads are assembled byte by byte, so the code
// is independent of alignment and host byte order.
#include "util/crc32c.h"

#include <array>

namespace replaydb {
namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0][b] is the CRC register after shifting byte b through a zero
// register; tables[k][b] is the same for b followed by k zero bytes.
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kReflectedPolynomial : 0u);
    t[0][b] = crc;
  }
  for (size_t k = 1; k < t.size(); ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t prev = t[k - 1][b];
      t[k][b] = (prev >> 8) ^ t[0][prev & 0xFFu];
    }
  }
  return t;
}

constexpr Tables kTables = MakeTables();
static_assert(kTables[0][1] == 0xF26B8303u, "CRC32C table generation");
static_assert(kTables[0][128] == kReflectedPolynomial, "CRC32C table generation");

inline uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t reg = ~crc;
  while (n >= 8) {
    const uint32_t lo = LoadLe32(p) ^ reg;
    const uint32_t hi = LoadLe32(p + 4);
    reg = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
          kTables[4][lo >> 24] ^ kTables[3][hi & 0xFFu] ^ kTables[2][(hi >> 8) & 0xFFu] ^
          kTables[1][(hi >> 16) & 0xFFu] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    reg = (reg >> 8) ^ kTables[0][(reg ^ *p) & 0xFFu];
    ++p;
    --n;
  }
  return ~reg;
}

uint32_t Crc32c(const void* data, size_t n) {
  return Crc32cExtend(0, data, n);
}

}  // namespace replaydb
