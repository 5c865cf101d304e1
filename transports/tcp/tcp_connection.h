// One peer's TCP connection: nsocks non-blocking sockets, each a FIFO of framed sends and
// receives. Message m goes whole on socket (m-th small message % nsocks) when small, and is cut
// into nsocks stripes when large; both sides compute the same placement from the same sequence.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "transports/tcp/tcp_transport.h"

namespace collie {

class TcpConnection : public Connection {
 public:
  TcpConnection(int peer, int myRank, uint64_t commId, std::vector<int> fds,
                const TcpOptions& opt);
  ~TcpConnection() override;

  int peer() const override { return peer_; }
  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status progress(bool* progressed) override;
  void appendPollFds(std::vector<pollfd>* fds) const override;
  void sendAbort(const std::string& reason) override;
  bool hasPending() const override;
  void linger(const Deadline& deadline) override;

 private:
  struct SendItem {
    FrameHeader hdr;
    const char* data;
    size_t len;
    size_t sent;  // of header + data
    Request* req;
  };
  struct RecvItem {
    char* data;
    size_t len;
    size_t got;
    FrameTag expect;
    Request* req;
  };
  struct Sock {
    int fd = -1;
    std::deque<SendItem> sends;
    std::deque<RecvItem> recvs;
    FrameHeader hdr{};
    size_t hdrGot = 0;  // bytes of the next frame's header read so far
    bool eof = false;
  };

  // Splits [0, bytes) into the pieces that go on each socket.
  template <typename Fn>
  void place(size_t bytes, size_t* rr, Fn&& fn);
  Status progressSend(Sock& s, bool* progressed);
  Status progressRecv(Sock& s, bool* progressed);
  Status readAbort(Sock& s);
  Status eofError(Sock& s);
  Status fail(Status st);
  void completePart(Request* req);

  int peer_;
  int myRank_;
  uint64_t commId_;
  TcpOptions opt_;
  std::vector<Sock> socks_;
  size_t sendRr_ = 0;  // round-robin cursor for unstriped sends
  size_t recvRr_ = 0;  // and for receives: both sides advance in the same order
  Status failed_;
  bool aborted_ = false;     // the peer sent us an abort
  bool abortSent_ = false;   // we sent the peer one
};

}  // namespace collie
