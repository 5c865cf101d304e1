// The ring's schedules for the collectives other than AllReduce: ReduceScatter and AllGather
// (the two halves of the ring AllReduce) and Broadcast and Reduce (a chain through the ring
// order from or to the root, pipelined in chunks).
#pragma once

#include "algorithms/chunk_schedule.h"

namespace collie {

// Fills s with this rank's part of a's ring schedule; a.coll is not kAllReduce, nranks > 1.
Status buildRingSchedule(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s);

}  // namespace collie
