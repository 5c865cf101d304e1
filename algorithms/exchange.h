// A windowed executor of exchanges, for the collectives that move blocks rather than reduce
// them (AllToAll, AllToAllv, Gather, Scatter). An exchange is one frame to a peer, one from a
// peer, or both; the executor posts exchanges in list order with a bounded number in flight and
// completes them in that order. Frames between two ranks are matched by their order on the
// connection. Deadlock freedom rests on one rule: every exchange has a key (e.g. (round,
// chunk)) equal to the key of the peers' exchanges that match its frames, and every rank lists
// its exchanges by increasing key. Then the earliest unfinished exchange of all ranks is posted
// on both sides of each of its frames, whatever the window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/algorithm.h"

namespace collie {

struct Exchange {
  int to = -1;        // the peer this exchange sends to; -1: no send
  int from = -1;      // the peer it receives from; -1: no receive
  uint32_t step = 0;  // the frames' tag step: their index among the frames of their pair
  const char* src = nullptr;
  size_t sendBytes = 0;
  uint64_t sendCount = 0;  // the count the frame's tag carries (AllToAllv: the pair's count)
  // Where the frame lands; nullptr = a staging slot, copied to stageTo once the frame has
  // landed and this exchange's send has completed (in place: the send reads stageTo).
  char* dst = nullptr;
  char* stageTo = nullptr;
  size_t recvBytes = 0;
  uint64_t recvCount = 0;  // the count the receiver expects in the frame's tag
};

// How many exchanges may be in flight, and how many of their bytes (at least one exchange).
struct ExchangeWindow {
  size_t maxExchanges = 16;
  size_t maxBytes = 8u << 20;
};

// Runs xs for the collective a; frames carry algoId. Staging slots come from ctx.scratch.
Status runExchanges(const std::vector<Exchange>& xs, const CollArgs& a, AlgoContext& ctx,
                    uint8_t algoId, const ExchangeWindow& w);

// The pieces of a transfer of bytes cut into chunks of at most chunkBytes (whole elements),
// at least one (an empty one for 0 bytes) so that the receiver always sees the frame's count.
// The time of n - 1 messages of a's block, one after another over one link (a root's or a
// rank's exchanges with every peer).
inline double blockPerPeerUs(const CollArgs& a, int n, const LinkModel& link) {
  if (n <= 1) return 0;
  const double us = 1.0 / (link.betaGBps * 1e3);
  return (n - 1) * (link.alphaUs + static_cast<double>(argBytes(a)) * us);
}

size_t numPieces(size_t bytes, size_t chunkBytes, size_t esz);
size_t pieceOffset(size_t k, size_t chunkBytes, size_t esz);
size_t pieceBytes(size_t bytes, size_t k, size_t chunkBytes, size_t esz);

}  // namespace collie
