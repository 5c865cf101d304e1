// Pure rank arithmetic of recursive doubling with the standard fold for non-powers of two:
// with p the largest power of two <= n and rem = n - p, ranks below 2*rem pair up (even sends to
// odd, which joins the doubling as "virtual" rank r/2); the others join as r - rem. Virtual rank
// v exchanges with v ^ mask for mask = 1, 2, ..., p/2; afterwards odd ranks below 2*rem hand the
// result back to their even partner.
#pragma once

namespace collie {
namespace rd {

inline int largestPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
inline int remainder(int n) { return n - largestPow2(n); }
// -1 for ranks that sit out the doubling (even ranks below 2*rem).
inline int virtualRank(int r, int n) {
  int rem = remainder(n);
  if (r < 2 * rem) return (r % 2 == 0) ? -1 : r / 2;
  return r - rem;
}
inline int realRank(int v, int n) {
  int rem = remainder(n);
  return v < rem ? 2 * v + 1 : v + rem;
}
inline int numDoublingSteps(int n) {
  int s = 0;
  for (int m = 1; m < largestPow2(n); m *= 2) ++s;
  return s;
}
// Partner (real rank) of virtual rank v at doubling step k.
inline int partner(int v, int k, int n) { return realRank(v ^ (1 << k), n); }

}  // namespace rd
}  // namespace collie
