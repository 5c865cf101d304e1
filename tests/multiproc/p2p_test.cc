// Point-to-point and groups over real processes: grouped ring exchanges, all-to-all-v written as
// grouped sends and receives (zero and uneven counts, messages to self), tags posted out of order,
// several messages of one tag, blocking pairs, receives from any peer, and a group mixing
// point-to-point with collectives on two communicators; every buffer checked against values
// computed here from (sender, receiver, tag, index). One launch per (transport, nranks).
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "collie/collie.hpp"
#include "src/base/dtype.h"
#include "tests/harness/process_world.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {
namespace {

const collieDataType_t kTypes[] = {collieInt8,    collieInt32,   collieFloat16, collieBfloat16,
                                   collieFloat32, collieFloat64, collieUint64};
// 300001 floats are past a stripe (256 KiB) and a chunk: they go in stripes on every stream.
const size_t kCounts[] = {0, 1, 1001, 300001};

// The value of element i of the message from src to dst with tag: small integers, exact in every
// dtype.
double valueOf(int src, int dst, int tag, size_t i) {
  return static_cast<double>((src * 31 + dst * 7 + tag * 3 + i * 13) % 61);
}

void fill(std::vector<char>* buf, collieDataType_t t, size_t count, int src, int dst, int tag) {
  buf->assign(count * dtypeSize(t) + 1, 0);
  for (size_t i = 0; i < count; ++i) storeFromDouble(buf->data(), t, i, valueOf(src, dst, tag, i));
}

// Elements of buf that are not the message from src to dst with tag.
size_t wrongIn(const char* buf, collieDataType_t t, size_t count, int src, int dst, int tag) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += loadAsDouble(buf, t, i) != valueOf(src, dst, tag, i);
  return wrong;
}

struct P2P {
  collieComm_t comm;
  int rank, n;
  Reporter* rep;
  int cases = 0;

  bool ok(collieResult_t r, const std::string& what) {
    ++cases;
    if (r == collieSuccess) return true;
    rep->fail(what + ": " + collieGetErrorString(r) + ": " + collieGetLastError(comm));
    return false;
  }
  void expectRight(const std::vector<char>& buf, collieDataType_t t, size_t count, int src, int tag,
                   const std::string& what) {
    size_t w = wrongIn(buf.data(), t, count, src, rank, tag);
    if (w) rep->fail(what + ": " + std::to_string(w) + " wrong elements");
  }
  std::string name(const char* what, collieDataType_t t, size_t count) const {
    return std::string(what) + " n=" + std::to_string(n) + " " + dtypeName(t) +
           " count=" + std::to_string(count);
  }
};

// Each rank sends to rank + k and receives from rank - k, in one group (k = 1 and n / 2).
bool ringCases(P2P& c) {
  for (collieDataType_t t : kTypes)
    for (size_t count : kCounts)
      for (int k : {1, c.n / 2}) {
        const int to = (c.rank + k) % c.n, from = (c.rank - k + c.n) % c.n;
        std::vector<char> out, in(count * dtypeSize(t) + 1, 0x5a);
        fill(&out, t, count, c.rank, to, 0);
        collieGroupStart();
        collieSend(out.data(), count, t, to, c.comm, nullptr);
        collieRecv(in.data(), count, t, from, c.comm, nullptr);
        const std::string what = c.name("ring", t, count) + " k=" + std::to_string(k);
        if (!c.ok(collieGroupEnd(), what)) return false;
        c.expectRight(in, t, count, from, 0, what);
      }
  return true;
}

// The count from src to dst in the all-to-all-v: uneven, zero for some pairs.
size_t vcount(int src, int dst, size_t scale) {
  return (src + 2 * dst) % 3 == 0 ? 0 : scale * static_cast<size_t>(1 + (src * 5 + dst) % 4);
}

