// AllToAll, AllToAllv, Gather and Scatter over real processes: dtypes {i8, i32, f16, bf16, f32,
// f64} x counts {0, 1, 1001, several chunks} x in place and out of place x roots {0, last}, each
// call once by each of its algorithms and AllToAllv with zero and uneven counts and
// scattered displacements. Every rank checks its whole receive buffer, the bytes around what
// it receives too, against values computed from (source rank, destination rank, index). Then
// the bad arguments each call must refuse, and the disagreements between ranks it must report.
// One launch per configuration (transport, nranks), all cases inside it.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "src/base/dtype.h"
#include "tests/harness/block_data.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

const collieDataType_t kTypes[] = {collieInt8,     collieInt32,   collieFloat16,
                                   collieBfloat16, collieFloat32, collieFloat64};
constexpr size_t kBig = 70001;     // several 64 KiB chunks in every dtype
constexpr size_t kLarge = 300000;  // floats: beyond the default 512 KiB chunk too

struct Ctx {
  collieComm_t comm;
  int rank, n;
  Reporter* rep;
  int cases = 0;

  bool check(collieResult_t res, const std::string& what, const char* wantAlgo = "") {
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
  // Compares all of got with want (guards included); reports the first difference.
  void expectBytes(const Buf& got, const Buf& want, size_t esz, const std::string& what) {
    for (size_t b = 0; b < got.bytes.size(); ++b) {
      if (got.bytes[b] == want.bytes[b]) continue;
      const long off = static_cast<long>(b) - static_cast<long>(got.lead);
      rep->fail(what + ": first wrong byte at offset " + std::to_string(off) + " (element " +
                std::to_string(off / static_cast<long>(esz)) + ")");
      return;
    }
  }
};

std::string describe(const char* coll, const Ctx& c, size_t count, collieDataType_t dt,
                     bool inPlace, int root = -1) {
  return std::string(coll) + " n=" + std::to_string(c.n) + " rank " + std::to_string(c.rank) +
         " count=" + std::to_string(count) + " " + dtypeName(dt) +
         (inPlace ? " in-place" : " out-of-place") +
         (root >= 0 ? " root=" + std::to_string(root) : "");
}

bool allToAllCase(Ctx& c, collieDataType_t dt, size_t count, bool inPlace, const char* algo) {
  const size_t esz = dtypeSize(dt), bytes = count * esz * static_cast<size_t>(c.n);
  Buf send(bytes, count % 3), recv(bytes, count % 5), want(bytes, inPlace ? count % 3 : count % 5);
  for (int j = 0; j < c.n; ++j) {
    fillBlock(send.data() + j * count * esz, dt, c.rank, j, count);
    fillBlock(want.data() + j * count * esz, dt, j, c.rank, count);
  }
  Buf& out = inPlace ? send : recv;
  const std::string what = describe("alltoall", c, count, dt, inPlace) + " by " + algo;
  if (!c.check(collieAlltoAll(send.data(), out.data(), count, dt, c.comm, nullptr), what, algo))
    return false;
  c.expectBytes(out, want, esz, what);
  return true;
}

bool allToAllCases(Ctx& c, const std::vector<size_t>& counts) {
  for (const char* algo : {"pairwise", "bruck"}) {
    if (collieCommSetAlgorithm(c.comm, algo) != collieSuccess) {
      c.rep->fail(std::string("force ") + algo + ": " + collieGetLastError(c.comm));
      return false;
    }
    for (size_t count : counts)
      for (collieDataType_t dt : kTypes)
        for (int inPlace = 0; inPlace < 2; ++inPlace)
          if (!allToAllCase(c, dt, count, inPlace != 0, algo)) return false;
  }
  collieCommSetAlgorithm(c.comm, "auto");
  // Beyond the default chunk as well, chosen by the tuner.
  return allToAllCase(c, collieFloat32, kLarge, false, "");
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
  // With no elements anywhere the buffers may be NULL.
  const void* s = base == 0 ? nullptr : send.data();
  void* r = base == 0 ? nullptr : recv.data();
  const std::string what = describe("alltoallv", c, base, dt, false);
  if (!c.check(
          collieAlltoAllv(s, sc.data(), sd.data(), r, rc.data(), rd.data(), dt, c.comm, nullptr),
          what, "pairwise"))
    return false;
  c.expectBytes(recv, want, esz, what);
  return true;
}

bool gatherCase(Ctx& c, collieDataType_t dt, size_t count, bool inPlace, int root,
                const char* algo) {
  const size_t esz = dtypeSize(dt), bytes = count * esz;
  const bool isRoot = c.rank == root;
  Buf own(bytes, count % 3), recv(bytes * c.n, count % 5), want(bytes * c.n, count % 5);
  char* send = inPlace && isRoot ? recv.data() + root * bytes : own.data();
  fillBlock(send, dt, c.rank, root, count);
  if (isRoot)
    for (int j = 0; j < c.n; ++j) fillBlock(want.data() + j * bytes, dt, j, root, count);
  // Off the root the receive buffer is not written: NULL on odd ranks, untouched on the others.
  void* r = !isRoot && c.rank % 2 == 1 ? nullptr : recv.data();
  const std::string what = describe("gather", c, count, dt, inPlace, root) + " by " + algo;
  if (!c.check(collieGather(send, r, count, dt, root, c.comm, nullptr), what, algo)) return false;
  c.expectBytes(recv, want, esz, what);
  return true;
}

bool scatterCase(Ctx& c, collieDataType_t dt, size_t count, bool inPlace, int root,
                 const char* algo) {
  const size_t esz = dtypeSize(dt), bytes = count * esz;
  const bool isRoot = c.rank == root;
  Buf send(bytes * c.n, count % 3), recv(bytes, count % 5), want(bytes, count % 5);
  if (isRoot)
    for (int j = 0; j < c.n; ++j) fillBlock(send.data() + j * bytes, dt, root, j, count);
  fillBlock(want.data(), dt, root, c.rank, count);
  const Buf sent = send;  // in place on the root: the send buffer is the result
  char* out = inPlace && isRoot ? send.data() + root * bytes : recv.data();
  const void* s = !isRoot && c.rank % 2 == 1 ? nullptr : send.data();
  const std::string what = describe("scatter", c, count, dt, inPlace, root) + " by " + algo;
  if (!c.check(collieScatter(s, out, count, dt, root, c.comm, nullptr), what, algo)) return false;
  if (inPlace && isRoot)
    c.expectBytes(send, sent, esz, what);
  else
    c.expectBytes(recv, want, esz, what);
  return true;
}

bool rootedCases(Ctx& c, const std::vector<size_t>& counts) {
  for (const char* algo : {"linear", "binomial"}) {
    if (collieCommSetAlgorithm(c.comm, algo) != collieSuccess) {
      c.rep->fail(std::string("force ") + algo + ": " + collieGetLastError(c.comm));
      return false;
    }
    for (size_t count : counts)
      for (collieDataType_t dt : kTypes)
        for (int root : {0, c.n - 1})
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            if (!gatherCase(c, dt, count, inPlace != 0, root, algo)) return false;
            if (!scatterCase(c, dt, count, inPlace != 0, root, algo)) return false;
          }
  }
  return collieCommSetAlgorithm(c.comm, "auto") == collieSuccess;
}

