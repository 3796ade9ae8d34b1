#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace replaydb::util {
namespace {

// Bit-at-a-time CRC32C straight from the definition, to check the tables.
uint32_t ReferenceCrc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

TEST(Crc32cTest, CheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(Crc32c(s.data(), s.size()), 0xE3069283u);
}

TEST(Crc32cTest, Empty) {
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  EXPECT_EQ(Crc32cExtend(0x12345678u, nullptr, 0), 0x12345678u);
}

// RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, Rfc3720Vectors) {
  std::vector<uint8_t> buf(32, 0x00);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x8A9136AAu);

  buf.assign(32, 0xFF);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x62A8AB43u);

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x46DD794Eu);

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x113FDB5Cu);

  const uint8_t iscsi_read_command[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(Crc32c(iscsi_read_command, sizeof(iscsi_read_command)), 0xD9963A56u);
}

TEST(Crc32cTest, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(300);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; offset + n <= buf.size(); ++n) {
      ASSERT_EQ(Crc32c(buf.data() + offset, n), ReferenceCrc32c(buf.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
}

// Both implementations against the reference, on fresh random bytes at every
// length and alignment up to a few hundred bytes and a few larger sizes. On a
// CPU without the instruction the "hardware" one is the tables again.
TEST(Crc32cTest, PortableAndHardwareAgreeWithTheReference) {
  std::random_device seed;
  std::mt19937_64 rng(seed());
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 260; ++n) lengths.push_back(n);
  // Around the three-lane blocks (3 x 256 and 3 x 4096 bytes) and their mixes.
  for (size_t n : {767, 768, 769, 775, 776, 1536, 1543, 4095, 4096, 12287, 12288, 12289,
                   12288 + 768 + 7, 16384, 16384 + 9, 65536 + 7}) {
    lengths.push_back(n);
  }
  for (int i = 0; i < 20; ++i) lengths.push_back(static_cast<size_t>(rng() % 60000));
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      const uint8_t* p = buf.data() + offset;
      const uint32_t want = ReferenceCrc32c(p, n);
      const uint32_t start = static_cast<uint32_t>(rng());
      ASSERT_EQ(internal::Crc32cExtendPortable(0, p, n), want) << offset << " " << n;
      ASSERT_EQ(internal::Crc32cExtendHardware(0, p, n), want) << offset << " " << n;
      ASSERT_EQ(internal::Crc32cExtendHardware(start, p, n),
                internal::Crc32cExtendPortable(start, p, n))
          << offset << " " << n;
    }
  }
  RecordProperty("hardware", internal::Crc32cHardwareAvailable() ? "yes" : "no");
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplit) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(97);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  for (size_t split = 0; split <= buf.size(); ++split) {
    const uint32_t first = Crc32c(buf.data(), split);
    EXPECT_EQ(Crc32cExtend(first, buf.data() + split, buf.size() - split), whole) << split;
  }
  EXPECT_EQ(Crc32cExtend(0, buf.data(), buf.size()), whole);
}

TEST(Crc32cTest, DetectsEverySingleBitFlip) {
  std::string s = "replaydb catalog bytes";
  const uint32_t original = Crc32c(s.data(), s.size());
  for (size_t i = 0; i < s.size() * 8; ++i) {
    s[i / 8] = static_cast<char>(s[i / 8] ^ (1 << (i % 8)));
    EXPECT_NE(Crc32c(s.data(), s.size()), original) << "bit " << i;
    s[i / 8] = static_cast<char>(s[i / 8] ^ (1 << (i % 8)));
  }
}

}  // namespace
}  // namespace replaydb::util
