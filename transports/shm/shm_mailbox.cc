// The sending half of a mailbox (shm_mailbox.h).
#include "transports/shm/shm_mailbox.h"

#include <cstring>

namespace collie {

bool ShmMailbox::post(const FrameHeader& h, const void* body) {
  if (h.len > kMailPayload) return false;
  if (sent_ - takenSeen_ >= kMailSlots) {
    // The receiver's count is read only when the box looks full: no line bounces per message.
    takenSeen_ = out_->taken.load(std::memory_order_acquire);
    if (sent_ - takenSeen_ >= kMailSlots) return false;
  }
  MailSlot& s = out_->slots[sent_ % kMailSlots];
  memcpy(s.frame, &h, sizeof(h));
  if (h.len > 0) memcpy(s.frame + sizeof(h), body, h.len);
  // A full barrier before reading the sleepers (a sleeper announces itself, then looks again):
  // the exchange is one, cheaper than a store and a fence.
  s.mark.exchange(++sent_, std::memory_order_seq_cst);
  if (sleepers_->load(std::memory_order_relaxed) != 0) ring_();
  return true;
}

}  // namespace collie
