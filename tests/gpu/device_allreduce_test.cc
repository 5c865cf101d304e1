// AllReduce on device buffers through the public API: ranks as threads of one process sharing
// one GPU, each enqueueing on its own stream. Results are checked against sums computed here
// on the host from the known inputs. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

// Rank r's input element i: small integers, exact in every float type.
float inputOf(int r, size_t i) { return static_cast<float>((r + 1) * ((i % 7) + 1)); }

void runRanks(int nranks, size_t count, bool inPlace, std::vector<std::string>* errors) {
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess) << collieGetLastError(nullptr);
  errors->assign(nranks, "");
  std::vector<std::thread> ts;
  for (int r = 0; r < nranks; ++r)
    ts.emplace_back([&, r] {
      std::string& err = (*errors)[r];
      cudaSetDevice(0);
      collieComm_t comm = nullptr;
      if (collieCommInitRank(&comm, nranks, id, r) != collieSuccess) {
        err = std::string("init: ") + collieGetLastError(nullptr);
        return;
      }
      std::vector<float> host(count), out(count);
      for (size_t i = 0; i < count; ++i) host[i] = inputOf(r, i);
      float *send = nullptr, *recv = nullptr;
      cudaStream_t stream = nullptr;
      cudaMalloc(reinterpret_cast<void**>(&send), count * sizeof(float));
      cudaMalloc(reinterpret_cast<void**>(&recv), count * sizeof(float));
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      cudaMemcpy(inPlace ? recv : send, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      collieResult_t res = collieAllReduce(inPlace ? recv : send, recv, count, collieFloat32,
                                           collieSum, comm, stream);
      if (res != collieSuccess) err = std::string("allreduce: ") + collieGetLastError(comm);
      if (cudaStreamSynchronize(stream) != cudaSuccess) err = "stream sync failed";
      collieResult_t async = collieSuccess;
      collieCommGetAsyncError(comm, &async);
      if (err.empty() && async != collieSuccess)
        err = std::string("async: ") + collieGetLastError(comm);
      cudaMemcpy(out.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; err.empty() && i < count; ++i) {
        float want = 0;
        for (int q = 0; q < nranks; ++q) want += inputOf(q, i);
        if (out[i] != want)
          err = "element " + std::to_string(i) + ": " + std::to_string(out[i]) +
                " != " + std::to_string(want);
      }
      collieCommDestroy(comm);
      cudaFree(send);
      cudaFree(recv);
      cudaStreamDestroy(stream);
    });
  for (auto& t : ts) t.join();
}

TEST(DeviceAllReduce, RanksSharingOneGpu) {
  COLLIE_REQUIRE_GPU();
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  setenv("COLLIE_CUDA_STAGING_BYTES", "1M", 1);  // several pipelined chunks
  for (int n : {1, 2, 3}) {
    for (bool inPlace : {false, true}) {
      std::vector<std::string> errors;
      runRanks(n, (3u << 20) / 4 + 13, inPlace, &errors);
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(errors[r], "") << n << " ranks, rank " << r << (inPlace ? ", in place" : "");
    }
  }
  unsetenv("COLLIE_CUDA_STAGING_BYTES");
}

TEST(DeviceAllReduce, MixedHostAndDeviceBuffersAreRejected) {
  COLLIE_REQUIRE_GPU();
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  collieComm_t comm = nullptr;
  ASSERT_EQ(collieCommInitRank(&comm, 1, id, 0), collieSuccess) << collieGetLastError(nullptr);
  float host[4] = {1, 2, 3, 4};
  float* dev = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(host));
  EXPECT_EQ(collieAllReduce(host, dev, 4, collieFloat32, collieSum, comm, nullptr),
            collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comm)).find("same place"), std::string::npos);
  cudaFree(dev);
  collieCommDestroy(comm);
}

}  // namespace
