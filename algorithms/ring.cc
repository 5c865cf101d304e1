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
    return isClassicCollective(coll) && coll != Collective::kBarrier && kind == MemoryKind::kHost;
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    const double bytes = static_cast<double>(argBytes(a));
    if (n <= 1) return 0;
    const double us = 1.0 / (link.betaGBps * 1e3);  // per byte
    switch (a.coll) {
      case Collective::kAllReduce:
        return 2.0 * (n - 1) * (link.alphaUs + bytes / n * us);
      case Collective::kReduceScatter:
      case Collective::kAllGather:
        return (n - 1) * (link.alphaUs + bytes * us);
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
      recvs->push_back(
          Item{s, rbo + ring::chunkOffset(k, chunkElems), ring::chunkCount(rbc, k, chunkElems), 0});
    int sb = ring::sendBlock(r, s, n);
    size_t sbc = ring::blockCount(a.count, n, sb), sbo = ring::blockOffset(a.count, n, sb);
    for (size_t k = 0; k < ring::numChunks(sbc, chunkElems); ++k)
      sends->push_back(Item{s, sbo + ring::chunkOffset(k, chunkElems),
                            ring::chunkCount(sbc, k, chunkElems),
                            s == 0 ? 0 : recvStart[s - 1] + k});
  }
}

// The pipelined AllReduce of one rank: chunk requests in schedule order, receives posted up to
// kWindow ahead of the one being reduced.
class RingAllReduceRun {
 public:
  RingAllReduceRun(const CollArgs& a, AlgoContext& ctx)
      : a_(a),
        ctx_(ctx),
        n_(ctx.nranks),
        esz_(dtypeSize(a.dtype)),
        chunkElems_(std::max<size_t>(1, ctx.chunkBytes / esz_)),
        out_(static_cast<char*>(a.recv)),
        in_(static_cast<const char*>(a.send)),
        inPlace_(in_ == out_),
        op_(a.op == collieAvg ? collieSum : a.op),
        to_(ctx.conns[ring::next(ctx.rank, n_)]),
        from_(ctx.conns[ring::prev(ctx.rank, n_)]) {}

  Status run() {
    buildItems(a_, ctx_.rank, n_, chunkElems_, &sends_, &recvs_);
    if (inPlace_ && ctx_.scratch->size() < kWindow * chunkElems_ * esz_)
      ctx_.scratch->resize(kWindow * chunkElems_ * esz_);
    staging_ = ctx_.scratch->data();
    sreq_.resize(sends_.size());
    while (rd_ < recvs_.size()) {
      // Sends go out in schedule order, each once the chunk it forwards has been reduced.
      while (si_ < sends_.size() && (sends_[si_].step == 0 || sends_[si_].dep < rd_))
        COLLIE_RETURN_IF_ERROR(postSend());
      while (ri_ < recvs_.size() && ri_ < rd_ + kWindow) COLLIE_RETURN_IF_ERROR(postRecv());
      Request* head = &rreq_[rd_ % kWindow];
      if (!head->done) COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(head, ctx_.deadline, ctx_.opName));
      reduceLanded();
      ++rd_;
    }
    while (si_ < sends_.size()) COLLIE_RETURN_IF_ERROR(postSend());
    for (auto& q : sreq_)
      if (!q.done) COLLIE_RETURN_IF_ERROR(ctx_.poller->wait(&q, ctx_.deadline, ctx_.opName));
    return Status::ok();
  }

 private:
  char* stagingSlot(size_t i) const { return staging_ + (i % kWindow) * chunkElems_ * esz_; }

  // Step 0 sends the input; later steps forward what was reduced (or gathered) into the output.
  Status postSend() {
    const Item& it = sends_[si_];
    const char* src = (it.step == 0 ? in_ : out_) + it.off * esz_;
    COLLIE_RETURN_IF_ERROR(to_->isend(
        src, it.cnt * esz_, ctx_.tagFor(a_, static_cast<uint32_t>(si_), kRingId), &sreq_[si_]));
    ++si_;
    return Status::ok();
  }

  // In place, a chunk to reduce lands in a staging slot: its place in the output still holds
  // this rank's input.
  Status postRecv() {
    const Item& it = recvs_[ri_];
    const bool staged = inPlace_ && ring::isReduceStep(it.step, n_);
    char* dst = staged ? stagingSlot(ri_) : out_ + it.off * esz_;
    COLLIE_RETURN_IF_ERROR(from_->irecv(dst, it.cnt * esz_,
                                        ctx_.tagFor(a_, static_cast<uint32_t>(ri_), kRingId),
                                        &rreq_[ri_ % kWindow]));
    ++ri_;
    return Status::ok();
  }

  void reduceLanded() {
    const Item& it = recvs_[rd_];
    if (!ring::isReduceStep(it.step, n_) || it.cnt == 0) return;
    char* dst = out_ + it.off * esz_;
    if (inPlace_)
      reduce(dst, stagingSlot(rd_), dst, it.cnt, a_.dtype, op_);
    else
      reduce(dst, dst, in_ + it.off * esz_, it.cnt, a_.dtype, op_);
    if (a_.op == collieAvg && it.step == n_ - 2) scaleForAvg(dst, it.cnt, a_.dtype, n_);
  }

  const CollArgs& a_;
  AlgoContext& ctx_;
  const int n_;
  const size_t esz_, chunkElems_;
  char* out_;
  const char* in_;
  const bool inPlace_;
  const collieRedOp_t op_;
  Connection* to_;
  Connection* from_;
  char* staging_ = nullptr;
  std::vector<Item> sends_, recvs_;
  std::vector<Request> sreq_;
  Request rreq_[kWindow];
  size_t si_ = 0, ri_ = 0, rd_ = 0;  // sends posted, receives posted, receives reduced
};

Status RingAllReduce::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks;
  if (a.coll != Collective::kAllReduce) {
    ChunkSchedule s;
    if (n == 1) {
      s.copiesFirst.push_back(
          {static_cast<char*>(a.recv), static_cast<const char*>(a.send), argBytes(a)});
    } else {
      COLLIE_RETURN_IF_ERROR(buildRingSchedule(a, ctx, &s));
    }
    return runChunkSchedule(s, a, ctx, kRingId);
  }
  if (n == 1 || a.count == 0) {
    if (a.send != a.recv && a.count > 0) memcpy(a.recv, a.send, a.count * dtypeSize(a.dtype));
    return Status::ok();
  }
  return RingAllReduceRun(a, ctx).run();
}

}  // namespace

std::unique_ptr<Algorithm> makeRingAlgorithm() { return std::make_unique<RingAllReduce>(); }

}  // namespace collie
