// runDeviceRing (see device_ring.h).
#include "algorithms/device_ring.h"

#include "algorithms/patterns/device_ring_pattern.h"

namespace collie {

Status runDeviceRing(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev) {
  const int n = ctx.nranks, me = ctx.rank;
  const int next = ring::next(me, n), prev = ring::prev(me, n);
  const size_t esz = dtypeSize(args.dtype);
  const devring::Plan p = devring::makePlan(args.count, n, esz, slotBytes, nslots);
  const size_t M = p.messages;
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  // With two ranks prev is next: one neighbour carries both channels.
  std::vector<DeviceChannels::Neighbour> nb;
  if (prev == next)
    nb.push_back({next, M, M});
  else
    nb = {{prev, M, 0}, {next, 0, M}};
  DeviceChannels ch(args, ctx, "device ring", nb);
  COLLIE_RETURN_IF_ERROR(ch.start());

  size_t sent = 0, consumed = 0;
  auto consume = [&](size_t m) -> Status {
    const devring::Piece x = devring::recvPiece(p, me, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev->waitPeer(prev));
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
    return ch.sendFree(prev, m);
  };
  auto produce = [&](size_t m) -> Status {
    const devring::Piece x = devring::sendPiece(p, me, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev->waitPeer(next));  // next is done with what this slot held
      const char* src = (x.fromSend ? send : recv) + x.offset * esz;
      COLLIE_RETURN_IF_ERROR(dev->copyToPeer(
          next, static_cast<size_t>(devring::slotOf(p, m)) * slotBytes, src, x.count * esz));
      COLLIE_RETURN_IF_ERROR(dev->record());
    }
    return ch.sendReady(next, m);
  };
  auto canProduce = [&] {
    if (sent >= M) return false;
    size_t f = devring::forwardsFrom(p, sent), s = devring::slotFreedBy(p, sent);
    return (f == devring::kNone || consumed > f) && (s == devring::kNone || ch.freed(next) > s);
  };
  return ch.drive(
      [&](bool* acted) -> Status {
        while (consumed < ch.ready(prev)) {
          COLLIE_RETURN_IF_ERROR(consume(consumed++));
          *acted = true;
        }
        while (canProduce()) {
          COLLIE_RETURN_IF_ERROR(produce(sent++));
          *acted = true;
        }
        return Status::ok();
      },
      [&] { return consumed == M && sent == M && ch.allFreed(); });
}

}  // namespace collie
