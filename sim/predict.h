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

// One simulated algorithm: its name as COLLIE_ALGO spells it, the collectives it has schedules
// for, and its schedule for rank r. bytes is the size as nccl-tests reports it: the whole
// buffer of each rank (AllReduce, Broadcast, Reduce) or of the gathered result (ReduceScatter's
// input, AllGather's output, nranks blocks).
struct SimAlgorithm {
  const char* name;
  bool (*supports)(Collective coll);
  sched::Schedule (*build)(Collective coll, int r, size_t bytes, const Topology& topo,
                           const Links& links, const PredictOptions& o);
  // Streams its data in chunks through the connections (ring, tree), rather than going over
  // the whole buffer at every step (recursive doubling, rhd): see the memory tier, sim_model.h.
  bool streams = false;
};

// The bytes a rank of algo uses again within a call of bytes (sim_model.h): input and output,
// or for an algorithm that streams, a chunk and a local connection's buffer each way.
double workingSetBytes(const SimAlgorithm& algo, size_t bytes, const Links& links,
                       const PredictOptions& o);

// Every algorithm the simulator has a schedule for, in the registry's order.
const std::vector<SimAlgorithm>& simAlgorithms();
const SimAlgorithm* findSimAlgorithm(const std::string& name);

SimResult predict(const SimAlgorithm& algo, Collective coll, size_t bytes, const Topology& topo,
                  const Links& links, const PredictOptions& o = {});

// The predicted time in microseconds; negative when the algorithm is unknown, does not run
// this collective, or its schedules fail to complete. A tuner would call it with the
// communicator's layout and its transports' figures, e.g.
//   predictUs(algo->name(), args.coll, bytes, Topology{nranks, nhosts},
//             Links{{tcp.alphaUs, tcp.betaGBps}, {shm.alphaUs, shm.betaGBps}, tcp.reduceGBps},
//             PredictOptions{dtypeSize(args.dtype), chunkBytes});
// Its cost grows with ranks x steps x chunks (about 2 s for a 1,024-rank ring at 1 GiB), so a
// tuner would predict once per size class and layout (at init, or on first use) and cache.
double predictUs(const std::string& algo, Collective coll, size_t bytes, const Topology& topo,
                 const Links& links, const PredictOptions& o = {});

// Bus bandwidth as nccl-tests computes it: bytes / time times 2(n-1)/n (AllReduce), (n-1)/n
// (ReduceScatter, AllGather) or 1 (Broadcast, Reduce).
double busGBps(Collective coll, size_t bytes, int nranks, double timeUs);

}  // namespace sim
}  // namespace collie
