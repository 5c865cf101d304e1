// The transport interface. A Transport hands out its local address as bytes and connects to a
// peer's bytes; the communicator moves those bytes through the Store. A Connection moves tagged
// frames to and from one peer asynchronously; algorithms see nothing but Connections.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "transports/abort_link.h"
#include "transports/frame.h"

namespace collie {

// How a wait that ran out of time names its peer, for the reader of the message. Code learns
// the peer from Status::stalledOn(), never from this text.
constexpr char kTimedOutWaitingFor[] = "timed out waiting for peer rank ";

// One asynchronous send or receive. Owned by the caller; must outlive its completion.
struct Request {
  bool done = false;
  int partsLeft = 0;  // transport-private: pieces still in flight (striping)
  Status status;
  size_t bytes = 0;
  int peer = -1;
  bool isSend = false;
  FrameTag tag;

  // Resets the request for a new transfer of bytes to or from peer.
  void start(size_t n, const FrameTag& t, bool send, int to) {
    done = false;
    partsLeft = 0;
    status = Status::ok();
    bytes = n;
    peer = to;
    isSend = send;
    tag = t;
  }
};

// The data path to one peer; its part in the failure protocol (peer(), sendAbort, listening
// after a failure, linger) is the AbortLink it derives from.
class Connection : public AbortLink {
 public:
  // Queue a send of bytes from buf; buf must stay valid and unchanged until req->done.
  virtual Status isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) = 0;
  // Queue a receive of exactly bytes into buf; a frame of another length or tag is an error.
  virtual Status irecv(void* buf, size_t bytes, const FrameTag& tag, Request* req) = 0;
  // Moves queued work forward without blocking; sets *progressed when anything moved.
  // An error here (peer closed, garbled frame, abort from the peer) fails the connection.
  virtual Status progress(bool* progressed) = 0;
  // File descriptors to wait on when nothing progresses (events: POLLIN/POLLOUT as needed).
  virtual void appendPollFds(std::vector<struct pollfd>* fds) const = 0;
  // Optional capability (shm, cuda_ipc): the peer's staging buffer mapped here, and this rank's
  // own, which the peer sees as its peerBuffer(). Both are peerBufferBytes() long.
  virtual void* peerBuffer() { return nullptr; }
  virtual void* localBuffer() { return nullptr; }
  virtual size_t peerBufferBytes() const { return 0; }
  virtual bool hasPending() const = 0;
  // An error where a frame of the call tagged mine came while this rank runs that call without
  // messages (through shared memory): the peer runs it by another algorithm.
  virtual Status checkEarlyFrame(const FrameTag& mine) const { return Status::ok(); }
};

// Where a transport without file descriptors (shared memory) wakes a sleeping rank.
// The sleeper announces itself first (prepare), checks its streams once more, and only then
// sleeps; a writer rings only when someone announced itself. Either the sleeper's last check
// sees the data or the writer sees the sleeper: no wake-up is lost, and a busy rank pays no
// atomic read-modify-write on a shared line per message.
class Doorbell {
 public:
  virtual ~Doorbell() = default;
  virtual uint32_t prepare() = 0;  // announce; returns the value to sleep on
  // Returns when the value is no longer seen, or after timeoutUs.
  virtual void sleep(uint32_t seen, int64_t timeoutUs) = 0;
  virtual void finish() = 0;  // no longer sleeping
};

// Drives a set of connections: progress all, spin a while, then sleep in poll() until a socket
// is ready or the deadline passes. Used by whichever thread runs the schedule.
class Poller {
 public:
  // abortFlag (may be null): set by another thread to make every wait return an error.
  // yield: give the core up between idle polls while spinning (more ranks than cores).
  Poller(std::vector<Connection*> conns, int64_t spinUs, const std::atomic<bool>* abortFlag,
         Doorbell* doorbell = nullptr, bool yield = false)
      : conns_(std::move(conns)),
        spinUs_(spinUs),
        abort_(abortFlag),
        doorbell_(doorbell),
        yield_(yield) {
    for (Connection* c : conns_) fdPeers_ |= c != nullptr && c->peerBuffer() == nullptr;
  }
  // Returns when req is done (its status), or an error from any connection, or a timeout
  // naming req's peer and what was waited for.
  Status wait(Request* req, const Deadline& deadline, const char* op);
  // Returns when at least one of reqs completes, or as wait() does on error.
  Status progressUntilAny(Request* const* reqs, size_t n, const Deadline& deadline, const char* op);
  Status progressAll(bool* progressed, bool idleToo = false);

 private:
  Status sleepOnFds(int timeoutMs);
  std::vector<Connection*> conns_;
  int64_t spinUs_;
  const std::atomic<bool>* abort_;
  Doorbell* doorbell_;
  bool yield_;
  bool fdPeers_ = false;  // some peer is reached by a socket-like transport (tcp, ucx)
  static constexpr int64_t kMixedSleepUs = 200;
  std::vector<struct pollfd> fds_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
};

}  // namespace collie
