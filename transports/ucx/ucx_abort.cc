// The UCX connection's part in the failure protocol: the abort frame to the peer, and the
// flush that lets it leave before the endpoint goes.
#include <sched.h>

#include <algorithm>

#include "src/base/time.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

void UcxConnection::sendAbortOn(uint64_t commId, const Status& failure) {
  // Also to a peer whose abort came first: its answer tells it this rank is not the one stuck.
  if (abortSent_) return;
  abortSent_ = true;
  // The failed op's Requests are gone; UCX may complete any op of the worker from here on.
  t_->detachAll();
  // Communicators sharing the connection fail with this one, as on the stream transports.
  if (!lanes_.empty())
    fail(Status(failure.code(), "a communicator sharing the connection to peer rank " +
                                    std::to_string(peer_) + " failed: " + failure.message()));
  if (epFailed_) return;  // nobody to tell
  const std::string frame = encodeAbort(commId, failure);
  UcxOp* op = t_->takeOp();
  op->conn = this;
  op->kind = UcxOp::kAbortSend;
  op->small = true;
  op->bounce.assign(frame.begin(), frame.end());
  abortInFlight_ = true;
  ucp_request_param_t p{};
  postFrame(op, ucxAbortTag(t_->rank_), &p);
  // Best effort and bounded: a peer that reads nothing any more learns from the endpoint.
  Deadline d = Deadline::afterMs(500);
  while (abortInFlight_ && !epFailed_ && !d.expired())
    if (api_->workerProgress(t_->worker_) == 0) sched_yield();
}

AbortLink::Word UcxConnection::listenAfterFailure() {
  api_->workerProgress(t_->worker_);
  // As a stream's end: a goodbye or a failed endpoint with no abort before it is a lost peer.
  if (aborted_) return Word::kHeard;
  return epFailed_ || byeHeard_ ? Word::kLost : Word::kNothing;
}

void* UcxConnection::startFlush() {
  ucp_request_param_t p{};
  ucs_status_ptr_t sp = api_->epFlushNbx(ep_, &p);
  return UCS_PTR_IS_PTR(sp) ? sp : nullptr;
}

void UcxConnection::linger(const Deadline& deadline) {
  if (!abortSent_ || flushed_) return;
  flushed_ = true;
  // The abort must leave before the endpoint goes. Sends of the failed op that will never
  // complete would hold a flush up to the deadline: then the abort (already out of the
  // worker, see sendAbort) has to do without it.
  bool sends = std::any_of(inFlight_.begin(), inFlight_.end(),
                           [](const UcxOp* op) { return op->kind == UcxOp::kSend; });
  if (epFailed_ || sends) return;
  std::vector<void*> flush;
  if (void* f = startFlush()) flush.push_back(f);
  t_->waitAndFree(&flush, deadline);
}

}  // namespace collie
