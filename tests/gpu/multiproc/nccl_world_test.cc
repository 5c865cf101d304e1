// COLLIE_BACKEND=nccl with ranks as real processes: every collective on one rank, on every
// rank count NCCL accepts (one rank per GPU, up to 8), and two ranks on one GPU refused at init
// with the fix. Skips without a GPU, or without NCCL in the build.
#include <algorithm>

#include "tests/gpu/multiproc/device_cases.h"
#include "tests/gpu/multiproc/gpu_world.h"

namespace collie {
namespace testing {
namespace {

#ifndef COLLIE_HAVE_NCCL
#define COLLIE_REQUIRE_NCCL() GTEST_SKIP() << "this build has no NCCL"
#else
#define COLLIE_REQUIRE_NCCL() \
  do {                        \
  } while (0)
#endif

WorldOptions ncclWorld() {
  WorldOptions opt;
  opt.timeoutSec = 240;
  opt.env = {{"COLLIE_BACKEND", "nccl"},
             {"COLLIE_TIMEOUT_MS", "60000"},
             {"NCCL_SOCKET_IFNAME", "lo"},
             {"COLLIE_SOCKET_IFNAME", "lo"}};
  return opt;
}

// Rank r on GPU r: every collective, in and out of place, checked.
void everyCollective(int n) {
  auto out = runWorld(n, ncclWorld(), [n](int rank, Reporter& rep) {
    cudaStream_t st = nullptr;
    if (cudaSetDevice(rank) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
      return rep.fail("device " + std::to_string(rank) + " set-up failed");
    collieComm_t comm = nullptr;
    if (collieCommInitFromEnv(&comm) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    for (DevColl coll : kEveryDevColl)
      for (size_t count : {size_t(1), size_t(100003)})
        for (bool inPlace : {false, true}) {
          std::string err =
              runDevCase(DevCase{coll, count, inPlace, n - 1, collieSum}, comm, rank, n, rank, st);
          if (!err.empty()) rep.fail(err);
        }
    collieCommDestroy(comm);
    cudaStreamDestroy(st);
  });
  expectAllPassed(out);
}

TEST(NcclWorld, EveryCollectiveOnOneRank) {
  COLLIE_REQUIRE_GPUS(1);
  COLLIE_REQUIRE_NCCL();
  everyCollective(1);
}

TEST(NcclWorld, MultiGpuEveryRankCountNcclAccepts) {
  COLLIE_REQUIRE_GPUS(2);
  COLLIE_REQUIRE_NCCL();
  std::string why;
  const int gpus = std::min(gpuCountInChild(&why), 8);
  for (int n = 2; n <= gpus; ++n) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    everyCollective(n);
  }
}

TEST(NcclWorld, TwoRanksOnOneGpuAreRefusedAtInit) {
  COLLIE_REQUIRE_GPUS(1);
  COLLIE_REQUIRE_NCCL();
  WorldOptions opt = ncclWorld();
  opt.env.push_back({"CUDA_VISIBLE_DEVICES", "0"});
  auto out = runWorld(2, opt, [](int, Reporter& rep) {
    cudaSetDevice(0);
    collieComm_t comm = nullptr;
    if (collieCommInitFromEnv(&comm) == collieSuccess) {
      collieCommDestroy(comm);
      return rep.fail("init succeeded with two ranks on one GPU");
    }
    const std::string msg = collieGetLastError(nullptr);
    if (msg.find("use the same GPU") == std::string::npos)
      rep.fail("the refusal does not say why: " + msg);
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
