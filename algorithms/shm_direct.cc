// Shared-memory-native AllReduce for ranks that all share a host. Every rank copies a chunk of
// its input into its staging buffer, which every peer has mapped, all but its own 1/n slice;
// after a barrier each rank reduces its slice of the chunk from its input and the peers'
// staging buffers (reduce-scatter through shared memory) into its own staging slice, and after
// a second barrier everyone copies all n reduced slices out (all-gather). Chunks go round three
// staging slots and are sized to stay in cache. Small messages take the one-shot path instead: one
// copy-in, one barrier, and every rank reduces the whole message from all staging buffers.
//
// The other collectives take the same road: ReduceScatter stages a chunk of every block and
// each rank reduces its own block's chunk from all staging buffers straight into its output;
// AllGather stages each rank's chunk and everyone copies all of them out; Broadcast stages the
// root's chunk only; Reduce stages everyone's and the root reduces. Ranks with nothing to stage
// still publish the flag: it tells the others they have finished reading the slot's previous
// use. A barrier takes the road of the smallest AllReduces (one cache line each, below) without
// data: each rank stores its line's tag and waits for every peer's.
//
// Synchronisation is through flags in shared memory, not messages: each slot starts with a
// cache line the owner writes after filling the slot (an event number plus the op's count,
// dtype and op, so ranks that disagree get an error rather than a wrong answer) and one it
// writes after reducing its slice. Event numbers count slots used since the communicator began,
// the same on every rank, and event e uses slot e mod 3. The paths with one flag wait per chunk
// would need only two slots: a rank refills a slot for event e+2 only after it saw every peer's
// event e+1, which a peer publishes only after it finished reading everyone's slot for event e.
// The chunked AllReduce needs the third: it stages chunk e+1 before it waits for the peers'
// reduced slices of chunk e (so the peers can start reducing e+1 while it copies e out), and
// the slot of e+1 was last used by e-2, which every peer finished reading before it published
// its reduced slice of e-1.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/ring_pattern.h"
#include "transports/shm/shm_cma.h"
#include "src/base/log.h"
#include "src/base/params.h"
#include "src/base/time.h"

