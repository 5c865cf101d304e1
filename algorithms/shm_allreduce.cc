// shm_direct's AllReduce paths: one cache line, one shot, and chunked (see shm_paths.h).
#include <algorithm>
#include <cstring>

#include "algorithms/patterns/ring_pattern.h"
#include "algorithms/shm_paths.h"

namespace collie {

namespace {

// Fills this rank's line for event e and stores its tag last.
void writeLine(const CollArgs& a, const AlgoContext& ctx, ShmFlags& f, uint64_t e) {
  LineMessage* mine = f.line(ctx.rank, e);
  mine->seq = static_cast<uint32_t>(ctx.seq);
  mine->count = static_cast<uint8_t>(a.count);
  mine->dtype = static_cast<uint8_t>(a.dtype);
  mine->op = static_cast<uint8_t>(a.op);
  mine->coll = static_cast<uint8_t>(a.coll);
  if (argBytes(a) > 0) memcpy(mine->bytes, a.send, argBytes(a));
  mine->tag.store(e + 1, std::memory_order_release);
}

bool lineHolds(const LineMessage* l, const CollArgs& a, const AlgoContext& ctx) {
  return l->seq == static_cast<uint32_t>(ctx.seq) && l->count == a.count &&
         l->dtype == static_cast<uint8_t>(a.dtype) && l->op == static_cast<uint8_t>(a.op) &&
         l->coll == static_cast<uint8_t>(a.coll);
}

// Waits for peer j's line of event e; an error where it holds another call.
Status waitLine(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, int j, uint64_t e) {
  const uint64_t tag = e + 1;
  const LineMessage* theirs = f.line(j, e);
  const SlotFlags* fl = f.flags(j, e);
  ShmFlags::Waiting waiting;
  for (unsigned spin = 0; theirs->tag.load(std::memory_order_acquire) != tag; ++spin) {
    if ((spin & 255) != 255) {
      pauseSpin(ctx);
      continue;
    }
    COLLIE_RETURN_IF_ERROR(f.checkWait(a, ctx, j, &waiting));
    // The peer publishes its flags after its line: with the flags there and the line not, it
    // made another call (another count, or another path).
    if (fl->staged.load(std::memory_order_acquire) == tag &&
        theirs->tag.load(std::memory_order_acquire) != tag) {
      Status s = f.checkPeer(a, ctx, j, e);
      return s.isOk() ? ShmFlags::otherPath(ctx, j, fl->path, kLineMessage) : s;
    }
  }
  if (lineHolds(theirs, a, ctx)) return Status::ok();
  // Another call: its flags, published after its line, say in full what it called.
  for (unsigned spin = 0; fl->staged.load(std::memory_order_acquire) != tag; ++spin)
    if ((spin & 255) == 255) COLLIE_RETURN_IF_ERROR(f.checkWait(a, ctx, j, &waiting));
  return f.checkPeer(a, ctx, j, e);
}

// The chunked AllReduce of one call: chunk k goes through the slot of event first + k.
class Chunked {
 public:
  Chunked(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s)
      : a_(a),
        ctx_(ctx),
        f_(f),
        n_(ctx.nranks),
        r_(ctx.rank),
        esz_(dtypeSize(a.dtype)),
        chunkElems_(std::max<size_t>(1, std::min(s.chunkBytes, f.room()) / esz_)),
        // In place, the output lines were just read for the copy-in and are in cache anyway.
        streamOut_(a.send != a.recv && a.count * esz_ >= s.streamBytes),
        in_(static_cast<const char*>(a.send)),
        out_(static_cast<char*>(a.recv)) {}
  Status run();

 private:
  size_t chunkCount(size_t k) const { return std::min(chunkElems_, a_.count - k * chunkElems_); }
  const char* input(size_t k) const { return in_ + k * chunkElems_ * esz_; }
  void stage(size_t k);
  void reduceOwnSlice(size_t k);
  void copyOutChunk(size_t k);

