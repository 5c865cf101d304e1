// A rank killed mid-training: the surviving ranks stop with an error that names the lost peer,
// within the deadline, over each transport. The ranks are started directly (not by collie-run,
// which would end the survivors itself) with a short COLLIE_TIMEOUT_MS. Ranks started with
// different settings refuse to train.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/training/train_test_util.h"

#ifndef COLLIE_BIN_DIR
#error "COLLIE_BIN_DIR must name the folder holding collie-train"
#endif

namespace collie {
namespace train {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Child;
using testing::readFile;
using testing::TempDir;

const std::string kTrain = std::string(COLLIE_BIN_DIR) + "/collie-train";

int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

size_t countLines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void killOneRank(const std::string& transport) {
  TempDir d;
  ASSERT_EQ(mkdir(d.file("data").c_str(), 0755), 0);
  testing::writeSyntheticData(d.file("data"), 240, 40);
  constexpr int kRanks = 3;
  const std::string port = std::to_string(freePort());
  std::vector<Child> ranks;
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<std::string> env{
        "RANK=" + std::to_string(r),       "WORLD_SIZE=" + std::to_string(kRanks),
        "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=" + std::to_string(kRanks),
        "MASTER_ADDR=127.0.0.1",           "MASTER_PORT=" + port,
        "COLLIE_TIMEOUT_MS=4000",          "COLLIE_TRANSPORT=" + transport};
    ranks.push_back(testing::spawn(
        {kTrain, "--data", d.file("data"), "--hidden", "16,12", "--batch", "12", "--epochs",
         "100000", "--metrics", d.file("m.csv"), "--log-every", "1", "--no-progress"},
        env, d.file("out" + std::to_string(r)), d.file("err" + std::to_string(r))));
  }
  // Mid-training: once rank 0 has logged a few steps.
  const Clock::time_point start = Clock::now();
  while (countLines(readFile(d.file("m.csv"))) < 6 &&
         Clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(countLines(readFile(d.file("m.csv"))), 6u) << readFile(d.file("err0"));
  ASSERT_EQ(kill(ranks[1].pid, SIGKILL), 0);
  const Clock::time_point killed = Clock::now();
  EXPECT_EQ(testing::waitChild(ranks[1], 10), 128 + SIGKILL);
  for (int r : {0, 2}) {
    const int code = testing::waitChild(ranks[r], 30);  // -1: hung and had to be killed
    const std::string err = readFile(ranks[r].errPath);
    EXPECT_EQ(code, 1) << "rank " << r << " stderr:\n" << err;
    EXPECT_NE(err.find("collie-train: rank " + std::to_string(r) + ": error:"), std::string::npos)
        << err;
    EXPECT_NE(err.find("rank 1"), std::string::npos) << "the lost peer is not named:\n" << err;
  }
  const double took = std::chrono::duration<double>(Clock::now() - killed).count();
  EXPECT_LT(took, 20.0) << "the survivors took " << took << " s to stop";
}

TEST(MismatchedRanks, DifferentSettingsAreRefusedByEveryRank) {
  TempDir d;
  ASSERT_EQ(mkdir(d.file("data").c_str(), 0755), 0);
  testing::writeSyntheticData(d.file("data"), 240, 40);
  const std::string port = std::to_string(freePort());
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> env{"RANK=" + std::to_string(r), "WORLD_SIZE=2",
                                       "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port,
                                       "COLLIE_TIMEOUT_MS=10000"};
    ranks.push_back(testing::spawn({kTrain, "--data", d.file("data"), "--hidden", "16", "--epochs",
                                    "1", "--lr", r == 0 ? "0.1" : "0.2"},
                                   env, d.file("out" + std::to_string(r)),
                                   d.file("err" + std::to_string(r))));
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(testing::waitChild(ranks[r], 30), 1);
    const std::string err = readFile(ranks[r].errPath);
    EXPECT_NE(err.find("different settings"), std::string::npos) << err;
  }
}

TEST(KilledRank, SurvivorsStopWithAClearErrorOverTcp) { killOneRank("tcp"); }
TEST(KilledRank, SurvivorsStopWithAClearErrorOverShm) { killOneRank("shm"); }

}  // namespace
}  // namespace train
}  // namespace collie