namespace collie {

namespace {

constexpr uint8_t kShmDirectId = 2;
constexpr size_t kLine = 64;
constexpr size_t kSlots = 3;  // staging slots per rank (see above)
// What a slot's event is for; ranks must agree on it as on the count.
enum Path : uint8_t { kStaged = 0, kVote = 1, kSingle = 2, kLineMessage = 3 };
constexpr size_t kSingleCopyChunk = 256 << 10;  // read, reduced and written while in L2
// A rank's vote on single copy.
enum Vote : uint32_t { kCannotReach = 0, kYes = 1, kTooSlow = 2 };

// The smallest AllReduces go in one cache line of the slot's head: the call's descriptor, the
// data and, stored last, the event's tag. A peer's data then arrives with the sign that it
// is there, in one transfer between the cores, where a flag and then the data it guards take
// two in a row (2 ranks, 8 B: 0.36-0.45 us a call against 0.60-0.67). Over more lines it loses: a
// reader that looks at every line takes each away from the writer again while it writes, and
// one that waits on the last line pays two transfers again. The line is its own, apart from the
// data area that other paths fill with the caller's bytes: a tag there could be any value.
struct alignas(kLine) LineMessage {
  uint32_t seq;  // the call's number, its low bits
  uint8_t count, dtype, op, coll;
  char bytes[kLine - 16];     // 48: whole elements of any type
  std::atomic<uint64_t> tag;  // event number + 1, stored after the rest
};
static_assert(sizeof(LineMessage) == kLine, "one line");
constexpr size_t kLineBytes = sizeof(LineMessage::bytes);

// The head of each slot: three cache lines, written only by the slot's owner.
struct alignas(kLine) SlotFlags {
  std::atomic<uint64_t> staged;  // event number, published after data and descriptor
  uint64_t count;
  uint64_t seq;
  uint8_t coll, dtype, op, path, pad[4];  // path: a Path
  int32_t root;
  int32_t pid;                                   // single copy: the owner's process,
  uint64_t sendAddr, recvAddr;                   // and its buffers in its address space
  alignas(kLine) std::atomic<uint64_t> reduced;  // event number, after the owner's slice
  uint32_t singleCopyOk;                         // the owner's vote on single copy: a Vote
  LineMessage line;                              // the smallest AllReduces, whole
};
static_assert(sizeof(SlotFlags) == 3 * kLine, "three lines");

class ShmDirectAllReduce : public Algorithm {
 public:
  ShmDirectAllReduce()
      : chunkBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_CHUNK_BYTES"))),
        oneShotBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_ONESHOT_BYTES"))),
        lineBytes_(
            static_cast<size_t>(std::max<int64_t>(0, params().getInt("COLLIE_SHM_LINE_BYTES")))),
        streamBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_STREAM_BYTES"))),
        singleCopyBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_CMA_BYTES"))),
        singleCopyMode_(params().getString("COLLIE_SHM_CMA")) {}
  const char* name() const override { return "shm_direct"; }
  uint8_t id() const override { return kShmDirectId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    (void)coll;  // every collective, the barrier too
    return kind == MemoryKind::kHost;
  }
  bool usable(const AlgoContext& ctx, const CollArgs& a) const override {
    for (int p = 0; p < ctx.nranks; ++p) {
      if (p == ctx.rank) continue;
      Connection* c = ctx.conns[p];
      if (c == nullptr || c->peerBuffer() == nullptr || c->peerBufferBytes() < kSlots * 4096)
        return false;
      // ReduceScatter splits a slot into one region per block.
      if (a.coll == Collective::kReduceScatter &&
          (c->peerBufferBytes() / kSlots - sizeof(SlotFlags)) / static_cast<size_t>(ctx.nranks) <
              kLine)
        return false;
    }
    return true;
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    // Usable only when every peer is on this host: then nothing moves through a network, and it
    // beats the stream-based algorithms at every size: one or two flag waits and a few passes
    // over the data per rank (at ~20 GB/s), counted per collective.
    const double bytes = static_cast<double>(argBytes(a)), dn = n;
    // A barrier: every rank reads every peer's line, one after another.
    if (a.coll == Collective::kBarrier) return 0.3 + 0.1 * (dn - 1);
    double passes = 3;  // AllReduce: copy in, reduce n slices of 1/n, copy out
    switch (a.coll) {
      case Collective::kReduceScatter:
        passes = 2 * dn;
        break;  // n blocks in, n reads of one
      case Collective::kAllGather:
        passes = dn + 1;
        break;
      case Collective::kBroadcast:
        passes = 2;
        break;
      case Collective::kReduce:
        passes = dn + 1;
        break;
      default:
        break;
    }
    return 0.3 + bytes * passes / 20e3;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;

 private:
  // Slot k of rank j's staging: flags, then data.
  SlotFlags* flags(int j, uint64_t event) { return reinterpret_cast<SlotFlags*>(slot(j, event)); }
  char* data(int j, uint64_t event) { return slot(j, event) + sizeof(SlotFlags); }
  char* slot(int j, uint64_t event) { return bufs_[j] + (event % kSlots) * slotBytes_; }
  void publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event,
                     Path path = kStaged);
  // Waits until every peer's flag (staged or reduced) reaches event.
  Status waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event, bool staged);
  Status checkPeer(const CollArgs& a, const AlgoContext& ctx, int j, uint64_t event);
  // Peer j made the same call by another path (a Path): its settings differ from this rank's.
  static Status otherPath(const AlgoContext& ctx, int j, uint8_t theirs, uint8_t mine);
  // One wait on a peer's flag: when it began, and whether the peer had closed its connection
  // at the last look.
  struct Waiting {
    uint64_t begun = 0;
    bool peerClosed = false;
  };
  // The slow part of a wait on peer j, now and then: is it alive, did it abort or close, is
  // time up; then a back-off once the wait is long. The caller looks at its flag between calls.
  Status checkWait(const CollArgs& a, AlgoContext& ctx, int j, Waiting* w);
  Status oneShot(const CollArgs& a, AlgoContext& ctx);
  // Up to kLineBytes in one line per rank, tag last; a barrier is such a call without data.
  Status inOneLine(const CollArgs& a, AlgoContext& ctx);
  void setUpBuffers(const AlgoContext& ctx);  // bufs_ and slotBytes_ for this call
  LineMessage* line(int j, uint64_t event) { return &flags(j, event)->line; }
  Status chunked(const CollArgs& a, AlgoContext& ctx);
  // Large AllReduce without staging: each rank reduces its 1/n block straight out of the
  // peers' inputs and writes it into their outputs (cross-memory attach, shm_cma.h).
  Status singleCopy(const CollArgs& a, AlgoContext& ctx);
  // At the first call that could take it: every rank checks it may reach every peer's memory
  // (and, in auto mode, that the kernel's copy is fast enough), and all vote through the slot
  // flags, so that all ranks take single copy or none does.
  Status voteSingleCopy(const CollArgs& a, AlgoContext& ctx);
  // auto mode's half of the vote: kYes where the kernel's copy from a peer is fast enough,
  // kTooSlow where not, kCannotReach where it fails; the figures go to *figures for the log.
  Vote timeKernelCopy(const AlgoContext& ctx, uint64_t event, std::string* figures);
  Status reduceScatter(const CollArgs& a, AlgoContext& ctx);
  Status allGather(const CollArgs& a, AlgoContext& ctx);
  Status rooted(const CollArgs& a, AlgoContext& ctx);  // Broadcast and Reduce

