// The ways shm_direct carries a call through the staging buffers, each over the flag protocol
// of shm_flags.h. Every rank takes the same path for the same call: it follows from the call
// and the settings alone.
#pragma once

#include <cstddef>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/shm_flags.h"

namespace collie {

struct ShmDirectSettings {
  size_t chunkBytes = 0;    // COLLIE_SHM_CHUNK_BYTES: a staged chunk, sized to stay in cache
  size_t oneShotBytes = 0;  // COLLIE_SHM_ONESHOT_BYTES
  size_t lineBytes = 0;     // COLLIE_SHM_LINE_BYTES, up to kLineBytes
  size_t streamBytes = 0;   // COLLIE_SHM_STREAM_BYTES: outputs written past the caches
};

// AllReduce (shm_allreduce.cc). Up to kLineBytes in one line per rank, tag last; a barrier is
// such a call without data.
Status shmInOneLine(const CollArgs& a, AlgoContext& ctx, ShmFlags& f);
// One copy-in, one wait, and every rank reduces the whole message from all staging buffers.
Status shmOneShot(const CollArgs& a, AlgoContext& ctx, ShmFlags& f);
// Reduce-scatter through shared memory, then all-gather, chunk by chunk over the three slots.
Status shmChunked(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s);

// The other collectives (shm_collectives.cc). Ranks with nothing to stage still publish the
// flag: it tells the others they have finished reading the slot's previous use.
Status shmReduceScatter(const CollArgs& a, AlgoContext& ctx, ShmFlags& f,
                        const ShmDirectSettings& s);
Status shmAllGather(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s);
Status shmRooted(const CollArgs& a, AlgoContext& ctx, ShmFlags& f,
                 const ShmDirectSettings& s);  // Broadcast and Reduce

// Outputs this large are written once and not read back soon: they go past the caches.
inline void copyOut(void* dst, const void* src, size_t n, bool stream) {
  if (stream)
    copyStreaming(dst, src, n);
  else
    memcpy(dst, src, n);
}

// Reduces src(0..n-1) into out in rank order, so every rank gets the same bits, and scales
// for Avg.
template <typename Src>
void reduceInRankOrder(void* out, Src src, const CollArgs& a, int n) {
  const collieRedOp_t op = passOp(a.op);
  reduce(out, src(0), src(1), a.count, a.dtype, op);
  for (int j = 2; j < n; ++j) reduce(out, out, src(j), a.count, a.dtype, op);
  if (a.op == collieAvg) scaleForAvg(out, a.count, a.dtype, n);
}

}  // namespace collie
