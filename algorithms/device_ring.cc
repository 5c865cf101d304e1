// runDeviceRing (see device_ring.h).
#include "algorithms/device_ring.h"

#include "algorithms/patterns/device_ring_pattern.h"

namespace collie {

namespace {

// With two ranks prev is next: one neighbour carries both channels.
std::vector<DeviceChannels::Neighbour> ringNeighbours(int prev, int next, size_t messages) {
  if (prev == next) return {{next, messages, messages}};
  return {{prev, messages, 0}, {next, 0, messages}};
}

// One AllReduce around the ring: messages consumed from prev and produced for next.
class RingRun {
 public:
  RingRun(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
          DeviceOps* dev)
      : args_(args),
        n_(ctx.nranks),
        me_(ctx.rank),
        next_(ring::next(me_, n_)),
        prev_(ring::prev(me_, n_)),
        esz_(dtypeSize(args.dtype)),
        slotBytes_(slotBytes),
        p_(devring::makePlan(args.count, n_, esz_, slotBytes, nslots)),
        send_(static_cast<const char*>(args.send)),
        recv_(static_cast<char*>(args.recv)),
        dev_(dev),
        ch_(args, ctx, "device ring", ringNeighbours(prev_, next_, p_.messages)) {}

  Status run() {
    COLLIE_RETURN_IF_ERROR(ch_.start());
    const size_t M = p_.messages;
    return ch_.drive([this](bool* acted) { return advance(acted); },
                     [this, M] { return consumed_ == M && sent_ == M && ch_.allFreed(); });
  }

 private:
  size_t slotOffset(size_t m) const {
    return static_cast<size_t>(devring::slotOf(p_, m)) * slotBytes_;
  }

  // Message m from prev: reduce it into recv (or copy a finished block), then free its slot.
  Status consume(size_t m) {
    const devring::Piece x = devring::recvPiece(p_, me_, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev_->waitPeer(prev_));
      char* dst = recv_ + x.offset * esz_;
      if (x.reduce) {
        COLLIE_RETURN_IF_ERROR(dev_->reduceSlot(dst, slotOffset(m), send_ + x.offset * esz_,
                                                x.count, args_.dtype, args_.op));
        if (x.lastReduce && args_.op == collieAvg)
          COLLIE_RETURN_IF_ERROR(dev_->scale(dst, x.count, args_.dtype, n_));
      } else {
        COLLIE_RETURN_IF_ERROR(dev_->copyFromSlot(dst, slotOffset(m), x.count * esz_));
      }
      COLLIE_RETURN_IF_ERROR(dev_->record());
    }
    return ch_.sendFree(prev_, m);
  }

  // Message m to next: copy it into next's slot, then announce it.
  Status produce(size_t m) {
    const devring::Piece x = devring::sendPiece(p_, me_, m);
    if (x.count > 0) {
      COLLIE_RETURN_IF_ERROR(dev_->waitPeer(next_));  // next is done with what this slot held
      const char* src = (x.fromSend ? send_ : recv_) + x.offset * esz_;
      COLLIE_RETURN_IF_ERROR(dev_->copyToPeer(next_, slotOffset(m), src, x.count * esz_));
      COLLIE_RETURN_IF_ERROR(dev_->record());
    }
    return ch_.sendReady(next_, m);
  }

  // The next message goes once what it forwards is consumed and its slot at next is free.
  bool canProduce() const {
    if (sent_ >= p_.messages) return false;
    size_t f = devring::forwardsFrom(p_, sent_), s = devring::slotFreedBy(p_, sent_);
    return (f == devring::kNone || consumed_ > f) && (s == devring::kNone || ch_.freed(next_) > s);
  }

  Status advance(bool* acted) {
    while (consumed_ < ch_.ready(prev_)) {
      COLLIE_RETURN_IF_ERROR(consume(consumed_++));
      *acted = true;
    }
    while (canProduce()) {
      COLLIE_RETURN_IF_ERROR(produce(sent_++));
      *acted = true;
    }
    return Status::ok();
  }

  const CollArgs& args_;
  const int n_, me_, next_, prev_;
  const size_t esz_, slotBytes_;
  const devring::Plan p_;
  const char* send_;
  char* recv_;
  DeviceOps* dev_;
  DeviceChannels ch_;
  size_t sent_ = 0, consumed_ = 0;
};

}  // namespace

Status runDeviceRing(const CollArgs& args, const AlgoContext& ctx, size_t slotBytes, int nslots,
                     DeviceOps* dev) {
  return RingRun(args, ctx, slotBytes, nslots, dev).run();
}

}  // namespace collie
