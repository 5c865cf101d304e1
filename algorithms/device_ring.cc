// runDeviceRing (see device_ring.h).
#include "algorithms/device_ring.h"

#include <deque>
#include <string>

#include "algorithms/patterns/device_ring_pattern.h"

namespace collie {
namespace {

constexpr uint8_t kDeviceRingId = 8;
constexpr uint32_t kControlTag = 0xD0;

// One control frame: a Signal and the message it is about.
struct Control {
  uint32_t signal = 0;
  uint32_t zero = 0;
  uint64_t message = 0;
};
static_assert(sizeof(Control) == 16, "control frames are 16 bytes");

}  // namespace

Status runDeviceRing(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     RingDevice* dev) {
  const int n = ctx.nranks, me = ctx.rank;
  const int next = ring::next(me, n), prev = ring::prev(me, n);
  const size_t esz = dtypeSize(args.dtype);
  const devring::Plan p = devring::makePlan(args.count, n, esz, slotBytes, nslots);
  const size_t M = p.messages;
  const FrameTag tag = ctx.tagFor(args, kControlTag, kDeviceRingId);
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  Connection* toNext = ctx.conns[next];
  Connection* toPrev = ctx.conns[prev];

  // Outgoing frames stay alive until their send completes.
  struct Out {
    Control msg;
    Request req;
  };
  std::deque<Out> out;
  auto signal = [&](Connection* to, devring::Signal s, size_t m) -> Status {
    out.emplace_back();
    out.back().msg.signal = static_cast<uint32_t>(s);
    out.back().msg.message = m;
    return to->isend(&out.back().msg, sizeof(Control), tag, &out.back().req);
  };
  // Incoming: "ready" from prev, "free" from next; one connection carries both with two ranks.
  // A receive is posted only while frames of this op are still due on it, so that a frame of
  // the next op is never taken for one of this op.
  struct In {
    Connection* from = nullptr;
    size_t due = 0;  // frames of this op still to post
    Control msg;
    Request req;
    bool posted = false;
  };
  In ins[2];
  ins[0].from = toPrev;
  ins[0].due = prev == next ? 2 * M : M;
  ins[1].from = toNext;
  ins[1].due = prev == next ? 0 : M;
  auto post = [&](In& in) -> Status {
    if (in.due == 0) return Status::ok();
    --in.due;
    in.req = Request();
    in.posted = true;
    return in.from->irecv(&in.msg, sizeof(Control), tag, &in.req);
  };
  for (In& in : ins) COLLIE_RETURN_IF_ERROR(post(in));

  size_t sent = 0, consumed = 0, ready = 0, freed = 0;
  auto garbled = [&](const Control& m, int from) {
    return invalidArgument("device ring: garbled control frame from rank " + std::to_string(from) +
                           " (signal " + std::to_string(m.signal) + ", message " +
                           std::to_string(m.message) + "; expected ready " + std::to_string(ready) +
                           " or free " + std::to_string(freed) + ")");
  };
  auto take = [&](In& in, int from) -> Status {
    COLLIE_RETURN_IF_ERROR(in.req.status);
    in.posted = false;
    const Control& m = in.msg;
    const bool fromPrev = from == prev, fromNext = from == next;
    if (m.zero != 0) return garbled(m, from);
    if (m.signal == static_cast<uint32_t>(devring::Signal::kReady) && fromPrev &&
        m.message == ready)
      ++ready;
    else if (m.signal == static_cast<uint32_t>(devring::Signal::kFree) && fromNext &&
             m.message == freed)
      ++freed;
    else
      return garbled(m, from);
    return post(in);
  };
  auto consume = [&](size_t m) -> Status {
    const devring::Piece x = devring::recvPiece(p, me, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev->waitPrev());
      const size_t slot = static_cast<size_t>(devring::slotOf(p, m)) * slotBytes;
      char* dst = recv + x.offset * esz;
      if (x.reduce) {
        COLLIE_RETURN_IF_ERROR(
            dev->reduceSlot(dst, slot, send + x.offset * esz, x.count, args.dtype, args.op));
        if (x.lastReduce && args.op == collieAvg)
          COLLIE_RETURN_IF_ERROR(dev->scale(dst, x.count, args.dtype, n));
      } else {
        COLLIE_RETURN_IF_ERROR(dev->copyFromSlot(dst, slot, x.count * esz));
      }
      COLLIE_RETURN_IF_ERROR(dev->record());
    }
    return signal(toPrev, devring::Signal::kFree, m);
  };
  auto produce = [&](size_t m) -> Status {
    const devring::Piece x = devring::sendPiece(p, me, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev->waitNext());  // next is done with what this slot held
      const char* src = (x.fromSend ? send : recv) + x.offset * esz;
      COLLIE_RETURN_IF_ERROR(dev->copyToNext(static_cast<size_t>(devring::slotOf(p, m)) * slotBytes,
                                             src, x.count * esz));
      COLLIE_RETURN_IF_ERROR(dev->record());
    }
    return signal(toNext, devring::Signal::kReady, m);
  };
  auto canProduce = [&] {
    if (sent >= M) return false;
    size_t f = devring::forwardsFrom(p, sent), s = devring::slotFreedBy(p, sent);
    return (f == devring::kNone || consumed > f) && (s == devring::kNone || freed > s);
  };

  while (consumed < M || sent < M || freed < M) {
    bool acted = false;
    for (int i = 0; i < 2; ++i)
      if (ins[i].posted && ins[i].req.done) {
        COLLIE_RETURN_IF_ERROR(take(ins[i], i == 0 ? prev : next));
        acted = true;
      }
    while (consumed < ready) {
      COLLIE_RETURN_IF_ERROR(consume(consumed++));
      acted = true;
    }
    while (canProduce()) {
      COLLIE_RETURN_IF_ERROR(produce(sent++));
      acted = true;
    }
    while (!out.empty() && out.front().req.done) {
      COLLIE_RETURN_IF_ERROR(out.front().req.status);
      out.pop_front();
    }
    if (acted) {
      bool moved = false;
      COLLIE_RETURN_IF_ERROR(ctx.poller->progressAll(&moved));
      continue;
    }
    if (consumed == M && sent == M && freed == M) break;
    Request* waits[2];
    size_t nw = 0;
    for (In& in : ins)
      if (in.posted) waits[nw++] = &in.req;
    if (nw == 0)  // every frame is in, so the consumes and sends above finish the op
      return internalError("device ring: stalled at sent " + std::to_string(sent) + ", consumed " +
                           std::to_string(consumed) + " of " + std::to_string(M));
    COLLIE_RETURN_IF_ERROR(ctx.poller->progressUntilAny(waits, nw, ctx.deadline, ctx.opName));
  }
  for (Out& o : out) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&o.req, ctx.deadline, ctx.opName));
  return Status::ok();
}

}  // namespace collie
