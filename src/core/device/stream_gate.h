// StreamGate: how a device stream waits for an op that runs on the progress thread. The caller
// enqueues a host callback on its stream that blocks in wait() until the progress thread opens
// the gate with the op's status, so the stream's later work sees the result, while the call
// itself returns at once (the stream semantics of NCCL-style collectives).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "src/base/status.h"
#include "src/base/time.h"

namespace collie {

class StreamGate {
 public:
  // timeoutMs bounds wait(): a stuck op must not hang the stream forever.
  explicit StreamGate(int64_t timeoutMs) : timeoutMs_(timeoutMs) {}
  // The op is done (s: how it went); wakes the waiter. Later calls are ignored.
  void open(Status s);
  // Returns the status open() was given, or a timeout error when timeoutMs passes first.
  Status wait();
  bool isOpen();

 private:
  const int64_t timeoutMs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;  // guarded by mu_
  Status status_;      // guarded by mu_
};

}  // namespace collie
