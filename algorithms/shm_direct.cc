// Shared-memory-native AllReduce for ranks that all share a host. Every rank copies a chunk of
// its input into its staging buffer, which every peer has mapped; after a barrier each rank
// reduces its 1/n slice of the chunk straight out of all the staging buffers (reduce-scatter
// through shared memory), writes it back into its own staging slice, and after a second barrier
// everyone copies all n reduced slices out (all-gather). Chunks alternate between two staging
// slots and are sized to stay in cache. Small messages take the one-shot path instead: one
// copy-in, one barrier, and every rank reduces the whole message from all staging buffers.
//
// Synchronisation is through flags in shared memory, not messages: each slot starts with a
// cache line the owner writes after filling the slot (an event number plus the op's count,
// dtype and op, so ranks that disagree get an error rather than a wrong answer) and one it
// writes after reducing its slice. Event numbers count slots used since the communicator began,
// the same on every rank. Why two slots are enough: a rank refills slot s for event e+2 only
// after it saw every peer's event e+1, which a peer publishes only after it finished reading
// everyone's slot s for event e.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/ring_pattern.h"
#include "src/base/params.h"
#include "src/base/time.h"

namespace collie {

namespace {

constexpr uint8_t kShmDirectId = 2;
constexpr size_t kLine = 64;

// The head of each slot: two cache lines, written only by the slot's owner.
struct alignas(kLine) SlotFlags {
  std::atomic<uint64_t> staged;  // event number, published after data and descriptor
  uint64_t count;
  uint64_t seq;
  uint8_t coll, dtype, op, pad[5];
  alignas(kLine) std::atomic<uint64_t> reduced;  // event number, after the owner's slice
};
static_assert(sizeof(SlotFlags) == 2 * kLine, "two lines");

class ShmDirectAllReduce : public Algorithm {
 public:
  ShmDirectAllReduce()
      : chunkBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_CHUNK_BYTES"))),
        oneShotBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_ONESHOT_BYTES"))),
        streamBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_STREAM_BYTES"))) {}
  const char* name() const override { return "shm_direct"; }
  uint8_t id() const override { return kShmDirectId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return coll == Collective::kAllReduce && kind == MemoryKind::kHost;
  }
  bool usable(const AlgoContext& ctx, const CollArgs&) const override {
    for (int p = 0; p < ctx.nranks; ++p) {
      if (p == ctx.rank) continue;
      Connection* c = ctx.conns[p];
      if (c == nullptr || c->peerBuffer() == nullptr || c->peerBufferBytes() < 2 * 4096)
        return false;
    }
    return true;
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override {
    const size_t bytes = argBytes(a);
    // Usable only when every peer is on this host: then nothing moves through a network, and it
    // beats the stream-based algorithms at every size (two flags and about three passes over
    // the data per rank).
    return 0.3 + static_cast<double>(bytes) * 3.0 / 20e3;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override;

 private:
  // Slot k of rank j's staging: flags, then data.
  SlotFlags* flags(int j, uint64_t event) { return reinterpret_cast<SlotFlags*>(slot(j, event)); }
  char* data(int j, uint64_t event) { return slot(j, event) + sizeof(SlotFlags); }
  char* slot(int j, uint64_t event) { return bufs_[j] + (event & 1) * slotBytes_; }
  void publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event);
  // Waits until every peer's flag (staged or reduced) reaches event.
  Status waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event, bool staged);
  Status checkPeer(const CollArgs& a, const AlgoContext& ctx, int j, uint64_t event);
  Status oneShot(const CollArgs& a, AlgoContext& ctx);
  Status chunked(const CollArgs& a, AlgoContext& ctx);

