// ProgressBar (tools/replaydb/progress_bar.h): what it draws for the
// engine's progress updates, when it draws nothing, and a bar fed by the
// engine's reporter from many threads.
#include "tools/replaydb/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"
#include "util/progress_reporter.h"

namespace replaydb {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using tools::ProgressBar;

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

ProgressUpdate Update(std::string_view operation, int64_t done, int64_t total,
                      std::string_view unit, bool finished = false) {
  ProgressUpdate u;
  u.operation = operation;
  u.done = done;
  u.total = total;
  u.unit = unit;
  u.finished = finished;
  return u;
}

TEST(ProgressBarTest, DisabledWritesNothing) {
  Sink sink;
  ASSERT_NE(sink.file(), nullptr);
  {
    ProgressBar bar(sink.file(), /*enabled=*/false);
    bar.Update(Update("import", 0, 100, "steps"));
    bar.Update(Update("import", 40, 100, "steps"));
    bar.Update(Update("import", 100, 100, "steps", /*finished=*/true));
  }
  EXPECT_EQ(sink.contents(), "");
}

TEST(ProgressBarTest, DefaultIsSilentWhenStderrIsNotATerminal) {
  if (isatty(fileno(stderr))) GTEST_SKIP() << "stderr is a terminal";
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar;
    bar.Update(Update("import", 0, 10, "steps"));
    bar.Update(Update("import", 10, 10, "steps", /*finished=*/true));
    bar.Update(Update("import", 10, 10, "steps"));  // left unfinished
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(ProgressBarTest, DrawsOperationPercentAndANewlineWhenFinished) {
  Sink sink;
  ProgressBar bar(sink.file(), /*enabled=*/true);
  bar.Update(Update("import hopper", 0, 200, "steps"));
  bar.Update(Update("import hopper", 50, 200, "steps"));
  bar.Update(Update("import hopper", 200, 200, "steps", /*finished=*/true));
  const std::string out = sink.contents();
  EXPECT_THAT(out, StartsWith("\rimport hopper ["));
  EXPECT_THAT(out, EndsWith("\n"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\r'), 3);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  const std::string last = LastDraw(out);
  EXPECT_THAT(last, StartsWith("import hopper [" + std::string(30, '#') + "] 100% 200/200 steps "));
  EXPECT_THAT(last, HasSubstr(" steps/s 0:0"));
}

TEST(ProgressBarTest, BarAndPercentInBetween) {
  Sink sink;
  {
    ProgressBar bar(sink.file(), /*enabled=*/true);
    bar.Update(Update("export", 500, 1000, "items"));
  }  // the destructor ends the line
  const std::string out = sink.contents();
  EXPECT_THAT(out, EndsWith("\n"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_THAT(LastDraw(out), StartsWith("export [" + std::string(15, '#') + std::string(15, '.') +
                                        "]  50% 500/1000 items "));
}

TEST(ProgressBarTest, UnknownTotalShowsACount) {
  Sink sink;
  ProgressBar bar(sink.file(), /*enabled=*/true);
  bar.Update(Update("scan", 1234, 0, "rows", /*finished=*/true));
  const std::string last = LastDraw(sink.contents());
  EXPECT_THAT(last, StartsWith("scan 1234 rows "));
  EXPECT_THAT(last, HasSubstr(" rows/s "));
  EXPECT_THAT(last, Not(HasSubstr("%")));
  EXPECT_THAT(last, Not(HasSubstr("[")));
}

TEST(ProgressBarTest, DoneBeyondTotalShowsAFullBar) {
  const std::string line =
      ProgressBar::Line(Update("verify /db", 150, 100, "steps"), std::chrono::seconds(2));
  EXPECT_THAT(line, StartsWith("verify /db [" + std::string(30, '#') + "] 100% 150/100 steps "));
  EXPECT_THAT(line, EndsWith(" 75.0 steps/s 0:02"));
}

TEST(ProgressBarTest, RateAndElapsedTime) {
  EXPECT_EQ(
      ProgressBar::Line(Update("compact /db/cold", 3'040'000, 0, "bytes"), std::chrono::seconds(2)),
      "compact /db/cold 3040000 bytes 1.52M bytes/s 0:02");
  EXPECT_EQ(ProgressBar::Line(Update("x", 7, 0, "steps"), std::chrono::seconds(3723)),
            "x 7 steps 0.00 steps/s 1:02:03");
}

// After a finished update, the next one starts a new line.
TEST(ProgressBarTest, AnUpdateAfterTheFinishStartsANewLine) {
  Sink sink;
  {
    ProgressBar bar(sink.file(), /*enabled=*/true);
    bar.Update(Update("export t", 3, 3, "steps", /*finished=*/true));
    bar.Update(Update("verify /db", 1, 0, "steps"));
    bar.Update(Update("verify /db", 2, 0, "steps", /*finished=*/true));
  }
  const std::string out = sink.contents();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2);
  const size_t first_end = out.find('\n');
  EXPECT_THAT(out.substr(0, first_end), HasSubstr("export t ["));
  EXPECT_THAT(out.substr(first_end + 1), StartsWith("\rverify /db 1 steps "));
  EXPECT_THAT(LastDraw(out), StartsWith("verify /db 2 steps "));
}

// A shorter line after a longer one is padded over it.
TEST(ProgressBarTest, ShorterLinesCoverLongerOnes) {
  Sink sink;
  {
    ProgressBar bar(sink.file(), /*enabled=*/true);
    bar.Update(Update("x", 123456789, 0, "steps"));
    bar.Update(Update("x", 9, 0, "steps", /*finished=*/true));
  }
  const std::string out = sink.contents();
  const size_t last_cr = out.rfind('\r');
  const size_t prev_cr = out.rfind('\r', last_cr - 1);
  ASSERT_NE(prev_cr, std::string::npos);
  const size_t prev_len = last_cr - prev_cr - 1;
  const size_t last_len = out.size() - 1 - last_cr - 1;  // without '\r' and '\n'
  EXPECT_GE(last_len, prev_len) << out;
}

// The engine's reporter feeding a bar through its callback, with Adds
// from many threads: whole lines, the total at the end, one newline.
TEST(ProgressBarTest, DrawsWhatTheReporterReportsFromManyThreads) {
  Sink sink;
  constexpr int kThreads = 8;
  constexpr int kAddsPerThread = 20000;
  constexpr int64_t kTotal = int64_t{kThreads} * kAddsPerThread * 3;
  {
    ProgressBar bar(sink.file(), /*enabled=*/true);
    const ProgressCallback callback = bar.Callback();
    util::ProgressReporter p("import", kTotal, "steps", callback);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&p] {
        for (int i = 0; i < kAddsPerThread; ++i) p.Add(3);
      });
    }
    for (auto& th : threads) th.join();
  }
  const std::string out = sink.contents();
  EXPECT_THAT(LastDraw(out), HasSubstr("100% " + std::to_string(kTotal) + "/" +
                                       std::to_string(kTotal) + " steps"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  // Every draw is whole: '\r', the operation, a bar.
  size_t pos = 0;
  while ((pos = out.find('\r', pos)) != std::string::npos) {
    EXPECT_EQ(out.compare(pos + 1, 8, "import ["), 0) << out.substr(pos, 40);
    ++pos;
  }
}

}  // namespace
}  // namespace replaydb