  size_t chunkBytes_;
  size_t oneShotBytes_;
  size_t lineBytes_;
  size_t streamBytes_;
  size_t singleCopyBytes_;
  std::string singleCopyMode_;  // COLLIE_SHM_CMA: auto, on, off
  enum class SingleCopy { kUnknown, kOn, kOff } singleCopy_ = SingleCopy::kUnknown;
  std::vector<char> peerChunk_;  // single copy: a chunk read from a peer
  uint64_t events_ = 0;          // slots used so far: continues across ops, the same on every rank
  std::vector<char*> bufs_;
  size_t slotBytes_ = 0;
};

void ShmDirectAllReduce::publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event,
                                       Path path) {
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

Status ShmDirectAllReduce::checkPeer(const CollArgs& a, const AlgoContext& ctx, int j,
                                     uint64_t event) {
  const SlotFlags* f = flags(j, event);
  if (f->count == a.count && f->dtype == a.dtype && f->op == a.op && f->seq == ctx.seq &&
      f->coll == static_cast<uint8_t>(a.coll) && f->root == a.root) {
    // The same call: then the same path, as every rank decides it from the call and the
    // settings, which must agree.
    if (f->path != flags(ctx.rank, event)->path)
      return otherPath(ctx, j, f->path, flags(ctx.rank, event)->path);
    return Status::ok();
  }
  FrameTag mine = ctx.tagFor(a, 0, kShmDirectId), theirs = mine;
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

Status ShmDirectAllReduce::otherPath(const AlgoContext& ctx, int j, uint8_t theirs, uint8_t mine) {
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
                      "; COLLIE_SHM_LINE_BYTES, COLLIE_SHM_ONESHOT_BYTES, COLLIE_SHM_CMA and "
                      "COLLIE_SHM_CMA_BYTES must be alike on every rank");
}

Status ShmDirectAllReduce::checkWait(const CollArgs& a, AlgoContext& ctx, int j, Waiting* w) {
  // Every peer, not only j: one that runs this call by a message algorithm (COLLIE_ALGO or the
  // settings differ) sends frames, to whichever peer its schedule names, and waits for ours.
  const FrameTag mine = ctx.tagFor(a, 0, kShmDirectId);
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
    return timeoutError(std::string(ctx.opName) + ": " + kTimedOutWaitingFor + std::to_string(j) +
                        " in shared memory (" + describeFrameTag(mine) +
                        "); the peer is stuck, dead or running another op");
  // Yield to a rank sharing this core, and sleep a little once the wait is long.
  if (now - w->begun > 20000) sched_yield();
  if (now - w->begun > 5000000) usleep(50);
  return Status::ok();
}

// Between looks at a flag: with more ranks than cores the peer may need this very core, so give
// it up at once.
inline void pauseSpin(const AlgoContext& ctx) {
  if (ctx.oversubscribed)
    sched_yield();
  else
    __builtin_ia32_pause();
}

Status ShmDirectAllReduce::waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event,
                                   bool staged) {
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

Status ShmDirectAllReduce::inOneLine(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const uint64_t e = events_++, tag = e + 1;
  const size_t bytes = a.count * dtypeSize(a.dtype);
  // In place, this rank's input is the output: kept aside here (read back from its line, it
  // cost 0.1 us a call).
  alignas(kLine) char own[kLineBytes];
  if (a.send == a.recv && bytes > 0) memcpy(own, a.send, bytes);
  LineMessage* mine = line(r, e);
  mine->seq = static_cast<uint32_t>(ctx.seq);
  mine->count = static_cast<uint8_t>(a.count);
  mine->dtype = static_cast<uint8_t>(a.dtype);
  mine->op = static_cast<uint8_t>(a.op);
  mine->coll = static_cast<uint8_t>(a.coll);
  if (bytes > 0) memcpy(mine->bytes, a.send, bytes);
  mine->tag.store(tag, std::memory_order_release);
  // The flags too, though peers on this path do not wait for them: a peer that took another
  // path for this call (it disagrees on the count) finds this rank's descriptor there.
  publishStaged(a, ctx, e, kLineMessage);
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    const LineMessage* theirs = line(j, e);
    const SlotFlags* f = flags(j, e);
    Waiting waiting;
    for (unsigned spin = 0; theirs->tag.load(std::memory_order_acquire) != tag; ++spin) {
      if ((spin & 255) != 255) {
        pauseSpin(ctx);
        continue;
      }
      COLLIE_RETURN_IF_ERROR(checkWait(a, ctx, j, &waiting));
      // The peer publishes its flags after its line: with the flags there and the line not, it
      // made another call (another count, or another path).
      if (f->staged.load(std::memory_order_acquire) == tag &&
          theirs->tag.load(std::memory_order_acquire) != tag) {
        Status s = checkPeer(a, ctx, j, e);
        return s.isOk() ? otherPath(ctx, j, f->path, kLineMessage) : s;
      }
    }
    if (theirs->seq != static_cast<uint32_t>(ctx.seq) || theirs->count != a.count ||
        theirs->dtype != static_cast<uint8_t>(a.dtype) ||
        theirs->op != static_cast<uint8_t>(a.op) || theirs->coll != static_cast<uint8_t>(a.coll)) {
      // Another call: its flags, published after its line, say in full what it called.
      for (unsigned spin = 0; f->staged.load(std::memory_order_acquire) != tag; ++spin)
        if ((spin & 255) == 255) COLLIE_RETURN_IF_ERROR(checkWait(a, ctx, j, &waiting));
      return checkPeer(a, ctx, j, e);
    }
  }
  if (a.coll == Collective::kBarrier) return Status::ok();  // every peer's line is here
  // Every rank reduces in rank order, so every rank gets the same bits.
  auto of = [&](int j) -> const void* {
    if (j != r) return line(j, e)->bytes;
    return a.send == a.recv ? own : a.send;
  };
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  reduce(a.recv, of(0), of(1), a.count, a.dtype, op);
  for (int j = 2; j < n; ++j) reduce(a.recv, a.recv, of(j), a.count, a.dtype, op);
  if (a.op == collieAvg) scaleForAvg(a.recv, a.count, a.dtype, n);
  return Status::ok();
}

