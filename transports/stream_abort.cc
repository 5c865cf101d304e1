// StreamConnection's part in the failure protocol: this rank's abort out on every stream, the
// peer's abort in, listening after a failure, and the close that lets the peer read the abort.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "transports/stream_connection.h"

namespace collie {

// Waits a little for a stream to become ready; streams without an fd just yield.
static void briefWait(const ByteStream& io, short events, int ms) {
  int fd = io.pollFd();
  if (fd >= 0) {
    pollfd p{fd, events, 0};
    poll(&p, 1, ms);
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void StreamConnection::sendAbortOn(uint64_t commId, const Status& failure) {
  // Also to a peer whose abort came first: its answer tells it this rank is not the one stuck
  // (CommImpl::silentPeers).
  if (abortSent_ || socks_.empty()) return;
  abortSent_ = true;
  // The abort goes on every stream, so that whichever one the peer reads first tells it why. A
  // stream in the middle of a frame first gets the rest of that frame (its buffer is still
  // valid: this runs inside the failing op), else the abort would be read as body bytes and the
  // peer would see only a close and blame this rank. Frames not begun never go. Bounded: what
  // does not fit in 500 ms (or moves not for 50) goes on while this rank listens
  // (listenAfterFailure, still inside the op), as the peer, which may be telling this rank the
  // same, reads again; an abort alone goes on before the connection closes (linger).
  const std::string frame = encodeAbort(commId, failure);
  const Deadline d = Deadline::afterMs(500);
  for (auto& s : socks_) {
    if (s.eof) continue;
    s.io->prepareAbort();
    const bool begun = !s.sends.empty() && s.sends.front().sent > 0;
    while (s.sends.size() > (begun ? 1u : 0u)) s.sends.pop_back();
    s.abortOut = frame;
    s.abortOutAt = 0;
    // A peer that takes nothing for 50 ms is stuck, or telling this rank the same: the others
    // are told first.
    pushAbort(s, d, 50);
  }
  // Communicators sharing the connection fail with this one (the peer's fail as it reads the
  // abort): their calls in flight end now, not at their deadlines.
  if (laned_)
    fail(Status(failure.code(), "a communicator sharing the connection to peer rank " +
                                    std::to_string(peer_) + " failed: " + failure.message()));
}

bool StreamConnection::pushAbort(Sock& s, const Deadline& d, int64_t idleMs) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  int64_t movedMs = coarseNowMs();
  for (;;) {
    iovec iov[2];
    int n = 0;
    if (!s.sends.empty()) {  // the rest of the frame begun
      SendItem& it = s.sends.front();
      if (it.sent < kHdr) {
        iov[n++] = {reinterpret_cast<char*>(&it.hdr) + it.sent, kHdr - it.sent};
        if (it.len > 0) iov[n++] = {const_cast<char*>(it.data), it.len};
      } else {
        iov[n++] = {const_cast<char*>(it.data) + (it.sent - kHdr), it.len - (it.sent - kHdr)};
      }
    } else if (s.abortOutAt < s.abortOut.size()) {
      iov[n++] = {&s.abortOut[s.abortOutAt], s.abortOut.size() - s.abortOutAt};
    } else {
      return true;
    }
    const ssize_t w = s.io->writev(iov, n);
    if (w < 0) {  // the peer is gone: nothing more goes
      s.sends.clear();
      s.abortOut.clear();
      s.abortOutAt = 0;
      return false;
    }
    if (w == 0) {
      if (d.expired() || (idleMs >= 0 && coarseNowMs() - movedMs > idleMs)) return false;
      briefWait(*s.io, POLLOUT, d.remainingMs(10));
      continue;
    }
    movedMs = coarseNowMs();
    if (s.sends.empty()) {
      s.abortOutAt += static_cast<size_t>(w);
      continue;
    }
    SendItem& it = s.sends.front();
    it.sent += static_cast<size_t>(w);
    if (it.sent == kHdr + it.len) s.sends.pop_front();  // its op failed: no one waits on it
  }
}

bool StreamConnection::sendsQueued() const {
  for (const auto& s : socks_)
    if (!s.sends.empty()) return true;
  return false;
}

bool StreamConnection::abortPending() const {
  if (!abortSent_) return false;
  for (const auto& s : socks_)
    if (!s.eof && (!s.sends.empty() || s.abortOutAt < s.abortOut.size())) return true;
  return false;
}

Status StreamConnection::readAbort(Sock& s, const std::string& prefix) {
  size_t len = s.hdr.len > kMaxAbortPayload ? kMaxAbortPayload : s.hdr.len;
  std::string reason = prefix.substr(0, len);
  size_t got = reason.size();
  reason.resize(len);
  Deadline d = Deadline::afterMs(1000);
  while (got < len && !d.expired()) {
    ssize_t r = readSome(s, &reason[got], len - got);
    if (r < 0) break;
    if (r == 0) briefWait(*s.io, POLLIN, d.remainingMs(10));
    got += r > 0 ? static_cast<size_t>(r) : 0;
  }
  reason.resize(got);
  if (got < len) reason += " (reason cut short)";
  aborted_ = true;
  return fail(abortError(peer_, s.hdr, reason));
}

StreamConnection::Word StreamConnection::listenAfterFailure() {
  if (!failed_.isOk()) {  // its abort, its loss or a garbled frame
    // The peer listens for this rank's abort in turn: what of it did not fit yet still goes,
    // else a peer stuck behind this rank's frame begun hears nothing and names this rank silent.
    if (abortSent_)
      for (auto& s : socks_)
        if (!s.eof) pushAbort(s, Deadline::afterMs(0));
    return lostLink_ ? Word::kLost : Word::kHeard;
  }
  if (!listening_) dropPosted();
  // A stream that ended or broke with no abort before it is a lost link, not the peer's word.
  for (auto& s : socks_)
    if (heardOn(s)) return lostLink_ || failed_.isOk() ? Word::kLost : Word::kHeard;
  return Word::kNothing;
}

void StreamConnection::dropPosted() {
  constexpr size_t kHdr = sizeof(FrameHeader);
  // Nothing posted is wanted any more: the rest of a data frame begun is read past, not into
  // its buffer, and what was not sent stays unsent (sendAbort finished a frame begun).
  listening_ = true;
  for (auto& s : socks_) {
    if (s.hdrGot == kHdr && s.hdr.magic == kFrameMagic) {
      auto it = firstOf(s, laneFor(s.hdr.commId));
      const size_t got = s.inP2P               ? s.p2p.got
                         : s.filling           ? s.early.back().got
                         : it != s.recvs.end() ? it->got
                                               : 0;
      s.drop = s.hdr.len > got ? s.hdr.len - got : 0;
      s.hdrGot = 0;
    }
    s.inP2P = false;
    s.filling = false;
    s.recvs.clear();
    s.early.clear();
    if (!abortSent_) s.sends.clear();
  }
  for (auto& l : lanes_) l->p2p.clear();
}

bool StreamConnection::heardOn(Sock& s) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  // Bounded per call: a peer that streams data without end is still read a piece at a time.
  constexpr size_t kMostPerCall = size_t{64} << 20;
  char sink[65536];
  if (s.eof) return true;
  pushAbort(s, Deadline::afterMs(0));  // what of this rank's abort did not fit yet
  size_t taken = 0;
  ssize_t r = 0;
  while (taken < kMostPerCall) {
    if (s.drop > 0) {
      r = readSome(s, sink, std::min(s.drop, sizeof(sink)));
      if (r <= 0) break;
      s.drop -= static_cast<size_t>(r);
      taken += static_cast<size_t>(r);
      continue;
    }
    if (!readHeader(s, &r)) break;
    s.hdrGot = 0;
    if (abortHeader(s.hdr)) {
      readAbort(s);
      return true;
    }
    if (s.hdr.magic != kFrameMagic || (!laned_ && laneFor(s.hdr.commId) == nullptr)) {
      fail(checkFrame(s.hdr, lanes_[0]->commId, FrameTag{}, 0, peer_));
      return true;
    }
    s.drop = s.hdr.len;
    taken += kHdr;
  }
  if (r == -ESHUTDOWN) {
    s.eof = true;
    failLost(remoteError("lost peer rank " + std::to_string(peer_) + ": connection closed"));
    return true;
  }
  if (r < 0) lost("receive failed", r);
  return r < 0;
}

bool StreamConnection::peerClosed() const {
  for (const auto& s : socks_)
    if (s.eof) return true;
  return false;
}

void StreamConnection::linger(const Deadline& deadline) {
  if (!abortSent_) return;
  // The rest of a frame begun is gone with its op's buffers (the op has returned): on such a
  // stream the abort never goes, and the peer learns from the close.
  for (auto& s : socks_)
    if (!s.eof && s.sends.empty()) pushAbort(s, deadline);
  // Closing a socket with unread data makes the kernel send a reset, and a reset makes the peer
  // lose the abort frame still in its receive queue: it would then blame this rank instead of
  // the rank that really failed. So: end of data after the abort, then read and discard until
  // the peer ends too (it does once it has read the abort) or the deadline passes.
  for (auto& s : socks_) s.io->shutdownWrite();
  char sink[65536];
  for (auto& s : socks_) {
    while (!s.eof && !deadline.expired()) {
      ssize_t r = s.io->read(sink, sizeof(sink));
      if (r < 0) break;
      if (r == 0) briefWait(*s.io, POLLIN, deadline.remainingMs(50));
    }
  }
}

}  // namespace collie
