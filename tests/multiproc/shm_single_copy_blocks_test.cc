// shm_single_copy's block moves (Broadcast, AllGather, AllToAll, AllToAllv, Gather, Scatter),
// forced by name with COLLIE_SHM_CMA=on, for 2..4 ranks: counts {0, 1, odd, over 1 MiB} x in
// place, out of place and both side by side (AllToAll pairs of mixed placement swap their
// blocks) x roots first and last, AllToAllv with uneven and zero counts. Every rank checks its
// whole output and the guard bytes around it against values computed from (source rank,
// destination rank, index).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "tests/harness/block_data.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

constexpr size_t kOverMiB = (1u << 18) + 3;  // floats: a block over 1 MiB
constexpr char kSingle[] = "shm_single_copy";

// How the ranks of one case place their buffers.
enum Placement { kOut = 0, kIn = 1, kMixed = 2 };
const char* const kPlacementName[] = {"out-of-place", "in-place", "mixed"};

struct Ctx {
  collieComm_t comm;
  int rank, n;
  Reporter* rep;
  int cases = 0;

  bool inPlace(Placement p) const { return p == kIn || (p == kMixed && rank % 2 == 1); }
  bool check(collieResult_t res, const std::string& what) {
    ++cases;
    if (res != collieSuccess) {
      rep->fail(what + ": " + collieGetErrorString(res) + ": " + collieGetLastError(comm));
      return false;
    }
    const char* ran = "";
    collieCommLastAlgorithm(comm, &ran);
    if (strcmp(ran, kSingle) != 0) rep->fail(what + ": ran " + ran + ", not " + kSingle);
    return true;
  }
  void expectBytes(const Buf& got, const Buf& want, const std::string& what) {
    for (size_t b = 0; b < got.bytes.size(); ++b) {
      if (got.bytes[b] == want.bytes[b]) continue;
      rep->fail(what + ": first wrong byte at offset " +
                std::to_string(static_cast<long>(b) - static_cast<long>(got.lead)));
      return;
    }
  }
  std::string describe(const char* coll, size_t count, collieDataType_t dt, Placement p,
                       int root = -1) const {
    return std::string(coll) + " n=" + std::to_string(n) + " rank " + std::to_string(rank) +
           " count=" + std::to_string(count) + " " + dtypeName(dt) + " " + kPlacementName[p] +
           (root >= 0 ? " root=" + std::to_string(root) : "");
  }
};

bool broadcastCase(Ctx& c, collieDataType_t dt, size_t count, Placement p, int root) {
  const size_t bytes = count * dtypeSize(dt);
  Buf own(bytes, count % 3), recv(bytes, count % 5), want(bytes, count % 5);
  if (c.rank == root) fillBlock(own.data(), dt, root, 0, count);
  if (c.rank == root && c.inPlace(p)) fillBlock(recv.data(), dt, root, 0, count);
  fillBlock(want.data(), dt, root, 0, count);
  const void* send = c.inPlace(p) ? recv.data() : c.rank == root ? own.data() : nullptr;
  const std::string what = c.describe("broadcast", count, dt, p, root);
  if (!c.check(collieBroadcast(send, recv.data(), count, dt, root, c.comm, nullptr), what))
    return false;
  c.expectBytes(recv, want, what);
  return true;
}

bool allGatherCase(Ctx& c, collieDataType_t dt, size_t count, Placement p) {
  const size_t bytes = count * dtypeSize(dt), mine = static_cast<size_t>(c.rank) * bytes;
  Buf own(bytes, count % 3), recv(bytes * c.n, count % 5), want(bytes * c.n, count % 5);
  char* send = c.inPlace(p) ? recv.data() + mine : own.data();
  fillBlock(send, dt, c.rank, 0, count);
  for (int j = 0; j < c.n; ++j) fillBlock(want.data() + j * bytes, dt, j, 0, count);
  const std::string what = c.describe("allgather", count, dt, p);
  if (!c.check(collieAllGather(send, recv.data(), count, dt, c.comm, nullptr), what)) return false;
  c.expectBytes(recv, want, what);
  return true;
}

bool allToAllCase(Ctx& c, collieDataType_t dt, size_t count, Placement p) {
  const size_t bytes = count * dtypeSize(dt) * static_cast<size_t>(c.n);
  const bool in = c.inPlace(p);
  Buf send(bytes, count % 3), recv(bytes, count % 5), want(bytes, in ? count % 3 : count % 5);
  for (int j = 0; j < c.n; ++j) {
    fillBlock(send.data() + j * count * dtypeSize(dt), dt, c.rank, j, count);
    fillBlock(want.data() + j * count * dtypeSize(dt), dt, j, c.rank, count);
  }
  Buf& out = in ? send : recv;
  const std::string what = c.describe("alltoall", count, dt, p);
  if (!c.check(collieAlltoAll(send.data(), out.data(), count, dt, c.comm, nullptr), what))
    return false;
  c.expectBytes(out, want, what);
  return true;
}

