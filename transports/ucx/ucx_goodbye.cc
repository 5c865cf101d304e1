// The UCX connection's orderly end. A rank whose communicator goes away tells each healthy peer
// so, with its message counts, and closes its endpoints only once every peer has said its last
// (goodbye, abort or loss) or a short grace has passed: closing under data the peer has not read
// yet would reset the connection and lose it. A peer that gets the goodbye while it waits on
// this rank fails at once, naming it, as a tcp peer does at the end of the stream; what the
// counts say is still on its way is waited for.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "src/base/log.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

namespace {

constexpr uint32_t kByeMagic = 0x434c4259;  // "CLBY"
// Lane 0 and the lanes closed last: a lane left out only loses the early failure.
constexpr size_t kMaxByeLanes = 16;

struct ByeHead {
  uint32_t magic;
  uint32_t lanes;
};

}  // namespace

UcxLaneCounts UcxConnection::countsOf(const Lane& l) {
  UcxLaneCounts c;
  c.lane = l.number;
  c.sent = l.sendSeq;
  c.received = l.recvSeq;
  c.p2pSent = l.p2pSent;
  c.p2pReceived = l.p2pRecv;
  return c;
}

UcxConnection::Lane* UcxConnection::laneNumbered(uint32_t number) {
  if (number == lane0_.number) return &lane0_;
  for (auto& l : lanes_)
    if (l->number == number) return l.get();
  return nullptr;
}

void UcxConnection::laneClosed(const Lane& l) {
  if (closedLanes_.size() + 1 >= kMaxByeLanes) closedLanes_.erase(closedLanes_.begin());
  closedLanes_.push_back(countsOf(l));
}

Status UcxConnection::postByeRecv() {
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->kind = UcxOp::kByeRecv;
  op->small = true;
  op->bounce.resize(sizeof(ByeHead) + kMaxByeLanes * sizeof(UcxLaneCounts));
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  return postFrame(op, ucxGoodbyeTag(peer_), &p);
}

bool UcxConnection::sayGoodbye() {
  if (byeSent_ || !failed_.isOk() || abortSent_ || epFailed_ || !peerLost_.isOk()) return false;
  byeSent_ = true;
  std::vector<UcxLaneCounts> lanes{countsOf(lane0_)};
  for (const auto& l : lanes_) lanes.push_back(countsOf(*l));
  for (const UcxLaneCounts& c : closedLanes_) lanes.push_back(c);
  lanes.resize(std::min(lanes.size(), kMaxByeLanes));
  const ByeHead head{kByeMagic, static_cast<uint32_t>(lanes.size())};
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->kind = UcxOp::kByeSend;
  op->small = true;
  op->bounce.resize(sizeof(head) + lanes.size() * sizeof(UcxLaneCounts));
  memcpy(op->bounce.data(), &head, sizeof(head));
  memcpy(op->bounce.data() + sizeof(head), lanes.data(), lanes.size() * sizeof(UcxLaneCounts));
  ucp_request_param_t p{};
  postFrame(op, ucxGoodbyeTag(t_->rank_), &p);
  return true;
}

void UcxConnection::finishByeRecv(UcxOp* op, ucs_status_t status, size_t length) {
  if (status != UCS_OK && status != UCS_ERR_MESSAGE_TRUNCATED) return;  // cancelled: teardown
  ByeHead head{};
  if (length >= sizeof(head)) memcpy(&head, op->bounce.data(), sizeof(head));
  const size_t n = head.lanes;
  if (head.magic != kByeMagic || n > kMaxByeLanes ||
      length != sizeof(head) + n * sizeof(UcxLaneCounts)) {
    fail(remoteError("garbled goodbye from " + who()));
    return;
  }
  peerBye_.resize(n);
  memcpy(peerBye_.data(), op->bounce.data() + sizeof(head), n * sizeof(UcxLaneCounts));
  byeHeard_ = true;
  COLLIE_INFO(kLogNet, "UCX peer rank %d destroyed its communicator", peer_);
}

bool UcxConnection::doomed(const UcxOp* op) {
  if (op->req == nullptr || (op->kind != UcxOp::kSend && op->kind != UcxOp::kRecv)) return false;
  auto b = std::find_if(peerBye_.begin(), peerBye_.end(),
                        [&](const UcxLaneCounts& c) { return c.lane == op->lane; });
  const Lane* l = laneNumbered(op->lane);
  if (b == peerBye_.end() || l == nullptr) return false;
  if (op->kind == UcxOp::kRecv) return op->p2p ? l->p2pRecv >= b->p2pSent : op->seq >= b->sent;
  return op->p2p ? l->p2pSent > b->p2pReceived : op->seq >= b->received;
}

Status UcxConnection::leftError() const {
  return remoteError("lost " + who() +
                     ": it destroyed its communicator (it left the job early, exited or failed) "
                     "before the messages this rank still sends it or waits for");
}

void UcxTransport::idle(int ms) {
  if (api_->workerArm(worker_) != UCS_OK) return;  // events pending: progress again at once
  pollfd p{efd_, POLLIN, 0};
  poll(&p, 1, ms);
}

void UcxTransport::farewell(const Deadline& deadline) {
  if (worker_ == nullptr) return;
  // Ops still posted (a set-up op that failed, a receive the user never waited for) are no one's
  // any more, and their buffers may be gone: cancelled before the worker moves again.
  detachAll();
  std::vector<UcxConnection*> told;
  for (UcxConnection* c : conns_)
    if (c->sayGoodbye()) told.push_back(c);
  auto waiting = [&] {
    return std::any_of(told.begin(), told.end(),
                       [](const UcxConnection* c) { return !c->peerLeft(); });
  };
  while (waiting() && !deadline.expired()) {
    bool progressed = false;
    for (UcxConnection* c : told) c->progress(&progressed);
    if (!progressed) idle(deadline.remainingMs(2));
  }
  COLLIE_INFO(kLogNet, "UCX: said goodbye to %zu peers, %s", told.size(),
              waiting() ? "some said nothing before the grace ended" : "every one answered");
}

}  // namespace collie
