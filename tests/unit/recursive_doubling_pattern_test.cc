// Recursive doubling's rank arithmetic: the fold maps ranks onto a power of two exactly once,
// partners are mutual, and every virtual rank meets every other one's data.
#include <gtest/gtest.h>

#include <set>

#include "algorithms/patterns/recursive_doubling_pattern.h"

namespace collie {
namespace {

TEST(RecursiveDoublingPattern, FoldCoversAPowerOfTwoOnce) {
  for (int n = 1; n <= 33; ++n) {
    int p = rd::largestPow2(n);
    EXPECT_LE(p, n);
    EXPECT_GT(2 * p, n);
    std::set<int> vs;
    int out = 0;
    for (int r = 0; r < n; ++r) {
      int v = rd::virtualRank(r, n);
      if (v < 0) {
        ++out;
        continue;
      }
      EXPECT_TRUE(vs.insert(v).second) << "n " << n << " r " << r;
      EXPECT_EQ(rd::realRank(v, n), r);
    }
    EXPECT_EQ(static_cast<int>(vs.size()), p);
    EXPECT_EQ(out, rd::remainder(n));
  }
}

TEST(RecursiveDoublingPattern, PartnersAreMutualAndReachEveryone) {
  for (int n = 2; n <= 33; ++n) {
    int p = rd::largestPow2(n);
    for (int v = 0; v < p; ++v) {
      std::set<int> known{v};
      for (int k = 0; k < rd::numDoublingSteps(n); ++k) {
        int peer = rd::partner(v, k, n);
        int pv = rd::virtualRank(peer, n);
        ASSERT_GE(pv, 0);
        EXPECT_EQ(rd::partner(pv, k, n), rd::realRank(v, n));
        std::set<int> grown = known;
        for (int x : known) grown.insert(x ^ (1 << k));
        known = grown;
      }
      EXPECT_EQ(static_cast<int>(known.size()), p);
    }
  }
}

}  // namespace
}  // namespace collie
