// Point-to-point frames on stream connections: a message goes whole on one stream (its own
// round robin) or one stripe per stream when large; the receiver files each stripe by its header
// (P2PMatcher), whichever stream it came on and whatever else was posted.
#include <cerrno>
#include <cstring>

#include "transports/stream_connection.h"

namespace collie {

ssize_t StreamConnection::readSome(Sock& s, void* buf, size_t n) {
  if (s.stash.empty()) return s.io->read(buf, n);
  const size_t k = std::min(n, s.stash.size());
  memcpy(buf, s.stash.data(), k);
  s.stash.erase(0, k);
  return static_cast<ssize_t>(k);
}

bool StreamConnection::p2pHeader(const Sock& s) const {
  return s.hdrGot == sizeof(FrameHeader) && s.hdr.magic == kFrameMagic && isP2PFrame(s.hdr.coll) &&
         laneFor(s.hdr.commId) != nullptr;
}

void StreamConnection::p2pSend(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                               Request* req) {
  const size_t nsocks = socks_.size();
  const unsigned n = bytes >= opt_.stripeBytes && nsocks > 1 ? static_cast<unsigned>(nsocks) : 1;
  for (unsigned i = 0; i < n; ++i) {
    const StripeSpan span = p2pStripe(bytes, n, i);
    Sock& s = socks_[n == 1 ? lane->p2pRr++ % nsocks : i];
    s.sends.push_back(SendItem{encodeFrame(lane->commId, p2pStripeTag(tag, n, i), span.length),
                               static_cast<const char*>(buf) + span.offset, span.length, 0, req});
    ++req->partsLeft;
  }
}

Status StreamConnection::deliverP2P(const FrameHeader& h, const char* body) {
  Lane* lane = h.magic == kFrameMagic ? laneFor(h.commId) : nullptr;
  if (lane == nullptr && laned_ && h.magic == kFrameMagic) return Status::ok();  // a closed lane's
  if (lane == nullptr || !isP2PFrame(h.coll))
    return fail(remoteError("garbled point-to-point frame from peer rank " + std::to_string(peer_) +
                            " in its mailbox"));
  StripeSink k;
  Status st = lane->p2p.begin(h, peer_, &k);
  if (!st.isOk()) return fail(st);
  if (k.length > 0) memcpy(k.dst, body, k.length);
  st = lane->p2p.end(&k);
  return st.isOk() ? st : fail(st);
}

Status StreamConnection::p2pAfterSmallRead(Sock& s, const char* body, size_t bodyBytes) {
  // A small read for a collective's receive found a point-to-point frame: its bytes move to
  // where that frame goes, and any bytes past its end (the next frame) are read again later.
  s.p2pLane = laneFor(s.hdr.commId);
  Status st = s.p2pLane->p2p.begin(s.hdr, peer_, &s.p2p);
  if (!st.isOk()) return fail(st);
  s.inP2P = true;
  const size_t mine = std::min(bodyBytes, s.p2p.length);
  if (mine > 0) memcpy(s.p2p.dst, body, mine);
  s.p2p.got = mine;
  if (bodyBytes > mine) s.stash.assign(body + mine, bodyBytes - mine);
  return Status::ok();
}

Status StreamConnection::readP2PBody(Sock& s, bool* progressed, bool* done) {
  if (!s.inP2P) {
    s.p2pLane = laneFor(s.hdr.commId);
    Status st = s.p2pLane->p2p.begin(s.hdr, peer_, &s.p2p);
    if (!st.isOk()) return fail(st);
    s.inP2P = true;
  }
  StripeSink& k = s.p2p;
  COLLIE_RETURN_IF_ERROR(readUpTo(s, k.dst, k.length, &k.got, progressed));
  if (k.got < k.length) return Status::ok();
  Status st = s.p2pLane->p2p.end(&k);
  s.inP2P = false;
  s.hdrGot = 0;
  *done = true;
  return st.isOk() ? st : fail(st);
}

}  // namespace collie
