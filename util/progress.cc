// Progress: counting, throttled redraws, the line's format.
#include "util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

namespace replaydb {
namespace {

// "987", "12.3", "4.56k", "1.52M", "7.1G": three significant digits at most.
std::string HumanCount(double v) {
  const char* suffix = "";
  if (v >= 1e9) {
    v /= 1e9;
    suffix = "G";
  } else if (v >= 1e6) {
    v /= 1e6;
    suffix = "M";
  } else if (v >= 1e3) {
    v /= 1e3;
    suffix = "k";
  }
  char buf[32];
  const char* format = v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s";
  std::snprintf(buf, sizeof(buf), format, v, suffix);
  return buf;
}

// "0:07", "12:34", "1:02:03".
std::string Elapsed(std::chrono::steady_clock::duration d) {
  const auto total = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buf[32];
  if (h > 0) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", m, s);
  }
  return buf;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit)
    : Progress(std::move(label), total, std::move(unit), stderr, isatty(fileno(stderr)) != 0) {}

Progress::Progress(std::string label, int64_t total, std::string unit, FILE* out, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 0)),
      unit_(std::move(unit)),
      out_(out),
      enabled_(enabled && out != nullptr),
      start_(Clock::now()) {
  if (!enabled_) return;
  next_draw_.store(std::chrono::duration_cast<Clock::duration>(kRedrawInterval).count(),
                   std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  DrawLocked(start_);
}

Progress::~Progress() {
  Finish();
}

void Progress::Add(int64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  const int64_t ticks = (now - start_).count();
  int64_t next = next_draw_.load(std::memory_order_relaxed);
  if (ticks < next) return;
  // One thread wins the right to draw this interval; the others return.
  const int64_t after =
      ticks + std::chrono::duration_cast<Clock::duration>(kRedrawInterval).count();
  if (!next_draw_.compare_exchange_strong(next, after, std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) DrawLocked(now);
}

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  DrawLocked(Clock::now());
  std::fputc('\n', out_);
  std::fflush(out_);
}

std::string Progress::Line(int64_t done, Clock::duration elapsed) const {
  std::string line = label_;
  if (total_ > 0) {
    const double fraction = std::clamp(static_cast<double>(done) / total_, 0.0, 1.0);
    const int filled = std::min(kBarWidth, static_cast<int>(fraction * kBarWidth));
    line += " [";
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(kBarWidth - filled), '.');
    char pct[8];
    std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(fraction * 100));
    line += "] ";
    line += pct;
    line += " " + std::to_string(done) + "/" + std::to_string(total_) + " " + unit_;
  } else {
    line += " " + std::to_string(done) + " " + unit_;
  }
  const double seconds =
      std::max(std::chrono::duration<double>(elapsed).count(), 1e-3);  // no division by 0
  line += " " + HumanCount(std::max(0.0, static_cast<double>(done) / seconds)) + " " + unit_ +
          "/s " + Elapsed(elapsed);
  return line;
}

void Progress::DrawLocked(Clock::time_point now) {
  const std::string line = Line(done_.load(std::memory_order_relaxed), now - start_);
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  // Cover what is left of a longer previous line.
  for (size_t i = line.size(); i < last_width_; ++i) std::fputc(' ', out_);
  last_width_ = line.size();
  std::fflush(out_);
}

}  // namespace replaydb
