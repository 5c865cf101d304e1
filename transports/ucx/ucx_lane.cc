// Lanes of a UCX connection: further communicators (split children) on the same endpoint. A
// lane's messages carry its number in their tags and its own message counts, so UCX's tag
// matching keeps each lane's order apart; a message that comes before its lane is open waits
// in UCX as any unexpected message does.
#include <algorithm>

#include "transports/ucx/ucx_transport.h"

namespace collie {

// A lane as a Connection of its own; progress, polling and the failure protocol are the whole
// connection's (its worker's).
class UcxLane : public Connection {
 public:
  UcxLane(UcxConnection* c, UcxConnection::Lane* lane) : c_(c), lane_(lane) {}
  ~UcxLane() override {
    c_->laneClosed(*lane_);
    auto& v = c_->lanes_;
    v.erase(std::find_if(v.begin(), v.end(), [&](const std::unique_ptr<UcxConnection::Lane>& l) {
      return l.get() == lane_;
    }));
  }
  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return c_->sendOn(*lane_, buf, bytes, tag, req);
  }
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return c_->recvOn(*lane_, buf, bytes, tag, req);
  }
  bool p2pArrived(uint32_t tag, uint64_t) override { return c_->arrivedOn(*lane_, tag); }
  Status progress(bool* progressed) override { return c_->progress(progressed); }
  void appendPollFds(std::vector<pollfd>* fds) const override { c_->appendPollFds(fds); }
  bool hasPending() const override { return c_->hasPending(); }

  int peer() const override { return c_->peer(); }
  void sendAbort(const Status& failure) override { c_->sendAbortOn(lane_->commId, failure); }
  Word listenAfterFailure() override { return c_->listenAfterFailure(); }
  bool peerClosed() const override { return c_->peerClosed(); }
  void linger(const Deadline&) override {}  // the connection lingers when it goes

 private:
  UcxConnection* c_;
  UcxConnection::Lane* lane_;
};

std::unique_ptr<Connection> UcxConnection::openLane(uint64_t commId, uint32_t number) {
  // Numbers 1..1023 fit the tag; one in use on this connection (after 1023 splits) is refused.
  constexpr uint32_t kLanes = 1023;
  const uint32_t n = number % kLanes + 1;
  for (const auto& l : lanes_)
    if (l->number == n) return nullptr;
  lanes_.emplace_back(new Lane());
  Lane* lane = lanes_.back().get();
  lane->commId = commId;
  lane->number = n;
  return std::unique_ptr<Connection>(new UcxLane(this, lane));
}

bool UcxConnection::knows(uint64_t commId) const {
  if (commId == lane0_.commId) return true;
  return std::any_of(lanes_.begin(), lanes_.end(),
                     [&](const std::unique_ptr<Lane>& l) { return l->commId == commId; });
}

}  // namespace collie
