// Checkpoints: everything a run needs to continue exactly where it stopped (parameters,
// momentum, position in the data, RNG state) plus the configuration that produced them, in one
// little-endian file ending in a CRC-32. Written atomically: a temporary file, fsync, rename,
// fsync of the folder, so a crash leaves the previous checkpoint or the new one, never half.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "training_demo/status.h"

namespace collie {
namespace train {

struct TrainState {
  // "key=value" lines of every setting that changes the arithmetic (model, optimiser, batch,
  // seed, data); a resumed run must match them.
  std::string config;
  uint32_t epoch = 0;        // the epoch to run next (or to continue)
  uint64_t stepInEpoch = 0;  // the next global batch within it
  uint64_t globalStep = 0;   // steps run since the start
  std::array<uint64_t, 4> rng{};
  std::vector<float> params;
  std::vector<float> velocity;  // empty without momentum
};

std::string checkpointPath(const std::string& dir);

// Writes dir/checkpoint.bin (creating dir).
Status saveCheckpoint(const std::string& dir, const TrainState& state);

// Reads and verifies a checkpoint file (magic, version, sizes, checksum).
Status loadCheckpoint(const std::string& path, TrainState* state);

// Compares two config strings key by key; the error lists every key that differs.
Status compareConfig(const std::string& saved, const std::string& current, const std::string& path);

}  // namespace train
}  // namespace collie
