// Progress: what it draws, when it draws nothing, Add from many threads.
#include "util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace replaydb {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A temporary file to draw on, and what was drawn.
class Sink {
 public:
  Sink() : file_(std::tmpfile()) {}
  ~Sink() {
    if (file_ != nullptr) std::fclose(file_);
  }
  FILE* file() const { return file_; }
  std::string contents() const {
    std::fflush(file_);
    std::rewind(file_);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), file_)) > 0) s.append(buf, n);
    std::fseek(file_, 0, SEEK_END);
    return s;
  }

 private:
  FILE* file_;
};

// The last line drawn: the text after the last '\r', without the newline.
std::string LastDraw(const std::string& s) {
  std::string line = s.substr(s.rfind('\r') + 1);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

TEST(ProgressTest, DisabledWritesNothing) {
  Sink sink;
  ASSERT_NE(sink.file(), nullptr);
  {
    Progress p("import", 100, "steps", sink.file(), /*enabled=*/false);
    p.Add(40);
    p.Add(60);
    EXPECT_EQ(p.done(), 100);
    p.Finish();
  }
  EXPECT_EQ(sink.contents(), "");
}

TEST(ProgressTest, DefaultIsSilentWhenStderrIsNotATerminal) {
  if (isatty(fileno(stderr))) GTEST_SKIP() << "stderr is a terminal";
  ::testing::internal::CaptureStderr();
  {
    Progress p("import", 10);
    p.Add(10);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(ProgressTest, EnabledDrawsLabelPercentAndNewline) {
  Sink sink;
  Progress p("import hopper", 200, "steps", sink.file(), /*enabled=*/true);
  p.Add(50);
  p.Add(150);
  p.Finish();
  const std::string out = sink.contents();
  EXPECT_THAT(out, StartsWith("\rimport hopper ["));
  EXPECT_THAT(out, EndsWith("\n"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  const std::string last = LastDraw(out);
  EXPECT_THAT(last, StartsWith("import hopper [" + std::string(30, '#') + "] 100% 200/200 steps "));
  EXPECT_THAT(last, HasSubstr(" steps/s 0:0"));
}

TEST(ProgressTest, BarAndPercentInBetween) {
  Sink sink;
  {
    Progress p("export", 1000, "items", sink.file(), /*enabled=*/true);
    p.Add(500);
  }  // the destructor finishes
  const std::string out = sink.contents();
  EXPECT_THAT(out, EndsWith("\n"));
  EXPECT_THAT(LastDraw(out), StartsWith("export [" + std::string(15, '#') + std::string(15, '.') +
                                        "]  50% 500/1000 items "));
}

TEST(ProgressTest, UnknownTotalShowsACount) {
  Sink sink;
  Progress p("scan", 0, "rows", sink.file(), /*enabled=*/true);
  p.Add(1234);
  p.Finish();
  const std::string last = LastDraw(sink.contents());
  EXPECT_THAT(last, StartsWith("scan 1234 rows "));
  EXPECT_THAT(last, HasSubstr(" rows/s "));
  EXPECT_THAT(last, Not(HasSubstr("%")));
  EXPECT_THAT(last, Not(HasSubstr("[")));
}

TEST(ProgressTest, FinishIsIdempotent) {
  Sink sink;
  {
    Progress p("x", 3, "steps", sink.file(), /*enabled=*/true);
    p.Add(3);
    p.Finish();
    p.Finish();
    p.Add(1);  // counted, not drawn
    EXPECT_EQ(p.done(), 4);
  }
  const std::string out = sink.contents();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_THAT(out, EndsWith("\n"));
  EXPECT_THAT(LastDraw(out), HasSubstr("3/3 steps"));
}

// Redraws at most every 100 ms, however often Add is called.
TEST(ProgressTest, RedrawsAreThrottled) {
  Sink sink;
  const auto start = std::chrono::steady_clock::now();
  Progress p("x", 100000, "steps", sink.file(), /*enabled=*/true);
  for (int i = 0; i < 100000; ++i) p.Add(1);
  p.Finish();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string out = sink.contents();
  const auto draws = std::count(out.begin(), out.end(), '\r');
  // The first draw, one per 100 ms passed, the last.
  EXPECT_LE(draws, 2 + static_cast<int64_t>(ms / 100) + 1) << ms << " ms";
  EXPECT_THAT(LastDraw(out), HasSubstr("100000/100000"));
}

TEST(ProgressTest, ConcurrentAddsReachTheTotal) {
  Sink sink;
  constexpr int kThreads = 8;
  constexpr int kAddsPerThread = 20000;
  constexpr int64_t kTotal = int64_t{kThreads} * kAddsPerThread * 3;
  {
    Progress p("import", kTotal, "steps", sink.file(), /*enabled=*/true);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&p] {
        for (int i = 0; i < kAddsPerThread; ++i) p.Add(3);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(p.done(), kTotal);
  }
  const std::string out = sink.contents();
  EXPECT_THAT(LastDraw(out), HasSubstr("100% " + std::to_string(kTotal) + "/" +
                                       std::to_string(kTotal) + " steps"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  // Every draw is whole: '\r', the label, a bar.
  size_t pos = 0;
  while ((pos = out.find('\r', pos)) != std::string::npos) {
    EXPECT_EQ(out.compare(pos + 1, 8, "import ["), 0) << out.substr(pos, 40);
    ++pos;
  }
}

// A shorter line after a longer one is padded over it.
TEST(ProgressTest, ShorterLinesCoverLongerOnes) {
  Sink sink;
  {
    Progress p("x", 0, "steps", sink.file(), /*enabled=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    p.Add(123456789);   // drawn: 100 ms have passed
    p.Add(-123456780);  // a count may go down; Finish draws a shorter line
  }
  const std::string out = sink.contents();
  const size_t last_cr = out.rfind('\r');
  const size_t prev_cr = out.rfind('\r', last_cr - 1);
  ASSERT_NE(prev_cr, std::string::npos);
  const size_t prev_len = last_cr - prev_cr - 1;
  const size_t last_len = out.size() - 1 - last_cr - 1;  // without '\r' and '\n'
  EXPECT_GE(last_len, prev_len) << out;
}

}  // namespace
}  // namespace replaydb
