// shm_single_copy's collectives that move blocks without reducing them (Broadcast, AllGather,
// AllToAll, AllToAllv, Gather, Scatter; shm_single_copy_blocks.cc): each rank publishes its
// buffers' addresses in its slot flags, then moves what it needs straight between its own
// buffers and the peers' through the kernel (PeerMemory), one copy per block.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/shm_flags.h"

namespace collie {

// A kernel copy's fixed cost: a system call and the pinning of its first page.
constexpr double kSingleCopySystemCallUs = 1.0;

// Whether coll is one of the block moves.
bool singleCopyMovesBlocks(Collective coll);
// Whether the call's addresses fit the slot (AllToAllv publishes one entry per peer there).
bool singleCopyBlocksFit(const CollArgs& a, int nranks, size_t slotRoom);
// The tuner's price of a block move on n ranks whose kernel copy runs at copyRatio of memcpy's
// speed (the busiest rank's copies, two flag waits and a system call per block).
double singleCopyBlocksCostUs(const CollArgs& a, int n, double copyRatio);
// Runs one block move; tmp is a bounce buffer for AllToAll in place.
Status singleCopyBlocks(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, std::vector<char>* tmp);

}  // namespace collie
