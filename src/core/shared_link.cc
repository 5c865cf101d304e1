// SharedLink: every call on a shared connection under its lock.
#include "src/core/shared_link.h"

namespace collie {

using Guard = std::lock_guard<std::mutex>;

SharedLink::~SharedLink() {
  Guard g(*mu_);
  lane_.reset();  // the lane closes under the lock: another thread may be moving the connection
}

Status SharedLink::isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  Guard g(*mu_);
  return c_->isend(buf, bytes, tag, req);
}

Status SharedLink::irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  Guard g(*mu_);
  return c_->irecv(buf, bytes, tag, req);
}

Status SharedLink::progress(bool* progressed) {
  Guard g(*mu_);
  return c_->progress(progressed);
}

void SharedLink::appendPollFds(std::vector<struct pollfd>* fds) const {
  Guard g(*mu_);
  c_->appendPollFds(fds);
}

bool SharedLink::hasPending() const {
  Guard g(*mu_);
  return c_->hasPending();
}

Status SharedLink::checkEarlyFrame(const FrameTag& mine) const {
  Guard g(*mu_);
  return c_->checkEarlyFrame(mine);
}

bool SharedLink::p2pArrived(uint32_t tag, uint64_t seq) {
  Guard g(*mu_);
  return c_->p2pArrived(tag, seq);
}

void SharedLink::sendAbort(const Status& failure) {
  Guard g(*mu_);
  c_->sendAbort(failure);
}

bool SharedLink::sendsQueued() const {
  Guard g(*mu_);
  return c_->sendsQueued();
}

AbortLink::Word SharedLink::listenAfterFailure() {
  Guard g(*mu_);
  return c_->listenAfterFailure();
}

bool SharedLink::abortPending() const {
  Guard g(*mu_);
  return c_->abortPending();
}

bool SharedLink::peerClosed() const {
  Guard g(*mu_);
  return c_->peerClosed();
}

}  // namespace collie
