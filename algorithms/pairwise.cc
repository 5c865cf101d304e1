// Pairwise exchange for AllToAll and AllToAllv (patterns/alltoall_pattern.h): in round k rank r
// sends its block for r + k and receives the block of r - k, each cut into chunks, with a
// window of exchanges in flight so that several rounds overlap and memory stays bounded. The
// own block is copied locally. In place (AllToAll only) rounds pair ranks both ways and each
// received chunk lands in a staging slot, copied into place once the chunk it replaces has
// gone out. Every frame's tag carries the count of its pair (AllToAllv: the pair's own count),
// so a receiver whose recvcounts disagree with the sender's sendcounts fails on the first
// frame, before anything lands.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/exchange.h"
#include "algorithms/patterns/alltoall_pattern.h"

namespace collie {

namespace {

constexpr uint8_t kPairwiseId = 10;
constexpr size_t kWindowChunks = 8;   // bytes in flight: this many chunks
constexpr size_t kMaxExchanges = 16;  // exchanges in flight (out of place)
constexpr size_t kInPlaceSlots = 8;   // staging slots in place, of a chunk each

// One direction of one pair: where its bytes are and the count its frames carry.
struct Side {
  int peer;
  char* buf;  // the send side casts back to const
  size_t bytes;
  uint64_t count;
};

class Pairwise : public Algorithm {
 public:
  const char* name() const override { return "pairwise"; }
  uint8_t id() const override { return kPairwiseId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return (coll == Collective::kAllToAll || coll == Collective::kAllToAllv) &&
           kind == MemoryKind::kHost;
  }
  // n - 1 rounds of one block each way. AllToAllv is priced from its count (0): the per-pair
  // counts differ between ranks, and every rank must price a call alike.
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    return blockPerPeerUs(a, n, link);
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;
};

// This rank's block for peer (send) and from peer (receive).
Side sendSide(const CollArgs& a, int peer) {
  const size_t esz = dtypeSize(a.dtype);
  char* base = const_cast<char*>(static_cast<const char*>(a.send));
  if (a.coll == Collective::kAllToAllv) {
    const size_t n = a.sendCounts[peer];
    return Side{peer, base == nullptr ? nullptr : base + a.sendDispls[peer] * esz, n * esz, n};
  }
  return Side{peer, base + static_cast<size_t>(peer) * a.count * esz, a.count * esz, a.count};
}

Side recvSide(const CollArgs& a, int peer) {
  const size_t esz = dtypeSize(a.dtype);
  char* base = static_cast<char*>(a.recv);
  if (a.coll == Collective::kAllToAllv) {
    const size_t n = a.recvCounts[peer];
    return Side{peer, base == nullptr ? nullptr : base + a.recvDispls[peer] * esz, n * esz, n};
  }
  return Side{peer, base + static_cast<size_t>(peer) * a.count * esz, a.count * esz, a.count};
}

// The chunks of one round: chunk c of the block to s.peer and of the block from r.peer.
void addRound(const Side& s, const Side& r, bool staged, size_t chunk, size_t esz,
              std::vector<Exchange>* xs) {
  const size_t ns = numPieces(s.bytes, chunk, esz), nr = numPieces(r.bytes, chunk, esz);
  for (size_t c = 0; c < std::max(ns, nr); ++c) {
    Exchange x;
    x.step = static_cast<uint32_t>(c);
    const size_t off = pieceOffset(c, chunk, esz);
    if (c < ns) {
      x.to = s.peer;
      x.src = s.bytes == 0 ? nullptr : s.buf + off;
      x.sendBytes = pieceBytes(s.bytes, c, chunk, esz);
      x.sendCount = s.count;
    }
    if (c < nr) {
      x.from = r.peer;
      char* at = r.bytes == 0 ? nullptr : r.buf + off;
      (staged ? x.stageTo : x.dst) = at;
      x.recvBytes = pieceBytes(r.bytes, c, chunk, esz);
      x.recvCount = r.count;
    }
    xs->push_back(x);
  }
}

// The own block: this rank's sendcount to itself must be its recvcount from itself.
Status copyOwnBlock(const CollArgs& a, int rank) {
  const Side s = sendSide(a, rank), r = recvSide(a, rank);
  if (s.count != r.count)
    return invalidUsage(std::string(collectiveName(a.coll)) + ": rank " + std::to_string(rank) +
                        " sends " + std::to_string(s.count) + " elements to itself (sendcounts[" +
                        std::to_string(rank) + "]) but expects " + std::to_string(r.count) +
                        " (recvcounts[" + std::to_string(rank) + "])");
  if (s.bytes > 0 && s.buf != r.buf) memcpy(r.buf, s.buf, s.bytes);
  return Status::ok();
}

Status Pairwise::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, me = ctx.rank;
  if (a.coll == Collective::kAllToAll && a.count == 0) return Status::ok();
  const bool inPlace = a.coll == Collective::kAllToAll && a.send == a.recv;
  const size_t esz = dtypeSize(a.dtype);
  const size_t chunk = std::max(esz, ctx.chunkBytes);
  std::vector<Exchange> xs;
  if (inPlace) {
    for (int k = 0; k < n; ++k) {
      const int p = a2a::pairedPeer(me, k, n);
      if (p != me) addRound(sendSide(a, p), recvSide(a, p), true, chunk, esz, &xs);
    }
  } else {
    for (int k = 1; k < n; ++k)
      addRound(sendSide(a, a2a::sendPeer(me, k, n)), recvSide(a, a2a::recvPeer(me, k, n)), false,
               chunk, esz, &xs);
  }
  // The own block goes first: the caller's mistake is found before any peer waits on this rank.
  COLLIE_RETURN_IF_ERROR(copyOwnBlock(a, me));
  ExchangeWindow w;
  w.maxExchanges = inPlace ? kInPlaceSlots : kMaxExchanges;
  w.maxBytes = kWindowChunks * chunk;
  return runExchanges(xs, a, ctx, kPairwiseId, w);
}

}  // namespace

std::unique_ptr<Algorithm> makePairwiseAlgorithm() { return std::make_unique<Pairwise>(); }

}  // namespace collie
