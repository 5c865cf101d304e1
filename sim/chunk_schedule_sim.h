// The executor's schedules (algorithms/chunk_schedule.h) as simulator schedules: what the
// algorithms that run through runChunkSchedule build for a call is what the simulator runs.
#pragma once

#include <vector>

#include "algorithms/chunk_schedule.h"
#include "algorithms/patterns/schedule.h"

namespace collie {
namespace sim {

// Receives first (the executor posts them ahead and they match by order per peer), then the
// sends in order, each after the receive it forwards; a receive with an operand reduces.
sched::Schedule fromChunkSchedule(const ChunkSchedule& s);

// The schedule an executor builder makes for rank r of n in a call of coll over count elements
// of esz bytes (root 0 where there is one); hostOf as AlgoContext has it, or nullptr. Empty for
// one rank or no elements, as the algorithms then send nothing.
using ChunkScheduleBuilder = Status (*)(const CollArgs& a, const AlgoContext& ctx,
                                        std::vector<char>* acc, ChunkSchedule* s);
sched::Schedule executorSchedule(ChunkScheduleBuilder build, Collective coll, int r, int n,
                                 size_t count, size_t esz, size_t chunkBytes,
                                 const int* hostOf = nullptr);

// Appends phase to out, to start once every operation already in out has completed; the
// phase's peers are indices into members.
void appendPhase(const sched::Schedule& phase, const std::vector<int>& members,
                 sched::Schedule* out);

// The ring's schedule of collective coll (not AllReduce) for rank r of n: count elements of
// esz bytes per the collective's convention (algorithm.h), root 0 where there is one.
sched::Schedule ringCollectiveSchedule(Collective coll, int r, int n, size_t count, size_t esz,
                                       size_t chunkBytes);

}  // namespace sim
}  // namespace collie
