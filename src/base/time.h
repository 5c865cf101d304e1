// Monotonic clock helpers and Deadline: every blocking wait in Collie takes one.
#pragma once

#include <chrono>
#include <cstdint>

namespace collie {

using Clock = std::chrono::steady_clock;

inline uint64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

class Deadline {
 public:
  Deadline() : at_(Clock::time_point::max()) {}
  static Deadline afterMs(int64_t ms) {
    Deadline d;
    if (ms >= 0) d.at_ = Clock::now() + std::chrono::milliseconds(ms);
    return d;
  }
  static Deadline never() { return Deadline(); }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, cap]; cap for callers that poll.
  int remainingMs(int cap = 1 << 30) const {
    if (at_ == Clock::time_point::max()) return cap;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  Clock::time_point at_;
};

}  // namespace collie
