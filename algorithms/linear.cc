// Linear Gather and Scatter: the root exchanges each rank's block with that rank directly, cut
// into chunks; the root keeps a window of chunks in flight over all peers, interleaved (chunk c
// of every peer before chunk c + 1 of any) so that every link carries data at once and memory
// stays bounded. The root's own block is a local copy (none in place).
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/exchange.h"

namespace collie {

namespace {

constexpr uint8_t kLinearId = 12;
constexpr size_t kWindowChunks = 8;
constexpr size_t kMaxExchanges = 16;

class Linear : public Algorithm {
 public:
  const char* name() const override { return "linear"; }
  uint8_t id() const override { return kLinearId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return (coll == Collective::kGather || coll == Collective::kScatter) &&
           kind == MemoryKind::kHost;
  }
  // The root moves n - 1 blocks over its own link, one message each.
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    return blockPerPeerUs(a, n, link);
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;
};

// The root's exchanges: chunk c of every peer's block, peers in rank order after the root.
void rootExchanges(const CollArgs& a, const AlgoContext& ctx, size_t chunk,
                   std::vector<Exchange>* xs) {
  const size_t esz = dtypeSize(a.dtype), bytes = argBytes(a), pieces = numPieces(bytes, chunk, esz);
  const bool gather = a.coll == Collective::kGather;
  for (size_t c = 0; c < pieces; ++c)
    for (int k = 1; k < ctx.nranks; ++k) {
      const int p = (a.root + k) % ctx.nranks;
      const size_t at = static_cast<size_t>(p) * bytes + pieceOffset(c, chunk, esz);
      Exchange x;
      x.step = static_cast<uint32_t>(c);
      if (gather) {
        x.from = p;
        x.dst = static_cast<char*>(a.recv) + at;
        x.recvBytes = pieceBytes(bytes, c, chunk, esz);
        x.recvCount = a.count;
      } else {
        x.to = p;
        x.src = static_cast<const char*>(a.send) + at;
        x.sendBytes = pieceBytes(bytes, c, chunk, esz);
        x.sendCount = a.count;
      }
      xs->push_back(x);
    }
}

// Any other rank's: its block, chunk by chunk, to or from the root.
void peerExchanges(const CollArgs& a, size_t chunk, std::vector<Exchange>* xs) {
  const size_t esz = dtypeSize(a.dtype), bytes = argBytes(a), pieces = numPieces(bytes, chunk, esz);
  for (size_t c = 0; c < pieces; ++c) {
    Exchange x;
    x.step = static_cast<uint32_t>(c);
    const size_t off = pieceOffset(c, chunk, esz);
    if (a.coll == Collective::kGather) {
      x.to = a.root;
      x.src = static_cast<const char*>(a.send) + off;
      x.sendBytes = pieceBytes(bytes, c, chunk, esz);
      x.sendCount = a.count;
    } else {
      x.from = a.root;
      x.dst = static_cast<char*>(a.recv) + off;
      x.recvBytes = pieceBytes(bytes, c, chunk, esz);
      x.recvCount = a.count;
    }
    xs->push_back(x);
  }
}

Status Linear::run(const CollArgs& a, AlgoContext& ctx) {
  if (a.count == 0) return Status::ok();
  const size_t esz = dtypeSize(a.dtype), bytes = argBytes(a);
  const size_t chunk = std::max(esz, ctx.chunkBytes);
  std::vector<Exchange> xs;
  if (ctx.rank == a.root) {
    const size_t own = static_cast<size_t>(a.root) * bytes;
    char* dst = a.coll == Collective::kGather ? static_cast<char*>(a.recv) + own
                                              : static_cast<char*>(a.recv);
    const char* src = a.coll == Collective::kGather ? static_cast<const char*>(a.send)
                                                    : static_cast<const char*>(a.send) + own;
    if (dst != src) memcpy(dst, src, bytes);
    rootExchanges(a, ctx, chunk, &xs);
  } else {
    peerExchanges(a, chunk, &xs);
  }
  ExchangeWindow w;
  w.maxExchanges = kMaxExchanges;
  w.maxBytes = kWindowChunks * chunk;
  return runExchanges(xs, a, ctx, kLinearId, w);
}

}  // namespace

std::unique_ptr<Algorithm> makeLinearAlgorithm() { return std::make_unique<Linear>(); }

}  // namespace collie