Status ShmDirectAllReduce::oneShot(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks;
  const uint64_t e = events_++;
  memcpy(data(ctx.rank, e), a.send, a.count * dtypeSize(a.dtype));
  publishStaged(a, ctx, e);
  COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
  // Every rank reduces in the same order, so every rank gets the same bits.
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  reduce(a.recv, data(0, e), data(1, e), a.count, a.dtype, op);
  for (int j = 2; j < n; ++j) reduce(a.recv, a.recv, data(j, e), a.count, a.dtype, op);
  if (a.op == collieAvg) scaleForAvg(a.recv, a.count, a.dtype, n);
  return Status::ok();
}

Status ShmDirectAllReduce::chunked(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  const size_t room = slotBytes_ - sizeof(SlotFlags);
  const size_t chunkElems = std::max<size_t>(1, std::min(chunkBytes_, room) / esz);
  const size_t nchunks = (a.count + chunkElems - 1) / chunkElems;
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  // A large output is written once and not read back soon: stream it past the caches. In
  // place, the output lines were just read for the copy-in and are in cache anyway.
  const bool streamOut = a.send != a.recv && a.count * esz >= streamBytes_;
  const uint64_t first = events_;
  events_ += nchunks;
  // Staged: every block of the chunk but this rank's own, which only this rank reduces (it
  // reads that block of its input in place, and the reduction lands in its staging slot).
  auto stage = [&](size_t k) {
    const size_t off = k * chunkElems, ce = std::min(chunkElems, a.count - off);
    const size_t so = ring::blockOffset(ce, n, r) * esz, se = so + ring::blockCount(ce, n, r) * esz;
    memcpy(data(r, first + k), in + off * esz, so);
    memcpy(data(r, first + k) + se, in + off * esz + se, ce * esz - se);
    publishStaged(a, ctx, first + k);
  };
  stage(0);
  for (size_t k = 0; k < nchunks; ++k) {
    const size_t off = k * chunkElems, ce = std::min(chunkElems, a.count - off);
    const uint64_t e = first + k;
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
    const size_t so = ring::blockOffset(ce, n, r) * esz, sc = ring::blockCount(ce, n, r);
    char* mine = data(r, e) + so;
    const char* acc = in + off * esz + so;
    for (int j = 0; j < n; ++j) {
      if (j == r || sc == 0) continue;
      reduce(mine, acc, data(j, e) + so, sc, a.dtype, op);
      acc = mine;
    }
    if (a.op == collieAvg && sc > 0) scaleForAvg(mine, sc, a.dtype, n);
    flags(r, e)->reduced.store(e + 1, std::memory_order_release);
    // The next chunk goes in now (in place, its input lies past this chunk's output), so the
    // peers can reduce it while this rank waits for their slices of this one and copies out.
    if (k + 1 < nchunks) stage(k + 1);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, false));
    for (int j = 0; j < n; ++j) {
      const size_t jo = ring::blockOffset(ce, n, j) * esz, jc = ring::blockCount(ce, n, j);
      if (streamOut)
        copyStreaming(out + off * esz + jo, data(j, e) + jo, jc * esz);
      else
        memcpy(out + off * esz + jo, data(j, e) + jo, jc * esz);
    }
  }
  return Status::ok();
}

