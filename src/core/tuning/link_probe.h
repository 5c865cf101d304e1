// The tuner's network figures, measured when a communicator starts: every rank sends to the
// next rank and receives from the previous one at the same time, as each step of a ring does
// on every link at once, first small messages (the latency of one step), then large ones (the
// bandwidth of a link under that load). A table calibrated on loopback says nothing of the
// network a job really runs on: on 1 Gbit/s links a step takes hundreds of microseconds, not
// eight, and which of recursive doubling, rhd and the tree wins at small sizes turns on it.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace collie {

struct LinkProbe {
  double alphaUs = 0;   // one step of 8-byte messages
  double betaGBps = 0;  // payload rate of one link, all links busy
};

// This rank's figures, from exchanges with its ring neighbours (every rank calls it, in the
// same op; the connections of ctx must reach both). bigBytes: the size of the large messages.
StatusOr<LinkProbe> probeRingLinks(AlgoContext& ctx, size_t bigBytes);

}  // namespace collie
