// COLLIE_CUDA_PATH parsing and the ranks' agreement on the device path, on the CPU.
#include "src/core/device/cuda_path.h"

#include <gtest/gtest.h>

namespace collie {
namespace {

TEST(CudaPath, ParsesTheThreeValuesAndRejectsOthers) {
  EXPECT_EQ(parseCudaPath("").value(), CudaPath::kAuto);
  EXPECT_EQ(parseCudaPath("auto").value(), CudaPath::kAuto);
  EXPECT_EQ(parseCudaPath("ipc").value(), CudaPath::kIpc);
  EXPECT_EQ(parseCudaPath("staged").value(), CudaPath::kStaged);
  auto bad = parseCudaPath("nvlink");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), collieInvalidArgument);
  EXPECT_NE(bad.status().message().find("auto, ipc or staged"), std::string::npos);
  EXPECT_STREQ(cudaPathName(CudaPath::kIpc), "ipc");
}

TEST(CudaPath, TriesTheRingOnlyOnOneHostWithPeers) {
  EXPECT_TRUE(tryDeviceRing(CudaPath::kAuto, 2, true).value());
  EXPECT_FALSE(tryDeviceRing(CudaPath::kAuto, 1, true).value());
  EXPECT_FALSE(tryDeviceRing(CudaPath::kAuto, 4, false).value());
  EXPECT_FALSE(tryDeviceRing(CudaPath::kStaged, 4, true).value());
  EXPECT_TRUE(tryDeviceRing(CudaPath::kIpc, 3, true).value());
  auto many = tryDeviceRing(CudaPath::kIpc, 4, false);
  ASSERT_FALSE(many.isOk());
  EXPECT_NE(many.status().message().find("more than one host"), std::string::npos);
}

TEST(CudaPath, EveryRankDecidesAlikeFromTheVotes) {
  std::vector<std::string> all = {"ok", "ok", "ok"};
  std::vector<std::string> one = {"ok", cudaPathVote(systemError("cudaIpcOpenMemHandle: denied")),
                                  "ok"};
  EXPECT_TRUE(decideCudaPath(CudaPath::kAuto, all, "connect").value());
  EXPECT_FALSE(decideCudaPath(CudaPath::kAuto, one, "connect").value());
  auto forced = decideCudaPath(CudaPath::kIpc, one, "connect");
  ASSERT_FALSE(forced.isOk());
  EXPECT_NE(forced.status().message().find("rank 1"), std::string::npos);
  EXPECT_NE(forced.status().message().find("denied"), std::string::npos);
  auto garbled = decideCudaPath(CudaPath::kAuto, {"ok", "yes"}, "setup");
  ASSERT_FALSE(garbled.isOk());
  EXPECT_EQ(garbled.status().code(), collieInvalidArgument);
}

TEST(CudaPath, TheTreeTakesSmallMessagesOnThreeRanksOrMore) {
  EXPECT_EQ(pickDeviceAlgo(2, 8, 20, 100), DeviceAlgo::kRing);
  EXPECT_EQ(pickDeviceAlgo(4, 8, 20, 100), DeviceAlgo::kTree);
  // 4 ranks, height 2: one hop saved each way; limit 20 us * 100 GB/s * 4 = 8 MB.
  EXPECT_EQ(pickDeviceAlgo(4, 7'000'000, 20, 100), DeviceAlgo::kTree);
  EXPECT_EQ(pickDeviceAlgo(4, 9'000'000, 20, 100), DeviceAlgo::kRing);
  EXPECT_EQ(pickDeviceAlgo(8, 60'000'000, 20, 100), DeviceAlgo::kTree);
  EXPECT_EQ(pickDeviceAlgo(8, 1'000'000'000, 20, 100), DeviceAlgo::kRing);
}

}  // namespace
}  // namespace collie
