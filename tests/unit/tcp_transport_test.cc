// The TCP transport between threads over loopback: the full mesh, framed transfers of every
// size (striped and not), and a closed peer reported by rank.
#include "transports/tcp/tcp_transport.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "tests/unit/step_tag.h"
#include "tests/unit/tcp_mesh.h"
#include "transports/tcp/socket.h"

namespace collie {
namespace {

TEST(TcpTransport, ThreeRanksExchangeEverySizeStripedAndNot) {
  // 1 and 3 sockets between every two ranks, then a count per pair: 2 between ranks 0 and 1,
  // 3 between 0 and 2, 1 between 1 and 2 (as the communicator connects peers on its own host
  // and on others).
  for (int nsocks : {1, 3, 0}) {
    Mesh m = connectMesh(
        3, nsocks,
        nsocks > 0 ? std::function<int(int, int)>() : [](int r, int p) { return (r + p) % 3 + 1; });
    const size_t sizes[] = {0, 1, 17, 4095, 4096, 65537, 3 << 20};
    std::vector<std::thread> th;
    std::vector<int> bad(3, 0);
    for (int r = 0; r < 3; ++r) {
      th.emplace_back([&, r] {
        int to = (r + 1) % 3, from = (r + 2) % 3;
        std::vector<Connection*> all{m.conns[r][to].get(), m.conns[r][from].get()};
        Poller poller(all, 20, nullptr);
        uint32_t step = 0;
        for (size_t n : sizes) {
          std::vector<unsigned char> out(n), in(n, 0);
          for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(i * 31 + r);
          Request sr, rr;
          ASSERT_TRUE(m.conns[r][to]->isend(out.data(), n, stepTag(step), &sr).isOk());
          ASSERT_TRUE(m.conns[r][from]->irecv(in.data(), n, stepTag(step), &rr).isOk());
          Status s = poller.wait(&rr, Deadline::afterMs(5000), "test");
          if (s.isOk()) s = poller.wait(&sr, Deadline::afterMs(5000), "test");
          ASSERT_TRUE(s.isOk()) << s.toString();
          for (size_t i = 0; i < n; ++i)
            if (in[i] != static_cast<unsigned char>(i * 31 + from)) ++bad[r];
          ++step;
        }
      });
    }
    for (auto& t : th) t.join();
    EXPECT_EQ(bad, (std::vector<int>{0, 0, 0})) << "nsocks " << nsocks << " (0: per pair)";
  }
}

TEST(TcpTransport, BadSocketCountsAreInvalidArguments) {
  Mesh m = connectMesh(2, 1);
  std::vector<std::string> addrs{"127.0.0.1:1", "127.0.0.1:2"};
  std::vector<std::unique_ptr<Connection>> conns;
  Status s =
      m.transports[0]->connectAll(addrs, std::vector<int>{0, 65}, Deadline::afterMs(100), &conns);
  EXPECT_EQ(s.code(), collieInvalidArgument) << s.toString();
  EXPECT_NE(s.toString().find("65 sockets to peer rank 1"), std::string::npos) << s.toString();
  s = m.transports[0]->connectAll(addrs, std::vector<int>{0}, Deadline::afterMs(100), &conns);
  EXPECT_EQ(s.code(), collieInvalidArgument) << s.toString();
}

TEST(TcpTransport, ClosedPeerIsAnErrorNamingIt) {
  Mesh m = connectMesh(2, 2);
  char buf[64];
  Request rr;
  ASSERT_TRUE(m.conns[0][1]->irecv(buf, sizeof(buf), stepTag(0), &rr).isOk());
  m.conns[1].clear();  // rank 1 goes away
  Poller poller({m.conns[0][1].get()}, 0, nullptr);
  Status s = poller.wait(&rr, Deadline::afterMs(3000), "test");
  EXPECT_EQ(s.code(), collieRemoteError) << s.toString();
  EXPECT_NE(s.message().find("peer rank 1"), std::string::npos) << s.message();
}

TEST(TcpTransport, SilentPeerTimesOutNamingIt) {
  Mesh m = connectMesh(2, 1);
  char buf[64];
  Request rr;
  ASSERT_TRUE(m.conns[1][0]->irecv(buf, sizeof(buf), stepTag(0), &rr).isOk());
  Poller poller({m.conns[1][0].get()}, 0, nullptr);
  Status s = poller.wait(&rr, Deadline::afterMs(200), "allreduce");
  EXPECT_EQ(s.code(), collieTimeout);
  EXPECT_EQ(s.stalledOn(), 0);
  EXPECT_NE(s.message().find("peer rank 0"), std::string::npos) << s.message();
}

TEST(TcpTransport, AbortFromPeerCarriesItsReason) {
  Mesh m = connectMesh(2, 2);
  char buf[64];
  Request rr;
  ASSERT_TRUE(m.conns[0][1]->irecv(buf, sizeof(buf), stepTag(0), &rr).isOk());
  m.conns[1][0]->sendAbort(remoteError("rank 1 lost peer rank 7"));
  Poller poller({m.conns[0][1].get()}, 0, nullptr);
  Status s = poller.wait(&rr, Deadline::afterMs(3000), "test");
  EXPECT_EQ(s.code(), collieRemoteError);
  EXPECT_NE(s.message().find("peer rank 1 aborted: rank 1 lost peer rank 7"), std::string::npos)
      << s.message();
}

TEST(TcpTransport, WrongLengthFrameIsInvalidUsage) {
  Mesh m = connectMesh(2, 1);
  char out[100] = {}, in[64];
  Request sr, rr;
  ASSERT_TRUE(m.conns[1][0]->isend(out, sizeof(out), stepTag(0), &sr).isOk());
  ASSERT_TRUE(m.conns[0][1]->irecv(in, sizeof(in), stepTag(0), &rr).isOk());
  Poller poller({m.conns[0][1].get(), m.conns[1][0].get()}, 0, nullptr);
  Status s = poller.wait(&rr, Deadline::afterMs(3000), "test");
  EXPECT_EQ(s.code(), collieInvalidUsage) << s.toString();
}

// COLLIE_SOCKET_CC: the data sockets take the congestion control asked for; a name the kernel
// lacks fails the transport's start with the name in the message.
TEST(TcpTransport, CongestionControlIsSetOrAClearError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  tuneSocket(fd, 0, 0, "reno");  // reno is built into every Linux kernel
  char name[32] = {};
  socklen_t len = sizeof(name);
  ASSERT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  EXPECT_STREQ(name, "reno");
  close(fd);

  Identity id;
  id.nranks = 2;
  TcpOptions opt;
  auto lo = resolveHost("127.0.0.1", 0);
  ASSERT_TRUE(lo.isOk());
  opt.congestion = "reno";
  EXPECT_TRUE(TcpTransport::create(id, opt, lo.value()).isOk());
  opt.congestion = "no_such_cc";
  auto bad = TcpTransport::create(id, opt, lo.value());
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), collieInvalidArgument);
  EXPECT_NE(bad.status().message().find("COLLIE_SOCKET_CC=no_such_cc"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace collie
