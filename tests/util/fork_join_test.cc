// ForkJoin: every part of every run is called once, on its own thread but
// the caller's part 0, and what the parts wrote is seen by the caller when
// Run returns (ThreadSanitizer checks the ordering); runs after the workers
// went to sleep; Share splits a range exactly; AutoParts' bounds;
// CopyRanges copies every byte once.
#include "util/fork_join.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <set>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "util/random.h"

namespace replaydb::util {
namespace {

TEST(ForkJoinTest, EveryPartRunsOnceAndTheCallerSeesItsWrites) {
  for (int parts : {1, 2, 3, 5}) {
    SCOPED_TRACE("parts " + std::to_string(parts));
    ForkJoin fj(parts);
    ASSERT_EQ(fj.parts(), parts);
    std::vector<int64_t> written(static_cast<size_t>(parts), -1);  // plain, not atomic
    std::vector<std::thread::id> threads(static_cast<size_t>(parts));
    std::vector<int64_t> calls(static_cast<size_t>(parts), 0);
    for (int64_t run = 0; run < 300; ++run) {
      auto fn = [&](int part) {
        written[static_cast<size_t>(part)] = run;
        threads[static_cast<size_t>(part)] = std::this_thread::get_id();
        ++calls[static_cast<size_t>(part)];
      };
      fj.Run(fn);
      for (int p = 0; p < parts; ++p) ASSERT_EQ(written[static_cast<size_t>(p)], run) << "part " << p;
      ASSERT_EQ(threads[0], std::this_thread::get_id());
    }
    std::set<std::thread::id> distinct(threads.begin(), threads.end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(parts));
    for (int p = 0; p < parts; ++p) EXPECT_EQ(calls[static_cast<size_t>(p)], 300);
  }
}

TEST(ForkJoinTest, RunsAfterTheWorkersWentToSleep) {
  ForkJoin fj(3);
  std::vector<int> seen(3, 0);
  for (int round = 1; round <= 3; ++round) {
    // Well past the spin: the workers wait in the futex.
    std::this_thread::sleep_for(std::chrono::microseconds(ForkJoin::kSpinMicros * 20));
    auto fn = [&](int part) { seen[static_cast<size_t>(part)] = round; };
    fj.Run(fn);
    for (int p = 0; p < 3; ++p) EXPECT_EQ(seen[static_cast<size_t>(p)], round);
  }
}

TEST(ForkJoinTest, ShareSplitsARangeExactly) {
  Random rng(testing_util::TestSeed());
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = rng.Uniform(5000);
    const int parts = 1 + static_cast<int>(rng.Uniform(12));
    size_t expect_begin = 0;
    for (int p = 0; p < parts; ++p) {
      size_t begin = 0;
      size_t end = 0;
      ForkJoin::Share(n, p, parts, &begin, &end);
      ASSERT_EQ(begin, expect_begin) << "n " << n << " part " << p << " of " << parts;
      ASSERT_LE(end - begin, n / static_cast<size_t>(parts) + 1);
      ASSERT_GE(end - begin, n / static_cast<size_t>(parts));
      expect_begin = end;
    }
    ASSERT_EQ(expect_begin, n);
  }
}

TEST(ForkJoinTest, AutoPartsStaysWithinItsBounds) {
  const int by_machine = std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
  EXPECT_EQ(AutoParts(1), 1);
  EXPECT_EQ(AutoParts(2 * kMinEnvsPerPart - 1), 1);
  EXPECT_EQ(AutoParts(2 * kMinEnvsPerPart), std::min(2, by_machine));
  EXPECT_EQ(AutoParts(4096), std::min(8, by_machine));
  EXPECT_EQ(AutoParts(1 << 20), std::min(kMaxAutoParts, by_machine));
}

// CopyRanges: random ranges (empty ones, one range of megabytes, many
// small ones, totals on either side of the split threshold) land byte for
// byte, whatever the parts, and nothing between the destinations is touched.
TEST(ForkJoinTest, CopyRangesCopiesEveryByteOnce) {
  Random rng(testing_util::TestSeed());
  for (int parts : {1, 2, 3, 8}) {
    ForkJoin fj(parts);
    for (int trial = 0; trial < 12; ++trial) {
      SCOPED_TRACE("parts " + std::to_string(parts) + " trial " + std::to_string(trial));
      const size_t num_ranges = trial % 3 == 0 ? 1 : 1 + rng.Uniform(40);
      const size_t most = trial % 2 == 0 ? (size_t{3} << 20) : (size_t{64} << 10);
      std::vector<size_t> sizes(num_ranges);
      for (size_t& n : sizes) n = rng.Uniform(4) == 0 ? 0 : rng.Uniform(most + 1);
      size_t total = 0;
      for (size_t n : sizes) total += n;
      // Destinations one guard byte apart, in one poisoned buffer.
      std::vector<std::byte> src(total);
      for (auto& b : src) b = static_cast<std::byte>(rng.Next());
      std::vector<std::byte> dst(total + num_ranges, std::byte{0xA5});
      std::vector<CopyRange> ranges;
      size_t at_src = 0;
      size_t at_dst = 0;
      for (size_t n : sizes) {
        ranges.push_back({dst.data() + at_dst, src.data() + at_src, n});
        at_src += n;
        at_dst += n + 1;
      }
      CopyRanges(trial % 4 == 3 ? nullptr : &fj, ranges);
      at_src = 0;
      at_dst = 0;
      for (size_t r = 0; r < num_ranges; ++r) {
        // (std::equal: the source of all-empty ranges has no data pointer.)
        ASSERT_TRUE(std::equal(src.begin() + static_cast<ptrdiff_t>(at_src),
                               src.begin() + static_cast<ptrdiff_t>(at_src + sizes[r]),
                               dst.begin() + static_cast<ptrdiff_t>(at_dst)))
            << "range " << r << " of " << sizes[r] << " bytes";
        ASSERT_EQ(dst[at_dst + sizes[r]], std::byte{0xA5}) << "the byte after range " << r;
        at_src += sizes[r];
        at_dst += sizes[r] + 1;
      }
    }
  }
}

}  // namespace
}  // namespace replaydb::util
