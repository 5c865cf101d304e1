// UcxConnection: tagged frames to and from one peer over the communicator's UCX worker.
//
// Tags: bit 63 marks the control channel (the sender's abort, goodbye and hello, told apart by
// bits 0..31), bit 62 point-to-point messages, bits 42..61 hold the sender's rank, bits 32..41 the
// lane (0, or a split communicator's number), bits 0..31 the sender's count of messages to this
// peer on the lane (collectives) or the user's tag (point-to-point: UCX keeps the order of one
// sender's messages of one tag). A receive names the exact tag it wants (full mask), so the k-th
// receive posted for a peer takes the k-th message that peer sent to this rank, whichever order UCX
// delivers them in: the same per-peer FIFO the stream transports have.
//
// A small frame is one message, the 48-byte FrameHeader then the payload, copied through a
// bounce buffer. A large one is two messages of one tag, the header then the payload from the
// caller's buffer: UCX matches one sender's messages of a tag in order, and only a contiguous
// buffer gets its zero-copy protocols (an iov would be packed into bounce buffers on both sides
// by the rendezvous). The receiver checks the header with checkFrame, as the stream transports
// do, so ranks that disagree get the same errors whatever the transport.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "src/base/log.h"
#include "src/base/time.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

namespace {

constexpr uint64_t kAbortChannel = uint64_t{1} << 63;
constexpr uint64_t kP2PChannel = uint64_t{1} << 62;
constexpr int kRankShift = 42;
constexpr int kLaneShift = 32;
constexpr uint64_t kSeqMask = (uint64_t{1} << kLaneShift) - 1;
constexpr ucp_tag_t kExactTag = ~ucp_tag_t{0};
constexpr size_t kHdr = sizeof(FrameHeader);
// Payloads up to this size travel in one contiguous copy with their header.
constexpr size_t kSmallMessage = 4096;
// Receives always complete through the callback: UCX 1.13 leaves the length of a receive that
// completes at once (the message was already here) unreported, and the length is checked.
constexpr uint32_t kRecvAttrs = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;

ucp_tag_t dataTag(int sender, uint32_t lane, uint64_t seq) {
  return (static_cast<uint64_t>(sender) << kRankShift) | (uint64_t{lane} << kLaneShift) |
         (seq & kSeqMask);
}

ucp_tag_t p2pTag(int sender, uint32_t lane, uint32_t userTag) {
  return kP2PChannel | (static_cast<uint64_t>(sender) << kRankShift) |
         (uint64_t{lane} << kLaneShift) | userTag;
}

std::string garbled(const std::string& who, size_t says, size_t has) {
  return "garbled frame from " + who + " (its header says " + std::to_string(says) +
         " bytes, the message has " + std::to_string(has) + ")";
}

bool isSend(const UcxOp* op) {
  return op->kind == UcxOp::kSend || op->kind == UcxOp::kAbortSend || op->kind == UcxOp::kByeSend;
}

// Records what a part brought: the first failure of the op, and the lengths received.
void record(UcxOp* op, UcxOp::Part part, ucs_status_t status, size_t length) {
  if (status != UCS_OK && op->status == UCS_OK) op->status = status;
  (part == UcxOp::kHeader ? op->hdrLength : op->length) = length;
}

}  // namespace

ucp_tag_t ucxAbortTag(int sender) {
  return kAbortChannel | (static_cast<uint64_t>(sender) << kRankShift);
}

ucp_tag_t ucxGoodbyeTag(int sender) { return ucxAbortTag(sender) | 1; }

ucp_tag_t ucxHelloTag(int sender) { return ucxAbortTag(sender) | 2; }

UcxConnection::UcxConnection(UcxTransport* transport, int peer, ucp_ep_h ep, bool peerMode,
                             int peerPid)
    : t_(transport), api_(transport->api_), peer_(peer), ep_(ep), peerMode_(peerMode) {
  lane0_.commId = t_->commId_;
  peerPid_ = peerPid;
  if (peerPid > 0) pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, peerPid, 0));
}

