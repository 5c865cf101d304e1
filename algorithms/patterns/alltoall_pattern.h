// Pure rank arithmetic of the all-to-all schedules (pairwise exchange and Bruck's algorithm).
//
// Pairwise, out of place: in round k = 1..n-1 rank r sends its block for r + k and receives the
// block of r - k (mod n), so every link carries one block per round. In place each round must
// pair ranks both ways, so that a block is sent before the same place receives its answer:
// round k = 0..n-1 pairs r with (k - r) mod n, a symmetric relation; the one round that pairs
// r with itself is skipped.
//
// Bruck: rank r first rotates its blocks (slot i holds the block for r + i); in round s every
// block whose slot has bit s set moves 2^s ranks on (to r + 2^s, from r - 2^s) and keeps its
// slot. A block moves by its slot index in all, so at the end slot i holds the block that
// rank r - i sent to r.
#pragma once

namespace collie {
namespace a2a {

inline int mod(int x, int n) { return ((x % n) + n) % n; }

inline int sendPeer(int r, int k, int n) { return mod(r + k, n); }
inline int recvPeer(int r, int k, int n) { return mod(r - k, n); }
inline int pairedPeer(int r, int k, int n) { return mod(k - r, n); }

inline int bruckRounds(int n) {
  int s = 0;
  while ((1 << s) < n) ++s;
  return s;
}
inline bool bruckMoves(int slot, int s) { return ((slot >> s) & 1) != 0; }
// How many of the n slots move in round s.
inline int bruckMoved(int n, int s) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += bruckMoves(i, s) ? 1 : 0;
  return m;
}
// The send block slot i holds before the rounds, and the receive block it fills after them.
inline int bruckSendBlock(int r, int slot, int n) { return mod(r + slot, n); }
inline int bruckRecvBlock(int r, int slot, int n) { return mod(r - slot, n); }

}  // namespace a2a
}  // namespace collie
