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
// call outgrows the cache of its own: in proportion to the part that does not fit. The part
// that does not fit comes from the host's shared (last-level) cache while the working set of
// all the host's ranks fits there (sharedSlowdown), and from memory for the part of the host's
// set that does not (memSlowdown). A rank's working set is what it uses again within the call:
// recursive doubling and rhd go over the whole buffer and its received copy at every step, so
// theirs is input and output; the ring and the tree stream their chunks through the
// connections, so theirs is the data in flight: with localBufferBytes set (a shared-memory
// ring's size), chunk plus buffer per direction. On one host with a 32 MiB last-level cache,
// 2-8 ranks on 2 cores: recursive doubling's time per byte grows 1.8x from 1 to 16 MiB on 2
// ranks, and on n ranks steps up where n times its working set passes 32 MiB, while the
// ring's stays flat. A reduction of a received message larger than the own cache also reads the
// message back, slower by the same rule applied to the message: recursive doubling's
// whole-buffer exchanges pay it, the ring's chunks do not.
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
  Tier net{5.0, 25.0};     // per NIC, each direction
  Tier shm{1.0, 100.0};    // per rank copy port, each direction; gbps 0: no shm tier
  double reduceGBps = 0;   // per rank reduction speed; 0: reductions are free
  int cores = 0;           // per host; 0: as many as ranks. Fewer cores than busy ranks slow local
                           // copies (the pool holds cores / flowCores flows at full rate) and
                           // reductions (each gets cores / busy ranks); see above
  double flowCores = 2;    // cores one local flow at full rate keeps busy, 1 to 2
  double switchLoss = 0;   // 0 to 1: the part of its cores' time a host with more busy ranks than
                           // cores loses to switching between them (a waiting rank sleeps, and
                           // its peer's data wakes it), taken from its copies and reductions
  double cacheBytes = 0;   // per rank; 0: no memory tier
  double memSlowdown = 1;  // cost of a byte from memory over its cost from the own cache
  double sharedCacheBytes = 0;  // per host, shared by its ranks; 0: none (past the own cache
                                // is memory)
  double sharedSlowdown = 1;    // cost of a byte from the shared cache over the own cache's
  double localBufferBytes = 0;  // what a local connection holds in flight per direction (a
                                // shared-memory ring); 0: any message whole (socket buffers)
};

// How much slower than in its own cache a rank's local copies and reductions run when each of
// the host's ranksOnHost ranks works on rankSetBytes: 1 + (c - 1) * the part of the rank's set
// its own cache cannot hold, where c is the cost of that part: memSlowdown without a shared
// cache; with one, sharedSlowdown for the part of the host's set (ranksOnHost * rankSetBytes)
// the shared cache holds and memSlowdown for the rest.
inline double memoryFactor(const Links& l, double rankSetBytes, int ranksOnHost = 1) {
  if (l.cacheBytes <= 0 || rankSetBytes <= l.cacheBytes) return 1.0;
  const double beyond = 1.0 - l.cacheBytes / rankSetBytes;
  double cost = l.memSlowdown;
  if (l.sharedCacheBytes > 0) {
    const double hostSet = rankSetBytes * ranksOnHost;
    const double fromMemory =
        hostSet <= l.sharedCacheBytes ? 0.0 : 1.0 - l.sharedCacheBytes / hostSet;
    cost = l.sharedSlowdown * (1.0 - fromMemory) + l.memSlowdown * fromMemory;
  }
  return 1.0 + (cost - 1.0) * beyond;
}

}  // namespace sim
}  // namespace collie