UcxConnection::~UcxConnection() {
  // Nobody waits for these any more; the receives (the abort one included) are cancelled, and
  // whatever UCX still completes later finds no connection.
  for (UcxOp* op : inFlight_) op->req = nullptr;
  std::vector<void*> handles;
  for (UcxOp* op : inFlight_)
    if (!isSend(op) && !op->cancelled) {
      op->cancelled = true;
      for (void* h : op->handle)
        if (h != nullptr) handles.push_back(h);
    }
  for (void* h : handles) api_->requestCancel(t_->worker_, h);
  for (UcxOp* op : inFlight_) op->conn = nullptr;
  // A healthy endpoint is flushed first, so that what was sent still arrives; not one that
  // failed, or carries sends that will never complete (the flush would wait for them).
  bool sends = std::any_of(inFlight_.begin(), inFlight_.end(),
                           [](const UcxOp* op) { return op->kind == UcxOp::kSend; });
  void* flush = flushed_ || epFailed_ || sends ? nullptr : startFlush();
  t_->retire(this, ep_, peerMode_, flush);
  if (pidfd_ >= 0) close(pidfd_);
}

void UcxConnection::sendCallback(void* request, ucs_status_t status, void* user) {
  complete(static_cast<UcxOp*>(user), UcxOp::kPayload, request, status, 0);
}

void UcxConnection::sendHeaderCallback(void* request, ucs_status_t status, void* user) {
  complete(static_cast<UcxOp*>(user), UcxOp::kHeader, request, status, 0);
}

void UcxConnection::recvCallback(void* request, ucs_status_t status,
                                 const ucp_tag_recv_info_t* info, void* user) {
  complete(static_cast<UcxOp*>(user), UcxOp::kPayload, request, status,
           info != nullptr ? info->length : 0);
}

void UcxConnection::recvHeaderCallback(void* request, ucs_status_t status,
                                       const ucp_tag_recv_info_t* info, void* user) {
  complete(static_cast<UcxOp*>(user), UcxOp::kHeader, request, status,
           info != nullptr ? info->length : 0);
}

void UcxConnection::complete(UcxOp* op, UcxOp::Part part, void* request, ucs_status_t status,
                             size_t length) {
  record(op, part, status, length);
  if (op->posting) {
    // Inside the call that posts it (a receive whose message is already here): settle() ends it.
    op->early[part] = true;
    return;
  }
  op->handle[part] = nullptr;
  op->owner->api_->requestFree(request);
  if (op->conn != nullptr)
    op->conn->partDone(op, part, status, length);
  else if (--op->parts == 0)
    op->owner->releaseOp(op);
}

void UcxConnection::track(UcxOp* op) {
  op->slot = inFlight_.size();
  inFlight_.push_back(op);
  if (op->req != nullptr) ++userInFlight_;
}

void UcxConnection::untrack(UcxOp* op) {
  UcxOp* last = inFlight_.back();
  inFlight_[op->slot] = last;
  last->slot = op->slot;
  inFlight_.pop_back();
  if (op->req != nullptr) --userInFlight_;
}

ucs_status_ptr_t UcxConnection::postPart(UcxOp* op, UcxOp::Part part, ucp_tag_t wire, void* buffer,
                                         size_t count, ucp_request_param_t* p) {
  if (isSend(op)) {
    p->cb.send = part == UcxOp::kHeader ? &sendHeaderCallback : &sendCallback;
    return api_->tagSendNbx(ep_, buffer, count, wire, p);
  }
  p->cb.recv = part == UcxOp::kHeader ? &recvHeaderCallback : &recvCallback;
  return api_->tagRecvNbx(t_->worker_, buffer, count, wire, kExactTag, p);
}

Status UcxConnection::postFrame(UcxOp* op, ucp_tag_t wire, ucp_request_param_t* p) {
  p->op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p->user_data = op;
  p->datatype = ucp_dt_make_contig(1);
  p->memory_type = UCS_MEMORY_TYPE_HOST;
  const bool send = isSend(op);
  op->parts = op->small ? 1 : 2;
  op->posting = true;
  track(op);
  ucs_status_ptr_t hdr = nullptr, body;
  if (op->small) {
    body = postPart(op, UcxOp::kPayload, wire, op->bounce.data(), op->bounce.size(), p);
  } else {
    void* h = send ? static_cast<void*>(&op->hdr) : op->bounce.data();
    hdr = postPart(op, UcxOp::kHeader, wire, h, send ? kHdr : op->bounce.size(), p);
    // Only a contiguous payload gets UCX's zero-copy protocols, and over cma those abort the
    // process when the peer dies mid-copy: an endpoint that cannot report a dead peer (mode
    // NONE) sends a one-piece iov instead, which UCX copies through shared memory.
    void* body0 = op->data;
    size_t n = op->len;
    if (!peerMode_) {
      op->iov = {op->data, op->len};
      p->datatype = ucp_dt_make_iov();
      body0 = &op->iov, n = 1;
    }
    body = postPart(op, UcxOp::kPayload, wire, body0, n, p);
  }
  op->posting = false;
  if (!op->small) settle(op, UcxOp::kHeader, hdr);
  settle(op, UcxOp::kPayload, body);
  return failed_;
}

