// The shared-memory connection's mailbox path for small point-to-point messages.
#include "transports/shm/shm_connection.h"

#include <cstring>

#include "transports/p2p_match.h"

namespace collie {

Status ShmConnection::isend(const void* buf, size_t bytes, const FrameTag& tag, Request* req) {
  if (isP2PFrame(tag.coll) && bytes <= kMailPayload && failure().isOk() &&
      mail_->post(encodeFrame(commId(), p2pStripeTag(tag, 1, 0), bytes), buf)) {
    req->start(bytes, tag, true, peer());
    req->done = true;
    return Status::ok();
  }
  return StreamConnection::isend(buf, bytes, tag, req);
}

Status ShmConnection::drainSideChannel(bool* progressed) {
  while (const char* frame = mail_->peek()) {
    FrameHeader h;
    memcpy(&h, frame, sizeof(h));
    Status st = h.len <= kMailPayload
                    ? deliverP2P(h, frame + sizeof(h))
                    : deliverP2P(FrameHeader{}, nullptr);  // garbled: fails the connection
    mail_->pop();
    *progressed = true;
    COLLIE_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

Status ShmConnection::progress(bool* progressed) {
  if (!failure().isOk()) return failure();
  COLLIE_RETURN_IF_ERROR(drainSideChannel(progressed));
  return StreamConnection::progress(progressed);
}

}  // namespace collie
