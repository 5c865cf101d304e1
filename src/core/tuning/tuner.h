// The tuner: for each call, the predicted time of every algorithm that can run it (its alpha-beta
// costUs over the links the communicator uses), and the cheapest one. The link figures of each
// transport come from a table calibrated on loopback and shared memory (tools/calibrate_links.sh
// prints the figures of a machine) and can be replaced with COLLIE_TUNER_LINKS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace collie {

struct TransportLinks {
  // A message through a shared-memory ring is copied in and out: about 5 GB/s of payload where
  // memcpy does 20 (shm_direct models its own passes over the data).
  LinkModel shm{1.0, 5.0, 8.0};
  LinkModel tcp{8.0, 1.5, 5.0};
  LinkModel ucx{8.0, 1.5, 5.0};  // no RDMA device here to calibrate it: the tcp figures
};

// The calibrated table with the overrides of spec applied: a comma list of
// transport=alpha_us:beta_GBps[:reduce_GBps], e.g. "tcp=20:0.12,shm=0.5:10".
StatusOr<TransportLinks> parseTransportLinks(const std::string& spec);

// The communicator's model: the slowest transport any peer is reached by sets it.
LinkModel linkModelFor(const TransportLinks& t, bool anyTcp, bool anyUcx);

// The algorithm for a; forced (may be null) wins where it can run the call, is an error where
// it cannot, and is ignored by barriers (which move no data).
Status pickAlgorithm(const std::vector<std::unique_ptr<Algorithm>>& algos, Algorithm* forced,
                     const CollArgs& a, const AlgoContext& ctx, Algorithm** out);

}  // namespace collie
