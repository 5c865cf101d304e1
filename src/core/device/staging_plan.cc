// The staging plan of a device collective (see staging_plan.h).
#include "src/core/device/staging_plan.h"

#include <algorithm>

namespace collie {
namespace {

bool gathers(Collective c) {
  return c == Collective::kAllGather || c == Collective::kReduceScatter;
}

Copy2D rows(size_t src, size_t srcPitch, size_t dst, size_t dstPitch, size_t width, size_t height) {
  Copy2D c;
  c.active = width > 0 && height > 0;
  c.srcOffset = src;
  c.srcPitch = srcPitch;
  c.dstOffset = dst;
  c.dstPitch = dstPitch;
  c.width = width;
  c.height = height;
  return c;
}

Copy2D flat(size_t src, size_t dst, size_t bytes) { return rows(src, bytes, dst, bytes, bytes, 1); }

}  // namespace

size_t stagingPerChunk(Collective coll, size_t elemSize, int nranks, size_t stagingBytes) {
  size_t parts = gathers(coll) ? static_cast<size_t>(std::max(nranks, 1)) : 1;
  return stagingBytes / (elemSize * parts);
}

size_t stagingChunks(size_t count, size_t perChunk) {
  return perChunk == 0 ? 0 : (count + perChunk - 1) / perChunk;
}

StagedChunk stagedChunk(const CollArgs& args, int rank, int nranks, size_t perChunk, size_t k) {
  const size_t esz = dtypeSize(args.dtype);
  const size_t first = k * perChunk;
  const size_t p = std::min(perChunk, args.count - first);
  const size_t pb = p * esz, cb = args.count * esz, at = first * esz;
  const size_t n = static_cast<size_t>(nranks), me = static_cast<size_t>(rank);
  StagedChunk s;
  s.hostCount = p;
  switch (args.coll) {
    case Collective::kAllGather:
      s.hostSend = me * pb;
      s.hostRecv = 0;
      s.down = flat(at, me * pb, pb);
      s.up = rows(0, pb, at, cb, pb, n);
      break;
    case Collective::kReduceScatter:
      s.hostSend = 0;
      s.hostRecv = me * pb;
      s.down = rows(at, cb, 0, pb, pb, n);
      s.up = flat(me * pb, at, pb);
      break;
    case Collective::kBroadcast:
      s.hostSend = rank == args.root ? 0 : kNoBuffer;
      s.hostRecv = 0;
      if (rank == args.root) s.down = flat(at, 0, pb);
      s.up = flat(0, at, pb);
      break;
    case Collective::kReduce:
      s.hostSend = 0;
      s.hostRecv = rank == args.root ? 0 : kNoBuffer;
      s.down = flat(at, 0, pb);
      if (rank == args.root) s.up = flat(0, at, pb);
      break;
    default:  // allreduce
      s.hostSend = s.hostRecv = 0;
      s.down = flat(at, 0, pb);
      s.up = flat(0, at, pb);
      break;
  }
  return s;
}

}  // namespace collie
