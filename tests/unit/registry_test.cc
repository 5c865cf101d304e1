// The transport registry: the allowed set, the choice per peer pair, and a mesh connected over
// an in-process store, with a transport that gives its peers up to the next one.
#include "transports/registry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/core/bootstrap/store.h"
#include "src/core/bootstrap/store_exchange.h"

namespace collie {
namespace {

// What a GivesUp step was asked; it outlives the transport, which the mesh drops unused.
struct Asked {
  std::vector<std::string> fallbacks;
  std::vector<int> peers;
};

// Reaches every peer and connects none: its group step gives them all up.
class GivesUp : public Transport {
 public:
  explicit GivesUp(Asked* asked, bool sameHostOnly = false)
      : asked_(asked), sameHostOnly_(sameHostOnly) {}
  const char* name() const override { return "gives_up"; }
  bool canConnect(const RankPlace& local, const RankPlace& peer) const override {
    return !sameHostOnly_ || local.host == peer.host;
  }
  std::string localAddress() const override { return "nowhere"; }
  StatusOr<std::unique_ptr<Connection>> connect(int, const std::string&) override {
    return internalError("not used");
  }
  Status connectGroup(ConnectStep* step, ConnectionTable*) override {
    asked_->fallbacks.push_back(step->fallback == nullptr ? "" : step->fallback);
    asked_->peers = step->peers;
    step->peers.clear();
    return Status::ok();
  }

 private:
  Asked* asked_;
  bool sameHostOnly_;
};

std::vector<RankPlace> places(const std::vector<std::string>& hosts) {
  std::vector<RankPlace> p;
  for (size_t r = 0; r < hosts.size(); ++r) p.push_back(RankPlace{static_cast<int>(r), hosts[r]});
  return p;
}

TransportConfig configFor(int rank, int nranks, const std::string& allowed) {
  TransportConfig c;
  c.allowed = parseAllowedTransports(allowed).value();
  memset(c.id.secret, 3, sizeof(c.id.secret));
  c.id.commId = 0xc0ffee;
  c.id.rank = rank;
  c.id.nranks = nranks;
  c.tcp.nsocks = 0;  // by where the peer is
  c.tcpLocal = resolveHost("127.0.0.1", 0).value();
  c.shm.ringBytes = 64 << 10;
  c.shm.stagingBytes = 64 << 10;
  return c;
}

TEST(Registry, AListRestrictsTheTransportsAndABadNameSaysWhatTheBuildHas) {
  auto all = parseAllowedTransports("");
  ASSERT_TRUE(all.isOk());
  EXPECT_TRUE(all.value().tcp && all.value().shm && !all.value().ucxRequired);
  EXPECT_TRUE(all.value().restriction.empty());
  auto tcp = parseAllowedTransports("tcp");
  ASSERT_TRUE(tcp.isOk());
  EXPECT_TRUE(tcp.value().tcp && !tcp.value().shm && !tcp.value().ucx);
  EXPECT_EQ(tcp.value().restriction, "COLLIE_TRANSPORT=tcp");
  auto bad = parseAllowedTransports("shm,pigeon");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), collieInvalidArgument);
  EXPECT_NE(bad.status().message().find("'pigeon' is not a transport of this build (" +
                                        std::string(buildTransports()) + ")"),
            std::string::npos)
      << bad.status().message();
}

TEST(Registry, EachPeerPairGetsItsTransportsBestFirst) {
  // Ranks 0 and 1 share host a; rank 2 is alone on host b.
  const auto ranks = places({"a", "a", "b"});
  auto made = makeTransports(configFor(0, 3, "tcp,shm"));
  ASSERT_TRUE(made.isOk()) << made.status().toString();
  std::vector<Transport*> order;
  for (auto& t : made.value()) order.push_back(t.get());
  ASSERT_EQ(order.size(), 2u);
  EXPECT_STREQ(order[0]->name(), "shm");
  EXPECT_STREQ(order[1]->name(), "tcp");
  auto choice = choosePerPeer(order, ranks, 0);
  ASSERT_EQ(choice.size(), 3u);
  EXPECT_TRUE(choice[0].empty());  // this rank
  ASSERT_EQ(choice[1].size(), 2u);
  EXPECT_STREQ(choice[1][0]->name(), "shm");
  EXPECT_STREQ(choice[1][1]->name(), "tcp");
  ASSERT_EQ(choice[2].size(), 1u);
  EXPECT_STREQ(choice[2][0]->name(), "tcp");
}

