// Conversion of the executor's schedules for the simulator (see chunk_schedule_sim.h).
#include "sim/chunk_schedule_sim.h"

#include <cstdint>
#include <vector>

#include "algorithms/ring_collectives.h"

namespace collie {
namespace sim {

sched::Schedule fromChunkSchedule(const ChunkSchedule& s) {
  sched::Schedule out;
  std::vector<int> recvOp(s.recvs.size());
  for (size_t i = 0; i < s.recvs.size(); ++i)
    recvOp[i] = out.recv(s.recvs[i].peer, s.recvs[i].bytes, s.recvs[i].with != nullptr);
  for (const ScheduleSend& x : s.sends) {
    if (x.dep >= 0) out.wait(recvOp[static_cast<size_t>(x.dep)]);
    out.send(x.peer, x.bytes);
  }
  return out;
}

sched::Schedule ringCollectiveSchedule(Collective coll, int r, int n, size_t count, size_t esz,
                                       size_t chunkBytes) {
  if (n <= 1) return sched::Schedule();
  // The builder only computes addresses, never touches them: far-apart stand-ins for the send
  // and receive buffers keep its in-place tests false, as in an out-of-place call.
  static char sendBase[1], recvBase[1];
  CollArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = esz == 8   ? collieFloat64
            : esz == 2 ? collieBfloat16
            : esz == 1 ? collieUint8
                       : collieFloat32;
  a.op = collieSum;
  a.root = 0;
  const bool hasSend = coll != Collective::kBroadcast || r == 0;
  const bool hasRecv = coll != Collective::kReduce || r == 0;
  a.send = hasSend ? sendBase : nullptr;
  a.recv = hasRecv ? recvBase : nullptr;
  AlgoContext ctx;
  ctx.rank = r;
  ctx.nranks = n;
  ctx.chunkBytes = chunkBytes;
  ChunkSchedule s;
  if (!buildRingSchedule(a, ctx, &s).isOk()) return sched::Schedule();
  return fromChunkSchedule(s);
}

}  // namespace sim
}  // namespace collie
