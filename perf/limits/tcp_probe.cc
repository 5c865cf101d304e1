// Loopback TCP throughput probe (see tcp_probe.h).
#include "perf/limits/tcp_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "perf/limits/pin.h"

namespace collie::limits {
namespace {

using Clock = std::chrono::steady_clock;

void setBuffers(int fd) {
  int bytes = 4 << 20;  // as Collie's tcp transport asks for
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// On every socket: sends (when send) for `seconds`, then half-closes; receives (when recv)
// until the peer's half-close. Returns bytes received per second of the receive window, or -1
// on error.
double pump(const std::vector<int>& fds, bool send, bool recv, double seconds) {
  std::vector<char> out(1 << 20, 'x'), in(1 << 20);
  Clock::time_point start = Clock::now();
  Clock::time_point stopSending =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  Clock::time_point deadline = stopSending + std::chrono::seconds(10);
  std::vector<char> sending(fds.size(), send), receiving(fds.size(), recv);
  size_t got = 0, open = fds.size();
  Clock::time_point lastByte = start;
  std::vector<pollfd> p(fds.size());
  while (open > 0) {
    Clock::time_point now = Clock::now();
    if (now > deadline) return -1;
    open = 0;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (sending[i] && now >= stopSending) {
        shutdown(fds[i], SHUT_WR);
        sending[i] = false;
      }
      p[i] = {fds[i], static_cast<short>((sending[i] ? POLLOUT : 0) | (receiving[i] ? POLLIN : 0)),
              0};
      if (sending[i] || receiving[i]) ++open;
    }
    if (open == 0) break;
    if (poll(p.data(), p.size(), 100) < 0 && errno != EINTR) return -1;
    // Several calls per wake-up, until the socket has no room or no data: one poll per
    // kernel buffer's worth, as a transport that drains its sockets does.
    for (size_t i = 0; i < fds.size(); ++i) {
      for (int k = 0; k < 16 && sending[i] && (p[i].revents & POLLOUT); ++k) {
        ssize_t n = ::send(fds[i], out.data(), out.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
        if (n <= 0) break;
      }
      for (int k = 0; k < 16 && receiving[i] && (p[i].revents & (POLLIN | POLLHUP)); ++k) {
        ssize_t n = ::recv(fds[i], in.data(), in.size(), 0);
        if (n == 0) receiving[i] = false;
        if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
        lastByte = Clock::now();
      }
    }
  }
  double window = std::chrono::duration<double>(lastByte - start).count();
  return recv ? (window > 0 ? got / window : 0) : 0;
}

void closeAll(const std::vector<int>& fds) {
  for (int fd : fds) close(fd);
}

// One phase over `streams` connections: the child connects and pumps, the parent accepts and
// pumps; the rates of the directions that received, averaged.
double phase(bool bidir, double seconds, int streams) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(lfd, streams) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (lfd >= 0) close(lfd);
    return -1;
  }
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    pinThisThread(1);
    close(pipeFds[0]);
    std::vector<int> fds;
    double rate = -1;
    bool connected = true;
    for (int i = 0; i < streams && connected; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      setBuffers(fd);
      fds.push_back(fd);
      // Non-blocking connect on loopback: in progress until the listener's backlog takes it.
      connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ||
                  errno == EINPROGRESS;
    }
    if (connected) rate = pump(fds, bidir, true, seconds);
    closeAll(fds);
    ssize_t w = write(pipeFds[1], &rate, sizeof(rate));
    _exit(w == sizeof(rate) ? 0 : 1);
  }
  close(pipeFds[1]);
  cpu_set_t saved;
  bool restore = sched_getaffinity(0, sizeof(saved), &saved) == 0;
  pinThisThread(0);
  double total = -1;
  std::vector<int> fds;
  for (int i = 0; i < streams && child > 0; ++i) {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) break;
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) break;
    setBuffers(fd);
    fds.push_back(fd);
  }
  if (static_cast<int>(fds.size()) == streams) {
    double mine = pump(fds, true, bidir, seconds);
    double theirs = -1;
    pollfd q{pipeFds[0], POLLIN, 0};
    if (poll(&q, 1, 15000) == 1 && read(pipeFds[0], &theirs, sizeof(theirs)) == sizeof(theirs) &&
        mine >= 0 && theirs >= 0) {
      total = bidir ? (mine + theirs) / 2 : theirs;
    }
  }
  closeAll(fds);
  if (child > 0) {
    kill(child, SIGKILL);  // exited already unless it hung; the deadlines above bound the wait
    waitpid(child, nullptr, 0);
  }
  close(pipeFds[0]);
  close(lfd);
  if (restore) sched_setaffinity(0, sizeof(saved), &saved);
  return total;
}

}  // namespace

TcpRates measureTcp(double seconds) {
  TcpRates r;
  // The best of one to three connections (Collie stripes over COLLIE_NSOCKS, on one host 3 by
  // default).
  double one = 0, both = 0;
  for (int streams = 1; streams <= 3; ++streams) {
    one = std::max(one, phase(false, seconds, streams));
    both = std::max(both, phase(true, seconds, streams));
  }
  r.ok = one > 0 && both > 0;
  r.oneWayGBs = one / 1e9;
  r.bidirGBs = both / 1e9;
  return r;
}

}  // namespace collie::limits