// AllToAllv over vLayout's segments (block_data.h), checked with their gaps.
bool allToAllvCase(Ctx& c, collieDataType_t dt, size_t base) {
  const size_t esz = dtypeSize(dt);
  VLayout l = vLayout(c.rank, c.n, base);
  std::vector<size_t>&sc = l.sc, &sd = l.sd, &rc = l.rc, &rd = l.rd;
  const size_t sendElems = l.sendElems, recvElems = l.recvElems;
  Buf send(sendElems * esz, base % 3), recv(recvElems * esz, base % 5),
      want(recvElems * esz, base % 5);
  for (int j = 0; j < c.n; ++j) {
    fillBlock(send.data() + sd[j] * esz, dt, c.rank, j, sc[j]);
    fillBlock(want.data() + rd[j] * esz, dt, j, c.rank, rc[j]);
  }
  const void* s = base == 0 ? nullptr : send.data();
  void* r = base == 0 ? nullptr : recv.data();
  const std::string what = c.describe("alltoallv", base, dt, kOut);
  if (!c.check(
          collieAlltoAllv(s, sc.data(), sd.data(), r, rc.data(), rd.data(), dt, c.comm, nullptr),
          what))
    return false;
  c.expectBytes(recv, want, what);
  return true;
}

bool gatherCase(Ctx& c, collieDataType_t dt, size_t count, Placement p, int root) {
  const size_t bytes = count * dtypeSize(dt);
  const bool isRoot = c.rank == root;
  Buf own(bytes, count % 3), recv(bytes * c.n, count % 5), want(bytes * c.n, count % 5);
  char* send = c.inPlace(p) && isRoot ? recv.data() + root * bytes : own.data();
  fillBlock(send, dt, c.rank, root, count);
  if (isRoot)
    for (int j = 0; j < c.n; ++j) fillBlock(want.data() + j * bytes, dt, j, root, count);
  void* r = isRoot ? recv.data() : nullptr;
  const std::string what = c.describe("gather", count, dt, p, root);
  if (!c.check(collieGather(send, r, count, dt, root, c.comm, nullptr), what)) return false;
  c.expectBytes(recv, want, what);
  return true;
}

bool scatterCase(Ctx& c, collieDataType_t dt, size_t count, Placement p, int root) {
  const size_t bytes = count * dtypeSize(dt);
  const bool isRoot = c.rank == root, in = c.inPlace(p) && isRoot;
  Buf send(bytes * c.n, count % 3), recv(bytes, count % 5), want(bytes, count % 5);
  if (isRoot)
    for (int j = 0; j < c.n; ++j) fillBlock(send.data() + j * bytes, dt, root, j, count);
  fillBlock(want.data(), dt, root, c.rank, count);
  const Buf sent = send;  // in place on the root: the send buffer is the result
  char* out = in ? send.data() + root * bytes : recv.data();
  const std::string what = c.describe("scatter", count, dt, p, root);
  if (!c.check(collieScatter(isRoot ? send.data() : nullptr, out, count, dt, root, c.comm, nullptr),
               what))
    return false;
  c.expectBytes(in ? send : recv, in ? sent : want, what);
  return true;
}

bool countCases(Ctx& c, collieDataType_t dt, size_t count) {
  bool ok = allToAllvCase(c, dt, count);
  for (int p = kOut; p <= kMixed && ok; ++p) {
    const Placement pl = static_cast<Placement>(p);
    ok = allGatherCase(c, dt, count, pl) && allToAllCase(c, dt, count, pl);
    for (int root : {0, c.n - 1})
      ok = ok && broadcastCase(c, dt, count, pl, root) && gatherCase(c, dt, count, pl, root) &&
           scatterCase(c, dt, count, pl, root);
  }
  return ok;
}

void runAll(int rank, int n, Reporter& rep) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess)
    return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
  if (collieCommSetAlgorithm(comm, kSingle) != collieSuccess)
    return rep.fail(std::string("force: ") + collieGetLastError(comm));
  Ctx c{comm, rank, n, &rep};
  bool ok = true;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}})
    for (collieDataType_t dt : {collieInt8, collieFloat64}) ok = ok && countCases(c, dt, count);
  ok = ok && countCases(c, collieFloat32, kOverMiB);
  if (!ok) return (void)collieCommAbort(comm);
  rep.note("cases " + std::to_string(c.cases));
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

class ShmSingleCopyBlocks : public ::testing::TestWithParam<int> {};

TEST_P(ShmSingleCopyBlocks, EveryCollectiveCountPlacementAndRootMatchesReference) {
  const int n = GetParam();
  WorldOptions opt;
  opt.timeoutSec = 240;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"},
             {"COLLIE_TRANSPORT", "shm"},
             {"COLLIE_SHM_CMA", "on"},
             {"COLLIE_SHM_CMA_BYTES", "1"}};
  auto out = runWorld(n, opt, [&](int rank, Reporter& rep) { runAll(rank, n, rep); });
  expectAllPassed(out);
  ASSERT_EQ(static_cast<int>(out.size()), n);
  // Per count and dtype: AllToAllv, then per placement AllGather, AllToAll and per root three.
  ASSERT_EQ(out[0].notes.size(), 1u);
  EXPECT_EQ(out[0].notes[0], "cases " + std::to_string(7 * (1 + 3 * (2 + 2 * 3))));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSingleCopyBlocks, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace collie
