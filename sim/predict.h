// What the schedule simulator predicts for an algorithm: its real schedule (the patterns in
// algorithms/patterns/) for every rank, run through the event model of event_sim.h. This is
// the entry point for a tuner: predictUs(name, collective, bytes, topology, links).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/patterns/schedule.h"
#include "sim/event_sim.h"
#include "sim/sim_model.h"
#include "src/base/dtype.h"

namespace collie {
namespace sim {

struct PredictOptions {
  size_t elemSize = 4;            // the dtype's size; blocks and chunks are whole elements
  size_t chunkBytes = 512 << 10;  // the ring's pipeline chunk (COLLIE_CHUNK_BYTES)
};

// One simulated algorithm: its name as COLLIE_ALGO spells it, and its schedule for rank r.
struct SimAlgorithm {
  const char* name;
  Collective coll;
  sched::Schedule (*build)(int r, int n, size_t bytes, const PredictOptions& o);
};

// Every algorithm the simulator has a schedule for, in the registry's order.
const std::vector<SimAlgorithm>& simAlgorithms();
const SimAlgorithm* findSimAlgorithm(const std::string& name);

SimResult predict(const SimAlgorithm& algo, size_t bytes, const Topology& topo, const Links& links,
                  const PredictOptions& o = {});

// The predicted time in microseconds; negative when the algorithm is unknown, does not run
// this collective, or its schedules fail to complete.
double predictUs(const std::string& algo, Collective coll, size_t bytes, const Topology& topo,
                 const Links& links, const PredictOptions& o = {});

// nccl-tests' bus bandwidth factor of an AllReduce, 2(n-1)/n, applied to bytes / time.
double allReduceBusGBps(size_t bytes, int nranks, double timeUs);

}  // namespace sim
}  // namespace collie