  const CollArgs& a_;
  AlgoContext& ctx_;
  ShmFlags& f_;
  const int n_, r_;
  const size_t esz_, chunkElems_;
  const bool streamOut_;
  const char* in_;
  char* out_;
  uint64_t first_ = 0;
};

// Every block of the chunk but this rank's own, which only this rank reduces (it reads that
// block of its input in place, and the reduction lands in its staging slot).
void Chunked::stage(size_t k) {
  const size_t ce = chunkCount(k), so = ring::blockOffset(ce, n_, r_) * esz_;
  const size_t se = so + ring::blockCount(ce, n_, r_) * esz_;
  char* slot = f_.data(r_, first_ + k);
  memcpy(slot, input(k), so);
  memcpy(slot + se, input(k) + se, ce * esz_ - se);
  f_.publishStaged(a_, ctx_, first_ + k);
}

void Chunked::reduceOwnSlice(size_t k) {
  const uint64_t e = first_ + k;
  const size_t ce = chunkCount(k), so = ring::blockOffset(ce, n_, r_) * esz_;
  const size_t sc = ring::blockCount(ce, n_, r_);
  char* mine = f_.data(r_, e) + so;
  const char* acc = input(k) + so;
  for (int j = 0; j < n_; ++j) {
    if (j == r_ || sc == 0) continue;
    reduce(mine, acc, f_.data(j, e) + so, sc, a_.dtype, passOp(a_.op));
    acc = mine;
  }
  if (a_.op == collieAvg && sc > 0) scaleForAvg(mine, sc, a_.dtype, n_);
  f_.flags(r_, e)->reduced.store(e + 1, std::memory_order_release);
}

void Chunked::copyOutChunk(size_t k) {
  const uint64_t e = first_ + k;
  const size_t ce = chunkCount(k);
  char* out = out_ + k * chunkElems_ * esz_;
  for (int j = 0; j < n_; ++j) {
    const size_t jo = ring::blockOffset(ce, n_, j) * esz_, jc = ring::blockCount(ce, n_, j);
    copyOut(out + jo, f_.data(j, e) + jo, jc * esz_, streamOut_);
  }
}

Status Chunked::run() {
  const size_t nchunks = (a_.count + chunkElems_ - 1) / chunkElems_;
  first_ = f_.take(nchunks);
  stage(0);
  for (size_t k = 0; k < nchunks; ++k) {
    COLLIE_RETURN_IF_ERROR(f_.waitAll(a_, ctx_, first_ + k, true));
    reduceOwnSlice(k);
    // The next chunk goes in now (in place, its input lies past this chunk's output), so the
    // peers can reduce it while this rank waits for their slices of this one and copies out.
    if (k + 1 < nchunks) stage(k + 1);
    COLLIE_RETURN_IF_ERROR(f_.waitAll(a_, ctx_, first_ + k, false));
    copyOutChunk(k);
  }
  return Status::ok();
}

}  // namespace

Status shmInOneLine(const CollArgs& a, AlgoContext& ctx, ShmFlags& f) {
  const int n = ctx.nranks, r = ctx.rank;
  const uint64_t e = f.take();
  // In place, this rank's input is the output: kept aside here, as reading it back from its
  // line is slower.
  alignas(kLine) char own[kLineBytes];
  if (a.send == a.recv && argBytes(a) > 0) memcpy(own, a.send, argBytes(a));
  writeLine(a, ctx, f, e);
  // The flags too, though peers on this path do not wait for them: a peer that took another
  // path for this call (it disagrees on the count) finds this rank's descriptor there.
  f.publishStaged(a, ctx, e, kLineMessage);
  for (int j = 0; j < n; ++j)
    if (j != r) COLLIE_RETURN_IF_ERROR(waitLine(a, ctx, f, j, e));
  if (a.coll == Collective::kBarrier) return Status::ok();  // every peer's line is here
  auto src = [&](int j) -> const void* {
    if (j != r) return f.line(j, e)->bytes;
    return a.send == a.recv ? own : a.send;
  };
  reduceInRankOrder(a.recv, src, a, n);
  return Status::ok();
}

Status shmOneShot(const CollArgs& a, AlgoContext& ctx, ShmFlags& f) {
  const uint64_t e = f.take();
  memcpy(f.data(ctx.rank, e), a.send, argBytes(a));
  f.publishStaged(a, ctx, e);
  COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
  reduceInRankOrder(
      a.recv, [&](int j) -> const void* { return f.data(j, e); }, a, ctx.nranks);
  return Status::ok();
}

Status shmChunked(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, const ShmDirectSettings& s) {
  return Chunked(a, ctx, f, s).run();
}

}  // namespace collie
