// AllReduce over real processes: every dtype x op, counts {0, 1, 7, nranks-1, 1 MiB + 3}, in
// place and out of place, for 1..8 ranks, over each transport (tcp sockets, shared memory, UCX
// where the build has it, and a mixed topology of two pretend hosts: shm inside each, tcp
// across) and each algorithm; one launch per configuration, all cases inside it.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/allreduce_cases.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

void runMatrix(int rank, int n, Reporter& rep) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    return;
  }
  const std::vector<size_t> counts = {0, 1, 7, static_cast<size_t>(n - 1), (1u << 20) + 3};
  if (!runAllReduceCases(comm, rank, n, counts, CaseTypes::kAll, rep)) return;
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

struct MatrixCase {
  const char* name;
  int n;
  const char* transport;    // COLLIE_TRANSPORT, "" for the default choice
  int hosts;                // > 1: ranks spread over this many pretend hosts (COLLIE_HOSTID)
  const char* algo;         // COLLIE_ALGO, "" for the default choice
  const char* ucxTls = "";  // UCX_TLS, "" to leave it unset
};

// What ctest lists for a case: its name, not its bytes.
void PrintTo(const MatrixCase& c, std::ostream* os) { *os << c.name; }

class AllReduceMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(AllReduceMatrix, EveryDtypeOpCountPlacementMatchesReference) {
  const MatrixCase c = GetParam();
  WorldOptions opt;
  opt.env = {
      {"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", c.transport}, {"COLLIE_ALGO", c.algo}};
  if (*c.ucxTls) opt.env.push_back({"UCX_TLS", c.ucxTls});
  auto out = runWorld(c.n, opt, [c](int rank, Reporter& rep) {
    if (c.hosts > 1) setenv("COLLIE_HOSTID", ("host" + std::to_string(rank % c.hosts)).c_str(), 1);
    runMatrix(rank, c.n, rep);
  });
  expectAllPassed(out);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out[0].notes.size(), 1u);
  EXPECT_EQ(out[0].notes[0], "cases " + std::to_string(5 * kMatrixDtypes * collieNumOps * 2));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, AllReduceMatrix,
    ::testing::Values(
        MatrixCase{"tcp_n1", 1, "tcp", 1, ""}, MatrixCase{"tcp_n2", 2, "tcp", 1, ""},
        MatrixCase{"tcp_n3", 3, "tcp", 1, ""}, MatrixCase{"tcp_n4", 4, "tcp", 1, ""},
        MatrixCase{"tcp_n5", 5, "tcp", 1, ""}, MatrixCase{"tcp_n8", 8, "tcp", 1, ""},
        MatrixCase{"shm_n2", 2, "shm", 1, ""}, MatrixCase{"shm_n3", 3, "shm", 1, ""},
        MatrixCase{"shm_n4", 4, "shm", 1, ""}, MatrixCase{"shm_n5", 5, "shm", 1, ""},
        MatrixCase{"shm_n8", 8, "shm", 1, ""}, MatrixCase{"shm_ring_n3", 3, "shm", 1, "ring"},
        MatrixCase{"tcp_ring_n3", 3, "tcp", 1, "ring"},
        MatrixCase{"tcp_rd_n3", 3, "tcp", 1, "recursive_doubling"},
        MatrixCase{"tcp_rd_n4", 4, "tcp", 1, "recursive_doubling"},
        MatrixCase{"shm_rd_n7", 7, "shm", 1, "recursive_doubling"},
        MatrixCase{"mixed_2x2", 4, "", 2, ""}, MatrixCase{"mixed_5_on_2", 5, "", 2, ""},
        // Rank 2 alone on its host, without shm: its links differ from the others', yet every
        // rank must pick the same algorithm (the tuner's model and its trials).
        MatrixCase{"mixed_5_on_3", 5, "", 3, ""}, MatrixCase{"tcp_tree_n2", 2, "tcp", 1, "tree"},
        MatrixCase{"shm_tree_n3", 3, "shm", 1, "tree"},
        MatrixCase{"tcp_tree_n5", 5, "tcp", 1, "tree"},
        MatrixCase{"shm_tree_n8", 8, "shm", 1, "tree"},
        MatrixCase{"shm_rhd_n2", 2, "shm", 1, "rhd"}, MatrixCase{"tcp_rhd_n3", 3, "tcp", 1, "rhd"},
        MatrixCase{"shm_rhd_n5", 5, "shm", 1, "rhd"}, MatrixCase{"tcp_rhd_n8", 8, "tcp", 1, "rhd"},
        // tcp alone on two pretend hosts: 3 sockets to a peer on the same host, 1 to the others.
        MatrixCase{"tcp_2hosts_rhd_n5", 5, "tcp", 2, "rhd"},
        MatrixCase{"mixed_hier_4_on_2", 4, "", 2, "hierarchical"},
        MatrixCase{"mixed_hier_5_on_2", 5, "", 2, "hierarchical"},
        MatrixCase{"mixed_hier_6_on_3", 6, "", 3, "hierarchical"}),
    [](const ::testing::TestParamInfo<MatrixCase>& i) { return std::string(i.param.name); });

#ifdef COLLIE_HAVE_UCX
// UCX over its tcp transport, and over shared memory alone (posix: no dead-peer detection
// there, so its endpoints go without error handling mode PEER).
INSTANTIATE_TEST_SUITE_P(Ucx, AllReduceMatrix,
                         ::testing::Values(MatrixCase{"ucx_tcp_n2", 2, "ucx", 1, "", "tcp"},
                                           MatrixCase{"ucx_tcp_n3", 3, "ucx", 1, "", "tcp"},
                                           MatrixCase{"ucx_tcp_n4", 4, "ucx", 1, "", "tcp"},
                                           MatrixCase{"ucx_posix_n2", 2, "ucx", 1, "", "posix"},
                                           MatrixCase{"ucx_posix_n4", 4, "ucx", 1, "", "posix"},
                                           MatrixCase{"ucx_sm_n3", 3, "ucx", 1, "", "sm"},
                                           MatrixCase{"ucx_mixed_2x2", 4, "shm,ucx", 2, "", "tcp"}),
                         [](const ::testing::TestParamInfo<MatrixCase>& i) {
                           return std::string(i.param.name);
                         });
#endif

}  // namespace
}  // namespace testing
}  // namespace collie
