// The two ways in (unique id, environment) and the C++ API: RAII, typed views, async Work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

TEST(Api, UniqueIdMadeByTheParentProcessInitsThreeRanks) {
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess) << collieGetLastError(nullptr);
  WorldOptions opt;
  opt.setRankEnv = false;
  auto out = runWorld(3, opt, [&id](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitRank(&c, 3, id, rank) != collieSuccess)
      return rep.fail(collieGetLastError(nullptr));
    int n = 0, r = -1;
    collieCommCount(c, &n);
    collieCommUserRank(c, &r);
    if (n != 3 || r != rank) rep.fail("count/rank wrong");
    std::vector<double> v(1000);
    fillInput(v.data(), collieFloat64, collieMin, rank, v.size(), 3);
    if (collieAllReduce(v.data(), v.data(), v.size(), collieFloat64, collieMin, c, nullptr) !=
        collieSuccess)
      return rep.fail(collieGetLastError(c));
    std::string bad;
    if (countWrong(v.data(), collieFloat64, collieMin, v.size(), 3, &bad)) rep.fail(bad);
    collieCommDestroy(c);
  });
  expectAllPassed(out);
}

TEST(Api, RanksOnHostsOfOneMachineCountItsCoresAsShared) {
  // Three hosts (COLLIE_HOSTID) on this one machine, as network namespaces or containers make:
  // each rank is alone on its host, but the three share the machine's cores, and where they
  // outnumber them every wait yields the core instead of spinning.
  const int n = 3;
  WorldOptions opt;
  opt.env = {{"COLLIE_DEBUG", "INFO"}, {"COLLIE_DEBUG_SUBSYS", "INIT"}};
  auto out = runWorld(n, opt, [](int rank, Reporter& rep) {
    setenv("COLLIE_HOSTID", ("host" + std::to_string(rank)).c_str(), 1);
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail(collieGetLastError(nullptr));
    std::vector<int32_t> v(1000);
    fillInput(v.data(), collieInt32, collieSum, rank, v.size(), n);
    if (collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr) !=
        collieSuccess)
      return rep.fail(collieGetLastError(c));
    std::string bad;
    if (countWrong(v.data(), collieInt32, collieSum, v.size(), n, &bad)) rep.fail(bad);
    collieCommDestroy(c);
  });
  expectAllPassed(out);
  const unsigned cores = std::thread::hardware_concurrency();
  const std::string says = "3 ranks on this machine, 1 on this host, " + std::to_string(cores) +
                           " cores: " + (cores < 3 ? "waits yield the core" : "waits spin");
  for (const auto& o : out) EXPECT_NE(o.output.find(says), std::string::npos) << o.output;
}

// The kernel's figure for a socket buffer asked of it: twice the ask, capped at the sysctl.
int kernelBuffer(int asked, const char* sysctl) {
  FILE* f = fopen(sysctl, "r");
  long long most = 0;
  if (f != nullptr) {
    if (fscanf(f, "%lld", &most) != 1) most = 0;
    fclose(f);
  }
  return static_cast<int>(2 * (most > 0 ? std::min<long long>(asked, most) : asked));
}

TEST(Api, SocketBuffersAreLargeInsideAHostAndSmallAcrossHostsUnlessSet) {
  // Ranks 0 and 1 on one host, 2 and 3 on another (COLLIE_HOSTID), all over tcp: 4 MiB
  // buffers to a peer on the same host, 512 KiB across; COLLIE_SOCKET_BUFFER sets them all.
  for (const char* set : {"", "1M"}) {
    SCOPED_TRACE(std::string("COLLIE_SOCKET_BUFFER=") + set);
    WorldOptions opt;
    opt.env = {{"COLLIE_TRANSPORT", "tcp"},
               {"COLLIE_DEBUG", "INFO"},
               {"COLLIE_DEBUG_SUBSYS", "NET"},
               {"COLLIE_TUNER_PROBE", "0"}};
    if (*set) opt.env.push_back({"COLLIE_SOCKET_BUFFER", set});
    auto out = runWorld(4, opt, [](int rank, Reporter& rep) {
      setenv("COLLIE_HOSTID", rank < 2 ? "hostA" : "hostB", 1);
      collieComm_t c = nullptr;
      if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail(collieGetLastError(nullptr));
      std::vector<int32_t> v((1 << 20) + 3);
      fillInput(v.data(), collieInt32, collieSum, rank, v.size(), 4);
      if (collieAllReduce(v.data(), v.data(), v.size(), collieInt32, collieSum, c, nullptr) !=
          collieSuccess)
        return rep.fail(collieGetLastError(c));
      std::string bad;
      if (countWrong(v.data(), collieInt32, collieSum, v.size(), 4, &bad)) rep.fail(bad);
      collieCommDestroy(c);
    });
    expectAllPassed(out);
    ASSERT_EQ(out.size(), 4u);
    for (const RankOutcome& o : out) {
      const int r = o.rank;
      for (int p = 0; p < 4; ++p) {
        if (p == r) continue;
        const bool sameHost = (r < 2) == (p < 2);
        const int asked = *set ? 1 << 20 : sameHost ? 4 << 20 : 512 << 10;
        const std::string says =
            "rank " + std::to_string(r) + " -> peer rank " + std::to_string(p) + ": " +
            (sameHost ? "3" : "1") + " tcp sockets, buffers of " + std::to_string(asked) +
            " bytes asked (kernel: SO_SNDBUF " +
            std::to_string(kernelBuffer(asked, "/proc/sys/net/core/wmem_max")) + ", SO_RCVBUF " +
            std::to_string(kernelBuffer(asked, "/proc/sys/net/core/rmem_max")) + ")";
        EXPECT_NE(o.output.find(says), std::string::npos) << says << "\n" << o.output;
      }
    }
  }
}

