// Test data for the collectives that move blocks (AllToAll(v), Gather, Scatter) and their shared
// memory variants: per (source, destination, index) values exact in every dtype, buffers with
// guard bytes, and the AllToAllv layout of uneven, partly empty, gapped segments.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "collie/collie.h"
#include "tests/harness/reference.h"

namespace collie {
namespace testing {

constexpr unsigned char kFill = 0x5a;  // what no call may write
constexpr size_t kGuard = 64;          // bytes checked on both sides of every buffer

// Element i of what rank src sends rank dst: an integer in [-125, 125], exact in every dtype,
// that changes with each of the three.
inline double value(int src, int dst, size_t i) {
  const uint64_t h = (static_cast<uint64_t>(src) + 1) * 7919u +
                     (static_cast<uint64_t>(dst) + 1) * 104729u + i * 2654435761u;
  return static_cast<double>(h % 251) - 125;
}

inline void fillBlock(char* at, collieDataType_t dt, int src, int dst, size_t count) {
  for (size_t i = 0; i < count; ++i) storeFromDouble(at, dt, i, value(src, dst, i));
}

// A buffer with guard bytes on both sides, which must keep kFill unless the call owns them.
struct Buf {
  std::vector<char> bytes;
  size_t lead;
  Buf(size_t n, size_t misalign)
      : bytes(n + 2 * kGuard + 8, static_cast<char>(kFill)), lead(kGuard + misalign) {}
  char* data() { return bytes.data() + lead; }
  void reset() { memset(bytes.data(), kFill, bytes.size()); }
};

// What rank src sends rank dst in the AllToAllv cases of size base: zero for about a quarter of
// the pairs, otherwise base plus a little that differs per pair.
inline size_t vCount(int src, int dst, size_t base) {
  if (base == 0 || (src * 3 + dst * 5 + 1) % 4 == 0) return 0;
  return base + static_cast<size_t>(src + 2 * dst) % 7;
}

// One rank's AllToAllv arguments (in elements): send segments in reverse peer order with gaps,
// receive segments in order with uneven gaps.
struct VLayout {
  std::vector<size_t> sc, sd, rc, rd;
  size_t sendElems = 0, recvElems = 1;
};

inline VLayout vLayout(int rank, int n, size_t base) {
  VLayout l;
  const size_t un = static_cast<size_t>(n);
  l.sc.resize(un), l.sd.resize(un), l.rc.resize(un), l.rd.resize(un);
  for (int j = n - 1; j >= 0; --j) {
    l.sc[j] = vCount(rank, j, base);
    l.sd[j] = l.sendElems;
    l.sendElems += l.sc[j] + 3;
  }
  for (int j = 0; j < n; ++j) {
    l.rc[j] = vCount(j, rank, base);
    l.rd[j] = l.recvElems;
    l.recvElems += l.rc[j] + 2 + static_cast<size_t>(j % 2) * 5;
  }
  return l;
}

}  // namespace testing
}  // namespace collie
