// Binomial-tree Gather and Scatter (patterns/binomial_pattern.h): ceil(log2 n) rounds instead of
// the linear algorithm's n - 1 messages at the root, for small blocks. A gather receives the
// subtrees of its children next to its own block, in relative rank order, then sends the whole
// subtree to its parent in one transfer; a scatter receives its subtree from its parent and hands
// each child its part, the largest first. Interior ranks stage their subtree in ctx.scratch; the
// root works in the user's buffer when it is rank 0 (relative order is rank order), else in
// scratch with one rotation. Leaves send or receive their own block directly.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/exchange.h"
#include "algorithms/patterns/binomial_pattern.h"

namespace collie {

namespace {

constexpr uint8_t kBinomialId = 13;
constexpr size_t kWindowChunks = 8;

class Binomial : public Algorithm {
 public:
  const char* name() const override { return "binomial"; }
  uint8_t id() const override { return kBinomialId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return (coll == Collective::kGather || coll == Collective::kScatter) &&
           kind == MemoryKind::kHost;
  }
  // One message per round; the root's link still carries n - 1 blocks; the staging copies (the
  // root's rotation, each interior rank's own block) are paid at memory speed.
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    const double bytes = static_cast<double>(argBytes(a));
    const double us = 1.0 / (link.betaGBps * 1e3), copyUs = 1.0 / (link.reduceGBps * 1e3);
    return rounds * link.alphaUs + (n - 1) * bytes * us + (n + rounds) * bytes * copyUs;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;
};

// The chunks of one transfer of bytes at at, to (send) or from peer.
void addTransfer(const CollArgs& a, int peer, bool send, char* at, size_t bytes, size_t chunk,
                 std::vector<Exchange>* xs) {
  const size_t esz = dtypeSize(a.dtype);
  for (size_t c = 0; c < numPieces(bytes, chunk, esz); ++c) {
    Exchange x;
    x.step = static_cast<uint32_t>(c);
    const size_t off = pieceOffset(c, chunk, esz), len = pieceBytes(bytes, c, chunk, esz);
    if (send) {
      x.to = peer, x.src = at + off, x.sendBytes = len, x.sendCount = a.count;
    } else {
      x.from = peer, x.dst = at + off, x.recvBytes = len, x.recvCount = a.count;
    }
    xs->push_back(x);
  }
}

// One rank's part of a call: its relative rank, its subtree and where that lies.
struct Part {
  const CollArgs& a;
  AlgoContext& ctx;
  int n, v, size;
  size_t block, chunk;
  char* tree;  // the subtree's blocks in relative order
};

Status runPart(const Part& p, const std::vector<Exchange>& xs) {
  ExchangeWindow w;
  w.maxBytes = kWindowChunks * p.chunk;
  return runExchanges(xs, p.a, p.ctx, kBinomialId, w);
}

int peerOf(const Part& p, int v) { return binomial::absolute(v, p.a.root, p.n); }

Status gather(const Part& p) {
  std::vector<Exchange> xs;
  for (int m = 1; binomial::hasChild(p.v, m, p.n); m <<= 1)
    addTransfer(p.a, peerOf(p, p.v + m), false, p.tree + m * p.block,
                binomial::subtreeSize(p.v + m, p.n) * p.block, p.chunk, &xs);
  COLLIE_RETURN_IF_ERROR(runPart(p, xs));
  if (p.v == 0) return Status::ok();
  xs.clear();
  addTransfer(p.a, peerOf(p, binomial::parent(p.v, p.n)), true, p.tree, p.size * p.block, p.chunk,
              &xs);
  return runPart(p, xs);
}

Status scatter(const Part& p) {
  std::vector<Exchange> xs;
  if (p.v != 0) {
    addTransfer(p.a, peerOf(p, binomial::parent(p.v, p.n)), false, p.tree, p.size * p.block,
                p.chunk, &xs);
    COLLIE_RETURN_IF_ERROR(runPart(p, xs));
    xs.clear();
  }
  int top = 1;
  while (binomial::hasChild(p.v, top << 1, p.n)) top <<= 1;
  for (int m = top; m >= 1; m >>= 1)
    if (binomial::hasChild(p.v, m, p.n))
      addTransfer(p.a, peerOf(p, p.v + m), true, p.tree + m * p.block,
                  binomial::subtreeSize(p.v + m, p.n) * p.block, p.chunk, &xs);
  return runPart(p, xs);
}

Status Binomial::run(const CollArgs& a, AlgoContext& ctx) {
  if (a.count == 0) return Status::ok();
  const int n = ctx.nranks, v = binomial::relative(ctx.rank, a.root, n);
  const bool isGather = a.coll == Collective::kGather;
  const size_t block = argBytes(a), chunk = std::max(dtypeSize(a.dtype), ctx.chunkBytes);
  char* send = const_cast<char*>(static_cast<const char*>(a.send));
  char* recv = static_cast<char*>(a.recv);
  Part p{a, ctx, n, v, binomial::subtreeSize(v, n), block, chunk, nullptr};
  // Rank 0 as the root holds the blocks in rank order already; a leaf holds only its own.
  char* mine = isGather ? send : recv;
  char* user = v == 0 && a.root == 0 ? (isGather ? recv : send) : p.size == 1 ? mine : nullptr;
  if (user == nullptr && ctx.scratch->size() < p.size * block) ctx.scratch->resize(p.size * block);
  p.tree = user != nullptr ? user : ctx.scratch->data();
  if (isGather) {
    if (p.tree != mine) memcpy(p.tree, mine, block);  // in place on root 0: already there
    COLLIE_RETURN_IF_ERROR(gather(p));
    if (v == 0 && p.tree != recv)
      for (int u = 0; u < n; ++u) memcpy(recv + peerOf(p, u) * block, p.tree + u * block, block);
    return Status::ok();
  }
  if (v == 0 && p.tree != send)
    for (int u = 0; u < n; ++u) memcpy(p.tree + u * block, send + peerOf(p, u) * block, block);
  COLLIE_RETURN_IF_ERROR(scatter(p));
  if (p.tree != recv) memcpy(recv, p.tree, block);  // in place on root 0: already there
  return Status::ok();
}

}  // namespace

std::unique_ptr<Algorithm> makeBinomialAlgorithm() { return std::make_unique<Binomial>(); }

}  // namespace collie
