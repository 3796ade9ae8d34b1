// util/checked_math.h against 128-bit arithmetic on fresh random operands of
// every magnitude, and at the edges of each type.
#include "util/checked_math.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

#include "tests/test_util.h"

namespace replaydb::util {
namespace {

// A random value of a random bit length, so that small and huge operands
// (and overflowing and fitting products) all come up.
uint64_t AnyMagnitude(std::mt19937_64& rng) { return rng() >> (rng() % 64); }

TEST(CheckedMathTest, MultiplyAndAddAgreeWith128BitArithmetic) {
  std::mt19937_64 rng(testing_util::TestSeed());
  using u128 = unsigned __int128;
  using i128 = __int128;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t a = AnyMagnitude(rng), b = AnyMagnitude(rng);
    uint64_t u = 0;
    const u128 product = static_cast<u128>(a) * b;
    ASSERT_EQ(CheckedMul(a, b, &u), product <= std::numeric_limits<uint64_t>::max()) << a << " " << b;
    if (product <= std::numeric_limits<uint64_t>::max()) {
      EXPECT_EQ(u, static_cast<uint64_t>(product));
    }
    EXPECT_EQ(SaturatingMul<uint64_t>(a, b),
              product <= std::numeric_limits<uint64_t>::max() ? static_cast<uint64_t>(product)
                                                              : std::numeric_limits<uint64_t>::max());
    const u128 sum = static_cast<u128>(a) + b;
    ASSERT_EQ(CheckedAdd(a, b, &u), sum <= std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(SaturatingAdd<uint64_t>(a, b),
              sum <= std::numeric_limits<uint64_t>::max() ? static_cast<uint64_t>(sum)
                                                          : std::numeric_limits<uint64_t>::max());
    // Signed operands into a signed result, either sign.
    const int64_t x = static_cast<int64_t>(AnyMagnitude(rng) >> 1) * (rng() % 2 ? 1 : -1);
    const int64_t y = static_cast<int64_t>(AnyMagnitude(rng) >> 1) * (rng() % 2 ? 1 : -1);
    int64_t s = 0;
    const i128 signed_product = static_cast<i128>(x) * y;
    const bool fits = signed_product >= std::numeric_limits<int64_t>::min() &&
                      signed_product <= std::numeric_limits<int64_t>::max();
    ASSERT_EQ(CheckedMul(x, y, &s), fits) << x << " " << y;
    if (fits) {
      EXPECT_EQ(s, static_cast<int64_t>(signed_product));
    }
  }
}

TEST(CheckedMathTest, Edges) {
  uint64_t u = 0;
  EXPECT_FALSE(CheckedMul(uint64_t{1} << 62, 4, &u));  // f32[2^62]: 2^64 bytes
  EXPECT_TRUE(CheckedMul(uint64_t{1} << 62, 3, &u));
  EXPECT_EQ(u, (uint64_t{1} << 62) * 3);
  // A negative operand does not fit an unsigned result.
  EXPECT_FALSE(CheckedMul(int64_t{-1}, 4, &u));
  int64_t s = 0;
  EXPECT_FALSE(CheckedMul(std::numeric_limits<int64_t>::min(), int64_t{-1}, &s));
  EXPECT_FALSE(CheckedAdd(std::numeric_limits<int64_t>::max(), 1, &s));
  EXPECT_EQ(SaturatingMul<size_t>(size_t{1} << 40, size_t{1} << 40),
            std::numeric_limits<size_t>::max());
  // The ceiling of capacity_steps = INT64_MAX in blocks of 64, which
  // (a + b - 1) / b computed as a negative number.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(CeilDiv(kMax, int64_t{64}), int64_t{1} << 57);
  EXPECT_EQ(CeilDiv(kMax, int64_t{1}), kMax);
  EXPECT_EQ(CeilDiv(int64_t{0}, int64_t{7}), 0);
  EXPECT_EQ(CeilDiv(int64_t{7}, int64_t{7}), 1);
  EXPECT_EQ(CeilDiv(int64_t{8}, int64_t{7}), 2);
}

TEST(CheckedMathTest, ShapeSizesSaturateInsteadOfWrapping) {
  EXPECT_EQ((Shape{int64_t{1} << 40, int64_t{1} << 40}.num_elements()),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}.num_elements()), int64_t{1} << 62);
  EXPECT_EQ((Shape{}.num_elements()), 1);
  EXPECT_EQ((ColumnSpec{"x", DType::kF32, Shape{int64_t{1} << 62}}.step_bytes()),
            std::numeric_limits<size_t>::max());
  EXPECT_EQ((ColumnSpec{"x", DType::kF32, Shape{-2}}.step_bytes()),
            std::numeric_limits<size_t>::max());
  TableSpec spec;
  spec.columns = {{"a", DType::kU8, Shape{int64_t{1} << 62}},
                  {"b", DType::kU8, Shape{int64_t{1} << 62}},
                  {"c", DType::kU8, Shape{int64_t{1} << 62}},
                  {"d", DType::kU8, Shape{int64_t{1} << 62}}};  // 2^64 together
  EXPECT_EQ(spec.step_bytes(), std::numeric_limits<size_t>::max());
  // A tensor of an overflowing shape throws rather than handing out a
  // small buffer.
  Tensor t;
  EXPECT_THROW(t.Reset(DType::kF32, Shape{int64_t{1} << 62}), std::bad_alloc);
}

}  // namespace
}  // namespace replaydb::util
