// The cuda_ipc transport across real processes sharing GPU 0: each rank maps every other rank's
// staging buffer and IPC event, writes a pattern into its right neighbour's buffer and records
// its own event; the neighbour's stream waits on that event (opened from another process) and
// must then read the pattern. Addresses travel through files. Skips without a GPU.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "src/base/hex.h"
#include "tests/gpu/multiproc/gpu_world.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"

namespace collie {
namespace testing {
namespace {

constexpr size_t kBytes = 4 << 20;

std::vector<uint32_t> pattern(int rank) {
  std::vector<uint32_t> v(kBytes / 4);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<uint32_t>(rank + 1) * 2654435761u + static_cast<uint32_t>(i);
  return v;
}

void publish(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string tmp = dir + "/." + name;
  std::ofstream(tmp) << text;
  std::rename(tmp.c_str(), (dir + "/" + name).c_str());
}

// The file's text once it exists, or "" after 60 s.
std::string await(const std::string& dir, const std::string& name) {
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(dir + "/" + name);
    std::string s;
    if (in >> s) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

TEST(CudaIpcWorld, BuffersAndEventsOpenedAcrossProcesses) {
  COLLIE_REQUIRE_GPUS(1);
  char tmpl[] = "/tmp/collie-cuda-ipc-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const int n = 3;
  WorldOptions opt;
  opt.timeoutSec = 120;
  opt.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  auto out = runWorld(n, opt, [&](int rank, Reporter& rep) {
    auto self = CudaIpcTransport::create(0, kBytes);
    if (!self.isOk()) return rep.fail(self.status().toString());
    publish(dir, "addr" + std::to_string(rank), toHex(self.value()->address()));
    std::vector<std::unique_ptr<CudaIpcPeer>> peers(n);
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      std::string bytes;
      if (!fromHex(await(dir, "addr" + std::to_string(q)), &bytes))
        return rep.fail("no address from rank " + std::to_string(q));
      auto p = self.value()->connect(bytes);
      if (!p.isOk())
        return rep.fail("connect to " + std::to_string(q) + ": " + p.status().toString());
      peers[q] = std::move(p.value());
    }
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    cudaStream_t st = nullptr;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    void* src = nullptr;
    cudaMalloc(&src, kBytes);
    auto mine = pattern(rank);
    cudaMemcpy(src, mine.data(), kBytes, cudaMemcpyHostToDevice);
    Status s = peers[right]->copyTo(0, src, kBytes, st);
    if (s.isOk()) s = self.value()->recordReady(st);
    if (!s.isOk()) return rep.fail(s.toString());
    // Recorded: the left neighbour may now wait on this rank's event.
    publish(dir, "recorded" + std::to_string(rank), "1");
    if (await(dir, "recorded" + std::to_string(left)).empty())
      return rep.fail("rank " + std::to_string(left) + " never recorded");
    s = peers[left]->waitReady(st);
    if (!s.isOk()) return rep.fail(s.toString());
    std::vector<uint32_t> got(kBytes / 4);
    cudaMemcpyAsync(got.data(), self.value()->staging(), kBytes, cudaMemcpyDeviceToHost, st);
    if (cudaStreamSynchronize(st) != cudaSuccess) return rep.fail("stream failed");
    if (got != pattern(left))
      rep.fail("the buffer does not hold rank " + std::to_string(left) + "'s pattern");
    // Nobody unmaps before everyone has read.
    publish(dir, "read" + std::to_string(rank), "1");
    for (int q = 0; q < n; ++q)
      if (await(dir, "read" + std::to_string(q)).empty()) rep.fail("rank " + std::to_string(q));
    cudaFree(src);
    cudaStreamDestroy(st);
  });
  expectAllPassed(out);
  std::string rm = "rm -rf " + dir;
  EXPECT_EQ(system(rm.c_str()), 0);
}

}  // namespace
}  // namespace testing
}  // namespace collie
