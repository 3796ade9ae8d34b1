// A small, fast pseudo-random generator (xoshiro256**) for sampling.
// Not thread-safe: each user owns one (a table keeps one under its mutex).
#ifndef REPLAYDB_UTIL_RANDOM_H_
#define REPLAYDB_UTIL_RANDOM_H_

#include <cstdint>

namespace replaydb::util {

class Random {
 public:
  // Seeds the four state words from `seed` through splitmix64.
  explicit Random(uint64_t seed);
  // Seeded from std::random_device.
  static Random FromEntropy();

  uint64_t Next();
  // Uniform in [0, n) without modulo bias. REQUIRES: n > 0
  uint64_t Uniform(uint64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble();

 private:
  friend class RandomTestPeer;  // tests/util/random_test.cc: sets and reads the state

  uint64_t s_[4];
};

}  // namespace replaydb::util

#endif  // REPLAYDB_UTIL_RANDOM_H_
