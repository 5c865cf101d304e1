// Stream connection: framing, striping, header checks and non-blocking progress.
#include "transports/stream_connection.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "src/base/log.h"

namespace collie {

// Frames with at most this many body bytes are read with their header in one call.
constexpr size_t kSmallFrame = 4096;

StreamConnection::StreamConnection(int peer, uint64_t commId,
                                   std::vector<std::unique_ptr<ByteStream>> streams,
                                   const StreamOptions& opt, void* peerBuf, void* localBuf,
                                   size_t bufBytes)
    : peer_(peer),
      commId_(commId),
      opt_(opt),
      peerBuf_(peerBuf),
      localBuf_(localBuf),
      bufBytes_(bufBytes) {
  socks_.resize(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) socks_[i].io = std::move(streams[i]);
}

StreamConnection::~StreamConnection() = default;

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

template <typename Fn>
void StreamConnection::place(size_t bytes, size_t* rr, Fn&& fn) {
  size_t n = socks_.size();
  if (bytes < opt_.stripeBytes || n == 1) {
    fn(*rr % n, size_t{0}, bytes);
    ++*rr;
    return;
  }
  // Stripes are multiples of 64 bytes, the last socket takes the remainder.
  size_t per = (bytes / n) & ~size_t{63};
  for (size_t i = 0; i < n; ++i) {
    size_t off = i * per;
    size_t len = (i + 1 == n) ? bytes - off : per;
    fn(i, off, len);
  }
}

// Resets a request for a new transfer to this connection's peer.
static void startRequest(Request* req, size_t bytes, const FrameTag& tag, bool isSend, int peer) {
  req->done = false;
  req->status = Status::ok();
  req->bytes = bytes;
  req->peer = peer;
  req->isSend = isSend;
  req->tag = tag;
  req->partsLeft = 0;
}

Status StreamConnection::isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  startRequest(req, bytes, tag, true, peer_);
  if (!failed_.isOk()) return failed_;
  place(bytes, &sendRr_, [&](size_t s, size_t off, size_t len) {
    FrameTag t = tag;
    socks_[s].sends.push_back(
        SendItem{encodeFrame(commId_, t, len), static_cast<const char*>(buf) + off, len, 0, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

Status StreamConnection::irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  startRequest(req, bytes, tag, false, peer_);
  if (!failed_.isOk()) return failed_;
  place(bytes, &recvRr_, [&](size_t s, size_t off, size_t len) {
    socks_[s].recvs.push_back(RecvItem{static_cast<char*>(buf) + off, len, 0, tag, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

void StreamConnection::completePart(Request* req) {
  if (--req->partsLeft == 0) req->done = true;
}

Status StreamConnection::fail(Status st) {
  if (failed_.isOk()) {
    failed_ = st;
    COLLIE_INFO(kLogNet, "connection to rank %d failed: %s", peer_, st.message().c_str());
  }
  return failed_;
}

Status StreamConnection::progressSend(Sock& s, bool* progressed) {
  while (!s.sends.empty()) {
    SendItem& it = s.sends.front();
    constexpr size_t kHdr = sizeof(FrameHeader);
    iovec iov[2];
    int n = 0;
    if (it.sent < kHdr) {
      iov[n++] = {reinterpret_cast<char*>(&it.hdr) + it.sent, kHdr - it.sent};
      if (it.len > 0) iov[n++] = {const_cast<char*>(it.data), it.len};
    } else {
      iov[n++] = {const_cast<char*>(it.data) + (it.sent - kHdr), it.len - (it.sent - kHdr)};
    }
    ssize_t w = s.io->writev(iov, n);
    if (w == 0) return Status::ok();  // full
    if (w < 0) return lost("send failed", w);
    *progressed = true;
    it.sent += static_cast<size_t>(w);
    if (it.sent < kHdr + it.len) continue;  // partial: try again until it would block
    Request* req = it.req;
    s.sends.pop_front();
    completePart(req);
  }
  return Status::ok();
}

ssize_t ByteStream::readv(const iovec* iov, int n) {
  ssize_t total = 0;
  for (int i = 0; i < n; ++i) {
    ssize_t r = read(iov[i].iov_base, iov[i].iov_len);
    if (r < 0) return total > 0 ? total : r;
    total += r;
    if (static_cast<size_t>(r) < iov[i].iov_len) break;
  }
  return total;
}

Status StreamConnection::readAbort(Sock& s, const std::string& prefix) {
  size_t len = s.hdr.len > kMaxAbortPayload ? kMaxAbortPayload : s.hdr.len;
  std::string reason = prefix.substr(0, len);
  size_t got = reason.size();
  reason.resize(len);
  Deadline d = Deadline::afterMs(1000);
  while (got < len && !d.expired()) {
    ssize_t r = s.io->read(&reason[got], len - got);
    if (r < 0) break;
    if (r == 0) briefWait(*s.io, POLLIN, d.remainingMs(10));
    got += r > 0 ? static_cast<size_t>(r) : 0;
  }
  reason.resize(got);
  if (got < len) reason += " (reason cut short)";
  aborted_ = true;
  return fail(remoteError("peer rank " + std::to_string(peer_) + " aborted: " + reason));
}

Status StreamConnection::lost(const char* what, ssize_t err) {
  if (err == -ENOSPC)  // a shared-memory ring that could not take its pages
    return fail(systemError(std::string(what) + " to peer rank " + std::to_string(peer_) + ": " +
                            strerror(static_cast<int>(-err)) +
                            " for its shared-memory ring (/dev/shm or the memory limit is full)"));
  // The peer is gone, but it may have said why before it went: its abort waits unread in a
  // stream that had nothing posted, while a send to it failed (3 ranks over tcp, Reduce with
  // its root killed: rank 1 said "send failed (Connection reset)" to rank 2, whose abort named
  // rank 0).
  for (auto& s : socks_) {
    ssize_t r = 0;
    if (!s.eof && readHeader(s, &r) && s.hdr.magic == kAbortMagic && s.hdr.commId == commId_)
      return readAbort(s);
  }
  return fail(remoteError("lost peer rank " + std::to_string(peer_) + ": " + what + " (" +
                          strerror(static_cast<int>(-err)) +
                          "; the peer process died or the link is down)"));
}

bool StreamConnection::readHeader(Sock& s, ssize_t* r) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  while (s.hdrGot < kHdr) {
    *r = s.io->read(reinterpret_cast<char*>(&s.hdr) + s.hdrGot, kHdr - s.hdrGot);
    if (*r <= 0) return false;
    s.hdrGot += static_cast<size_t>(*r);
  }
  return true;
}

Connection::Word StreamConnection::listenAfterFailure() {
  constexpr size_t kHdr = sizeof(FrameHeader);
  if (!failed_.isOk()) {  // its abort, its loss or a garbled frame
    // The peer listens for this rank's abort in turn: what of it did not fit yet still goes.
    // (A peer stuck behind this rank's frame begun heard nothing from it, and named it silent:
    // 4 ranks over shm under ASan, 1 run in 12.)
    if (abortSent_)
      for (auto& s : socks_)
        if (!s.eof) pushAbort(s, Deadline::afterMs(0));
    return Word::kHeard;
  }
  if (!listening_) {
    // Nothing posted is wanted any more: the rest of a data frame begun is read past, not into
    // its buffer, and what was not sent stays unsent (sendAbort finished a frame begun).
    listening_ = true;
    for (auto& s : socks_) {
      if (s.hdrGot == kHdr && s.hdr.magic == kFrameMagic && s.hdr.commId == commId_) {
        const size_t got = s.recvs.empty() ? 0 : s.recvs.front().got;
        s.drop = s.hdr.len > got ? s.hdr.len - got : 0;
        s.hdrGot = 0;
      }
      s.recvs.clear();
      if (!abortSent_) s.sends.clear();
    }
  }
  // Bounded per call: a peer that streams data without end is still read a piece at a time.
  constexpr size_t kMostPerCall = size_t{64} << 20;
  char sink[65536];
  for (auto& s : socks_) {
    if (s.eof) return Word::kHeard;
    pushAbort(s, Deadline::afterMs(0));  // what of this rank's abort did not fit yet
    size_t taken = 0;
    ssize_t r = 0;
    while (taken < kMostPerCall) {
      if (s.drop > 0) {
        r = s.io->read(sink, std::min(s.drop, sizeof(sink)));
        if (r <= 0) break;
        s.drop -= static_cast<size_t>(r);
        taken += static_cast<size_t>(r);
        continue;
      }
      if (!readHeader(s, &r)) break;
      s.hdrGot = 0;
      if (s.hdr.magic == kAbortMagic && s.hdr.commId == commId_) {
        readAbort(s);
        return Word::kHeard;
      }
      if (s.hdr.magic != kFrameMagic || s.hdr.commId != commId_) {
        fail(checkFrame(s.hdr, commId_, FrameTag{}, 0, peer_));
        return Word::kHeard;
      }
      s.drop = s.hdr.len;
      taken += kHdr;
    }
    if (r == -ESHUTDOWN) {
      s.eof = true;
      fail(remoteError("lost peer rank " + std::to_string(peer_) + ": connection closed"));
      return Word::kHeard;
    }
    if (r < 0) {
      lost("receive failed", r);
      return Word::kHeard;
    }
  }
  return Word::kNothing;
}

bool StreamConnection::peerClosed() const {
  for (const auto& s : socks_)
    if (s.eof) return true;
  return false;
}

bool StreamConnection::abortPending() const {
  if (!abortSent_) return false;
  for (const auto& s : socks_)
    if (!s.eof && (!s.sends.empty() || s.abortOutAt < s.abortOut.size())) return true;
  return false;
}

Status StreamConnection::eofError(Sock& s) {
  if (s.recvs.empty() && s.hdrGot == 0) return Status::ok();
  return fail(remoteError("lost peer rank " + std::to_string(peer_) +
                          ": connection closed (the peer destroyed its communicator, exited or was "
                          "killed)"));
}

Status StreamConnection::readSmallFrame(Sock& s, bool* progressed, bool* done) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  RecvItem& it = s.recvs.front();
  iovec iov[2] = {{&s.hdr, kHdr}, {it.data, it.len}};
  ssize_t r = s.io->readv(iov, 2);
  if (r == 0) return Status::ok();
  if (r == -ESHUTDOWN) {
    s.eof = true;
    return eofError(s);
  }
  if (r < 0) return lost("receive failed", r);
  *progressed = true;
  *done = true;  // the caller goes on with whatever is still missing
  if (static_cast<size_t>(r) < kHdr) {
    s.hdrGot = static_cast<size_t>(r);
    return Status::ok();
  }
  s.hdrGot = kHdr;
  size_t body = static_cast<size_t>(r) - kHdr;
  // Bytes past the header landed in the user's buffer before the header was checked: an abort
  // reason or a mismatching frame fails the connection, so nobody uses them.
  if (s.hdr.magic == kAbortMagic && s.hdr.commId == commId_)
    return readAbort(s, std::string(it.data, body));
  Status st = checkFrame(s.hdr, commId_, it.expect, it.len, peer_);
  if (!st.isOk()) return fail(st);
  it.got = body;
  return Status::ok();
}

Status StreamConnection::progressRecv(Sock& s, bool* progressed) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  if (s.eof) return eofError(s);
  for (;;) {
    if (s.hdrGot == 0 && !s.recvs.empty() && s.recvs.front().len > 0 &&
        s.recvs.front().len <= kSmallFrame) {
      bool done = false;
      COLLIE_RETURN_IF_ERROR(readSmallFrame(s, progressed, &done));
      if (!done) return Status::ok();
    }
    if (s.hdrGot < kHdr) {
      // With no receive posted we still read headers: that is how an abort or a closed
      // connection is noticed while this rank waits on someone else.
      ssize_t r = s.io->read(reinterpret_cast<char*>(&s.hdr) + s.hdrGot, kHdr - s.hdrGot);
      if (r == 0) return Status::ok();
      if (r == -ESHUTDOWN) {
        // A peer that finished its part of the op may close before this rank has read the
        // rest from its other streams: a close is an error only where data is still expected.
        s.eof = true;
        return eofError(s);
      }
      if (r < 0) return lost("receive failed", r);
      *progressed = true;
      s.hdrGot += static_cast<size_t>(r);
      if (s.hdrGot < kHdr) continue;
      if (s.hdr.magic == kAbortMagic && s.hdr.commId == commId_) return readAbort(s);
    }
    if (s.recvs.empty()) {
      // A header for a receive not posted yet: only a garbled one is an error now.
      if (s.hdr.magic != kFrameMagic || s.hdr.commId != commId_)
        return fail(checkFrame(s.hdr, commId_, FrameTag{}, 0, peer_));
      return Status::ok();
    }
    RecvItem& it = s.recvs.front();
    if (it.got == 0) {
      Status st = checkFrame(s.hdr, commId_, it.expect, it.len, peer_);
      if (!st.isOk()) return fail(st);
    }
    while (it.got < it.len) {
      ssize_t r = s.io->read(it.data + it.got, it.len - it.got);
      if (r == 0) return Status::ok();
      if (r == -ESHUTDOWN) {
        s.eof = true;
        return fail(remoteError("lost peer rank " + std::to_string(peer_) +
                                ": connection closed mid-frame (the peer process died)"));
      }
      if (r < 0) return lost("receive failed", r);
      *progressed = true;
      it.got += static_cast<size_t>(r);
    }
    Request* req = it.req;
    s.recvs.pop_front();
    s.hdrGot = 0;
    completePart(req);
  }
}

Status StreamConnection::progress(bool* progressed) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  constexpr unsigned kFullRound = 16;
  if (!failed_.isOk()) return failed_;
  // A socket with no receive posted on it is read only every kFullRound-th call (an abort, a
  // close or a garbled frame there is noticed a few rounds later): in the wait for a small
  // message that saves a failed receive call per idle socket per round, which the message
  // would otherwise wait behind. A connection with nothing pending is called only after poll()
  // said one of its sockets is readable (or to see whether the peer is alive): it reads them
  // all, so that a header that came early is stashed and poll() can sleep again (else the rank
  // spins on a readable socket and takes a core from the others: 8 netns hosts on 2 cores ran
  // recursive doubling at 8 B in 1.2 ms instead of 0.65).
  const bool full = ++rounds_ % kFullRound == 0 || !hasPending();
  for (auto& s : socks_) {
    COLLIE_RETURN_IF_ERROR(progressSend(s, progressed));
    if (full || !s.recvs.empty() || (s.hdrGot > 0 && s.hdrGot < kHdr))
      COLLIE_RETURN_IF_ERROR(progressRecv(s, progressed));
  }
  return Status::ok();
}

void StreamConnection::appendPollFds(std::vector<pollfd>* fds) const {
  constexpr size_t kHdr = sizeof(FrameHeader);
  for (const auto& s : socks_) {
    if (s.eof) continue;
    short ev = 0;
    // A stashed header with no receive posted would make POLLIN fire forever.
    if (s.hdrGot < kHdr || !s.recvs.empty()) ev |= POLLIN;
    if (!s.sends.empty()) ev |= POLLOUT;
    int fd = s.io->pollFd();
    if (ev && fd >= 0) fds->push_back(pollfd{fd, ev, 0});
  }
}

Status StreamConnection::checkEarlyFrame(const FrameTag& mine) const {
  // A header stashed with no receive posted (progressRecv). One of a later call is no sign:
  // a peer done with this call may have begun the next.
  for (const auto& s : socks_) {
    if (s.hdrGot == sizeof(FrameHeader) && s.recvs.empty() && s.hdr.magic == kFrameMagic &&
        s.hdr.commId == commId_ && s.hdr.seq == mine.seq)
      return checkFrame(s.hdr, commId_, mine, s.hdr.len, peer_);
  }
  return Status::ok();
}

bool StreamConnection::hasPending() const {
  for (const auto& s : socks_)
    if (!s.sends.empty() || !s.recvs.empty()) return true;
  return false;
}

bool StreamConnection::sendsQueued() const {
  for (const auto& s : socks_)
    if (!s.sends.empty()) return true;
  return false;
}

void StreamConnection::sendAbort(const std::string& reason) {
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
  const std::string r = reason.substr(0, kMaxAbortPayload);
  FrameHeader h{};
  h.magic = kAbortMagic;
  h.commId = commId_;
  h.len = r.size();
  std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
  frame += r;
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

}  // namespace collie
