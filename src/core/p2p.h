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
// Tag 0 (every untagged call) is counted in an array, other tags in a map.
class PairSequences {
 public:
  explicit PairSequences(int nranks = 0) : sends0_(nranks), recvs0_(nranks) {}
  uint64_t nextSend(int peer, int32_t tag) { return slot(&sends0_, &sends_, peer, tag)++; }
  uint64_t nextRecv(int peer, int32_t tag) { return slot(&recvs0_, &recvs_, peer, tag)++; }
  uint64_t peekRecv(int peer, int32_t tag) { return slot(&recvs0_, &recvs_, peer, tag); }

 private:
  static uint64_t& slot(std::vector<uint64_t>* zero, std::map<std::pair<int, int32_t>, uint64_t>* m,
                        int peer, int32_t tag) {
    return tag == 0 ? (*zero)[static_cast<size_t>(peer)] : (*m)[{peer, tag}];
  }
  std::vector<uint64_t> sends0_, recvs0_;
  std::map<std::pair<int, int32_t>, uint64_t> sends_, recvs_;
};

// The frame tag of a point-to-point message.
FrameTag p2pFrameTag(const P2PCall& c, uint64_t seq);

// Requests posted together; reserved before posting, so their addresses stay put while they are
// in flight.
struct P2PBatch {
  std::vector<Request> reqs;
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
