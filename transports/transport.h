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

// Whether a request is complete. Atomic (release on completion, acquire on reading) because a
// connection shared by communicators of several threads may complete a request of one thread
// in another's progress call; plain loads and stores on x86.
class DoneFlag {
 public:
  DoneFlag(bool v = false) : v_(v) {}  // NOLINT(google-explicit-constructor)
  DoneFlag(const DoneFlag& o) : v_(o.v_.load(std::memory_order_acquire)) {}
  DoneFlag& operator=(const DoneFlag& o) { return *this = static_cast<bool>(o); }
  DoneFlag& operator=(bool v) {
    v_.store(v, std::memory_order_release);
    return *this;
  }
  operator bool() const { return v_.load(std::memory_order_acquire); }  // NOLINT

 private:
  std::atomic<bool> v_;
};

// One asynchronous send or receive. Owned by the caller; must outlive its completion.
struct Request {
  DoneFlag done;
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

class ShmSlots;
class PeerMemory;

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
  // Whether the point-to-point message (tag, seq) from the peer has begun to arrive with no
  // receive posted for it: how a receive from any peer finds its sender.
  virtual bool p2pArrived(uint32_t tag, uint64_t seq) { return false; }
  // Optional capabilities of a peer on this host (ShmSlots, PeerMemory below): nullptr where
  // the transport has none.
  virtual ShmSlots* shmSlots() { return nullptr; }
  virtual PeerMemory* peerMemory() { return nullptr; }
  // A lane: another communicator (a split child) on this connection to the same peer. Its
  // frames carry commId and the receiver files each frame by it, so lanes never reorder each
  // other's frames; number tells the lane apart where a transport's wire has no room for the id
  // (both sides open it with the same). A lane has none of the optional capabilities above. The
  // connection and all its lanes are driven by one thread at a time; a lane is closed by
  // destroying it, before the connection. Null where the transport has no lanes.
  virtual std::unique_ptr<Connection> openLane(uint64_t commId, uint32_t number) { return nullptr; }
  // Whether frames of a lane not opened yet wait for it (else the lane must be open before the
  // peer may send on it, and its number is not known yet then: 0).
  virtual bool lanesOpenLate() const { return false; }
};

// The slots of the staging buffers of the ranks on this host, for algorithms that synchronise
// through flags in shared memory. One object per rank, shared by its connections: its event
// count goes on across algorithms and calls, alike on ranks that make the same calls.
class ShmSlots {
 public:
  // Event e uses slot e % kSlots (algorithms/shm_flags.h says why three).
  static constexpr size_t kSlots = 3;
  // byRank[r]: rank r's staging buffer as mapped here (null off this host); slotBytes a whole
  // number of cache lines. The buffers must outlive the slots.
  ShmSlots(std::vector<char*> byRank, size_t slotBytes)
      : byRank_(std::move(byRank)), slotBytes_(slotBytes) {}
  // The slot of event in rank's staging buffer: aligned to a cache line, slotBytes() long.
  // Inline: the smallest calls look slots up several times each.
  char* slot(int rank, uint64_t event) const {
    return byRank_[static_cast<size_t>(rank)] + (event % kSlots) * slotBytes_;
  }
  size_t slotBytes() const { return slotBytes_; }
  // Takes the next n events; returns the first.
  uint64_t takeEvents(uint64_t n) {
    const uint64_t first = events_;
    events_ += n;
    return first;
  }

 private:
  std::vector<char*> byRank_;
  size_t slotBytes_;
  uint64_t events_ = 0;
};

