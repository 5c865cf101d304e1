// Device-buffer collectives with ranks as real processes (ProcessWorld): 2 to 4 ranks sharing
// one GPU run every collective (the AllReduce over the device ring and tree, whose cuda_ipc
// buffers and events are opened across processes; the rest staged), a rank killed mid-op is
// named by the survivors, and with several GPUs one rank per GPU keeps the caller's current
// device. Skips without a GPU.
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/gpu/multiproc/device_cases.h"
#include "tests/gpu/multiproc/gpu_world.h"

namespace collie {
namespace testing {
namespace {

// Small staging and slots, so that a few hundred KiB already cycle through many chunks.
WorldOptions deviceWorld(const char* path) {
  WorldOptions opt;
  opt.timeoutSec = 240;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"},
             {"COLLIE_CUDA_PATH", path},
             {"COLLIE_CUDA_STAGING_BYTES", "262144"},
             {"COLLIE_CUDA_SLOT_BYTES", "65536"},
             {"COLLIE_CUDA_SLOTS", "2"},
             {"CUDA_VISIBLE_DEVICES", "0"}};
  return opt;
}

struct RankGpu {
  collieComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Device 0, a non-blocking stream, and the communicator; "" or what failed.
std::string setUp(RankGpu* g) {
  if (cudaSetDevice(0) != cudaSuccess) return "cudaSetDevice(0) failed";
  if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess)
    return "cudaStreamCreate failed";
  if (collieCommInitFromEnv(&g->comm) != collieSuccess)
    return std::string("init: ") + collieGetLastError(nullptr);
  return "";
}

void tearDown(RankGpu* g) {
  if (g->comm) collieCommDestroy(g->comm);
  if (g->stream) cudaStreamDestroy(g->stream);
}

void everyCollective(int n) {
  auto out = runWorld(n, deviceWorld("auto"), [n](int rank, Reporter& rep) {
    RankGpu g;
    std::string err = setUp(&g);
    if (!err.empty()) return rep.fail(err);
    for (DevColl coll : kEveryDevColl)
      for (size_t count : {size_t(1), size_t(1001), size_t(150000)})
        for (bool inPlace : {false, true}) {
          DevCase c{coll, count, inPlace, n - 1, collieSum};
          err = runDevCase(c, g.comm, rank, n, 0, g.stream);
          if (!err.empty()) rep.fail(err);
        }
    for (collieRedOp_t op : {collieMax, collieMin}) {
      err = runDevCase(DevCase{DevColl::kAllReduce, 70001, false, 0, op}, g.comm, rank, n, 0,
                       g.stream);
      if (!err.empty()) rep.fail(err);
    }
    tearDown(&g);
  });
  expectAllPassed(out);
}

TEST(DeviceWorld, EveryCollectiveTwoRanksOneGpu) {
  COLLIE_REQUIRE_GPUS(1);
  everyCollective(2);
}

TEST(DeviceWorld, EveryCollectiveThreeRanksOneGpu) {
  COLLIE_REQUIRE_GPUS(1);
  everyCollective(3);
}

TEST(DeviceWorld, EveryCollectiveFourRanksOneGpu) {
  COLLIE_REQUIRE_GPUS(1);
  everyCollective(4);
}

// COLLIE_CUDA_PATH=ipc: the device ring and tree or an error, so passing means every rank
// opened every peer's IPC buffer and event in another process.
void ringAndTree(int n) {
  auto out = runWorld(n, deviceWorld("ipc"), [n](int rank, Reporter& rep) {
    RankGpu g;
    std::string err = setUp(&g);
    if (!err.empty()) return rep.fail(err);
    for (const char* algo : {"ring", "tree"}) {
      if (collieCommSetAlgorithm(g.comm, algo) != collieSuccess)
        return rep.fail(std::string("set ") + algo + ": " + collieGetLastError(g.comm));
      for (size_t count : {size_t(3), size_t(4099), size_t(200003)})
        for (bool inPlace : {false, true}) {
          err = runDevCase(DevCase{DevColl::kAllReduce, count, inPlace, 0, collieSum}, g.comm, rank,
                           n, 0, g.stream);
          if (!err.empty()) rep.fail(std::string(algo) + ": " + err);
          const char* last = nullptr;
          collieCommLastAlgorithm(g.comm, &last);
          const std::string want = std::string("device_") + algo;
          if (last == nullptr || want != last)
            rep.fail(want + " expected, ran " + (last ? last : "(none)"));
        }
    }
    tearDown(&g);
  });
  expectAllPassed(out);
}

TEST(DeviceWorld, DeviceRingAndTreeTwoRanks) {
  COLLIE_REQUIRE_GPUS(1);
  ringAndTree(2);
}

TEST(DeviceWorld, DeviceRingAndTreeFourRanks) {
  COLLIE_REQUIRE_GPUS(1);
  ringAndTree(4);
}

// After a failed op the caller's buffers are its own again: nothing of the op may still write
// into recv (the private stream was drained before the call returned).
std::string recvStaysAsSet(float* recv, size_t count, cudaStream_t st) {
  if (cudaMemsetAsync(recv, 0x5a, count * 4, st) != cudaSuccess ||
      cudaStreamSynchronize(st) != cudaSuccess)
    return "the stream does not go on after the failure";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<uint32_t> got(count);
  if (cudaMemcpy(got.data(), recv, count * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return "reading recv back failed";
  for (size_t i = 0; i < count; ++i)
    if (got[i] != 0x5a5a5a5au)
      return "recv changed after the failed op returned (element " + std::to_string(i) + ")";
  return "";
}

// The victim SIGKILLs itself from a second thread while its main thread is inside large
// AllReduces; each survivor's call fails naming it, and its stream goes on.
void killMidOp(int n, int victim, const char* path) {
  WorldOptions opt = deviceWorld(path);
  opt.env[0].second = "4000";  // COLLIE_TIMEOUT_MS
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) {
    RankGpu g;
    std::string err = setUp(&g);
    if (!err.empty()) return rep.fail(err);
    const size_t count = 16 << 20;  // 64 MiB: each op takes a while
    float* buf = nullptr;
    if (cudaMalloc(reinterpret_cast<void**>(&buf), count * 4) != cudaSuccess)
      return rep.fail("cudaMalloc");
    cudaMemset(buf, 0, count * 4);
    // One op first, so that the set-up (the cuda_ipc vote) is behind every rank.
    if (collieAllReduce(buf, buf, count, collieFloat32, collieSum, g.comm, g.stream) !=
        collieSuccess)
      return rep.fail(std::string("first op: ") + collieGetLastError(g.comm));
    if (rank == victim)
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        kill(getpid(), SIGKILL);
      }).detach();
    for (int iter = 0; iter < 1000; ++iter) {
      if (collieAllReduce(buf, buf, count, collieFloat32, collieSum, g.comm, g.stream) ==
          collieSuccess)
        continue;
      const std::string msg = collieGetLastError(g.comm);
      if (msg.find("peer rank " + std::to_string(victim)) == std::string::npos)
        rep.fail("error does not name peer rank " + std::to_string(victim) + ": " + msg);
      rep.note(msg);
      err = recvStaysAsSet(buf, count, g.stream);
      if (!err.empty()) rep.fail(err);
      collieCommAbort(g.comm);
      return;
    }
    rep.fail("every op succeeded although a rank was killed");
  });
  for (const auto& o : out) {
    if (o.rank == victim) {
      EXPECT_TRUE(o.signaled) << "the victim was meant to die of SIGKILL:\n" << o.output;
      continue;
    }
    EXPECT_EQ(o.exitCode, 0) << "rank " << o.rank << ":\n" << o.output;
    for (const auto& f : o.failures) ADD_FAILURE() << "rank " << o.rank << ": " << f;
    EXPECT_EQ(o.notes.size(), 1u) << "rank " << o.rank << " did not report its error";
  }
}

