// Gradient buckets, as in PyTorch DDP: the flat gradient array is cut into buckets of about
// --bucket-mb, and with overlap on, a bucket's asynchronous AllReduce (sum) starts the moment
// backward has finished its last element, so communication runs on Collie's progress thread
// while backward computes the rest. The step then waits for every bucket. With overlap off the
// same buckets are reduced one after another, blocking, once backward is done; results are
// bitwise the same either way.
//
// Buckets are launched in array order on every rank (Collie runs collectives in call order,
// which must agree across ranks), and backward finishes the array front to back.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "collie/collie.hpp"
#include "training_demo/status.h"

namespace collie {
namespace train {

struct BucketRange {
  size_t begin, end;  // elements of the flat array
};

// Cuts n elements into buckets of at most capElems (at least one element), boundaries on
// multiples of 16 elements (64 bytes) where the cap allows, so each bucket starts aligned.
std::vector<BucketRange> makeBuckets(size_t n, size_t capElems);

class GradientBuckets {
 public:
  // comm may be null (one rank without a launcher): then nothing is communicated.
  GradientBuckets(Communicator* comm, float* data, size_t n, size_t capElems, bool overlap);

  const std::vector<BucketRange>& buckets() const { return buckets_; }
  bool overlap() const { return overlap_; }

  // Starts a step: no bucket is in flight.
  void begin();
  // The first `done` elements are final: with overlap, launches every bucket they complete.
  void ready(size_t done);
  // Launches what is left (or, without overlap, reduces every bucket blocking) and waits for
  // all; the time spent inside Collie's calls is added to *commSeconds.
  Status finish(double* commSeconds);

 private:
  Communicator* comm_;
  float* data_;
  std::vector<BucketRange> buckets_;
  bool overlap_;
  size_t launched_ = 0;                               // buckets started this step
  std::vector<Work> work_;                            // one per launched bucket
  std::chrono::steady_clock::duration launchTime_{};  // time spent queueing this step
};

}  // namespace train
}  // namespace collie
