// A Connection over one or more byte streams (TCP sockets, shared-memory rings): each stream
// is a FIFO of framed sends and receives with checked headers. A small message goes whole on
// one stream (round robin), a large one is cut into one stripe per stream; both sides compute
// the same placement from the same sequence of calls.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <deque>
#include <functional>
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

  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return sendOn(lanes_[0].get(), buf, bytes, tag, req);
  }
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return recvOn(lanes_[0].get(), buf, bytes, tag, req);
  }
  Status progress(bool* progressed) override;
  void appendPollFds(std::vector<pollfd>* fds) const override;
  bool hasPending() const override;
  Status checkEarlyFrame(const FrameTag& mine) const override {
    return checkEarlyOn(lanes_[0].get(), mine);
  }
  bool p2pArrived(uint32_t tag, uint64_t seq) override { return lanes_[0]->p2p.arrived(tag, seq); }
  void* peerBuffer() override { return peerBuf_; }
  void* localBuffer() override { return localBuf_; }
  size_t peerBufferBytes() const override { return bufBytes_; }
  std::unique_ptr<Connection> openLane(uint64_t commId, uint32_t number) override;

  // AbortLink (stream_abort.cc).
  int peer() const override { return peer_; }
  void sendAbort(const Status& failure) override { sendAbortOn(lanes_[0]->commId, failure); }
  bool sendsQueued() const override;
  Word listenAfterFailure() override;
  bool abortPending() const override;
  bool peerClosed() const override;
  void linger(const Deadline& deadline) override;

 protected:
  // One communicator's share of the connection (stream_lane.cc): lane 0 is the communicator
  // that made it, split children open more. Receives and the round-robin placement are per
  // lane, so that communicators run by different threads never disturb each other's order.
  struct Lane {
    uint64_t commId = 0;
    size_t sendRr = 0;  // round-robin cursor for unstriped sends
    size_t recvRr = 0;  // and for receives: both sides advance in the same order
    size_t p2pRr = 0;   // point-to-point sends: their own cursor, receivers match by content
    P2PMatcher p2p;
  };
  // Reads a rendezvous message of a lane's communicator (see PullFn).
  using LanePullFn = std::function<Status(uint64_t commId, const RendezvousBody& body, char* dst,
                                          size_t bytes, uint32_t tag, uint64_t seq, bool* pulled)>;

  virtual Status sendOn(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag,
                        Request* req);
  Status recvOn(Lane* lane, void* buf, size_t bytes, const FrameTag& tag, Request* req);
  Status checkEarlyOn(const Lane* lane, const FrameTag& mine) const;
  void sendAbortOn(uint64_t commId, const Status& failure);
  // The lane whose frames carry commId; null for none (a closed lane's).
  Lane* laneFor(uint64_t commId) const;
  // Point-to-point frames that came another way (a shared-memory mailbox): filed as if read from
  // a stream. body holds h.len bytes.
  Status deliverP2P(const FrameHeader& h, const char* body);
  // Moves a side channel's frames in (the mailbox): before a stream's end is judged, so that
  // what the peer sent before it closed is seen.
  virtual Status drainSideChannel(bool* progressed) { return Status::ok(); }
  const Status& failure() const { return failed_; }
  void setP2PPull(LanePullFn pull);
  // Sends of a lane as data through the streams (what a transport's own paths fall back to).
  Status streamSend(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag, Request* req);

 private:
  friend class StreamLane;
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
    const Lane* lane;
  };
  // A frame of a lane with no receive posted for it on its stream, read in and kept (only where
  // several lanes share the streams: one lane's frame must not hold up another's).
  struct Early {
    FrameHeader hdr;
    std::string body;
    size_t got = 0;
    const Lane* lane;
  };
  struct Sock {
    std::unique_ptr<ByteStream> io;
    std::deque<SendItem> sends;
    std::deque<RecvItem> recvs;  // every lane's, each lane's in its posting order
    std::deque<Early> early;     // in arrival order
    FrameHeader hdr{};
    size_t hdrGot = 0;      // bytes of the next frame's header read so far
    size_t drop = 0;        // bytes of a data frame still to read past (no one wants it)
    std::string abortOut;   // this rank's abort frame, after the rest of a frame begun (sends)
    size_t abortOutAt = 0;  // of it written
    bool eof = false;
    bool filling = false;      // the frame whose header is in hdr goes into early.back()
    std::string stash;         // bytes read past the end of a frame, read first
    std::vector<char> bounce;  // where a small frame's body lands before its header is known
    bool inP2P = false;        // the frame whose header is in hdr is a point-to-point stripe
    StripeSink p2p;            // where that stripe's body goes
    Lane* p2pLane = nullptr;
  };

  // Splits [0, bytes) into the pieces that go on each socket.
  template <typename Fn>
  void place(size_t bytes, size_t* rr, Fn&& fn);
  Status progressSend(Sock& s, bool* progressed);
  Status progressRecv(Sock& s, bool* progressed);
  // The frame whose header is complete in s.hdr, of a data lane: into its receive, kept early,
  // read past, or left (a single lane with nothing posted); *done when the next header is due.
  Status routeFrame(Sock& s, bool* progressed, bool* done);
  // Reads what is missing of the next header: whether it is complete; *r is the last read's
  // result (0: nothing more now, < 0: the stream's end or error).
  bool readHeader(Sock& s, ssize_t* r);
  // A small frame's header and body in one read, straight into the posted buffer.
  Status readSmallFrame(Sock& s, bool* progressed, bool* done);
  // Reads into dst until *got reaches len or the stream has nothing more now.
  Status readUpTo(Sock& s, char* dst, size_t len, size_t* got, bool* progressed);
  // The rest of the body of the frame of receive it; *done once it is in.
  Status readBody(Sock& s, std::deque<RecvItem>::iterator it, bool* progressed, bool* done);
  // Reads from s's stash first, then from its stream (ByteStream::read's results).
  ssize_t readSome(Sock& s, void* buf, size_t n);
  // The first receive of lane posted on s (end() for none).
  static std::deque<RecvItem>::iterator firstOf(Sock& s, const Lane* lane);
  bool anyP2PWaiting() const;
  // Lanes (stream_lane.cc): keeping a frame early, handing it to a receive posted later, and
  // reading past a frame no lane wants.
  Status fillEarly(Sock& s, bool* progressed, bool* done);
  Status takeEarly(const Early& e, RecvItem& it);
  // A receive of lane just posted takes the frames that came before it, once every part of it
  // is counted.
  Status takeEarlyFrames(const Lane* lane, Request* req);
  Status skipFrame(Sock& s, bool* progressed, bool* done);
  void closeLane(Lane* lane);
  // Point-to-point (stream_p2p.cc): whether s's complete header is such a frame; placing and
  // reading its body; the sends of one message.
  bool p2pHeader(const Sock& s) const;
  Status readP2PBody(Sock& s, bool* progressed, bool* done);
  Status p2pAfterSmallRead(Sock& s, const char* body, size_t bodyBytes);
  void p2pSend(Lane* lane, const void* buf, size_t bytes, const FrameTag& tag, Request* req);
  Status lost(const char* what, ssize_t err);
  Status eofError(Sock& s);
  Status fail(Status st);
  // fail() for a stream that closed or broke with no abort before it (listenAfterFailure's
  // kLost).
  Status failLost(Status st);
  void completePart(Request* req);

  // The failure protocol (stream_abort.cc).
  // Reads the peer's abort, whose header is in s.hdr and the first bytes of whose reason
  // are prefix, and fails the connection with it.
  Status readAbort(Sock& s, const std::string& prefix = "");
  bool abortHeader(const FrameHeader& h) const {
    return h.magic == kAbortMagic && laneFor(h.commId) != nullptr;
  }
  // Writes what is left of this rank's abort on s (sendAbort), waiting for room until d, or
  // until nothing moved for idleMs (-1: no such limit): whether all of it went.
  bool pushAbort(Sock& s, const Deadline& d, int64_t idleMs = -1);
  // Listening begins: what was posted is dropped, and the rest of a frame begun is read past.
  void dropPosted();
  // Reads past data on s, a bounded amount: whether the peer spoke (abort, close, loss, junk).
  bool heardOn(Sock& s);

  int peer_;
  StreamOptions opt_;
  void* peerBuf_;
  void* localBuf_;
  size_t bufBytes_;
  std::vector<Sock> socks_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // [0]: the communicator that made the connection
  bool laned_ = false;  // lanes were opened: frames of unknown communicators are read past
  LanePullFn pull_;
  unsigned rounds_ = 0;  // progress() calls: every kFullRound-th reads the idle sockets too
  Status failed_;
  bool lostLink_ = false;   // failed_ is the link's loss, not the peer's word
  bool aborted_ = false;    // the peer sent us an abort
  bool abortSent_ = false;  // we sent the peer one
  bool listening_ = false;  // listenAfterFailure() has dropped what was posted
};

}  // namespace collie
