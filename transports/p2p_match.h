// Point-to-point frames on a stream connection. Unlike a collective's, they are not matched by
// the order receives were posted in: each carries its user tag, its sequence number per pair and
// tag, and which stripe of the message it is, so the receiver files it by content. A frame no
// receive waits for yet is kept (copied) until one is posted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <vector>

#include "src/base/status.h"
#include "transports/frame.h"
#include "transports/transport.h"

namespace collie {

// Where the pieces of a point-to-point message of bytes go when it is cut into n stripes (one per
// stream): stripe i covers [offset, offset + length). Sender and receiver compute the same.
struct StripeSpan {
  size_t offset = 0;
  size_t length = 0;
};
StripeSpan p2pStripe(size_t bytes, unsigned n, unsigned i);

// The frame tag of a point-to-point message of stripe i of n.
inline FrameTag p2pStripeTag(const FrameTag& t, unsigned n, unsigned i) {
  FrameTag s = t;
  s.op = static_cast<uint8_t>(i);
  s.algo = static_cast<uint8_t>(n);
  return s;
}

// A point-to-point frame whose algo is kP2PRendezvous carries no data: its body says where the
// message lies in the sender's memory, for a receiver on the same host to read it itself. The
// receiver answers kP2PFinished (read: the sender's buffer is free) or kP2PRefused (it cannot
// read the sender's memory: the sender sends the data instead).
constexpr uint8_t kP2PRendezvous = 0;
constexpr uint8_t kP2PRefused = 253;
constexpr uint8_t kP2PFinished = 254;
struct RendezvousBody {
  uint64_t address;  // of the message in the sender
  uint64_t head;     // its first bytes (up to 8), to tell that address belongs to the sender
};
// Reads a rendezvous message of bytes into dst: *pulled false where it cannot (refused).
using PullFn = std::function<Status(const RendezvousBody& body, char* dst, size_t bytes,
                                    uint32_t tag, uint64_t seq, bool* pulled)>;

// Where the body of one received stripe goes.
struct StripeSink {
  char* dst = nullptr;
  size_t length = 0;
  size_t got = 0;
  void* message = nullptr;  // the matcher's record
};

class P2PMatcher {
 public:
  // A receive of bytes into buf for the message expect names (tag, seq, count, dtype); req is
  // done once all of it is in buf. Fails when a message already here disagrees with it.
  Status post(void* buf, size_t bytes, const FrameTag& expect, Request* req, int peer);
  // A stripe's header h is in: where its body goes. Fails when h disagrees with the receive
  // posted for it, or is garbled.
  Status begin(const FrameHeader& h, int peer, StripeSink* sink);
  // The body of sink's stripe is in. Fails where a rendezvous message cannot be read.
  Status end(StripeSink* sink);
  // How rendezvous messages are read (a transport without them leaves it unset).
  void setPull(PullFn pull) { pull_ = std::move(pull); }
  // Whether the message (tag, seq) has begun to arrive with no receive posted for it.
  bool arrived(uint32_t tag, uint64_t seq) const;
  // Receives posted and not complete.
  bool waiting() const { return posted_ > 0; }
  // Forgets everything (the connection failed).
  void clear();

 private:
  struct Message {
    uint32_t tag = 0;
    uint64_t seq = 0;
    uint64_t count = 0;
    uint8_t dtype = 0;
    size_t bytes = 0;
    int stripes = -1;  // unknown until the first stripe's header
    int stripesDone = 0;
    std::vector<char> own;  // the body, while no receive was posted for it
    bool buffered = false;
    char* dst = nullptr;  // the posted receive's buffer
    Request* req = nullptr;
    bool rendezvous = false;  // the data stays in the sender until the receive reads it
    RendezvousBody where{};
  };
  Message* find(uint32_t tag, uint64_t seq);
  // The record h belongs to, made (with a buffer of bytes, where buffer) for an early frame.
  Status recordFor(const FrameHeader& h, int peer, size_t bytes, bool buffer, Message** out);
  Status beginRendezvous(const FrameHeader& h, int peer, size_t bytes, StripeSink* sink);
  // A new record at the end, from spare_ where it has one.
  Message* fresh(uint32_t tag, uint64_t seq, uint64_t count, uint8_t dtype, size_t bytes);
  Status complete(std::list<Message>::iterator it);
  Status completeAt(Message* m);
  PullFn pull_;
  std::list<Message> msgs_;
  std::list<Message> spare_;  // records of completed messages, reused without allocating
  size_t posted_ = 0;
};

// The error of a point-to-point receive that disagrees with the message that came.
Status p2pMismatch(int peer, const FrameTag& sent, const FrameTag& expected);

}  // namespace collie
