// The accepting side of the TCP mesh: hellos checked, strangers dropped.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/base/log.h"
#include "transports/tcp/tcp_transport.h"

namespace collie {

namespace {

// A connection accepted but not yet identified.
struct Pending {
  int fd;
  Hello hello;
  size_t got;
  std::string from;
};

}  // namespace

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;
  for (int i = 0; i < 16; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string peerName(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) != 0) return "?";
  return a.toString();
}

const char* helloMisfit(const Hello& h, const Identity& id, const std::vector<int>& socks,
                        const std::vector<std::vector<int>>& fds) {
  if (h.magic != kHelloMagic || h.version != kHelloVersion)
    return "not a Collie hello (garbage or another protocol)";
  if (!secretEqual(h.secret, id.secret) || h.commId != id.commId)
    return "wrong secret or communicator id";
  if (h.to != id.rank || h.nranks != id.nranks || h.from < 0 || h.from >= id.rank ||
      socks[h.from] == 0 || h.nsocks != socks[h.from] || h.sockIdx < 0 ||
      h.sockIdx >= socks[h.from] || fds[h.from][h.sockIdx] >= 0)
    return "hello does not fit this communicator (rank, size or COLLIE_NSOCKS differ)";
  return "";
}

Status TcpTransport::acceptTimeout(const FdTable& fds) const {
  std::string missing;
  for (int r = 0; r < id_.rank; ++r)
    if (std::count(fds[r].begin(), fds[r].end(), -1) > 0)
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  return timeoutError("rank " + std::to_string(id_.rank) +
                      " timed out waiting for connections from peer ranks " + missing);
}

Status TcpTransport::acceptPeers(int expected, const std::vector<int>& socks,
                                 const Deadline& deadline, FdTable* fds) {
  std::vector<Pending> pending;
  int have = 0;
  auto drop = [&](size_t i, const char* why) {
    COLLIE_WARN_LIMITED(kLogNet, "rank %d: dropped a connection from %s to the tcp transport: %s",
                        id_.rank, pending[i].from.c_str(), why);
    close(pending[i].fd);
    pending.erase(pending.begin() + static_cast<long>(i));
  };
  while (have < expected) {
    std::vector<pollfd> pf{{listenFd_, POLLIN, 0}};
    for (auto& p : pending) pf.push_back({p.fd, POLLIN, 0});
    const int ms = deadline.remainingMs(100);
    if (ms == 0 && deadline.expired()) {
      for (auto& p : pending) close(p.fd);
      return acceptTimeout(*fds);
    }
    if (poll(pf.data(), pf.size(), ms) < 0 && errno != EINTR) return errnoStatus("poll", errno);
    for (int fd; (pf[0].revents & POLLIN) &&
                 (fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;)
      pending.push_back(Pending{fd, {}, 0, peerName(fd)});
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      ssize_t r = recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, 0);
      if (r <= 0) {
        if (r == 0)
          drop(i, "closed before a complete hello");
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          drop(i, strerror(errno));
        continue;
      }
      p.got += static_cast<size_t>(r);
      if (p.got < sizeof(Hello)) continue;
      const char* why = helloMisfit(p.hello, id_, socks, *fds);
      if (*why != '\0') {
        drop(i, why);
        continue;
      }
      (*fds)[p.hello.from][p.hello.sockIdx] = p.fd;
      ++have;
      pending.erase(pending.begin() + static_cast<long>(i));
    }
  }
  for (size_t i = pending.size(); i-- > 0;) drop(i, "unexpected extra connection");
  return Status::ok();
}

void TcpTransport::dropStrangers() {
  for (;;) {
    int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    COLLIE_WARN_LIMITED(
        kLogNet,
        "rank %d: dropped a connection from %s to the tcp transport: the communicator "
        "is already connected (a stranger or a port scanner)",
        id_.rank, peerName(fd).c_str());
    close(fd);
  }
}

}  // namespace collie
