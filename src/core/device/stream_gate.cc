// StreamGate (see stream_gate.h).
#include "src/core/device/stream_gate.h"

#include <chrono>
#include <string>

namespace collie {

void StreamGate::open(Status s) {
  std::lock_guard<std::mutex> l(mu_);
  if (open_) return;
  open_ = true;
  status_ = std::move(s);
  cv_.notify_all();
}

Status StreamGate::wait() {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, std::chrono::milliseconds(timeoutMs_), [&] { return open_; }))
    return timeoutError("device op: the collective did not finish within " +
                        std::to_string(timeoutMs_) +
                        " ms; the stream is not ordered after it (see COLLIE_TIMEOUT_MS)");
  return status_;
}

bool StreamGate::isOpen() {
  std::lock_guard<std::mutex> l(mu_);
  return open_;
}

}  // namespace collie