TEST(Registry, APeerNoAllowedTransportReachesIsAnErrorNamingIt) {
  Asked asked;
  std::vector<std::unique_ptr<Transport>> only;
  only.emplace_back(new GivesUp(&asked, /*sameHostOnly=*/true));
  HashStore store;
  StoreExchange ex(&store, 0);
  auto mesh = TransportMesh::connect(std::move(only), places({"a", "b"}), 0, &ex,
                                     "COLLIE_TRANSPORT=shm", Deadline::afterMs(1000));
  ASSERT_FALSE(mesh.isOk());
  EXPECT_NE(mesh.status().message().find("COLLIE_TRANSPORT=shm cannot reach peer rank 1 on host b"),
            std::string::npos)
      << mesh.status().message();
}

// Three ranks as threads: 0 and 1 on host a, 2 on host b. A transport before tcp gives every
// peer up; tcp then connects them all, and a message crosses each connection.
TEST(Registry, PeersAGroupStepGivesUpTakeTheirNextTransport) {
  constexpr int n = 3;
  const auto ranks = places({"a", "a", "b"});
  HashStore store;
  std::vector<std::unique_ptr<TransportMesh>> meshes(n);
  std::vector<Asked> first(n);
  std::vector<Status> st(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) {
    th.emplace_back([&, r] {
      auto tcp = makeTransports(configFor(r, n, "tcp"));
      if (!tcp.isOk()) return void(st[r] = tcp.status());
      std::vector<std::unique_ptr<Transport>> ts;
      ts.emplace_back(new GivesUp(&first[r]));
      ts.push_back(std::move(tcp.value()[0]));
      StoreExchange ex(&store, r);
      auto m = TransportMesh::connect(std::move(ts), ranks, r, &ex, "", Deadline::afterMs(5000));
      st[r] = m.status();
      if (m.isOk()) meshes[r] = m.take();
    });
  }
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].isOk()) << st[r].toString();
    EXPECT_EQ(first[r].fallbacks, std::vector<std::string>{"tcp"});
    EXPECT_EQ(first[r].peers.size(), 2u);
    for (int p = 0; p < n; ++p)
      if (p != r) {
        EXPECT_STREQ(meshes[r]->via(p), "tcp") << r << " -> " << p;
      }
    EXPECT_TRUE(meshes[r]->uses("tcp"));
    EXPECT_FALSE(meshes[r]->uses("gives_up"));
  }
  // Rank r sends its number to every peer; every rank receives each peer's.
  std::vector<std::thread> io;
  std::vector<std::string> bad(n);
  for (int r = 0; r < n; ++r) {
    io.emplace_back([&, r] {
      Poller poller(meshes[r]->live(), 0, nullptr);
      std::vector<Request> sends(n), recvs(n);
      std::vector<int32_t> got(n, -1);
      int32_t mine = 100 + r;
      FrameTag tag;
      tag.seq = 1;
      tag.count = 1;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        Connection* c = meshes[r]->connections()[p];
        c->isend(&mine, sizeof(mine), tag, &sends[p]);
        c->irecv(&got[p], sizeof(int32_t), tag, &recvs[p]);
      }
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        Status s = poller.wait(&sends[p], Deadline::afterMs(5000), "send");
        if (s.isOk()) s = poller.wait(&recvs[p], Deadline::afterMs(5000), "recv");
        if (!s.isOk() || got[p] != 100 + p) bad[r] += s.toString() + " from " + std::to_string(p);
      }
    });
  }
  for (auto& t : io) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(bad[r].empty()) << "rank " << r << ": " << bad[r];
}

}  // namespace
}  // namespace collie
