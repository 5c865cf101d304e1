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

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace collie::limits {
namespace {

using Clock = std::chrono::steady_clock;

void pinTo(int cpu) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu <= 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % ncpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Sends (when send) for `seconds`, then half-closes; receives (when recv) until the peer's
// half-close. Returns bytes received per second of the receive window, or -1 on error.
double pump(int fd, bool send, bool recv, double seconds) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::vector<char> out(1 << 20, 'x'), in(1 << 20);
  Clock::time_point start = Clock::now();
  Clock::time_point stopSending =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  Clock::time_point deadline = stopSending + std::chrono::seconds(10);
  bool sending = send, receiving = recv;
  size_t got = 0;
  Clock::time_point lastByte = start;
  while (sending || receiving) {
    Clock::time_point now = Clock::now();
    if (now > deadline) return -1;
    if (sending && now >= stopSending) {
      shutdown(fd, SHUT_WR);
      sending = false;
      continue;
    }
    pollfd p{fd, static_cast<short>((sending ? POLLOUT : 0) | (receiving ? POLLIN : 0)), 0};
    if (poll(&p, 1, 100) < 0 && errno != EINTR) return -1;
    if (sending && (p.revents & POLLOUT)) {
      ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
    }
    if (receiving && (p.revents & (POLLIN | POLLHUP))) {
      ssize_t n = ::recv(fd, in.data(), in.size(), 0);
      if (n == 0) receiving = false;
      if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
      if (n > 0) {
        got += static_cast<size_t>(n);
        lastByte = Clock::now();
      }
    }
  }
  double window = std::chrono::duration<double>(lastByte - start).count();
  return recv ? (window > 0 ? got / window : 0) : 0;
}

// One phase: the child connects and pumps, the parent accepts and pumps; both rates summed
// over the directions that received, divided by how many did.
double phase(bool bidir, double seconds) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(lfd, 1) != 0 || getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (lfd >= 0) close(lfd);
    return -1;
  }
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    pinTo(1);
    close(pipeFds[0]);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    double rate = -1;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      rate = pump(fd, bidir, true, seconds);
    }
    ssize_t w = write(pipeFds[1], &rate, sizeof(rate));
    _exit(w == sizeof(rate) ? 0 : 1);
  }
  close(pipeFds[1]);
  cpu_set_t saved;
  bool restore = sched_getaffinity(0, sizeof(saved), &saved) == 0;
  pinTo(0);
  double total = -1;
  pollfd p{lfd, POLLIN, 0};
  if (child > 0 && poll(&p, 1, 10000) == 1) {
    int fd = accept(lfd, nullptr, nullptr);
    double mine = pump(fd, true, bidir, seconds);
    close(fd);
    double theirs = -1;
    pollfd q{pipeFds[0], POLLIN, 0};
    if (poll(&q, 1, 10000) == 1 && read(pipeFds[0], &theirs, sizeof(theirs)) == sizeof(theirs) &&
        mine >= 0 && theirs >= 0) {
      total = bidir ? (mine + theirs) / 2 : theirs;
    }
  }
  if (child > 0) {
    kill(child, SIGKILL);  // gone already unless it hung; the deadline above bounds the wait
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
  double one = phase(false, seconds);
  double both = phase(true, seconds);
  r.ok = one > 0 && both > 0;
  r.oneWayGBs = one / 1e9;
  r.bidirGBs = both / 1e9;
  return r;
}

}  // namespace collie::limits
