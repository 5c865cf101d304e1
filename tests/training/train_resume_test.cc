// Checkpoint and resume end to end: a run stopped mid-epoch and resumed twice ends with the
// bits of the uninterrupted run (parameters and momentum); resuming with other settings, from a
// damaged checkpoint, with no data or with --plot but no gnuplot is a clear error.
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"
#include "training_demo/checkpoint.h"

#ifndef COLLIE_BIN_DIR
#error "COLLIE_BIN_DIR must name the folder holding collie-run and collie-train"
#endif

namespace collie {
namespace train {
namespace {

using testing::readFile;
using testing::runProcess;
using testing::RunResult;
using testing::TempDir;

const std::string kRun = std::string(COLLIE_BIN_DIR) + "/collie-run";
const std::string kTrain = std::string(COLLIE_BIN_DIR) + "/collie-train";

std::vector<std::string> trainArgs(const TempDir& d, const std::string& ckpt,
                                   const std::vector<std::string>& extra) {
  std::vector<std::string> a{
      kTrain,  "--data",       d.file("data"), "--hidden",      "16,12",       "--batch",
      "12",    "--lr",         "0.05",         "--momentum",    "0.9",         "--bucket-mb",
      "0.001", "--checkpoint", ckpt,           "--no-progress", "--log-every", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

RunResult launch(int ranks, std::vector<std::string> args) {
  if (ranks > 0) {
    args.insert(args.begin(), {kRun, "-n", std::to_string(ranks), "--timeout", "120", "--"});
  }
  RunResult r = runProcess(args, {"COLLIE_TIMEOUT_MS=30000"}, 150);
  return r;
}

TrainState load(const std::string& dir) {
  TrainState s;
  const Status st = loadCheckpoint(checkpointPath(dir), &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// The epoch rows (those with an accuracy) of a metrics file.
std::vector<std::string> epochRows(const std::string& csv) {
  std::vector<std::string> rows;
  std::istringstream in(readFile(csv));
  for (std::string line; std::getline(in, line);) {
    if (line.find(",nan,") != std::string::npos || line.rfind("epoch", 0) == 0) continue;
    // epoch, step, loss, accuracy: the speed columns differ from run to run.
    size_t cut = 0;
    for (int field = 0; field < 4; ++field) cut = line.find(',', cut) + 1;
    rows.push_back(line.substr(0, cut));
  }
  return rows;
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkdir(d_.file("data").c_str(), 0755), 0);
    testing::writeSyntheticData(d_.file("data"), 240, 40);
  }
  TempDir d_;
};

TEST_F(Resume, ResumedRunEqualsTheUninterruptedOne) {
  const std::string whole = d_.file("whole"), parts = d_.file("parts");
  RunResult r = launch(2, trainArgs(d_, whole, {"--epochs", "3", "--metrics", whole + ".csv"}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  // The same command three times: stopped at step 7 (mid-epoch), resumed and stopped at step
  // 20 (an epoch's end), resumed to the end.
  const std::vector<std::vector<std::string>> legs = {
      {"--steps", "7"}, {"--steps", "20", "--resume"}, {"--resume"}};
  for (const auto& leg : legs) {
    std::vector<std::string> extra = leg;
    extra.insert(extra.end(), {"--epochs", "3", "--metrics", parts + ".csv"});
    r = launch(2, trainArgs(d_, parts, extra));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
  }
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  const TrainState a = load(whole), b = load(parts);
  EXPECT_EQ(a.epoch, 3u);
  EXPECT_EQ(b.epoch, 3u);
  EXPECT_EQ(a.globalStep, 60u);
  EXPECT_EQ(b.globalStep, 60u);
  ASSERT_EQ(a.params.size(), b.params.size());
  EXPECT_EQ(0, memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)));
  ASSERT_EQ(a.velocity.size(), b.velocity.size());
  ASSERT_FALSE(a.velocity.empty());
  EXPECT_EQ(0, memcmp(a.velocity.data(), b.velocity.data(), a.velocity.size() * sizeof(float)));
  // Epochs 2 and 3 ran whole in both: the same loss and accuracy rows.
  const std::vector<std::string> ra = epochRows(whole + ".csv"), rb = epochRows(parts + ".csv");
  ASSERT_EQ(ra.size(), 3u);
  ASSERT_EQ(rb.size(), 3u);
  EXPECT_EQ(ra[1], rb[1]);
  EXPECT_EQ(ra[2], rb[2]);
  EXPECT_EQ(readFile(parts + ".csv").rfind("epoch,step"), 0u);  // one header
}

TEST_F(Resume, OtherSettingsAreRefused) {
  const std::string ckpt = d_.file("c");
  RunResult r = launch(0, trainArgs(d_, ckpt, {"--epochs", "1"}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  r = launch(0,
             trainArgs(d_, ckpt, {"--epochs", "2", "--resume", "--hidden", "16,8", "--lr", "0.1"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("other settings"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model 64-16-12-10 -> 64-16-8-10"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lr 0.05"), std::string::npos) << r.err;
}

TEST_F(Resume, DamagedOrMissingCheckpointIsAnError) {
  const std::string ckpt = d_.file("c");
  RunResult r = launch(0, trainArgs(d_, ckpt, {"--epochs", "1", "--resume"}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open checkpoint"), std::string::npos) << r.err;
  r = launch(0, trainArgs(d_, ckpt, {"--epochs", "1"}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::string bytes = readFile(checkpointPath(ckpt));
  bytes[bytes.size() / 3] ^= 0x01;
  std::ofstream(checkpointPath(ckpt), std::ios::binary | std::ios::trunc) << bytes;
  // On two ranks: both refuse, and neither hangs waiting for the other.
  r = launch(2, trainArgs(d_, ckpt, {"--epochs", "2", "--resume"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
}

TEST_F(Resume, MissingDataIsAnError) {
  std::vector<std::string> args = trainArgs(d_, d_.file("c"), {"--data", d_.file("none")});
  const RunResult r = launch(0, args);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dataset-fashion-mnist"), std::string::npos) << r.err;
}

TEST_F(Resume, PlotWithoutGnuplotFailsBeforeTraining) {
  const RunResult r = runProcess(trainArgs(d_, d_.file("c"), {"--plot", d_.file("p.png")}),
                                 {"PATH=/nonexistent"}, 60);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("gnuplot-nox"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("epoch 1/"), std::string::npos) << "it trained first:\n" << r.out;
}

}  // namespace
}  // namespace train
}  // namespace collie
