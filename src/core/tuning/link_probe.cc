// The link probe (see link_probe.h).
#include "src/core/tuning/link_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace collie {

namespace {

constexpr uint8_t kProbeId = 9;  // the frames' algorithm id
constexpr int kSmallWarm = 2, kSmallTimed = 16, kBigTimed = 2;

// One ring step: receive from the previous rank while sending to the next.
Status exchange(AlgoContext& ctx, uint32_t step, const char* out, char* in, size_t bytes) {
  const int n = ctx.nranks, next = (ctx.rank + 1) % n, prev = (ctx.rank + n - 1) % n;
  FrameTag t;
  t.seq = ctx.seq;
  t.count = bytes;
  t.tag = step;
  t.algo = kProbeId;
  Request rq, sq;
  COLLIE_RETURN_IF_ERROR(ctx.conns[prev]->irecv(in, bytes, t, &rq));
  COLLIE_RETURN_IF_ERROR(ctx.conns[next]->isend(out, bytes, t, &sq));
  COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&rq, ctx.deadline, ctx.opName));
  if (!sq.done) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&sq, ctx.deadline, ctx.opName));
  return Status::ok();
}

double sinceUs(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

StatusOr<LinkProbe> probeRingLinks(AlgoContext& ctx, size_t bigBytes) {
  using Clock = std::chrono::steady_clock;
  if (ctx.nranks < 2) return invalidArgument("the link probe needs two ranks or more");
  std::vector<char> out(std::max<size_t>(bigBytes, 8), 1), in(out.size());
  uint32_t step = 0;
  for (int i = 0; i < kSmallWarm; ++i)
    COLLIE_RETURN_IF_ERROR(exchange(ctx, step++, out.data(), in.data(), 8));
  Clock::time_point t0 = Clock::now();
  for (int i = 0; i < kSmallTimed; ++i)
    COLLIE_RETURN_IF_ERROR(exchange(ctx, step++, out.data(), in.data(), 8));
  LinkProbe p;
  p.alphaUs = sinceUs(t0) / kSmallTimed;
  // The first large exchange grows the socket buffers and windows; the best of the rest counts.
  COLLIE_RETURN_IF_ERROR(exchange(ctx, step++, out.data(), in.data(), bigBytes));
  double best = 0;
  for (int i = 0; i < kBigTimed; ++i) {
    t0 = Clock::now();
    COLLIE_RETURN_IF_ERROR(exchange(ctx, step++, out.data(), in.data(), bigBytes));
    double us = sinceUs(t0);
    if (i == 0 || us < best) best = us;
  }
  // What the large message took beyond a small one's step is its bytes' time on the link.
  const double moving = best > 2 * p.alphaUs ? best - p.alphaUs : best;
  p.betaGBps = static_cast<double>(bigBytes) / (moving * 1e3);
  return p;
}

}  // namespace collie
