// The draw-scaling benches: how a sample's time grows with the table.
//
//   sample_scale   p50 microseconds of Sample(B=256) of windows of L=32
//                  steps of 16 B (one u8[16] column), uniform and
//                  prioritized, from a table of 1M, 10M and 50M
//                  steps in trajectories of 1024 steps (the hot tier holds
//                  all of them, unlogged), against the same run's floor: the
//                  minimal design, one random read of a window's 512 bytes
//                  from an array of the same steps per draw, copied into a
//                  batch (p50 microseconds per batch of 256). ratio = value
//                  / floor; the target (issue 37) is ratio <= 2 at 50M.
//
// The tables are made once per size and selector: a fill of 50M steps
// takes seconds.
#include <algorithm>
#include <random>
#include <vector>

#include "tools/replaydb/bench/bench_common.h"

namespace replaydb::tools {
namespace {

constexpr int64_t kStepBytes = 16;
constexpr int64_t kScaleTrajectorySteps = 1024;
constexpr int64_t kScaleBatch = 256;
constexpr int64_t kScaleL = 32;

// The median of `samples` (sorted in place).
double Median(std::vector<double>* samples) {
  std::sort(samples->begin(), samples->end());
  return (*samples)[samples->size() / 2];
}

// p50 microseconds of `call`, timed one call at a time for `duration`
// (and at least 16 calls).
Result<double> P50(Seconds duration, const std::function<Status()>& call) {
  std::vector<double> micros;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(duration);
  while (micros.size() < 16 || Clock::now() < end) {
    const Clock::time_point start = Clock::now();
    Status s = call();
    if (!s.ok()) return s;
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return Median(&micros);
}

Result<BenchResult> RunSampleScale(DB* db, const Timing& timing, int64_t steps,
                                   SelectorKind selector) {
  TableSpec spec;
  spec.name = "bench_sample_scale";
  spec.columns = {{"data", DType::kU8, Shape{kStepBytes}}};
  spec.sequence_length = kScaleL;
  spec.padding = Padding::kNone;
  spec.selector = selector;
  spec.capacity_steps = steps + kScaleTrajectorySteps;
  spec.block_steps = kScaleTrajectorySteps;
  return WithTable(db, spec, [&](Table* table) -> Result<BenchResult> {
    const int64_t trajectories = steps / kScaleTrajectorySteps;
    {
      WriterOptions options;
      options.timeout = kCallTimeout;
      auto writer_or = table->NewWriter(options);
      if (!writer_or.ok()) return writer_or.status().WithContext("NewWriter");
      std::unique_ptr<TrajectoryWriter> writer = std::move(writer_or).value();
      std::vector<std::byte> src(static_cast<size_t>(kScaleTrajectorySteps * kStepBytes));
      FillPattern(src.data(), src.size(), 5);
      std::vector<double> priorities(static_cast<size_t>(kScaleTrajectorySteps));
      std::mt19937_64 rng(7);
      const ConstTensor t{DType::kU8, Shape{kScaleTrajectorySteps, kStepBytes}, src.data(),
                          src.size()};
      for (int64_t i = 0; i < trajectories; ++i) {
        for (double& p : priorities) p = 0.1 + static_cast<double>(rng() % 1000);
        Status s = writer->AppendMany(std::span<const ConstTensor>(&t, 1),
                                      selector == SelectorKind::kPrioritized
                                          ? std::span<const double>(priorities)
                                          : std::span<const double>());
        if (!s.ok()) return s.WithContext("fill: AppendMany");
        s = writer->End(EndReason::kTerminal);
        if (!s.ok()) return s.WithContext("fill: End");
      }
    }
    SampleBatch batch;
    SampleOptions options;
    options.timeout = kCallTimeout;
    const auto sample = [&] { return table->Sample(kScaleBatch, options, &batch); };
    Result<double> warm = P50(timing.duration / 4, sample);
    if (!warm.ok()) return warm.status().WithContext("warm-up");
    std::vector<double> runs;
    for (int r = 0; r < timing.repetitions; ++r) {
      Result<double> p50 = P50(timing.duration, sample);
      if (!p50.ok()) return p50.status();
      runs.push_back(*p50);
    }

    // The floor: the same steps in one array, a random window read and
    // copied per draw.
    const size_t window = static_cast<size_t>(kScaleL * kStepBytes);
    std::vector<std::byte> all(static_cast<size_t>(trajectories * kScaleTrajectorySteps * kStepBytes));
    FillPattern(all.data(), all.size(), 9);
    std::vector<std::byte> out(static_cast<size_t>(kScaleBatch) * window);
    std::mt19937_64 rng(11);
    const uint64_t starts = static_cast<uint64_t>(trajectories * kScaleTrajectorySteps - kScaleL);
    const auto floor_call = [&] {
      for (int64_t b = 0; b < kScaleBatch; ++b) {
        const uint64_t at = rng() % starts;
        std::memcpy(out.data() + static_cast<size_t>(b) * window,
                    all.data() + at * static_cast<uint64_t>(kStepBytes), window);
      }
      DoNotOptimize(out.data());
      return Status::OK();
    };
    (void)P50(timing.duration / 4, floor_call);
    std::vector<double> floors;
    for (int r = 0; r < timing.repetitions; ++r) {
      Result<double> p50 = P50(timing.duration, floor_call);
      if (!p50.ok()) return p50.status();
      floors.push_back(*p50);
    }
    BenchResult result;
    result.value = Median(&runs);
    result.unit = "us";
    result.ceiling = Median(&floors);
    result.ceiling_name = "random_window_read";
    return result;
  });
}

}  // namespace

std::vector<CaseWithTarget> ScaleCases() {
  std::vector<CaseWithTarget> cases;
  for (const SelectorKind selector : {SelectorKind::kUniform, SelectorKind::kPrioritized}) {
    for (const int64_t steps : {int64_t{1} << 20, int64_t{10} << 20, int64_t{50} << 20}) {
      std::optional<Target> target;
      if (steps == (int64_t{50} << 20)) {
        target = Target{Target::Kind::kRatioAtMost, 2.0, "ratio <= 2.00"};
      }
      cases.push_back(
          {{"sample_scale",
            {{"selector", 0, selector == SelectorKind::kUniform ? "uniform" : "prioritized"},
             {"steps", 0, std::to_string(steps >> 20) + "M"},
             {"batch", kScaleBatch},
             {"L", kScaleL}},
            [steps, selector](DB*, const Timing& timing) {
              DBOptions options;
              options.wal.enabled = false;
              options.checkpoint.every_wal_bytes = 0;
              options.checkpoint.every = std::chrono::seconds(0);
              options.checkpoint.on_close = false;
              return WithFreshDB(options,
                                 [&](DB* db) { return RunSampleScale(db, timing, steps, selector); });
            }},
           target});
    }
  }
  return cases;
}

}  // namespace replaydb::tools
