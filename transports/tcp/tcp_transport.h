// TCP transport: a full mesh of non-blocking sockets, framed messages with checked headers, large
// messages striped over all of a peer's sockets. Driven by whichever thread runs the schedule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/stream_connection.h"
#include "transports/tcp/socket.h"
#include "transports/tcp/tcp_hello.h"
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
  int nsocks = 2;  // sockets to each peer; 0: by where the peer is (socketsFor)
  size_t stripeBytes = 256 << 10;
  int bufBytes = 4 << 20;   // SO_SNDBUF/SO_RCVBUF of every socket (0: the kernel's)
  bool bufPerPeer = false;  // bufBytes unset: sized by where the peer is (bufferFor)
  int64_t userTimeoutMs = 300000;
  std::string congestion;  // TCP congestion control of the data sockets; "" the system's
};

// How many sockets and how much socket buffer a peer gets where the user set neither. A peer on
// this host gets several sockets (loopback copies stripes in parallel) and large buffers (fewer
// wake-ups); a peer across a network one flow, whose congestion window stays in use, and
// buffers small enough that a rank that starts a step early does not queue megabytes ahead.
int socketsFor(const TcpOptions& opt, bool sameHost);
int bufferFor(const TcpOptions& opt, bool sameHost);

// Why a complete hello does not belong to id's mesh ("" where it does): socks[p] sockets go to
// peer p, and fds[p][i] >= 0 where socket i to peer p is connected already. Its own function so
// that the bytes a stranger can send are checked the same way in tests and fuzzing.
const char* helloMisfit(const Hello& h, const Identity& id, const std::vector<int>& socks,
                        const std::vector<std::vector<int>>& fds);

class TcpTransport : public Transport {
 public:
  ~TcpTransport() override;
  const char* name() const override { return "tcp"; }

  // Listens on `local` (its port is ignored: any free port).
  static StatusOr<std::unique_ptr<TcpTransport>> create(const Identity& id, const TcpOptions& opt,
                                                        SockAddr local);
  // The address peers connect to, as "host:port" bytes.
  std::string address() const { return addr_.toString(); }

  bool canConnect(const RankPlace&, const RankPlace&) const override { return true; }
  std::string localAddress() const override { return address(); }
  // One peer alone: this rank dials a higher rank and accepts a lower one.
  StatusOr<std::unique_ptr<Connection>> connect(int peer, const std::string& peerBytes) override;
  // Exchanges the listen addresses and connects the mesh with socketsFor/bufferFor each peer.
  Status connectGroup(ConnectStep* step, ConnectionTable* conns) override;
  void threadIdle() override { dropStrangers(); }

  // Connects to every peer (addrs[r] is rank r's address): this rank dials higher ranks and
  // accepts lower ones, checking each hello. Strangers are dropped with a WARN.
  // socks[p] sockets go to peer p, 1 to 64, and both ranks of a pair must ask the same count;
  // a peer with 0 is not connected (it uses another transport) and conns[p] is left alone.
  // bufBytes[p], where given, is the SO_SNDBUF/SO_RCVBUF of the sockets to peer p (0: the
  // kernel's); opt.bufBytes otherwise.
  Status connectAll(const std::vector<std::string>& addrs, const std::vector<int>& socks,
                    const Deadline& deadline, ConnectionTable* conns,
                    const std::vector<int>& bufBytes = {});
  // The same with opt.nsocks sockets to each peer with want[p].
  Status connectAll(const std::vector<std::string>& addrs, const std::vector<bool>& want,
                    const Deadline& deadline, ConnectionTable* conns);
  // After init every connection to the listener is a stranger: accept and drop each one.
  int listenFd() const { return listenFd_; }
  void dropStrangers();

 private:
  using FdTable = std::vector<std::vector<int>>;  // [peer][socket]
  TcpTransport(const Identity& id, const TcpOptions& opt) : id_(id), opt_(opt) {}
  Status checkCounts(const std::vector<std::string>& addrs, const std::vector<int>& socks,
                     const std::vector<int>& bufBytes) const;
  Status dialHigher(const std::vector<std::string>& addrs, const std::vector<int>& socks,
                    const Deadline& deadline, FdTable* fds);
  Status dialOne(const SockAddr& addr, int peer, int sockIdx, int nsocks, const Deadline& deadline,
                 int* fd);
  Status acceptPeers(int expected, const std::vector<int>& socks, const Deadline& deadline,
                     FdTable* fds);
  Status acceptTimeout(const FdTable& fds) const;
  void wrap(FdTable* fds, const std::vector<int>& bufBytes, ConnectionTable* conns) const;

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
