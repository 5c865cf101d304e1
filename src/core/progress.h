// Asynchronous calls: their completion (WorkState), and the queue a progress thread runs in
// call order, one op at a time, with the blocking calls.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "algorithms/algorithm.h"
#include "src/core/p2p.h"

namespace collie {

struct DeviceOp;  // device memory: the stream bookkeeping (device_staging.h)

// The completion of one asynchronous call.
class WorkState {
 public:
  void finish(Status s);
  // false if timeoutMs passed first (the op goes on); < 0 waits for the op's own deadline.
  bool wait(int64_t timeoutMs);
  bool test();
  Status status();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  Status status_;      // guarded by mu_
};

// One queued op.
struct PendingOp {
  CollArgs args;
  std::shared_ptr<WorkState> work;   // null for device ops on a stream; taken by an op that
                                     // stays in flight after it ran (point-to-point)
  std::shared_ptr<DeviceOp> device;  // device memory only
  std::vector<P2PCall> calls;        // point-to-point: posted, then completed in flight
  std::function<Status()> job;       // anything else, run in its turn (a queued group)
};

// What the progress thread does besides running ops.
struct ProgressHooks {
  std::function<void()> started;   // on the thread, before the first op
  std::function<void()> idle;      // about every 100 ms without ops
  std::function<void()> stopping;  // on the thread, after the last op
  // Moves the ops in flight (posted, not complete) on; whether any is left. They move while the
  // thread waits for the next op, and those left when it stops are abandoned.
  std::function<bool()> advance;
  std::function<void()> abandon;
};

class ProgressQueue {
 public:
  using Runner = std::function<Status(PendingOp&)>;
  ~ProgressQueue() { stop(); }
  void start(Runner run, ProgressHooks hooks);
  // Runs what is queued, then ends the thread.
  void stop();
  void push(PendingOp op);
  // Returns once no queued op is left or running: blocking calls keep call order so.
  void waitIdle();
  // Whether no queued op is left or running (a snapshot).
  bool idle() const { return inFlight_.load() == 0; }

 private:
  void loop();
  Runner run_;
  ProgressHooks hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingOp> queue_;  // guarded by mu_
  // Queued plus running ops: changed under mu_; read without it only to skip mu_ when zero (an
  // op this thread queued is seen; one of another thread is unordered with this call anyway).
  std::atomic<int> inFlight_{0};
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace collie
