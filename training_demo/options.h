// collie-train's command line: the options, their defaults, parsing with clear errors, and
// the usage text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training_demo/idx_reader.h"
#include "training_demo/status.h"

namespace collie {
namespace train {

// on: start each bucket's AllReduce during backward; off: after it; auto: on only when every
// local rank can have a core besides its compute thread for Collie's progress thread (without
// one, the communication steals the compute thread's core and overlap costs more than it
// hides).
enum class Overlap { kAuto, kOn, kOff };

// constant: --lr throughout; cosine: from --lr down to 0 over all the steps of --epochs epochs,
// so the last epochs take small steps and the final accuracy settles.
enum class LrSchedule { kConstant, kCosine };

struct Options {
  int epochs = 10;
  int batch = 128;  // global: split across the ranks
  double lr = 0.1;
  LrSchedule schedule = LrSchedule::kCosine;
  double momentum = 0.0;
  double weightDecay = 0.0;
  std::vector<int> hidden{256, 128};  // input and output widths come from the data
  uint64_t seed = 1;
  std::string dataDir = kDefaultDataDir;
  size_t trainLimit = 0;  // use only the first N training samples (0: all)
  bool dropLast = false;
  double bucketMb = 0.25;
  Overlap overlap = Overlap::kAuto;
  std::string checkpointDir;
  bool resume = false;
  std::string metricsFile;
  std::string plotFile;
  int64_t maxSteps = -1;  // stop after this many steps in all (-1: run every epoch)
  int logEvery = 50;      // steps per metrics row
  bool progress = true;   // the progress bar, when stderr is a terminal
  bool help = false;
};

// Parses argv[1..argc); on error the message names the option.
Status parseOptions(int argc, char** argv, Options* out);

std::string usage();

}  // namespace train
}  // namespace collie
