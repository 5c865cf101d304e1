// The rank arithmetic of the block-moving schedules: pairwise rounds reach every peer once each
// way and match on both sides; Bruck's rounds, played out on block labels, leave every block with
// its destination in the slot the final unpack reads; the binomial tree's subtrees tile the ranks.
#include "algorithms/patterns/alltoall_pattern.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "algorithms/patterns/binomial_pattern.h"

namespace collie {
namespace {

TEST(AllToAllPattern, OutOfPlaceRoundsMeetEveryPeerOnceAndMatch) {
  for (int n = 2; n <= 17; ++n)
    for (int r = 0; r < n; ++r) {
      std::set<int> to, from;
      for (int k = 1; k < n; ++k) {
        const int s = a2a::sendPeer(r, k, n), f = a2a::recvPeer(r, k, n);
        EXPECT_TRUE(to.insert(s).second);
        EXPECT_TRUE(from.insert(f).second);
        // The peer receives from r in the same round, and f sends to r in it.
        EXPECT_EQ(a2a::recvPeer(s, k, n), r);
        EXPECT_EQ(a2a::sendPeer(f, k, n), r);
      }
      EXPECT_EQ(to.count(r) + from.count(r), 0u);
      EXPECT_EQ(static_cast<int>(to.size()), n - 1);
    }
}

TEST(AllToAllPattern, InPlaceRoundsPairRanksBothWays) {
  for (int n = 1; n <= 17; ++n)
    for (int r = 0; r < n; ++r) {
      std::set<int> met;
      int self = 0;
      for (int k = 0; k < n; ++k) {
        const int p = a2a::pairedPeer(r, k, n);
        EXPECT_EQ(a2a::pairedPeer(p, k, n), r) << "n " << n << " r " << r << " k " << k;
        if (p == r)
          ++self;
        else
          EXPECT_TRUE(met.insert(p).second);
      }
      EXPECT_EQ(self, 1);
      EXPECT_EQ(static_cast<int>(met.size()), n - 1);
    }
}

// Every rank's slots hold (source, destination) labels; the rounds move them between ranks.
TEST(AllToAllPattern, BruckDeliversEveryBlockToItsPlace) {
  for (int n = 1; n <= 19; ++n) {
    using Label = std::pair<int, int>;
    std::vector<std::vector<Label>> slots(n, std::vector<Label>(n));
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i) slots[r][i] = {r, a2a::bruckSendBlock(r, i, n)};
    int most = 0;
    for (int s = 0; s < a2a::bruckRounds(n); ++s) {
      auto next = slots;
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < n; ++i)
          if (a2a::bruckMoves(i, s)) next[a2a::sendPeer(r, 1 << s, n)][i] = slots[r][i];
      slots = next;
      EXPECT_LE(2 * a2a::bruckMoved(n, s), n);
      most = std::max(most, a2a::bruckMoved(n, s));
    }
    EXPECT_GE(1 << a2a::bruckRounds(n), n);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i) {
        const Label want{a2a::bruckRecvBlock(r, i, n), r};
        EXPECT_EQ(slots[r][i], want) << "n " << n << " rank " << r << " slot " << i;
      }
  }
}

// Each rank's subtree is itself followed by its children's subtrees, back to back, and the
// root's covers every rank: a gather that stacks the children's blocks after its own has them
// all in relative order.
TEST(BinomialPattern, SubtreesTileTheRanksAndParentsMatchChildren) {
  for (int n = 1; n <= 33; ++n) {
    EXPECT_EQ(binomial::subtreeSize(0, n), n);
    for (int v = 0; v < n; ++v) {
      int next = v + 1;
      for (int m = 1; binomial::hasChild(v, m, n); m <<= 1) {
        EXPECT_EQ(v + m, next) << "n " << n << " v " << v;
        EXPECT_EQ(binomial::parent(v + m, n), v);
        next += binomial::subtreeSize(v + m, n);
      }
      EXPECT_EQ(next, v + binomial::subtreeSize(v, n)) << "n " << n << " v " << v;
      if (v > 0) {
        EXPECT_LT(binomial::parent(v, n), v);
      }
    }
    for (int root = 0; root < n; ++root)
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(binomial::absolute(binomial::relative(r, root, n), root, n), r);
  }
}

}  // namespace
}  // namespace collie
