// Recursive-doubling AllReduce: log2(p) exchanges of the whole buffer (plus a fold and an
// unfold when n is not a power of two). Latency-optimal for small messages; the ring wins once
// the buffer is large enough for its pipelining and 1/n-sized steps to pay. Both partners of an
// exchange combine lower-rank data first, so every rank ends with the same bits. Out of place,
// the first send and reduction read the input where it is: an up-front copy of the whole
// buffer into the output would be a large part of a large call.
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/recursive_doubling_pattern.h"

namespace collie {

namespace {

constexpr uint8_t kRdId = 3;

class RecursiveDoubling : public Algorithm {
 public:
  const char* name() const override { return "recursive_doubling"; }
  uint8_t id() const override { return kRdId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return coll == Collective::kAllReduce && kind == MemoryKind::kHost;
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    const size_t bytes = argBytes(a);
    if (n <= 1) return 0;
    double steps = rd::numDoublingSteps(n) + (rd::remainder(n) > 0 ? 2 : 0);
    double b = static_cast<double>(bytes);
    return steps * (link.alphaUs + b / (link.betaGBps * 1e3) + b / (link.reduceGBps * 1e3));
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;

 private:
  // Sends out to peer and receives the peer's buffer into tmp.
  Status exchange(const CollArgs& a, AlgoContext& ctx, int peer, uint32_t step, const char* out,
                  char* tmp, size_t bytes, bool send, bool recv);
};

Status RecursiveDoubling::exchange(const CollArgs& a, AlgoContext& ctx, int peer, uint32_t step,
                                   const char* out, char* tmp, size_t bytes, bool send, bool recv) {
  Request rq, sq;
  FrameTag t = ctx.tagFor(a, step, kRdId);
  if (recv) COLLIE_RETURN_IF_ERROR(ctx.conns[peer]->irecv(tmp, bytes, t, &rq));
  if (send) COLLIE_RETURN_IF_ERROR(ctx.conns[peer]->isend(out, bytes, t, &sq));
  if (recv) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&rq, ctx.deadline, ctx.opName));
  if (send && !sq.done) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&sq, ctx.deadline, ctx.opName));
  return Status::ok();
}

Status RecursiveDoubling::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  if (n == 1 || a.count == 0) {
    if (a.send != a.recv && bytes > 0) memcpy(out, a.send, bytes);
    return Status::ok();
  }
  if (ctx.scratch->size() < bytes) ctx.scratch->resize(bytes);
  char* tmp = ctx.scratch->data();
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const int rem = rd::remainder(n), v = rd::virtualRank(r, n);
  // This rank's partial result: its input until the first reduction writes the output.
  const char* mine = static_cast<const char*>(a.send);
  uint32_t step = 0;
  if (r < 2 * rem) {
    // Fold: the even rank hands its data to the odd one (lower rank's data first).
    bool even = r % 2 == 0;
    COLLIE_RETURN_IF_ERROR(
        exchange(a, ctx, even ? r + 1 : r - 1, step, mine, tmp, bytes, even, !even));
    if (!even) {
      reduce(out, tmp, mine, a.count, a.dtype, op);
      mine = out;
    }
  }
  ++step;
  if (v >= 0) {
    for (int k = 0; k < rd::numDoublingSteps(n); ++k, ++step) {
      int peer = rd::partner(v, k, n);
      COLLIE_RETURN_IF_ERROR(exchange(a, ctx, peer, step, mine, tmp, bytes, true, true));
      if (peer < r)
        reduce(out, tmp, mine, a.count, a.dtype, op);
      else
        reduce(out, mine, tmp, a.count, a.dtype, op);
      mine = out;
    }
    if (a.op == collieAvg) scaleForAvg(out, a.count, a.dtype, n);
  } else {
    step += static_cast<uint32_t>(rd::numDoublingSteps(n));
  }
  if (r < 2 * rem) {
    // Unfold: the odd rank sends the result back, straight into the even rank's output.
    bool even = r % 2 == 0;
    Request q;
    FrameTag t = ctx.tagFor(a, step, kRdId);
    if (even)
      COLLIE_RETURN_IF_ERROR(ctx.conns[r + 1]->irecv(out, bytes, t, &q));
    else
      COLLIE_RETURN_IF_ERROR(ctx.conns[r - 1]->isend(out, bytes, t, &q));
    COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&q, ctx.deadline, ctx.opName));
  }
  return Status::ok();
}

}  // namespace

std::unique_ptr<Algorithm> makeRecursiveDoublingAlgorithm() {
  return std::make_unique<RecursiveDoubling>();
}

}  // namespace collie
