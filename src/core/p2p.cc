// Point-to-point helpers: frame tags, messages to this rank, timeouts.
#include "src/core/p2p.h"

#include <cstring>
#include <string>

namespace collie {

FrameTag p2pFrameTag(const P2PCall& c, uint64_t seq) {
  FrameTag t;
  t.seq = seq;
  t.count = c.count;
  t.tag = static_cast<uint32_t>(c.tag);
  t.coll = kP2PColl;
  t.dtype = static_cast<uint8_t>(c.dtype);
  return t;
}

namespace {

std::string describeSelf(const P2PCall& c, int self) {
  return std::string(c.send ? "a send to" : "a receive from") + " this rank (" +
         std::to_string(self) + ") with tag " + std::to_string(c.tag) + " of " +
         std::to_string(c.count) + " " + dtypeName(c.dtype);
}

}  // namespace

Status matchSelfCalls(const std::vector<P2PCall>& calls, int self) {
  std::map<int32_t, std::deque<const P2PCall*>> sends;
  for (const P2PCall& c : calls)
    if (c.send && c.peer == self) sends[c.tag].push_back(&c);
  for (const P2PCall& c : calls) {
    if (c.send || c.peer != self) continue;
    auto& q = sends[c.tag];
    if (q.empty())
      return invalidUsage(describeSelf(c, self) + " has no matching send in its group");
    const P2PCall* s = q.front();
    q.pop_front();
    if (s->count != c.count || s->dtype != c.dtype)
      return invalidUsage("ranks disagree: " + describeSelf(*s, self) + " meets " +
                          describeSelf(c, self) + "; count and datatype must match");
    if (c.bytes() > 0) memmove(c.buf, s->buf, c.bytes());
  }
  for (auto& entry : sends)
    if (!entry.second.empty())
      return invalidUsage(describeSelf(*entry.second.front(), self) +
                          " has no matching receive in its group");
  return Status::ok();
}

Status p2pTimedOut(const Request& req) {
  const char* op = req.isSend ? "send" : "recv";
  return stalledWait(std::string(op) + ": " + kTimedOutWaitingFor + std::to_string(req.peer) +
                         " (" + (req.isSend ? "send of " : "receive of ") +
                         std::to_string(req.bytes) + " bytes, " + describeFrameTag(req.tag) +
                         "); the peer never posted the matching call, or is stuck or dead (see "
                         "COLLIE_TIMEOUT_MS)",
                     req.peer);
}

}  // namespace collie
