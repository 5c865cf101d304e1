// Matching point-to-point stripes to receives by their (tag, seq), keeping early ones.
#include "transports/p2p_match.h"

#include <cstring>
#include <string>

#include "src/base/dtype.h"

namespace collie {

StripeSpan p2pStripe(size_t bytes, unsigned n, unsigned i) {
  if (n <= 1) return StripeSpan{0, bytes};
  // Stripes are multiples of 64 bytes, the last one takes the remainder.
  const size_t per = (bytes / n) & ~size_t{63};
  StripeSpan s;
  s.offset = i * per;
  s.length = i + 1 == n ? bytes - s.offset : per;
  return s;
}

Status p2pMismatch(int peer, const FrameTag& sent, const FrameTag& expected) {
  return invalidUsage("ranks disagree: peer rank " + std::to_string(peer) + " sent a " +
                      describeFrameTag(sent) + " that this rank receives as a " +
                      describeFrameTag(expected) +
                      "; a send and its receive must have the same count and datatype");
}

namespace {

constexpr size_t kKeptBytes = 64 << 10;

FrameTag tagOf(const FrameHeader& h) {
  FrameTag t;
  t.seq = h.seq;
  t.count = h.count;
  t.tag = h.tag;
  t.coll = h.coll;
  t.dtype = h.dtype;
  return t;
}

}  // namespace

P2PMatcher::Message* P2PMatcher::find(uint32_t tag, uint64_t seq) {
  for (auto& m : msgs_)
    if (m.tag == tag && m.seq == seq) return &m;
  return nullptr;
}

Status P2PMatcher::post(void* buf, size_t bytes, const FrameTag& expect, Request* req, int peer) {
  Message* m = find(expect.tag, expect.seq);
  if (m != nullptr && m->req != nullptr)
    return internalError("two receives posted for one point-to-point message");
  if (m != nullptr && (m->count != expect.count || m->dtype != expect.dtype)) {
    FrameTag sent = expect;
    sent.count = m->count;
    sent.dtype = m->dtype;
    return p2pMismatch(peer, sent, expect);
  }
  if (m == nullptr) m = fresh(expect.tag, expect.seq, expect.count, expect.dtype, bytes);
  m->dst = static_cast<char*>(buf);
  m->req = req;
  ++posted_;
  if (m->stripes >= 0 && m->stripesDone == m->stripes) return completeAt(m);
  return Status::ok();
}

Status P2PMatcher::recordFor(const FrameHeader& h, int peer, size_t bytes, bool buffer,
                             Message** out) {
  Message* m = find(h.tag, h.seq);
  if (m != nullptr && (m->count != h.count || m->dtype != h.dtype)) {
    FrameTag expect = tagOf(h);
    expect.count = m->count;
    expect.dtype = m->dtype;
    return p2pMismatch(peer, tagOf(h), expect);
  }
  if (m == nullptr) {  // early: kept until its receive is posted
    m = fresh(h.tag, h.seq, h.count, h.dtype, bytes);
    m->buffered = buffer;
    if (buffer) m->own.resize(bytes);
  }
  *out = m;
  return Status::ok();
}

Status P2PMatcher::begin(const FrameHeader& h, int peer, StripeSink* sink) {
  const unsigned n = h.algo;
  const size_t esz = validDtype(h.dtype) ? dtypeSize(static_cast<collieDataType_t>(h.dtype)) : 0;
  const bool sane = esz > 0 && h.count <= (uint64_t{1} << 62) / esz;
  const size_t bytes = sane ? h.count * esz : 0;
  if (sane && n == kP2PRendezvous && pull_ && h.op == 0 && h.len == sizeof(RendezvousBody))
    return beginRendezvous(h, peer, bytes, sink);
  if (!sane || n < 1 || n >= kP2PRefused || h.op >= n || p2pStripe(bytes, n, h.op).length != h.len)
    return remoteError("garbled point-to-point frame from peer rank " + std::to_string(peer) +
                       " (" + describeFrameTag(tagOf(h)) + ", stripe " + std::to_string(h.op) +
                       " of " + std::to_string(n) + ", " + std::to_string(h.len) + " bytes)");
  Message* m = nullptr;
  COLLIE_RETURN_IF_ERROR(recordFor(h, peer, bytes, true, &m));
  if (m->stripes < 0) m->stripes = static_cast<int>(n);
  const StripeSpan span = p2pStripe(bytes, n, h.op);
  sink->dst = (m->buffered ? m->own.data() : m->dst) + span.offset;
  sink->length = span.length;
  sink->got = 0;
  sink->message = m;
  return Status::ok();
}

Status P2PMatcher::beginRendezvous(const FrameHeader& h, int peer, size_t bytes, StripeSink* sink) {
  Message* m = nullptr;
  COLLIE_RETURN_IF_ERROR(recordFor(h, peer, bytes, false, &m));
  m->rendezvous = true;
  m->stripes = 1;
  sink->dst = reinterpret_cast<char*>(&m->where);
  sink->length = sizeof(RendezvousBody);
  sink->got = 0;
  sink->message = m;
  return Status::ok();
}

Status P2PMatcher::end(StripeSink* sink) {
  auto* m = static_cast<Message*>(sink->message);
  sink->message = nullptr;
  if (++m->stripesDone < m->stripes || m->req == nullptr) return Status::ok();
  return completeAt(m);
}

Status P2PMatcher::completeAt(Message* m) {
  for (auto it = msgs_.begin(); it != msgs_.end(); ++it)
    if (&*it == m) return complete(it);
  return internalError("a point-to-point message lost its record");
}

Status P2PMatcher::complete(std::list<Message>::iterator it) {
  if (it->rendezvous) {
    bool pulled = false;
    COLLIE_RETURN_IF_ERROR(pull_(it->where, it->dst, it->bytes, it->tag, it->seq, &pulled));
    if (!pulled) {  // the sender sends the data itself now, straight into the posted buffer
      it->rendezvous = false;
      it->stripes = -1;
      it->stripesDone = 0;
      return Status::ok();
    }
  } else if (it->buffered && it->bytes > 0) {
    memcpy(it->dst, it->own.data(), it->bytes);
  }
  it->req->partsLeft = 0;
  it->req->done = true;
  --posted_;
  spare_.splice(spare_.begin(), msgs_, it);
  return Status::ok();
}

P2PMatcher::Message* P2PMatcher::fresh(uint32_t tag, uint64_t seq, uint64_t count, uint8_t dtype,
                                       size_t bytes) {
  if (spare_.empty()) {
    msgs_.emplace_back();
  } else {
    msgs_.splice(msgs_.end(), spare_, spare_.begin());
    std::vector<char> keep;  // a small buffer for early messages is kept, a large one freed
    if (msgs_.back().own.capacity() <= kKeptBytes) keep.swap(msgs_.back().own);
    msgs_.back() = Message();
    msgs_.back().own.swap(keep);
    msgs_.back().own.clear();
  }
  Message* m = &msgs_.back();
  m->tag = tag;
  m->seq = seq;
  m->count = count;
  m->dtype = dtype;
  m->bytes = bytes;
  return m;
}

bool P2PMatcher::arrived(uint32_t tag, uint64_t seq) const {
  for (const auto& m : msgs_)
    if (m.tag == tag && m.seq == seq && m.req == nullptr) return true;
  return false;
}

void P2PMatcher::clear() {
  msgs_.clear();
  posted_ = 0;
}

}  // namespace collie
