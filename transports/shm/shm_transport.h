// Shared-memory transport for ranks of one host: each rank owns one POSIX shm segment holding
// an inbound single-producer/single-consumer byte ring per local peer, a doorbell word (a
// futex) its peers ring after writing, and a staging buffer the peers map and read from
// directly (ShmSlots). Segments are unlinked as soon as every local rank has mapped them, so
// a crash leaves nothing behind in /dev/shm.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/stream_connection.h"
#include "transports/transport.h"

namespace collie {

struct ShmOptions {
  size_t ringBytes = 1 << 20;     // per peer and direction
  size_t stagingBytes = 4 << 20;  // the buffer peers read from
  size_t stripeBytes = 256 << 10;
  bool lend = true;  // large point-to-point messages are read from the sender (rendezvous)
};

class ShmSegment;

// Sleeps on this rank's doorbell until a peer rings it (or the timeout passes).
class ShmDoorbell : public Doorbell {
 public:
  explicit ShmDoorbell(ShmSegment* seg) : seg_(seg) {}
  uint32_t prepare() override;
  void sleep(uint32_t seen, int64_t timeoutUs) override;
  void finish() override;

 private:
  ShmSegment* seg_;
};

class ShmTransport : public Transport {
 public:
  // Nothing is made before connectGroup. shrinkable: the sizes are the defaults, which shrink to
  // what /dev/shm has room for.
  ShmTransport(uint64_t commId, int rank, const ShmOptions& opt, bool shrinkable);
  ~ShmTransport() override;
  const char* name() const override { return "shm"; }

  // Creates (and maps) this rank's segment; localRanks lists the ranks of this host in rank
  // order, this one included.
  static StatusOr<std::unique_ptr<ShmTransport>> create(uint64_t commId, int rank,
                                                        std::vector<int> localRanks,
                                                        const ShmOptions& opt);

  bool canConnect(const RankPlace& local, const RankPlace& peer) const override {
    return local.host == peer.host;
  }
  // The name peers map this rank's segment by.
  std::string localAddress() const override { return name_; }
  // Maps the peer's segment, named peerBytes, and connects through it.
  StatusOr<std::unique_ptr<Connection>> connect(int peer, const std::string& peerBytes) override;
  // The local ranks make their segments together, at sizes that fit /dev/shm, and all of them
  // go on with shm or all give it up alike (shm_setup.cc).
  Status connectGroup(ConnectStep* step, ConnectionTable* conns) override;
  Doorbell* doorbell() override { return doorbell_.get(); }
  // The progress thread holds this rank's alive mark for its local peers (holdAlive).
  void threadStarted() override;
  void threadIdle() override;
  void threadStopping() override;

  const std::string& segmentName() const { return name_; }
  // Maps the peers' segments (names[i] belongs to localRanks[i]).
  Status mapPeers(const std::vector<std::string>& names);
  // Every local rank holds its whole segment: this one's rings give their pages past their heads
  // back until first used (the room the host needs was there at once, so it is there later).
  void releaseRingPages();
  // Every local rank has mapped this segment: remove its name.
  void unlinkOwn();
  // One connection per local peer (index by rank in the returned map's slots).
  void makeConnections(ConnectionTable* conns);
  // Holds this rank's alive mutex, from the thread that lives as long as its peers may need
  // this rank (the communicator's progress thread), until releaseAlive from the same thread;
  // false where it could not be taken within timeoutMs (AliveMark::hold).
  // Peers in another PID namespace, which cannot watch this process's pid, tell its death by
  // it: the kernel marks a robust mutex whose holder died.
  bool holdAlive(int64_t timeoutMs);
  void releaseAlive();

 private:
  void setLocal(std::vector<int> localRanks);
  Status makeSegment(const ShmOptions& opt);
  void dropSegment();  // unmaps the peers' segments, unlinks and unmaps this rank's
  Status mapPeer(size_t i, const std::string& name);
  // The connection to local peer i; slots: every local rank's, shared by all the connections
  // of this rank (null for a connection made alone, which then offers none).
  std::unique_ptr<Connection> connectionTo(size_t i, std::shared_ptr<ShmSlots> slots);
  // The group step's rounds (shm_setup.cc).
  Status sizeSegments(ConnectStep* step, std::vector<std::string>* names);
  bool refused(ConnectStep* step, const std::vector<std::string>& values, Status* result);

  uint64_t commId_ = 0;
  int rank_ = 0;
  int localIndex_ = 0;
  std::vector<int> local_;
  ShmOptions want_;  // as asked
  ShmOptions opt_;   // as made
  bool shrinkable_ = false;
  bool noRoom_ = false;  // the last makeSegment failed for want of room in /dev/shm
  bool aliveHeld_ = false;
  std::string name_;
  bool linked_ = false;
  std::unique_ptr<ShmSegment> own_;
  std::vector<std::unique_ptr<ShmSegment>> peers_;  // by local index; null for this rank
  std::unique_ptr<ShmDoorbell> doorbell_;
};

// Whether this kernel puts a shared mapping's pages in place on demand (MADV_POPULATE_WRITE,
// Linux 5.14): where it cannot, a segment's rings keep their pages from setup on.
bool shmPopulatesOnDemand();

// Segment names of a communicator start with this, so tests can check none is left behind.
constexpr const char* kShmPrefix = "collie-";
// How the error of a segment /dev/shm has no room for begins.
constexpr const char* kShmNoRoom = "/dev/shm has no room";

}  // namespace collie