Status ShmDirectAllReduce::voteSingleCopy(const CollArgs& a, AlgoContext& ctx) {
  const uint64_t e = events_++;
  SlotFlags* mine = flags(ctx.rank, e);
  mine->pid = static_cast<int32_t>(getpid());
  mine->sendAddr = reinterpret_cast<uintptr_t>(mine);  // a peer reads this line back
  publishStaged(a, ctx, e, kVote);
  COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
  // The first line of a peer's flags, read through its own address space, must be what the
  // shared mapping shows: then its pid names the peer and reading its memory is allowed.
  bool ok = true;
  for (int j = 0; j < ctx.nranks && ok; ++j) {
    if (j == ctx.rank) continue;
    const SlotFlags* f = flags(j, e);
    ok = cmaProbe(f->pid, reinterpret_cast<const void*>(f->sendAddr), f,
                  offsetof(SlotFlags, pid) + 12);
  }
  std::string figures;
  mine->singleCopyOk = !ok                         ? kCannotReach
                       : singleCopyMode_ == "auto" ? timeKernelCopy(ctx, e, &figures)
                                                   : kYes;
  mine->reduced.store(e + 1, std::memory_order_release);
  COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, false));
  bool reach = true, quick = true;
  for (int j = 0; j < ctx.nranks; ++j) {
    reach = reach && flags(j, e)->singleCopyOk != kCannotReach;
    quick = quick && flags(j, e)->singleCopyOk == kYes;
  }
  singleCopy_ = reach && quick ? SingleCopy::kOn : SingleCopy::kOff;
  COLLIE_INFO(kLogColl, "shm_direct: single-copy AllReduce from %zu bytes %s%s", singleCopyBytes_,
              !reach  ? "off (a rank cannot reach a peer's memory)"
              : quick ? "on"
                      : "off (a rank's cross-process copy is under half as fast as memcpy)",
              figures.c_str());
  return Status::ok();
}

