// The link probe of communicator init: ranks as threads over real loopback TCP connections.
#include "src/core/tuning/link_probe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/tcp_mesh.h"

namespace collie {
namespace {

struct RankCtx {
  std::vector<Connection*> conns;
  std::unique_ptr<Poller> poller;
  AlgoContext ctx;
};

RankCtx contextFor(Mesh& m, int r, int n, int64_t timeoutMs) {
  RankCtx rc;
  rc.conns.assign(n, nullptr);
  std::vector<Connection*> live;
  for (int q = 0; q < n; ++q)
    if (q != r) rc.conns[q] = m.conns[r][q].get(), live.push_back(rc.conns[q]);
  rc.poller.reset(new Poller(live, 20, nullptr));
  rc.ctx.rank = r;
  rc.ctx.nranks = n;
  rc.ctx.conns = rc.conns.data();
  rc.ctx.poller = rc.poller.get();
  rc.ctx.deadline = Deadline::afterMs(timeoutMs);
  rc.ctx.seq = 1;
  rc.ctx.opName = "the link probe";
  return rc;
}

TEST(LinkProbe, EveryRankMeasuresItsRingLinks) {
  for (int n : {2, 3, 5}) {
    Mesh m = connectMesh(n, 1);
    std::vector<StatusOr<LinkProbe>> got(n, StatusOr<LinkProbe>(internalError("not run")));
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        RankCtx rc = contextFor(m, r, n, 20000);
        got[r] = probeRingLinks(rc.ctx, 256 << 10);
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(got[r].isOk()) << "n " << n << " rank " << r << ": "
                                 << got[r].status().toString();
      const LinkProbe& p = got[r].value();
      EXPECT_TRUE(std::isfinite(p.alphaUs) && p.alphaUs > 0) << p.alphaUs;
      EXPECT_TRUE(std::isfinite(p.betaGBps) && p.betaGBps > 0) << p.betaGBps;
    }
  }
}

TEST(LinkProbe, ASilentNeighbourIsATimeoutNamingIt) {
  // Rank 1 of 2 never probes: rank 0 must give up at its deadline and say whom it waited for.
  Mesh m = connectMesh(2, 1);
  RankCtx rc = contextFor(m, 0, 2, 300);
  StatusOr<LinkProbe> got = probeRingLinks(rc.ctx, 64 << 10);
  ASSERT_FALSE(got.isOk());
  const std::string why = got.status().toString();
  EXPECT_NE(why.find("the link probe"), std::string::npos) << why;
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
}

TEST(LinkProbe, OneRankHasNoLinks) {
  AlgoContext ctx;
  ctx.nranks = 1;
  EXPECT_EQ(probeRingLinks(ctx, 1024).status().code(), collieInvalidArgument);
}

}  // namespace
}  // namespace collie
