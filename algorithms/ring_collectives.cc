// Ring schedules of ReduceScatter, AllGather, Broadcast and Reduce (see ring_collectives.h).
#include "algorithms/ring_collectives.h"

#include "algorithms/patterns/ring_pattern.h"

namespace collie {

namespace {

// The sends of ring step st: at step 0 the chunks of src, later each chunk the previous step's
// receive of the same chunk brought (the receives of step st are not listed yet).
void addStepSends(ChunkSchedule* s, int peer, const std::vector<ChunkSpan>& chunks, int st,
                  const char* src) {
  const size_t firstRecv = s->recvs.size();
  for (size_t k = 0; k < chunks.size(); ++k) {
    ScheduleSend x;
    x.peer = peer;
    x.bytes = chunks[k].bytes;
    if (st == 0)
      x.src = src + chunks[k].off;
    else
      x.dep = static_cast<int>(firstRecv - chunks.size() + k);
    s->sends.push_back(x);
  }
}

// Rank r's block b of the ring ReduceScatter moves at step s in [0, n-1): it sends block
// (r - s - 1) and receives block (r - s - 2) mod n, so the last step brings block r home.
void reduceScatter(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), bb = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const bool inPlace = out == in + static_cast<size_t>(r) * bb;
  const auto chunks = splitChunks(bb, ctx.chunkBytes, esz);
  const int nxt = ring::next(r, n), prv = ring::prev(r, n);
  s->minSlots = chunks.size() + 4;  // a step's chunks stay staged until forwarded next step
  for (int st = 0; st < n - 1; ++st) {
    const size_t sb = static_cast<size_t>(ring::mod(r - st - 1, n));
    const size_t rb = static_cast<size_t>(ring::mod(r - st - 2, n));
    const bool last = st == n - 2;
    addStepSends(s, nxt, chunks, st, in + sb * bb);
    for (const auto& c : chunks) {
      ScheduleRecv x;
      x.peer = prv;
      x.bytes = c.bytes;
      x.with = in + rb * bb + c.off;
      if (last) {
        x.dst = inPlace ? nullptr : out + c.off;
        x.out = out + c.off;
        x.finalAvg = a.op == collieAvg;
      }
      s->recvs.push_back(x);
    }
  }
}

// AllGather: at step s rank r forwards block (r - s) and receives block (r - s - 1) mod n,
// straight into its place in the output.
void allGather(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), bb = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  s->copiesFirst.push_back({out + static_cast<size_t>(r) * bb, in, bb});
  const auto chunks = splitChunks(bb, ctx.chunkBytes, esz);
  const int nxt = ring::next(r, n), prv = ring::prev(r, n);
  for (int st = 0; st < n - 1; ++st) {
    const size_t rb = static_cast<size_t>(ring::mod(r - st - 1, n));
    addStepSends(s, nxt, chunks, st, in);
    for (const auto& c : chunks) {
      ScheduleRecv x;
      x.peer = prv;
      x.bytes = c.bytes;
      x.dst = out + rb * bb + c.off;
      s->recvs.push_back(x);
    }
  }
}

// Broadcast: a chain root, root+1, ..., root-1; each rank forwards a chunk as soon as it lands.
void broadcast(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank;
  const int pos = ring::mod(r - a.root, n);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  char* out = static_cast<char*>(a.recv);
  const auto chunks = splitChunks(bytes, ctx.chunkBytes, esz);
  if (pos == 0) s->copiesFirst.push_back({out, static_cast<const char*>(a.send), bytes});
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (pos > 0) {
      ScheduleRecv x;
      x.peer = ring::prev(r, n);
      x.bytes = chunks[k].bytes;
      x.dst = out + chunks[k].off;
      s->recvs.push_back(x);
    }
    if (pos < n - 1) {
      ScheduleSend x;
      x.peer = ring::next(r, n);
      x.bytes = chunks[k].bytes;
      if (pos == 0)
        x.src = static_cast<const char*>(a.send) + chunks[k].off;
      else
        x.dep = static_cast<int>(k);
      s->sends.push_back(x);
    }
  }
}

// Reduce: a chain root+1, root+2, ..., root; each rank adds its input to what arrives and
// passes it on, the root writes the total.
void reduceToRoot(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  const int n = ctx.nranks, r = ctx.rank;
  const int pos = ring::mod(r - a.root - 1, n);
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const auto chunks = splitChunks(bytes, ctx.chunkBytes, esz);
  for (size_t k = 0; k < chunks.size(); ++k) {
    const auto& c = chunks[k];
    if (pos > 0) {
      ScheduleRecv x;
      x.peer = ring::prev(r, n);
      x.bytes = c.bytes;
      x.with = in + c.off;
      if (pos == n - 1) {
        x.dst = in == out ? nullptr : out + c.off;
        x.out = out + c.off;
        x.finalAvg = a.op == collieAvg;
      }
      s->recvs.push_back(x);
    }
    if (pos < n - 1) {
      ScheduleSend x;
      x.peer = ring::next(r, n);
      x.bytes = c.bytes;
      if (pos == 0)
        x.src = in + c.off;
      else
        x.dep = static_cast<int>(k);
      s->sends.push_back(x);
    }
  }
}

}  // namespace

Status buildRingSchedule(const CollArgs& a, const AlgoContext& ctx, ChunkSchedule* s) {
  switch (a.coll) {
    case Collective::kReduceScatter:
      reduceScatter(a, ctx, s);
      return Status::ok();
    case Collective::kAllGather:
      allGather(a, ctx, s);
      return Status::ok();
    case Collective::kBroadcast:
      broadcast(a, ctx, s);
      return Status::ok();
    case Collective::kReduce:
      reduceToRoot(a, ctx, s);
      return Status::ok();
    default:
      return internalError(std::string("ring has no schedule for ") + collectiveName(a.coll));
  }
}

}  // namespace collie
