// The windowed exchange executor (see exchange.h).
#include "algorithms/exchange.h"

#include <algorithm>
#include <cstring>

namespace collie {

namespace {

char gEmpty[1];  // where an empty frame "lands" or is sent from

class ExchangeRun {
 public:
  ExchangeRun(const std::vector<Exchange>& xs, const CollArgs& a, AlgoContext& ctx, uint8_t algoId,
              const ExchangeWindow& w)
      : xs_(xs),
        a_(a),
        ctx_(ctx),
        algoId_(algoId),
        window_(std::max<size_t>(1, w.maxExchanges)),
        maxBytes_(w.maxBytes),
        sreq_(window_),
        rreq_(window_) {}

  Status run() {
    size_t slotBytes = 0;
    for (const Exchange& x : xs_)
      if (x.from >= 0 && x.dst == nullptr) slotBytes = std::max(slotBytes, x.recvBytes);
    slotBytes_ = slotBytes;
    if (slotBytes_ > 0 && ctx_.scratch->size() < window_ * slotBytes_)
      ctx_.scratch->resize(window_ * slotBytes_);
    while (done_ < xs_.size()) {
      COLLIE_RETURN_IF_ERROR(post());
      COLLIE_RETURN_IF_ERROR(finishHead());
    }
    return Status::ok();
  }

 private:
  static size_t bytesOf(const Exchange& x) {
    return (x.to >= 0 ? x.sendBytes : 0) + (x.from >= 0 ? x.recvBytes : 0);
  }

  char* landing(size_t i) const {
    const Exchange& x = xs_[i];
    if (x.recvBytes == 0) return gEmpty;
    if (x.dst != nullptr) return x.dst;
    return ctx_.scratch->data() + (i % window_) * slotBytes_;
  }

  FrameTag tag(const Exchange& x, uint64_t count) const {
    FrameTag t = ctx_.tagFor(a_, x.step, algoId_);
    t.count = count;
    return t;
  }

  Connection* conn(int peer) const {
    return peer < ctx_.nranks && peer != ctx_.rank ? ctx_.conns[peer] : nullptr;
  }

  // Receives first, so that the peer's frame has a place to land as early as possible.
  Status post() {
    while (posted_ < xs_.size() &&
           (posted_ == done_ || (posted_ - done_ < window_ && inFlight_ < maxBytes_))) {
      const Exchange& x = xs_[posted_];
      const size_t k = posted_ % window_;
      if (x.from >= 0) {
        Connection* c = conn(x.from);
        if (c == nullptr) return internalError("exchange: a receive from no connection");
        COLLIE_RETURN_IF_ERROR(
            c->irecv(landing(posted_), x.recvBytes, tag(x, x.recvCount), &rreq_[k]));
      }
      if (x.to >= 0) {
        Connection* c = conn(x.to);
        if (c == nullptr) return internalError("exchange: a send to no connection");
        const char* src = x.sendBytes == 0 ? gEmpty : x.src;
        COLLIE_RETURN_IF_ERROR(c->isend(src, x.sendBytes, tag(x, x.sendCount), &sreq_[k]));
      }
      inFlight_ += bytesOf(x);
      ++posted_;
    }
    return Status::ok();
  }

  // The oldest exchange: both its frames done, then a staged frame goes to its place.
  Status finishHead() {
    const Exchange& x = xs_[done_];
    const size_t k = done_ % window_;
    if (x.from >= 0 && !rreq_[k].done)
      COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&rreq_[k], ctx_.deadline, ctx_.opName));
    if (x.to >= 0 && !sreq_[k].done)
      COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&sreq_[k], ctx_.deadline, ctx_.opName));
    if (x.from >= 0 && x.dst == nullptr && x.recvBytes > 0)
      memcpy(x.stageTo, landing(done_), x.recvBytes);
    inFlight_ -= bytesOf(x);
    ++done_;
    return Status::ok();
  }

  const std::vector<Exchange>& xs_;
  const CollArgs& a_;
  AlgoContext& ctx_;
  const uint8_t algoId_;
  const size_t window_, maxBytes_;
  size_t slotBytes_ = 0;
  std::vector<Request> sreq_, rreq_;  // by exchange index modulo the window
  size_t posted_ = 0, done_ = 0, inFlight_ = 0;
};

}  // namespace

Status runExchanges(const std::vector<Exchange>& xs, const CollArgs& a, AlgoContext& ctx,
                    uint8_t algoId, const ExchangeWindow& w) {
  return ExchangeRun(xs, a, ctx, algoId, w).run();
}

size_t numPieces(size_t bytes, size_t chunkBytes, size_t esz) {
  const size_t step = std::max(esz, chunkBytes / esz * esz);
  return bytes == 0 ? 1 : (bytes + step - 1) / step;
}

size_t pieceOffset(size_t k, size_t chunkBytes, size_t esz) {
  return k * std::max(esz, chunkBytes / esz * esz);
}

size_t pieceBytes(size_t bytes, size_t k, size_t chunkBytes, size_t esz) {
  const size_t off = pieceOffset(k, chunkBytes, esz);
  return off >= bytes ? 0 : std::min(bytes - off, std::max(esz, chunkBytes / esz * esz));
}

}  // namespace collie
