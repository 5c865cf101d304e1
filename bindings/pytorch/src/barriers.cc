// Barriers of the collie c10d backend: the plain one, and the monitored one that names the
// ranks that did not arrive.
#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>

#include "process_group_collie.h"

namespace collie_torch {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds left(Clock::time_point until) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
}

std::string rankList(const std::vector<int>& ranks) {
  std::ostringstream s;
  s << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::barrier(const c10d::BarrierOptions&) {
  // As with Gloo, a barrier also waits for this rank's earlier sends and receives.
  std::vector<c10::intrusive_ptr<P2pWork>> pending;
  {
    std::lock_guard<std::mutex> lock(pendingMu_);
    pending.swap(pending_);
  }
  for (auto& w : pending) w->wait(std::chrono::milliseconds(0));
  check(collieBarrier(comm_), comm_, "barrier");
  return done(c10d::OpType::BARRIER, {});
}

void ProcessGroupCollie::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  TORCH_CHECK(monitor_.valid(),
              "collie monitored_barrier: this group's transports took no "
              "communicator for it");
  TORCH_CHECK(!monitorFailed_, "collie monitored_barrier on rank ", getRank(),
              ": an earlier monitored_barrier of this group failed, so its ranks no longer agree");
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  monitorBytes_.assign(getSize(), 0);
  ++seq_;
  if (getRank() == 0) {
    releaseFromRoot(timeout, waitAllRanks);
  } else {
    reportToRoot(timeout);
  }
}

void ProcessGroupCollie::reportToRoot(std::chrono::milliseconds timeout) {
  Clock::time_point until = Clock::now() + timeout;
  collie::Work sent = monitor_.sendAsync(&monitorBytes_[0], 1, collieUint8, 0);
  collie::Work released = monitor_.recvAsync(&monitorBytes_[1], 1, collieUint8, 0);
  for (collie::Work* w : {&sent, &released}) {
    collie::Result r = w->wait(left(until));
    if (r.ok()) continue;
    monitorFailed_ = true;
    monitorLeft_.push_back(std::move(sent));
    monitorLeft_.push_back(std::move(released));
    TORCH_CHECK(r.code() != collieInProgress, "collie monitored_barrier: rank ", getRank(),
                " was not released by rank 0 within ", timeout.count(),
                " ms: rank 0 failed, or found a rank missing");
    TORCH_CHECK(false, "collie monitored_barrier on rank ", getRank(), ": ", r.toString());
  }
}

void ProcessGroupCollie::releaseFromRoot(std::chrono::milliseconds timeout, bool waitAllRanks) {
  Clock::time_point until = Clock::now() + timeout;
  std::vector<collie::Work> arrivals(getSize());
  for (int r = 1; r < getSize(); ++r)
    arrivals[r] = monitor_.recvAsync(&monitorBytes_[r], 1, collieUint8, r);
  std::vector<int> missing;
  std::string why;
  for (int r = 1; r < getSize() && (waitAllRanks || missing.empty()); ++r) {
    collie::Result res = arrivals[r].wait(left(until));
    if (res.ok()) continue;
    missing.push_back(r);
    if (res.code() != collieInProgress && why.empty()) why = ": " + res.toString();
  }
  if (!missing.empty()) {
    monitorFailed_ = true;
    for (auto& w : arrivals) monitorLeft_.push_back(std::move(w));
    TORCH_CHECK(false, "collie monitored_barrier on rank 0: ", rankList(missing),
                " failed to pass monitored_barrier in ", timeout.count(), " ms", why);
  }
  std::vector<collie::Work> releases;
  for (int r = 1; r < getSize(); ++r)
    releases.push_back(monitor_.sendAsync(&monitorBytes_[0], 1, collieUint8, r));
  for (auto& w : releases) {
    collie::Result res = w.wait(left(until));
    TORCH_CHECK(res.ok(), "collie monitored_barrier on rank 0: releasing: ", res.toString());
  }
}

}  // namespace collie_torch
