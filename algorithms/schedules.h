// The schedules of the algorithms that run through the chunk-schedule executor
// (chunk_schedule.h), for the schedule simulator and for algorithms composed of others. Each
// fills s with rank ctx.rank's part of the call a (nranks > 1, count > 0); acc holds partial
// results where a rank has no output buffer of the right size.
#pragma once

#include <vector>

#include "algorithms/chunk_schedule.h"

namespace collie {

// Double binary tree: AllReduce, Broadcast, Reduce.
Status buildTreeSchedule(const CollArgs& a, const AlgoContext& ctx, std::vector<char>* acc,
                         ChunkSchedule* s);

// Recursive halving-doubling: AllReduce, ReduceScatter, AllGather.
Status buildRhdSchedule(const CollArgs& a, const AlgoContext& ctx, std::vector<char>* acc,
                        ChunkSchedule* s);

// Hierarchical AllReduce over a two-level tree (ctx.hostOf set): the one-schedule form used
// when the leaders reduce over a tree.
Status buildHierarchicalTreeSchedule(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s);

// Whether hierarchical runs its three phases (a ring among the leaders) rather than the
// two-level tree, for leaders hosts whose network is net.
bool hierarchicalLeaderRing(const CollArgs& a, int leaders, const LinkModel& net);

}  // namespace collie
