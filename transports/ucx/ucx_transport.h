// UCX transport: one ucp context and worker per communicator, one endpoint per peer (error
// handling mode PEER, so a dead peer is an error, not a hang), and tagged messages that carry
// the same 48-byte FrameHeader as the stream transports, checked by the receiver. The worker is
// progressed by whichever thread runs the schedule (the Poller calls Connection::progress) and
// slept on through its event fd. UCX picks its own devices: UCX_TLS and UCX_NET_DEVICES apply.
// Every endpoint begins with a hello that proves the job's secret (ucx_hello.cc) and ends with a
// goodbye (ucx_goodbye.cc).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_api.h"

namespace collie {

class UcxConnection;
class UcxTransport;

// The tags of the control messages a rank sends: its abort frame, its goodbye and its hello
// (ucx_connection.cc has the tag layout).
ucp_tag_t ucxAbortTag(int sender);
ucp_tag_t ucxGoodbyeTag(int sender);
ucp_tag_t ucxHelloTag(int sender);

// The first message on every UCX endpoint of a communicator: who speaks to whom, proved by the
// job's secret. No frame of a peer is taken before its hello passed (ucx_hello.cc).
constexpr uint32_t kUcxHelloMagic = 0x434c5548;  // "CLUH"
constexpr uint32_t kUcxHelloVersion = 1;
struct UcxHello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[16];
  uint64_t commId;
  int32_t from, to, nranks;
  uint32_t pad;
};
static_assert(sizeof(UcxHello) == 48, "the UCX hello is 48 bytes");
UcxHello makeUcxHello(const Identity& id, int to);
// Why a hello received from the endpoint of peer does not prove id's job ("" where it does).
const char* ucxHelloMisfit(const UcxHello& h, const Identity& id, int peer);

// One lane's message counts as a goodbye carries them: what the leaving rank sent to the peer
// and received from it (collective frames by sequence, point-to-point ones by count).
struct UcxLaneCounts {
  uint32_t lane = 0;
  uint32_t pad = 0;
  uint64_t sent = 0, received = 0, p2pSent = 0, p2pReceived = 0;
};

// One send or receive in flight in UCX. Owned by the transport (UCX's callbacks may fire after
// the connection that started it is gone, until the worker is destroyed).
struct UcxOp {
  enum Kind : uint8_t { kSend, kRecv, kAbortSend, kAbortRecv, kByeSend, kByeRecv };
  UcxTransport* owner = nullptr;
  UcxConnection* conn = nullptr;  // null once the connection is gone
  Request* req = nullptr;         // null once nobody waits for it any more (detached)
  // A large frame is two UCX messages of one tag, the header then the payload (contiguous, so
  // UCX moves it zero-copy); a small one is one message, copied through `bounce`.
  enum Part : uint8_t { kPayload = 0, kHeader = 1 };
  void* handle[2] = {nullptr, nullptr};  // UCX's requests while in flight, by Part
  bool early[2] = {false, false};        // completed inside the call that posted it
  int parts = 0;                         // UCX messages not complete yet
  Kind kind = kSend;
  bool small = false;
  bool cancelled = false;
  bool posting = false;          // inside the UCX calls that start it
  ucs_status_t status = UCS_OK;  // the first failure of a part
  size_t length = 0;             // received: the payload's bytes (a small frame's whole)
  size_t hdrLength = 0;          // and the header message's
  size_t slot = 0;               // index in the connection's in-flight list
  FrameHeader hdr{};
  ucp_dt_iov_t iov{};    // the payload, where it goes as an iov
  char* data = nullptr;  // the caller's buffer
  size_t len = 0;        // its length (the payload expected or sent)
  FrameTag expect;
  uint64_t commId = 0;  // of the lane it belongs to: what its frame must carry
  uint32_t lane = 0;    // that lane's number
  uint64_t seq = 0;     // a collective frame's number on its lane
  bool p2p = false;     // a point-to-point frame
  std::vector<char> bounce;

