// Monotonic clock helpers and Deadline: every blocking wait in Collie takes one.
#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace collie {

using Clock = std::chrono::steady_clock;

inline uint64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Milliseconds on the coarse monotonic clock: it moves in steps of a few milliseconds but reads
// several times faster than the fine one, and every collective call reads it for its deadline.
inline int64_t coarseNowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Deadlines are coarse: they may fall a clock step (a few ms) early or late, which no wait for
// a peer, a store or a connection minds.
class Deadline {
 public:
  Deadline() = default;
  static Deadline afterMs(int64_t ms) {
    Deadline d;
    if (ms >= 0) {
      const int64_t now = coarseNowMs();
      d.atMs_ = ms < kNever - now ? now + ms : kNever;
    }
    return d;
  }
  static Deadline never() { return Deadline(); }
  // This deadline, also passed once *flag is set (collieCommAbort during an init: every wait of
  // it ends at its next look at the clock).
  Deadline endedBy(const std::atomic<bool>* flag) const {
    Deadline d = *this;
    d.flag_ = flag;
    return d;
  }
  bool expired() const { return ended() || (atMs_ != kNever && coarseNowMs() >= atMs_); }
  // Milliseconds left, clamped to [0, cap]; cap for callers that poll.
  int remainingMs(int cap = 1 << 30) const {
    if (ended()) return 0;
    if (atMs_ == kNever) return cap;
    const int64_t left = atMs_ - coarseNowMs();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  bool ended() const { return flag_ != nullptr && flag_->load(std::memory_order_relaxed); }
  static constexpr int64_t kNever = INT64_MAX;
  int64_t atMs_ = kNever;
  const std::atomic<bool>* flag_ = nullptr;
};

}  // namespace collie
