// Small point-to-point messages between two ranks of a host skip the ring: the sender writes
// the frame into the next of a few fixed slots in the receiver's segment, its first word (the
// message's number + 1) last; the receiver finds it by that word alone. A message then costs
// about one cache line each way, where the ring moves head and tail lines as well.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "transports/frame.h"

namespace collie {

constexpr size_t kMailSlots = 16;
constexpr size_t kMailSlotBytes = 256;
constexpr size_t kMailPayload = kMailSlotBytes - 8 - sizeof(FrameHeader);

struct alignas(64) MailSlot {
  std::atomic<uint64_t> mark;  // 1 + the number of the message it holds; written last
  char frame[kMailSlotBytes - 8];
};

// One direction of one pair, in the receiver's segment (zeroed when the segment is made).
struct MailboxCtl {
  alignas(64) std::atomic<uint64_t> taken;  // messages the receiver has taken out
  MailSlot slots[kMailSlots];
};

class ShmMailbox {
 public:
  // out: the peer's box for this rank's messages; in: this rank's box for the peer's. ring
  // wakes the peer, called where sleepers (the peer's count of them) is not zero.
  ShmMailbox(MailboxCtl* out, MailboxCtl* in, const std::atomic<uint32_t>* sleepers,
             std::function<void()> ring)
      : out_(out), in_(in), sleepers_(sleepers), ring_(std::move(ring)) {}
  // Puts a frame of at most kMailPayload body bytes in the peer's box: false when it is full.
  bool post(const FrameHeader& h, const void* body);
  // The next frame from the peer (header, then body), or null; pop() once it is used.
  const char* peek() const {
    const MailSlot& s = in_->slots[taken_ % kMailSlots];
    return s.mark.load(std::memory_order_acquire) == taken_ + 1 ? s.frame : nullptr;
  }
  void pop() { in_->taken.store(++taken_, std::memory_order_release); }

 private:
  MailboxCtl* out_;
  MailboxCtl* in_;
  const std::atomic<uint32_t>* sleepers_;
  std::function<void()> ring_;
  uint64_t sent_ = 0;       // messages put in the peer's box
  uint64_t takenSeen_ = 0;  // of them, taken out as last seen
  uint64_t taken_ = 0;      // messages taken out of this rank's box
};

}  // namespace collie
