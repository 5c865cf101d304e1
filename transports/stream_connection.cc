// Stream connection: framing, striping, header checks and non-blocking progress. The failure
// protocol (aborts, listening after a failure, linger) is in stream_abort.cc.
#include "transports/stream_connection.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

Status StreamConnection::isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  req->start(bytes, tag, true, peer_);
  if (!failed_.isOk()) return failed_;
  if (isP2PFrame(tag.coll)) {
    p2pSend(buf, bytes, tag, req);
    return Status::ok();
  }
  place(bytes, &sendRr_, [&](size_t s, size_t off, size_t len) {
    FrameTag t = tag;
    socks_[s].sends.push_back(
        SendItem{encodeFrame(commId_, t, len), static_cast<const char*>(buf) + off, len, 0, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

Status StreamConnection::irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  req->start(bytes, tag, false, peer_);
  if (!failed_.isOk()) return failed_;
  if (isP2PFrame(tag.coll)) {
    req->partsLeft = 1;
    Status st = p2p_.post(buf, bytes, tag, req, peer_);
    return st.isOk() ? st : fail(st);
  }
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

Status StreamConnection::lost(const char* what, ssize_t err) {
  if (err == -ENOSPC)  // a shared-memory ring that could not take its pages
    return fail(systemError(std::string(what) + " to peer rank " + std::to_string(peer_) + ": " +
                            strerror(static_cast<int>(-err)) +
                            " for its shared-memory ring (/dev/shm or the memory limit is full)"));
  // The peer is gone, but it may have said why before it went: its abort may wait unread on a
  // stream with nothing posted. It names the rank that failed; the reset would blame the peer.
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
    *r = readSome(s, reinterpret_cast<char*>(&s.hdr) + s.hdrGot, kHdr - s.hdrGot);
    if (*r <= 0) return false;
    s.hdrGot += static_cast<size_t>(*r);
  }
  return true;
}

Status StreamConnection::eofError(Sock& s) {
  bool drained = false;
  COLLIE_RETURN_IF_ERROR(drainSideChannel(&drained));
  // A point-to-point message may still come on the other streams: it is lost only when every
  // stream has ended.
  const bool allEnded =
      std::all_of(socks_.begin(), socks_.end(), [](const Sock& o) { return o.eof; });
  if (s.recvs.empty() && s.hdrGot == 0 && (!p2p_.waiting() || !allEnded)) return Status::ok();
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
  if (p2pHeader(s)) return p2pAfterSmallRead(s, it.data, body);
  Status st = checkFrame(s.hdr, commId_, it.expect, it.len, peer_);
  if (!st.isOk()) return fail(st);
  it.got = body;
  return Status::ok();
}

Status StreamConnection::progressRecv(Sock& s, bool* progressed) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  if (s.eof) return eofError(s);
  for (;;) {
    if (s.hdrGot == 0 && s.stash.empty() && !s.recvs.empty() && s.recvs.front().len > 0 &&
        s.recvs.front().len <= kSmallFrame) {
      bool done = false;
      COLLIE_RETURN_IF_ERROR(readSmallFrame(s, progressed, &done));
      if (!done) return Status::ok();
    }
    if (s.hdrGot < kHdr) {
      // With no receive posted we still read headers: that is how an abort or a closed
      // connection is noticed while this rank waits on someone else.
      ssize_t r = readSome(s, reinterpret_cast<char*>(&s.hdr) + s.hdrGot, kHdr - s.hdrGot);
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
    if (p2pHeader(s)) {
      bool done = false;
      COLLIE_RETURN_IF_ERROR(readP2PBody(s, progressed, &done));
      if (!done) return Status::ok();
      continue;
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
    bool done = false;
    COLLIE_RETURN_IF_ERROR(readBody(s, progressed, &done));
    if (!done) return Status::ok();
  }
}

Status StreamConnection::readUpTo(Sock& s, char* dst, size_t len, size_t* got, bool* progressed) {
  while (*got < len) {
    ssize_t r = readSome(s, dst + *got, len - *got);
    if (r == 0) return Status::ok();
    if (r == -ESHUTDOWN) {
      s.eof = true;
      return fail(remoteError("lost peer rank " + std::to_string(peer_) +
                              ": connection closed mid-frame (the peer process died)"));
    }
    if (r < 0) return lost("receive failed", r);
    *progressed = true;
    *got += static_cast<size_t>(r);
  }
  return Status::ok();
}

Status StreamConnection::readBody(Sock& s, bool* progressed, bool* done) {
  RecvItem& it = s.recvs.front();
  COLLIE_RETURN_IF_ERROR(readUpTo(s, it.data, it.len, &it.got, progressed));
  if (it.got < it.len) return Status::ok();
  Request* req = it.req;
  s.recvs.pop_front();
  s.hdrGot = 0;
  completePart(req);
  *done = true;
  return Status::ok();
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
  // spins on a readable socket and takes a core from the ranks that share it).
  const bool full = ++rounds_ % kFullRound == 0 || !hasPending();
  for (auto& s : socks_) {
    COLLIE_RETURN_IF_ERROR(progressSend(s, progressed));
    if (full || !s.recvs.empty() || (s.hdrGot > 0 && s.hdrGot < kHdr) || s.inP2P || p2p_.waiting())
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
  if (p2p_.waiting()) return true;
  for (const auto& s : socks_)
    if (!s.sends.empty() || !s.recvs.empty()) return true;
  return false;
}

}  // namespace collie
