// Point-to-point calls as the communicator runs them: what one call asks for, the per pair and
// tag sequence numbers that let receivers match messages by content, and a batch of posted
// requests (one group's calls on one communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "src/base/dtype.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "transports/transport.h"

namespace collie {

// One collieSend / collieRecv (already checked by the API).
struct P2PCall {
  bool send = false;
  void* buf = nullptr;  // the send buffer (read only) or the receive buffer
  size_t count = 0;
  collieDataType_t dtype = collieFloat32;
  int peer = 0;
  int32_t tag = 0;
  size_t bytes() const { return count * dtypeSize(dtype); }
};

// The next message number of each (peer, tag), one counter for sends and one for receives: the
// k-th send from a to b with tag t matches b's k-th receive from a with tag t.
class PairSequences {
 public:
  uint64_t nextSend(int peer, int32_t tag) { return sends_[{peer, tag}]++; }
  uint64_t nextRecv(int peer, int32_t tag) { return recvs_[{peer, tag}]++; }
  uint64_t peekRecv(int peer, int32_t tag) { return recvs_[{peer, tag}]; }

 private:
  std::map<std::pair<int, int32_t>, uint64_t> sends_, recvs_;
};

// The frame tag of a point-to-point message.
FrameTag p2pFrameTag(const P2PCall& c, uint64_t seq);

// Requests posted together; their addresses stay put while they are in flight.
struct P2PBatch {
  std::deque<Request> reqs;
  Deadline deadline;
  bool allDone() const {
    for (const Request& r : reqs)
      if (!r.done) return false;
    return true;
  }
};

// Matches the sends to this rank with the receives from it, in order per tag, and copies their
// data: a group's messages to itself. Fails on a send or receive left without its partner.
Status matchSelfCalls(const std::vector<P2PCall>& calls, int self);

// The error of a wait for a request that timed out: names the op, peer and message.
Status p2pTimedOut(const Request& req);

}  // namespace collie
