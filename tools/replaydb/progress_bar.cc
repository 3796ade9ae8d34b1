// ProgressBar: the line's format and its redraws.
#include "tools/replaydb/progress_bar.h"

#include <unistd.h>

#include <algorithm>

namespace replaydb::tools {
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

ProgressBar::ProgressBar() : ProgressBar(stderr, isatty(fileno(stderr)) != 0) {}

ProgressBar::ProgressBar(FILE* out, bool enabled)
    : out_(out), enabled_(enabled && out != nullptr) {}

ProgressBar::~ProgressBar() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!drawing_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::Update(const ProgressUpdate& update) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (!drawing_) {
    drawing_ = true;
    start_ = now;
    last_width_ = 0;
  }
  const std::string line = Line(update, now - start_);
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  // Cover what is left of a longer previous line.
  for (size_t i = line.size(); i < last_width_; ++i) std::fputc(' ', out_);
  last_width_ = line.size();
  if (update.finished) {
    std::fputc('\n', out_);
    drawing_ = false;
  }
  std::fflush(out_);
}

ProgressCallback ProgressBar::Callback() {
  return [this](const ProgressUpdate& update) { Update(update); };
}

std::string ProgressBar::Line(const ProgressUpdate& update, Clock::duration elapsed) {
  const std::string unit(update.unit);
  const int64_t done = update.done;
  std::string line(update.operation);
  if (update.total > 0) {
    const double fraction = std::clamp(static_cast<double>(done) / update.total, 0.0, 1.0);
    const int filled = std::min(kBarWidth, static_cast<int>(fraction * kBarWidth));
    line += " [";
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(kBarWidth - filled), '.');
    char pct[8];
    std::snprintf(pct, sizeof(pct), "%3d%%", static_cast<int>(fraction * 100));
    line += "] ";
    line += pct;
    line += " " + std::to_string(done) + "/" + std::to_string(update.total) + " " + unit;
  } else {
    line += " " + std::to_string(done) + " " + unit;
  }
  const double seconds =
      std::max(std::chrono::duration<double>(elapsed).count(), 1e-3);  // no division by 0
  line += " " + HumanCount(std::max(0.0, static_cast<double>(done) / seconds)) + " " + unit +
          "/s " + Elapsed(elapsed);
  return line;
}

}  // namespace replaydb::tools
