// CRC32C two ways, chosen once per process:
//  - the CPU's crc32 instruction (x86-64 with SSE4.2), eight bytes per
//    instruction, in three independent chains over long inputs (the
//    instruction's latency is three times its issue interval): about
//    20 GB/s on one core, where one chain gives about 8;
//  - portable table-driven slicing-by-8: eight 256-entry tables let the main
//    loop fold eight input bytes per step with eight lookups and no bit loop.
//    Tables are computed at compile time. Loads are assembled byte by byte,
//    so the code is independent of alignment and host byte order.
#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define REPLAYDB_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace replaydb::util {
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

namespace internal {

uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
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

#ifdef REPLAYDB_CRC32C_X86
// The crc32 instruction takes 3 cycles but can start one every cycle, so one
// chain of them runs at a third of its speed. Long inputs therefore go as
// blocks of three equal lanes A, B, C, each with its own chain (A's from the
// running register, B's and C's from 0), joined by linearity: the register
// after A B C is Shift(Shift(a) ^ b) ^ c, where Shift(r) is the register
// after r has taken `lane` zero bytes. Shift is linear in r, so four
// 256-entry tables (one per byte of r) hold it; they are computed once from
// the instruction itself.
namespace {

struct ShiftTable {
  size_t lane = 0;  // bytes per lane, a multiple of 8
  std::array<std::array<uint32_t, 256>, 4> t{};

  uint32_t Shift(uint32_t r) const {
    return t[0][r & 0xFFu] ^ t[1][(r >> 8) & 0xFFu] ^ t[2][(r >> 16) & 0xFFu] ^ t[3][r >> 24];
  }
};

__attribute__((target("sse4.2"))) ShiftTable MakeShiftTable(size_t lane) {
  ShiftTable s;
  s.lane = lane;
  std::array<uint32_t, 32> basis{};  // Shift of each single bit
  for (int bit = 0; bit < 32; ++bit) {
    uint64_t reg = uint64_t{1} << bit;
    for (size_t i = 0; i < lane; i += 8) reg = _mm_crc32_u64(reg, 0);
    basis[static_cast<size_t>(bit)] = static_cast<uint32_t>(reg);
  }
  for (size_t byte = 0; byte < 4; ++byte) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t v = 0;
      for (int bit = 0; bit < 8; ++bit) {
        if ((b >> bit) & 1u) v ^= basis[byte * 8 + static_cast<size_t>(bit)];
      }
      s.t[byte][b] = v;
    }
  }
  return s;
}

__attribute__((target("sse4.2"))) inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // x86 is little-endian; memcpy keeps it alignment-free
  return v;
}

// Consumes whole blocks of 3 * table.lane bytes from (*p, *n).
__attribute__((target("sse4.2"))) uint32_t ThreeLanes(uint32_t reg, const ShiftTable& table,
                                                     const uint8_t** p, size_t* n) {
  const size_t lane = table.lane;
  while (*n >= 3 * lane) {
    const uint8_t* a = *p;
    const uint8_t* b = a + lane;
    const uint8_t* c = b + lane;
    uint64_t ra = reg, rb = 0, rc = 0;
    for (size_t i = 0; i < lane; i += 8) {
      ra = _mm_crc32_u64(ra, Load64(a + i));
      rb = _mm_crc32_u64(rb, Load64(b + i));
      rc = _mm_crc32_u64(rc, Load64(c + i));
    }
    reg = table.Shift(table.Shift(static_cast<uint32_t>(ra)) ^ static_cast<uint32_t>(rb)) ^
          static_cast<uint32_t>(rc);
    *p += 3 * lane;
    *n -= 3 * lane;
  }
  return reg;
}

}  // namespace

// The three-lane blocks of a long input; out of line, so that short inputs
// pay nothing for them.
__attribute__((target("sse4.2"), noinline)) static uint32_t LongInput(uint32_t reg, const uint8_t** p,
                                                              size_t* n) {
  static const ShiftTable kLong = MakeShiftTable(4096);
  static const ShiftTable kShort = MakeShiftTable(256);
  reg = ThreeLanes(reg, kLong, p, n);
  return ThreeLanes(reg, kShort, p, n);
}

__attribute__((target("sse4.2"))) static uint32_t ExtendSse42(uint32_t crc, const void* data,
                                                             size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t r = ~crc;
  if (n >= 3 * 256) r = LongInput(r, &p, &n);
  uint64_t reg = r;
  while (n >= 8) {
    reg = _mm_crc32_u64(reg, Load64(p));
    p += 8;
    n -= 8;
  }
  r = static_cast<uint32_t>(reg);
  while (n > 0) {
    r = _mm_crc32_u8(r, *p);
    ++p;
    --n;
  }
  return ~r;
}
#endif

bool Crc32cHardwareAvailable() {
#ifdef REPLAYDB_CRC32C_X86
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
#else
  return false;
#endif
}

uint32_t Crc32cExtendHardware(uint32_t crc, const void* data, size_t n) {
#ifdef REPLAYDB_CRC32C_X86
  if (Crc32cHardwareAvailable()) return ExtendSse42(crc, data, n);
#endif
  return Crc32cExtendPortable(crc, data, n);
}

}  // namespace internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  using Fn = uint32_t (*)(uint32_t, const void*, size_t);
  static const Fn fn = internal::Crc32cHardwareAvailable() ? &internal::Crc32cExtendHardware
                                                           : &internal::Crc32cExtendPortable;
  return fn(crc, data, n);
}

uint32_t Crc32c(const void* data, size_t n) {
  return Crc32cExtend(0, data, n);
}

}  // namespace replaydb::util
