// The ring AllReduce as a schedule (see schedule.h), op for op what ring.cc does: every block
// cut into chunks of chunkBytes; at step s the chunks of recvBlock(r, s) are posted as receives
// (reducing during the reduce-scatter steps), and chunk k of sendBlock(r, s) goes out once chunk
// k received at step s-1 is complete (for s >= 1), since it forwards that chunk.
#pragma once

#include <algorithm>
#include <vector>

#include "algorithms/patterns/ring_pattern.h"
#include "algorithms/patterns/schedule.h"

namespace collie {
namespace sched {

inline Schedule ringAllReduce(int r, int n, size_t count, size_t elemSize, size_t chunkBytes) {
  Schedule s;
  if (n <= 1 || count == 0) return s;
  const size_t chunkElems = std::max<size_t>(1, chunkBytes / elemSize);
  const int next = ring::next(r, n), prev = ring::prev(r, n);
  std::vector<int> prevRecvs, recvs;
  for (int step = 0; step < ring::numSteps(n); ++step) {
    recvs.clear();
    size_t rbc = ring::blockCount(count, n, ring::recvBlock(r, step, n));
    for (size_t k = 0; k < ring::numChunks(rbc, chunkElems); ++k)
      recvs.push_back(s.recv(prev, ring::chunkCount(rbc, k, chunkElems) * elemSize,
                             ring::isReduceStep(step, n)));
    size_t sbc = ring::blockCount(count, n, ring::sendBlock(r, step, n));
    for (size_t k = 0; k < ring::numChunks(sbc, chunkElems); ++k) {
      if (step > 0) s.wait(prevRecvs[k]);
      s.send(next, ring::chunkCount(sbc, k, chunkElems) * elemSize);
    }
    prevRecvs.swap(recvs);
  }
  return s;
}

}  // namespace sched
}  // namespace collie
