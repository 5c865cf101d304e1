// What every rank of a communicator must agree on before the tuner may pick: the link figures
// (measured at init or given), and the times of the tuner's trials. Picks then match on every
// rank, since each depends only on agreed values.
#pragma once

#include <functional>

#include "src/core/tuning/link_probe.h"
#include "src/core/tuning/online_tuner.h"
#include "src/core/tuning/tuner.h"

namespace collie {

// Replaces each of v[0..n) with its largest value on any rank; every rank calls it at the same
// point. opName names it in errors.
using AgreeOnMax = std::function<Status(double* v, size_t n, const char* opName)>;

struct LinkSetup {
  bool network = false;  // some peer is reached over tcp or ucx
  bool alone = false;    // no other rank on this host
  bool probe = false;    // measure the network (COLLIE_TUNER_PROBE, no COLLIE_TUNER_LINKS)
  bool shm = false;      // the local peers are reached through shared memory
  int nranks = 1;
};

// The network's and this host's link models, the same on every rank: each rank offers its own
// (measured by measure() where s.probe), and all take the slowest any rank has.
Status agreeOnLinks(const LinkSetup& s, const std::function<StatusOr<LinkProbe>()>& measure,
                    const AgreeOnMax& agree, LinkModel* net, LinkModel* local);

// The trials of a call shape are done: every rank takes the slowest rank's times, and the
// fastest candidate runs that shape from now on.
Status settleTrial(OnlineTuner* online, OnlineTuner::Trial* t, const CollArgs& args,
                   const AgreeOnMax& agree);

}  // namespace collie
