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
  std::vector<int> inFlight;  // sends since the last one that waited for all before it
  for (const ScheduleSend& x : s.sends) {
    if (x.afterSends) {
      for (int op : inFlight) out.wait(op);
      inFlight.clear();
    }
    if (x.dep >= 0) out.wait(recvOp[static_cast<size_t>(x.dep)]);
    inFlight.push_back(out.send(x.peer, x.bytes));
  }
  return out;
}

sched::Schedule executorSchedule(ChunkScheduleBuilder build, Collective coll, int r, int n,
                                 size_t count, size_t esz, size_t chunkBytes, const int* hostOf) {
  if (n <= 1 || count == 0) return sched::Schedule();
  // The builders only compute addresses, never touch them: far-apart stand-ins for the send
  // and receive buffers keep their in-place tests false, as in an out-of-place call.
  static char sendBase[1], recvBase[1];
  // Partial results of ranks without an output (tree Reduce, rhd ReduceScatter); one
  // simulation builds one rank at a time.
  static thread_local std::vector<char> acc;
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
  ctx.hostOf = hostOf;
  ChunkSchedule s;
  if (!build(a, ctx, &acc, &s).isOk()) return sched::Schedule();
  return fromChunkSchedule(s);
}

sched::Schedule ringCollectiveSchedule(Collective coll, int r, int n, size_t count, size_t esz,
                                       size_t chunkBytes) {
  return executorSchedule([](const CollArgs& a, const AlgoContext& ctx, std::vector<char>*,
                             ChunkSchedule* s) { return buildRingSchedule(a, ctx, s); },
                          coll, r, n, count, esz, chunkBytes);
}

void appendPhase(const sched::Schedule& phase, const std::vector<int>& members,
                 sched::Schedule* out) {
  const size_t before = out->size();
  for (size_t i = 0; i < before; ++i)
    if ((*out)[i].kind != sched::OpKind::kWait) out->wait(static_cast<int>(i));
  const int base = static_cast<int>(out->size());
  for (size_t i = 0; i < phase.size(); ++i) {
    const sched::Op& op = phase[i];
    switch (op.kind) {
      case sched::OpKind::kSend:
        out->send(members[static_cast<size_t>(op.peer)], op.bytes);
        break;
      case sched::OpKind::kRecv:
        out->recv(members[static_cast<size_t>(op.peer)], op.bytes, op.reduce);
        break;
      case sched::OpKind::kWait:
        out->wait(base + op.target);
        break;
    }
  }
}

}  // namespace sim
}  // namespace collie
