// A TCP socket as a ByteStream: non-blocking vectored reads and writes.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "transports/tcp/tcp_transport.h"

namespace collie {

namespace {

// A bulk read turns delayed ACKs off again (the kernel turns them back on by itself). A step
// ends in a burst whose sender waits for the ACK; held for the delayed-ACK timer, it stalls the
// step. Small reads keep the kernel's choice, so replies still carry their ACK.
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

}  // namespace collie
