// The simulated algorithms and the prediction entry points (see predict.h).
#include "sim/predict.h"

#include "algorithms/patterns/recursive_doubling_schedule.h"
#include "algorithms/patterns/ring_schedule.h"
#include "sim/chunk_schedule_sim.h"

namespace collie {
namespace sim {

namespace {

bool allReduceOnly(Collective c) { return c == Collective::kAllReduce; }
bool ringCollectives(Collective c) { return c != Collective::kBarrier; }

sched::Schedule ring(Collective coll, int r, int n, size_t bytes, const PredictOptions& o) {
  if (coll == Collective::kAllReduce)
    return sched::ringAllReduce(r, n, bytes / o.elemSize, o.elemSize, o.chunkBytes);
  // ReduceScatter and AllGather count one rank's block.
  bool blocks = coll == Collective::kReduceScatter || coll == Collective::kAllGather;
  size_t count = bytes / o.elemSize / (blocks ? static_cast<size_t>(n) : 1);
  return ringCollectiveSchedule(coll, r, n, count, o.elemSize, o.chunkBytes);
}

sched::Schedule recursiveDoubling(Collective, int r, int n, size_t bytes, const PredictOptions& o) {
  return sched::recursiveDoublingAllReduce(r, n, bytes / o.elemSize * o.elemSize);
}

}  // namespace

const std::vector<SimAlgorithm>& simAlgorithms() {
  static const std::vector<SimAlgorithm> kAlgos = {
      {"recursive_doubling", allReduceOnly, recursiveDoubling},
      {"ring", ringCollectives, ring},
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
  for (int r = 0; r < topo.nranks; ++r) ranks.push_back(algo.build(coll, r, topo.nranks, bytes, o));
  return simulate(ranks, topo, links);
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
