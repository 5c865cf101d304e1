// Socket helpers: address parsing, interface choice, options and deadline-bounded I/O.
#include "transports/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "src/base/log.h"

namespace collie {

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
  }
  return "?";
}

int SockAddr::port() const {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::setPort(int port) {
  if (ss.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
  if (ss.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
}

StatusOr<SockAddr> resolveHost(const std::string& host, int port) {
  if (port < 0 || port > 65535)
    return invalidArgument("port " + std::to_string(port) + " out of range");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return invalidArgument("cannot resolve host '" + host + "': " + gai_strerror(rc));
  SockAddr a;
  memcpy(&a.ss, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  a.setPort(port);
  return a;
}

StatusOr<SockAddr> parseSockAddr(const std::string& hostPort) {
  size_t colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon + 1 >= hostPort.size())
    return invalidArgument("address '" + hostPort + "' is not host:port");
  std::string host = hostPort.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = strtol(hostPort.c_str() + colon + 1, &end, 10);
  if (*end != '\0') return invalidArgument("address '" + hostPort + "' has a bad port");
  return resolveHost(host, static_cast<int>(port));
}

static bool ifnameMatches(const std::string& spec, const char* name) {
  bool exclude = !spec.empty() && spec[0] == '^';
  std::string prefix = exclude ? spec.substr(1) : spec;
  bool match = strncmp(name, prefix.c_str(), prefix.size()) == 0;
  return exclude ? !match : match;
}

StatusOr<SockAddr> pickLocalAddress(const SockAddr* toward, const std::string& spec) {
  if (spec.empty() && toward != nullptr) {
    // Let the kernel's routing table say which local address reaches the peer.
    int fd = socket(toward->family(), SOCK_DGRAM, 0);
    if (fd >= 0) {
      SockAddr a;
      a.len = sizeof(a.ss);
      if (connect(fd, reinterpret_cast<const sockaddr*>(&toward->ss), toward->len) == 0 &&
          getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) == 0) {
        close(fd);
        a.setPort(0);
        return a;
      }
      close(fd);
    }
  }
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return errnoStatus("getifaddrs", errno);
  SockAddr best, loop;
  bool haveBest = false, haveLoop = false;
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
      continue;
    SockAddr a;
    a.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.ss, i->ifa_addr, a.len);
    if (!spec.empty()) {
      if (ifnameMatches(spec, i->ifa_name) &&
          (!haveBest || (fam == AF_INET && best.family() != AF_INET))) {
        best = a;
        haveBest = true;
      }
      continue;
    }
    bool isLoop = (i->ifa_flags & IFF_LOOPBACK) != 0;
    bool isDocker = strncmp(i->ifa_name, "docker", 6) == 0 || strncmp(i->ifa_name, "virbr", 5) == 0;
    if (isLoop) {
      if (!haveLoop || (fam == AF_INET && loop.family() != AF_INET)) loop = a, haveLoop = true;
    } else if (!isDocker && (!haveBest || (fam == AF_INET && best.family() != AF_INET))) {
      best = a;
      haveBest = true;
    }
  }
  freeifaddrs(ifs);
  if (haveBest) return best;
  if (!spec.empty())
    return invalidArgument("socket interface '" + spec +
                           "' (COLLIE_SOCKET_IFNAME or the config's socketIfname) matches no up "
                           "interface with an address");
  if (haveLoop) return loop;
  return systemError("no usable network interface found");
}

StatusOr<int> listenOn(SockAddr* addr, int backlog) {
  int fd = socket(addr->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errnoStatus("socket", errno);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr->ss), addr->len) != 0) {
    int e = errno;
    close(fd);
    return errnoStatus("bind " + addr->toString(), e);
  }
  if (listen(fd, backlog) != 0) {
    int e = errno;
    close(fd);
    return errnoStatus("listen", e);
  }
  addr->len = sizeof(addr->ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr->ss), &addr->len);
  Status s = setNonBlocking(fd, true);
  if (!s.isOk()) {
    close(fd);
    return s;
  }
  return fd;
}

StatusOr<int> connectWithRetry(const SockAddr& addr, const Deadline& deadline) {
  int backoffMs = 1;
  for (;;) {
    int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return errnoStatus("socket", errno);
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int n = poll(&p, 1, deadline.remainingMs());
      if (n == 1) {
        socklen_t l = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) return fd;
    close(fd);
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN;
    if (!retry) return errnoStatus("connect to " + addr.toString(), err);
    if (deadline.expired())
      return timeoutError("connect to " + addr.toString() + " timed out (" + strerror(err) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
    backoffMs = backoffMs < 100 ? backoffMs * 2 : 100;
  }
}

Status setNonBlocking(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl < 0) return errnoStatus("fcntl", errno);
  fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, fl) < 0) return errnoStatus("fcntl", errno);
  return Status::ok();
}

Status setCongestion(int fd, const std::string& name) {
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), name.size()) == 0)
    return Status::ok();
  const int err = errno;
  return invalidArgument(
      "COLLIE_SOCKET_CC=" + name + ": " +
      (err == ENOENT  ? std::string("not a congestion control this kernel has loaded")
       : err == EPERM ? std::string("not one this process may choose (see "
                                    "net.ipv4.tcp_allowed_congestion_control)")
                      : std::string(strerror(err))) +
      "; the available ones are in /proc/sys/net/ipv4/tcp_available_congestion_control");
}

void tuneSocket(int fd, int64_t userTimeoutMs, int bufBytes, const std::string& congestion) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 10, intvl = 5, cnt = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  if (userTimeoutMs > 0) {
    // Without it a link set down is only silence: unacknowledged data is retried for ~15 min.
    unsigned int ut =
        userTimeoutMs > 0x7fffffff ? 0x7fffffff : static_cast<unsigned>(userTimeoutMs);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
  }
  if (bufBytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufBytes, sizeof(bufBytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufBytes, sizeof(bufBytes));
  }
  // Checked on the listening socket when the transport starts (TcpTransport::create).
  if (!congestion.empty()) setCongestion(fd, congestion);
}

Status writeFull(int fd, const void* buf, size_t n, const Deadline& deadline) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pf{fd, POLLOUT, 0};
      int ms = deadline.remainingMs();
      if (ms == 0) return timeoutError("send timed out");
      poll(&pf, 1, ms);
      continue;
    }
    return errnoStatus("send", errno);
  }
  return Status::ok();
}

Status readFull(int fd, void* buf, size_t n, const Deadline& deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return remoteError("connection closed by the other side");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pf{fd, POLLIN, 0};
      int ms = deadline.remainingMs();
      if (ms == 0) return timeoutError("receive timed out");
      poll(&pf, 1, ms);
      continue;
    }
    return errnoStatus("recv", errno);
  }
  return Status::ok();
}

}  // namespace collie
