// Bruck's AllToAll (patterns/alltoall_pattern.h): ceil(log2 n) rounds instead of n - 1, each
// moving about half the blocks, packed into one message (cut into chunks) through ctx.scratch.
// It pays latency once per round and bandwidth log2(n) / 2 times over, so it wins for small
// blocks only. Scratch holds the rotated blocks and one round's packed blocks each way, about
// twice the send buffer; the rotation makes the in-place call work like any other.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/exchange.h"
#include "algorithms/patterns/alltoall_pattern.h"

namespace collie {

namespace {

constexpr uint8_t kBruckId = 11;

class Bruck : public Algorithm {
 public:
  const char* name() const override { return "bruck"; }
  uint8_t id() const override { return kBruckId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return coll == Collective::kAllToAll && kind == MemoryKind::kHost;
  }
  // One message per round with the blocks it moves, plus the copies: rotation in and out
  // (n blocks each) and the pack and unpack of every moved block.
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    const double bytes = static_cast<double>(argBytes(a));
    const double us = 1.0 / (link.betaGBps * 1e3), copyUs = 1.0 / (link.reduceGBps * 1e3);
    double t = 2.0 * n * bytes * copyUs;
    for (int s = 0; s < a2a::bruckRounds(n); ++s) {
      const double moved = a2a::bruckMoved(n, s) * bytes;
      t += link.alphaUs + moved * us + 2.0 * moved * copyUs;
    }
    return t;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;
};

// Packs (or unpacks) the slots that move in round s between the rotated blocks and pack.
void packRound(char* slots, char* pack, int n, int s, size_t block, bool unpack) {
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    if (!a2a::bruckMoves(i, s)) continue;
    char* slot = slots + static_cast<size_t>(i) * block;
    if (unpack)
      memcpy(slot, pack + at, block);
    else
      memcpy(pack + at, slot, block);
    at += block;
  }
}

Status Bruck::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), block = argBytes(a);
  if (block == 0) return Status::ok();
  const size_t chunk = std::max(esz, ctx.chunkBytes), all = block * static_cast<size_t>(n);
  int most = 0;  // blocks moved in the busiest round
  for (int s = 0; s < a2a::bruckRounds(n); ++s) most = std::max(most, a2a::bruckMoved(n, s));
  const size_t packBytes = static_cast<size_t>(most) * block;
  if (ctx.scratch->size() < all + 2 * packBytes) ctx.scratch->resize(all + 2 * packBytes);
  char* slots = ctx.scratch->data();
  char* sendPack = slots + all;
  char* recvPack = sendPack + packBytes;
  const char* in = static_cast<const char*>(a.send);
  for (int i = 0; i < n; ++i)
    memcpy(slots + static_cast<size_t>(i) * block,
           in + static_cast<size_t>(a2a::bruckSendBlock(r, i, n)) * block, block);
  ExchangeWindow w;
  w.maxBytes = 2 * packBytes + 1;  // a round's chunks all at once
  for (int s = 0; s < a2a::bruckRounds(n); ++s) {
    const size_t bytes = static_cast<size_t>(a2a::bruckMoved(n, s)) * block;
    packRound(slots, sendPack, n, s, block, false);
    std::vector<Exchange> xs;
    for (size_t c = 0; c < numPieces(bytes, chunk, esz); ++c) {
      Exchange x;
      x.step = static_cast<uint32_t>(c);
      x.to = a2a::sendPeer(r, 1 << s, n);
      x.from = a2a::recvPeer(r, 1 << s, n);
      x.src = sendPack + pieceOffset(c, chunk, esz);
      x.dst = recvPack + pieceOffset(c, chunk, esz);
      x.sendBytes = x.recvBytes = pieceBytes(bytes, c, chunk, esz);
      x.sendCount = x.recvCount = a.count;
      xs.push_back(x);
    }
    w.maxExchanges = xs.size();
    COLLIE_RETURN_IF_ERROR(runExchanges(xs, a, ctx, kBruckId, w));
    packRound(slots, recvPack, n, s, block, true);
  }
  char* out = static_cast<char*>(a.recv);
  for (int i = 0; i < n; ++i)
    memcpy(out + static_cast<size_t>(a2a::bruckRecvBlock(r, i, n)) * block,
           slots + static_cast<size_t>(i) * block, block);
  return Status::ok();
}

}  // namespace

std::unique_ptr<Algorithm> makeBruckAlgorithm() { return std::make_unique<Bruck>(); }

}  // namespace collie
