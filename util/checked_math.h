// Overflow-checked integer arithmetic for sizes a caller chooses (shapes,
// capacities, batch and sequence lengths, environment counts): every size
// computed from user input goes through these, so that an overflow is
// reported as such instead of wrapping into a small or negative number that
// passes the checks after it.
//
//   uint64_t bytes;
//   if (!util::CheckedMul(steps, step_bytes, &bytes)) return TooLarge(...);
//
// The operands may be of different integer types; the result is computed as
// if in infinite precision and then checked against the type of *out
// (GCC's and Clang's __builtin_*_overflow).
#ifndef REPLAYDB_UTIL_CHECKED_MATH_H_
#define REPLAYDB_UTIL_CHECKED_MATH_H_

#include <limits>
#include <type_traits>

namespace replaydb::util {

// *out = a * b; false (and *out unspecified) when the product does not fit.
template <typename A, typename B, typename R>
[[nodiscard]] constexpr bool CheckedMul(A a, B b, R* out) {
  static_assert(std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<R>);
  return !__builtin_mul_overflow(a, b, out);
}

// *out = a + b; false (and *out unspecified) when the sum does not fit.
template <typename A, typename B, typename R>
[[nodiscard]] constexpr bool CheckedAdd(A a, B b, R* out) {
  static_assert(std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<R>);
  return !__builtin_add_overflow(a, b, out);
}

// a * b, or the largest R when it does not fit. For non-negative operands
// (sizes), where "too large" is the only way to overflow: the result then
// fails every limit it is compared with.
template <typename R, typename A, typename B>
[[nodiscard]] constexpr R SaturatingMul(A a, B b) {
  R out{};
  return CheckedMul(a, b, &out) ? out : std::numeric_limits<R>::max();
}

// a + b, or the largest R when it does not fit (non-negative operands).
template <typename R, typename A, typename B>
[[nodiscard]] constexpr R SaturatingAdd(A a, B b) {
  R out{};
  return CheckedAdd(a, b, &out) ? out : std::numeric_limits<R>::max();
}

// ceil(a / b) without the overflow of (a + b - 1) / b.
// REQUIRES: a >= 0, b > 0
template <typename T>
[[nodiscard]] constexpr T CeilDiv(T a, T b) {
  static_assert(std::is_integral_v<T>);
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_CHECKED_MATH_H_