Vote ShmDirectAllReduce::timeKernelCopy(const AlgoContext& ctx, uint64_t e, std::string* figures) {
  // Single copy saves a rank one of its two staging copies, so it pays only where the kernel's
  // cross-process copy (a system call and a page pin per page) runs at least half as fast as
  // memcpy. Timed on one chunk of the next peer's staging, read both ways, best of four.
  const int j = (ctx.rank + 1) % ctx.nranks;
  const SlotFlags* f = flags(j, e);
  const size_t len = std::min(kSingleCopyChunk, slotBytes_ - sizeof(SlotFlags));
  if (peerChunk_.size() < len) peerChunk_.resize(len);
  const char* remote = reinterpret_cast<const char*>(f->sendAddr) + sizeof(SlotFlags);
  uint64_t cmaNs = UINT64_MAX, copyNs = UINT64_MAX;
  for (int rep = 0; rep < 4; ++rep) {
    const uint64_t t0 = nowNs();
    if (!cmaRead(f->pid, remote, peerChunk_.data(), len, j, ctx.opName).isOk()) return kCannotReach;
    const uint64_t t1 = nowNs();
    memcpy(peerChunk_.data(), data(j, e), len);
    const uint64_t t2 = nowNs();
    cmaNs = std::min(cmaNs, t1 - t0);
    copyNs = std::min(copyNs, t2 - t1);
  }
  auto gbps = [len](uint64_t ns) {
    return static_cast<double>(len) / static_cast<double>(std::max<uint64_t>(ns, 1));
  };
  char buf[128];
  snprintf(buf, sizeof(buf), " (rank %d: cross-process copy %.1f GB/s, memcpy %.1f GB/s)", ctx.rank,
           gbps(cmaNs), gbps(copyNs));
  *figures = buf;
  return cmaNs <= 2 * copyNs ? kYes : kTooSlow;
}

