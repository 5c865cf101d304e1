// The wire format of a frame, shared by every message transport (tcp, shm, ucx): the tag a
// collective puts on each message, the 48-byte header that carries it, and the receiver's check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "src/base/status.h"

namespace collie {

// What every frame of a collective carries besides its length; the receiver checks all of it so
// that ranks running different ops, counts or dtypes get a clear error, never a wrong answer.
struct FrameTag {
  uint64_t seq = 0;    // per-communicator op sequence number
  uint64_t count = 0;  // the op's element count as the caller gave it
  uint32_t tag = 0;    // algorithm step/chunk
  uint8_t coll = 0;    // Collective
  uint8_t dtype = 0;   // collieDataType_t
  uint8_t op = 0;      // collieRedOp_t
  uint8_t algo = 0;    // which algorithm's schedule this frame belongs to
  int32_t root = -1;
};

// Point-to-point frames: coll is kP2PColl, tag the user's tag, seq the message's number among
// those of its pair of ranks and tag, op and algo its stripe and stripe count.
constexpr uint8_t kP2PColl = 10;  // Collective::kSendRecv
inline bool isP2PFrame(uint8_t coll) { return coll == kP2PColl; }

// Describes a tag for messages: "allreduce count 12 float sum (seq 3)".
std::string describeFrameTag(const FrameTag& t);

// The wire header of every frame (exposed for tests and fuzzing).
struct FrameHeader {
  uint32_t magic;
  uint32_t tag;
  uint64_t commId;
  uint64_t seq;
  uint64_t count;
  uint64_t len;
  uint8_t coll, dtype, op, algo;
  int32_t root;
};
static_assert(sizeof(FrameHeader) == 48, "wire header is 48 bytes");
constexpr uint32_t kFrameMagic = 0x434c4644;  // "CLFD"
constexpr uint32_t kAbortMagic = 0x434c4142;  // "CLAB"
constexpr size_t kMaxAbortPayload = 4096;

FrameHeader encodeFrame(uint64_t commId, const FrameTag& t, uint64_t len);
// Compares a received header with what the receiver expects; the Status names the peer.
Status checkFrame(const FrameHeader& h, uint64_t commId, const FrameTag& expect, uint64_t len,
                  int peer);

// The abort frame a failed rank sends: a header whose root is the peer the failure's wait
// stalled on (-1 for none), then the failure's message, cut to kMaxAbortPayload.
std::string encodeAbort(uint64_t commId, const Status& failure);
// The error a peer's abort (header h, then reason) gives this rank: the peer's reason, and the
// peer the abort says a wait stalled on.
Status abortError(int peer, const FrameHeader& h, const std::string& reason);

}  // namespace collie
