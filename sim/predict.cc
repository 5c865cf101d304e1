// The simulated algorithms and the prediction entry points (see predict.h).
#include "sim/predict.h"

#include "algorithms/patterns/recursive_doubling_schedule.h"
#include "algorithms/patterns/ring_schedule.h"

namespace collie {
namespace sim {

namespace {

sched::Schedule ring(int r, int n, size_t bytes, const PredictOptions& o) {
  return sched::ringAllReduce(r, n, bytes / o.elemSize, o.elemSize, o.chunkBytes);
}

sched::Schedule recursiveDoubling(int r, int n, size_t bytes, const PredictOptions& o) {
  return sched::recursiveDoublingAllReduce(r, n, bytes / o.elemSize * o.elemSize);
}

}  // namespace

const std::vector<SimAlgorithm>& simAlgorithms() {
  static const std::vector<SimAlgorithm> kAlgos = {
      {"recursive_doubling", Collective::kAllReduce, recursiveDoubling},
      {"ring", Collective::kAllReduce, ring},
  };
  return kAlgos;
}

const SimAlgorithm* findSimAlgorithm(const std::string& name) {
  for (const SimAlgorithm& a : simAlgorithms())
    if (name == a.name) return &a;
  return nullptr;
}

SimResult predict(const SimAlgorithm& algo, size_t bytes, const Topology& topo, const Links& links,
                  const PredictOptions& o) {
  std::vector<sched::Schedule> ranks;
  ranks.reserve(static_cast<size_t>(topo.nranks));
  for (int r = 0; r < topo.nranks; ++r) ranks.push_back(algo.build(r, topo.nranks, bytes, o));
  return simulate(ranks, topo, links);
}

double predictUs(const std::string& algo, Collective coll, size_t bytes, const Topology& topo,
                 const Links& links, const PredictOptions& o) {
  const SimAlgorithm* a = findSimAlgorithm(algo);
  if (a == nullptr || a->coll != coll) return -1;
  SimResult res = predict(*a, bytes, topo, links, o);
  return res.ok ? res.timeUs : -1;
}

double allReduceBusGBps(size_t bytes, int nranks, double timeUs) {
  if (timeUs <= 0 || nranks <= 1) return 0;
  return static_cast<double>(bytes) / (timeUs * 1e3) * 2.0 * (nranks - 1) / nranks;
}

}  // namespace sim
}  // namespace collie
