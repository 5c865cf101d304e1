// The simulated algorithms and the prediction entry points (see predict.h).
#include "sim/predict.h"

#include <algorithm>
#include <vector>

#include "algorithms/patterns/recursive_doubling_schedule.h"
#include "algorithms/patterns/ring_schedule.h"
#include "algorithms/schedules.h"
#include "sim/chunk_schedule_sim.h"

namespace collie {
namespace sim {

namespace {

bool allReduceOnly(Collective c) { return c == Collective::kAllReduce; }
bool ringCollectives(Collective c) { return c != Collective::kBarrier; }
bool treeCollectives(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kBroadcast || c == Collective::kReduce;
}
bool rhdCollectives(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter ||
         c == Collective::kAllGather;
}

// Elements of the call's count argument (algorithm.h): ReduceScatter and AllGather count one
// rank's block.
size_t callCount(Collective coll, int n, size_t bytes, const PredictOptions& o) {
  const bool blocks = coll == Collective::kReduceScatter || coll == Collective::kAllGather;
  return bytes / o.elemSize / (blocks ? static_cast<size_t>(n) : 1);
}

sched::Schedule ring(Collective coll, int r, size_t bytes, const Topology& topo, const Links&,
                     const PredictOptions& o) {
  const int n = topo.nranks;
  if (coll == Collective::kAllReduce)
    return sched::ringAllReduce(r, n, bytes / o.elemSize, o.elemSize, o.chunkBytes);
  return ringCollectiveSchedule(coll, r, n, callCount(coll, n, bytes, o), o.elemSize, o.chunkBytes);
}

sched::Schedule recursiveDoubling(Collective, int r, size_t bytes, const Topology& topo,
                                  const Links&, const PredictOptions& o) {
  return sched::recursiveDoublingAllReduce(r, topo.nranks, bytes / o.elemSize * o.elemSize);
}

sched::Schedule tree(Collective coll, int r, size_t bytes, const Topology& topo, const Links&,
                     const PredictOptions& o) {
  return executorSchedule(buildTreeSchedule, coll, r, topo.nranks,
                          callCount(coll, topo.nranks, bytes, o), o.elemSize, o.chunkBytes);
}

sched::Schedule rhd(Collective coll, int r, size_t bytes, const Topology& topo, const Links&,
                    const PredictOptions& o) {
  return executorSchedule(buildRhdSchedule, coll, r, topo.nranks,
                          callCount(coll, topo.nranks, bytes, o), o.elemSize, o.chunkBytes);
}

// Hierarchical as the algorithm runs it (hierarchical.cc): the two-level tree, or the tree
// Reduce inside the host, the leaders' ring and the tree Broadcast, one after the other.
sched::Schedule hierarchical(Collective, int r, size_t bytes, const Topology& topo,
                             const Links& links, const PredictOptions& o) {
  const int n = topo.nranks;
  std::vector<int> hostOf(static_cast<size_t>(n)), local, leaders;
  for (int p = 0; p < n; ++p) {
    hostOf[static_cast<size_t>(p)] =
        p > 0 && topo.hostOf(p) == topo.hostOf(p - 1) ? hostOf[static_cast<size_t>(p - 1)] : p;
    if (topo.hostOf(p) == topo.hostOf(r)) local.push_back(p);
    if (hostOf[static_cast<size_t>(p)] == p) leaders.push_back(p);
  }
  const size_t count = bytes / o.elemSize;
  CollArgs a;
  a.count = count;
  a.dtype = o.elemSize == 8 ? collieFloat64 : collieFloat32;
  const LinkModel net{links.net.alphaUs, links.net.gbps,
                      links.reduceGBps > 0 ? links.reduceGBps : 5.0};
  if (!hierarchicalLeaderRing(a, static_cast<int>(leaders.size()), net)) {
    return executorSchedule(
        [](const CollArgs& x, const AlgoContext& ctx, std::vector<char>*, ChunkSchedule* s) {
          return buildHierarchicalTreeSchedule(x, ctx, s);
        },
        Collective::kAllReduce, r, n, count, o.elemSize, o.chunkBytes, hostOf.data());
  }
  const int li = static_cast<int>(std::find(local.begin(), local.end(), r) - local.begin());
  const int nl = static_cast<int>(local.size()), nh = static_cast<int>(leaders.size());
  sched::Schedule s;
  appendPhase(executorSchedule(buildTreeSchedule, Collective::kReduce, li, nl, count, o.elemSize,
                               o.chunkBytes),
              local, &s);
  if (li == 0) {
    const int hi = static_cast<int>(std::find(leaders.begin(), leaders.end(), r) - leaders.begin());
    appendPhase(sched::ringAllReduce(hi, nh, count, o.elemSize, o.chunkBytes), leaders, &s);
  }
  appendPhase(executorSchedule(buildTreeSchedule, Collective::kBroadcast, li, nl, count, o.elemSize,
                               o.chunkBytes),
              local, &s);
  return s;
}

}  // namespace

const std::vector<SimAlgorithm>& simAlgorithms() {
  static const std::vector<SimAlgorithm> kAlgos = {
      {"recursive_doubling", allReduceOnly, recursiveDoubling, false},
      {"ring", ringCollectives, ring, true},
      {"tree", treeCollectives, tree, true},
      {"rhd", rhdCollectives, rhd, false},
      {"hierarchical", allReduceOnly, hierarchical, true},
  };
  return kAlgos;
}

const SimAlgorithm* findSimAlgorithm(const std::string& name) {
  for (const SimAlgorithm& a : simAlgorithms())
    if (name == a.name) return &a;
  return nullptr;
}

SimResult predict(const SimAlgorithm& algo, Collective coll, size_t bytes, const Topology& topo,
                  const Links& links, const PredictOptions& o) {
  if (!algo.supports(coll)) {
    SimResult r;
    r.error = std::string(algo.name) + " has no schedule for " + collectiveName(coll);
    return r;
  }
  std::vector<sched::Schedule> ranks;
  ranks.reserve(static_cast<size_t>(topo.nranks));
  for (int r = 0; r < topo.nranks; ++r) ranks.push_back(algo.build(coll, r, bytes, topo, links, o));
  return simulate(ranks, topo, links, workingSetBytes(algo, bytes, links, o));
}

double workingSetBytes(const SimAlgorithm& algo, size_t bytes, const Links& links,
                       const PredictOptions& o) {
  const double whole = static_cast<double>(bytes);
  if (!algo.streams || links.localBufferBytes <= 0) return 2.0 * whole;
  return 2.0 * std::min(whole, static_cast<double>(o.chunkBytes) + links.localBufferBytes);
}

double predictUs(const std::string& algo, Collective coll, size_t bytes, const Topology& topo,
                 const Links& links, const PredictOptions& o) {
  const SimAlgorithm* a = findSimAlgorithm(algo);
  if (a == nullptr || !a->supports(coll)) return -1;
  SimResult res = predict(*a, coll, bytes, topo, links, o);
  return res.ok ? res.timeUs : -1;
}

double busGBps(Collective coll, size_t bytes, int nranks, double timeUs) {
  if (timeUs <= 0 || nranks <= 1) return 0;
  double alg = static_cast<double>(bytes) / (timeUs * 1e3), n = nranks;
  switch (coll) {
    case Collective::kAllReduce:
      return alg * 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      return alg * (n - 1) / n;
    default:
      return alg;
  }
}

}  // namespace sim
}  // namespace collie
