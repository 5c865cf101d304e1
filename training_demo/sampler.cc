// The sampler's arithmetic: one seeded Fisher-Yates shuffle per epoch, padding or cutting, and
// the strided split of each global batch.
#include "training_demo/sampler.h"

#include <algorithm>
#include <numeric>

#include "training_demo/rng.h"

namespace collie {
namespace train {

DistributedSampler::DistributedSampler(size_t datasetSize, size_t globalBatch, int rank,
                                       int worldSize, uint64_t seed, bool dropLast)
    : datasetSize_(datasetSize),
      batch_(std::max<size_t>(globalBatch, 1)),
      rank_(rank),
      worldSize_(std::max(worldSize, 1)),
      seed_(seed) {
  const size_t n = static_cast<size_t>(worldSize_);
  length_ = dropLast ? datasetSize_ / batch_ * batch_ : (datasetSize_ + n - 1) / n * n;
}

void DistributedSampler::setEpoch(int epoch) {
  order_.resize(datasetSize_);
  std::iota(order_.begin(), order_.end(), 0u);
  // A stream per epoch, so an epoch's order does not depend on how many were run before it
  // (a resumed run draws the same permutation as an uninterrupted one).
  Rng rng(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch) + 1);
  for (size_t i = datasetSize_; i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
  if (datasetSize_ == 0) return;
  for (size_t i = datasetSize_; i < length_; ++i) order_.push_back(order_[i - datasetSize_]);
  order_.resize(length_);
}

size_t DistributedSampler::globalBatchSize(size_t step) const {
  const size_t begin = step * batch_;
  return begin >= length_ ? 0 : std::min(batch_, length_ - begin);
}

void DistributedSampler::localBatch(size_t step, std::vector<uint32_t>* indices) const {
  indices->clear();
  const size_t begin = step * batch_, count = globalBatchSize(step);
  for (size_t j = static_cast<size_t>(rank_); j < count; j += worldSize_) {
    indices->push_back(order_[begin + j]);
  }
}

}  // namespace train
}  // namespace collie