// Single-copy access to one peer's memory on this host: the kernel copies straight between the
// two processes, with no bounce through shared memory.
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;
  // Whether this process may read the peer's memory and finds expected (at most 64 bytes) at
  // remote there: a pid that names another process is not mistaken for the peer.
  virtual bool reachable(const void* remote, const void* expected, size_t bytes) = 0;
  // Copies bytes from remote (an address in the peer) into local; what names the op in errors.
  virtual Status read(const void* remote, void* local, size_t bytes, const char* what) = 0;
  // Copies bytes from local into remote (an address in the peer).
  virtual Status write(void* remote, const void* local, size_t bytes, const char* what) = 0;
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
  // shared: the connections are shared with communicators of other threads, which may read
  // what this wait waits for while it sleeps: sleeps are short.
  Poller(std::vector<Connection*> conns, int64_t spinUs, const std::atomic<bool>* abortFlag,
         Doorbell* doorbell = nullptr, bool yield = false, bool shared = false)
      : conns_(std::move(conns)),
        spinUs_(spinUs),
        abort_(abortFlag),
        doorbell_(doorbell),
        yield_(yield),
        shared_(shared) {
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
  bool shared_;
  bool fdPeers_ = false;  // some peer is reached by a socket-like transport (tcp, ucx)
  static constexpr int64_t kMixedSleepUs = 200;
  static constexpr int kSharedSleepMs = 1;
  std::vector<struct pollfd> fds_;
};

// Where a rank runs, as far as the choice of a transport goes.
struct RankPlace {
  int rank = 0;
  std::string host;  // equal strings: one host, reachable through shared memory
};

// Moves short values between ranks for transports' group steps. The communicator implements it
// over its Store, so that transports never see the Store.
class AddressExchange {
 public:
  virtual ~AddressExchange() = default;
  // Publishes this rank's value under key.
  virtual Status publish(const std::string& key, const std::string& value) = 0;
  // What each of ranks published under key, in that order; waits for all until deadline.
  virtual Status collect(const std::string& key, const std::vector<int>& ranks,
                         const Deadline& deadline, std::vector<std::string>* values) = 0;
  // publish, then collect.
  Status exchange(const std::string& key, const std::string& value, const std::vector<int>& ranks,
                  const Deadline& deadline, std::vector<std::string>* values);
};

// Connections by rank; null for this rank and for peers not connected yet.
using ConnectionTable = std::vector<std::unique_ptr<Connection>>;

// What one transport's group step works on. Every rank with peers for the transport runs the
// step at the same point, with the peers that chose it (a symmetric relation).
struct ConnectStep {
  AddressExchange* exchange = nullptr;
  const std::vector<RankPlace>* ranks = nullptr;  // every rank, by rank
  int self = 0;
  // In: the peers to connect, in rank order. Out: those connected; the rest take fallback.
  std::vector<int> peers;
  // The transport the peers take where this one gives them up; null: giving up is an error.
  const char* fallback = nullptr;
  // Where the user restricted the transports, how ("COLLIE_TRANSPORT=shm"), for messages.
  std::string restriction;
  Deadline deadline;
  const RankPlace& me() const { return (*ranks)[static_cast<size_t>(self)]; }
  bool sameHost(int peer) const { return (*ranks)[static_cast<size_t>(peer)].host == me().host; }
};

// A way to reach peers: it hands out its address as bytes and connects to a peer's bytes.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Whether this transport may reach peer from local at all, before any set-up.
  virtual bool canConnect(const RankPlace& local, const RankPlace& peer) const = 0;
  // This rank's address, for the peers' connect.
  virtual std::string localAddress() const = 0;
  // A connection to peer from the bytes its localAddress() gave; both sides call it.
  virtual StatusOr<std::unique_ptr<Connection>> connect(int peer, const std::string& peerBytes) = 0;
  // The group step: connects step->peers with them. The default exchanges localAddress()
  // under the transport's name and connects each peer; transports that size a shared resource
  // together or connect a mesh in order override it.
  virtual Status connectGroup(ConnectStep* step, ConnectionTable* conns);
  // Where a rank without file descriptors sleeps (shared memory); null for socket transports.
  virtual Doorbell* doorbell() { return nullptr; }
  // The communicator's progress thread lives as long as the communicator: it calls these when
  // it starts, when it idles (about every 100 ms) and before it ends.
  virtual void threadStarted() {}
  virtual void threadIdle() {}
  virtual void threadStopping() {}
  // Before the connections of a communicator that is going away close (nothing in flight):
  // a transport whose close could lose data a peer still reads says goodbye first.
  virtual void farewell(const Deadline& deadline) {}
};

}  // namespace collie
