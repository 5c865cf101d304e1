// The staged AllReduce of shm_direct, pipelined: each rank stages its next chunk before it
// waits for the peers' reduced slices of the current one, so a slot is refilled while peers may
// still be reading the one before it. With small chunks a call runs hundreds of chunks through
// the three slots; every dtype x op x placement x count must match the reference, for 2..5
// ranks, also with more ranks than cores (where ranks run in turns and drift far apart).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/allreduce_cases.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

WorldOptions smallChunksStaged() {
  WorldOptions opt;
  opt.timeoutSec = 240;
  // No one-shot path and no single copy: every count is staged, in 4 KiB chunks.
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"},    {"COLLIE_TRANSPORT", "shm"},
             {"COLLIE_ALGO", "shm_direct"},     {"COLLIE_SHM_CMA", "off"},
             {"COLLIE_SHM_ONESHOT_BYTES", "0"}, {"COLLIE_SHM_CHUNK_BYTES", "4K"}};
  return opt;
}

void runCases(int rank, int n, Reporter& rep, const std::vector<size_t>& counts,
              CasePlacement placement) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    return;
  }
  if (!runAllReduceCases(comm, rank, n, counts, CaseTypes::kAll, rep, placement)) return;
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

class ShmStagedPipeline : public ::testing::TestWithParam<int> {};

TEST_P(ShmStagedPipeline, ManySmallChunksMatchTheReference) {
  const int n = GetParam();
  // 1 and n - 1: one chunk with empty slices; 1000: one partial chunk; 4097 and 65536 + 3:
  // two and dozens of chunks, the last one short.
  const std::vector<size_t> counts = {1, static_cast<size_t>(n - 1), 1000, 4097, 65536 + 3};
  auto out = runWorld(n, smallChunksStaged(), [&](int rank, Reporter& rep) {
    runCases(rank, n, rep, counts, CasePlacement::kSame);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  ASSERT_EQ(out[0].notes.size(), 1u);
  EXPECT_EQ(out[0].notes[0],
            "cases " + std::to_string(counts.size() * kMatrixDtypes * collieNumOps * 2));
}

TEST_P(ShmStagedPipeline, RanksInPlaceBesideRanksOutOfPlace) {
  const int n = GetParam();
  const std::vector<size_t> counts = {1000, 65536 + 3};
  auto out = runWorld(n, smallChunksStaged(), [&](int rank, Reporter& rep) {
    runCases(rank, n, rep, counts, CasePlacement::kMixed);
  });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmStagedPipeline, ::testing::Values(2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace collie
