// Lanes of a stream connection: further communicators (split children) on the same streams.
// Every frame carries its communicator's id; the receiver files it with that lane's receives,
// and where a lane has nothing posted on the stream the frame is read in and kept, so that one
// lane's frame never holds up another's.
#include <algorithm>
#include <cstring>

#include "transports/stream_connection.h"

namespace collie {

// A lane as a Connection of its own. Progress, polling and the failure protocol are the whole
// connection's: whichever lane drives it moves every lane's frames.
class StreamLane : public Connection {
 public:
  StreamLane(StreamConnection* c, StreamConnection::Lane* lane) : c_(c), lane_(lane) {}
  ~StreamLane() override { c_->closeLane(lane_); }

  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return c_->sendOn(lane_, buf, bytes, tag, req);
  }
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override {
    return c_->recvOn(lane_, buf, bytes, tag, req);
  }
  Status progress(bool* progressed) override { return c_->progress(progressed); }
  void appendPollFds(std::vector<pollfd>* fds) const override { c_->appendPollFds(fds); }
  bool hasPending() const override { return c_->hasPending(); }
  Status checkEarlyFrame(const FrameTag& mine) const override {
    return c_->checkEarlyOn(lane_, mine);
  }
  bool p2pArrived(uint32_t tag, uint64_t seq) override { return lane_->p2p.arrived(tag, seq); }

  int peer() const override { return c_->peer(); }
  void sendAbort(const Status& failure) override { c_->sendAbortOn(lane_->commId, failure); }
  bool sendsQueued() const override { return c_->sendsQueued(); }
  Word listenAfterFailure() override { return c_->listenAfterFailure(); }
  bool abortPending() const override { return c_->abortPending(); }
  bool peerClosed() const override { return c_->peerClosed(); }
  // The connection lingers when it goes, after its last lane.
  void linger(const Deadline&) override {}

 private:
  StreamConnection* c_;
  StreamConnection::Lane* lane_;
};

std::unique_ptr<Connection> StreamConnection::openLane(uint64_t commId, uint32_t) {
  laned_ = true;
  lanes_.emplace_back(new Lane());
  Lane* lane = lanes_.back().get();
  lane->commId = commId;
  if (pull_) setP2PPull(pull_);
  return std::unique_ptr<Connection>(new StreamLane(this, lane));
}

void StreamConnection::closeLane(Lane* lane) {
  constexpr size_t kHdr = sizeof(FrameHeader);
  for (auto& s : socks_) {
    // The rest of a frame begun for the lane is read past (kept for no one).
    if (s.hdrGot == kHdr && !s.filling && laneFor(s.hdr.commId) == lane) {
      auto it = firstOf(s, lane);
      const size_t got = s.inP2P ? s.p2p.got : it != s.recvs.end() ? it->got : 0;
      const size_t len = s.inP2P ? s.p2p.length : s.hdr.len;
      if (s.inP2P || got > 0) {
        s.early.push_back(Early{s.hdr, std::string(len - got, '\0'), 0, nullptr});
        s.filling = true;
        s.inP2P = false;
      }
    }
    if (s.filling && s.early.back().lane == lane) s.early.back().lane = nullptr;
    s.recvs.erase(std::remove_if(s.recvs.begin(), s.recvs.end(),
                                 [&](const RecvItem& r) { return r.lane == lane; }),
                  s.recvs.end());
    s.early.erase(std::remove_if(s.early.begin(), s.early.end(),
                                 [&](const Early& e) { return e.lane == lane; }),
                  s.early.end());
    // What it has not begun to send never goes: its calls have returned.
    auto unsent = [&](const SendItem& x) { return x.sent == 0 && x.hdr.commId == lane->commId; };
    s.sends.erase(std::remove_if(s.sends.begin(), s.sends.end(), unsent), s.sends.end());
  }
  lanes_.erase(std::find_if(lanes_.begin(), lanes_.end(),
                            [&](const std::unique_ptr<Lane>& l) { return l.get() == lane; }));
}

StreamConnection::Lane* StreamConnection::laneFor(uint64_t commId) const {
  for (const auto& l : lanes_)
    if (l->commId == commId) return l.get();
  return nullptr;
}

std::deque<StreamConnection::RecvItem>::iterator StreamConnection::firstOf(Sock& s,
                                                                           const Lane* lane) {
  if (lane == nullptr) return s.recvs.end();
  return std::find_if(s.recvs.begin(), s.recvs.end(),
                      [&](const RecvItem& r) { return r.lane == lane; });
}

bool StreamConnection::anyP2PWaiting() const {
  for (const auto& l : lanes_)
    if (l->p2p.waiting()) return true;
  return false;
}

Status StreamConnection::fillEarly(Sock& s, bool* progressed, bool* done) {
  Early& e = s.early.back();
  COLLIE_RETURN_IF_ERROR(readUpTo(s, &e.body[0], e.body.size(), &e.got, progressed));
  if (e.got < e.body.size()) return Status::ok();
  s.filling = false;
  s.hdrGot = 0;
  *done = true;
  if (e.lane == nullptr) {  // no lane wants it
    s.early.pop_back();
    return Status::ok();
  }
  auto it = firstOf(s, e.lane);
  if (it == s.recvs.end()) return Status::ok();  // kept until its receive is posted
  Status st = takeEarly(e, *it);
  s.recvs.erase(it);
  s.early.pop_back();
  return st;
}

Status StreamConnection::takeEarly(const Early& e, RecvItem& it) {
  Status st = checkFrame(e.hdr, it.lane->commId, it.expect, it.len, peer_);
  if (!st.isOk()) return fail(st);
  if (it.len > 0) memcpy(it.data, e.body.data(), it.len);
  completePart(it.req);
  return Status::ok();
}

Status StreamConnection::takeEarlyFrames(const Lane* lane, Request* req) {
  for (auto& s : socks_) {
    // Each part is the last one posted on its stream; it takes the lane's first frame kept
    // there, unless that one is still coming in (it is then handed over once it is in).
    if (s.recvs.empty() || s.recvs.back().req != req) continue;
    auto e = std::find_if(s.early.begin(), s.early.end(),
                          [&](const Early& x) { return x.lane == lane; });
    if (e == s.early.end() || (s.filling && &*e == &s.early.back())) continue;
    Status st = takeEarly(*e, s.recvs.back());
    s.recvs.pop_back();
    s.early.erase(e);
    COLLIE_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

void StreamConnection::setP2PPull(LanePullFn pull) {
  pull_ = std::move(pull);
  for (auto& l : lanes_) {
    const uint64_t id = l->commId;
    l->p2p.setPull([this, id](const RendezvousBody& b, char* dst, size_t bytes, uint32_t tag,
                              uint64_t seq,
                              bool* pulled) { return pull_(id, b, dst, bytes, tag, seq, pulled); });
  }
}

}  // namespace collie