  // Ready for its next use, field by field rather than by assigning a fresh op, which would
  // clear all of it on the small-message path: hdr, iov and expect are written by each use that
  // reads them, and bounce keeps its capacity for the next small frame.
  void reset() {
    conn = nullptr;
    req = nullptr;
    handle[0] = handle[1] = nullptr;
    early[0] = early[1] = false;
    parts = 0;
    kind = kSend;
    small = cancelled = posting = p2p = false;
    status = UCS_OK;
    length = hdrLength = slot = len = 0;
    data = nullptr;
    commId = seq = 0;
    lane = 0;
    bounce.clear();
  }
};

class UcxTransport : public Transport {
 public:
  ~UcxTransport() override;
  const char* name() const override { return "ucx"; }

  // Creates the context and the worker. With needRdma, a host whose UCX offers no RDMA resource
  // (InfiniBand, RoCE: rc/dc/ud transports) gets a null transport and an ok status: UCX works
  // there but would bring nothing that tcp does not.
  static StatusOr<std::unique_ptr<UcxTransport>> create(int rank, int nranks, uint64_t commId,
                                                        bool needRdma);
  // For the communicator: UCX is initialised in connectGroup. required (the user named ucx):
  // it reaches peers on this host too, and any failure to set it up is an error; else it is for
  // peers on other hosts where RDMA is present, and tcp takes them otherwise.
  static std::unique_ptr<UcxTransport> forGroup(const Identity& id, bool required);
  // The worker address peers connect to (raw bytes).
  const std::string& address() const { return address_; }

  bool canConnect(const RankPlace& local, const RankPlace& peer) const override {
    return required_ || local.host != peer.host;
  }
  std::string localAddress() const override { return address_; }
  // An endpoint to the peer with this worker address; messages can be posted at once.
  StatusOr<std::unique_ptr<Connection>> connect(int peer, const std::string& peerAddress) override;
  // Publishes the worker address, or why there is none, and connects the peers that have one
  // (ucx_setup.cc).
  Status connectGroup(ConnectStep* step, ConnectionTable* conns) override;
  // Why peer cannot use UCX, from what it published ("" where it can; *addr its address).
  // theirs: the worker address in hex, then "/pid/pid-namespace" (ucx_setup.cc); *pid the
  // peer's pid where its namespace is this process's, else 0.
  static std::string unusable(const std::string& theirs, std::string* addr, int* pid);
  // Every connection's endpoint carries id's hello, and each peer's hello is checked (a wrong
  // one is dropped at WARN): an error naming the peers that proved nothing by the deadline.
  Status proveSecret(const Identity& id, const Deadline& deadline);
  // Before the connections go: each healthy one says goodbye, then waits (until deadline) for
  // its peer's goodbye, abort or loss, so that no endpoint closes under data the peer still
  // reads (ucx_goodbye.cc).
  void farewell(const Deadline& deadline) override;

 private:
  friend class UcxConnection;
  UcxTransport() = default;
  // connect() for a peer whose process this rank can watch (pid > 0: same host and PID
  // namespace): where its endpoint cannot report a dead peer (error handling mode NONE, UCX's
  // shared memory alone), the connection watches the process instead.
  StatusOr<std::unique_ptr<Connection>> connectPeer(int peer, const std::string& peerAddress,
                                                    int pid);
  Status giveUp(ConnectStep* step, const Status& made);
  Status init(int rank, int nranks, uint64_t commId, bool needRdma);
  // Notes what the context uses (resources as UCX names them: "tcp/eth0").
  void listResources(const std::vector<std::string>& resources);
  UcxOp* takeOp();
  void releaseOp(UcxOp* op);
  // The communicator failed: no Request of any connection may be touched again, and posted
  // receives are cancelled so that UCX stops writing into the callers' buffers.
  void detachAll();
  // The connection is gone; its endpoint is closed with the transport, once flushRequest (if
  // any) completes.
  void retire(UcxConnection* conn, ucp_ep_h ep, bool peerMode, void* flushRequest);
  // Progresses the worker until every request is complete or the deadline passes; frees all.
  void waitAndFree(std::vector<void*>* requests, const Deadline& deadline);
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // Sleeps on the worker's event fd up to ms, unless it has events pending.
  void idle(int ms);