void UcxConnection::settle(UcxOp* op, UcxOp::Part part, ucs_status_ptr_t sp) {
  if (sp == nullptr) {
    partDone(op, part, UCS_OK, 0);  // a send completed at once
  } else if (UCS_PTR_IS_ERR(sp)) {
    partDone(op, part, UCS_PTR_STATUS(sp), 0);
  } else if (op->early[part]) {
    api_->requestFree(sp);
    partDone(op, part, op->status, part == UcxOp::kHeader ? op->hdrLength : op->length);
  } else {
    op->handle[part] = sp;
  }
}

void UcxConnection::partDone(UcxOp* op, UcxOp::Part part, ucs_status_t status, size_t length) {
  record(op, part, status, length);
  // A large frame's header is checked as soon as it is here: a peer that disagrees may never
  // send the payload this receive waits for.
  if (part == UcxOp::kHeader && op->kind == UcxOp::kRecv && status == UCS_OK && op->req)
    headerOk(op);
  if (--op->parts == 0) onDone(op, op->status, op->length);
}

Status UcxConnection::sendOn(Lane& lane, const void* buf, size_t bytes, const FrameTag& tag,
                             Request* req) {
  req->start(bytes, tag, true, peer_);
  if (!failed_.isOk()) return failed_;
  if (!peerLost_.isOk()) return fail(peerLost_);
  if (byeHeard_) return fail(leftError());  // it reads nothing more
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->req = req;
  op->kind = UcxOp::kSend;
  op->lane = lane.number;
  op->p2p = isP2PFrame(tag.coll);
  op->data = static_cast<char*>(const_cast<void*>(buf));
  op->len = bytes;
  op->hdr = encodeFrame(lane.commId, tag, bytes);
  op->small = bytes <= kSmallMessage;
  if (op->small) {
    op->bounce.resize(kHdr + bytes);
    memcpy(op->bounce.data(), &op->hdr, kHdr);
    if (bytes > 0) memcpy(op->bounce.data() + kHdr, buf, bytes);
  }
  if (op->p2p) ++lane.p2pSent;
  op->seq = op->p2p ? 0 : lane.sendSeq++;
  const ucp_tag_t wire =
      op->p2p ? p2pTag(t_->rank_, lane.number, tag.tag) : dataTag(t_->rank_, lane.number, op->seq);
  ucp_request_param_t p{};
  return postFrame(op, wire, &p);
}

Status UcxConnection::recvOn(Lane& lane, void* buf, size_t bytes, const FrameTag& tag,
                             Request* req) {
  req->start(bytes, tag, false, peer_);
  if (!failed_.isOk()) return failed_;
  if (!peerLost_.isOk()) return fail(peerLost_);
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->req = req;
  op->kind = UcxOp::kRecv;
  op->data = static_cast<char*>(buf);
  op->len = bytes;
  op->expect = tag;
  op->commId = lane.commId;
  op->lane = lane.number;
  op->p2p = isP2PFrame(tag.coll);
  // A large frame's header message lands here too; room for a small frame's whole instead, so
  // that a peer that sent one (it disagrees on the size) is told by checkFrame.
  op->small = bytes <= kSmallMessage;
  op->bounce.resize(kHdr + (op->small ? bytes : kSmallMessage));
  op->seq = op->p2p ? 0 : lane.recvSeq++;
  const ucp_tag_t wire =
      op->p2p ? p2pTag(peer_, lane.number, tag.tag) : dataTag(peer_, lane.number, op->seq);
  ucp_request_param_t p{};
  p.op_attr_mask = kRecvAttrs;
  return postFrame(op, wire, &p);
}

bool UcxConnection::arrivedOn(const Lane& lane, uint32_t tag) {
  ucp_tag_recv_info_t info;
  return api_->tagProbeNb(t_->worker_, p2pTag(peer_, lane.number, tag), kExactTag, 0, &info) !=
         nullptr;
}

