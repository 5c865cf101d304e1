// Pure rank arithmetic of the double binary tree. Tree 0 lays the ranks out as an in-order
// binary tree: position p has label x = p + 1, and a label whose lowest set bit is b has the
// children x - b/2 and x + b/2 and sits below x - b or x + b (whichever has bit 2b clear
// after the move). Labels beyond n are skipped: a missing right child is replaced by the
// nearest real label down its left spine. Leaves are the even positions. Tree 1 places rank r
// at position n - 1 - r when n is even (a mirror) and at (r + 1) mod n when n is odd (a shift),
// so that the interior ranks of one tree are leaves of the other (for odd n all but one rank).
// Each tree carries half of an AllReduce.
#pragma once

#include <cstddef>

namespace collie {
namespace tree {

constexpr int kNumTrees = 2;

struct Node {
  int parent = -1;  // -1 at the root
  int child[2] = {-1,
                  -1};  // in order: child[0] holds lower positions than the node, child[1] higher
  int numChildren() const { return (child[0] >= 0) + (child[1] >= 0); }
};

inline int lowBit(int x) { return x & -x; }
inline int topPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Position of rank r in tree t, and back.
inline int position(int r, int t, int n) {
  if (t == 0) return r;
  return n % 2 == 0 ? n - 1 - r : (r + 1) % n;
}
inline int rankAt(int p, int t, int n) {
  if (t == 0) return p;
  return n % 2 == 0 ? n - 1 - p : (p - 1 + n) % n;
}

// Label arithmetic of the in-order tree over labels 1..n (position + 1).
inline int labelParent(int x) {
  int b = lowBit(x);
  return (x & (2 * b)) ? x - b : x + b;
}
inline int labelRoot(int n) { return topPow2(n); }

// The node at position p of an in-order tree over n positions (positions, not ranks).
inline Node positionNode(int p, int n) {
  Node nd;
  const int x = p + 1, b = lowBit(x), root = labelRoot(n);
  if (x != root) {
    int q = labelParent(x);
    while (q > n) q = labelParent(q);
    nd.parent = q - 1;
  }
  if (b > 1) {
    nd.child[0] = x - b / 2 - 1;
    int c = x + b / 2;
    while (c > n && lowBit(c) > 1) c -= lowBit(c) / 2;
    if (c <= n) nd.child[1] = c - 1;
  }
  return nd;
}

// Rank r's parent and children (as ranks) in tree t of n ranks.
inline Node node(int r, int t, int n) {
  Node nd = positionNode(position(r, t, n), n);
  if (nd.parent >= 0) nd.parent = rankAt(nd.parent, t, n);
  for (int& c : nd.child)
    if (c >= 0) c = rankAt(c, t, n);
  return nd;
}
inline int root(int t, int n) { return rankAt(labelRoot(n) - 1, t, n); }

// Levels below the root (0 for one rank): the pipeline fill of a reduce or broadcast.
inline int height(int n) {
  int h = 0;
  while ((2 << h) <= n) ++h;
  return h;
}

// The elements tree t carries of an AllReduce of count: tree 0 the first ceil(count/2).
inline size_t splitOffset(size_t count, int t) { return t == 0 ? 0 : (count + 1) / 2; }
inline size_t splitCount(size_t count, int t) { return t == 0 ? (count + 1) / 2 : count / 2; }

// A single tree rooted at an arbitrary rank (Broadcast, Reduce): tree 0 rotated so that root
// takes the place of its root. Rank r's node.
inline Node rootedNode(int r, int root, int n) {
  const int shift = labelRoot(n) - 1 - root;
  auto to = [&](int x) { return ((x + shift) % n + n) % n; };
  auto back = [&](int x) { return ((x - shift) % n + n) % n; };
  Node nd = positionNode(to(r), n);
  if (nd.parent >= 0) nd.parent = back(nd.parent);
  for (int& c : nd.child)
    if (c >= 0) c = back(c);
  return nd;
}

}  // namespace tree
}  // namespace collie
