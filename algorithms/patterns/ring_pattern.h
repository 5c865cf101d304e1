// Pure rank arithmetic of the ring: how the buffer is cut into blocks and chunks, and which
// block a rank sends and receives at each step. Reduce-scatter is steps [0, n-1), all-gather
// steps [n-1, 2n-2); at step s rank r sends block (r - s) mod n to r+1 and receives block
// (r - s - 1) mod n from r-1.
#pragma once

#include <cstddef>

namespace collie {
namespace ring {

inline int mod(int a, int n) { return ((a % n) + n) % n; }
inline int next(int r, int n) { return mod(r + 1, n); }
inline int prev(int r, int n) { return mod(r - 1, n); }
inline int numSteps(int n) { return n <= 1 ? 0 : 2 * (n - 1); }
inline int sendBlock(int r, int s, int n) { return mod(r - s, n); }
inline int recvBlock(int r, int s, int n) { return mod(r - s - 1, n); }
inline bool isReduceStep(int s, int n) { return s < n - 1; }

// Block b of count elements cut into n near-equal blocks (the first count % n get one more).
inline size_t blockOffset(size_t count, int n, int b) {
  size_t base = count / n, rem = count % n;
  size_t ub = static_cast<size_t>(b);
  return ub * base + (ub < rem ? ub : rem);
}
inline size_t blockCount(size_t count, int n, int b) {
  return count / n + (static_cast<size_t>(b) < count % n ? 1 : 0);
}

// Chunks of a block: at least one, so an empty block still sends one (empty) frame and the
// schedules of all ranks stay in lockstep.
inline size_t numChunks(size_t blockElems, size_t chunkElems) {
  return blockElems == 0 ? 1 : (blockElems + chunkElems - 1) / chunkElems;
}
inline size_t chunkOffset(size_t k, size_t chunkElems) { return k * chunkElems; }
inline size_t chunkCount(size_t blockElems, size_t k, size_t chunkElems) {
  size_t off = k * chunkElems;
  if (off >= blockElems) return 0;
  size_t left = blockElems - off;
  return left < chunkElems ? left : chunkElems;
}

}  // namespace ring
}  // namespace collie