  size_t chunkBytes_;
  size_t oneShotBytes_;
  size_t streamBytes_;
  uint64_t events_ = 0;  // slots used so far: continues across ops, the same on every rank
  std::vector<char*> bufs_;
  size_t slotBytes_ = 0;
};

void ShmDirectAllReduce::publishStaged(const CollArgs& a, const AlgoContext& ctx, uint64_t event) {
  SlotFlags* f = flags(ctx.rank, event);
  f->count = a.count;
  f->seq = ctx.seq;
  f->coll = static_cast<uint8_t>(a.coll);
  f->dtype = static_cast<uint8_t>(a.dtype);
  f->op = static_cast<uint8_t>(a.op);
  f->staged.store(event + 1, std::memory_order_release);
}

Status ShmDirectAllReduce::checkPeer(const CollArgs& a, const AlgoContext& ctx, int j,
                                     uint64_t event) {
  const SlotFlags* f = flags(j, event);
  if (f->count == a.count && f->dtype == a.dtype && f->op == a.op && f->seq == ctx.seq)
    return Status::ok();
  FrameTag mine = ctx.tagFor(a, 0, kShmDirectId), theirs = mine;
  theirs.count = f->count;
  theirs.dtype = f->dtype;
  theirs.op = f->op;
  theirs.seq = f->seq;
  return invalidUsage("ranks disagree: peer rank " + std::to_string(j) + " called " +
                      describeFrameTag(theirs) + " while this rank called " +
                      describeFrameTag(mine) +
                      "; every rank must call the same collectives in the same order with the "
                      "same count, datatype and op");
}

Status ShmDirectAllReduce::waitAll(const CollArgs& a, AlgoContext& ctx, uint64_t event,
                                   bool staged) {
  const uint64_t want = event + 1;
  for (int j = 0; j < ctx.nranks; ++j) {
    if (j == ctx.rank) continue;
    SlotFlags* f = flags(j, event);
    std::atomic<uint64_t>& flag = staged ? f->staged : f->reduced;
    uint64_t start = 0;
    for (unsigned spin = 0; flag.load(std::memory_order_acquire) < want; ++spin) {
      if ((spin & 255) != 255) {
        // With more ranks than cores the peer may need this very core: give it up at once.
        if (ctx.oversubscribed) sched_yield();
        else __builtin_ia32_pause();
        continue;
      }
      // Now and then: is the peer alive, did it abort, is time up? Then back off: yield to a
      // rank sharing this core, and sleep a little once the wait is long.
      bool progressed = false;
      COLLIE_RETURN_IF_ERROR(ctx.conns[j]->progress(&progressed));
      uint64_t now = nowNs();
      if (start == 0) start = now;
      if (ctx.abortFlag != nullptr && ctx.abortFlag->load(std::memory_order_relaxed))
        return remoteError(std::string(ctx.opName) + ": aborted by collieCommAbort");
      if (ctx.deadline.expired())
        return timeoutError(std::string(ctx.opName) + ": timed out waiting for peer rank " +
                            std::to_string(j) + " in shared memory (" +
                            describeFrameTag(ctx.tagFor(a, 0, kShmDirectId)) +
                            "); the peer is stuck, dead or running another op");
      if (now - start > 20000) sched_yield();
      if (now - start > 5000000) usleep(50);
    }
    if (staged) COLLIE_RETURN_IF_ERROR(checkPeer(a, ctx, j, event));
  }
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
  const collieRedOp_t op = a.op == collieAvg ? collieSum : a.op;
  const char* in = static_cast<const char*>(a.send);
  char* out = static_cast<char*>(a.recv);
  // A large output is written once and not read back soon: stream it past the caches. In
  // place, the output lines were just read for the copy-in and are in cache anyway.
  const bool streamOut = a.send != a.recv && a.count * esz >= streamBytes_;
  for (size_t off = 0; off < a.count; off += chunkElems) {
    const size_t ce = std::min(chunkElems, a.count - off);
    const uint64_t e = events_++;
    memcpy(data(r, e), in + off * esz, ce * esz);
    publishStaged(a, ctx, e);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, true));
    const size_t so = ring::blockOffset(ce, n, r) * esz, sc = ring::blockCount(ce, n, r);
    char* mine = data(r, e) + so;
    for (int j = 0; j < n; ++j)
      if (j != r && sc > 0) reduce(mine, mine, data(j, e) + so, sc, a.dtype, op);
    if (a.op == collieAvg && sc > 0) scaleForAvg(mine, sc, a.dtype, n);
    flags(r, e)->reduced.store(e + 1, std::memory_order_release);
    COLLIE_RETURN_IF_ERROR(waitAll(a, ctx, e, false));
    for (int j = 0; j < n; ++j) {
      const size_t jo = ring::blockOffset(ce, n, j) * esz, jc = ring::blockCount(ce, n, j);
      if (streamOut) copyStreaming(out + off * esz + jo, data(j, e) + jo, jc * esz);
      else memcpy(out + off * esz + jo, data(j, e) + jo, jc * esz);
    }
  }
  return Status::ok();
}

Status ShmDirectAllReduce::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks;
  const size_t esz = dtypeSize(a.dtype);
  if (n == 1 || a.count == 0) {
    if (a.send != a.recv && a.count > 0) memcpy(a.recv, a.send, a.count * esz);
    return Status::ok();
  }
  bufs_.assign(n, nullptr);
  size_t staging = 0;
  for (int p = 0; p < n; ++p) {
    if (p == ctx.rank) continue;
    bufs_[p] = static_cast<char*>(ctx.conns[p]->peerBuffer());
    bufs_[ctx.rank] = static_cast<char*>(ctx.conns[p]->localBuffer());
    staging = ctx.conns[p]->peerBufferBytes();
  }
  slotBytes_ = (staging / 2) & ~size_t{kLine - 1};
  const size_t bytes = a.count * esz;
  if (bytes <= std::min(oneShotBytes_, slotBytes_ - sizeof(SlotFlags))) return oneShot(a, ctx);
  return chunked(a, ctx);
}

}  // namespace

std::unique_ptr<Algorithm> makeShmDirectAlgorithm() { return std::make_unique<ShmDirectAllReduce>(); }

}  // namespace collie
