// RateLimiterSpec's factories and Validate() (declared in replaydb/options.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "replaydb/options.h"
#include "util/format.h"

namespace replaydb {

using util::FormatDouble;

namespace {

constexpr double kMaxDouble = std::numeric_limits<double>::max();


bool IsWhole(double v) {
  return std::isfinite(v) && std::floor(v) == v;
}

Status Invalid(const std::string& what) {
  return Status::InvalidArgument("rate limiter: " + what);
}

}  // namespace

RateLimiterSpec RateLimiterSpec::MinSize(int64_t min_size) {
  RateLimiterSpec spec;
  spec.samples_per_insert = 1.0;
  spec.min_size_to_sample = min_size;
  spec.min_diff = -kMaxDouble;
  spec.max_diff = kMaxDouble;
  return spec;
}

RateLimiterSpec RateLimiterSpec::SampleToInsertRatio(double samples_per_insert,
                                                     int64_t min_size_to_sample,
                                                     double error_buffer) {
  const double offset = samples_per_insert * static_cast<double>(min_size_to_sample);
  return SampleToInsertRatio(samples_per_insert, min_size_to_sample, offset - error_buffer,
                             offset + error_buffer);
}

RateLimiterSpec RateLimiterSpec::SampleToInsertRatio(double samples_per_insert,
                                                     int64_t min_size_to_sample, double min_diff,
                                                     double max_diff) {
  RateLimiterSpec spec;
  spec.samples_per_insert = samples_per_insert;
  spec.min_size_to_sample = min_size_to_sample;
  spec.min_diff = min_diff;
  spec.max_diff = max_diff;
  return spec;
}

RateLimiterSpec RateLimiterSpec::Queue(int64_t size) {
  return SampleToInsertRatio(1.0, 1, 0.0, static_cast<double>(size));
}

RateLimiterSpec RateLimiterSpec::Stack(int64_t size) {
  // The same limits as a queue; the LIFO selector makes it a stack.
  return Queue(size);
}

// The checks, in order:
//  1. samples_per_insert is finite and > 0; min_size_to_sample >= 1.
//  2. min_diff and max_diff are not NaN, min_diff <= max_diff, min_diff is
//     below +inf (samples would never run) and max_diff above -inf (inserts
//     would never run once the table holds min_size_to_sample items). The
//     unbounded sentinels +-numeric_limits<double>::max() count as +-inf.
//  3. The range is wide enough that from every error value an insert or a
//     one-item sample is allowed. Validate() cannot tell whether the spec came
//     from SampleToInsertRatio(error_buffer), so the rule is stated on the
//     range itself: max_diff - min_diff >= 2 * max(1, samples_per_insert),
//     i.e. Reverb's error_buffer >= max(1, samples_per_insert). An unbounded
//     side (MinSize, the defaults) makes the width infinite, so it passes.
//     One exception: with samples_per_insert == 1 and whole-number bounds the
//     error only takes whole values and a width of 1 already leaves a move
//     from every value; this keeps Queue(1) and Stack(1) valid. (For a spec
//     built from an error_buffer the exception never changes the outcome.)
//  4. min_diff <= samples_per_insert * min_size_to_sample: otherwise samples
//     stay blocked after the table reaches min_size_to_sample until further
//     inserts raise the error, which deadlocks a program that inserts and
//     samples from one thread (Reverb rejects this too).
Status RateLimiterSpec::Validate() const {
  if (!(samples_per_insert > 0) || !std::isfinite(samples_per_insert)) {
    return Invalid("samples_per_insert must be finite and > 0, got " +
                   FormatDouble(samples_per_insert));
  }
  if (min_size_to_sample < 1) {
    return Invalid("min_size_to_sample must be >= 1, got " + std::to_string(min_size_to_sample));
  }
  if (std::isnan(min_diff)) return Invalid("min_diff must be a number, got nan");
  if (std::isnan(max_diff)) return Invalid("max_diff must be a number, got nan");
  if (min_diff > max_diff) {
    return Invalid("min_diff (" + FormatDouble(min_diff) + ") must be <= max_diff (" +
                   FormatDouble(max_diff) + ")");
  }
  if (min_diff >= kMaxDouble) {
    return Invalid("min_diff must be below inf, got " + FormatDouble(min_diff) +
                   "; samples would block forever");
  }
  if (max_diff <= -kMaxDouble) {
    return Invalid("max_diff must be above -inf, got " + FormatDouble(max_diff) +
                   "; inserts would block forever once the table holds min_size_to_sample items");
  }

  const double width = max_diff - min_diff;  // +inf when a side is unbounded
  const std::string range =
      " (min_diff=" + FormatDouble(min_diff) + ", max_diff=" + FormatDouble(max_diff) + ")";
  if (samples_per_insert == 1.0 && IsWhole(min_diff) && IsWhole(max_diff)) {
    if (width < 1) {
      return Invalid("max_diff - min_diff = " + FormatDouble(width) +
                     " must be >= 1; a narrower range can block inserts and samples forever" +
                     range);
    }
  } else {
    const double min_buffer = std::max(1.0, samples_per_insert);
    if (width < 2 * min_buffer) {
      return Invalid("error_buffer (max_diff - min_diff) / 2 = " + FormatDouble(width / 2) +
                     " must be >= max(1, samples_per_insert) = " + FormatDouble(min_buffer) +
                     "; smaller values can block inserts and samples forever" + range);
    }
  }

  const double offset = samples_per_insert * static_cast<double>(min_size_to_sample);
  if (min_diff > offset) {
    return Invalid(
        "min_diff (" + FormatDouble(min_diff) +
        ") must be <= samples_per_insert * min_size_to_sample = " + FormatDouble(offset) +
        "; otherwise samples stay blocked once the table reaches "
        "min_size_to_sample items, which deadlocks a program that inserts and "
        "samples from one thread");
  }
  return Status::OK();
}

}  // namespace replaydb
