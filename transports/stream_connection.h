// A Connection over one or more byte streams (TCP sockets, shared-memory rings): each stream
// is a FIFO of framed sends and receives with checked headers. A small message goes whole on
// one stream (round robin), a large one is cut into one stripe per stream; both sides compute
// the same placement from the same sequence of calls.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "transports/p2p_match.h"
#include "transports/transport.h"

namespace collie {

// A non-blocking byte pipe to one peer.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Bytes moved (> 0), 0 when it would block, or -errno: -ESHUTDOWN for an orderly end of the
  // peer's data, anything else for a lost peer.
  virtual ssize_t writev(const iovec* iov, int n) = 0;
  virtual ssize_t read(void* buf, size_t n) = 0;
  // Scatter read with the same results as read (a stream without one reads piece by piece).
  virtual ssize_t readv(const iovec* iov, int n);
  // Waited on with POLLIN/POLLOUT when nothing moves; -1 when the stream has none (shared
  // memory wakes its reader through the transport's doorbell instead).
  virtual int pollFd() const = 0;
  // No more data from this side; the peer reads an orderly end after what was sent.
  virtual void shutdownWrite() = 0;
  // What is written from now on is an abort frame and the rest of a frame begun: a stream that
  // refuses data it cannot take room for (a shared-memory ring without its pages) takes these.
  virtual void prepareAbort() {}
};

struct StreamOptions {
  size_t stripeBytes = 256 << 10;
};

class StreamConnection : public Connection {
 public:
  StreamConnection(int peer, uint64_t commId, std::vector<std::unique_ptr<ByteStream>> streams,
                   const StreamOptions& opt, void* peerBuf = nullptr, void* localBuf = nullptr,
                   size_t bufBytes = 0);
  ~StreamConnection() override;

  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status progress(bool* progressed) override;
  void appendPollFds(std::vector<pollfd>* fds) const override;
  bool hasPending() const override;
  Status checkEarlyFrame(const FrameTag& mine) const override;
  bool p2pArrived(uint32_t tag, uint64_t seq) override { return p2p_.arrived(tag, seq); }
  void* peerBuffer() override { return peerBuf_; }
  void* localBuffer() override { return localBuf_; }
  size_t peerBufferBytes() const override { return bufBytes_; }

  // AbortLink (stream_abort.cc).
  int peer() const override { return peer_; }
  void sendAbort(const Status& failure) override;
  bool sendsQueued() const override;
  Word listenAfterFailure() override;
  bool abortPending() const override;
  bool peerClosed() const override;
  void linger(const Deadline& deadline) override;

 protected:
  // Point-to-point frames that came another way (a shared-memory mailbox): filed as if read from
  // a stream. body holds h.len bytes.
  Status deliverP2P(const FrameHeader& h, const char* body);
  // Moves a side channel's frames in (the mailbox): before a stream's end is judged, so that
  // what the peer sent before it closed is seen.
  virtual Status drainSideChannel(bool* progressed) { return Status::ok(); }
  uint64_t commId() const { return commId_; }
  const Status& failure() const { return failed_; }
  void setP2PPull(PullFn pull) { p2p_.setPull(std::move(pull)); }

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
    std::unique_ptr<ByteStream> io;
    std::deque<SendItem> sends;
    std::deque<RecvItem> recvs;
    FrameHeader hdr{};
    size_t hdrGot = 0;      // bytes of the next frame's header read so far
    size_t drop = 0;        // listening after a failure: bytes of a data frame still to read past
    std::string abortOut;   // this rank's abort frame, after the rest of a frame begun (sends)
    size_t abortOutAt = 0;  // of it written
    bool eof = false;
    std::string stash;   // bytes read past the end of a point-to-point frame, read first
    bool inP2P = false;  // the frame whose header is in hdr is a point-to-point stripe
    StripeSink p2p;      // where that stripe's body goes
  };

  // Splits [0, bytes) into the pieces that go on each socket.
  template <typename Fn>
  void place(size_t bytes, size_t* rr, Fn&& fn);
  Status progressSend(Sock& s, bool* progressed);
  Status progressRecv(Sock& s, bool* progressed);
  // Reads what is missing of the next header: whether it is complete; *r is the last read's
  // result (0: nothing more now, < 0: the stream's end or error).
  bool readHeader(Sock& s, ssize_t* r);
  // A small frame's header and body in one read, straight into the posted buffer.
  Status readSmallFrame(Sock& s, bool* progressed, bool* done);
  // Reads into dst until *got reaches len or the stream has nothing more now.
  Status readUpTo(Sock& s, char* dst, size_t len, size_t* got, bool* progressed);
  // The rest of the body of the frame of the first posted receive; *done once it is in.
  Status readBody(Sock& s, bool* progressed, bool* done);
  // Reads from s's stash first, then from its stream (ByteStream::read's results).
  ssize_t readSome(Sock& s, void* buf, size_t n);
  // Point-to-point (stream_p2p.cc): whether s's complete header is such a frame; placing and
  // reading its body; the sends of one message.
  bool p2pHeader(const Sock& s) const;
  Status readP2PBody(Sock& s, bool* progressed, bool* done);
  Status p2pAfterSmallRead(Sock& s, char* body, size_t bodyBytes);
  void p2pSend(const void* buf, size_t bytes, const FrameTag& tag, Request* req);
  Status lost(const char* what, ssize_t err);
  Status eofError(Sock& s);
  Status fail(Status st);
  void completePart(Request* req);

  // The failure protocol (stream_abort.cc).
  // Reads the peer's abort, whose header is in s.hdr and the first bytes of whose reason
  // are prefix, and fails the connection with it.
  Status readAbort(Sock& s, const std::string& prefix = "");
  // Writes what is left of this rank's abort on s (sendAbort), waiting for room until d, or
  // until nothing moved for idleMs (-1: no such limit): whether all of it went.
  bool pushAbort(Sock& s, const Deadline& d, int64_t idleMs = -1);
  // Listening begins: what was posted is dropped, and the rest of a frame begun is read past.
  void dropPosted();
  // Reads past data on s, a bounded amount: whether the peer spoke (abort, close, loss, junk).
  bool heardOn(Sock& s);

  int peer_;
  uint64_t commId_;
  StreamOptions opt_;
  void* peerBuf_;
  void* localBuf_;
  size_t bufBytes_;
  std::vector<Sock> socks_;
  size_t sendRr_ = 0;  // round-robin cursor for unstriped sends
  size_t recvRr_ = 0;  // and for receives: both sides advance in the same order
  size_t p2pRr_ = 0;   // point-to-point sends: their own cursor, receivers match by content
  P2PMatcher p2p_;
  unsigned rounds_ = 0;  // progress() calls: every kFullRound-th reads the idle sockets too
  Status failed_;
  bool aborted_ = false;    // the peer sent us an abort
  bool abortSent_ = false;  // we sent the peer one
  bool listening_ = false;  // listenAfterFailure() has dropped what was posted
};

}  // namespace collie
