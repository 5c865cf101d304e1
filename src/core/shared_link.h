// A connection as one communicator of a family sees it once its connections are shared: every
// call holds the connection's lock (Family::wire), so that communicators used from different
// threads take turns on it one call at a time. A child's link owns its lane and shows none of
// the optional capabilities (staging buffers, flag slots, peer memory): those serve the
// communicator that made the connection only, whose algorithms count on having them alone.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "transports/transport.h"

namespace collie {

class SharedLink : public Connection {
 public:
  // conn: the family's connection (capabilities shown) or, with lane set, one of its lanes.
  SharedLink(Connection* conn, std::unique_ptr<Connection> lane, std::mutex* mu)
      : c_(lane ? lane.get() : conn), lane_(std::move(lane)), mu_(mu) {}
  ~SharedLink() override;

  Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) override;
  Status progress(bool* progressed) override;
  void appendPollFds(std::vector<struct pollfd>* fds) const override;
  bool hasPending() const override;
  Status checkEarlyFrame(const FrameTag& mine) const override;
  bool p2pArrived(uint32_t tag, uint64_t seq) override;
  void* peerBuffer() override { return lane_ ? nullptr : c_->peerBuffer(); }
  void* localBuffer() override { return lane_ ? nullptr : c_->localBuffer(); }
  size_t peerBufferBytes() const override { return lane_ ? 0 : c_->peerBufferBytes(); }
  ShmSlots* shmSlots() override { return lane_ ? nullptr : c_->shmSlots(); }
  PeerMemory* peerMemory() override { return lane_ ? nullptr : c_->peerMemory(); }

  int peer() const override { return c_->peer(); }
  void sendAbort(const Status& failure) override;
  bool sendsQueued() const override;
  Word listenAfterFailure() override;
  bool abortPending() const override;
  bool peerClosed() const override;
  // The family's connection lingers when the family goes.
  void linger(const Deadline&) override {}

 private:
  Connection* c_;
  std::unique_ptr<Connection> lane_;
  std::mutex* mu_;
};

}  // namespace collie
