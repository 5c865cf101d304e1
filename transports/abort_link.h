// A connection's part in the failure protocol. When an op fails, the rank tells each peer why
// (its abort), listens for theirs to learn who is stuck, and closes only once its own is read.
// The communicator's failure handling is written against this interface alone.
#pragma once

#include "src/base/status.h"
#include "src/base/time.h"

namespace collie {

class AbortLink {
 public:
  virtual ~AbortLink() = default;
  // The rank at the other end.
  virtual int peer() const = 0;
  // Tells the peer this communicator failed and why (the failure's message, and the peer its
  // wait stalled on), best effort, without blocking long.
  virtual void sendAbort(const Status& failure) = 0;
  // Whether sends wait for room toward the peer (it has not been reading): an abort to it may
  // then wait too.
  virtual bool sendsQueued() const { return false; }
  // After this rank failed an op and sent its abort: reads on from the peer without blocking,
  // dropping its data, and says whether the peer has spoken since the op began to fail: its
  // abort (kHeard), nothing yet (kNothing), a close, reset or timeout of the link with no
  // word before it (kLost: the peer is dead or cut off), or that this transport cannot tell
  // (kUnknown). The connection is of no further use for data.
  enum class Word { kNothing, kHeard, kLost, kUnknown };
  virtual Word listenAfterFailure() { return Word::kUnknown; }
  // The peer closed its end (it destroyed its communicator, or exited): nothing more comes.
  virtual bool peerClosed() const { return false; }
  // While listening: part of this rank's abort (or of the frame begun before it) has not gone
  // yet, and goes on at each listenAfterFailure.
  virtual bool abortPending() const { return false; }
  // Before destruction after an abort: give the peer time to read it (bounded).
  virtual void linger(const Deadline& deadline) {}
};

}  // namespace collie