Status ShmDirectAllReduce::singleCopy(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const uint64_t e = events_++;
  SlotFlags* mine = flags(r, e);
  mine->pid = static_cast<int32_t>(getpid());
  mine->sendAddr = reinterpret_cast<uintptr_t>(a.send);
  mine->recvAddr = reinterpret_cast<uintptr_t>(a.recv);
  publishStaged(a, ctx, e, kSingle);
  COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
  // Block r is this rank's alone: only it reads the peers' inputs there and writes their
  // outputs there, chunk by chunk, each chunk read before it is written (so in place is safe).
  // Chunks stay in cache between the reads, the reduction and the writes.
  const size_t step = std::max<size_t>(1, kSingleCopyChunk / esz);
  if (peerChunk_.size() < step * esz) peerChunk_.resize(step * esz);
  char* tmp = peerChunk_.data();
  const size_t bo = ring::blockOffset(a.count, n, r), bc = ring::blockCount(a.count, n, r);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  for (size_t off = bo; off < bo + bc; off += step) {
    const size_t ce = std::min(step, bo + bc - off), at = off * esz, len = ce * esz;
    const char* acc = in + at;
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      const SlotFlags* f = flags(j, e);
      COLLIE_RETURN_IF_ERROR(cmaRead(f->pid, reinterpret_cast<const char*>(f->sendAddr) + at, tmp,
                                     len, j, ctx.opName));
      reduce(out + at, acc, tmp, ce, a.dtype, op);
      acc = out + at;
    }
    if (a.op == collieAvg) scaleForAvg(out + at, ce, a.dtype, n);
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      const SlotFlags* f = flags(j, e);
      COLLIE_RETURN_IF_ERROR(cmaWrite(f->pid, reinterpret_cast<char*>(f->recvAddr) + at, out + at,
                                      len, j, ctx.opName));
    }
  }
  // Done with the peers' buffers; return once they are done with this rank's.
  mine->reduced.store(e + 1, std::memory_order_release);
  return waitAll(a, ctx, e, false);
}

Status ShmDirectAllReduce::reduceScatter(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), block = a.count * esz;
  const size_t room = (slotBytes_ - sizeof(SlotFlags)) / static_cast<size_t>(n) / kLine * kLine;
  const size_t step = std::max<size_t>(esz, std::min(chunkBytes_, room) / esz * esz);
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  for (size_t off = 0; off < block; off += step) {
    const size_t len = std::min(step, block - off), ce = len / esz;
    const uint64_t e = events_++;
    for (int b = 0; b < n; ++b)
      memcpy(data(r, e) + static_cast<size_t>(b) * room, in + static_cast<size_t>(b) * block + off,
             len);
    publishStaged(a, ctx, e);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
    const size_t mine = static_cast<size_t>(r) * room;
    reduce(out + off, data(0, e) + mine, data(1, e) + mine, ce, a.dtype, op);
    for (int j = 2; j < n; ++j) reduce(out + off, out + off, data(j, e) + mine, ce, a.dtype, op);
    if (a.op == collieAvg) scaleForAvg(out + off, ce, a.dtype, n);
  }
  return Status::ok();
}

Status ShmDirectAllReduce::allGather(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype), block = a.count * esz;
  const size_t room = slotBytes_ - sizeof(SlotFlags);
  const size_t step = std::max<size_t>(esz, std::min(chunkBytes_, room) / esz * esz);
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  const bool streamOut = block * static_cast<size_t>(n) >= streamBytes_;
  for (size_t off = 0; off < block; off += step) {
    const size_t len = std::min(step, block - off);
    const uint64_t e = events_++;
    memcpy(data(r, e), in + off, len);
    publishStaged(a, ctx, e);
    char* own = out + static_cast<size_t>(r) * block + off;
    if (own != in + off) memcpy(own, in + off, len);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      char* dst = out + static_cast<size_t>(j) * block + off;
      if (streamOut)
        copyStreaming(dst, data(j, e), len);
      else
        memcpy(dst, data(j, e), len);
    }
  }
  return Status::ok();
}

