#include "util/random.h"

#include <chrono>
#include <random>

namespace replaydb::util {

namespace {

// splitmix64: advances `state` and returns the next output. Used only to
// spread a 64-bit seed over xoshiro's 256 bits of state.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t RotateLeft(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

Random::Random(uint64_t seed) {
  // splitmix64 never yields four zero words in a row, so the state is never
  // the all-zero fixed point of xoshiro.
  for (uint64_t& word : s_) word = SplitMix64(seed);
}

Random Random::FromEntropy() {
  std::random_device device;
  uint64_t seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  // Some platforms' random_device is deterministic; the clock makes two
  // generators created one after the other differ there too.
  seed ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return Random(seed);
}

uint64_t Random::Next() {
  // xoshiro256** 1.0 (Blackman and Vigna).
  const uint64_t result = RotateLeft(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = RotateLeft(s_[3], 45);
  return result;
}

uint64_t Random::Uniform(uint64_t n) {
  // Lemire, "Fast Random Integer Generation in an Interval" (2019): the high
  // word of x * n is in [0, n); rejecting the low words below 2^64 mod n
  // leaves every result with exactly floor(2^64 / n) preimages.
  unsigned __int128 product = static_cast<unsigned __int128>(Next()) * n;
  uint64_t low = static_cast<uint64_t>(product);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    while (low < threshold) {
      product = static_cast<unsigned __int128>(Next()) * n;
      low = static_cast<uint64_t>(product);
    }
  }
  return static_cast<uint64_t>(product >> 64);
}

double Random::NextDouble() {
  // The top 53 bits, scaled by 2^-53: every multiple of 2^-53 in [0, 1).
  return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

}  // namespace replaydb::util
