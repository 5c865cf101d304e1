// Bucket boundaries and the launch-as-ready / wait-for-all protocol.
#include "training_demo/gradient_buckets.h"

#include <algorithm>

namespace collie {
namespace train {

using Clock = std::chrono::steady_clock;

std::vector<BucketRange> makeBuckets(size_t n, size_t capElems) {
  constexpr size_t kAlign = 16;
  size_t cap = std::max<size_t>(capElems, 1);
  if (cap >= kAlign) cap = cap / kAlign * kAlign;
  std::vector<BucketRange> out;
  for (size_t b = 0; b < n; b += cap) out.push_back({b, std::min(n, b + cap)});
  return out;
}

GradientBuckets::GradientBuckets(Communicator* comm, float* data, size_t n, size_t capElems,
                                 bool overlap)
    : comm_(comm), data_(data), buckets_(makeBuckets(n, capElems)), overlap_(overlap) {
  work_.reserve(buckets_.size());
}

void GradientBuckets::begin() {
  launched_ = 0;
  work_.clear();
  launchTime_ = {};
}

void GradientBuckets::ready(size_t done) {
  if (!comm_ || !overlap_) return;
  const Clock::time_point t0 = Clock::now();
  bool any = false;
  while (launched_ < buckets_.size() && buckets_[launched_].end <= done) {
    const BucketRange& r = buckets_[launched_++];
    work_.push_back(comm_->allreduceAsync(View<float>(data_ + r.begin, r.end - r.begin)));
    any = true;
  }
  if (any) launchTime_ += Clock::now() - t0;
}

Status GradientBuckets::finish(double* commSeconds) {
  if (!comm_) return Status();
  const Clock::duration queued = launchTime_;  // ready() below adds to it inside [t0, now)
  const Clock::time_point t0 = Clock::now();
  Result first;
  if (overlap_) {
    ready(buckets_.empty() ? 0 : buckets_.back().end);
    // Wait for every bucket even after a failure: their buffers must not be touched while
    // Collie may still write them.
    for (Work& w : work_) {
      Result r = w.wait();
      if (!r && first) first = r;
    }
  } else {
    for (const BucketRange& r : buckets_) {
      first = comm_->allreduce(View<float>(data_ + r.begin, r.end - r.begin));
      if (!first) break;
    }
  }
  const Clock::duration spent = (Clock::now() - t0) + queued;
  *commSeconds += std::chrono::duration<double>(spent).count();
  if (!first) return Status::error("gradient AllReduce failed: " + first.toString());
  return Status();
}

}  // namespace train
}  // namespace collie