// All-to-all-v as NCCL users write it: every send and receive of the exchange in one group.
bool alltoallvCases(P2P& c) {
  for (collieDataType_t t : {collieFloat32, collieInt8, collieBfloat16})
    for (size_t scale : {size_t{1}, size_t{777}, size_t{70001}}) {
      std::vector<std::vector<char>> out(c.n), in(c.n);
      collieGroupStart();
      for (int p = 0; p < c.n; ++p) {
        fill(&out[p], t, vcount(c.rank, p, scale), c.rank, p, 5);
        in[p].assign(vcount(p, c.rank, scale) * dtypeSize(t) + 1, 0);
        collieSendTagged(out[p].data(), vcount(c.rank, p, scale), t, p, 5, c.comm, nullptr);
        collieRecvTagged(in[p].data(), vcount(p, c.rank, scale), t, p, 5, c.comm, nullptr);
      }
      const std::string what = c.name("alltoallv", t, scale);
      if (!c.ok(collieGroupEnd(), what)) return false;
      for (int p = 0; p < c.n; ++p)
        c.expectRight(in[p], t, vcount(p, c.rank, scale), p, 5,
                      what + " from " + std::to_string(p));
    }
  return true;
}

// Tags sent 3, 1, 2 and received 1, 2, 3; then three messages of one tag keep their order.
bool tagCases(P2P& c) {
  const int to = (c.rank + 1) % c.n, from = (c.rank - 1 + c.n) % c.n;
  for (size_t count : {size_t{5}, size_t{300001}}) {
    const collieDataType_t t = collieFloat32;
    std::vector<std::vector<char>> out(3), in(3, std::vector<char>(count * 4 + 1));
    const int sendTags[] = {3, 1, 2};
    collieGroupStart();
    for (int i = 0; i < 3; ++i) {
      fill(&out[i], t, count, c.rank, to, sendTags[i]);
      collieSendTagged(out[i].data(), count, t, to, sendTags[i], c.comm, nullptr);
    }
    for (int i = 0; i < 3; ++i)
      collieRecvTagged(in[i].data(), count, t, from, i + 1, c.comm, nullptr);
    const std::string what = c.name("tags out of order", t, count);
    if (!c.ok(collieGroupEnd(), what)) return false;
    for (int i = 0; i < 3; ++i) c.expectRight(in[i], t, count, from, i + 1, what);
    // One tag, three messages: the k-th receive gets the k-th send (values differ by "tag").
    collieGroupStart();
    for (int i = 0; i < 3; ++i) {
      fill(&out[i], t, count, c.rank, to, 10 + i);
      collieSendTagged(out[i].data(), count, t, to, 9, c.comm, nullptr);
    }
    for (int i = 0; i < 3; ++i) collieRecvTagged(in[i].data(), count, t, from, 9, c.comm, nullptr);
    if (!c.ok(collieGroupEnd(), what + " one tag")) return false;
    for (int i = 0; i < 3; ++i) c.expectRight(in[i], t, count, from, 10 + i, what + " one tag");
  }
  return true;
}

// A burst of 40 messages of one tag, small ones (a shared-memory mailbox holds 16) between larger
// ones, all sent before any is received: they arrive by two paths and keep their order.
bool burstCases(P2P& c) {
  const int to = (c.rank + 1) % c.n, from = (c.rank - 1 + c.n) % c.n;
  const collieDataType_t t = collieFloat32;
  auto countOf = [](int i) { return i % 5 == 4 ? size_t{1001} : i % 2 ? size_t{60} : size_t{2}; };
  std::vector<std::vector<char>> out(40), in(40);
  collieGroupStart();
  for (int i = 0; i < 40; ++i) {
    fill(&out[i], t, countOf(i), c.rank, to, 100 + i);
    collieSendTagged(out[i].data(), countOf(i), t, to, 11, c.comm, nullptr);
  }
  for (int i = 0; i < 40; ++i) {
    in[i].assign(countOf(i) * 4 + 1, 0);
    collieRecvTagged(in[i].data(), countOf(i), t, from, 11, c.comm, nullptr);
  }
  if (!c.ok(collieGroupEnd(), c.name("burst", t, 40))) return false;
  for (int i = 0; i < 40; ++i) c.expectRight(in[i], t, countOf(i), from, 100 + i, "burst");
  return true;
}

