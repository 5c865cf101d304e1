// Frame headers: encoding, the receiver's checks, and how a tag reads in a message.
#include "transports/frame.h"

#include <cstdio>

#include "src/base/dtype.h"

namespace collie {

static_assert(kP2PColl == static_cast<uint8_t>(Collective::kSendRecv), "p2p frames");

namespace {

// A received header's dtype byte can be anything; only a valid one may become the enum.
const char* dtypeByteName(uint8_t d) {
  return validDtype(d) ? dtypeName(static_cast<collieDataType_t>(d)) : "unknown";
}

}  // namespace

std::string describeFrameTag(const FrameTag& t) {
  if (isP2PFrame(t.coll))
    return "message of " + std::to_string(t.count) + " " + dtypeByteName(t.dtype) + " with tag " +
           std::to_string(static_cast<int32_t>(t.tag)) + " (#" + std::to_string(t.seq) +
           " of its pair and tag)";
  std::string s = collectiveName(static_cast<Collective>(t.coll));
  s += " count " + std::to_string(t.count) + " " + dtypeByteName(t.dtype);
  const Collective c = static_cast<Collective>(t.coll);
  if (c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce)
    s += std::string(" ") + redOpName(static_cast<collieRedOp_t>(t.op));
  if (t.root >= 0) s += " root " + std::to_string(t.root);
  s += " (op #" + std::to_string(t.seq) + ")";
  return s;
}

FrameHeader encodeFrame(uint64_t commId, const FrameTag& t, uint64_t len) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.tag = t.tag;
  h.commId = commId;
  h.seq = t.seq;
  h.count = t.count;
  h.len = len;
  h.coll = t.coll;
  h.dtype = t.dtype;
  h.op = t.op;
  h.algo = t.algo;
  h.root = t.root;
  return h;
}

Status checkFrame(const FrameHeader& h, uint64_t commId, const FrameTag& e, uint64_t len,
                  int peer) {
  std::string who = "peer rank " + std::to_string(peer);
  if (h.magic != kFrameMagic || h.commId != commId) {
    char buf[160];
    snprintf(buf, sizeof(buf), "garbled frame from %s (magic 0x%08x, communicator %016llx)",
             who.c_str(), h.magic, static_cast<unsigned long long>(h.commId));
    return remoteError(buf);
  }
  FrameTag got;
  got.seq = h.seq;
  got.count = h.count;
  got.coll = h.coll;
  got.dtype = h.dtype;
  got.op = h.op;
  got.root = h.root;
  if (h.seq != e.seq || h.count != e.count || h.coll != e.coll || h.dtype != e.dtype ||
      h.op != e.op || h.root != e.root) {
    return invalidUsage("ranks disagree: " + who + " called " + describeFrameTag(got) +
                        " while this rank called " + describeFrameTag(e) +
                        "; every rank must call the same collectives in the same order with the "
                        "same count, datatype, op and root");
  }
  if (h.algo != e.algo || h.tag != e.tag || h.len != len) {
    return invalidUsage("ranks disagree on the schedule of " + describeFrameTag(e) + ": " + who +
                        " sent step " + std::to_string(h.tag) + " of " + std::to_string(h.len) +
                        " bytes (algorithm " + std::to_string(h.algo) +
                        "), this rank expected step " + std::to_string(e.tag) + " of " +
                        std::to_string(len) + " bytes (algorithm " + std::to_string(e.algo) +
                        "); check COLLIE_ALGO and COLLIE_* settings match");
  }
  return Status::ok();
}

std::string encodeAbort(uint64_t commId, const Status& failure) {
  const std::string reason = failure.message().substr(0, kMaxAbortPayload);
  FrameHeader h{};
  h.magic = kAbortMagic;
  h.commId = commId;
  h.len = reason.size();
  h.root = failure.stalledOn() >= 0 ? failure.stalledOn() : -1;
  // A usage error stays one on every rank: the program, not a peer, is at fault.
  h.op = failure.code() == collieInvalidUsage ? 1 : 0;
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + reason;
}

Status abortError(int peer, const FrameHeader& h, const std::string& reason) {
  const std::string msg = "peer rank " + std::to_string(peer) + " aborted: " + reason;
  const Status st = h.op == 1 ? invalidUsage(msg) : remoteError(msg);
  return h.root >= 0 ? st.withStalledOn(h.root) : st;
}

}  // namespace collie
