// ProgressReporter: when it calls the callback (the start, at most every
// 100 ms, once finished), what it reports, Adds from many threads.
#include "util/progress_reporter.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace replaydb {
namespace {

using util::ProgressReporter;
using Clock = ProgressReporter::Clock;
using std::chrono::milliseconds;

// What one call of the callback saw (the string_views copied).
struct Seen {
  std::string operation;
  int64_t done = 0;
  int64_t total = 0;
  std::string unit;
  bool finished = false;
};

// Records every call.
struct Recorder {
  std::vector<Seen> calls;
  ProgressCallback callback = [this](const ProgressUpdate& u) {
    calls.push_back({std::string(u.operation), u.done, u.total, std::string(u.unit), u.finished});
  };
};

// A clock the test moves by hand.
struct FakeClock {
  Clock::time_point now{};
  std::function<Clock::time_point()> fn() {
    return [this] { return now; };
  }
};

TEST(ProgressReporterTest, ReportsTheStartThenAtMostEvery100MsThenTheFinish) {
  Recorder r;
  FakeClock clock;
  {
    ProgressReporter p("export hopper", 1000, "steps", r.callback, clock.fn());
    ASSERT_EQ(r.calls.size(), 1u) << "the start is reported";
    EXPECT_EQ(r.calls[0].operation, "export hopper");
    EXPECT_EQ(r.calls[0].done, 0);
    EXPECT_EQ(r.calls[0].total, 1000);
    EXPECT_EQ(r.calls[0].unit, "steps");
    EXPECT_FALSE(r.calls[0].finished);

    for (int i = 0; i < 99; ++i) {
      clock.now += milliseconds(1);
      p.Add(1);
    }
    EXPECT_EQ(r.calls.size(), 1u) << "99 ms after the start: no report yet";
    clock.now += milliseconds(1);
    p.Add(1);
    ASSERT_EQ(r.calls.size(), 2u) << "100 ms after the start";
    EXPECT_EQ(r.calls[1].done, 100);
    EXPECT_FALSE(r.calls[1].finished);

    clock.now += milliseconds(99);
    p.Add(5);
    EXPECT_EQ(r.calls.size(), 2u) << "99 ms after the last report";
    clock.now += milliseconds(1);
    p.Add(5);
    ASSERT_EQ(r.calls.size(), 3u);
    EXPECT_EQ(r.calls[2].done, 110);

    // A long pause: one report for it, not one per 100 ms missed.
    clock.now += milliseconds(1000);
    p.Add(1);
    p.Add(1);
    ASSERT_EQ(r.calls.size(), 4u);
    EXPECT_EQ(r.calls[3].done, 111);
    p.Add(1);  // counted, reported by the finish
    EXPECT_EQ(p.done(), 113);
  }  // the destructor finishes
  ASSERT_EQ(r.calls.size(), 5u);
  EXPECT_EQ(r.calls[4].done, 113);
  EXPECT_TRUE(r.calls[4].finished);
  EXPECT_EQ(r.calls[4].operation, "export hopper");
}

TEST(ProgressReporterTest, FinishReportsOnceHoweverSoonAndNothingAfterIt) {
  Recorder r;
  FakeClock clock;
  ProgressReporter p("verify /db", 3, "steps", r.callback, clock.fn());
  p.Add(3);
  p.Finish();  // at the same instant as the start: reported all the same
  p.Finish();
  clock.now += milliseconds(500);
  p.Add(1);  // counted, not reported
  EXPECT_EQ(p.done(), 4);
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[1].done, 3);
  EXPECT_EQ(r.calls[1].total, 3);
  EXPECT_TRUE(r.calls[1].finished);
}

TEST(ProgressReporterTest, AnUnknownTotalIsReportedAsZero) {
  Recorder r;
  ProgressReporter p("compact /db/cold", -5, "bytes", r.callback);
  p.Finish();
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].total, 0);
  EXPECT_EQ(r.calls[1].total, 0);
  EXPECT_EQ(r.calls[1].unit, "bytes");
}

