// The single-copy AllReduce, shm_single_copy (ranks read and write each other's buffers through
// cross-memory attach): every dtype x op x placement x count against the reference with
// COLLIE_SHM_CMA=on from 1 byte, so that the tuner takes it at every count, for 2..5 ranks; and
// the vote at init: where one rank may not reach its peers' memory (a seccomp filter, as
// container runtimes install), no rank takes it, and the results are still right.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/allreduce_cases.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

// process_vm_readv and process_vm_writev fail with EPERM in this process from now on.
bool denyCrossMemoryAttach() {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(f) / sizeof(f[0])), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// want: the algorithm the last AllReduce ran (nullptr: either).
void runCases(int rank, int n, Reporter& rep, const std::vector<size_t>& counts, bool allTypes,
              const char* want, CasePlacement placement = CasePlacement::kSame) {
  // The INFO line tells what the vote at init agreed.
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    return;
  }
  if (!runAllReduceCases(comm, rank, n, counts,
                         allTypes ? CaseTypes::kAll : CaseTypes::kFloat32SumOnly, rep, placement))
    return;
  const char* ran = "";
  collieCommLastAlgorithm(comm, &ran);
  if (want != nullptr && std::string(ran) != want)
    rep.fail(std::string("ran ") + ran + ", not " + want);
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

WorldOptions singleCopyEverywhere() {
  WorldOptions opt;
  opt.timeoutSec = 240;
  // From 1 byte, also with more ranks than cores; the model's pick, without the tuner's trials.
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", "shm"},  {"COLLIE_SHM_CMA", "on"},
             {"COLLIE_SHM_CMA_BYTES", "1"},  {"COLLIE_TUNER_TRIALS", "0"}, {"COLLIE_DEBUG", "INFO"},
             {"COLLIE_DEBUG_SUBSYS", "COLL"}};
  return opt;
}

constexpr char kSingle[] = "shm_single_copy";

bool said(const RankOutcome& o, const char* text) {
  return o.output.find(text) != std::string::npos;
}

class ShmSingleCopy : public ::testing::TestWithParam<int> {};

TEST_P(ShmSingleCopy, EveryDtypeOpCountPlacementMatchesReference) {
  const int n = GetParam();
  // n * 65536 + 1: with 4-byte types block 0 is one element longer than a whole number of
  // 256 KiB chunks, the others are whole.
  const std::vector<size_t> counts = {
      1, 7, static_cast<size_t>(n - 1), 1000, (1u << 18) + 3, static_cast<size_t>(n) * 65536 + 1};
  auto out = runWorld(n, singleCopyEverywhere(), [&](int rank, Reporter& rep) {
    runCases(rank, n, rep, counts, true, kSingle);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  for (const RankOutcome& o : out)
    EXPECT_TRUE(said(o, "single-copy AllReduce from 1 bytes on")) << o.output;
  ASSERT_EQ(out[0].notes.size(), 1u);
  EXPECT_EQ(out[0].notes[0],
            "cases " + std::to_string(counts.size() * kMatrixDtypes * collieNumOps * 2));
}

// Ranks in place beside ranks out of place: each rank reads the peers' inputs and writes their
// outputs wherever each peer put them.
TEST_P(ShmSingleCopy, RanksInPlaceBesideRanksOutOfPlace) {
  const int n = GetParam();
  const std::vector<size_t> counts = {7, 1000, static_cast<size_t>(n) * 65536 + 1};
  auto out = runWorld(n, singleCopyEverywhere(), [&](int rank, Reporter& rep) {
    runCases(rank, n, rep, counts, true, kSingle, CasePlacement::kMixed);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSingleCopy, ::testing::Values(2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

TEST(ShmSingleCopyVote, OneRankThatCannotReachItsPeersMakesEveryRankStage) {
  const int n = 3;
  const std::vector<size_t> counts = {1000, (1u << 20) + 3};
  auto out = runWorld(n, singleCopyEverywhere(), [&](int rank, Reporter& rep) {
    if (rank == 1 && !denyCrossMemoryAttach()) {
      rep.fail(std::string("seccomp: ") + std::strerror(errno));
      return;
    }
    runCases(rank, n, rep, counts, false, "shm_direct");
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  for (const RankOutcome& o : out)
    EXPECT_TRUE(said(o, "single-copy AllReduce from 1 bytes off")) << o.output;
}

// auto: every rank times the kernel's cross-process copy against memcpy and votes; all agree,
// whatever this machine makes it, and the results are right.
TEST(ShmSingleCopyVote, AutoTimesTheKernelCopyAndEveryRankTakesTheSamePath) {
  const int n = 2;
  if (sysconf(_SC_NPROCESSORS_ONLN) < n)
    GTEST_SKIP() << "auto never takes single copy with more ranks than cores";
  WorldOptions opt = singleCopyEverywhere();
  for (auto& kv : opt.env)
    if (kv.first == "COLLIE_SHM_CMA") kv.second = "auto";
  const std::vector<size_t> counts = {1000, (1u << 18) + 3};
  auto out = runWorld(n, opt, [&](int rank, Reporter& rep) {
    runCases(rank, n, rep, counts, false, nullptr, CasePlacement::kMixed);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  const bool on = said(out[0], "single-copy AllReduce from 1 bytes on");
  for (int r = 0; r < n; ++r) {
    const RankOutcome& o = out[r];
    EXPECT_TRUE(said(o, on ? "single-copy AllReduce from 1 bytes on"
                           : "single-copy AllReduce from 1 bytes off (a rank's cross-process copy"))
        << o.output;
    const std::string figures = "(rank " + std::to_string(r) + ": cross-process copy ";
    EXPECT_TRUE(said(o, figures.c_str())) << o.output;
  }
}

// Forced by name (COLLIE_ALGO), it runs calls under COLLIE_SHM_CMA_BYTES too, which the tuner
// leaves to shm_direct.
TEST(ShmSingleCopyVote, ForcedByNameItRunsSmallCallsToo) {
  WorldOptions opt = singleCopyEverywhere();
  for (auto& kv : opt.env)
    if (kv.first == "COLLIE_SHM_CMA_BYTES") kv.second = "64K";
  opt.env.push_back({"COLLIE_ALGO", kSingle});
  const std::vector<size_t> counts = {7, 1000};
  auto out = runWorld(2, opt, [&](int rank, Reporter& rep) {
    runCases(rank, 2, rep, counts, false, kSingle, CasePlacement::kMixed);
  });
  expectAllPassed(out);
}

// Refused at init, before any call.
TEST(ShmSingleCopyVote, AnUnknownModeIsAnInvalidArgumentAtInit) {
  WorldOptions opt = singleCopyEverywhere();
  opt.env.push_back({"COLLIE_SHM_CMA", "sometimes"});
  auto out = runWorld(2, opt, [](int, Reporter& rep) {
    collieComm_t comm = nullptr;
    const collieResult_t res = collieCommInitFromEnv(&comm);
    const std::string msg = collieGetLastError(nullptr);
    if (res != collieInvalidArgument) rep.fail("got " + std::string(collieGetErrorString(res)));
    if (msg.find("COLLIE_SHM_CMA=sometimes") == std::string::npos) rep.fail("message: " + msg);
  });
  expectAllPassed(out);
}

}  // namespace
}  // namespace testing
}  // namespace collie
