// The data-parallel trainer: every rank holds the whole model (initialised identically from
// the seed), computes gradients on its part of each global batch, and Collie sums the bucketed
// gradients so every rank takes the same SGD step. Rank 0 evaluates, logs and checkpoints.
#pragma once

#include <cstdint>

#include "collie/collie.hpp"
#include "training_demo/options.h"
#include "training_demo/status.h"

namespace collie {
namespace train {

struct RunSummary {
  int epochsDone = 0;
  int64_t steps = 0;         // steps run by this process
  double testAccuracy = -1;  // after the last full epoch (negative: none evaluated)
  double trainSeconds = 0;   // time in steps (evaluation and checkpoints excluded)
  double samplesPerSec = 0;  // global samples per second of trainSeconds
  double commShare = 0;      // share of step time spent in Collie calls
  bool overlap = false;      // whether communication overlapped backward (--overlap resolved)
};

// Runs the training the options describe. comm may be null: one rank, no communication.
Status runTraining(const Options& options, Communicator* comm, RunSummary* summary);

}  // namespace train
}  // namespace collie
