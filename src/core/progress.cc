// WorkState and the progress thread's queue.
#include "src/core/progress.h"

#include <chrono>

namespace collie {

void WorkState::finish(Status s) {
  std::lock_guard<std::mutex> l(mu_);
  status_ = std::move(s);
  done_ = true;
  cv_.notify_all();
}

bool WorkState::wait(int64_t timeoutMs) {
  std::unique_lock<std::mutex> l(mu_);
  if (timeoutMs < 0) {
    cv_.wait(l, [&] { return done_; });
    return true;
  }
  return cv_.wait_for(l, std::chrono::milliseconds(timeoutMs), [&] { return done_; });
}

bool WorkState::test() {
  std::lock_guard<std::mutex> l(mu_);
  return done_;
}

Status WorkState::status() {
  std::lock_guard<std::mutex> l(mu_);
  if (!done_) return Status(collieInProgress, "the operation is still running");
  return status_;
}

void ProgressQueue::start(Runner run, ProgressHooks hooks) {
  run_ = std::move(run);
  hooks_ = std::move(hooks);
  thread_ = std::thread([this] { loop(); });
}

void ProgressQueue::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProgressQueue::push(PendingOp op) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(op));
    ++inFlight_;
  }
  cv_.notify_all();
}

void ProgressQueue::waitIdle() {
  if (inFlight_.load() == 0) return;
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return inFlight_ == 0; });
}

void ProgressQueue::loop() {
  using Clock = std::chrono::steady_clock;
  if (hooks_.started) hooks_.started();
  Clock::time_point lastIdle = Clock::now();
  for (;;) {
    // With ops in flight the thread looks at them again soon instead of sleeping long.
    const bool busy = hooks_.advance && hooks_.advance();
    const auto nap = busy ? std::chrono::microseconds(20) : std::chrono::microseconds(100000);
    PendingOp p;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, nap, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        if (stopping_) break;
        l.unlock();
        if (hooks_.idle && Clock::now() - lastIdle >= std::chrono::milliseconds(100)) {
          hooks_.idle();
          lastIdle = Clock::now();
        }
        continue;
      }
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Status s = run_(p);
    if (p.work) p.work->finish(s);
    {
      std::lock_guard<std::mutex> l(mu_);
      --inFlight_;
    }
    cv_.notify_all();
  }
  if (hooks_.abandon) hooks_.abandon();
  if (hooks_.stopping) hooks_.stopping();
}

}  // namespace collie
