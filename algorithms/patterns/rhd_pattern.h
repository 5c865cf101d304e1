// Pure rank arithmetic of Rabenseifner's recursive halving-doubling. The fold of
// recursive_doubling_pattern.h maps n ranks onto p = 2^k virtual ranks. Reduce-scatter halves:
// at step k virtual rank v exchanges with v ^ (p >> (k+1)), keeps the half of its current
// range of virtual blocks that contains v and hands over the other half; after log2 p steps it
// holds block v. All-gather doubles back: at step j it exchanges with v ^ (1 << j), sending the
// range it holds and receiving the partner's, the two together forming its next range.
//
// A virtual block is a unit of the buffer: for AllReduce the buffer cut into p near-equal
// parts (evenOffset); for ReduceScatter / AllGather the blocks of the real ranks the virtual
// rank stands for (rankStart: a folded pair stands for two, 2v and 2v + 1).
#pragma once

#include <cstddef>

#include "algorithms/patterns/recursive_doubling_pattern.h"

namespace collie {
namespace rhd {

// Virtual ranks [lo, hi).
struct Range {
  int lo = 0, hi = 0;
};

inline int numSteps(int n) { return rd::numDoublingSteps(n); }

// Halving step k: the virtual partner, what v keeps and what it hands to the partner.
inline int halvingPartner(int v, int k, int n) { return v ^ (rd::largestPow2(n) >> (k + 1)); }
inline Range rangeOfSize(int v, int size) {
  int lo = v & ~(size - 1);
  return Range{lo, lo + size};
}
inline Range keptAfterHalving(int v, int k, int n) {
  return rangeOfSize(v, rd::largestPow2(n) >> (k + 1));
}
inline Range sentInHalving(int v, int k, int n) {
  return keptAfterHalving(halvingPartner(v, k, n), k, n);
}

// Doubling step j: the partner, what v sends (the range it holds) and what it receives.
inline int doublingPartner(int v, int j) { return v ^ (1 << j); }
inline Range sentInDoubling(int v, int j) { return rangeOfSize(v, 1 << j); }
inline Range receivedInDoubling(int v, int j) { return rangeOfSize(doublingPartner(v, j), 1 << j); }

// Element offset of virtual block boundary b when count elements are cut into p near-equal parts.
inline size_t evenOffset(size_t count, int n, int b) {
  const size_t p = static_cast<size_t>(rd::largestPow2(n)), ub = static_cast<size_t>(b);
  const size_t base = count / p, rem = count % p;
  return ub * base + (ub < rem ? ub : rem);
}
// The first real rank whose block virtual block boundary b starts (b = p gives n).
inline int rankStart(int b, int n) {
  const int rem = rd::remainder(n);
  return b < rem ? 2 * b : b + rem;
}

}  // namespace rhd
}  // namespace collie