Status UcxConnection::postAbortRecv() {
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->kind = UcxOp::kAbortRecv;
  op->small = true;
  op->bounce.resize(kHdr + kMaxAbortPayload);
  ucp_request_param_t p{};
  p.op_attr_mask = kRecvAttrs;
  return postFrame(op, ucxAbortTag(peer_), &p);
}

void UcxConnection::onDone(UcxOp* op, ucs_status_t status, size_t length) {
  ++t_->completions_;
  untrack(op);
  switch (op->kind) {
    case UcxOp::kSend:
      if (op->req == nullptr) break;
      if (status == UCS_OK)
        op->req->done = true;
      else
        lostAfterGrace("send failed", status);
      break;
    case UcxOp::kRecv:
      if (op->req != nullptr) finishRecv(op, status, length);
      break;
    case UcxOp::kAbortSend:
      abortInFlight_ = false;
      break;
    case UcxOp::kAbortRecv:
      finishAbortRecv(op, status, length);
      break;
    case UcxOp::kByeSend:
      break;
    case UcxOp::kByeRecv:
      finishByeRecv(op, status, length);
      break;
  }
  t_->releaseOp(op);
}

void UcxConnection::finishRecv(UcxOp* op, ucs_status_t status, size_t length) {
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    fail(invalidUsage("ranks disagree: " + who() + " sent a longer message than the " +
                      std::to_string(op->len) + " bytes this rank expects for step " +
                      std::to_string(op->expect.tag) + " of " + describeFrameTag(op->expect) +
                      "; every rank must call the same collectives in the same order with the "
                      "same count, datatype, op and root, and the same COLLIE_* settings"));
    return;
  }
  if (status != UCS_OK) {
    if (!op->cancelled) lostAfterGrace("receive failed", status);
    return;
  }
  if (!headerOk(op)) return;
  if (!op->small && length != op->len) {
    fail(remoteError(garbled(who(), op->len, length)));
    return;
  }
  if (op->small && op->len > 0) memcpy(op->data, op->bounce.data() + kHdr, op->len);
  if (op->p2p)
    if (Lane* l = laneNumbered(op->lane)) ++l->p2pRecv;
  op->req->done = true;
}

bool UcxConnection::headerOk(UcxOp* op) {
  if (!failed_.isOk()) return false;
  const size_t got = op->small ? op->length : op->hdrLength;
  if (got < kHdr) {
    fail(remoteError("garbled frame from " + who() + " (a message of " + std::to_string(got) +
                     " bytes, shorter than a frame header)"));
    return false;
  }
  FrameHeader h;
  memcpy(&h, op->bounce.data(), kHdr);
  Status st = checkFrame(h, op->commId, op->expect, op->len, peer_);
  if (!st.isOk()) {
    fail(st);
    return false;
  }
  // A small frame brings its payload; a large one's header message is the header alone.
  const size_t body = got - kHdr;
  if (body != (op->small ? op->len : 0)) {
    fail(remoteError(garbled(who(), op->len, op->small ? body : op->len + body)));
    return false;
  }
  return true;
}

void UcxConnection::finishAbortRecv(UcxOp* op, ucs_status_t status, size_t length) {
  if (status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED) return;  // cancelled: teardown
  FrameHeader h;
  memcpy(&h, op->bounce.data(), kHdr);
  if (length < kHdr || h.magic != kAbortMagic || !knows(h.commId)) {
    fail(remoteError("garbled abort frame from " + who()));
    return;
  }
  size_t n = std::min<size_t>({length - kHdr, h.len, kMaxAbortPayload});
  std::string reason(op->bounce.data() + kHdr, n);
  if (n < h.len || status != UCS_OK) reason += " (reason cut short)";
  aborted_ = true;
  fail(abortError(peer_, h, reason));
}

void UcxConnection::onEndpointError(ucs_status_t status) {
  epFailed_ = true;
  // Not an error yet: a peer that finished its part of the op and exited is fine as long as
  // nothing is expected from it. progress() decides, once what arrived before is delivered.
  if (peerLost_.isOk())
    peerLost_ = remoteError("lost " + who() + ": " + api_->statusString(status) +
                            " (the peer process died or the link is down)");
  COLLIE_INFO(kLogNet, "UCX endpoint to rank %d failed: %s", peer_, api_->statusString(status));
}

