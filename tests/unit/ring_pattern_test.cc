// The ring's rank arithmetic alone: blocks tile the buffer, every block is reduced by every rank
// exactly once, and after reduce-scatter rank r owns block r+1.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/patterns/ring_pattern.h"

namespace collie {
namespace {

TEST(RingPattern, BlocksTileTheBuffer) {
  for (int n = 1; n <= 9; ++n) {
    for (size_t count : {0ul, 1ul, 7ul, 8ul, 9ul, 1000003ul}) {
      size_t next = 0;
      for (int b = 0; b < n; ++b) {
        EXPECT_EQ(ring::blockOffset(count, n, b), next) << n << " " << count << " " << b;
        next += ring::blockCount(count, n, b);
        EXPECT_LE(ring::blockCount(count, n, b), count / n + 1);
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(RingPattern, ReduceScatterVisitsEachBlockOnceAndEndsOnOwnedBlock) {
  for (int n = 2; n <= 9; ++n) {
    for (int r = 0; r < n; ++r) {
      std::set<int> received;
      for (int s = 0; s < n - 1; ++s) {
        EXPECT_TRUE(ring::isReduceStep(s, n));
        received.insert(ring::recvBlock(r, s, n));
        // What rank r receives at step s is what its predecessor sends at step s.
        EXPECT_EQ(ring::recvBlock(r, s, n), ring::sendBlock(ring::prev(r, n), s, n));
        // And what it sends at s+1 is what it received at s.
        EXPECT_EQ(ring::sendBlock(r, s + 1, n), ring::recvBlock(r, s, n));
      }
      EXPECT_EQ(received.size(), static_cast<size_t>(n - 1));
      EXPECT_EQ(received.count(r), 0u) << "a rank never receives its own starting block";
      EXPECT_EQ(ring::recvBlock(r, n - 2, n), ring::next(r, n)) << "owned block after RS";
    }
  }
}

TEST(RingPattern, AllGatherDeliversEveryOtherBlock) {
  for (int n = 2; n <= 9; ++n) {
    for (int r = 0; r < n; ++r) {
      std::set<int> got;
      for (int s = n - 1; s < ring::numSteps(n); ++s) {
        EXPECT_FALSE(ring::isReduceStep(s, n));
        got.insert(ring::recvBlock(r, s, n));
      }
      got.insert(ring::next(r, n));  // the block it reduced itself
      EXPECT_EQ(got.size(), static_cast<size_t>(n));
    }
  }
}

TEST(RingPattern, ChunksCoverABlockAndEmptyBlocksStillHaveOne) {
  EXPECT_EQ(ring::numChunks(0, 4), 1u);
  EXPECT_EQ(ring::chunkCount(0, 0, 4), 0u);
  for (size_t elems : {1ul, 3ul, 4ul, 5ul, 17ul}) {
    size_t sum = 0;
    for (size_t k = 0; k < ring::numChunks(elems, 4); ++k) {
      EXPECT_EQ(ring::chunkOffset(k, 4), sum);
      sum += ring::chunkCount(elems, k, 4);
    }
    EXPECT_EQ(sum, elems);
  }
}

}  // namespace
}  // namespace collie
