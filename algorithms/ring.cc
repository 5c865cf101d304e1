// Pipelined ring AllReduce: reduce-scatter then all-gather, each block cut into chunks so that
// sending chunk k+1, receiving chunk k and reducing chunk k-1 overlap. A chunk received in
// step s is forwarded in step s+1 as soon as it is reduced. Out of place, chunks are received
// straight into the output and reduced there with the input; in place they land in a small
// window of staging slots first.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/ring_pattern.h"
#include "algorithms/ring_collectives.h"

namespace collie {

namespace {

constexpr uint8_t kRingId = 1;
constexpr size_t kWindow = 4;  // receives posted ahead of the one being reduced

struct Item {
  int step;
  size_t off;  // elements from the start of the buffer
  size_t cnt;
  size_t dep;  // for sends at step >= 1: index of the receive that produced this chunk
};

class RingAllReduce : public Algorithm {
 public:
  const char* name() const override { return "ring"; }
  uint8_t id() const override { return kRingId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return coll != Collective::kBarrier && kind == MemoryKind::kHost;
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    const double bytes = static_cast<double>(argBytes(a));
    if (n <= 1) return 0;
    const double us = 1.0 / (link.betaGBps * 1e3);  // per byte
    switch (a.coll) {
      case Collective::kAllReduce: return 2.0 * (n - 1) * (link.alphaUs + bytes / n * us);
      case Collective::kReduceScatter:
      case Collective::kAllGather: return (n - 1) * (link.alphaUs + bytes * us);
      default: {
        // A chain of n-1 hops pipelined in chunks of about 512 KiB.
        const double chunk = std::min(bytes, 512.0 * 1024), chunks = std::max(1.0, bytes / chunk);
        return (n - 1 + chunks - 1) * (link.alphaUs + chunk * us);
      }
    }
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;
};

void buildItems(const CollArgs& a, int r, int n, size_t chunkElems, std::vector<Item>* sends,
                std::vector<Item>* recvs) {
  const int steps = ring::numSteps(n);
  std::vector<size_t> recvStart(steps + 1, 0);
  for (int s = 0; s < steps; ++s) {
    int rb = ring::recvBlock(r, s, n);
    size_t rbc = ring::blockCount(a.count, n, rb), rbo = ring::blockOffset(a.count, n, rb);
    recvStart[s] = recvs->size();
    for (size_t k = 0; k < ring::numChunks(rbc, chunkElems); ++k)
      recvs->push_back(Item{s, rbo + ring::chunkOffset(k, chunkElems),
                            ring::chunkCount(rbc, k, chunkElems), 0});
    int sb = ring::sendBlock(r, s, n);
    size_t sbc = ring::blockCount(a.count, n, sb), sbo = ring::blockOffset(a.count, n, sb);
    for (size_t k = 0; k < ring::numChunks(sbc, chunkElems); ++k)
      sends->push_back(Item{s, sbo + ring::chunkOffset(k, chunkElems),
                            ring::chunkCount(sbc, k, chunkElems),
                            s == 0 ? 0 : recvStart[s - 1] + k});
  }
}

Status RingAllReduce::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  if (a.coll != Collective::kAllReduce) {
    ChunkSchedule s;
    if (n == 1) {
      s.copiesFirst.push_back({static_cast<char*>(a.recv), static_cast<const char*>(a.send),
                               argBytes(a)});
    } else {
      COLLIE_RETURN_IF_ERROR(buildRingSchedule(a, ctx, &s));
    }
    return runChunkSchedule(s, a, ctx, kRingId);
  }
  const size_t esz = dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv);
  const char* in = static_cast<const char*>(a.send);
  if (n == 1 || a.count == 0) {
    if (in != out && a.count > 0) memcpy(out, in, a.count * esz);
    return Status::ok();
  }
  const size_t chunkElems = std::max<size_t>(1, ctx.chunkBytes / esz);
  std::vector<Item> sends, recvs;
  buildItems(a, r, n, chunkElems, &sends, &recvs);

  const bool inPlace = in == out;
  if (inPlace && ctx.scratch->size() < kWindow * chunkElems * esz)
    ctx.scratch->resize(kWindow * chunkElems * esz);
  char* staging = ctx.scratch->data();
  Connection* to = ctx.conns[ring::next(r, n)];
  Connection* from = ctx.conns[ring::prev(r, n)];
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;

  std::vector<Request> sreq(sends.size());
  Request rreq[kWindow];
  size_t si = 0, ri = 0, rd = 0;
  while (rd < recvs.size()) {
    // Sends go out in schedule order, each once the chunk it forwards has been reduced.
    while (si < sends.size() && (sends[si].step == 0 || sends[si].dep < rd)) {
      const Item& it = sends[si];
      const char* src = (it.step == 0 ? in : out) + it.off * esz;
      COLLIE_RETURN_IF_ERROR(
          to->isend(src, it.cnt * esz, ctx.tagFor(a, static_cast<uint32_t>(si), kRingId), &sreq[si]));
      ++si;
    }
    while (ri < recvs.size() && ri < rd + kWindow) {
      const Item& it = recvs[ri];
      bool staged = inPlace && ring::isReduceStep(it.step, n);
      char* dst = staged ? staging + (ri % kWindow) * chunkElems * esz : out + it.off * esz;
      COLLIE_RETURN_IF_ERROR(from->irecv(dst, it.cnt * esz,
                                         ctx.tagFor(a, static_cast<uint32_t>(ri), kRingId),
                                         &rreq[ri % kWindow]));
      ++ri;
    }
    Request* head = &rreq[rd % kWindow];
    if (!head->done) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(head, ctx.deadline, ctx.opName));
    const Item& it = recvs[rd];
    if (ring::isReduceStep(it.step, n) && it.cnt > 0) {
      char* dst = out + it.off * esz;
      if (inPlace)
        reduce(dst, staging + (rd % kWindow) * chunkElems * esz, dst, it.cnt, a.dtype, op);
      else
        reduce(dst, dst, in + it.off * esz, it.cnt, a.dtype, op);
      if (a.op == collieAvg && it.step == n - 2) scaleForAvg(dst, it.cnt, a.dtype, n);
    }
    ++rd;
  }
  while (si < sends.size()) {
    const Item& it = sends[si];
    COLLIE_RETURN_IF_ERROR(to->isend(out + it.off * esz, it.cnt * esz,
                                     ctx.tagFor(a, static_cast<uint32_t>(si), kRingId), &sreq[si]));
    ++si;
  }
  for (auto& q : sreq)
    if (!q.done) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&q, ctx.deadline, ctx.opName));
  return Status::ok();
}

}  // namespace

std::unique_ptr<Algorithm> makeRingAlgorithm() { return std::make_unique<RingAllReduce>(); }

}  // namespace collie
