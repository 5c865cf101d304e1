// What the two store targets share: the job's identity their seeds prove, and a whole exchange
// of bytes over a socket (all of ours sent, then the write side shut, then all of the peer's
// read until it closes).
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "src/core/bootstrap/store.h"
#include "tests/fuzz/fuzz_input.h"

namespace collie::fuzz {

inline StoreAuth storeAuth() {
  StoreAuth a;
  for (int i = 0; i < 16; ++i) a.secret[i] = static_cast<uint8_t>(0xa0 + i);
  a.commId = 0x73746f7265ULL;
  return a;
}

// Sends out on fd (non-blocking) and reads what comes back until the peer closes; false when it
// has not closed within timeoutMs (a hang).
inline bool exchange(int fd, const std::string& out, std::string* got, int timeoutMs) {
  size_t sent = 0;
  bool shut = false;
  char buf[65536];
  for (;;) {
    if (sent == out.size() && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    // libFuzzer's timeout alarm interrupts poll every second: only a real timeout counts.
    const int n = poll(&p, 1, timeoutMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (p.revents & POLLOUT) {
      const ssize_t w = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN) sent = out.size();  // the peer is gone: read what it said
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t r = recv(fd, buf, sizeof(buf), 0);
      if (r == 0 || (r < 0 && errno != EAGAIN)) return true;
      if (r > 0) got->append(buf, static_cast<size_t>(r));
    }
  }
}

}  // namespace collie::fuzz