// Refused on every rank alike, before anything is sent: the communicator stays usable.
void badArgumentCases(Ctx& c) {
  auto expectInvalid = [&](collieResult_t res, const char* what, const char* needle) {
    if (res != collieInvalidArgument)
      return c.rep->fail(std::string(what) + ": returned " + collieGetErrorString(res));
    if (!strstr(collieGetLastError(c.comm), needle))
      c.rep->fail(std::string(what) + ": message lacks '" + needle +
                  "': " + collieGetLastError(c.comm));
  };
  const size_t n = static_cast<size_t>(c.n);
  std::vector<float> a(64 * n), b(64 * n);
  float* s = a.data();
  float* r = b.data();
  expectInvalid(collieAlltoAll(s, s + 1, 16, collieFloat32, c.comm, nullptr),
                "alltoall partial overlap", "sendbuff == recvbuff");
  expectInvalid(collieAlltoAll(nullptr, r, 16, collieFloat32, c.comm, nullptr),
                "alltoall NULL send", "sendbuff is NULL");
  expectInvalid(collieAlltoAll(s, r, 16, static_cast<collieDataType_t>(77), c.comm, nullptr),
                "alltoall bad dtype", "datatype");
  expectInvalid(collieGather(s, r, 4, collieFloat32, c.n, c.comm, nullptr), "gather root n",
                "root");
  expectInvalid(collieScatter(s, r, 4, collieFloat32, -1, c.comm, nullptr), "scatter root -1",
                "root");
  // Every rank sends in a gather and receives in a scatter.
  expectInvalid(collieGather(nullptr, r, 4, collieFloat32, 0, c.comm, nullptr), "gather NULL send",
                "sendbuff is NULL");
  expectInvalid(collieScatter(s, nullptr, 4, collieFloat32, 0, c.comm, nullptr),
                "scatter NULL recv", "recvbuff is NULL");
  std::vector<size_t> cnt(n, 2), sd(n), rd(n);
  for (size_t j = 0; j < n; ++j) sd[j] = rd[j] = 4 * j;
  expectInvalid(collieAlltoAllv(s, nullptr, sd.data(), r, cnt.data(), rd.data(), collieFloat32,
                                c.comm, nullptr),
                "alltoallv NULL sendcounts", "sendcounts is NULL");
  expectInvalid(collieAlltoAllv(s, cnt.data(), sd.data(), r, cnt.data(), nullptr, collieFloat32,
                                c.comm, nullptr),
                "alltoallv NULL rdispls", "rdispls is NULL");
  expectInvalid(collieAlltoAllv(s, cnt.data(), sd.data(), nullptr, cnt.data(), rd.data(),
                                collieFloat32, c.comm, nullptr),
                "alltoallv NULL recv", "recvbuff is NULL");
  expectInvalid(collieAlltoAllv(s, cnt.data(), sd.data(), s + 1, cnt.data(), rd.data(),
                                collieFloat32, c.comm, nullptr),
                "alltoallv send and recv overlap", "no in-place form");
  std::vector<size_t> tight(n);
  for (size_t j = 0; j < n; ++j) tight[j] = j;  // two elements at every element: overlaps
  if (n > 1)
    expectInvalid(collieAlltoAllv(s, cnt.data(), sd.data(), r, cnt.data(), tight.data(),
                                  collieFloat32, c.comm, nullptr),
                  "alltoallv recv segments overlap", "overlap");
  std::vector<size_t> huge(n, SIZE_MAX - 1);
  expectInvalid(collieAlltoAllv(s, cnt.data(), huge.data(), r, cnt.data(), rd.data(), collieFloat32,
                                c.comm, nullptr),
                "alltoallv displacement overflow", "overflow");
}

