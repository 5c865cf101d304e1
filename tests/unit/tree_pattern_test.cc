// The double binary tree's rank arithmetic: each tree spans every rank exactly once with
// consistent parent and child links, the trees are shallow and complementary, and the rooted
// tree used by Broadcast and Reduce has the requested root.
#include "algorithms/patterns/tree_pattern.h"

#include <gtest/gtest.h>

#include <vector>

namespace collie {
namespace {

// Checks the links of one tree given as a node per rank; returns its root.
int checkTree(const std::vector<tree::Node>& nodes, int n, const char* what) {
  int roots = 0, root = -1;
  std::vector<int> asChild(n, 0);
  for (int r = 0; r < n; ++r) {
    const tree::Node& nd = nodes[r];
    if (nd.parent < 0) {
      ++roots;
      root = r;
    } else {
      EXPECT_GE(nd.parent, 0);
      EXPECT_LT(nd.parent, n);
      const tree::Node& p = nodes[nd.parent];
      EXPECT_TRUE(p.child[0] == r || p.child[1] == r) << what << " n " << n << " r " << r;
    }
    if (nd.child[1] >= 0) {
      EXPECT_GE(nd.child[0], 0) << what << " n " << n << " r " << r;
    }
    for (int c : nd.child) {
      if (c < 0) continue;
      EXPECT_NE(c, r);
      EXPECT_EQ(nodes[c].parent, r) << what << " n " << n << " r " << r << " c " << c;
      ++asChild[c];
    }
  }
  EXPECT_EQ(roots, 1) << what << " n " << n;
  for (int r = 0; r < n; ++r) EXPECT_EQ(asChild[r], r == root ? 0 : 1) << what << " n " << n;
  // Every rank reaches the root, within height(n) hops.
  for (int r = 0; r < n; ++r) {
    int hops = 0, x = r;
    while (nodes[x].parent >= 0 && hops <= n) x = nodes[x].parent, ++hops;
    EXPECT_EQ(x, root) << what << " n " << n << " r " << r;
    EXPECT_LE(hops, tree::height(n)) << what << " n " << n << " r " << r;
  }
  return root;
}

TEST(TreePattern, EachTreeSpansEveryRankOnceWithConsistentLinks) {
  for (int n = 1; n <= 64; ++n) {
    for (int t = 0; t < tree::kNumTrees; ++t) {
      std::vector<tree::Node> nodes;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(tree::rankAt(tree::position(r, t, n), t, n), r);
        nodes.push_back(tree::node(r, t, n));
      }
      EXPECT_EQ(checkTree(nodes, n, t == 0 ? "tree0" : "tree1"), tree::root(t, n));
    }
  }
}

TEST(TreePattern, TreesAreComplementary) {
  for (int n = 2; n <= 64; ++n) {
    int interiorInBoth = 0, leafInBoth = 0;
    for (int r = 0; r < n; ++r) {
      bool in0 = tree::node(r, 0, n).numChildren() > 0, in1 = tree::node(r, 1, n).numChildren() > 0;
      interiorInBoth += in0 && in1;
      leafInBoth += !in0 && !in1;
    }
    EXPECT_EQ(interiorInBoth, 0) << "n " << n;
    EXPECT_LE(leafInBoth, n % 2 == 0 ? 0 : 1) << "n " << n;
  }
}

TEST(TreePattern, SplitCoversTheBuffer) {
  for (size_t count : {0, 1, 2, 7, 1000}) {
    EXPECT_EQ(tree::splitOffset(count, 0), 0u);
    EXPECT_EQ(tree::splitOffset(count, 1), tree::splitCount(count, 0));
    EXPECT_EQ(tree::splitCount(count, 0) + tree::splitCount(count, 1), count);
  }
}

TEST(TreePattern, RootedTreeHasTheRequestedRoot) {
  for (int n = 1; n <= 33; ++n) {
    for (int root = 0; root < n; ++root) {
      std::vector<tree::Node> nodes;
      for (int r = 0; r < n; ++r) nodes.push_back(tree::rootedNode(r, root, n));
      EXPECT_EQ(checkTree(nodes, n, "rooted"), root);
    }
  }
}

}  // namespace
}  // namespace collie
