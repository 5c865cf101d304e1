// TCP transport set-up: listening, the per-peer socket policy, and dialling the mesh.
#include "transports/tcp/tcp_transport.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "src/base/log.h"

namespace collie {

int socketsFor(const TcpOptions& opt, bool sameHost) {
  if (opt.nsocks > 0) return opt.nsocks;
  return sameHost ? 3 : 1;
}

int bufferFor(const TcpOptions& opt, bool sameHost) {
  if (!opt.bufPerPeer) return opt.bufBytes;
  return sameHost ? 4 << 20 : 512 << 10;
}

TcpTransport::~TcpTransport() {
  if (listenFd_ >= 0) close(listenFd_);
}

StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::create(const Identity& id,
                                                             const TcpOptions& opt,
                                                             SockAddr local) {
  if (opt.nsocks < 0 || opt.nsocks > 64)
    return invalidArgument("COLLIE_NSOCKS=" + std::to_string(opt.nsocks) + " must be 0..64");
  std::unique_ptr<TcpTransport> t(new TcpTransport(id, opt));
  local.setPort(0);
  t->addr_ = local;
  COLLIE_ASSIGN_OR_RETURN(t->listenFd_, listenOn(&t->addr_, 1024));
  if (!opt.congestion.empty()) COLLIE_RETURN_IF_ERROR(setCongestion(t->listenFd_, opt.congestion));
  COLLIE_INFO(kLogNet, "tcp transport listening on %s", t->addr_.toString().c_str());
  return t;
}

StatusOr<std::unique_ptr<Connection>> TcpTransport::connect(int peer,
                                                            const std::string& peerBytes) {
  const size_t n = static_cast<size_t>(id_.nranks);
  if (peer < 0 || peer >= id_.nranks || peer == id_.rank)
    return invalidArgument("tcp connect: no peer rank " + std::to_string(peer));
  std::vector<std::string> addrs(n);
  std::vector<int> socks(n, 0);
  addrs[static_cast<size_t>(peer)] = peerBytes;
  socks[static_cast<size_t>(peer)] = opt_.nsocks > 0 ? opt_.nsocks : 1;
  ConnectionTable conns(n);
  COLLIE_RETURN_IF_ERROR(connectAll(addrs, socks, Deadline::afterMs(opt_.userTimeoutMs), &conns));
  return std::move(conns[static_cast<size_t>(peer)]);
}

Status TcpTransport::connectGroup(ConnectStep* step, ConnectionTable* conns) {
  std::vector<std::string> theirs;
  COLLIE_RETURN_IF_ERROR(
      step->exchange->exchange(name(), address(), step->peers, step->deadline, &theirs));
  const size_t n = static_cast<size_t>(id_.nranks);
  std::vector<std::string> addrs(n);
  std::vector<int> socks(n, 0), bufs(n, 0);
  for (size_t i = 0; i < step->peers.size(); ++i) {
    const int p = step->peers[i];
    addrs[static_cast<size_t>(p)] = theirs[i];
    socks[static_cast<size_t>(p)] = socketsFor(opt_, step->sameHost(p));
    bufs[static_cast<size_t>(p)] = bufferFor(opt_, step->sameHost(p));
  }
  return connectAll(addrs, socks, step->deadline, conns, bufs);
}

Status TcpTransport::connectAll(const std::vector<std::string>& addrs,
                                const std::vector<bool>& want, const Deadline& deadline,
                                ConnectionTable* conns) {
  if (opt_.nsocks < 1) return invalidArgument("tcp connect: no socket count for the peers");
  std::vector<int> socks(want.size(), 0);
  for (size_t p = 0; p < want.size(); ++p) socks[p] = want[p] ? opt_.nsocks : 0;
  return connectAll(addrs, socks, deadline, conns);
}

Status TcpTransport::checkCounts(const std::vector<std::string>& addrs,
                                 const std::vector<int>& socks,
                                 const std::vector<int>& bufBytes) const {
  const int n = id_.nranks;
  if (static_cast<int>(socks.size()) != n || static_cast<int>(addrs.size()) != n ||
      (!bufBytes.empty() && static_cast<int>(bufBytes.size()) != n))
    return invalidArgument("tcp connect: " + std::to_string(n) + " ranks, " +
                           std::to_string(addrs.size()) + " addresses, " +
                           std::to_string(socks.size()) + " socket counts, " +
                           std::to_string(bufBytes.size()) + " buffer sizes");
  for (int p = 0; p < n; ++p)
    if (p != id_.rank && (socks[p] < 0 || socks[p] > 64))
      return invalidArgument("tcp connect: " + std::to_string(socks[p]) + " sockets to peer rank " +
                             std::to_string(p) + ", not 0..64");
  return Status::ok();
}

Status TcpTransport::connectAll(const std::vector<std::string>& addrs,
                                const std::vector<int>& socks, const Deadline& deadline,
                                ConnectionTable* conns, const std::vector<int>& bufBytes) {
  COLLIE_RETURN_IF_ERROR(checkCounts(addrs, socks, bufBytes));
  const int n = id_.nranks, me = id_.rank;
  FdTable fds(static_cast<size_t>(n));
  int lower = 0;
  for (int p = 0; p < n; ++p) {
    fds[static_cast<size_t>(p)].assign(p == me ? 0 : socks[p], -1);
    if (p < me) lower += socks[p];
  }
  Status st = dialHigher(addrs, socks, deadline, &fds);
  if (st.isOk()) st = acceptPeers(lower, socks, deadline, &fds);
  if (!st.isOk()) {
    for (auto& v : fds)
      for (int fd : v)
        if (fd >= 0) close(fd);
    return st;
  }
  wrap(&fds, bufBytes, conns);
  return Status::ok();
}

Status TcpTransport::dialHigher(const std::vector<std::string>& addrs,
                                const std::vector<int>& socks, const Deadline& deadline,
                                FdTable* fds) {
  // Higher ranks listen before they publish their address, so these connects complete from the
  // backlog even while those ranks are still dialling others.
  for (int p = id_.rank + 1; p < id_.nranks; ++p) {
    const int ns = socks[p];
    if (ns == 0) continue;
    auto addr = parseSockAddr(addrs[p]);
    if (!addr.isOk()) return addr.status().withContext("rank " + std::to_string(p) + "'s address");
    for (int s = 0; s < ns; ++s)
      COLLIE_RETURN_IF_ERROR(dialOne(addr.value(), p, s, ns, deadline, &(*fds)[p][s]));
  }
  return Status::ok();
}

Status TcpTransport::dialOne(const SockAddr& addr, int peer, int sockIdx, int nsocks,
                             const Deadline& deadline, int* fd) {
  auto c = connectWithRetry(addr, deadline);
  if (!c.isOk())
    return c.status().withContext("rank " + std::to_string(id_.rank) + " connecting to peer rank " +
                                  std::to_string(peer));
  *fd = c.value();
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kHelloVersion;
  memcpy(h.secret, id_.secret, 16);
  h.commId = id_.commId;
  h.from = id_.rank;
  h.to = peer;
  h.sockIdx = sockIdx;
  h.nsocks = nsocks;
  h.nranks = id_.nranks;
  return writeFull(*fd, &h, sizeof(h), deadline)
      .withContext("hello to peer rank " + std::to_string(peer));
}

void TcpTransport::wrap(FdTable* fds, const std::vector<int>& bufBytes,
                        ConnectionTable* conns) const {
  const int n = id_.nranks;
  conns->resize(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    std::vector<int>& mine = (*fds)[static_cast<size_t>(p)];
    if (mine.empty()) continue;
    std::vector<std::unique_ptr<ByteStream>> streams;
    const int buf = bufBytes.empty() ? opt_.bufBytes : bufBytes[static_cast<size_t>(p)];
    for (int fd : mine) {
      tuneSocket(fd, opt_.userTimeoutMs, buf, opt_.congestion);
      streams.emplace_back(new TcpStream(fd));
    }
    int snd = 0, rcv = 0;
    socklen_t len = sizeof(int);
    getsockopt(mine[0], SOL_SOCKET, SO_SNDBUF, &snd, &len);
    len = sizeof(int);
    getsockopt(mine[0], SOL_SOCKET, SO_RCVBUF, &rcv, &len);
    COLLIE_INFO(kLogNet,
                "rank %d -> peer rank %d: %d tcp sockets, buffers of %d bytes asked (kernel: "
                "SO_SNDBUF %d, SO_RCVBUF %d)",
                id_.rank, p, static_cast<int>(mine.size()), buf, snd, rcv);
    StreamOptions so;
    so.stripeBytes = opt_.stripeBytes;
    (*conns)[static_cast<size_t>(p)].reset(
        new StreamConnection(p, id_.commId, std::move(streams), so));
  }
}

}  // namespace collie
