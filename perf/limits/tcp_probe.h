// Loopback TCP throughput probe of collie-limits: two processes on 127.0.0.1, one to three
// connections, each sending and receiving at once (as the two ranks of an all-reduce do), or one
// way only.
#pragma once

namespace collie::limits {

struct TcpRates {
  double oneWayGBs = 0;  // one sender, one receiver
  double bidirGBs = 0;   // per direction, both directions busy at once
  bool ok = false;
};

// Each phase runs for `seconds`; every wait is bounded by a deadline a few seconds past it.
TcpRates measureTcp(double seconds);

}  // namespace collie::limits