TEST(ProgressReporterTest, WithoutACallbackItOnlyCounts) {
  const ProgressCallback none;
  ProgressReporter p("import x", 10, "steps", none);
  p.Add(4);
  p.Add(6);
  EXPECT_EQ(p.done(), 10);
  p.Finish();
}

// The real clock: a tight loop of Adds reports at most once per 100 ms.
TEST(ProgressReporterTest, ReportsAreThrottledOnTheRealClock) {
  std::vector<Clock::time_point> at;
  std::vector<bool> finished;
  const ProgressCallback callback = [&](const ProgressUpdate& u) {
    at.push_back(Clock::now());
    finished.push_back(u.finished);
  };
  const Clock::time_point start = Clock::now();
  {
    ProgressReporter p("x", 0, "steps", callback);
    // 350 ms of Adds, and on (up to 10 s) until a report came between the
    // start's and the finish's: a loaded machine may not run this thread
    // at the moment one is due.
    while (Clock::now() - start < milliseconds(350) ||
           (at.size() < 2 && Clock::now() - start < std::chrono::seconds(10))) {
      p.Add(1);
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  // The start, one per 100 ms passed, the finish.
  EXPECT_LE(at.size(), 2 + static_cast<size_t>(ms / 100)) << ms << " ms";
  EXPECT_GE(at.size(), 3u) << "350 ms of Adds: the start, at least one report, the finish";
  ASSERT_FALSE(finished.empty());
  EXPECT_TRUE(finished.back());
  for (size_t i = 0; i + 1 < finished.size(); ++i) EXPECT_FALSE(finished[i]) << i;
}

// Adds from many threads for 300 ms: every one is counted, the callback is
// never called twice at a time, done never goes down, and the last report
// is the finish with the whole count.
TEST(ProgressReporterTest, CountsAddsFromManyThreads) {
  constexpr int kThreads = 8;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<Seen> calls;  // written only inside the callback, which never overlaps itself
  const ProgressCallback callback = [&](const ProgressUpdate& u) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    calls.push_back({std::string(u.operation), u.done, u.total, std::string(u.unit), u.finished});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // widen the window
    inside.fetch_sub(1);
  };
  std::atomic<int64_t> added{0};
  {
    ProgressReporter p("import hopper", 0, "steps", callback);
    const Clock::time_point end = Clock::now() + milliseconds(300);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&p, &added, end] {
        int64_t mine = 0;
        while (Clock::now() < end) {
          p.Add(3);
          mine += 3;
        }
        added.fetch_add(mine);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(p.done(), added.load());
  }
  EXPECT_FALSE(overlapped.load()) << "two calls of the callback ran at once";
  ASSERT_GE(calls.size(), 3u) << "the start, reports while adding, the finish";
  EXPECT_TRUE(calls.back().finished);
  EXPECT_EQ(calls.back().done, added.load());
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].done, calls[i - 1].done) << "report " << i;
    EXPECT_EQ(calls[i].operation, "import hopper");
    EXPECT_EQ(calls[i].finished, i + 1 == calls.size()) << "report " << i;
  }
}

// Finish from one thread while others Add: one finished report, the last.
TEST(ProgressReporterTest, FinishWhileOthersAdd) {
  std::atomic<int> finishes{0};
  std::atomic<bool> after_finish{false};
  const ProgressCallback callback = [&](const ProgressUpdate& u) {
    if (finishes.load() > 0) after_finish = true;
    if (u.finished) finishes.fetch_add(1);
  };
  ProgressReporter p("verify /db", 0, "steps", callback);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) p.Add(1);
    });
  }
  std::this_thread::sleep_for(milliseconds(250));
  p.Finish();
  std::this_thread::sleep_for(milliseconds(150));
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(finishes.load(), 1);
  EXPECT_FALSE(after_finish.load()) << "a report came after the finish";
}

}  // namespace
}  // namespace replaydb