void UcxConnection::lostAfterGrace(const char* what, ucs_status_t status) {
  // An op that fails with its endpoint: the peer's abort, sent before it closed and naming the
  // rank it lost, may still complete, and is the better error (else a survivor names a peer
  // that aborted and exited). progress() fails the connection once the grace has passed.
  if (peerLost_.isOk())
    peerLost_ = remoteError("lost " + who() + ": " + what + " (" + api_->statusString(status) +
                            "; the peer process died or the link is down)");
  opFailed_ = true;
}

Status UcxConnection::fail(Status st) {
  if (failed_.isOk()) {
    failed_ = st;
    wantCancel_ = true;  // nothing more will arrive that anyone may use
    COLLIE_INFO(kLogNet, "connection to rank %d failed: %s", peer_, st.message().c_str());
  }
  return failed_;
}

void UcxConnection::cancelRecvs() {
  wantCancel_ = false;
  // Collected first: a cancel completes its request at once, which edits inFlight_.
  std::vector<void*> handles;
  for (UcxOp* op : inFlight_)
    if (op->kind == UcxOp::kRecv && !op->cancelled) {
      op->cancelled = true;
      for (void* h : op->handle)
        if (h != nullptr) handles.push_back(h);
    }
  for (void* h : handles) api_->requestCancel(t_->worker_, h);
}

void UcxConnection::detach() {
  for (UcxOp* op : inFlight_) {
    if (op->req == nullptr) continue;
    op->req = nullptr;
    --userInFlight_;
  }
  cancelRecvs();
}

Status UcxConnection::progress(bool* progressed) {
  if (failed_.isOk()) {
    // Progress means an op of this worker completed, not that UCX was busy: it keeps busy
    // with work of its own (connection set-up to a peer that does not answer yet, say), and a
    // Poller told "progressed" forever would never look at its deadline or the abort flag.
    const uint64_t before = t_->completions_;
    // Until something completes, so that the waiter sees it at once (over tcp each round is a
    // system call), and bounded: under a steady stream the worker always has more, and the
    // Poller must get to look at the other connections.
    for (int i = 0; i < 16 && t_->completions_ == before && api_->workerProgress(t_->worker_) > 0;
         ++i) {
    }
    if (peerPid_ > 0 && !epFailed_) watchPeer();
    if (t_->completions_ != before) *progressed = true;
    if (failed_.isOk() && !peerLost_.isOk() && (userInFlight_ > 0 || opFailed_)) {
      // The peer's abort, sent before it closed and naming the rank it lost, may complete a
      // little after its endpoint fails: it is the better error, so it gets a grace period.
      const uint64_t now = nowNs();
      if (lostAtNs_ == 0) lostAtNs_ = now;
      if (now - lostAtNs_ >= kAbortGraceNs) fail(peerLost_);
    }
    // The peer destroyed its communicator: what it never sent, or will never read, fails now.
    if (failed_.isOk() && byeHeard_ && userInFlight_ > 0 &&
        std::any_of(inFlight_.begin(), inFlight_.end(),
                    [&](const UcxOp* op) { return doomed(op); }))
      fail(leftError());
  }
  if (wantCancel_) cancelRecvs();
  return failed_.isOk() ? Status::ok() : failed_;  // no string copied on the hot path
}

void UcxConnection::appendPollFds(std::vector<pollfd>* fds) const {
  const int efd = t_->efd_, ready = t_->readyFd_;
  // The watched peer's pidfd turns readable when it exits; lanes share it.
  if (pidfd_ >= 0 && !epFailed_ &&
      std::none_of(fds->begin(), fds->end(), [&](const pollfd& p) { return p.fd == pidfd_; }))
    fds->push_back(pollfd{pidfd_, POLLIN, 0});
  for (const pollfd& p : *fds)
    if (p.fd == efd || p.fd == ready) return;  // every connection shares the one worker
  // The Poller calls this just before it sleeps, after progress found nothing: the one place
  // where arming the worker pays (arming costs system calls, and is only needed before a
  // sleep). That changes the worker, not this connection, hence no mutable state here. When
  // UCX says events are pending (busy), poll an fd that is always readable instead, so that
  // poll returns at once and the Poller progresses again rather than sleeping on them.
  ucs_status_t st = api_->workerArm(t_->worker_);
  fds->push_back(pollfd{st == UCS_OK ? efd : ready, POLLIN, 0});
}

}  // namespace collie
