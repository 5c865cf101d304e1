// The machine the schedule simulator models: ranks placed on hosts in contiguous blocks, and
// the links between them. A message costs its tier's latency, then moves at the bandwidth its
// flow gets. Across hosts every flow passes its sender's NIC out and its receiver's NIC in, each
// shared by all the ranks of that host (a NIC is full duplex). Inside a host the CPU moves the
// data (shared-memory copies, or loopback tcp without an shm tier, at the network's rates): a
// flow passes the copy port of its sender and of its receiver, one port per rank for both
// directions, and, with cores set, the host's pool of cores, which all its local flows share;
// a local flow keeps flowCores cores busy: two, its sender's copy in and its receiver's copy
// out, when copying is all they do, fewer when the copy ports' rate also holds time a core
// spends waiting (on its peer, on a handoff) that another rank's copy can use. Reductions run
// on the same cores, one core each at most. The cores serve the host's busy ranks (a rank with
// a local copy or a reduction on; a rank that waits sleeps). With more busy ranks than cores,
// ranks that wait on each other step by step go at the pace of the fullest core, ceil(busy /
// cores) ranks on it, so the others idle part of the time (3 ranks on 2 cores: 1.5 cores'
// worth), and the host loses switchLoss of that to switching between ranks.
// With a memory tier, local copies and reductions slow down once a rank's working set in a
// call (its input and output) outgrows the cache it works in: by memSlowdown when none of it
// fits, in proportion to the part that does not. Per rank, not per host: a rank's copies and
// reductions go through its input and output piece by piece while its peers do the same, so
// more ranks on a host do not make each piece colder (on one host, 3-8 ranks on 2 cores, a
// host-wide set predicted 1-2 MiB calls up to 1.7x too slow). A reduction of a received
// message larger than the cache also reads the message back from memory, slower by the same
// rule applied to the message: recursive doubling's whole-buffer exchanges pay it, the ring's
// chunks do not (2-8 ranks on one host: without it, recursive doubling at 4-16 MiB was
// predicted up to 1.5x too fast).
#pragma once

#include <cstddef>

namespace collie {
namespace sim {

struct Topology {
  int nranks = 1;
  int hosts = 1;
  // Rank r lives on host floor(r * hosts / nranks): blocks of nranks / hosts when that divides.
  int hostOf(int r) const { return static_cast<int>(static_cast<long long>(r) * hosts / nranks); }
};

struct Tier {
  double alphaUs = 0;  // per message
  double gbps = 0;     // GB/s (1e9 bytes per second); 0: this tier does not exist
};

struct Links {
  Tier net{5.0, 25.0};    // per NIC, each direction
  Tier shm{1.0, 100.0};   // per rank copy port, each direction; gbps 0: no shm tier
  double reduceGBps = 0;  // per rank reduction speed; 0: reductions are free
  int cores = 0;          // per host; 0: as many as ranks. Fewer cores than busy ranks slow local
                          // copies (the pool holds cores / flowCores flows at full rate) and
                          // reductions (each gets cores / busy ranks); see above
  double flowCores = 2;   // cores one local flow at full rate keeps busy, 1 to 2
  double switchLoss = 0;  // 0 to 1: the part of its cores' time a host with more busy ranks than
                          // cores loses to switching between them (a waiting rank sleeps, and
                          // its peer's data wakes it), taken from its copies and reductions
  double cacheBytes = 0;  // per rank; 0: no memory tier
  double memSlowdown = 1;  // cost of a byte from memory over its cost from the cache
};

// How much slower than in cache local copies and reductions run when each rank works on
// workingSetBytes: 1 + (memSlowdown - 1) * the part of the set the cache cannot hold.
inline double memoryFactor(const Links& l, double workingSetBytes) {
  if (l.cacheBytes <= 0 || workingSetBytes <= l.cacheBytes) return 1.0;
  return 1.0 + (l.memSlowdown - 1.0) * (1.0 - l.cacheBytes / workingSetBytes);
}

}  // namespace sim
}  // namespace collie
