// ReduceScatter, AllGather, Broadcast, Reduce and Barrier over real processes: dtypes {f32, bf16,
// i32, f64} x ops {sum, max, avg} x counts {0, 1, nranks-1, 1 MiB + 3} x in place and out of
// place x a moving root, checked against the independent reference; then the bad arguments
// each of them must refuse. One launch per configuration (transport, nranks, algorithm), all
// cases inside it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

const collieDataType_t kTypes[] = {collieFloat32, collieBfloat16, collieInt32, collieFloat64};
const collieRedOp_t kOps[] = {collieSum, collieMax, collieAvg};
const size_t kBig = (1u << 20) + 3;

struct Case {
  collieComm_t comm;
  int rank, n;
  Reporter* rep;
  int cases = 0;
  const char* wantAlgo;  // the algorithm every data-moving call must have run ("" = any)

  // false (and the communicator aborted) when the call itself failed.
  bool check(collieResult_t res, const std::string& what) {
    ++cases;
    if (res != collieSuccess) {
      rep->fail(what + ": " + collieGetErrorString(res) + ": " + collieGetLastError(comm));
      return false;
    }
    const char* ran = "";
    collieCommLastAlgorithm(comm, &ran);
    if (*wantAlgo && strcmp(ran, wantAlgo) != 0)
      rep->fail(what + ": ran " + ran + ", not the forced " + wantAlgo);
    return true;
  }
  void expectNone(size_t wrong, const std::string& what, const std::string& bad) {
    if (wrong) rep->fail(what + ": " + std::to_string(wrong) + " wrong, first " + bad);
  }
};

std::string describe(const char* coll, int n, size_t count, collieDataType_t dt, const char* op,
                     bool inPlace, int root) {
  return std::string(coll) + " n=" + std::to_string(n) + " count=" + std::to_string(count) + " " +
         dtypeName(dt) + " " + op + (inPlace ? " in-place" : " out-of-place") +
         (root >= 0 ? " root=" + std::to_string(root) : "");
}

bool reduceScatterCases(Case& c, std::vector<char>& in, std::vector<char>& out, size_t count) {
  for (collieDataType_t dt : kTypes)
    for (collieRedOp_t op : kOps)
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        const size_t esz = dtypeSize(dt), all = count * static_cast<size_t>(c.n);
        char* send = in.data() + (count % 3);
        char* recv =
            inPlace ? send + static_cast<size_t>(c.rank) * count * esz : out.data() + (count % 5);
        fillInputAt(send, dt, op, c.rank, all, c.n, 0);
        if (!inPlace) memset(recv, 0x5a, count * esz);
        std::string what = describe("reducescatter", c.n, count, dt, redOpName(op), inPlace, -1);
        if (!c.check(collieReduceScatter(send, recv, count, dt, op, c.comm, nullptr), what))
          return false;
        std::string bad;
        c.expectNone(
            countWrongAt(recv, dt, op, count, c.n, static_cast<size_t>(c.rank) * count, &bad), what,
            bad);
      }
  return true;
}

bool allGatherCases(Case& c, std::vector<char>& in, std::vector<char>& out, size_t count) {
  for (collieDataType_t dt : kTypes)
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const size_t esz = dtypeSize(dt);
      char* recv = out.data() + (count % 5);
      char* send =
          inPlace ? recv + static_cast<size_t>(c.rank) * count * esz : in.data() + (count % 3);
      if (!inPlace) memset(recv, 0x5a, count * esz * static_cast<size_t>(c.n));
      fillInputAt(send, dt, collieSum, c.rank, count, c.n, static_cast<size_t>(c.rank) * count);
      std::string what = describe("allgather", c.n, count, dt, "", inPlace, -1);
      if (!c.check(collieAllGather(send, recv, count, dt, c.comm, nullptr), what)) return false;
      for (int b = 0; b < c.n; ++b) {
        std::string bad;
        const size_t first = static_cast<size_t>(b) * count;
        c.expectNone(countNotInputOf(recv + first * esz, dt, collieSum, b, count, c.n, first, &bad),
                     what + " block " + std::to_string(b), bad);
      }
    }
  return true;
}

bool broadcastCases(Case& c, std::vector<char>& in, std::vector<char>& out, size_t count) {
  for (collieDataType_t dt : kTypes)
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const int root = (c.cases + static_cast<int>(count)) % c.n;
      const size_t esz = dtypeSize(dt);
      char* recv = out.data() + (count % 5);
      char* send = inPlace ? recv : in.data() + (count % 3);
      if (!inPlace) memset(recv, 0x5a, count * esz);
      if (c.rank == root)
        fillInput(send, dt, collieSum, root, count, c.n);
      else if (inPlace)
        memset(recv, 0x5a, count * esz);
      // Off the root the send buffer is not read: pass NULL on odd ranks to prove it.
      const void* s = (c.rank != root && c.rank % 2 == 1) ? nullptr : send;
      std::string what = describe("broadcast", c.n, count, dt, "", inPlace, root);
      if (!c.check(collieBroadcast(s, recv, count, dt, root, c.comm, nullptr), what)) return false;
      std::string bad;
      c.expectNone(countNotInputOf(recv, dt, collieSum, root, count, c.n, 0, &bad), what, bad);
    }
  return true;
}

