// The distributed sampler: shards are disjoint, their union is the single-rank batch for any
// world size and any batch (even uneven splits), epochs reshuffle, padding and dropping work
// like DistributedSampler's.
#include "training_demo/sampler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace collie {
namespace train {
namespace {

std::vector<uint32_t> batchOf(size_t n, size_t batch, int rank, int world, int epoch, size_t step,
                              bool dropLast = false) {
  DistributedSampler s(n, batch, rank, world, 42, dropLast);
  s.setEpoch(epoch);
  std::vector<uint32_t> idx;
  s.localBatch(step, &idx);
  return idx;
}

TEST(Sampler, ShardsAreDisjointAndMakeTheSingleRankBatch) {
  const size_t n = 120;
  for (size_t batch : {1, 7, 10, 12, 32}) {
    for (int world = 1; world <= 5; ++world) {
      DistributedSampler single(n, batch, 0, 1, 42, false);
      for (size_t step = 0; step < single.stepsPerEpoch(); ++step) {
        std::vector<uint32_t> whole = batchOf(n, batch, 0, 1, 3, step), got;
        for (int r = 0; r < world; ++r) {
          const std::vector<uint32_t> part = batchOf(n, batch, r, world, 3, step);
          EXPECT_LE(part.size(), (batch + world - 1) / world);
          got.insert(got.end(), part.begin(), part.end());
        }
        std::sort(whole.begin(), whole.end());
        std::sort(got.begin(), got.end());
        ASSERT_EQ(got, whole) << "batch " << batch << " world " << world << " step " << step;
      }
    }
  }
}

TEST(Sampler, AnEpochVisitsEverySampleOnce) {
  DistributedSampler s(100, 16, 0, 1, 9, false);
  s.setEpoch(0);
  std::multiset<uint32_t> seen;
  std::vector<uint32_t> idx;
  for (size_t step = 0; step < s.stepsPerEpoch(); ++step) {
    s.localBatch(step, &idx);
    seen.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(s.stepsPerEpoch(), 7u);
  EXPECT_EQ(s.globalBatchSize(6), 4u);  // the short last batch
  ASSERT_EQ(seen.size(), 100u);
  for (uint32_t i = 0; i < 100; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

TEST(Sampler, EpochsReshuffleAndSeedsAgree) {
  EXPECT_NE(batchOf(1000, 50, 0, 1, 0, 0), batchOf(1000, 50, 0, 1, 1, 0));
  EXPECT_EQ(batchOf(1000, 50, 1, 3, 5, 2), batchOf(1000, 50, 1, 3, 5, 2));
}

TEST(Sampler, PadsToTheWorldSizeByRepeatingTheStart) {
  DistributedSampler s(10, 4, 0, 3, 1, false);
  EXPECT_EQ(s.epochLength(), 12u);
  EXPECT_EQ(s.stepsPerEpoch(), 3u);
  DistributedSampler all(10, 12, 0, 1, 42, false);
  all.setEpoch(0);
  std::vector<uint32_t> order;
  all.localBatch(0, &order);
  ASSERT_EQ(order.size(), 10u);
  // Ranks 0..2 of world 3 with batch 12 take positions 0..11, 10 and 11 being 0 and 1 again.
  std::vector<uint32_t> r1 = batchOf(10, 12, 1, 3, 0, 0), r2 = batchOf(10, 12, 2, 3, 0, 0);
  EXPECT_EQ(r1.back(), order[0]);  // position 10
  EXPECT_EQ(r2.back(), order[1]);  // position 11
}

TEST(Sampler, DropLastCutsToWholeGlobalBatches) {
  DistributedSampler s(100, 16, 0, 3, 1, true);
  EXPECT_EQ(s.epochLength(), 96u);
  EXPECT_EQ(s.stepsPerEpoch(), 6u);
  EXPECT_EQ(s.globalBatchSize(5), 16u);
}

TEST(Sampler, MoreRanksThanSamplesInTheLastBatch) {
  // 9 samples padded to 12 for 4 ranks, batch 5: the last global batch has 2 samples, so
  // ranks 2 and 3 get none (they still join the step's AllReduce with zero gradients).
  DistributedSampler s(9, 5, 3, 4, 1, false);
  EXPECT_EQ(s.epochLength(), 12u);
  EXPECT_EQ(s.stepsPerEpoch(), 3u);
  EXPECT_EQ(s.globalBatchSize(2), 2u);
  s.setEpoch(0);
  std::vector<uint32_t> idx;
  s.localBatch(2, &idx);
  EXPECT_TRUE(idx.empty());
  EXPECT_EQ(batchOf(9, 5, 1, 4, 0, 2).size(), 1u);
}

}  // namespace
}  // namespace train
}  // namespace collie
