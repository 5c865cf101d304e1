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
    : peer_(peer), opt_(opt), peerBuf_(peerBuf), localBuf_(localBuf), bufBytes_(bufBytes) {
  socks_.resize(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) socks_[i].io = std::move(streams[i]);
  lanes_.emplace_back(new Lane());
  lanes_[0]->commId = commId;
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

Status StreamConnection::sendOn(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                                Request* req) {
  return streamSend(lane, buf, bytes, tag, req);
}

Status StreamConnection::streamSend(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                                    Request* req) {
  req->start(bytes, tag, true, peer_);
  if (!failed_.isOk()) return failed_;
  if (isP2PFrame(tag.coll)) {
    p2pSend(lane, buf, bytes, tag, req);
    return Status::ok();
  }
  place(bytes, &lane->sendRr, [&](size_t s, size_t off, size_t len) {
    socks_[s].sends.push_back(SendItem{encodeFrame(lane->commId, tag, len),
                                       static_cast<const char*>(buf) + off, len, 0, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

Status StreamConnection::recvOn(Lane* lane, void* buf, size_t bytes, const FrameTag& tag,
                                Request* req) {
  req->start(bytes, tag, false, peer_);
  if (!failed_.isOk()) return failed_;
  if (isP2PFrame(tag.coll)) {
    req->partsLeft = 1;
    Status st = lane->p2p.post(buf, bytes, tag, req, peer_);
    return st.isOk() ? st : fail(st);
  }
  place(bytes, &lane->recvRr, [&](size_t i, size_t off, size_t len) {
    socks_[i].recvs.push_back(RecvItem{static_cast<char*>(buf) + off, len, 0, tag, req, lane});
    ++req->partsLeft;
  });
  return laned_ ? takeEarlyFrames(lane, req) : Status::ok();
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

Status StreamConnection::failLost(Status st) {
  if (failed_.isOk()) lostLink_ = true;
  return fail(std::move(st));
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
    if (!s.eof && readHeader(s, &r) && abortHeader(s.hdr)) return readAbort(s);
  }
  return failLost(remoteError("lost peer rank " + std::to_string(peer_) + ": " + what + " (" +
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
  if (s.recvs.empty() && s.hdrGot == 0 && (!anyP2PWaiting() || !allEnded)) return Status::ok();
  return failLost(
      remoteError("lost peer rank " + std::to_string(peer_) +
                  ": connection closed (the peer destroyed its communicator, exited or was "
                  "killed)"));
}

Status StreamConnection::readSmallFrame(Sock& s, bool* progressed, bool* done) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  RecvItem& it = s.recvs.front();
  // The body lands in a buffer of the stream's first: the frame may be another lane's or a
  // point-to-point one, and the posted buffer may hold data still being sent until its own
  // frame comes (causality keeps a peer's answer behind what it answers, not other frames).
  s.bounce.resize(kSmallFrame);
  iovec iov[2] = {{&s.hdr, kHdr}, {s.bounce.data(), it.len}};
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
  const char* got = s.bounce.data();
  if (abortHeader(s.hdr)) return readAbort(s, std::string(got, body));
  if (p2pHeader(s)) return p2pAfterSmallRead(s, got, body);
  if (s.hdr.magic == kFrameMagic && laneFor(s.hdr.commId) != it.lane) {
    s.stash.assign(got, body);  // another lane's frame: its body is read again from here
    return Status::ok();
  }
  Status st = checkFrame(s.hdr, it.lane->commId, it.expect, it.len, peer_);
  if (!st.isOk()) return fail(st);
  memcpy(it.data, got, body);
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
      if (abortHeader(s.hdr)) return readAbort(s);
    }
    if (p2pHeader(s)) {
      bool done = false;
      COLLIE_RETURN_IF_ERROR(readP2PBody(s, progressed, &done));
      if (!done) return Status::ok();
      continue;
    }
    bool done = false;
    COLLIE_RETURN_IF_ERROR(routeFrame(s, progressed, &done));
    if (!done) return Status::ok();
  }
}

Status StreamConnection::routeFrame(Sock& s, bool* progressed, bool* done) {
  if (s.filling) return fillEarly(s, progressed, done);
  Lane* lane = s.hdr.magic == kFrameMagic ? laneFor(s.hdr.commId) : nullptr;
  if (lane == nullptr && (!laned_ || s.hdr.magic != kFrameMagic))
    return fail(checkFrame(s.hdr, lanes_[0]->commId, FrameTag{}, 0, peer_));
  auto it = firstOf(s, lane);
  if (it == s.recvs.end()) {
    // A header for a receive not posted yet: with one lane it waits for one; with several it
    // is read in and kept, so that the frames of other lanes behind it go on.
    if (!laned_) return Status::ok();
    s.early.push_back(Early{s.hdr, std::string(s.hdr.len, '\0'), 0, lane});
    s.filling = true;
    return fillEarly(s, progressed, done);
  }
  if (it->got == 0) {
    Status st = checkFrame(s.hdr, lane->commId, it->expect, it->len, peer_);
    if (!st.isOk()) return fail(st);
  }
  return readBody(s, it, progressed, done);
}

Status StreamConnection::readUpTo(Sock& s, char* dst, size_t len, size_t* got, bool* progressed) {
  while (*got < len) {
    ssize_t r = readSome(s, dst + *got, len - *got);
    if (r == 0) return Status::ok();
    if (r == -ESHUTDOWN) {
      s.eof = true;
      return failLost(remoteError("lost peer rank " + std::to_string(peer_) +
                                  ": connection closed mid-frame (the peer process died)"));
    }
    if (r < 0) return lost("receive failed", r);
    *progressed = true;
    *got += static_cast<size_t>(r);
  }
  return Status::ok();
}

Status StreamConnection::readBody(Sock& s, std::deque<RecvItem>::iterator it, bool* progressed,
                                  bool* done) {
  COLLIE_RETURN_IF_ERROR(readUpTo(s, it->data, it->len, &it->got, progressed));
  if (it->got < it->len) return Status::ok();
  Request* req = it->req;
  s.recvs.erase(it);
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
    if (full || !s.recvs.empty() || (s.hdrGot > 0 && s.hdrGot < kHdr) || s.inP2P || s.filling ||
        anyP2PWaiting())
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
    if (s.hdrGot < kHdr || !s.recvs.empty() || s.filling) ev |= POLLIN;
    if (!s.sends.empty()) ev |= POLLOUT;
    int fd = s.io->pollFd();
    if (ev && fd >= 0) fds->push_back(pollfd{fd, ev, 0});
  }
}

Status StreamConnection::checkEarlyOn(const Lane* lane, const FrameTag& mine) const {
  // A header stashed with no receive posted (routeFrame), or a frame kept early. One of a later
  // call is no sign: a peer done with this call may have begun the next.
  for (const auto& s : socks_) {
    if (s.hdrGot == sizeof(FrameHeader) && s.recvs.empty() && s.hdr.magic == kFrameMagic &&
        s.hdr.commId == lane->commId && s.hdr.seq == mine.seq)
      return checkFrame(s.hdr, lane->commId, mine, s.hdr.len, peer_);
    for (const Early& e : s.early)
      if (e.lane == lane && e.hdr.seq == mine.seq)
        return checkFrame(e.hdr, lane->commId, mine, e.hdr.len, peer_);
  }
  return Status::ok();
}

bool StreamConnection::hasPending() const {
  if (anyP2PWaiting()) return true;
  for (const auto& s : socks_)
    if (!s.sends.empty() || !s.recvs.empty()) return true;
  return false;
}

}  // namespace collie
