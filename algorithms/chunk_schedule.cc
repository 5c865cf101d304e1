// The executor of ChunkSchedule (see chunk_schedule.h).
#include "algorithms/chunk_schedule.h"

#include <algorithm>
#include <cstring>

namespace collie {

namespace {

constexpr size_t kWindow = 4;  // receives posted ahead of the one being processed
char gEmpty[1];

}  // namespace

std::vector<ChunkSpan> splitChunks(size_t bytes, size_t chunkBytes, size_t esz) {
  size_t step = std::max<size_t>(esz, chunkBytes / esz * esz);
  std::vector<ChunkSpan> out;
  if (bytes == 0) out.push_back({0, 0});
  for (size_t off = 0; off < bytes; off += step) out.push_back({off, std::min(step, bytes - off)});
  return out;
}

Status runChunkSchedule(const ChunkSchedule& s, const CollArgs& a, AlgoContext& ctx,
                        uint8_t algoId) {
  for (const auto& c : s.copiesFirst)
    if (c.bytes > 0 && c.dst != c.src) memcpy(c.dst, c.src, c.bytes);
  const size_t nr = s.recvs.size(), ns = s.sends.size();
  const size_t esz = dtypeSize(a.dtype);
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;

  // Tags: the k-th frame between two ranks in one direction carries k.
  std::vector<uint32_t> perPeer(static_cast<size_t>(ctx.nranks), 0);
  std::vector<uint32_t> rtag(nr), stag(ns);
  for (size_t i = 0; i < nr; ++i) rtag[i] = perPeer[static_cast<size_t>(s.recvs[i].peer)]++;
  std::fill(perPeer.begin(), perPeer.end(), 0);
  for (size_t i = 0; i < ns; ++i) stag[i] = perPeer[static_cast<size_t>(s.sends[i].peer)]++;

  // Staging slots, and which sends must finish before a slot is landed in again.
  size_t slotBytes = 0, staged = 0;
  const size_t kSlots = std::max(kWindow, s.minSlots);
  std::vector<int> slot(nr, -1), prevUser(nr, -1), lastUser(kSlots, -1);
  for (size_t i = 0; i < nr; ++i) {
    if (s.recvs[i].dst != nullptr) continue;
    slotBytes = std::max(slotBytes, s.recvs[i].bytes);
    slot[i] = static_cast<int>(staged++ % kSlots);
    prevUser[i] = lastUser[static_cast<size_t>(slot[i])];
    lastUser[static_cast<size_t>(slot[i])] = static_cast<int>(i);
  }
  if (ctx.scratch->size() < kSlots * slotBytes) ctx.scratch->resize(kSlots * slotBytes);
  char* slots = ctx.scratch->data();
  auto landing = [&](size_t i) -> char* {
    if (s.recvs[i].dst != nullptr) return s.recvs[i].dst;
    return slotBytes == 0 ? gEmpty : slots + static_cast<size_t>(slot[i]) * slotBytes;
  };
  std::vector<std::vector<size_t>> forwards(nr);
  for (size_t k = 0; k < ns; ++k) {
    const ScheduleSend& x = s.sends[k];
    if (x.dep >= static_cast<int>(nr))
      return internalError("schedule: a send depends on no receive");
    if (x.src == nullptr && x.dep >= 0) forwards[static_cast<size_t>(x.dep)].push_back(k);
  }

  std::vector<Request> sreq(ns), rreq(nr);
  size_t si = 0, ri = 0, rd = 0;
  size_t unfinished = 0;  // every send before it has completed
  auto earlierSendsDone = [&]() {
    while (unfinished < si && sreq[unfinished].done) ++unfinished;
    return unfinished == si;
  };
  auto postSends = [&]() -> Status {
    while (si < ns && (s.sends[si].dep < 0 || static_cast<size_t>(s.sends[si].dep) < rd)) {
      const ScheduleSend& x = s.sends[si];
      if (x.afterSends && !earlierSendsDone()) break;
      const char* src = x.src != nullptr ? x.src
                        : x.dep >= 0     ? landing(static_cast<size_t>(x.dep))
                                         : gEmpty;
      Connection* c = ctx.conns[x.peer];
      if (c == nullptr) return internalError("schedule: a send to this rank itself");
      COLLIE_RETURN_IF_ERROR(c->isend(src, x.bytes, ctx.tagFor(a, stag[si], algoId), &sreq[si]));
      ++si;
    }
    return Status::ok();
  };
  while (rd < nr) {
    COLLIE_RETURN_IF_ERROR(postSends());
    while (ri < nr && ri < rd + kWindow) {
      // A slot is landed in again only once the sends forwarding its last content are done.
      if (prevUser[ri] >= 0) {
        bool ready = true;
        for (size_t k : forwards[static_cast<size_t>(prevUser[ri])]) {
          if (k >= si) {
            ready = false;
            break;
          }
          if (!sreq[k].done)
            COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&sreq[k], ctx.deadline, ctx.opName));
        }
        if (!ready) break;
      }
      const ScheduleRecv& x = s.recvs[ri];
      Connection* c = ctx.conns[x.peer];
      if (c == nullptr) return internalError("schedule: a receive from this rank itself");
      COLLIE_RETURN_IF_ERROR(
          c->irecv(landing(ri), x.bytes, ctx.tagFor(a, rtag[ri], algoId), &rreq[ri]));
      ++ri;
    }
    if (ri == rd) return internalError("schedule stalls: its sends and receives are out of order");
    while (!rreq[rd].done) {
      // A send held back for the sends before it goes out as soon as they complete, not only
      // after this receive: its peer may be waiting for it to send what this receive needs.
      const bool held = si < ns && s.sends[si].afterSends && unfinished < si &&
                        (s.sends[si].dep < 0 || static_cast<size_t>(s.sends[si].dep) < rd);
      if (!held) {
        COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&rreq[rd], ctx.deadline, ctx.opName));
        break;
      }
      Request* either[2] = {&rreq[rd], &sreq[unfinished]};
      COLLIE_RETURN_IF_ERROR(ctx.poller->progressUntilAny(either, 2, ctx.deadline, ctx.opName));
      COLLIE_RETURN_IF_ERROR(postSends());
    }
    const ScheduleRecv& x = s.recvs[rd];
    const char* landed = landing(rd);
    const size_t elems = x.bytes / esz;
    char* out = x.out != nullptr ? x.out : const_cast<char*>(landed);
    if (x.bytes > 0 && x.with != nullptr) {
      reduce(out, x.landedFirst ? landed : x.with, x.landedFirst ? x.with : landed, elems, a.dtype,
             op);
    } else if (x.bytes > 0 && x.out != nullptr && x.out != landed) {
      memcpy(x.out, landed, x.bytes);
    }
    if (x.finalAvg && x.bytes > 0) scaleForAvg(out, elems, a.dtype, ctx.nranks);
    ++rd;
  }
  COLLIE_RETURN_IF_ERROR(postSends());
  while (si < ns && !earlierSendsDone()) {
    COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&sreq[unfinished], ctx.deadline, ctx.opName));
    COLLIE_RETURN_IF_ERROR(postSends());
  }
  if (si != ns) return internalError("schedule: sends left that depend on nothing processed");
  for (auto& q : sreq)
    if (!q.done) COLLIE_RETURN_IF_ERROR(ctx.poller->wait(&q, ctx.deadline, ctx.opName));
  return Status::ok();
}

}  // namespace collie
