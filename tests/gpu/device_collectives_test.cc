// Every collective on device buffers through the public API: ranks as threads of one process
// sharing one GPU, each on its own stream, out of place and in place, with a staging buffer
// small enough that every call is cut into several chunks. Results are checked against the
// collective computed here on the host. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce };

const char* nameOf(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return "allreduce";
    case Coll::kReduceScatter:
      return "reducescatter";
    case Coll::kAllGather:
      return "allgather";
    case Coll::kBroadcast:
      return "broadcast";
    default:
      return "reduce";
  }
}

// Rank r's input element i: small integers, exact in f32.
int32_t inputOf(int r, size_t i) { return (r + 1) * static_cast<int32_t>(i % 11 + 1); }

struct Case {
  Coll coll;
  int nranks;
  size_t count;  // the collective's count argument
  bool inPlace;
  int root;
};

size_t sendElems(const Case& c) {
  return c.coll == Coll::kReduceScatter ? c.count * c.nranks : c.count;
}
size_t recvElems(const Case& c) {
  return c.coll == Coll::kAllGather ? c.count * c.nranks : c.count;
}

std::vector<int32_t> expected(const Case& c, int r) {
  std::vector<int32_t> want;
  auto sum = [&](size_t i) {
    int32_t s = 0;
    for (int q = 0; q < c.nranks; ++q) s += inputOf(q, i);
    return s;
  };
  switch (c.coll) {
    case Coll::kReduceScatter:
      for (size_t i = 0; i < c.count; ++i) want.push_back(sum(r * c.count + i));
      break;
    case Coll::kAllGather:
      for (int q = 0; q < c.nranks; ++q)
        for (size_t i = 0; i < c.count; ++i) want.push_back(inputOf(q, i));
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < c.count; ++i) want.push_back(inputOf(c.root, i));
      break;
    default:
      for (size_t i = 0; i < c.count; ++i) want.push_back(sum(i));
  }
  return want;
}

collieResult_t call(const Case& c, const void* send, void* recv, collieComm_t comm,
                    cudaStream_t st) {
  switch (c.coll) {
    case Coll::kAllReduce:
      return collieAllReduce(send, recv, c.count, collieInt32, collieSum, comm, st);
    case Coll::kReduceScatter:
      return collieReduceScatter(send, recv, c.count, collieInt32, collieSum, comm, st);
    case Coll::kAllGather:
      return collieAllGather(send, recv, c.count, collieInt32, comm, st);
    case Coll::kBroadcast:
      return collieBroadcast(send, recv, c.count, collieInt32, c.root, comm, st);
    default:
      return collieReduce(send, recv, c.count, collieInt32, collieSum, c.root, comm, st);
  }
}

std::string runRank(const Case& c, const collieUniqueId& id, int r) {
  cudaSetDevice(0);
  collieComm_t comm = nullptr;
  if (collieCommInitRank(&comm, c.nranks, id, r) != collieSuccess)
    return std::string("init: ") + collieGetLastError(nullptr);
  const size_t sn = sendElems(c), rn = recvElems(c), window = std::max(sn, rn);
  std::vector<int32_t> in(sn);
  for (size_t i = 0; i < sn; ++i) in[i] = inputOf(r, i);
  int32_t *sendBuf = nullptr, *recvBuf = nullptr;
  cudaStream_t st = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&sendBuf), sn * 4);
  cudaMalloc(reinterpret_cast<void**>(&recvBuf), window * 4);
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaMemset(recvBuf, 0xff, window * 4);
  // The in-place layout of each collective: the input inside the output (allgather) or the
  // output inside the input (reducescatter), else the same buffer.
  const int32_t* send = sendBuf;
  int32_t* recv = recvBuf;
  if (c.inPlace) {
    size_t at = c.coll == Coll::kAllGather ? r * c.count : 0;
    cudaMemcpy(recvBuf + at, in.data(), sn * 4, cudaMemcpyHostToDevice);
    send = recvBuf + at;
    if (c.coll == Coll::kReduceScatter) recv = recvBuf + r * c.count;
  } else {
    cudaMemcpy(sendBuf, in.data(), sn * 4, cudaMemcpyHostToDevice);
  }
  std::string err;
  bool rootless = c.coll == Coll::kReduce && r != c.root;
  if (call(c, send, rootless ? nullptr : recv, comm, st) != collieSuccess)
    err = std::string(nameOf(c.coll)) + ": " + collieGetLastError(comm);
  if (cudaStreamSynchronize(st) != cudaSuccess) err = "stream sync failed";
  collieResult_t async = collieSuccess;
  collieCommGetAsyncError(comm, &async);
  if (err.empty() && async != collieSuccess)
    err = std::string("async: ") + collieGetLastError(comm);
  if (err.empty() && !rootless) {
    std::vector<int32_t> out(rn);
    cudaMemcpy(out.data(), recv, rn * 4, cudaMemcpyDeviceToHost);
    std::vector<int32_t> want = expected(c, r);
    for (size_t i = 0; err.empty() && i < rn; ++i)
      if (out[i] != want[i])
        err = "element " + std::to_string(i) + ": " + std::to_string(out[i]) +
              " != " + std::to_string(want[i]);
  }
  collieCommDestroy(comm);
  cudaFree(sendBuf);
  cudaFree(recvBuf);
  cudaStreamDestroy(st);
  return err;
}

TEST(DeviceCollectives, EveryCollectiveMatchesTheHostReference) {
  COLLIE_REQUIRE_GPU();
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  setenv("COLLIE_CUDA_STAGING_BYTES", "64K", 1);  // several pipelined chunks per call
  setenv("COLLIE_CUDA_PATH", "staged", 1);
  for (Coll coll :
       {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce})
    for (int n : {1, 2, 3})
      for (bool inPlace : {false, true}) {
        Case c{coll, n, 100003, inPlace, n - 1};
        collieUniqueId id;
        ASSERT_EQ(collieGetUniqueId(&id), collieSuccess) << collieGetLastError(nullptr);
        std::vector<std::string> errors(n);
        std::vector<std::thread> ts;
        for (int r = 0; r < n; ++r) ts.emplace_back([&, r] { errors[r] = runRank(c, id, r); });
        for (auto& t : ts) t.join();
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(errors[r], "")
              << nameOf(coll) << ", " << n << " ranks, rank " << r << (inPlace ? ", in place" : "");
      }
  unsetenv("COLLIE_CUDA_PATH");
  unsetenv("COLLIE_CUDA_STAGING_BYTES");
}

}  // namespace