void runAll(int rank, int n, Reporter& rep) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess)
    return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
  Ctx c{comm, rank, n, &rep};
  const std::vector<size_t> counts = {0, 1, 1001, kBig};
  bool ok = allToAllCases(c, counts);
  for (collieDataType_t dt : kTypes)
    for (size_t base : counts) ok = ok && allToAllvCase(c, dt, base);
  ok = ok && rootedCases(c, counts);
  if (!ok) {
    collieCommAbort(comm);
    return;
  }
  badArgumentCases(c);
  // Still in step after the refusals.
  if (!allToAllCase(c, collieInt32, 3, false, "")) return (void)collieCommAbort(comm);
  rep.note("cases " + std::to_string(c.cases));
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

// What rank holds after each of the C++ API's calls below, element by element.
std::vector<float> expectedAllToAll(int rank, int n, size_t count) {
  std::vector<float> v;
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) v.push_back(static_cast<float>(value(j, rank, i)));
  return v;
}

std::vector<float> blocksFor(int rank, int n, size_t count) {
  std::vector<float> v;
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) v.push_back(static_cast<float>(value(rank, j, i)));
  return v;
}

// The C++ API: blocking calls, then asynchronous ones in flight together with a blocking one
// behind them; all complete in call order with the reference's values.
void runCpp(int rank, int n, Reporter& rep) {
  Communicator comm;
  Result r = Communicator::initFromEnv(&comm);
  if (!r) return rep.fail(r.toString());
  const size_t count = 1001;
  const std::vector<float> mine = blocksFor(rank, n, count);
  std::vector<float> got(mine.size());
  r = comm.alltoall(View<const float>(mine.data(), mine.size()), View<float>(got));
  if (!r || got != expectedAllToAll(rank, n, count)) rep.fail("alltoall view: " + r.toString());
  std::vector<float> a2a(mine.size()), gathered(mine.size()), scattered(count), late(mine.size());
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  for (int j = 0; j < n; ++j) {
    sc[j] = rc[j] = count - static_cast<size_t>(j + rank);  // what j and rank agree on
    sd[j] = rd[j] = static_cast<size_t>(j) * count;
  }
  std::vector<float> v(mine.size(), -1000.0f);
  std::vector<Work> works;
  works.push_back(comm.alltoallAsync(mine.data(), a2a.data(), count, collieFloat32));
  works.push_back(comm.alltoallvAsync(mine.data(), sc.data(), sd.data(), v.data(), rc.data(),
                                      rd.data(), collieFloat32));
  works.push_back(comm.gatherAsync(mine.data() + count, gathered.data(), count, collieFloat32, 1));
  works.push_back(comm.scatterAsync(mine.data(), scattered.data(), count, collieFloat32, 2));
  r = comm.gather(mine.data(), late.data(), count, collieFloat32, 0);
  if (!r) rep.fail("gather after async: " + r.toString());
  for (auto& w : works) {
    Result wr = w.wait(std::chrono::milliseconds(30000));
    if (!wr) rep.fail("async: " + wr.toString());
  }
  if (a2a != expectedAllToAll(rank, n, count)) rep.fail("alltoallAsync");
  const std::vector<float> all = expectedAllToAll(rank, n, count);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) {
      const float want = i < rc[j] ? all[j * count + i] : -1000.0f;
      if (v[j * count + i] != want) {
        rep.fail("alltoallvAsync from rank " + std::to_string(j) + " element " + std::to_string(i));
        break;
      }
    }
  for (int j = 0; rank == 1 && j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      if (gathered[j * count + i] != static_cast<float>(value(j, 1, i))) {
        rep.fail("gatherAsync block " + std::to_string(j));
        break;
      }
  for (size_t i = 0; i < count; ++i)
    if (scattered[i] != static_cast<float>(value(2, rank, i))) {
      rep.fail("scatterAsync element " + std::to_string(i));
      break;
    }
  if (rank == 0 && late != expectedAllToAll(0, n, count)) rep.fail("gather after async");
  // Inside a group the calls run at its end, in order.
  std::vector<float> grouped(mine.size()), groupedV(mine.size(), -1000.0f);
  collieComm_t h = comm.handle();
  if (collieGroupStart() != collieSuccess ||
      collieAlltoAll(mine.data(), grouped.data(), count, collieFloat32, h, nullptr) !=
          collieSuccess ||
      collieAlltoAllv(mine.data(), sc.data(), sd.data(), groupedV.data(), rc.data(), rd.data(),
                      collieFloat32, h, nullptr) != collieSuccess ||
      collieGroupEnd() != collieSuccess)
    rep.fail(std::string("grouped alltoall: ") + collieGetLastError(h));
  if (grouped != a2a) rep.fail("grouped alltoall");
  if (groupedV != v) rep.fail("grouped alltoallv");
  // Bad arguments come back through the Work.
  Work bad = comm.alltoallvAsync(mine.data(), nullptr, sd.data(), v.data(), rc.data(), rd.data(),
                                 collieFloat32);
  if (bad.wait().code() != collieInvalidArgument) rep.fail("alltoallvAsync without sendcounts");
  if (comm.alltoall(View<const float>(mine.data(), 4), View<float>(got)).code() !=
      collieInvalidArgument)
    rep.fail("alltoall views of different sizes accepted");
}

