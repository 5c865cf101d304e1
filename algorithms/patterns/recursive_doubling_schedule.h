// Recursive-doubling AllReduce as a schedule (see schedule.h), as recursive_doubling.cc runs
// it: the fold (even ranks below 2*rem hand their buffer to their odd partner), log2(p)
// exchanges of the whole buffer, each waiting for both directions, and the unfold.
#pragma once

#include "algorithms/patterns/recursive_doubling_pattern.h"
#include "algorithms/patterns/schedule.h"

namespace collie {
namespace sched {

inline Schedule recursiveDoublingAllReduce(int r, int n, size_t bytes) {
  Schedule s;
  if (n <= 1 || bytes == 0) return s;
  const int rem = rd::remainder(n), v = rd::virtualRank(r, n);
  const bool folded = r < 2 * rem, even = r % 2 == 0;
  if (folded) s.wait(even ? s.send(r + 1, bytes) : s.recv(r - 1, bytes, true));
  if (v >= 0) {
    for (int k = 0; k < rd::numDoublingSteps(n); ++k) {
      int peer = rd::partner(v, k, n);
      int rq = s.recv(peer, bytes, true);
      int sq = s.send(peer, bytes);
      s.wait(rq);
      s.wait(sq);
    }
  }
  if (folded) s.wait(even ? s.recv(r + 1, bytes, false) : s.send(r - 1, bytes));
  return s;
}

}  // namespace sched
}  // namespace collie
