// Checkpoints: a round trip keeps every bit, and a damaged, truncated, foreign or mismatched
// file is a clear error rather than a silently wrong resume.
#include "training_demo/checkpoint.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"

namespace collie {
namespace train {
namespace {

using testing::readFile;
using testing::TempDir;

TrainState sample() {
  TrainState s;
  s.config = "model=4-3-2\nlr=0.1\n";
  s.epoch = 3;
  s.stepInEpoch = 17;
  s.globalStep = 1234567890123ULL;
  s.rng = {1, 2, 3, 0xFFFFFFFFFFFFFFFFULL};
  s.params = {1.5f, -0.0f, 3e-39f, 1e30f};
  s.velocity = {0.25f, -7.0f, 0.0f, 1.0f};
  return s;
}

void writeRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void expectError(const Status& st, const std::string& part) {
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(Checkpoint, RoundTripKeepsEveryBit) {
  TempDir d;
  const std::string dir = d.file("nested/ckpt");  // folders are created
  ASSERT_TRUE(saveCheckpoint(dir, sample()).ok());
  EXPECT_NE(access(checkpointPath(dir).c_str(), F_OK), -1);
  EXPECT_EQ(access((checkpointPath(dir) + ".tmp").c_str(), F_OK), -1);  // renamed away
  TrainState s;
  const Status st = loadCheckpoint(checkpointPath(dir), &s);
  ASSERT_TRUE(st.ok()) << st.message();
  const TrainState want = sample();
  EXPECT_EQ(s.config, want.config);
  EXPECT_EQ(s.epoch, want.epoch);
  EXPECT_EQ(s.stepInEpoch, want.stepInEpoch);
  EXPECT_EQ(s.globalStep, want.globalStep);
  EXPECT_EQ(s.rng, want.rng);
  ASSERT_EQ(s.params.size(), want.params.size());
  EXPECT_EQ(0, memcmp(s.params.data(), want.params.data(), 4 * want.params.size()));
  EXPECT_EQ(s.velocity, want.velocity);
}

TEST(Checkpoint, DamagedFilesAreErrors) {
  TempDir d;
  ASSERT_TRUE(saveCheckpoint(d.path(), sample()).ok());
  const std::string path = checkpointPath(d.path()), good = readFile(path);
  TrainState s;
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  writeRaw(path, flipped);
  expectError(loadCheckpoint(path, &s), "checksum mismatch");
  writeRaw(path, good.substr(0, good.size() - 9));
  expectError(loadCheckpoint(path, &s), "corrupt");
  writeRaw(path, "PK\x03\x04 something else entirely");
  expectError(loadCheckpoint(path, &s), "not a collie-train checkpoint");
  expectError(loadCheckpoint(d.file("absent.bin"), &s), "cannot open checkpoint");
}

TEST(Checkpoint, ConfigMismatchListsTheKeys) {
  const std::string saved = "model=784-256-10\nlr=0.1\nseed=1\n";
  EXPECT_TRUE(compareConfig(saved, saved, "f").ok());
  const Status st = compareConfig(saved, "model=784-128-10\nlr=0.1\nbatch=64\n", "f");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model 784-256-10 -> 784-128-10"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("batch (absent) -> 64"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("seed 1 -> (absent)"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("lr"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace train
}  // namespace collie
