// The distributed sampler: which samples each rank trains on in each step.
//
// Every epoch has one permutation of the data set, drawn from (seed, epoch), so every rank
// computes the same one without talking and each epoch is reshuffled. As with PyTorch's
// DistributedSampler, the permutation is then made a whole multiple of the world size:
//  - by default it is padded by repeating its first samples, so no sample is left out and the
//    last global batch may be short (its mean is over the samples it has);
//  - with dropLast it is cut to whole global batches (the tail of the permutation is skipped
//    this epoch, a different tail the next).
// Global batch s is positions [s*B, (s+1)*B) of that sequence, whatever the world size; rank r
// takes the positions j of it with j % worldSize == r. The ranks' parts are disjoint, their
// union is the batch a single rank with batch B would take, and when B is a multiple of the
// world size each rank's shard is exactly DistributedSampler's (positions r, r+N, r+2N, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace collie {
namespace train {

class DistributedSampler {
 public:
  DistributedSampler(size_t datasetSize, size_t globalBatch, int rank, int worldSize, uint64_t seed,
                     bool dropLast);

  // Draws epoch's permutation; call before asking for that epoch's batches.
  void setEpoch(int epoch);

  size_t epochLength() const { return length_; }  // after padding or dropping
  size_t stepsPerEpoch() const { return (length_ + batch_ - 1) / batch_; }
  // Samples in global batch `step` (B, or fewer in a short last batch).
  size_t globalBatchSize(size_t step) const;
  // This rank's samples of global batch `step`, in order.
  void localBatch(size_t step, std::vector<uint32_t>* indices) const;

 private:
  size_t datasetSize_, batch_, length_;
  int rank_, worldSize_;
  uint64_t seed_;
  std::vector<uint32_t> order_;  // this epoch's permutation, padded or cut to length_
};

}  // namespace train
}  // namespace collie