Status ShmDirectAllReduce::rooted(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank, root = a.root;
  const bool bcast = a.coll == Collective::kBroadcast;
  const size_t esz = dtypeSize(a.dtype), bytes = a.count * esz;
  const size_t room = slotBytes_ - sizeof(SlotFlags);
  const size_t step = std::max<size_t>(esz, std::min(chunkBytes_, room) / esz * esz);
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  for (size_t off = 0; off < bytes; off += step) {
    const size_t len = std::min(step, bytes - off), ce = len / esz;
    const uint64_t e = events_++;
    // Broadcast stages the root's chunk, Reduce everyone's but the root's (it reads its own
    // input in place).
    if (bcast ? r == root : r != root) memcpy(data(r, e), in + off, len);
    publishStaged(a, ctx, e);
    if (bcast && r == root && out != in) memcpy(out + off, in + off, len);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
    if (bcast && r != root) memcpy(out + off, data(root, e), len);
    if (!bcast && r == root) {
      // The root's input first (in place it is the output), then the others in rank order.
      const char* acc = in + off;
      for (int j = 0; j < n; ++j) {
        if (j == root) continue;
        reduce(out + off, acc, data(j, e), ce, a.dtype, op);
        acc = out + off;
      }
      if (a.op == collieAvg) scaleForAvg(out + off, ce, a.dtype, n);
    }
  }
  return Status::ok();
}

void ShmDirectAllReduce::setUpBuffers(const AlgoContext& ctx) {
  bufs_.assign(ctx.nranks, nullptr);
  size_t staging = 0;
  for (int p = 0; p < ctx.nranks; ++p) {
    if (p == ctx.rank) continue;
    bufs_[p] = static_cast<char*>(ctx.conns[p]->peerBuffer());
    bufs_[ctx.rank] = static_cast<char*>(ctx.conns[p]->localBuffer());
    staging = ctx.conns[p]->peerBufferBytes();
  }
  slotBytes_ = (staging / kSlots) & ~size_t{kLine - 1};
}

Status ShmDirectAllReduce::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks;
  const size_t esz = dtypeSize(a.dtype);
  if (a.coll == Collective::kBarrier && n > 1) {
    setUpBuffers(ctx);
    return inOneLine(a, ctx);
  }
  if (n == 1 || a.count == 0) {
    if (a.send != a.recv && a.count > 0) memcpy(a.recv, a.send, a.count * esz);
    return Status::ok();
  }
  setUpBuffers(ctx);
  switch (a.coll) {
    case Collective::kReduceScatter:
      return reduceScatter(a, ctx);
    case Collective::kAllGather:
      return allGather(a, ctx);
    case Collective::kBroadcast:
    case Collective::kReduce:
      return rooted(a, ctx);
    default:
      break;
  }
  const size_t bytes = a.count * esz;
  if (bytes <= std::min(lineBytes_, kLineBytes)) return inOneLine(a, ctx);
  if (bytes <= std::min(oneShotBytes_, slotBytes_ - sizeof(SlotFlags))) return oneShot(a, ctx);
  // auto: not with more ranks than cores, where the n - 1 kernel copies each way per chunk
  // lose to staging out of place at every size. The rule uses only what every rank sees
  // alike (not the placement, which may differ between ranks), so all take the same path.
  // COLLIE_SHM_CMA is auto, on or off: init refuses anything else.
  const bool allowed =
      singleCopyMode_ == "on" || (singleCopyMode_ == "auto" && !ctx.oversubscribed);
  if (allowed && singleCopyBytes_ > 0 && bytes >= singleCopyBytes_) {
    if (singleCopy_ == SingleCopy::kUnknown) COLLIE_RETURN_IF_ERROR(voteSingleCopy(a, ctx));
    if (singleCopy_ == SingleCopy::kOn) return singleCopy(a, ctx);
  }
  return chunked(a, ctx);
}

}  // namespace

std::unique_ptr<Algorithm> makeShmDirectAlgorithm() {
  return std::make_unique<ShmDirectAllReduce>();
}

}  // namespace collie
