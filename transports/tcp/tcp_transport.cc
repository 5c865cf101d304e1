// TCP transport set-up: listening, the authenticated hello, and the full mesh of connections.
#include "transports/tcp/tcp_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/base/log.h"

namespace collie {

namespace {

constexpr uint32_t kHelloMagic = 0x434c4849;  // "CLHI"
constexpr uint32_t kHelloVersion = 1;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[16];
  uint64_t commId;
  int32_t from, to, sockIdx, nsocks, nranks;
  uint32_t pad;
};
static_assert(sizeof(Hello) == 56, "hello is 56 bytes");

// A connection accepted but not yet identified.
struct Pending {
  int fd;
  Hello hello;
  size_t got;
  std::string from;
};

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time, so a stranger learns nothing from timing
  for (int i = 0; i < 16; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string peerName(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) return "?";
  return a.toString();
}

// A bulk read turns delayed ACKs off until the kernel turns them back on (it does so by
// itself, so this is set again on every such read). A collective's transfers end in a burst the
// sender cannot follow up until it hears back; with ACKs held for the 40 ms delayed-ACK timer
// a congestion window that stayed small (cubic's early slow-start exit, BBR on a shaped link)
// stalls a step for that long. Measured on 8 netns hosts at 1 Gbit/s, rhd 512 KiB: 17-35 ms
// without, 7.6-14 ms with (the link bound is 7.3 ms). Small reads keep the kernel's choice: a
// latency-bound exchange gets its ACK piggybacked on the reply.
void ackNowAfter(int fd, ssize_t got) {
  if (got < 4096) return;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

}  // namespace

TcpStream::~TcpStream() {
  if (fd_ >= 0) close(fd_);
}

ssize_t TcpStream::writev(const iovec* iov, int n) {
  msghdr mh{};
  mh.msg_iov = const_cast<iovec*>(iov);
  mh.msg_iovlen = static_cast<size_t>(n);
  for (;;) {
    ssize_t w = sendmsg(fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) return w;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

ssize_t TcpStream::read(void* buf, size_t n) {
  for (;;) {
    ssize_t r = recv(fd_, buf, n, MSG_DONTWAIT);
    if (r > 0) {
      ackNowAfter(fd_, r);
      return r;
    }
    if (r == 0) return n == 0 ? 0 : -ESHUTDOWN;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

ssize_t TcpStream::readv(const iovec* iov, int n) {
  msghdr mh{};
  mh.msg_iov = const_cast<iovec*>(iov);
  mh.msg_iovlen = static_cast<size_t>(n);
  for (;;) {
    ssize_t r = recvmsg(fd_, &mh, MSG_DONTWAIT);
    if (r > 0) {
      ackNowAfter(fd_, r);
      return r;
    }
    if (r == 0) return -ESHUTDOWN;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

void TcpStream::shutdownWrite() { shutdown(fd_, SHUT_WR); }

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

Status TcpTransport::connectAll(const std::vector<std::string>& addrs,
                                const std::vector<bool>& want, const Deadline& deadline,
                                std::vector<std::unique_ptr<Connection>>* conns) {
  if (opt_.nsocks < 1) return invalidArgument("tcp connect: no socket count for the peers");
  std::vector<int> socks(want.size(), 0);
  for (size_t p = 0; p < want.size(); ++p) socks[p] = want[p] ? opt_.nsocks : 0;
  return connectAll(addrs, socks, deadline, conns);
}

Status TcpTransport::connectAll(const std::vector<std::string>& addrs,
                                const std::vector<int>& socks, const Deadline& deadline,
                                std::vector<std::unique_ptr<Connection>>* conns,
                                const std::vector<int>& bufBytes) {
  const int n = id_.nranks, me = id_.rank;
  if (static_cast<int>(socks.size()) != n || static_cast<int>(addrs.size()) != n ||
      (!bufBytes.empty() && static_cast<int>(bufBytes.size()) != n))
    return invalidArgument("tcp connect: " + std::to_string(n) + " ranks, " +
                           std::to_string(addrs.size()) + " addresses, " +
                           std::to_string(socks.size()) + " socket counts, " +
                           std::to_string(bufBytes.size()) + " buffer sizes");
  for (int p = 0; p < n; ++p)
    if (p != me && (socks[p] < 0 || socks[p] > 64))
      return invalidArgument("tcp connect: " + std::to_string(socks[p]) + " sockets to peer rank " +
                             std::to_string(p) + ", not 0..64");
  std::vector<std::vector<int>> fds(n);
  for (int p = 0; p < n; ++p) fds[p].assign(p == me ? 0 : socks[p], -1);
  auto closeAll = [&] {
    for (auto& v : fds)
      for (int fd : v)
        if (fd >= 0) close(fd);
  };
  // Dial the higher ranks: their listeners are open before their address is published, so the
  // connects complete from the backlog even while those ranks are still dialling others.
  for (int p = me + 1; p < n; ++p) {
    const int ns = socks[p];
    if (ns == 0) continue;
    auto addr = parseSockAddr(addrs[p]);
    if (!addr.isOk()) {
      closeAll();
      return addr.status().withContext("rank " + std::to_string(p) + "'s address");
    }
    for (int s = 0; s < ns; ++s) {
      auto fd = connectWithRetry(addr.value(), deadline);
      if (!fd.isOk()) {
        closeAll();
        return fd.status().withContext("rank " + std::to_string(me) + " connecting to peer rank " +
                                       std::to_string(p));
      }
      fds[p][s] = fd.value();
      Hello h{};
      h.magic = kHelloMagic;
      h.version = kHelloVersion;
      memcpy(h.secret, id_.secret, 16);
      h.commId = id_.commId;
      h.from = me;
      h.to = p;
      h.sockIdx = s;
      h.nsocks = ns;
      h.nranks = n;
      Status st = writeFull(fd.value(), &h, sizeof(h), deadline);
      if (!st.isOk()) {
        closeAll();
        return st.withContext("hello to peer rank " + std::to_string(p));
      }
    }
  }
  int lower = 0;
  for (int p = 0; p < me; ++p) lower += socks[p];
  Status st = acceptPeers(lower, socks, deadline, &fds);
  if (!st.isOk()) {
    closeAll();
    return st;
  }
  conns->resize(n);
  for (int p = 0; p < n; ++p) {
    if (p == me || socks[p] == 0) continue;
    std::vector<std::unique_ptr<ByteStream>> streams;
    const int buf = bufBytes.empty() ? opt_.bufBytes : bufBytes[p];
    for (int fd : fds[p]) {
      tuneSocket(fd, opt_.userTimeoutMs, buf, opt_.congestion);
      streams.emplace_back(new TcpStream(fd));
    }
    int snd = 0, rcv = 0;
    socklen_t len = sizeof(int);
    getsockopt(fds[p][0], SOL_SOCKET, SO_SNDBUF, &snd, &len);
    len = sizeof(int);
    getsockopt(fds[p][0], SOL_SOCKET, SO_RCVBUF, &rcv, &len);
    COLLIE_INFO(kLogNet,
                "rank %d -> peer rank %d: %d tcp sockets, buffers of %d bytes asked (kernel: "
                "SO_SNDBUF %d, SO_RCVBUF %d)",
                me, p, static_cast<int>(fds[p].size()), buf, snd, rcv);
    StreamOptions so;
    so.stripeBytes = opt_.stripeBytes;
    (*conns)[p].reset(new StreamConnection(p, id_.commId, std::move(streams), so));
  }
  return Status::ok();
}

Status TcpTransport::acceptPeers(int expected, const std::vector<int>& socks,
                                 const Deadline& deadline, std::vector<std::vector<int>>* fds) {
  std::vector<Pending> pending;
  int have = 0;
  auto drop = [&](size_t i, const char* why) {
    COLLIE_WARN(kLogNet, "rank %d: dropped a connection from %s to the tcp transport: %s", id_.rank,
                pending[i].from.c_str(), why);
    close(pending[i].fd);
    pending.erase(pending.begin() + i);
  };
  while (have < expected) {
    std::vector<pollfd> pf;
    pf.push_back({listenFd_, POLLIN, 0});
    for (auto& p : pending) pf.push_back({p.fd, POLLIN, 0});
    int ms = deadline.remainingMs(100);
    if (ms == 0 && deadline.expired()) {
      std::string missing;
      for (int r = 0; r < id_.rank; ++r)
        if (std::count((*fds)[r].begin(), (*fds)[r].end(), -1) > 0)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      for (auto& p : pending) close(p.fd);
      return timeoutError("rank " + std::to_string(id_.rank) +
                          " timed out waiting for connections from peer ranks " + missing);
    }
    if (poll(pf.data(), pf.size(), ms) < 0 && errno != EINTR) return errnoStatus("poll", errno);
    if (pf[0].revents & POLLIN) {
      for (;;) {
        int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        pending.push_back(Pending{fd, {}, 0, peerName(fd)});
      }
    }
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      ssize_t r = recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, 0);
      if (r == 0) {
        drop(i, "closed before a complete hello");
        continue;
      }
      if (r < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) drop(i, strerror(errno));
        continue;
      }
      p.got += static_cast<size_t>(r);
      if (p.got < sizeof(Hello)) continue;
      const Hello& h = p.hello;
      if (h.magic != kHelloMagic || h.version != kHelloVersion) {
        drop(i, "not a Collie hello (garbage or another protocol)");
      } else if (!secretEqual(h.secret, id_.secret) || h.commId != id_.commId) {
        drop(i, "wrong secret or communicator id");
      } else if (h.to != id_.rank || h.nranks != id_.nranks || h.from < 0 || h.from >= id_.rank ||
                 socks[h.from] == 0 || h.nsocks != socks[h.from] || h.sockIdx < 0 ||
                 h.sockIdx >= socks[h.from] || (*fds)[h.from][h.sockIdx] >= 0) {
        drop(i, "hello does not fit this communicator (rank, size or COLLIE_NSOCKS differ)");
      } else {
        (*fds)[h.from][h.sockIdx] = p.fd;
        ++have;
        pending.erase(pending.begin() + i);
      }
    }
  }
  for (size_t i = pending.size(); i-- > 0;) drop(i, "unexpected extra connection");
  return Status::ok();
}

void TcpTransport::dropStrangers() {
  for (;;) {
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    COLLIE_WARN(kLogNet,
                "rank %d: dropped a connection from %s to the tcp transport: the communicator "
                "is already connected (a stranger or a port scanner)",
                id_.rank, peerName(fd).c_str());
    close(fd);
  }
}

}  // namespace collie
