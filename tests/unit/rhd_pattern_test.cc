// Recursive halving-doubling's rank arithmetic: partners are mutual, kept and handed-over
// halves split the current range, the last halving leaves block v with v, the doubling rebuilds
// the whole range, and the block boundaries partition the buffer.
#include "algorithms/patterns/rhd_pattern.h"

#include <gtest/gtest.h>

namespace collie {
namespace {

TEST(RhdPattern, HalvingPartnersAreMutualAndSplitTheRange) {
  for (int n = 2; n <= 40; ++n) {
    const int p = rd::largestPow2(n);
    for (int v = 0; v < p; ++v) {
      rhd::Range cur{0, p};
      for (int k = 0; k < rhd::numSteps(n); ++k) {
        const int w = rhd::halvingPartner(v, k, n);
        ASSERT_GE(w, 0);
        ASSERT_LT(w, p);
        EXPECT_EQ(rhd::halvingPartner(w, k, n), v);
        const rhd::Range kept = rhd::keptAfterHalving(v, k, n), sent = rhd::sentInHalving(v, k, n);
        // The partner keeps what v sends, and the two halves make v's current range.
        EXPECT_EQ(sent.lo, rhd::keptAfterHalving(w, k, n).lo);
        EXPECT_EQ(kept.hi - kept.lo, sent.hi - sent.lo);
        EXPECT_EQ(std::min(kept.lo, sent.lo), cur.lo) << "n " << n << " v " << v << " k " << k;
        EXPECT_EQ(std::max(kept.hi, sent.hi), cur.hi);
        EXPECT_TRUE(kept.hi == sent.lo || sent.hi == kept.lo);
        EXPECT_TRUE(kept.lo <= v && v < kept.hi);
        cur = kept;
      }
      EXPECT_EQ(cur.lo, v);
      EXPECT_EQ(cur.hi, v + 1);
    }
  }
}

TEST(RhdPattern, DoublingRebuildsTheWholeRange) {
  for (int n = 2; n <= 40; ++n) {
    const int p = rd::largestPow2(n), steps = rhd::numSteps(n);
    for (int v = 0; v < p; ++v) {
      rhd::Range held{v, v + 1};
      for (int j = 0; j < steps; ++j) {
        const int w = rhd::doublingPartner(v, j);
        EXPECT_EQ(rhd::doublingPartner(w, j), v);
        const rhd::Range s = rhd::sentInDoubling(v, j), r = rhd::receivedInDoubling(v, j);
        EXPECT_EQ(s.lo, held.lo);
        EXPECT_EQ(s.hi, held.hi);
        EXPECT_EQ(r.lo, rhd::sentInDoubling(w, j).lo);
        // What the doubling step j receives is what halving step steps-1-j handed over.
        EXPECT_EQ(r.lo, rhd::sentInHalving(v, steps - 1 - j, n).lo);
        EXPECT_EQ(r.hi, rhd::sentInHalving(v, steps - 1 - j, n).hi);
        held = rhd::Range{std::min(s.lo, r.lo), std::max(s.hi, r.hi)};
        EXPECT_EQ(held.hi - held.lo, 2 << j);
      }
      EXPECT_EQ(held.lo, 0);
      EXPECT_EQ(held.hi, p);
    }
  }
}

TEST(RhdPattern, BlockBoundariesPartitionTheBuffer) {
  for (int n = 1; n <= 40; ++n) {
    const int p = rd::largestPow2(n);
    for (size_t count : {0, 1, 3, 17, 1000}) {
      EXPECT_EQ(rhd::evenOffset(count, n, 0), 0u);
      EXPECT_EQ(rhd::evenOffset(count, n, p), count);
      for (int b = 0; b < p; ++b) {
        size_t len = rhd::evenOffset(count, n, b + 1) - rhd::evenOffset(count, n, b);
        EXPECT_TRUE(len == count / p || len == count / p + 1);
      }
    }
    EXPECT_EQ(rhd::rankStart(0, n), 0);
    EXPECT_EQ(rhd::rankStart(p, n), n);
    for (int v = 0; v < p; ++v) {
      // Virtual rank v stands for the real ranks [rankStart(v), rankStart(v+1)), itself among them.
      const int lo = rhd::rankStart(v, n), hi = rhd::rankStart(v + 1, n);
      EXPECT_TRUE(hi - lo == 1 || hi - lo == 2);
      const int real = rd::realRank(v, n);
      EXPECT_TRUE(lo <= real && real < hi);
      for (int r = lo; r < hi; ++r)
        EXPECT_TRUE(rd::virtualRank(r, n) == v || (rd::virtualRank(r, n) < 0 && r + 1 == real));
    }
  }
}

}  // namespace
}  // namespace collie
