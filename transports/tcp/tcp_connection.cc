// TCP connection: framing, striping, header checks and non-blocking progress.
#include "transports/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "src/base/dtype.h"
#include "src/base/log.h"

namespace collie {

std::string describeFrameTag(const FrameTag& t) {
  std::string s = collectiveName(static_cast<Collective>(t.coll));
  s += " count " + std::to_string(t.count) + " " +
       dtypeName(static_cast<collieDataType_t>(t.dtype));
  if (t.coll != static_cast<uint8_t>(Collective::kAllGather) &&
      t.coll != static_cast<uint8_t>(Collective::kBroadcast))
    s += std::string(" ") + redOpName(static_cast<collieRedOp_t>(t.op));
  if (t.root >= 0) s += " root " + std::to_string(t.root);
  s += " (op #" + std::to_string(t.seq) + ")";
  return s;
}

FrameHeader encodeFrame(uint64_t commId, const FrameTag& t, uint64_t len) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.tag = t.tag;
  h.commId = commId;
  h.seq = t.seq;
  h.count = t.count;
  h.len = len;
  h.coll = t.coll;
  h.dtype = t.dtype;
  h.op = t.op;
  h.algo = t.algo;
  h.root = t.root;
  return h;
}

Status checkFrame(const FrameHeader& h, uint64_t commId, const FrameTag& e, uint64_t len,
                  int peer) {
  std::string who = "peer rank " + std::to_string(peer);
  if (h.magic != kFrameMagic || h.commId != commId) {
    char buf[160];
    snprintf(buf, sizeof(buf), "garbled frame from %s (magic 0x%08x, communicator %016llx)",
             who.c_str(), h.magic, static_cast<unsigned long long>(h.commId));
    return remoteError(buf);
  }
  FrameTag got;
  got.seq = h.seq;
  got.count = h.count;
  got.coll = h.coll;
  got.dtype = h.dtype;
  got.op = h.op;
  got.root = h.root;
  if (h.seq != e.seq || h.count != e.count || h.coll != e.coll || h.dtype != e.dtype ||
      h.op != e.op || h.root != e.root) {
    return invalidUsage("ranks disagree: " + who + " called " + describeFrameTag(got) +
                        " while this rank called " + describeFrameTag(e) +
                        "; every rank must call the same collectives in the same order with the "
                        "same count, datatype, op and root");
  }
  if (h.algo != e.algo || h.tag != e.tag || h.len != len) {
    return invalidUsage("ranks disagree on the schedule of " + describeFrameTag(e) + ": " + who +
                        " sent step " + std::to_string(h.tag) + " of " + std::to_string(h.len) +
                        " bytes (algorithm " + std::to_string(h.algo) + "), this rank expected step " +
                        std::to_string(e.tag) + " of " + std::to_string(len) + " bytes (algorithm " +
                        std::to_string(e.algo) + "); check COLLIE_ALGO and COLLIE_* settings match");
  }
  return Status::ok();
}

TcpConnection::TcpConnection(int peer, int myRank, uint64_t commId, std::vector<int> fds,
                             const TcpOptions& opt)
    : peer_(peer), myRank_(myRank), commId_(commId), opt_(opt) {
  socks_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) socks_[i].fd = fds[i];
}

TcpConnection::~TcpConnection() {
  for (auto& s : socks_)
    if (s.fd >= 0) close(s.fd);
}

void TcpConnection::linger(const Deadline& deadline) {
  if (!abortSent_) return;
  // Closing with unread data makes the kernel send a reset, and a reset makes the peer lose
  // the abort frame still in its receive queue: it would then blame this rank instead of the
  // rank that really failed. So: FIN after the abort, then read and discard until the peer
  // closes too (it does once it has read the abort) or the deadline passes.
  std::vector<pollfd> pf;
  for (auto& s : socks_) {
    shutdown(s.fd, SHUT_WR);
    if (!s.eof) pf.push_back({s.fd, POLLIN, 0});
  }
  char sink[65536];
  while (!pf.empty() && !deadline.expired()) {
    if (poll(pf.data(), pf.size(), deadline.remainingMs(100)) <= 0) continue;
    for (size_t i = pf.size(); i-- > 0;) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = recv(pf[i].fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) pf.erase(pf.begin() + i);
    }
  }
}

