// What the device schedules (device_ring.cc, device_tree.cc) share: the device work they ask
// for, and the control frames between neighbours. Each rank's staging buffer on the device is
// cut into slots that its neighbours copy into; a message on the channel from rank A to rank B
// is one slot's worth of data. The device work is enqueued in order on one stream and ordered
// across processes by events (cuda_ipc and IPC events in src/core/device_ring.cc; plain host
// memory in the CPU tests). The host thread moves only 16-byte frames over the communicator's
// connections: "ready m" (message m of my channel to you is in your slot) and "free m" (I have
// consumed message m of your channel to me). Every wait is bounded by ctx's deadline and abort
// flag; a frame out of order or of an unknown kind is an error naming the peer.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "algorithms/algorithm.h"

namespace collie {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  // Later work waits for what peer had recorded when it sent its last frame here.
  virtual Status waitPeer(int peer) = 0;
  // bytes from src (this rank's memory) to offset in peer's staging buffer.
  virtual Status copyToPeer(int peer, size_t offset, const void* src, size_t bytes) = 0;
  // dst[i] = slot[i] OP own[i], slot at offset in this rank's staging buffer.
  virtual Status reduceSlot(void* dst, size_t offset, const void* own, size_t count,
                            collieDataType_t dtype, collieRedOp_t op) = 0;
  virtual Status scale(void* dst, size_t count, collieDataType_t dtype, int divisor) = 0;
  virtual Status copyFromSlot(void* dst, size_t offset, size_t bytes) = 0;
  // Marks the work enqueued so far: what the neighbours' waitPeer waits for.
  virtual Status record() = 0;
};

// The frames of one op. Each neighbour is listed once with the messages of the channel from it
// (in) and to it (out).
class DeviceChannels {
 public:
  struct Neighbour {
    int rank = -1;
    size_t in = 0;
    size_t out = 0;
  };
  DeviceChannels(const CollArgs& args, const AlgoContext& ctx, const char* what,
                 std::vector<Neighbour> neighbours);
  Status start();  // posts the first receives
  // Messages of the channel from peer that are in my slots (ready), and of my channel to peer
  // that peer has consumed (freed).
  size_t ready(int peer) const { return at(peer).ready; }
  size_t freed(int peer) const { return at(peer).freed; }
  // Every message this rank sent has been consumed: its slots in the neighbours are free for
  // the next op.
  bool allFreed() const {
    for (const Peer& p : peers_)
      if (p.freed < p.n.out) return false;
    return true;
  }
  Status sendReady(int peer, size_t m) { return signal(peer, kReady, m); }
  Status sendFree(int peer, size_t m) { return signal(peer, kFree, m); }
  // Runs advance (it returns whether it did anything) until done, moving the frames and
  // sleeping on the connections when nothing can move; then waits for the last sends.
  template <typename Advance, typename Done>
  Status drive(Advance advance, Done done);

 private:
  enum : uint32_t { kReady = 1, kFree = 2 };
  struct Control {
    uint32_t signal = 0;
    uint32_t zero = 0;
    uint64_t message = 0;
  };
  struct Peer {
    Neighbour n;
    Connection* conn = nullptr;
    size_t due = 0;  // frames still to post: a receive is posted only while one is due, so a
                     // frame of the next op is never taken for one of this op
    size_t ready = 0, freed = 0;
    Control msg;
    Request req;
    bool posted = false;
  };
  struct Out {
    Control msg;
    Request req;
  };
  const Peer& at(int peer) const;
  Peer& at(int peer);
  Status signal(int peer, uint32_t kind, size_t m);
  Status post(Peer& p);
  Status take(Peer& p);
  Status poll(bool* moved);  // takes the frames that arrived
  Status waitForFrame(const char* state);
  Status finish();

  const AlgoContext& ctx_;
  const char* what_;
  FrameTag tag_;
  std::vector<Peer> peers_;
  std::deque<Out> out_;
};

template <typename Advance, typename Done>
Status DeviceChannels::drive(Advance advance, Done done) {
  for (;;) {
    bool moved = false;
    COLLIE_RETURN_IF_ERROR(poll(&moved));
    bool acted = false;
    COLLIE_RETURN_IF_ERROR(advance(&acted));
    if (done()) break;
    if (acted || moved) continue;
    COLLIE_RETURN_IF_ERROR(waitForFrame("waiting for a neighbour's frame"));
  }
  return finish();
}

}  // namespace collie
