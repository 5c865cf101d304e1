// The flag protocol's publishing, checks and waits (see shm_flags.h).
#include "algorithms/shm_flags.h"

#include <unistd.h>

#include <string>

#include "src/base/time.h"

namespace collie {

ShmSlots* ShmFlags::slotsOf(const AlgoContext& ctx) {
  ShmSlots* slots = nullptr;
  for (int p = 0; p < ctx.nranks; ++p) {
    if (p == ctx.rank) continue;
    Connection* c = ctx.conns[p];
    if (c == nullptr || c->shmSlots() == nullptr) return nullptr;
    slots = c->shmSlots();
  }
  return slots;
}

void ShmFlags::publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event,
                             ShmPath path) {
  SlotFlags* f = flags(ctx.rank, event);
  f->path = path;
  f->count = a.count;
  f->seq = ctx.seq;
  f->coll = static_cast<uint8_t>(a.coll);
  f->dtype = static_cast<uint8_t>(a.dtype);
  f->op = static_cast<uint8_t>(a.op);
  f->root = a.root;
  f->staged.store(event + 1, std::memory_order_release);
}

Status ShmFlags::checkPeer(const CollArgs& a, const AlgoContext& ctx, int j, uint64_t event) {
  const SlotFlags* f = flags(j, event);
  if (f->count == a.count && f->dtype == a.dtype && f->op == a.op && f->seq == ctx.seq &&
      f->coll == static_cast<uint8_t>(a.coll) && f->root == a.root) {
    // The same call: then the same path, as every rank decides it from the call, the
    // algorithm and the settings, which must agree.
    if (f->path != flags(ctx.rank, event)->path)
      return otherPath(ctx, j, f->path, flags(ctx.rank, event)->path);
    return Status::ok();
  }
  FrameTag mine = ctx.tagFor(a, 0, algo_), theirs = mine;
  theirs.count = f->count;
  theirs.dtype = f->dtype;
  theirs.op = f->op;
  theirs.seq = f->seq;
  theirs.coll = f->coll;
  theirs.root = f->root;
  return invalidUsage("ranks disagree: peer rank " + std::to_string(j) + " called " +
                      describeFrameTag(theirs) + " while this rank called " +
                      describeFrameTag(mine) +
                      "; every rank must call the same collectives in the same order with the "
                      "same count, datatype and op");
}

Status ShmFlags::otherPath(const AlgoContext& ctx, int j, uint8_t theirs, uint8_t mine) {
  auto name = [](uint8_t p) {
    return p == kStaged        ? "staged"
           : p == kVote        ? "single-copy vote"
           : p == kSingle      ? "single copy"
           : p == kLineMessage ? "one line"
                               : "unknown";
  };
  return invalidUsage("ranks disagree on how shared memory carries the same call: peer rank " +
                      std::to_string(j) + " took the " + name(theirs) + " path, this rank the " +
                      name(mine) + " path, in " + ctx.opName +
                      "; the algorithm (COLLIE_ALGO), COLLIE_SHM_LINE_BYTES, "
                      "COLLIE_SHM_ONESHOT_BYTES, COLLIE_SHM_CMA and COLLIE_SHM_CMA_BYTES must "
                      "be alike on every rank");
}

Status ShmFlags::checkWait(const CollArgs& a, AlgoContext& ctx, int j, Waiting* w) {
  // Every peer, not only j: one that runs this call by a message algorithm (COLLIE_ALGO or the
  // settings differ) sends frames, to whichever peer its schedule names, and waits for ours.
  const FrameTag mine = ctx.tagFor(a, 0, algo_);
  for (int p = 0; p < ctx.nranks; ++p) {
    if (ctx.conns[p] == nullptr) continue;
    bool progressed = false;
    COLLIE_RETURN_IF_ERROR(ctx.conns[p]->progress(&progressed));
    COLLIE_RETURN_IF_ERROR(ctx.conns[p]->checkEarlyFrame(mine));
  }
  // A peer that destroyed its communicator (and lives) closed its connection: it sets no flag
  // again. But it may have set this one just before: the caller has looked at the flag since
  // the close was first seen (what the peer wrote before its close is visible after it).
  if (ctx.conns[j] != nullptr && ctx.conns[j]->peerClosed()) {
    if (w->peerClosed)
      return remoteError(std::string(ctx.opName) + ": lost peer rank " + std::to_string(j) +
                         ": it closed its connection (destroyed its communicator, exited or "
                         "was killed) while this rank waited for it in shared memory (" +
                         describeFrameTag(mine) + ")");
    w->peerClosed = true;
  }
  const uint64_t now = nowNs();
  if (w->begun == 0) w->begun = now;
  if (ctx.abortFlag != nullptr && ctx.abortFlag->load(std::memory_order_relaxed))
    return remoteError(std::string(ctx.opName) + ": aborted by collieCommAbort");
  if (ctx.deadline.expired())
    return stalledWait(std::string(ctx.opName) + ": " + kTimedOutWaitingFor + std::to_string(j) +
                           " in shared memory (" + describeFrameTag(mine) +
                           "); the peer is stuck, dead or running another op",
                       j);
  // Yield to a rank sharing this core, and sleep a little once the wait is long.
  if (now - w->begun > 20000) sched_yield();
  if (now - w->begun > 5000000) usleep(50);
  return Status::ok();
}

Status ShmFlags::waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event, bool staged) {
  const uint64_t want = event + 1;
  for (int j = 0; j < ctx.nranks; ++j) {
    if (j == ctx.rank) continue;
    SlotFlags* f = flags(j, event);
    std::atomic<uint64_t>& flag = staged ? f->staged : f->reduced;
    Waiting waiting;
    for (unsigned spin = 0; flag.load(std::memory_order_acquire) < want; ++spin) {
      if ((spin & 255) != 255)
        pauseSpin(ctx);
      else
        COLLIE_RETURN_IF_ERROR(checkWait(a, ctx, j, &waiting));
    }
    if (staged) COLLIE_RETURN_IF_ERROR(checkPeer(a, ctx, j, event));
  }
  return Status::ok();
}

}  // namespace collie
