// The machine the schedule simulator models: ranks placed on hosts in contiguous blocks, and
// the links between them. A message costs its tier's latency, then moves at the bandwidth its
// flow gets: across hosts every flow passes its sender's NIC out and its receiver's NIC in, each
// shared by all the ranks of that host; inside a host it passes the sender's and receiver's
// shared-memory copy ports (or, without an shm tier, the same ports at the network's rates, as
// loopback tcp would).
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
};

}  // namespace sim
}  // namespace collie
