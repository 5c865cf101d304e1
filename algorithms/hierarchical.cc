// Hierarchical AllReduce for ranks spread over several hosts, with one leader per host (its
// lowest rank). Small messages run one two-level tree: inside each host the ranks reduce to their
// leader over a binary tree of host-local connections (shared memory where the communicator set
// it up), the leaders reduce over a binary tree rooted at rank 0, and the result comes back down
// the same tree, chunks pipelined as in the tree algorithm (up at step s, down at step s - lag).
// Large messages run three phases: the tree Reduce to the leader inside each host, the ring
// AllReduce among the leaders, and the tree Broadcast from the leader; the leaders' ring moves
// 2(H-1)/H of the buffer per host over the network where a flat ring over all ranks moves
// 2(n-1)/n. Which one runs is the cost model's choice over the leaders' links, the same on every
// rank. Only one message per chunk crosses each host boundary in each direction, which is what
// pays when the network is much slower than the host.
#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/chunk_schedule.h"
#include "algorithms/patterns/tree_pattern.h"
#include "algorithms/schedules.h"

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

void twoLevelTree(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
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

// The hosts as the ranks see them: the ranks of this rank's host and the leaders, in rank order.
struct HostLayout {
  std::vector<int> local, leaders;
  int localIndex = 0, leaderIndex = -1;  // this rank's place in each (-1: not a leader)
  int maxLocal = 0;                      // ranks on the fullest host
};

HostLayout hostLayout(int r, int n, const int* hostOf) {
  HostLayout h;
  for (int p = 0; p < n; ++p) {
    if (hostOf[p] == hostOf[r]) {
      if (p == r) h.localIndex = static_cast<int>(h.local.size());
      h.local.push_back(p);
    }
    if (hostOf[p] == p) {
      if (p == r) h.leaderIndex = static_cast<int>(h.leaders.size());
      h.leaders.push_back(p);
    }
    h.maxLocal = std::max(h.maxLocal, static_cast<int>(std::count(hostOf, hostOf + n, hostOf[p])));
  }
  return h;
}

const Algorithm& ringModel() {
  static const std::unique_ptr<Algorithm> kRing = makeRingAlgorithm();
  return *kRing;
}
const Algorithm& treeModel() {
  static const std::unique_ptr<Algorithm> kTree = makeTreeAlgorithm();
  return *kTree;
}

// A view of ctx restricted to some of its ranks: rank and peers are indices into members.
AlgoContext subContext(const AlgoContext& ctx, const std::vector<int>& members, int index,
                       const LinkModel& link, std::vector<Connection*>* conns) {
  conns->clear();
  for (int p : members) conns->push_back(ctx.conns[p]);
  AlgoContext sub = ctx;
  sub.rank = index;
  sub.nranks = static_cast<int>(members.size());
  sub.conns = conns->data();
  sub.hostOf = nullptr;
  sub.link = link;
  return sub;
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
  // Without a layout: priced a little above the double tree (layoutCostUs is what the tuner
  // asks).
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    if (n <= 1) return 0;
    const double bytes = static_cast<double>(argBytes(a)), us = 1.0 / (link.betaGBps * 1e3);
    return 1.5 * (2 * tree::height(n) * link.alphaUs + 4 * bytes * us) + 1;
  }
  // The phases as run on the fullest host: Reduce and Broadcast inside it, the leaders' AllReduce
  // over the network.
  double layoutCostUs(const CollArgs& a, const AlgoContext& ctx) const override {
    if (ctx.hostOf == nullptr || ctx.nranks <= 1) return costUs(a, ctx.nranks, ctx.link);
    const HostLayout h = hostLayout(ctx.rank, ctx.nranks, ctx.hostOf);
    CollArgs local = a;
    local.coll = Collective::kReduce;
    double t = treeModel().costUs(local, h.maxLocal, ctx.localLink);
    local.coll = Collective::kBroadcast;
    t += treeModel().costUs(local, h.maxLocal, ctx.localLink);
    const int nh = static_cast<int>(h.leaders.size());
    return t + std::min(ringModel().costUs(a, nh, ctx.link), treeModel().costUs(a, nh, ctx.link));
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override {
    if (ctx.nranks == 1 || a.count == 0) {
      if (a.count > 0 && a.recv != a.send) memcpy(a.recv, a.send, argBytes(a));
      return Status::ok();
    }
    const HostLayout h = hostLayout(ctx.rank, ctx.nranks, ctx.hostOf);
    if (!hierarchicalLeaderRing(a, static_cast<int>(h.leaders.size()), ctx.link)) {
      ChunkSchedule s;
      COLLIE_RETURN_IF_ERROR(buildHierarchicalTreeSchedule(a, ctx, &s));
      return runChunkSchedule(s, a, ctx, kHierarchicalId);
    }
    CollArgs sum = a;
    if (a.op == collieAvg) sum.op = collieSum;
    // 1. Reduce to the leader inside the host.
    AlgoContext local = subContext(ctx, h.local, h.localIndex, ctx.localLink, &localConns_);
    CollArgs red = sum;
    red.coll = Collective::kReduce;
    red.root = 0;
    red.recv = h.localIndex == 0 ? a.recv : nullptr;
    COLLIE_RETURN_IF_ERROR(tree_->run(red, local));
    // 2. The leaders' ring, in place on the leader's output.
    if (h.leaderIndex >= 0) {
      AlgoContext lead = subContext(ctx, h.leaders, h.leaderIndex, ctx.link, &leaderConns_);
      CollArgs all = sum;
      all.send = a.recv;
      COLLIE_RETURN_IF_ERROR(ring_->run(all, lead));
      if (a.op == collieAvg) scaleForAvg(a.recv, a.count, a.dtype, ctx.nranks);
    }
    // 3. Broadcast from the leader.
    CollArgs bc = a;
    bc.coll = Collective::kBroadcast;
    bc.root = 0;
    bc.send = h.localIndex == 0 ? a.recv : nullptr;
    return tree_->run(bc, local);
  }

 private:
  std::unique_ptr<Algorithm> ring_ = makeRingAlgorithm();
  std::unique_ptr<Algorithm> tree_ = makeTreeAlgorithm();
  std::vector<Connection*> localConns_, leaderConns_;
};

}  // namespace

bool hierarchicalLeaderRing(const CollArgs& a, int leaders, const LinkModel& net) {
  return leaders > 1 && ringModel().costUs(a, leaders, net) < treeModel().costUs(a, leaders, net);
}

Status buildHierarchicalTreeSchedule(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  if (ctx.hostOf == nullptr) return internalError("hierarchical needs the host layout");
  twoLevelTree(a, ctx, s);
  return Status::ok();
}

std::unique_ptr<Algorithm> makeHierarchicalAlgorithm() {
  return std::make_unique<HierarchicalAlgorithm>();
}

}  // namespace collie
