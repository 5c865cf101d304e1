// The proof of synchronous data parallelism: on a fixed data order, N ranks (2, 3, 4) with
// global batch B end with the parameters of one rank with batch B, to 1e-5 relative in f32,
// over each transport, for batches that split evenly and unevenly; overlap on and off give the
// same bits, and so do one rank under collie-run and collie-train alone.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"

#ifndef COLLIE_BIN_DIR
#error "COLLIE_BIN_DIR must name the folder holding collie-run and collie-train"
#endif

namespace collie {
namespace train {
namespace {

using testing::loadParams;
using testing::relativeDistance;
using testing::runProcess;
using testing::TempDir;

const std::string kRun = std::string(COLLIE_BIN_DIR) + "/collie-run";
const std::string kTrain = std::string(COLLIE_BIN_DIR) + "/collie-train";
constexpr int kSteps = 30;  // crosses an epoch boundary for both batches (240 samples)

class Equivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    testing::writeSyntheticData(dir_->path(), 240, 40);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Trains `ranks` ranks (0: collie-train alone) and returns the final parameters.
  static std::vector<float> train(int ranks, int batch, const std::string& transport,
                                  const std::vector<std::string>& extra = {}, int steps = kSteps) {
    const std::string ckpt = dir_->file("ckpt-" + std::to_string(counter_++));
    std::vector<std::string> argv;
    if (ranks > 0) argv = {kRun, "-n", std::to_string(ranks), "--timeout", "120", "--"};
    for (const std::string& a : {kTrain,
                                 std::string("--data"),
                                 dir_->path(),
                                 std::string("--hidden"),
                                 std::string("16,12"),
                                 std::string("--batch"),
                                 std::to_string(batch),
                                 std::string("--lr"),
                                 std::string("0.05"),
                                 std::string("--momentum"),
                                 std::string("0.9"),
                                 std::string("--weight-decay"),
                                 std::string("0.0001"),
                                 std::string("--bucket-mb"),
                                 std::string("0.001"),
                                 std::string("--epochs"),
                                 std::string("2"),
                                 std::string("--steps"),
                                 std::to_string(steps),
                                 std::string("--checkpoint"),
                                 ckpt,
                                 std::string("--no-progress")}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<std::string> env{"COLLIE_TIMEOUT_MS=30000"};
    if (!transport.empty()) env.push_back("COLLIE_TRANSPORT=" + transport);
    const testing::RunResult r = runProcess(argv, env, 150);
    EXPECT_EQ(r.code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
    std::vector<float> params;
    if (r.code == 0) loadParams(ckpt, &params);
    return params;
  }

  // The single-rank result for a batch, computed once.
  static const std::vector<float>& reference(int batch) {
    static std::map<int, std::vector<float>> cache;
    auto it = cache.find(batch);
    if (it == cache.end()) it = cache.emplace(batch, train(1, batch, "tcp")).first;
    return it->second;
  }

  static void expectEquivalent(int ranks, int batch, const std::string& transport) {
    const std::vector<float>& want = reference(batch);
    ASSERT_FALSE(want.empty());
    const std::vector<float> got = train(ranks, batch, transport);
    ASSERT_EQ(got.size(), want.size());
    const double d = relativeDistance(want, got);
    EXPECT_LE(d, 1e-5) << ranks << " ranks over " << transport << ", batch " << batch;
    char text[32];
    snprintf(text, sizeof(text), "%.3g", d);
    RecordProperty("relative_distance", text);
  }

  static TempDir* dir_;
  static int counter_;
};

TempDir* Equivalence::dir_ = nullptr;
int Equivalence::counter_ = 0;

TEST_F(Equivalence, TrainingMovesTheParameters) {
  // Guards the other tests against passing vacuously: 30 steps move the parameters far more
  // than the tolerance.
  const std::vector<float> init = train(0, 12, "", {}, 0);
  EXPECT_GT(relativeDistance(init, reference(12)), 1e-2);
}

#define COLLIE_EQUIVALENCE_TEST(transport, ranks, batch)         \
  TEST_F(Equivalence, transport##_##ranks##Ranks_Batch##batch) { \
    expectEquivalent(ranks, batch, #transport);                  \
  }
COLLIE_EQUIVALENCE_TEST(tcp, 2, 12)
COLLIE_EQUIVALENCE_TEST(tcp, 3, 12)
COLLIE_EQUIVALENCE_TEST(tcp, 4, 12)
COLLIE_EQUIVALENCE_TEST(tcp, 3, 10)  // uneven: 4 + 3 + 3
COLLIE_EQUIVALENCE_TEST(tcp, 4, 10)  // uneven: 3 + 3 + 2 + 2
COLLIE_EQUIVALENCE_TEST(shm, 2, 12)
COLLIE_EQUIVALENCE_TEST(shm, 3, 12)
COLLIE_EQUIVALENCE_TEST(shm, 4, 12)
COLLIE_EQUIVALENCE_TEST(shm, 3, 10)
COLLIE_EQUIVALENCE_TEST(shm, 4, 10)
#undef COLLIE_EQUIVALENCE_TEST

TEST_F(Equivalence, OverlapOnAndOffGiveTheSameBits) {
  const std::vector<float> on = train(2, 10, "", {"--overlap", "on"});
  const std::vector<float> off = train(2, 10, "", {"--overlap", "off"});
  ASSERT_FALSE(on.empty());
  ASSERT_EQ(on.size(), off.size());
  EXPECT_EQ(0, memcmp(on.data(), off.data(), on.size() * sizeof(float)));
}

TEST_F(Equivalence, AloneEqualsOneRankUnderTheLauncher) {
  const std::vector<float> alone = train(0, 12, "");
  ASSERT_EQ(alone.size(), reference(12).size());
  EXPECT_EQ(0, memcmp(alone.data(), reference(12).data(), alone.size() * sizeof(float)));
}

}  // namespace
}  // namespace train
}  // namespace collie
