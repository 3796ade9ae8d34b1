#include "util/fork_join.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

namespace replaydb::util {
namespace {

void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Waits until `word` differs from `old`: spins up to kSpinMicros, then
// sleeps in the futex. Returns the new value.
template <typename T>
T AwaitChange(const std::atomic<T>& word, T old) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + std::chrono::microseconds(ForkJoin::kSpinMicros);
  for (uint32_t i = 1;; ++i) {
    const T now = word.load(std::memory_order_acquire);
    if (now != old) return now;
    Pause();
    // The clock is read every 64 spins (a pause is tens of cycles).
    if (i % 64 == 0 && Clock::now() >= until) break;
  }
  while (true) {
    word.wait(old, std::memory_order_acquire);
    const T now = word.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

}  // namespace

ForkJoin::ForkJoin(int parts) : parts_(std::max(parts, 1)) {
  assert(parts >= 1);
  threads_.reserve(static_cast<size_t>(parts_ - 1));
  for (int part = 1; part < parts_; ++part) {
    threads_.emplace_back([this, part] { WorkerLoop(part); });
  }
}

ForkJoin::~ForkJoin() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ForkJoin::RunParts() {
  if (parts_ == 1) {
    call_(context_, 0);
    return;
  }
  pending_.store(parts_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  call_(context_, 0);
  for (int32_t left = pending_.load(std::memory_order_acquire); left != 0;) {
    left = AwaitChange(pending_, left);
  }
}

void ForkJoin::WorkerLoop(int part) {
  // The generation before the first run (a run may start before this
  // thread does).
  uint32_t seen = 0;
  while (true) {
    seen = AwaitChange(generation_, seen);
    if (stop_.load(std::memory_order_relaxed)) return;
    call_(context_, part);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

int AutoParts(size_t num_envs) {
  const unsigned hardware = std::thread::hardware_concurrency();
  const int by_machine = std::max(1, static_cast<int>(hardware / 2));
  const int by_envs = static_cast<int>(std::min<size_t>(num_envs / kMinEnvsPerPart, kMaxAutoParts));
  return std::max(1, std::min(by_machine, by_envs));
}

void CopyRanges(ForkJoin* fork_join, std::span<const CopyRange> ranges) {
  size_t total = 0;
  for (const CopyRange& r : ranges) total += r.bytes;
  if (total < kMinCopyBytesPerPart * 2) fork_join = nullptr;
  ForkJoin::ForEachShare(fork_join, total, [&](int /*part*/, size_t begin, size_t end) {
    // This share's bytes [begin, end) of the ranges laid end to end.
    size_t at = 0;
    for (const CopyRange& r : ranges) {
      if (at >= end) break;
      const size_t from = std::max(begin, at);
      const size_t to = std::min(end, at + r.bytes);
      if (from < to) std::memcpy(r.dst + (from - at), r.src + (from - at), to - from);
      at += r.bytes;
    }
  });
}

}  // namespace replaydb::util
