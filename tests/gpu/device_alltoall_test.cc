// AllToAll, AllToAllv, Gather and Scatter take host memory only so far: device buffers are
// refused with collieInvalidArgument saying so, and the communicator stays usable. Skips
// without a GPU.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

TEST(DeviceAllToAll, DeviceBuffersAreRefusedSayingSo) {
  COLLIE_REQUIRE_GPU();
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  collieComm_t c = nullptr;
  ASSERT_EQ(collieCommInitRank(&c, 1, id, 0), collieSuccess) << collieGetLastError(nullptr);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 4096), cudaSuccess);
  char* d = static_cast<char*>(dev);
  const size_t counts[1] = {16}, displs[1] = {0};
  auto expectRefused = [&](collieResult_t r, const char* what) {
    EXPECT_EQ(r, collieInvalidArgument) << what;
    EXPECT_NE(std::string(collieGetLastError(c)).find("device"), std::string::npos)
        << what << ": " << collieGetLastError(c);
  };
  expectRefused(collieAlltoAll(d, d + 1024, 16, collieFloat32, c, nullptr), "alltoall");
  expectRefused(
      collieAlltoAllv(d, counts, displs, d + 1024, counts, displs, collieFloat32, c, nullptr),
      "alltoallv");
  expectRefused(collieGather(d, d + 1024, 16, collieFloat32, 0, c, nullptr), "gather");
  expectRefused(collieScatter(d, d + 1024, 16, collieFloat32, 0, c, nullptr), "scatter");
  std::vector<float> h(16, 1.0f), out(16);
  EXPECT_EQ(collieAlltoAll(h.data(), out.data(), 16, collieFloat32, c, nullptr), collieSuccess);
  EXPECT_EQ(out, h);
  cudaFree(dev);
  EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

}  // namespace