  const UcxApi* api_ = nullptr;
  Identity id_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  uint64_t commId_ = 0;
  bool required_ = false;
  int efd_ = -1;      // the worker's event fd (owned by UCX)
  int readyFd_ = -1;  // always readable: polled instead of efd_ when events are pending
  bool rdma_ = false;
  bool detectsFailure_ = false;  // some transport in use can report a dead peer
  bool warnedNoFailureMode_ = false;
  std::string address_;
  std::string resources_;                    // what UCX chose to use, e.g. "tcp/eth0 posix/memory"
  std::vector<std::unique_ptr<UcxOp>> ops_;  // every op ever made, reused through free_
  std::vector<UcxOp*> free_;
  std::vector<UcxConnection*> conns_;  // live connections
  struct Retired {
    ucp_ep_h ep;
    bool peerMode;
  };
  std::vector<Retired> retired_;  // endpoints of destroyed connections, not closed yet
  std::vector<void*> flushing_;   // their flushes still in flight
  uint64_t completions_ = 0;      // ops of any connection completed so far
};

class UcxConnection : public Connection {
 public:
  // peerMode: the endpoint has error handling mode PEER (else NONE, where it cannot be had).
  // peerPid: the peer's process where this rank watches it (same host), else 0.
  UcxConnection(UcxTransport* transport, int peer, ucp_ep_h ep, bool peerMode, int peerPid);
  ~UcxConnection() override;

  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return sendOn(lane0_, buf, bytes, tag, req);
  }
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return recvOn(lane0_, buf, bytes, tag, req);
  }
  bool p2pArrived(uint32_t tag, uint64_t) override { return arrivedOn(lane0_, tag); }
  // UCX keeps a message no receive was posted for: a lane may open after its peer's first send.
  std::unique_ptr<Connection> openLane(uint64_t commId, uint32_t number) override;
  bool lanesOpenLate() const override { return true; }
  Status progress(bool* progressed) override;
  void appendPollFds(std::vector<pollfd>* fds) const override;
  bool hasPending() const override { return userInFlight_ > 0 || !failed_.isOk() || opFailed_; }

  // AbortLink: the abort is a message on its own tag channel, its receive always posted.
  int peer() const override { return peer_; }
  void sendAbort(const Status& failure) override { sendAbortOn(lane0_.commId, failure); }
  // The peer has spoken once its abort or goodbye arrived (those receives stay posted) or its
  // endpoint failed (it died or closed); progress here moves them.
  Word listenAfterFailure() override;
  bool peerClosed() const override { return epFailed_ || byeHeard_; }
  void linger(const Deadline& deadline) override;

  // Called from UCX's callbacks (inside ucp_worker_progress, of any connection of the worker).
  void onDone(UcxOp* op, ucs_status_t status, size_t length);
  void onEndpointError(ucs_status_t status);
  ucp_ep_h endpoint() const { return ep_; }
  // Forgets the callers' requests of every op in flight and cancels the receives.
  void detach();
  // The receives of the peer's abort frame and goodbye, posted for the connection's whole life.
  Status postAbortRecv();
  Status postByeRecv();
  // Sends this rank's goodbye where the connection is healthy; false where there is no one to
  // tell (failed, aborted, or the endpoint is gone).
  bool sayGoodbye();
  // The peer has said its last: goodbye, abort, or its endpoint failed.
  bool peerLeft() const { return byeHeard_ || aborted_ || epFailed_ || !failed_.isOk(); }

 private:
  friend class UcxLane;
  // One communicator's share (ucx_lane.cc): the id its frames carry, its number in the tags
  // (lane 0: the communicator that made the connection) and its own message counts.
  struct Lane {
    uint64_t commId = 0;
    uint32_t number = 0;
    uint64_t sendSeq = 0;  // messages to the peer so far: the low bits of their tags
    uint64_t recvSeq = 0;  // and from it: both sides count the same calls in the same order
    uint64_t p2pSent = 0;  // point-to-point messages sent to the peer
    uint64_t p2pRecv = 0;  // and received from it
  };
  static UcxLaneCounts countsOf(const Lane& l);
  Lane* laneNumbered(uint32_t number);
  // A lane closes: its counts stay for the goodbye.
  void laneClosed(const Lane& l);
  Status sendOn(Lane& lane, const void* buf, size_t bytes, const FrameTag& tag, Request* req);
  Status recvOn(Lane& lane, void* buf, size_t bytes, const FrameTag& tag, Request* req);
  bool arrivedOn(const Lane& lane, uint32_t tag);
  void sendAbortOn(uint64_t commId, const Status& failure);
  bool knows(uint64_t commId) const;
  // Posts a frame's one or two messages (send or receive) and settles what completed at once.
  Status postFrame(UcxOp* op, ucp_tag_t wire, ucp_request_param_t* p);
  ucs_status_ptr_t postPart(UcxOp* op, UcxOp::Part part, ucp_tag_t wire, void* buffer, size_t count,
                            ucp_request_param_t* p);
  void settle(UcxOp* op, UcxOp::Part part, ucs_status_ptr_t sp);
  // A part completed (callback or at once); the op ends with its last part.
  void partDone(UcxOp* op, UcxOp::Part part, ucs_status_t status, size_t length);
  // A received frame's header (in the op's bounce buffer) against what the receive expects;
  // fails the connection where they disagree.
  bool headerOk(UcxOp* op);
  void track(UcxOp* op);
  void untrack(UcxOp* op);
  void finishRecv(UcxOp* op, ucs_status_t status, size_t length);
  void finishAbortRecv(UcxOp* op, ucs_status_t status, size_t length);
  void finishByeRecv(UcxOp* op, ucs_status_t status, size_t length);
  // After the peer's goodbye: an op in flight that its counts say will never complete.
  bool doomed(const UcxOp* op);
  Status leftError() const;
  void cancelRecvs();
  static void sendCallback(void* request, ucs_status_t status, void* user);
  static void sendHeaderCallback(void* request, ucs_status_t status, void* user);
  static void recvCallback(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user);
  static void recvHeaderCallback(void* request, ucs_status_t status,
                                 const ucp_tag_recv_info_t* info, void* user);
  static void complete(UcxOp* op, UcxOp::Part part, void* request, ucs_status_t status,
                       size_t length);
  void* startFlush();
  void lostAfterGrace(const char* what, ucs_status_t status);
  // The watched peer process is gone: as an endpoint failure (rate-limited, ucx_setup.cc).
  void watchPeer();
  Status fail(Status st);
  std::string who() const { return "peer rank " + std::to_string(peer_); }

  UcxTransport* t_;
  const UcxApi* api_;
  int peer_;
  ucp_ep_h ep_;
  bool peerMode_;  // forcing a close is allowed only in mode PEER
  Lane lane0_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // split communicators' (openLane)
  std::vector<UcxOp*> inFlight_;
  int userInFlight_ = 0;  // sends and receives some Request waits for
  Status failed_;         // reported by progress() until the connection is destroyed
  Status peerLost_;       // the endpoint failed; an error only where something is in flight
  bool epFailed_ = false;
  bool opFailed_ = false;  // an op failed with peerLost_: an error even with nothing in flight
  uint64_t lostAtNs_ = 0;  // when progress() first saw peerLost_ with something waiting on it
  static constexpr uint64_t kAbortGraceNs = 50000000;  // 50 ms
  bool aborted_ = false;                               // the peer sent us an abort
  bool abortSent_ = false;                             // we sent the peer one
  bool abortInFlight_ = false;
  bool wantCancel_ = false;  // receives to cancel at the next progress (not from a callback)
  bool flushed_ = false;     // linger flushed the endpoint already (or gave up on it)
  bool byeSent_ = false;     // this rank said goodbye
  bool byeHeard_ = false;    // the peer did; its counts:
  std::vector<UcxLaneCounts> peerBye_;
  std::vector<UcxLaneCounts> closedLanes_;  // of lanes closed here, for the goodbye
  int peerPid_ = 0;                         // watched where > 0
  int pidfd_ = -1;  // readable once that process exits (-1: kill(pid, 0) instead)
  unsigned looks_ = 0;
  uint64_t lastLookNs_ = 0;
};

}  // namespace collie