bool reduceCases(Case& c, std::vector<char>& in, std::vector<char>& out, size_t count) {
  for (collieDataType_t dt : kTypes)
    for (collieRedOp_t op : kOps)
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        const int root = (c.cases + static_cast<int>(count)) % c.n;
        const size_t esz = dtypeSize(dt);
        char* send = in.data() + (count % 3);
        char* recv = inPlace ? send : out.data() + (count % 5);
        fillInput(send, dt, op, c.rank, count, c.n);
        if (!inPlace) memset(recv, 0x5a, count * esz);
        // Off the root the receive buffer is not written: NULL on odd ranks.
        void* r = (c.rank != root && c.rank % 2 == 1) ? nullptr : recv;
        std::string what = describe("reduce", c.n, count, dt, redOpName(op), inPlace, root);
        if (!c.check(collieReduce(send, r, count, dt, op, root, c.comm, nullptr), what))
          return false;
        std::string bad;
        if (c.rank == root) c.expectNone(countWrong(recv, dt, op, count, c.n, &bad), what, bad);
      }
  return true;
}

// Each rank leaves a mark, the last one late; after the barrier every mark must be there.
bool barrierCases(Case& c, const std::string& dir) {
  for (int round = 0; round < 3; ++round) {
    const int late = round % c.n;
    if (c.rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::ofstream(dir + "/r" + std::to_string(round) + "_" + std::to_string(c.rank)) << "x";
    std::string what = "barrier round " + std::to_string(round);
    ++c.cases;
    if (collieBarrier(c.comm) != collieSuccess) {
      c.rep->fail(what + ": " + collieGetLastError(c.comm));
      return false;
    }
    for (int r = 0; r < c.n; ++r) {
      struct stat st;
      std::string f = dir + "/r" + std::to_string(round) + "_" + std::to_string(r);
      if (stat(f.c_str(), &st) != 0)
        c.rep->fail(what + ": passed before rank " + std::to_string(r) + " arrived");
    }
  }
  return true;
}

// Bad arguments are refused on every rank alike, before anything is sent; the communicator
// stays usable.
void badArgumentCases(Case& c, std::vector<char>& in, std::vector<char>& out) {
  auto expectInvalid = [&](collieResult_t res, const char* what, const char* needle) {
    if (res != collieInvalidArgument) {
      c.rep->fail(std::string(what) + ": returned " + collieGetErrorString(res));
      return;
    }
    if (!strstr(collieGetLastError(c.comm), needle))
      c.rep->fail(std::string(what) + ": message lacks '" + needle +
                  "': " + collieGetLastError(c.comm));
  };
  char* s = in.data();
  char* r = out.data();
  expectInvalid(collieBroadcast(s, r, 4, collieFloat32, c.n, c.comm, nullptr), "root = nranks",
                "root");
  expectInvalid(collieReduce(s, r, 4, collieFloat32, collieSum, -1, c.comm, nullptr), "root -1",
                "root");
  expectInvalid(collieReduceScatter(s, s + 4, 16, collieFloat32, collieSum, c.comm, nullptr),
                "reducescatter partial overlap", "recvbuff == sendbuff + rank * recvcount");
  expectInvalid(collieAllGather(r + 4, r, 16, collieFloat32, c.comm, nullptr),
                "allgather partial overlap", "sendbuff == recvbuff + rank * sendcount");
  expectInvalid(collieReduceScatter(nullptr, r, 16, collieFloat32, collieSum, c.comm, nullptr),
                "reducescatter NULL send", "sendbuff is NULL");
  expectInvalid(collieAllGather(s, r, 16, static_cast<collieDataType_t>(99), c.comm, nullptr),
                "allgather bad dtype", "datatype");
  expectInvalid(
      collieReduce(s, r, 16, collieFloat32, static_cast<collieRedOp_t>(42), 0, c.comm, nullptr),
      "reduce bad op", "reduction op");
  // Every rank is root 0's receiver: NULL recv is refused everywhere.
  expectInvalid(collieBroadcast(s, nullptr, 16, collieFloat32, 0, c.comm, nullptr),
                "broadcast NULL recv", "recvbuff is NULL");
  if (collieCommSetAlgorithm(c.comm, "no_such_algo") != collieInvalidArgument)
    c.rep->fail("an unknown algorithm name was accepted");
}

// Which data collectives a configuration runs (a forced algorithm runs only those it has).
constexpr unsigned kRs = 1, kAg = 2, kBc = 4, kRd = 8, kAll = kRs | kAg | kBc | kRd;

void runCollectives(int rank, int n, Reporter& rep, const char* algo, unsigned colls,
                    const std::string& dir) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess) {
    rep.fail(std::string("init: ") + collieGetLastError(nullptr));
    return;
  }
  if (*algo && collieCommSetAlgorithm(comm, algo) != collieSuccess) {
    rep.fail(std::string("set algorithm: ") + collieGetLastError(comm));
    collieCommAbort(comm);
    return;
  }
  Case c{comm, rank, n, &rep, 0, algo};
  const size_t counts[] = {0, 1, static_cast<size_t>(n - 1), kBig};
  std::vector<char> in(kBig * 8 * static_cast<size_t>(n) + 64), out(in.size());
  bool ok = true;
  for (size_t count : counts) {
    ok = ok && (!(colls & kRs) || reduceScatterCases(c, in, out, count)) &&
         (!(colls & kAg) || allGatherCases(c, in, out, count)) &&
         (!(colls & kBc) || broadcastCases(c, in, out, count)) &&
         (!(colls & kRd) || reduceCases(c, in, out, count));
  }
  ok = ok && barrierCases(c, dir);
  if (!ok) {
    collieCommAbort(comm);
    return;
  }
  badArgumentCases(c, in, out);
  // Still in step after the refusals.
  std::vector<float> v(33, 1.0f);
  if (collieAllReduce(v.data(), v.data(), v.size(), collieFloat32, collieSum, comm, nullptr) !=
          collieSuccess ||
      v[32] != static_cast<float>(n))
    rep.fail("allreduce after the refused calls failed");
  rep.note("cases " + std::to_string(c.cases));
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

