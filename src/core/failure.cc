// The failure protocol: abort to every peer, a grace of listening, silent peers named.
#include "src/core/failure.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "src/base/log.h"

namespace collie {

void FailureProtocol::record(const Status& s, const Status& replaces) {
  std::lock_guard<std::mutex> l(mu_);
  if (first_.isOk() || first_.message() == replaces.message()) first_ = s;
  lastError_ = s.message();
}

Status FailureProtocol::fail(const Status& s) {
  record(s, Status());
  if (failed_.exchange(true)) return s;
  // Peers that take data first: an abort to a peer that does not read waits a while, and the
  // others listen for theirs meanwhile; told late, a live peer would name this rank as stuck.
  for (const bool queued : {false, true})
    for (AbortLink* c : peers_)
      if (c->sendsQueued() == queued) c->sendAbort(s);
  Status out = s;
  // A wait that timed out names the peer it waited on, which may itself wait on a stuck one;
  // a peer's abort passes that on.
  const bool stuckPeer = s.code() == collieTimeout || s.stalledOn() >= 0;
  if (stuckPeer) {
    const std::string silent = silentPeers();
    if (!silent.empty()) {
      out = Status(s.code(), s.message() + silent).withStalledOn(s.stalledOn());
      record(out, s);
    }
  } else {
    listen(/*forWord=*/false);
  }
  COLLIE_WARN(kLogColl, "%s", out.message().c_str());
  return out;
}

int64_t FailureProtocol::graceMs() const {
  return std::clamp<int64_t>(timeoutMs_ / 10, 1000, 3000);
}

FailureProtocol::Hearing FailureProtocol::listen(bool forWord) {
  // An abort behind a frame begun goes on while the op has not returned: after it the frame's
  // buffer may be gone, and a bare close would make that peer blame this rank. With forWord,
  // a rank that heard every peer still pushes the rest of its own abort: they listen for it.
  const Deadline grace = Deadline::afterMs(graceMs());
  Hearing h;
  for (;;) {
    h.silent.clear();
    h.lost.clear();
    h.told = 0;
    bool owed = false;  // this rank's abort, not all gone to a peer that waits for it
    for (AbortLink* c : peers_) {
      const AbortLink::Word w = c->listenAfterFailure();
      if (w != AbortLink::Word::kUnknown) ++h.told;
      if (w == AbortLink::Word::kNothing) h.silent.push_back(c->peer());
      if (w == AbortLink::Word::kLost) h.lost.push_back(c->peer());
      if (c->abortPending() && (!forWord || w == AbortLink::Word::kHeard)) owed = true;
    }
    if (((!forWord || h.silent.empty()) && !owed) || grace.expired()) return h;
    // collieCommAbort waits for this op (it takes the op's lock): the grace ends with it.
    if (aborting_->load()) {
      h.cutShort = true;
      return h;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {

// "peer rank 3" or "peer ranks 1, 2 and 7 more".
std::string peerList(const std::vector<int>& ranks) {
  std::string names;
  constexpr size_t kListed = 8;
  for (size_t i = 0; i < ranks.size() && i < kListed; ++i)
    names += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kListed) names += " and " + std::to_string(ranks.size() - kListed) + " more";
  return (ranks.size() == 1 ? "peer rank " : "peer ranks ") + names;
}

}  // namespace

std::string FailureProtocol::silentPeers() {
  const Hearing h = listen(/*forWord=*/true);
  if (h.cutShort)
    return "; the listening for the peers' word after this failure was cut short by "
           "collieCommAbort";
  std::string out;
  const std::vector<int>& silent = h.silent;
  if (!silent.empty()) {
    const bool one = silent.size() == 1;
    out = "; after this failure " + peerList(silent) + " sent no word in " +
          std::to_string(graceMs()) + " ms";
    // Only when every other peer spoke is a silent one surely the stuck one, not cut off.
    if (h.lost.empty() && silent.size() < h.told)
      out += std::string(", while every other peer reported its failure: ") +
             (one ? "that rank is the one" : "those ranks are the ones") + " stuck";
    out += " (stopped, hung, or not calling this op)";
  }
  // A link that timed out or reset while this rank waited on another peer names a peer that
  // is dead or cut off: it may be the cause, though it said nothing.
  if (!h.lost.empty())
    out += (h.lost.size() == 1 ? "; the connection to " : "; the connections to ") +
           peerList(h.lost) + (h.lost.size() == 1 ? " was" : " were") +
           " lost meanwhile (closed, reset or timed out: dead, exited or cut off)";
  return out;
}

Status FailureProtocol::failedError() {
  std::lock_guard<std::mutex> l(mu_);
  return Status(first_.code(),
                "the communicator failed earlier and must be destroyed (collieCommAbort): " +
                    first_.message());
}

Status FailureProtocol::firstError() {
  std::lock_guard<std::mutex> l(mu_);
  return first_;
}

std::string FailureProtocol::lastError() {
  std::lock_guard<std::mutex> l(mu_);
  return lastError_;
}

void FailureProtocol::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> l(mu_);
  lastError_ = msg;
}

}  // namespace collie
