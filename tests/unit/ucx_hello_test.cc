// The UCX hello: the check of a peer's hello, and two transports of one process that prove, or
// fail to prove, the job's secret to each other over real endpoints.
#ifdef COLLIE_HAVE_UCX
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "src/base/time.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {
namespace {

Identity identity(int rank, uint8_t secretByte) {
  Identity id;
  memset(id.secret, secretByte, sizeof(id.secret));
  id.commId = 0x5eed;
  id.rank = rank;
  id.nranks = 3;
  return id;
}

TEST(UcxHello, APeersOwnHelloFitsAndEveryAlteredFieldIsRefused) {
  const Identity me = identity(1, 7);
  const UcxHello good = makeUcxHello(identity(2, 7), 1);  // rank 2 to rank 1
  EXPECT_STREQ(ucxHelloMisfit(good, me, 2), "");
  EXPECT_STRNE(ucxHelloMisfit(good, me, 0), "") << "claims rank 2 on rank 0's endpoint tag";
  UcxHello h = good;
  h.secret[15] ^= 1;
  EXPECT_STREQ(ucxHelloMisfit(h, me, 2), "wrong secret or communicator id");
  h = good;
  h.commId += 1;
  EXPECT_STREQ(ucxHelloMisfit(h, me, 2), "wrong secret or communicator id");
  h = good;
  h.magic = 0x434c4849;  // a tcp hello's
  EXPECT_NE(std::string(ucxHelloMisfit(h, me, 2)).find("not a Collie UCX hello"),
            std::string::npos);
  h = good;
  h.to = 0;
  EXPECT_NE(std::string(ucxHelloMisfit(h, me, 2)).find("does not fit"), std::string::npos);
  h = good;
  h.nranks = 4;
  EXPECT_NE(std::string(ucxHelloMisfit(h, me, 2)).find("does not fit"), std::string::npos);
}

// Ranks 0 and 1 of a job, each with its own worker, connected to each other; each proves its
// identity in a thread of its own. Returns both results.
std::pair<Status, Status> proveBetween(uint8_t secret0, uint8_t secret1, int64_t* ms) {
  auto a = UcxTransport::create(0, 2, 0x5eed, false);
  auto b = UcxTransport::create(1, 2, 0x5eed, false);
  if (!a.isOk() || !b.isOk()) return {a.status(), b.status()};
  std::unique_ptr<UcxTransport> t0 = std::move(a.value()), t1 = std::move(b.value());
  auto c0 = t0->connect(1, t1->address());
  auto c1 = t1->connect(0, t0->address());
  if (!c0.isOk() || !c1.isOk()) return {c0.status(), c1.status()};
  Identity id0 = identity(0, secret0), id1 = identity(1, secret1);
  id0.nranks = id1.nranks = 2;
  Status s0, s1;
  const uint64_t start = nowNs();
  std::thread th([&] { s1 = t1->proveSecret(id1, Deadline::afterMs(10000)); });
  s0 = t0->proveSecret(id0, Deadline::afterMs(10000));
  th.join();
  *ms = static_cast<int64_t>((nowNs() - start) / 1000000);
  // Goodbyes both ways, so that each side closes its endpoint at once.
  std::unique_ptr<Connection> k0 = std::move(c0.value()), k1 = std::move(c1.value());
  std::thread bye([&] {
    t1->farewell(Deadline::afterMs(2000));
    k1.reset();
    t1.reset();
  });
  t0->farewell(Deadline::afterMs(2000));
  k0.reset();
  t0.reset();
  bye.join();
  return {s0, s1};
}

void proveOver(const char* tls) {
  setenv("UCX_TLS", tls, 1);
  int64_t ms = 0;
  auto same = proveBetween(9, 9, &ms);
  EXPECT_TRUE(same.first.isOk()) << same.first.message();
  EXPECT_TRUE(same.second.isOk()) << same.second.message();
  auto differ = proveBetween(9, 8, &ms);
  ASSERT_FALSE(differ.first.isOk());
  ASSERT_FALSE(differ.second.isOk());
  EXPECT_NE(differ.first.message().find("peer rank 1 (its hello: wrong secret"), std::string::npos)
      << differ.first.message();
  EXPECT_NE(differ.second.message().find("peer rank 0 (its hello: wrong secret"), std::string::npos)
      << differ.second.message();
  // A wrong hello leaves the real peer a second, not the whole deadline.
  EXPECT_LT(ms, 5000);
  unsetenv("UCX_TLS");
}

TEST(UcxHello, TwoWorkersProveTheSecretOverTcp) { proveOver("tcp"); }
TEST(UcxHello, TwoWorkersProveTheSecretOverSharedMemory) { proveOver("posix,cma"); }

// What a peer publishes: the pid between the slashes is digits that fit, or the whole address
// is refused (an overflowing or negative pid would have the wrong process watched).
TEST(UcxPublished, APidThatIsNotPlainDigitsIsAGarbledAddress) {
  std::string addr;
  int pid = -1;
  EXPECT_EQ(UcxTransport::unusable("0a1b/1234/ns", &addr, &pid), "");
  EXPECT_EQ(addr, std::string("\x0a\x1b", 2));
  EXPECT_EQ(pid, 0) << "another pid namespace: no pid to watch";
  for (const char* bad :
       {"0a1b/99999999999999999999/ns", "0a1b/-12/ns", "0a1b//ns", "0a1b/12x/ns", "0a1b/+5/ns"})
    EXPECT_EQ(UcxTransport::unusable(bad, &addr, &pid), "it published a garbled address") << bad;
}

}  // namespace
}  // namespace collie
#endif
