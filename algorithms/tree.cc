// Double binary tree (patterns/tree_pattern.h). AllReduce: each of the two complementary trees
// carries half of the buffer, cut into chunks; a chunk is reduced on its way up (children's
// partial results combined with the rank's own input, left subtree first) and the root's
// result is broadcast back down. Both phases are one ChunkSchedule: at step s every rank
// handles chunk s going up and chunk s - lag coming down, so that about lag chunks are in
// flight per tree instead of one round trip per chunk. Broadcast and Reduce run over one tree
// rooted at the call's root, pipelined the same way. The root computes each reduced element
// once, so every rank gets the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/chunk_schedule.h"
#include "algorithms/patterns/tree_pattern.h"
#include "algorithms/schedules.h"

namespace collie {

namespace {

constexpr uint8_t kTreeId = 5;

// Chunks small enough that the pipeline fills even for mid-sized messages.
size_t treeChunkBytes(size_t bytes, const AlgoContext& ctx) {
  return std::min(ctx.chunkBytes, std::max<size_t>(64 << 10, bytes / 8));
}

// The up receives of one chunk from nd's children, reduced with the own data in into out;
// returns the index of the last one (-1 for a leaf).
int addUp(const tree::Node& nd, const char* in, char* out, size_t bytes, bool finalAvg,
          ChunkSchedule* s) {
  int last = -1;
  for (int i = 0; i < 2; ++i) {
    if (nd.child[i] < 0) continue;
    ScheduleRecv x;
    x.peer = nd.child[i];
    x.bytes = bytes;
    x.with = last < 0 ? in : out;  // the left child is combined first, with the own input
    x.out = out;
    x.landedFirst = i == 0;
    x.finalAvg = finalAvg && (i == 1 || nd.child[1] < 0);
    last = static_cast<int>(s->recvs.size());
    s->recvs.push_back(x);
  }
  return last;
}

void addSend(int peer, const char* src, size_t bytes, int dep, ChunkSchedule* s) {
  ScheduleSend x;
  x.peer = peer;
  x.src = src;
  x.bytes = bytes;
  x.dep = dep;
  s->sends.push_back(x);
}

void allReduce(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const bool avg = a.op == collieAvg;
  tree::Node nd[tree::kNumTrees];
  std::vector<ChunkSpan> chunks[tree::kNumTrees];
  size_t base[tree::kNumTrees], steps = 0;
  const size_t chunk = treeChunkBytes(tree::splitCount(a.count, 0) * esz, ctx);
  for (int t = 0; t < tree::kNumTrees; ++t) {
    nd[t] = tree::node(r, t, n);
    base[t] = tree::splitOffset(a.count, t) * esz;
    chunks[t] = splitChunks(tree::splitCount(a.count, t) * esz, chunk, esz);
    steps = std::max(steps, chunks[t].size());
  }
  const size_t lag = 2 * static_cast<size_t>(tree::height(n)) + 2;
  std::vector<int> upDone[tree::kNumTrees];
  for (int t = 0; t < tree::kNumTrees; ++t) upDone[t].assign(chunks[t].size(), -1);
  for (size_t st = 0; st < steps + lag; ++st) {
    for (int t = 0; t < tree::kNumTrees && st < steps; ++t) {
      if (st >= chunks[t].size()) continue;
      const size_t off = base[t] + chunks[t][st].off, bytes = chunks[t][st].bytes;
      const bool leaf = nd[t].numChildren() == 0;
      int last = addUp(nd[t], in + off, out + off, bytes, avg && nd[t].parent < 0, s);
      upDone[t][st] = last;
      if (nd[t].parent >= 0) addSend(nd[t].parent, (leaf ? in : out) + off, bytes, last, s);
    }
    for (int t = 0; t < tree::kNumTrees && st >= lag; ++t) {
      const size_t k = st - lag;
      if (k >= chunks[t].size()) continue;
      const size_t off = base[t] + chunks[t][k].off, bytes = chunks[t][k].bytes;
      int dep = upDone[t][k];
      if (nd[t].parent >= 0) {
        ScheduleRecv x;
        x.peer = nd[t].parent;
        x.bytes = bytes;
        x.dst = out + off;
        dep = static_cast<int>(s->recvs.size());
        s->recvs.push_back(x);
      }
      for (int c : nd[t].child)
        if (c >= 0) addSend(c, out + off, bytes, dep, s);
    }
  }
}

void broadcast(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const tree::Node nd = tree::rootedNode(ctx.rank, a.root, ctx.nranks);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  char* out = static_cast<char*>(a.recv);
  const char* src = nd.parent < 0 ? static_cast<const char*>(a.send) : out;
  if (nd.parent < 0) s->copiesFirst.push_back({out, src, bytes});
  for (const ChunkSpan& c : splitChunks(bytes, treeChunkBytes(bytes, ctx), esz)) {
    int dep = -1;
    if (nd.parent >= 0) {
      ScheduleRecv x;
      x.peer = nd.parent;
      x.bytes = c.bytes;
      x.dst = out + c.off;
      dep = static_cast<int>(s->recvs.size());
      s->recvs.push_back(x);
    }
    for (int ch : nd.child)
      if (ch >= 0) addSend(ch, src + c.off, c.bytes, dep, s);
  }
}

void reduceToRoot(const CollArgs& a, const AlgoContext& ctx, std::vector<char>* acc,
                  ChunkSchedule* s) {
  const tree::Node nd = tree::rootedNode(ctx.rank, a.root, ctx.nranks);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  if (nd.parent >= 0 && nd.numChildren() > 0) {
    // An interior rank other than the root has no output: it sums into a buffer of its own.
    if (acc->size() < bytes) acc->resize(bytes);
    out = acc->data();
  }
  for (const ChunkSpan& c : splitChunks(bytes, treeChunkBytes(bytes, ctx), esz)) {
    int last = addUp(nd, in + c.off, out + c.off, c.bytes, a.op == collieAvg && nd.parent < 0, s);
    if (nd.parent >= 0) addSend(nd.parent, (last < 0 ? in : out) + c.off, c.bytes, last, s);
  }
}

class TreeAlgorithm : public Algorithm {
 public:
  const char* name() const override { return "tree"; }
  uint8_t id() const override { return kTreeId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return kind == MemoryKind::kHost &&
           (coll == Collective::kAllReduce || coll == Collective::kBroadcast ||
            coll == Collective::kReduce);
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    const double bytes = static_cast<double>(argBytes(a)), us = 1.0 / (link.betaGBps * 1e3);
    const double h = tree::height(n);
    if (a.coll == Collective::kAllReduce) {
      // Fill: up and down the height with the first chunk of a half; then per further chunk
      // every rank moves about four chunks each way (interior in one tree, leaf in the other).
      const double half = bytes / 2, c = std::max(1.0, std::min(half, std::max(65536.0, half / 8)));
      const double more = std::max(0.0, std::ceil(half / c) - 1);
      return 2 * h * (link.alphaUs + c * us) + more * (link.alphaUs + 4 * c * us);
    }
    // Broadcast / Reduce: a binary tree, each interior rank sends (or receives) twice per chunk.
    const double c = std::max(1.0, std::min(bytes, std::max(65536.0, bytes / 8)));
    const double more = std::max(0.0, std::ceil(bytes / c) - 1);
    return h * (link.alphaUs + 2 * c * us) + more * (link.alphaUs + 2 * c * us);
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override {
    const size_t bytes = argBytes(a);
    if (ctx.nranks == 1 || a.count == 0) {
      if (bytes > 0 && a.recv != nullptr && a.send != nullptr && a.recv != a.send)
        memcpy(a.recv, a.send, bytes);
      return Status::ok();
    }
    ChunkSchedule s;
    COLLIE_RETURN_IF_ERROR(buildTreeSchedule(a, ctx, &acc_, &s));
    return runChunkSchedule(s, a, ctx, kTreeId);
  }

 private:
  std::vector<char> acc_;  // partial sums of interior ranks in a Reduce
};

}  // namespace

Status buildTreeSchedule(const CollArgs& a, const AlgoContext& ctx, std::vector<char>* acc,
                         ChunkSchedule* s) {
  switch (a.coll) {
    case Collective::kAllReduce:
      allReduce(a, ctx, s);
      return Status::ok();
    case Collective::kBroadcast:
      broadcast(a, ctx, s);
      return Status::ok();
    case Collective::kReduce:
      reduceToRoot(a, ctx, acc, s);
      return Status::ok();
    default:
      return internalError(std::string("tree has no schedule for ") + collectiveName(a.coll));
  }
}

std::unique_ptr<Algorithm> makeTreeAlgorithm() { return std::make_unique<TreeAlgorithm>(); }

}  // namespace collie