TEST(AllToAllApi, CppBlockingAndAsyncCallsMatchTheReference) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", "tcp"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) { runCpp(rank, 3, rep); });
  expectAllPassed(out);
}

struct Config {
  const char* name;
  int n;
  const char* transport;        // COLLIE_TRANSPORT
  const char* ucxTls = "";      // UCX_TLS, "" to leave it unset
  const char* chunk = "65536";  // COLLIE_CHUNK_BYTES, "" for the default
  int hosts = 1;                // > 1: ranks spread over this many pretend hosts (COLLIE_HOSTID)
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

class AllToAllMatrix : public ::testing::TestWithParam<Config> {};

TEST_P(AllToAllMatrix, EveryCallDtypeCountPlacementRootMatchesReference) {
  const Config c = GetParam();
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", c.transport}};
  if (*c.ucxTls) opt.env.push_back({"UCX_TLS", c.ucxTls});
  if (*c.chunk) opt.env.push_back({"COLLIE_CHUNK_BYTES", c.chunk});
  auto out = runWorld(c.n, opt, [c](int rank, Reporter& rep) {
    if (c.hosts > 1) setenv("COLLIE_HOSTID", ("host" + std::to_string(rank % c.hosts)).c_str(), 1);
    runAll(rank, c.n, rep);
  });
  expectAllPassed(out);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out[0].notes.size(), 1u);
  // Per count and dtype: 2 algorithms x 2 placements of alltoall, 1 alltoallv, 2 algorithms x
  // 2 roots x 2 placements x (gather + scatter); then the large alltoall and the one after the
  // refusals.
  EXPECT_EQ(out[0].notes[0], "cases " + std::to_string(4 * 6 * (4 + 1 + 16) + 2));
}

INSTANTIATE_TEST_SUITE_P(Configs, AllToAllMatrix,
                         ::testing::Values(Config{"tcp_n1", 1, "tcp"}, Config{"tcp_n2", 2, "tcp"},
                                           Config{"tcp_n3", 3, "tcp"},
                                           Config{"tcp_n4_default_chunk", 4, "tcp", "", ""},
                                           Config{"tcp_n8", 8, "tcp"}, Config{"shm_n2", 2, "shm"},
                                           Config{"shm_n3", 3, "shm"}, Config{"shm_n4", 4, "shm"},
                                           Config{"shm_n8", 8, "shm"},
                                           // shm inside each of two pretend hosts, tcp across.
                                           Config{"mixed_5_on_2", 5, "", "", "65536", 2}),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           return std::string(i.param.name);
                         });

#ifdef COLLIE_HAVE_UCX
INSTANTIATE_TEST_SUITE_P(Ucx, AllToAllMatrix,
                         ::testing::Values(Config{"ucx_tcp_n3", 3, "ucx", "tcp"},
                                           Config{"ucx_posix_cma_n4", 4, "ucx", "posix,cma"}),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           return std::string(i.param.name);
                         });
#endif

}  // namespace
}  // namespace testing
}  // namespace collie
