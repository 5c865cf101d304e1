// Pure arithmetic of the device ring AllReduce (src/core/device_ring.h): the ring of
// ring_pattern.h with every step cut into the same number of chunk messages, each copied into
// one of nslots slots of the next rank's device staging buffer. Message m (m = step * chunks +
// chunk) goes into slot m mod nslots. Flow control: a rank may send message m once
//   - it has consumed message m - chunks from its prev (steps >= 1 forward what came in), and
//   - its next has consumed message m - nslots (the slot is free again).
// A rank consumes message m (reducing it into its recv block, or copying it there during the
// all-gather steps) once its prev has sent it. Both rules together keep every rank within
// nslots messages of its neighbours, whatever the speed of each.
#pragma once

#include <algorithm>
#include <cstddef>

#include "algorithms/patterns/ring_pattern.h"

namespace collie {
namespace devring {

constexpr size_t kNone = static_cast<size_t>(-1);

struct Plan {
  int nranks = 1;
  size_t count = 0;          // elements of the AllReduce
  size_t chunkElems = 1;     // elements per message (the slot size)
  size_t chunksPerStep = 1;  // messages per step: enough for the largest block
  int steps = 0;             // 2 (n - 1)
  size_t messages = 0;       // steps * chunksPerStep
  int nslots = 1;
};

inline Plan makePlan(size_t count, int nranks, size_t elemSize, size_t slotBytes, int nslots) {
  Plan p;
  p.nranks = nranks;
  p.count = count;
  p.chunkElems = std::max<size_t>(1, slotBytes / elemSize);
  p.chunksPerStep = ring::numChunks(ring::blockCount(count, nranks, 0), p.chunkElems);
  p.steps = ring::numSteps(nranks);
  p.messages = static_cast<size_t>(p.steps) * p.chunksPerStep;
  p.nslots = std::max(1, nslots);
  return p;
}

inline int slotOf(const Plan& p, size_t m) { return static_cast<int>(m % p.nslots); }

// One message as its sender or its receiver sees it: elements [offset, offset + count) of the
// AllReduce buffer (count may be 0: a block shorter than the longest).
struct Piece {
  int step = 0;
  int block = 0;
  size_t offset = 0;
  size_t count = 0;
  bool reduce = false;      // a reduce-scatter step
  bool lastReduce = false;  // the receiver's block is complete after this (avg scales it)
  bool fromSend = false;    // the sender reads the user's send buffer (step 0), else its recv
};

inline Piece piece(const Plan& p, int block, size_t m) {
  Piece x;
  x.step = static_cast<int>(m / p.chunksPerStep);
  const size_t k = m % p.chunksPerStep;
  x.block = block;
  const size_t bc = ring::blockCount(p.count, p.nranks, block);
  x.count = ring::chunkCount(bc, k, p.chunkElems);
  x.offset = ring::blockOffset(p.count, p.nranks, block) + std::min(bc, k * p.chunkElems);
  x.reduce = ring::isReduceStep(x.step, p.nranks);
  x.lastReduce = x.step == p.nranks - 2;
  x.fromSend = x.step == 0;
  return x;
}

inline Piece sendPiece(const Plan& p, int r, size_t m) {
  return piece(p, ring::sendBlock(r, static_cast<int>(m / p.chunksPerStep), p.nranks), m);
}
inline Piece recvPiece(const Plan& p, int r, size_t m) {
  return piece(p, ring::recvBlock(r, static_cast<int>(m / p.chunksPerStep), p.nranks), m);
}

// The message this rank must have consumed before it sends m (kNone: none).
inline size_t forwardsFrom(const Plan& p, size_t m) {
  return m < p.chunksPerStep ? kNone : m - p.chunksPerStep;
}
// The message its next must have consumed before m may go into that slot (kNone: none).
inline size_t slotFreedBy(const Plan& p, size_t m) {
  return m < static_cast<size_t>(p.nslots) ? kNone : m - p.nslots;
}

// Control frames between neighbours (16 bytes): "message m is in your slot" to next, "I have
// consumed message m" to prev.
enum class Signal : unsigned { kReady = 1, kFree = 2 };

}  // namespace devring
}  // namespace collie
