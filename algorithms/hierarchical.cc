// Hierarchical AllReduce for ranks spread over several hosts: inside each host the ranks reduce
// to their leader (the lowest rank there) over a binary tree of host-local connections (shared
// memory where the communicator set it up), the leaders reduce among themselves over a binary
// tree rooted at rank 0, and the result comes back down the same two-level tree. Chunks are
// pipelined as in the tree algorithm (up at step s, down at step s - lag). Only one message per
// chunk crosses each host boundary in each direction, which is what pays when the network is
// much slower than the host.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/chunk_schedule.h"
#include "algorithms/patterns/tree_pattern.h"

namespace collie {

namespace {

constexpr uint8_t kHierarchicalId = 7;

struct TwoLevelNode {
  int parent = -1;
  std::vector<int> children;  // host-local ones first, then other hosts' leaders
  int height = 0;             // levels of the whole tree
};

TwoLevelNode twoLevelNode(int r, int n, const int* hostOf) {
  std::vector<int> local, leaders;
  for (int p = 0; p < n; ++p) {
    if (hostOf[p] == hostOf[r]) local.push_back(p);
    if (hostOf[p] == p) leaders.push_back(p);
  }
  const int li = static_cast<int>(std::find(local.begin(), local.end(), r) - local.begin());
  TwoLevelNode out;
  const tree::Node in = tree::rootedNode(li, 0, static_cast<int>(local.size()));
  for (int c : in.child)
    if (c >= 0) out.children.push_back(local[c]);
  if (in.parent >= 0) out.parent = local[in.parent];
  if (li == 0) {
    const int hi = static_cast<int>(std::find(leaders.begin(), leaders.end(), r) - leaders.begin());
    const tree::Node up = tree::rootedNode(hi, 0, static_cast<int>(leaders.size()));
    for (int c : up.child)
      if (c >= 0) out.children.push_back(leaders[c]);
    if (up.parent >= 0) out.parent = leaders[up.parent];
  }
  int maxLocal = 0;
  for (int p = 0; p < n; ++p)
    maxLocal = std::max(maxLocal, static_cast<int>(std::count(hostOf, hostOf + n, hostOf[p])));
  out.height = tree::height(maxLocal) + tree::height(static_cast<int>(leaders.size()));
  return out;
}

void allReduce(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const TwoLevelNode nd = twoLevelNode(ctx.rank, ctx.nranks, ctx.hostOf);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const auto chunks =
      splitChunks(bytes, std::min(ctx.chunkBytes, std::max<size_t>(64 << 10, bytes / 8)), esz);
  const size_t lag = 2 * static_cast<size_t>(nd.height) + 2;
  std::vector<int> upDone(chunks.size(), -1);
  for (size_t st = 0; st < chunks.size() + lag; ++st) {
    if (st < chunks.size()) {
      const size_t off = chunks[st].off, len = chunks[st].bytes;
      int last = -1;
      for (size_t i = 0; i < nd.children.size(); ++i) {
        ScheduleRecv x;
        x.peer = nd.children[i];
        x.bytes = len;
        x.with = (last < 0 ? in : out) + off;
        x.out = out + off;
        x.landedFirst = false;  // own data first, then the children in a fixed order
        x.finalAvg = a.op == collieAvg && nd.parent < 0 && i + 1 == nd.children.size();
        last = static_cast<int>(s->recvs.size());
        s->recvs.push_back(x);
      }
      upDone[st] = last;
      if (nd.parent >= 0) {
        ScheduleSend x;
        x.peer = nd.parent;
        x.src = (last < 0 ? in : out) + off;
        x.bytes = len;
        x.dep = last;
        s->sends.push_back(x);
      }
    }
    if (st >= lag) {
      const size_t k = st - lag, off = chunks[k].off, len = chunks[k].bytes;
      int dep = upDone[k];
      if (nd.parent >= 0) {
        ScheduleRecv x;
        x.peer = nd.parent;
        x.bytes = len;
        x.dst = out + off;
        dep = static_cast<int>(s->recvs.size());
        s->recvs.push_back(x);
      }
      for (int c : nd.children) {
        ScheduleSend x;
        x.peer = c;
        x.src = out + off;
        x.bytes = len;
        x.dep = dep;
        s->sends.push_back(x);
      }
    }
  }
}

class HierarchicalAlgorithm : public Algorithm {
 public:
  const char* name() const override { return "hierarchical"; }
  uint8_t id() const override { return kHierarchicalId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return coll == Collective::kAllReduce && kind == MemoryKind::kHost;
  }
  // More than one host, and some host with more than one rank.
  bool usable(const AlgoContext& ctx, const CollArgs&) const override {
    if (ctx.hostOf == nullptr) return false;
    bool manyHosts = false, shared = false;
    for (int p = 0; p < ctx.nranks; ++p) {
      manyHosts |= ctx.hostOf[p] != ctx.hostOf[0];
      shared |= ctx.hostOf[p] != p;
    }
    return manyHosts && shared;
  }
  // The model does not see the host layout: priced a little above the double tree, so the
  // tuner takes it only when forced until the cost model knows the hosts.
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    const double bytes = static_cast<double>(argBytes(a)), us = 1.0 / (link.betaGBps * 1e3);
    return 1.5 * (2 * tree::height(n) * link.alphaUs + 4 * bytes * us) + 1;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override {
    if (ctx.nranks == 1 || a.count == 0) {
      if (a.count > 0 && a.recv != a.send) memcpy(a.recv, a.send, argBytes(a));
      return Status::ok();
    }
    ChunkSchedule s;
    allReduce(a, ctx, &s);
    return runChunkSchedule(s, a, ctx, kHierarchicalId);
  }
};

}  // namespace

std::unique_ptr<Algorithm> makeHierarchicalAlgorithm() {
  return std::make_unique<HierarchicalAlgorithm>();
}

}  // namespace collie