// Blocking calls, not grouped: even ranks send first, odd ranks receive first.
bool blockingCases(P2P& c) {
  if (c.n % 2) return true;
  const int partner = c.rank ^ 1;
  for (size_t count : kCounts) {
    const collieDataType_t t = collieFloat64;
    std::vector<char> out, in(count * 8 + 1);
    fill(&out, t, count, c.rank, partner, 0);
    const std::string what = c.name("blocking pair", t, count);
    collieResult_t r1, r2;
    if (c.rank % 2 == 0) {
      r1 = collieSend(out.data(), count, t, partner, c.comm, nullptr);
      r2 = collieRecv(in.data(), count, t, partner, c.comm, nullptr);
    } else {
      r1 = collieRecv(in.data(), count, t, partner, c.comm, nullptr);
      r2 = collieSend(out.data(), count, t, partner, c.comm, nullptr);
    }
    if (!c.ok(r1, what) || !c.ok(r2, what)) return false;
    c.expectRight(in, t, count, partner, 0, what);
  }
  return true;
}

// Rank 0 takes one message of tag 7 from every other rank, in whatever order they come.
bool recvAnyCases(P2P& c) {
  const size_t count = 513;
  const collieDataType_t t = collieInt32;
  if (c.rank != 0) {
    std::vector<char> out;
    fill(&out, t, count, c.rank, 0, 7);
    return c.ok(collieSendTagged(out.data(), count, t, 0, 7, c.comm, nullptr), "send to any");
  }
  std::set<int> seen;
  for (int i = 1; i < c.n; ++i) {
    std::vector<char> in(count * 4 + 1);
    int from = -1;
    if (!c.ok(collieRecvAny(in.data(), count, t, 7, &from, c.comm, nullptr), "recv any"))
      return false;
    if (from <= 0 || from >= c.n || !seen.insert(from).second)
      c.rep->fail("recv any reported sender " + std::to_string(from));
    else
      c.expectRight(in, t, count, from, 7, "recv any from " + std::to_string(from));
  }
  return true;
}

// A group of point-to-point calls and collectives on this and a second communicator, and a
// message to this rank.
bool mixedCases(P2P& c) {
  collieUniqueId id;
  if (c.rank == 0 && collieGetUniqueId(&id) != collieSuccess)
    return c.ok(collieInternalError, "id");
  if (!c.ok(collieBroadcast(&id, &id, sizeof(id), collieUint8, 0, c.comm, nullptr), "id bcast"))
    return false;
  collieComm_t second = nullptr;
  if (!c.ok(collieCommInitRank(&second, c.n, id, c.rank), "second communicator")) return false;
  const int to = (c.rank + 1) % c.n, from = (c.rank - 1 + c.n) % c.n;
  const size_t count = 100003;
  const collieDataType_t t = collieFloat32;
  std::vector<char> out, in(count * 4 + 1), self, selfIn(count * 4 + 1);
  fill(&out, t, count, c.rank, to, 2);
  fill(&self, t, count, c.rank, c.rank, 4);
  std::vector<float> a(4099, 1.0f), b(4099, 2.0f);
  collieGroupStart();
  collieSendTagged(out.data(), count, t, to, 2, c.comm, nullptr);
  collieAllReduce(a.data(), a.data(), a.size(), collieFloat32, collieSum, second, nullptr);
  collieRecvTagged(in.data(), count, t, from, 2, c.comm, nullptr);
  collieGroupStart();  // nested
  collieSendTagged(self.data(), count, t, c.rank, 4, second, nullptr);
  collieRecvTagged(selfIn.data(), count, t, c.rank, 4, second, nullptr);
  collieGroupEnd();
  collieAllReduce(b.data(), b.data(), b.size(), collieFloat32, collieSum, c.comm, nullptr);
  bool ok = c.ok(collieGroupEnd(), "mixed group");
  if (ok) {
    c.expectRight(in, t, count, from, 2, "mixed group ring");
    size_t w = wrongIn(selfIn.data(), t, count, c.rank, c.rank, 4);
    if (w) c.rep->fail("mixed group self message: " + std::to_string(w) + " wrong");
    if (a[4098] != static_cast<float>(c.n) || b[0] != 2.0f * static_cast<float>(c.n))
      c.rep->fail("mixed group allreduce results wrong");
  }
  if (collieCommDestroy(second) != collieSuccess) c.rep->fail("destroy second");
  return ok;
}

