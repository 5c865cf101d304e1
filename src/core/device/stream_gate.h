// StreamGate: how the caller's thread learns that a device op on the progress thread is done
// (its end recorded as an event the caller's stream then waits on) and how it went. Waited on
// by a thread, never inside a CUDA host callback: CUDA forbids blocking there on other work.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "src/base/status.h"
#include "src/base/time.h"

namespace collie {

class StreamGate {
 public:
  // timeoutMs bounds wait(): a stuck op must not hang the caller forever.
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
