// The machine the schedule simulator models: ranks placed on hosts in contiguous blocks, and
// the links between them. A message costs its tier's latency, then moves at the bandwidth its
// flow gets. Across hosts every flow passes its sender's NIC out and its receiver's NIC in, each
// shared by all the ranks of that host (a NIC is full duplex). Inside a host the CPU moves the
// data (shared-memory copies, or loopback tcp without an shm tier, at the network's rates): a
// flow passes the copy port of its sender and of its receiver, one port per rank for both
// directions, and, with cores set, the host's pool of cores, which all its local flows share.
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
  int cores = 0;          // per host; 0: as many as ranks. Fewer cores than ranks slow local copies
                          // (the pool holds cores ports' worth) and reductions (by cores / ranks)
};

}  // namespace sim
}  // namespace collie