void runP2P(int rank, int n, Reporter& rep) {
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm) != collieSuccess)
    return rep.fail(std::string("init: ") + collieGetLastError(nullptr));
  P2P c{comm, rank, n, &rep};
  bool ok = ringCases(c) && alltoallvCases(c) && tagCases(c) && burstCases(c) && blockingCases(c) &&
            recvAnyCases(c) && mixedCases(c);
  // Still in step with the collectives after all of it.
  std::vector<float> v(33, 1.0f);
  if (ok && (collieAllReduce(v.data(), v.data(), v.size(), collieFloat32, collieSum, comm,
                             nullptr) != collieSuccess ||
             v[32] != static_cast<float>(n)))
    rep.fail("allreduce after the point-to-point cases failed");
  if (!ok) {
    collieCommAbort(comm);
    return;
  }
  rep.note("cases " + std::to_string(c.cases));
  if (collieCommDestroy(comm) != collieSuccess) rep.fail("destroy failed");
}

struct P2PConfig {
  const char* name;
  int n;
  const char* transport;
  const char* ucxTls;  // UCX_TLS for transport ucx
  const char* shmCma;  // COLLIE_SHM_CMA: off keeps large messages on the shared-memory rings
};

void PrintTo(const P2PConfig& c, std::ostream* os) { *os << c.name; }

class P2PMatrix : public ::testing::TestWithParam<P2PConfig> {};

TEST_P(P2PMatrix, EveryExchangeMatchesReference) {
  const P2PConfig c = GetParam();
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "60000"}, {"COLLIE_TRANSPORT", c.transport}};
  if (*c.ucxTls) opt.env.push_back({"UCX_TLS", c.ucxTls});
  if (*c.shmCma) opt.env.push_back({"COLLIE_SHM_CMA", c.shmCma});
  auto out = runWorld(c.n, opt, [c](int rank, Reporter& rep) { runP2P(rank, c.n, rep); });
  expectAllPassed(out);
  // Every rank ran every case: 7 dtypes x 4 counts x 2 ring distances, 9 all-to-all-v, 4 tag
  // groups, a burst, 8 blocking calls (even n), its part of the receives from any peer, 3 mixed.
  ASSERT_EQ(out.size(), static_cast<size_t>(c.n));
  for (const auto& o : out) {
    const int recvAny = c.n == 1 ? 0 : o.rank == 0 ? c.n - 1 : 1;
    const int want = 56 + 9 + 4 + 1 + (c.n % 2 ? 0 : 8) + recvAny + 3;
    ASSERT_EQ(o.notes.size(), 1u) << "rank " << o.rank;
    EXPECT_EQ(o.notes[0], "cases " + std::to_string(want)) << "rank " << o.rank;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, P2PMatrix,
    ::testing::Values(P2PConfig{"tcp_n1", 1, "tcp", "", ""}, P2PConfig{"tcp_n2", 2, "tcp", "", ""},
                      P2PConfig{"shm_n2", 2, "shm", "", ""}, P2PConfig{"shm_n3", 3, "shm", "", ""},
                      P2PConfig{"shm_rings_n3", 3, "shm", "", "off"},
                      P2PConfig{"tcp_n4", 4, "tcp", "", ""},
                      P2PConfig{"ucx_tcp_n2", 2, "ucx", "tcp", ""},
                      P2PConfig{"ucx_shm_n3", 3, "ucx", "posix,cma", ""},
                      P2PConfig{"mixed_n8", 8, "", "", ""}),
    [](const ::testing::TestParamInfo<P2PConfig>& i) { return std::string(i.param.name); });

