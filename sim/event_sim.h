// An event-driven run of one schedule per rank (algorithms/patterns/schedule.h) over the links
// of sim_model.h. Bandwidth is shared by fluid flows: a flow's rate is the smallest of its
// ports' capacity divided by the flows on that port, recomputed whenever a flow starts or ends
// on one of them. Reductions run one at a time per rank, in arrival order; with a host's cores
// modelled they are flows on those cores too, at their rank's share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/patterns/schedule.h"
#include "sim/sim_model.h"

namespace collie {
namespace sim {

struct SimResult {
  bool ok = false;
  std::string error;  // why not: a mismatched or deadlocked schedule
  double timeUs = 0;  // when the last operation of any rank completed
  uint64_t events = 0;
};

// workingSetBytes: the bytes each rank uses again within the call, for the memory tier.
SimResult simulate(const std::vector<sched::Schedule>& ranks, const Topology& topo,
                   const Links& links, double workingSetBytes = 0);

}  // namespace sim
}  // namespace collie
