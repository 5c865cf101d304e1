// The shared-memory connection's point-to-point paths: small messages through the mailbox, large
// ones read by the receiver straight out of the sender's buffer (a rendezvous: one copy, by the
// kernel, where the ring takes two).
#include "transports/shm/shm_connection.h"

#include <algorithm>
#include <cstring>

namespace collie {

namespace {

// From this size a message is lent rather than copied through the ring: a kernel copy's fixed
// cost (a system call, pinning pages) is small beside the ring's second copy.
constexpr size_t kLendBytes = 64 << 10;

}  // namespace

Status ShmConnection::sendOn(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                             Request* req) {
  if (isP2PFrame(tag.coll) && failure().isOk()) {
    if (bytes <= kMailPayload &&
        mail_->post(encodeFrame(lane->commId, p2pStripeTag(tag, 1, 0), bytes), buf)) {
      req->start(bytes, tag, true, peer());
      req->done = true;
      return Status::ok();
    }
    if (bytes >= kLendBytes && lend(lane->commId, buf, bytes, tag, req)) return Status::ok();
  }
  return streamSend(lane, buf, bytes, tag, req);
}

bool ShmConnection::lend(uint64_t commId, const void* buf, size_t bytes, const FrameTag& tag,
                         Request* req) {
  if (!peerReads_ || memory_ == nullptr) return false;
  RendezvousBody b{reinterpret_cast<uint64_t>(buf), 0};
  memcpy(&b.head, buf, std::min(bytes, sizeof(b.head)));
  const FrameTag t = p2pStripeTag(tag, kP2PRendezvous, 0);
  if (!mail_->post(encodeFrame(commId, t, sizeof(b)), &b)) return false;
  req->start(bytes, tag, true, peer());
  req->partsLeft = 1;
  lent_.push_back(Lent{commId, tag, buf, bytes, req});
  return true;
}

Status ShmConnection::pull(uint64_t commId, const RendezvousBody& b, char* dst, size_t bytes,
                           uint32_t tag, uint64_t seq, bool* pulled) {
  const void* at = reinterpret_cast<const void*>(static_cast<uintptr_t>(b.address));
  // Once one read worked, the peer's memory is known to be reachable: no probe per message.
  if (memory_ == nullptr ||
      (!readsPeer_ && !memory_->reachable(at, &b.head, std::min(bytes, sizeof(b.head))))) {
    *pulled = false;
    tell(kP2PRefused, commId, tag, seq);
    return Status::ok();
  }
  COLLIE_RETURN_IF_ERROR(memory_->read(at, dst, bytes, "a point-to-point receive"));
  readsPeer_ = true;
  *pulled = true;
  tell(kP2PFinished, commId, tag, seq);
  return Status::ok();
}

void ShmConnection::tell(uint8_t what, uint64_t commId, uint32_t tag, uint64_t seq) {
  FrameTag t;
  t.seq = seq;
  t.tag = tag;
  t.coll = kP2PColl;
  t.algo = what;
  const FrameHeader h = encodeFrame(commId, t, 0);
  if (!told_.empty() || !mail_->post(h, nullptr)) told_.push_back(h);
}

void ShmConnection::flushTold() {
  while (!told_.empty() && mail_->post(told_.front(), nullptr)) told_.pop_front();
}

Status ShmConnection::answer(const FrameHeader& h) {
  auto it = std::find_if(lent_.begin(), lent_.end(), [&](const Lent& l) {
    return l.commId == h.commId && l.tag.tag == h.tag && l.tag.seq == h.seq;
  });
  if (it == lent_.end() && laneFor(h.commId) == nullptr) return Status::ok();  // a closed lane's
  if (it == lent_.end()) return deliverP2P(FrameHeader{}, nullptr);            // garbled: fails
  const Lent l = *it;
  lent_.erase(it);
  if (h.algo == kP2PFinished) {
    l.req->partsLeft = 0;
    l.req->done = true;
    return Status::ok();
  }
  peerReads_ = false;  // refused: this and every later message goes as data
  Lane* lane = laneFor(l.commId);
  return lane != nullptr ? streamSend(lane, l.buf, l.bytes, l.tag, l.req) : Status::ok();
}

Status ShmConnection::drainSideChannel(bool* progressed) {
  while (const char* frame = mail_->peek()) {
    FrameHeader h;
    memcpy(&h, frame, sizeof(h));
    const bool answered = isP2PFrame(h.coll) && (h.algo == kP2PFinished || h.algo == kP2PRefused);
    Status st = answered                ? answer(h)
                : h.len <= kMailPayload ? deliverP2P(h, frame + sizeof(h))
                                        : deliverP2P(FrameHeader{}, nullptr);  // garbled: fails
    mail_->pop();
    *progressed = true;
    COLLIE_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

Status ShmConnection::progress(bool* progressed) {
  if (!failure().isOk()) return failure();
  flushTold();
  COLLIE_RETURN_IF_ERROR(drainSideChannel(progressed));
  return StreamConnection::progress(progressed);
}

bool ShmConnection::hasPending() const {
  return !lent_.empty() || !told_.empty() || StreamConnection::hasPending();
}

AbortLink::Word ShmConnection::listenAfterFailure() {
  lent_.clear();  // their ops have failed and their buffers are the callers' again
  told_.clear();
  return StreamConnection::listenAfterFailure();
}

}  // namespace collie
