// Poller: progress, spin, then sleep in poll() — the wait loop of every schedule.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "src/base/time.h"
#include "transports/transport.h"

namespace collie {

// Every connection moves (with idleToo also those with nothing posted), also after one has
// failed: a request of another may complete in the same round. The first failure is returned.
Status Poller::progressAll(bool* progressed, bool idleToo) {
  Status first;
  for (Connection* c : conns_) {
    if (c == nullptr || (!idleToo && !c->hasPending())) continue;
    Status st = c->progress(progressed);
    if (first.isOk() && !st.isOk()) first = std::move(st);
  }
  return first;
}

Status Poller::sleepOnFds(int timeoutMs) {
  fds_.clear();
  for (Connection* c : conns_)
    if (c != nullptr) c->appendPollFds(&fds_);
  if (doorbell_ != nullptr) {
    // Shared-memory peers ring the doorbell; check once more after reading it so a ring that
    // came in between is not slept through, then sleep on it briefly and look at the fds (a
    // peer's exit, TCP peers) without blocking. With peers over sockets too, whose data does
    // not ring it, the sleep is short so that their frames wait at most that long.
    uint32_t seen = doorbell_->prepare();
    bool progressed = false;
    Status st = progressAll(&progressed);
    const int64_t capUs = fdPeers_ ? kMixedSleepUs : 2000;
    if (st.isOk() && !progressed)
      doorbell_->sleep(seen, std::min<int64_t>(capUs, int64_t{timeoutMs} * 1000));
    doorbell_->finish();
    COLLIE_RETURN_IF_ERROR(st);
    timeoutMs = 0;
  }
  int rc = poll(fds_.data(), fds_.size(), timeoutMs);
  if (rc < 0 && errno != EINTR) return errnoStatus("poll", errno);
  if (rc > 0) {
    // Something is readable: let every connection look, also those with nothing posted, so a
    // peer's abort or close is noticed while this rank waits on another peer.
    bool progressed = false;
    return progressAll(&progressed, true);
  }
  return Status::ok();
}

static Status timedOut(const Request* req, const char* op) {
  std::string what = req->isSend ? "send of " : "receive of ";
  return stalledWait(std::string(op) + ": " + kTimedOutWaitingFor + std::to_string(req->peer) +
                         " (" + what + std::to_string(req->bytes) + " bytes of " +
                         describeFrameTag(req->tag) +
                         "); the peer is stuck, dead or running another op (see COLLIE_TIMEOUT_MS)",
                     req->peer);
}

Status Poller::progressUntilAny(Request* const* reqs, size_t n, const Deadline& deadline,
                                const char* op) {
  auto anyDone = [&] {
    for (size_t i = 0; i < n; ++i)
      if (reqs[i]->done) return true;
    return false;
  };
  uint64_t spinUntil = 0;  // armed when the spin begins
  unsigned spins = 0;
  // A request that completes in the round where another connection fails (its peer aborted a
  // later op, which this rank has not begun) is done: the failure stays with that connection
  // and ends the next wait on it.
  for (;;) {
    bool progressed = false;
    Status st = progressAll(&progressed);
    if (anyDone()) return Status::ok();
    COLLIE_RETURN_IF_ERROR(st);
    if (progressed) {
      spins = 0;
      spinUntil = 0;  // armed again when a spin begins
      continue;
    }
    if (abort_ != nullptr && abort_->load(std::memory_order_relaxed))
      return Status(collieRemoteError, std::string(op) + ": aborted by collieCommAbort");
    if (yield_) sched_yield();
    // The clock is read every 64th idle round only, and the spin begins at the first of them:
    // a short wait reads it not at all.
    if ((++spins & 63) != 0) continue;
    const uint64_t now = nowNs();
    if (spinUntil == 0) spinUntil = now + static_cast<uint64_t>(spinUs_) * 1000;
    if (now < spinUntil) continue;
    if (deadline.expired()) {
      for (size_t i = 0; i < n; ++i)
        if (!reqs[i]->done) return timedOut(reqs[i], op);
    }
    st = sleepOnFds(deadline.remainingMs(shared_ ? kSharedSleepMs : abort_ ? 50 : 200));
    if (anyDone()) return Status::ok();
    COLLIE_RETURN_IF_ERROR(st);
  }
}

Status Poller::wait(Request* req, const Deadline& deadline, const char* op) {
  Request* one[1] = {req};
  return progressUntilAny(one, 1, deadline, op);
}

}  // namespace collie
