// A full mesh of TCP connections between n ranks of one process over loopback, for tests of
// transports and schedules that run each rank on a thread.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/tcp/tcp_transport.h"

namespace collie {

struct Mesh {
  std::vector<std::unique_ptr<TcpTransport>> transports;
  std::vector<std::vector<std::unique_ptr<Connection>>> conns;  // [rank][peer]
};

// nsocks sockets between every two ranks, or, with socksFor, socksFor(r, p) between ranks r and
// p (the transports then take per-peer counts, as the communicator gives them).
inline Mesh connectMesh(int n, int nsocks, std::function<int(int, int)> socksFor = nullptr) {
  Mesh m;
  Identity id;
  memset(id.secret, 7, 16);
  id.commId = 99;
  id.nranks = n;
  TcpOptions opt;
  opt.nsocks = socksFor ? 0 : nsocks;
  opt.stripeBytes = 4096;
  std::vector<std::string> addrs;
  auto lo = resolveHost("127.0.0.1", 0);
  for (int r = 0; r < n; ++r) {
    id.rank = r;
    auto t = TcpTransport::create(id, opt, lo.value());
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    addrs.push_back(t.value()->address());
    m.transports.push_back(t.take());
  }
  m.conns.resize(n);
  std::vector<std::thread> th;
  std::vector<Status> st(n);
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      if (!socksFor) {
        st[r] = m.transports[r]->connectAll(addrs, std::vector<bool>(n, true),
                                            Deadline::afterMs(5000), &m.conns[r]);
        return;
      }
      std::vector<int> socks(n, 0);
      for (int p = 0; p < n; ++p) socks[p] = p == r ? 0 : socksFor(r, p);
      st[r] = m.transports[r]->connectAll(addrs, socks, Deadline::afterMs(5000), &m.conns[r]);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(st[r].isOk()) << st[r].toString();
  return m;
}

}  // namespace collie
