// Small POSIX socket helpers shared by the TCP transport and the TCP store: addresses,
// interface selection, socket options, and whole-buffer I/O with deadlines.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/status.h"
#include "src/base/time.h"

namespace collie {

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string toString() const;  // "1.2.3.4:5" or "[::1]:5"
  int port() const;
  void setPort(int port);
  int family() const { return ss.ss_family; }
};

// "host:port", "[v6]:port"; host is resolved numerically first, then by name.
StatusOr<SockAddr> parseSockAddr(const std::string& hostPort);
StatusOr<SockAddr> resolveHost(const std::string& host, int port);

// The address this host should listen on and advertise: ifname's interface when not empty (a
// name or prefix; "^name" excludes; COLLIE_SOCKET_IFNAME or a communicator's config), else the
// source address the kernel would use to reach `toward` when given, else the first up
// non-loopback interface, else loopback.
StatusOr<SockAddr> pickLocalAddress(const SockAddr* toward, const std::string& ifname);

// Listens on addr (port 0 = any) with SO_REUSEADDR; returns the fd and fills the bound address.
StatusOr<int> listenOn(SockAddr* addr, int backlog);
// Connects with a deadline, retrying while the peer is not listening yet (ECONNREFUSED).
StatusOr<int> connectWithRetry(const SockAddr& addr, const Deadline& deadline);

Status setNonBlocking(int fd, bool on);
// TCP_NODELAY, keepalive (idle/interval/count), TCP_USER_TIMEOUT, optional buffer sizes.
void tuneSocket(int fd, int64_t userTimeoutMs, int bufBytes, const std::string& congestion = "");
// Sets fd's TCP congestion control (TCP_CONGESTION); an error names the algorithm and why.
Status setCongestion(int fd, const std::string& name);

// Blocking-style whole-buffer I/O on a non-blocking fd, bounded by the deadline.
Status writeFull(int fd, const void* buf, size_t n, const Deadline& deadline);
Status readFull(int fd, void* buf, size_t n, const Deadline& deadline);

}  // namespace collie
