// The cuda_ipc transport on a GPU: two endpoints in one process, and a second process (this
// executable started again) that maps this one's staging buffer through its IPC handle and
// writes into it. Both share GPU 0. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "src/base/hex.h"
#include "tests/gpu/gpu_test_util.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"

namespace collie {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr const char* kChildEnv = "COLLIE_CUDA_IPC_TEST_PEER";

std::vector<uint32_t> pattern(uint32_t seed) {
  std::vector<uint32_t> v(kBytes / 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = seed * 2654435761u + static_cast<uint32_t>(i);
  return v;
}

// Writes pattern(seed) into the peer's staging buffer through a device buffer of this rank.
void writeToPeer(CudaIpcTransport& self, CudaIpcPeer& peer, uint32_t seed) {
  auto v = pattern(seed);
  void* src = nullptr;
  ASSERT_EQ(cudaMalloc(&src, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src, v.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  Status s = peer.copyTo(0, src, kBytes, nullptr);
  ASSERT_TRUE(s.isOk()) << s.toString();
  ASSERT_TRUE(self.recordReady(nullptr).isOk());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(src);
}

void expectStaging(const CudaIpcTransport& t, uint32_t seed) {
  std::vector<uint32_t> got(kBytes / 4);
  ASSERT_EQ(cudaMemcpy(got.data(), t.staging(), kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, pattern(seed));
}

TEST(CudaIpc, TwoEndpointsInOneProcess) {
  COLLIE_REQUIRE_GPU();
  if (getenv(kChildEnv)) GTEST_SKIP() << "peer process";
  auto a = CudaIpcTransport::create(0, kBytes);
  auto b = CudaIpcTransport::create(0, kBytes);
  ASSERT_TRUE(a.isOk() && b.isOk()) << a.status().toString() << b.status().toString();
  auto peerOfA = a.value()->connect(b.value()->address());
  ASSERT_TRUE(peerOfA.isOk()) << peerOfA.status().toString();
  writeToPeer(*a.value(), *peerOfA.value(), 7);
  expectStaging(*b.value(), 7);
  EXPECT_EQ(peerOfA.value()->copyTo(kBytes - 4, a.value()->staging(), 8, nullptr).code(),
            collieInvalidArgument);
}

// The second process: maps the first's buffer, writes into it, exits 0 when all went well.
TEST(CudaIpc, PeerProcessPart) {
  const char* addr = getenv(kChildEnv);
  if (addr == nullptr) GTEST_SKIP() << "runs only as the peer process of AcrossProcesses";
  std::string bytes;
  ASSERT_TRUE(fromHex(addr, &bytes));
  auto self = CudaIpcTransport::create(0, kBytes);
  ASSERT_TRUE(self.isOk()) << self.status().toString();
  auto peer = self.value()->connect(bytes);
  ASSERT_TRUE(peer.isOk()) << peer.status().toString();
  writeToPeer(*self.value(), *peer.value(), 11);
}

TEST(CudaIpc, AcrossProcessesSharingOneGpu) {
  COLLIE_REQUIRE_GPU();
  if (getenv(kChildEnv)) GTEST_SKIP() << "peer process";
  auto t = CudaIpcTransport::create(0, kBytes);
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  ASSERT_EQ(cudaMemset(t.value()->staging(), 0, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  pid_t pid = fork();
  if (pid == 0) {
    // A fresh process (exec): CUDA state is not inherited across fork.
    setenv(kChildEnv, toHex(t.value()->address()).c_str(), 1);
    execl("/proc/self/exe", "collie-gpu-tests", "--gtest_filter=CudaIpc.PeerProcessPart",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  // Bounded: the peer process gives up on its own (its CUDA calls return); 60 s is generous.
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(100000);
  if (waitpid(pid, &status, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the peer process did not finish in 60 s";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer process status " << status;
  expectStaging(*t.value(), 11);
}

}  // namespace
}  // namespace collie