struct CollCase {
  const char* name;
  int n;
  const char* transport;  // COLLIE_TRANSPORT, "" for the default choice
  int hosts;              // > 1: ranks spread over this many pretend hosts (COLLIE_HOSTID)
  const char* algo;       // forced with collieCommSetAlgorithm, "" for the tuner
  unsigned colls = kAll;  // the data collectives to run
};

void PrintTo(const CollCase& c, std::ostream* os) { *os << c.name; }

class CollectivesMatrix : public ::testing::TestWithParam<CollCase> {};

TEST_P(CollectivesMatrix, EveryCollectiveDtypeOpCountMatchesReference) {
  const CollCase c = GetParam();
  char tmpl[] = "/tmp/collie-barrier-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  // Removed however the test ends: a failed assertion below returns early.
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      if (system(("rm -rf " + path).c_str()) != 0) ADD_FAILURE() << "could not remove " << path;
    }
  } removeDir{dir};
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", c.transport}};
  auto out = runWorld(c.n, opt, [c, dir](int rank, Reporter& rep) {
    if (c.hosts > 1) setenv("COLLIE_HOSTID", ("host" + std::to_string(rank % c.hosts)).c_str(), 1);
    runCollectives(rank, c.n, rep, c.algo, c.colls, dir);
  });
  expectAllPassed(out);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out[0].notes.size(), 1u);
  // Per count: 4*3*2 reducescatter + 4*2 allgather + 4*2 broadcast + 4*3*2 reduce; 3 barriers.
  const int perCount = (c.colls & kRs ? 24 : 0) + (c.colls & kAg ? 8 : 0) +
                       (c.colls & kBc ? 8 : 0) + (c.colls & kRd ? 24 : 0);
  EXPECT_EQ(out[0].notes[0], "cases " + std::to_string(4 * perCount + 3));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, CollectivesMatrix,
    ::testing::Values(CollCase{"tcp_n1", 1, "tcp", 1, ""}, CollCase{"tcp_n2", 2, "tcp", 1, ""},
                      CollCase{"tcp_n3", 3, "tcp", 1, ""}, CollCase{"shm_n4", 4, "shm", 1, ""},
                      CollCase{"shm_n5", 5, "shm", 1, ""}, CollCase{"tcp_n8", 8, "tcp", 1, ""},
                      CollCase{"mixed_2x2", 4, "", 2, ""},
                      CollCase{"shm_ring_n3", 3, "shm", 1, "ring"},
                      CollCase{"shm_direct_n2", 2, "shm", 1, "shm_direct"},
                      CollCase{"shm_direct_n3", 3, "shm", 1, "shm_direct"},
                      CollCase{"tcp_ring_n5", 5, "tcp", 1, "ring"},
                      CollCase{"tcp_tree_n2", 2, "tcp", 1, "tree", kBc | kRd},
                      CollCase{"shm_tree_n3", 3, "shm", 1, "tree", kBc | kRd},
                      CollCase{"tcp_tree_n5", 5, "tcp", 1, "tree", kBc | kRd},
                      CollCase{"shm_tree_n8", 8, "shm", 1, "tree", kBc | kRd},
                      CollCase{"shm_rhd_n2", 2, "shm", 1, "rhd", kRs | kAg},
                      CollCase{"tcp_rhd_n3", 3, "tcp", 1, "rhd", kRs | kAg},
                      CollCase{"shm_rhd_n5", 5, "shm", 1, "rhd", kRs | kAg}),
    [](const ::testing::TestParamInfo<CollCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace testing
}  // namespace collie