template <typename Fn>
void TcpConnection::place(size_t bytes, size_t* rr, Fn&& fn) {
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

Status TcpConnection::isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  req->done = false;
  req->status = Status::ok();
  req->bytes = bytes;
  req->peer = peer_;
  req->isSend = true;
  req->tag = tag;
  if (!failed_.isOk()) return failed_;
  req->partsLeft = 0;
  place(bytes, &sendRr_, [&](size_t s, size_t off, size_t len) {
    FrameTag t = tag;
    socks_[s].sends.push_back(
        SendItem{encodeFrame(commId_, t, len), static_cast<const char*>(buf) + off, len, 0, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

Status TcpConnection::irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  req->done = false;
  req->status = Status::ok();
  req->bytes = bytes;
  req->peer = peer_;
  req->isSend = false;
  req->tag = tag;
  if (!failed_.isOk()) return failed_;
  req->partsLeft = 0;
  place(bytes, &recvRr_, [&](size_t s, size_t off, size_t len) {
    socks_[s].recvs.push_back(RecvItem{static_cast<char*>(buf) + off, len, 0, tag, req});
    ++req->partsLeft;
  });
  return Status::ok();
}

void TcpConnection::completePart(Request* req) {
  if (--req->partsLeft == 0) req->done = true;
}

Status TcpConnection::fail(Status st) {
  if (failed_.isOk()) {
    failed_ = st;
    COLLIE_INFO(kLogNet, "connection to rank %d failed: %s", peer_, st.message().c_str());
  }
  return failed_;
}

Status TcpConnection::progressSend(Sock& s, bool* progressed) {
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
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = n;
    ssize_t w = sendmsg(s.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      if (errno == EINTR) continue;
      int e = errno;
      return fail(remoteError("lost peer rank " + std::to_string(peer_) + ": send failed (" +
                              strerror(e) + "; the peer process died or the link is down)"));
    }
    *progressed = true;
    it.sent += static_cast<size_t>(w);
    if (it.sent < kHdr + it.len) return Status::ok();  // socket buffer full
    Request* req = it.req;
    s.sends.pop_front();
    completePart(req);
  }
  return Status::ok();
}

Status TcpConnection::readAbort(Sock& s) {
  size_t len = s.hdr.len > kMaxAbortPayload ? kMaxAbortPayload : s.hdr.len;
  std::string reason(len, '\0');
  Status st = readFull(s.fd, &reason[0], len, Deadline::afterMs(1000));
  if (!st.isOk()) reason = "(reason lost: " + st.message() + ")";
  aborted_ = true;
  return fail(remoteError("peer rank " + std::to_string(peer_) + " aborted: " + reason));
}

Status TcpConnection::eofError(Sock& s) {
  if (s.recvs.empty() && s.hdrGot == 0) return Status::ok();
  return fail(remoteError("lost peer rank " + std::to_string(peer_) +
                          ": connection closed (the peer process exited or was killed)"));
}

Status TcpConnection::progressRecv(Sock& s, bool* progressed) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  if (s.eof) return eofError(s);
  for (;;) {
    if (s.hdrGot < kHdr) {
      // With no receive posted we still read headers: that is how an abort or a closed
      // connection is noticed while this rank waits on someone else.
      ssize_t r = recv(s.fd, reinterpret_cast<char*>(&s.hdr) + s.hdrGot, kHdr - s.hdrGot,
                       MSG_DONTWAIT);
      if (r == 0) {
        // A peer that finished its part of the op may close before this rank has read the
        // rest from its other sockets: a close is an error only where data is still expected.
        s.eof = true;
        return eofError(s);
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
        if (errno == EINTR) continue;
        int e = errno;
        return fail(remoteError("lost peer rank " + std::to_string(peer_) + ": receive failed (" +
                                strerror(e) + ")"));
      }
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
      ssize_t r = recv(s.fd, it.data + it.got, it.len - it.got, MSG_DONTWAIT);
      if (r == 0) {
        s.eof = true;
        return fail(remoteError("lost peer rank " + std::to_string(peer_) +
                                ": connection closed mid-frame (the peer process died)"));
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
        if (errno == EINTR) continue;
        int e = errno;
        return fail(remoteError("lost peer rank " + std::to_string(peer_) + ": receive failed (" +
                                strerror(e) + ")"));
      }
      *progressed = true;
      it.got += static_cast<size_t>(r);
    }
    Request* req = it.req;
    s.recvs.pop_front();
    s.hdrGot = 0;
    completePart(req);
  }
}

Status TcpConnection::progress(bool* progressed) {
  if (!failed_.isOk()) return failed_;
  for (auto& s : socks_) {
    COLLIE_RETURN_IF_ERROR(progressSend(s, progressed));
    COLLIE_RETURN_IF_ERROR(progressRecv(s, progressed));
  }
  return Status::ok();
}

void TcpConnection::appendPollFds(std::vector<pollfd>* fds) const {
  constexpr size_t kHdr = sizeof(FrameHeader);
  for (const auto& s : socks_) {
    if (s.eof) continue;
    short ev = 0;
    // A stashed header with no receive posted would make POLLIN fire forever.
    if (s.hdrGot < kHdr || !s.recvs.empty()) ev |= POLLIN;
    if (!s.sends.empty()) ev |= POLLOUT;
    if (ev) fds->push_back(pollfd{s.fd, ev, 0});
  }
}

bool TcpConnection::hasPending() const {
  for (const auto& s : socks_)
    if (!s.sends.empty() || !s.recvs.empty()) return true;
  return false;
}

void TcpConnection::sendAbort(const std::string& reason) {
  if (aborted_ || abortSent_ || socks_.empty()) return;
  abortSent_ = true;
  // The abort goes on every socket that is at a frame boundary, so that whichever socket the
  // peer reads first tells it why; a socket mid-frame is skipped (the abort would be read as
  // body bytes) and the peer learns from the other sockets or from the close.
  std::string r = reason.substr(0, kMaxAbortPayload);
  FrameHeader h{};
  h.magic = kAbortMagic;
  h.commId = commId_;
  h.len = r.size();
  Deadline d = Deadline::afterMs(200);
  for (auto& s : socks_) {
    if (s.eof) continue;
    if (!s.sends.empty() && s.sends.front().sent > 0) continue;
    if (writeFull(s.fd, &h, sizeof(h), d).isOk()) writeFull(s.fd, r.data(), r.size(), d);
  }
}

}  // namespace collie