TEST(DeviceWorld, RankKilledMidStagedAllReduceIsNamed) {
  COLLIE_REQUIRE_GPUS(1);
  killMidOp(3, 1, "staged");
}

TEST(DeviceWorld, RankKilledMidDeviceRingIsNamed) {
  COLLIE_REQUIRE_GPUS(1);
  killMidOp(3, 2, "ipc");
}

// One rank per GPU (peer access between them, or staging where there is none): each rank makes
// another GPU current before every call, and the calls must leave it current.
TEST(DeviceWorld, MultiGpuOneRankPerGpuKeepsTheCallersDevice) {
  COLLIE_REQUIRE_GPUS(2);
  std::string why;
  const int n = std::min(gpuCountInChild(&why), 4);
  WorldOptions opt = deviceWorld("auto");
  opt.env.pop_back();  // every GPU visible
  auto out = runWorld(n, opt, [n](int rank, Reporter& rep) {
    RankGpu g;
    const int mine = rank, other = (rank + 1) % n;
    if (cudaSetDevice(mine) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking) != cudaSuccess)
      return rep.fail("device " + std::to_string(mine) + " set-up failed");
    if (collieCommInitFromEnv(&g.comm) != collieSuccess)
      return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    for (DevColl coll : kEveryDevColl)
      for (size_t count : {size_t(5), size_t(150000)}) {
        cudaSetDevice(other);
        std::string err =
            runDevCase(DevCase{coll, count, false, 0, collieSum}, g.comm, rank, n, mine, g.stream);
        if (!err.empty()) rep.fail(err);
        int now = -1;
        cudaGetDevice(&now);
        if (now != other)
          rep.fail(std::string(devCollName(coll)) + ": the current device became " +
                   std::to_string(now) + ", the caller had set " + std::to_string(other));
      }
    tearDown(&g);
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