TEST(Api, TheSameCallAgainFollowsEveryChangeOfTheForcedAlgorithm) {
  // A repeated call reuses the tuner's last pick, but never across collieCommSetAlgorithm.
  WorldOptions opt;
  // The model's pick, without the tuner's trials (tuner_trials_test.cc has those).
  opt.env = {{"COLLIE_TRANSPORT", "shm"}, {"COLLIE_TUNER_TRIALS", "0"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    collieComm_t c = nullptr;
    if (collieCommInitFromEnv(&c) != collieSuccess) return rep.fail(collieGetLastError(nullptr));
    std::vector<float> v(1000);
    for (const char* algo : {"auto", "ring", "tree", "auto", "ring"}) {
      if (collieCommSetAlgorithm(c, algo) != collieSuccess) return rep.fail(collieGetLastError(c));
      for (int i = 0; i < 2; ++i) {
        fillInput(v.data(), collieFloat32, collieSum, rank, v.size(), 2);
        if (collieAllReduce(v.data(), v.data(), v.size(), collieFloat32, collieSum, c, nullptr) !=
            collieSuccess)
          return rep.fail(collieGetLastError(c));
        std::string bad;
        if (countWrong(v.data(), collieFloat32, collieSum, v.size(), 2, &bad)) rep.fail(bad);
        const char* ran = "";
        collieCommLastAlgorithm(c, &ran);
        const std::string want = std::string(algo) == "auto" ? "shm_direct" : algo;
        if (ran != want) rep.fail(std::string("forced ") + algo + ", ran " + ran);
      }
    }
    collieCommDestroy(c);
  });
  expectAllPassed(out);
}

TEST(Api, CppCommunicatorViewsAndAsyncWork) {
  auto out = runWorld(2, WorldOptions(), [](int rank, Reporter& rep) {
    Communicator comm;
    Result r = Communicator::initFromEnv(&comm);
    if (!r) return rep.fail(r.toString());
    if (comm.size() != 2 || comm.rank() != rank) rep.fail("size/rank");
    std::vector<int32_t> a(4097);
    fillInput(a.data(), collieInt32, collieSum, rank, a.size(), 2);
    r = comm.allreduce(View<int32_t>(a));
    if (!r) return rep.fail(r.toString());
    std::string bad;
    if (countWrong(a.data(), collieInt32, collieSum, a.size(), 2, &bad)) rep.fail("sync " + bad);
    // Several async ops in flight, then a blocking one: all complete, in call order.
    std::vector<std::vector<float>> bufs(4, std::vector<float>(100003));
    std::vector<Work> works;
    for (auto& b : bufs) {
      fillInput(b.data(), collieFloat32, collieMax, rank, b.size(), 2);
      works.push_back(comm.allreduceAsync(View<float>(b), collieMax));
    }
    std::vector<float> last(10);
    fillInput(last.data(), collieFloat32, collieAvg, rank, last.size(), 2);
    r = comm.allreduce(View<float>(last), collieAvg);
    if (!r) rep.fail("blocking after async: " + r.toString());
    for (auto& w : works) {
      Result wr = w.wait(std::chrono::milliseconds(30000));
      if (!wr) rep.fail("async: " + wr.toString());
      if (!w.test()) rep.fail("test() false after wait");
    }
    for (auto& b : bufs)
      if (countWrong(b.data(), collieFloat32, collieMax, b.size(), 2, &bad))
        rep.fail("async " + bad);
    if (countWrong(last.data(), collieFloat32, collieAvg, last.size(), 2, &bad)) rep.fail(bad);
    // Bad arguments come back through the Work, not as a crash.
    Work bad1 = comm.allreduceAsync(nullptr, nullptr, 5, collieFloat32, collieSum);
    if (bad1.wait().code() != collieInvalidArgument) rep.fail("async null buffer accepted");
    std::vector<float> x(3), y(4);
    if (comm.allreduce(View<const float>(x.data(), x.size()), View<float>(y)).code() !=
        collieInvalidArgument)
      rep.fail("views of different sizes accepted");
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