// The C++ API: a Group scope around typed sends and receives, then a receive from any peer.
TEST(P2PCpp, GroupScopeRingAndRecvAny) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"}, {"COLLIE_TRANSPORT", "tcp"}};
  auto out = runWorld(3, opt, [](int rank, Reporter& rep) {
    Communicator comm;
    if (Result r = Communicator::initFromEnv(&comm); !r) return rep.fail(r.toString());
    const int to = (rank + 1) % 3, from = (rank + 2) % 3;
    std::vector<double> send(70001), recv(send.size(), -1.0);
    for (size_t i = 0; i < send.size(); ++i) send[i] = valueOf(rank, to, 1, i);
    {
      Group g;
      comm.send(View<const double>(send.data(), send.size()), to, 1);
      comm.recv(View<double>(recv), from, 1);
      if (Result r = g.end(); !r) return rep.fail("group: " + r.toString());
    }
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != valueOf(from, rank, 1, i)) return rep.fail("wrong at " + std::to_string(i));
    int32_t v = rank, got = -1;
    int sender = -1;
    if (rank != 0) {
      if (Result r = comm.send(&v, 1, collieInt32, 0, 3); !r) rep.fail(r.toString());
    } else {
      for (int k = 0; k < 2; ++k) {
        if (Result r = comm.recvAny(&got, 1, collieInt32, 3, &sender); !r) rep.fail(r.toString());
        if (got != sender || sender < 1) rep.fail("recvAny: " + std::to_string(got));
      }
    }
    rep.note("ok");
  });
  expectAllPassed(out);
  for (const auto& o : out) EXPECT_EQ(o.notes.size(), 1u);
}

// Asynchronous calls: both ranks post their receive before their send, with a blocking collective
// in between; a receive nobody matches ends with an error when a communicator goes.
TEST(P2PCpp, AsyncReceivesPostedBeforeSendsComplete) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "30000"}, {"COLLIE_TRANSPORT", "shm"}};
  auto out = runWorld(2, opt, [](int rank, Reporter& rep) {
    Work orphan;
    {
      Communicator comm;
      if (Result r = Communicator::initFromEnv(&comm); !r) return rep.fail(r.toString());
      const int peer = 1 - rank;
      for (size_t count : {size_t{3}, size_t{300001}}) {
        std::vector<float> send(count), recv(count, -1.0f), x(5, 1.0f);
        for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(valueOf(rank, peer, 6, i));
        Work r = comm.recvAsync(recv.data(), count, collieFloat32, peer, 6);
        if (Result a = comm.allreduce(View<float>(x)); !a || x[4] != 2.0f)
          rep.fail("allreduce between async calls: " + a.toString());
        Work s = comm.sendAsync(send.data(), count, collieFloat32, peer, 6);
        if (Result w = s.wait(); !w) rep.fail("send: " + w.toString());
        if (Result w = r.wait(); !w) rep.fail("recv: " + w.toString());
        for (size_t i = 0; i < count; ++i)
          if (recv[i] != static_cast<float>(valueOf(peer, rank, 6, i)))
            return rep.fail("async recv wrong at " + std::to_string(i));
      }
      comm.barrier();
      static float sink[4];
      orphan = comm.recvAsync(sink, 4, collieFloat32, 1 - rank, 99);  // never sent
    }
    // Destroyed here, or the peer's communicator went first and closed the connection.
    const Result w = orphan.wait(std::chrono::seconds(10));
    if (w.code() != collieInvalidUsage && w.code() != collieRemoteError)
      return rep.fail("an orphaned receive ended with " + w.toString());
    rep.note("ok");
  });
  expectAllPassed(out);
  for (const auto& o : out) EXPECT_EQ(o.notes.size(), 1u);
}

}  // namespace
}  // namespace testing
}  // namespace collie
