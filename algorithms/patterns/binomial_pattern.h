// Pure rank arithmetic of the binomial tree of Gather and Scatter. Ranks are taken relative to
// the root (v = rank - root mod n). Relative rank v with lowest set bit b (b = the top power of
// two >= n for the root) owns the blocks [v, v + b) clipped to n: its subtree. Its children are
// v + m for m = 1, 2, 4, ... < b with v + m < n, child v + m owning [v + m, v + 2m); its parent
// is v - b. A gather receives each child's subtree and sends its own up; a scatter the reverse.
#pragma once

namespace collie {
namespace binomial {

inline int relative(int rank, int root, int n) { return ((rank - root) % n + n) % n; }
inline int absolute(int v, int root, int n) { return (v + root) % n; }

// The lowest set bit of v; for the root, the first power of two >= n.
inline int span(int v, int n) {
  if (v != 0) return v & -v;
  int p = 1;
  while (p < n) p *= 2;
  return p;
}
// How many blocks v's subtree holds (v's own first).
inline int subtreeSize(int v, int n) { return span(v, n) < n - v ? span(v, n) : n - v; }
inline int parent(int v, int n) { return v == 0 ? -1 : v - span(v, n); }
// Children v + m for these m, smallest first: the first m is 1, then doubling while m < span
// and v + m < n.
inline bool hasChild(int v, int m, int n) { return m < span(v, n) && v + m < n; }

}  // namespace binomial
}  // namespace collie
