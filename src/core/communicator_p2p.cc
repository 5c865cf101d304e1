// The communicator's point-to-point calls: posting a group's sends and receives, completing them,
// and receiving from any peer. Group bookkeeping across communicators is in group.cc.
#include <sched.h>

#include <thread>

#include "src/core/communicator.h"

namespace collie {

std::unique_lock<std::mutex> CommImpl::lock() {
  progress_.waitIdle();  // queued asynchronous ops go first: call order
  return std::unique_lock<std::mutex>(execMu_);
}

Status CommImpl::p2pFail(const Status& s) {
  return failWith(s.withContext("send/recv on " + who()));
}

Status CommImpl::postOne(const P2PCall& c, Request* req) {
  Connection* conn = conns_[static_cast<size_t>(c.peer)];
  const uint64_t seq = c.send ? pairSeq_.nextSend(c.peer, c.tag) : pairSeq_.nextRecv(c.peer, c.tag);
  const FrameTag tag = p2pFrameTag(c, seq);
  Status st =
      c.send ? conn->isend(c.buf, c.bytes(), tag, req) : conn->irecv(c.buf, c.bytes(), tag, req);
  req->peer = c.peer;
  return st;
}

Status CommImpl::postP2P(std::vector<P2PCall>* calls, P2PBatch* batch) {
  COLLIE_RETURN_IF_ERROR(checkFailed());
  batch->deadline = Deadline::afterMs(cfg_.timeoutMs);
  size_t others = 0;
  for (const P2PCall& c : *calls) others += c.peer != rank_;
  if (others < calls->size()) COLLIE_RETURN_IF_ERROR(matchSelfCalls(*calls, rank_));
  batch->reqs.clear();
  batch->reqs.reserve(others);
  for (const P2PCall& c : *calls) {
    if (c.peer == rank_) continue;
    batch->reqs.emplace_back();
    Status st = postOne(c, &batch->reqs.back());
    if (!st.isOk()) return p2pFail(st);
  }
  return Status::ok();
}

Status CommImpl::finishP2P(P2PBatch* batch) {
  for (Request& r : batch->reqs) {
    if (r.done) continue;
    Status st = poller_->wait(&r, batch->deadline, r.isSend ? "send" : "recv");
    if (!st.isOk() && st.stalledOn() >= 0 && st.code() == collieTimeout) st = p2pTimedOut(r);
    if (!st.isOk()) return p2pFail(st);
  }
  return Status::ok();
}

Status CommImpl::progressP2P(P2PBatch* batch, bool* progressed) {
  if (batch->allDone()) return Status::ok();
  Status st = poller_->progressAll(progressed, true);
  if (!st.isOk()) return p2pFail(st);
  if (aborting_.load()) return p2pFail(Status(collieRemoteError, "aborted by collieCommAbort"));
  if (batch->deadline.expired())
    for (const Request& r : batch->reqs)
      if (!r.done) return p2pFail(p2pTimedOut(r));
  return Status::ok();
}

Status CommImpl::recvAny(const P2PCall& call, int* peer) {
  COLLIE_RETURN_IF_ERROR(checkReady("recv any"));
  std::unique_lock<std::mutex> l = lock();
  COLLIE_RETURN_IF_ERROR(checkFailed());
  const Deadline deadline = Deadline::afterMs(cfg_.timeoutMs);
  Connection* const* conns = conns_.data();
  const uint64_t spinUntil = nowNs() + 200 * 1000;
  // Each look begins one peer further on, so that no sender is starved.
  for (int start = rank_ + 1;; ++start) {
    for (int i = 0; i < nranks_; ++i) {
      const int p = (start + i) % nranks_;
      if (p == rank_ ||
          !conns[p]->p2pArrived(static_cast<uint32_t>(call.tag), pairSeq_.peekRecv(p, call.tag)))
        continue;
      P2PCall c = call;
      c.peer = p;
      P2PBatch batch;
      batch.deadline = deadline;
      batch.reqs.reserve(1);
      batch.reqs.emplace_back();
      Status st = postOne(c, &batch.reqs.back());
      if (!st.isOk()) return p2pFail(st);
      *peer = p;
      return finishP2P(&batch);
    }
    bool progressed = false;
    Status st = poller_->progressAll(&progressed, true);
    if (!st.isOk()) return p2pFail(st);
    if (aborting_.load()) return p2pFail(Status(collieRemoteError, "recv: aborted"));
    if (deadline.expired())
      return p2pFail(timeoutError("recv any: timed out waiting for a message with tag " +
                                  std::to_string(call.tag) +
                                  " from any peer (see COLLIE_TIMEOUT_MS)"));
    if (!progressed && nowNs() > spinUntil)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (!progressed && oversubscribed_)
      sched_yield();
  }
}

Status CommImpl::runP2PAsync(const P2PCall& call, std::shared_ptr<WorkState>* work) {
  COLLIE_RETURN_IF_ERROR(checkReady(call.send ? "send" : "recv"));
  if (call.peer == rank_)
    return invalidUsage("an asynchronous send or receive to this rank (" + std::to_string(rank_) +
                        ") has no partner: pair them in a group");
  *work = std::make_shared<WorkState>();
  PendingOp op;
  op.work = *work;
  op.calls.push_back(call);
  progress_.push(std::move(op));
  return Status::ok();
}

Status CommImpl::postAsyncP2P(PendingOp* p) {
  inFlightP2P_.emplace_back();
  InFlightP2P& f = inFlightP2P_.back();
  Status st = postP2P(&p->calls, &f.batch);
  if (!st.isOk()) {
    inFlightP2P_.pop_back();
    return st;  // the queue finishes the op's work with it
  }
  f.work = std::move(p->work);
  inFlightCount_.fetch_add(1);
  return Status::ok();
}

bool CommImpl::advanceP2P() {
  if (inFlightCount_.load() == 0) return false;
  // A blocking call of the user's thread moves every connection meanwhile.
  std::unique_lock<std::mutex> l(execMu_, std::try_to_lock);
  if (!l.owns_lock()) return true;
  bool progressed = false;
  Status failed;
  for (auto it = inFlightP2P_.begin(); it != inFlightP2P_.end();) {
    Status st = failed.isOk() ? progressP2P(&it->batch, &progressed) : failed;
    if (st.isOk() && !it->batch.allDone()) {
      ++it;
      continue;
    }
    if (!st.isOk()) failed = st;
    it->work->finish(st);
    it = inFlightP2P_.erase(it);
    inFlightCount_.fetch_sub(1);
  }
  return !inFlightP2P_.empty();
}

void CommImpl::abandonP2P() {
  std::lock_guard<std::mutex> l(execMu_);
  // The requests stay: the connections, which may still point at them, go first.
  for (InFlightP2P& f : inFlightP2P_)
    f.work->finish(
        invalidUsage("the communicator was destroyed while this send or receive of rank " +
                     std::to_string(rank_) + " was in flight"));
  inFlightCount_.store(0);
}

}  // namespace collie
