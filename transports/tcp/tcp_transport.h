// TCP transport: a full mesh of non-blocking sockets (COLLIE_NSOCKS per peer), framed messages
// with checked headers, large messages striped over all of a peer's sockets. Driven by whichever
// thread runs the schedule; no thread of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/stream_connection.h"
#include "transports/tcp/socket.h"
#include "transports/transport.h"

namespace collie {

// Who we are, as proved to every peer in the connection handshake.
struct Identity {
  uint8_t secret[16] = {};
  uint64_t commId = 0;
  int rank = 0;
  int nranks = 1;
};

struct TcpOptions {
  int nsocks = 2;  // sockets to each peer connectAll(want) connects; 0: the caller gives counts
  size_t stripeBytes = 256 << 10;
  int bufBytes = 4 << 20;  // SO_SNDBUF/SO_RCVBUF of every socket (0: the kernel's)
  int64_t userTimeoutMs = 300000;
  std::string congestion;  // TCP congestion control of the data sockets; "" the system's
};

class TcpTransport : public Transport {
 public:
  ~TcpTransport() override;
  const char* name() const override { return "tcp"; }

  // Listens on `local` (its port is ignored: any free port).
  static StatusOr<std::unique_ptr<TcpTransport>> create(const Identity& id, const TcpOptions& opt,
                                                        SockAddr local);
  // The address peers connect to, as "host:port" bytes.
  std::string address() const { return addr_.toString(); }
  // Connects to every peer (addrs[r] is rank r's address): this rank dials higher ranks and
  // accepts lower ones, checking each hello. Strangers are dropped with a WARN.
  // socks[p] sockets go to peer p, 1 to 64, and both ranks of a pair must ask the same count;
  // a peer with 0 is not connected (it uses another transport) and conns[p] is left alone.
  // bufBytes[p], where given, is the SO_SNDBUF/SO_RCVBUF of the sockets to peer p (0: the
  // kernel's); opt.bufBytes otherwise.
  Status connectAll(const std::vector<std::string>& addrs, const std::vector<int>& socks,
                    const Deadline& deadline, std::vector<std::unique_ptr<Connection>>* conns,
                    const std::vector<int>& bufBytes = {});
  // The same with opt.nsocks sockets to each peer with want[p].
  Status connectAll(const std::vector<std::string>& addrs, const std::vector<bool>& want,
                    const Deadline& deadline, std::vector<std::unique_ptr<Connection>>* conns);
  // After init every connection to the listener is a stranger: accept and drop each one.
  int listenFd() const { return listenFd_; }
  void dropStrangers();

 private:
  TcpTransport(const Identity& id, const TcpOptions& opt) : id_(id), opt_(opt) {}
  Status acceptPeers(int expected, const std::vector<int>& socks, const Deadline& deadline,
                     std::vector<std::vector<int>>* fds);

  Identity id_;
  TcpOptions opt_;
  SockAddr addr_;
  int listenFd_ = -1;
};

// A TCP socket as a ByteStream of a StreamConnection.
class TcpStream : public ByteStream {
 public:
  explicit TcpStream(int fd) : fd_(fd) {}
  ~TcpStream() override;
  ssize_t writev(const iovec* iov, int n) override;
  ssize_t read(void* buf, size_t n) override;
  ssize_t readv(const iovec* iov, int n) override;
  int pollFd() const override { return fd_; }
  void shutdownWrite() override;

 private:
  int fd_;
};

}  // namespace collie
