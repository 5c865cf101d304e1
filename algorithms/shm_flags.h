// The flag protocol of the shared-memory algorithms (shm_direct, shm_single_copy): flags in the
// slots of the ranks' staging buffers (ShmSlots, transport.h) instead of messages.
//
// Each slot starts with a head only its owner writes: a cache line published after filling the
// slot (an event number plus the call's count, dtype, op and root, so ranks that disagree get
// an error rather than a wrong answer) and one published after reducing its slice. Event
// numbers count slots used since the communicator began, the same on every rank, and event e
// uses slot e mod 3. Paths with one flag wait per chunk need only two slots: a rank refills the
// slot of event e+2 only after it saw every peer's event e+1, which a peer publishes only after
// it read everyone's slot of event e. The chunked AllReduce needs the third: it stages chunk e+1
// before it waits for the peers' reduced slices of chunk e, and the slot of e+1 was last used by
// e-2, which every peer finished reading before it published its reduced slice of e-1.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "algorithms/algorithm.h"

namespace collie {

constexpr size_t kLine = 64;
// The cost models' rate of a pass over the data in memory (memcpy, reduce): 20 GB/s.
constexpr double kShmCopyBytesPerUs = 20e3;
static_assert(ShmSlots::kSlots == 3, "the chunked AllReduce pipelines over three slots");

// What a slot's event is for; ranks must agree on it as on the count.
enum ShmPath : uint8_t { kStaged = 0, kVote = 1, kSingle = 2, kLineMessage = 3 };

// The smallest AllReduces go in one cache line of the slot's head: the call's descriptor, the
// data and, stored last, the event's tag. The data then arrives with the sign that it is there
// in one transfer between cores. Over more lines a reader would take each line away from the
// writer again. The line is apart from the data area, where a tag could be any value.
struct alignas(kLine) LineMessage {
  uint32_t seq;  // the call's number, its low bits
  uint8_t count, dtype, op, coll;
  char bytes[kLine - 16];     // 48: whole elements of any type
  std::atomic<uint64_t> tag;  // event number + 1, stored after the rest
};
static_assert(sizeof(LineMessage) == kLine, "one line");
constexpr size_t kLineBytes = sizeof(LineMessage::bytes);

// The head of each slot: three cache lines, written only by the slot's owner.
struct alignas(kLine) SlotFlags {
  std::atomic<uint64_t> staged;  // event number, published after data and descriptor
  uint64_t count;
  uint64_t seq;
  uint8_t coll, dtype, op, path, pad[4];  // path: a ShmPath
  int32_t root;
  uint32_t unused;
  uint64_t sendAddr, recvAddr;                   // single copy: the owner's buffers, its addresses
  alignas(kLine) std::atomic<uint64_t> reduced;  // event number, after the owner's slice
  uint32_t singleCopyOk;                         // the owner's vote on single copy
  uint32_t copyPermille;  // the owner's kernel copy speed, per mille of its memcpy's
  LineMessage line;       // the smallest AllReduces, whole
};
static_assert(sizeof(SlotFlags) == 3 * kLine, "three lines");

// This rank's view of every local rank's slots for one call.
class ShmFlags {
 public:
  // The slots, where every peer's connection offers them (all ranks on this host); else nullptr.
  static ShmSlots* slotsOf(const AlgoContext& ctx);
  // algoId: the algorithm running the call, for the tags that errors describe.
  ShmFlags(ShmSlots* slots, uint8_t algoId) : slots_(slots), algo_(algoId) {}

  SlotFlags* flags(int j, uint64_t event) {
    return reinterpret_cast<SlotFlags*>(slots_->slot(j, event));
  }
  char* data(int j, uint64_t event) { return slots_->slot(j, event) + sizeof(SlotFlags); }
  LineMessage* line(int j, uint64_t event) { return &flags(j, event)->line; }
  size_t room() const { return slots_->slotBytes() - sizeof(SlotFlags); }  // data per slot
  uint64_t take(uint64_t n = 1) { return slots_->takeEvents(n); }

  // Describes this rank's call in its slot for event and publishes the staged flag.
  void publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event,
                     ShmPath path = kStaged);
  // Waits until every peer's flag (staged or reduced) reaches event; staged flags are checked
  // against this rank's call.
  Status waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event, bool staged);
  // Peer j's slot for event describes this rank's call, by the same path.
  Status checkPeer(const CollArgs& a, const AlgoContext& ctx, int j, uint64_t event);
  // Peer j made the same call by another path (a ShmPath): its settings differ from this rank's.
  static Status otherPath(const AlgoContext& ctx, int j, uint8_t theirs, uint8_t mine);

  // One wait on a peer's flag: when it began, and whether the peer had closed its connection at
  // the last look.
  struct Waiting {
    uint64_t begun = 0;
    bool peerClosed = false;
  };
  // The slow part of a wait on peer j, now and then: is it alive, did it abort or close, is time
  // up; then a back-off once the wait is long. The caller looks at its flag between calls.
  Status checkWait(const CollArgs& a, AlgoContext& ctx, int j, Waiting* w);

 private:
  ShmSlots* slots_;
  uint8_t algo_;
};

// Between looks at a flag: with more ranks than cores the peer may need this very core.
inline void pauseSpin(const AlgoContext& ctx) {
  if (ctx.oversubscribed)
    sched_yield();
  else
    __builtin_ia32_pause();
}

// The reduction op of the passes: Avg sums, and the result is scaled at the end.
inline collieRedOp_t passOp(collieRedOp_t op) { return op == collieAvg ? collieSum : op; }

}  // namespace collie
