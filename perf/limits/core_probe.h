// Core-to-core probes of collie-limits: what moving data between two cores costs, which every
// shared-memory transport pays (a rank reads what another rank's core wrote) and a memory
// bandwidth probe on private buffers does not see. On a VM both depend on where the host
// places the two virtual CPUs, and can change while a machine runs.
#pragma once

namespace collie::limits {

struct CoreRates {
  bool ok = false;      // false: fewer than 2 CPUs, or the probe ran past its deadline
  double oneWayUs = 0;  // a cache line's trip from one core to the other (half a ping-pong)
  double bidirGBs = 0;  // per direction, both cores handing data to each other at once
};

// Threads pinned to CPUs 0 and 1. Each hands chunks to the other through a ring of cache-sized
// slots, copying its chunk in and the peer's chunk out, as a shared-memory transport does; the
// private buffers stay in cache, so the figure is the transfer's, not the memory's.
CoreRates measureCores(double seconds);

// One short latency probe alone (a few ms); 0 where measureCores would not be ok.
double coreLatencyUs();

}  // namespace collie::limits
