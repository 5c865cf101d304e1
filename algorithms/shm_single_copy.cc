// shm_single_copy: AllReduce without staging, for ranks that all share a host. Each rank reduces
// its 1/n block straight out of the peers' inputs and writes it into their outputs through the
// kernel's copy between processes (PeerMemory, transport.h): one copy each way, where staging
// takes two. The slot flags (shm_flags.h) carry each rank's buffer addresses and tell when
// every peer is done. The collectives that move blocks go the same way with one copy per block
// (shm_single_copy_blocks.cc).
//
// Where it may run is agreed once, at init (prepare): every rank checks it may reach every
// peer's memory and, under COLLIE_SHM_CMA=auto, times the kernel's copy against memcpy; then
// the ranks vote through the slot flags, so that all may take it or none may.
#include "algorithms/shm_single_copy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/patterns/ring_pattern.h"
#include "algorithms/shm_flags.h"
#include "src/base/log.h"
#include "src/base/params.h"
#include "src/base/time.h"

namespace collie {

namespace {

constexpr uint8_t kShmSingleCopyId = 9;
constexpr size_t kChunk = 256 << 10;  // read, reduced and written while in L2
// What the tuner is told below COLLIE_SHM_CMA_BYTES: never the pick.
constexpr double kNeverUs = 1e12;
// The slowest kernel copy, in per mille of memcpy's speed, at which the block moves may run.
constexpr uint32_t kBlocksPermille = 250;
// A rank's vote.
enum Vote : uint32_t { kCannotReach = 0, kYes = 1, kTooSlow = 2 };

class ShmSingleCopy : public Algorithm {
 public:
  ShmSingleCopy()
      : minBytes_(static_cast<size_t>(params().getInt("COLLIE_SHM_CMA_BYTES"))),
        mode_(params().getString("COLLIE_SHM_CMA")) {}
  const char* name() const override { return "shm_single_copy"; }
  uint8_t id() const override { return kShmSingleCopyId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return (coll == Collective::kAllReduce || singleCopyMovesBlocks(coll)) &&
           kind == MemoryKind::kHost;
  }
  // Where the ranks voted for it at init.
  bool usable(const AlgoContext&, const CollArgs& a) const override {
    if (a.coll == Collective::kAllReduce) return agreed_ && allReduce_;
    return blocks_ && singleCopyBlocksFit(a, nranks_, room_);
  }
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override;
  Status prepare(AlgoContext& ctx) override;
  Status run(const CollArgs& a, AlgoContext& ctx) override;

 private:
  Status runAllReduce(const CollArgs& a, AlgoContext& ctx);
  bool mayVote(const AlgoContext& ctx) const;
  Status vote(AlgoContext& ctx, ShmFlags& f);
  // This rank's vote, with its kernel copy's speed in *permille of memcpy's (auto mode).
  Vote ownVote(const AlgoContext& ctx, ShmFlags& f, uint64_t e, uint32_t* permille,
               std::string* figures);
  Vote timeKernelCopy(const AlgoContext& ctx, ShmFlags& f, uint64_t e, uint32_t* permille,
                      std::string* figures);
  // Reads and reduces chunk [at, at + len) of every peer's input into this rank's output,
  // then writes it into every peer's output.
  Status reduceChunk(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e, size_t at,
                     size_t len);

  size_t minBytes_;   // COLLIE_SHM_CMA_BYTES: smaller calls stay on shm_direct's fast paths
  std::string mode_;  // COLLIE_SHM_CMA: auto, on, off (init refuses anything else)
  bool agreed_ = false;
  bool allReduce_ = false;  // AllReduce too, not only the block moves
  bool blocks_ = false;     // the block moves: agreed where every rank's copy is fast enough
  int nranks_ = 0;
  size_t room_ = 0;        // data bytes per slot
  double copyRatio_ = 1;   // the slowest rank's kernel copy speed over its memcpy's
  std::vector<char> tmp_;  // a chunk read from a peer
};

double ShmSingleCopy::costUs(const CollArgs& a, int n, const LinkModel& link) const {
  (void)link;  // nothing crosses a network
  const double bytes = static_cast<double>(argBytes(a)), dn = n;
  // AllToAllv's count is 0: its sizes differ between ranks, which must price a call alike.
  if (bytes < static_cast<double>(minBytes_) || a.coll == Collective::kAllToAllv) return kNeverUs;
  if (mode_ == "on") return 0;  // forced wherever every rank may reach every peer
  if (a.coll != Collective::kAllReduce) return singleCopyBlocksCostUs(a, n, copyRatio_);
  // Two flag waits and 2(n-1) kernel copies, each of (n-1)/n of the bytes over the call; one
  // pass to reduce. shm_direct's staging makes three passes at memcpy's speed.
  const double copied = 2 * (dn - 1) / dn / copyRatio_;
  return 0.3 + 2 * (dn - 1) * kSingleCopySystemCallUs + bytes * (1 + copied) / kShmCopyBytesPerUs;
}

bool ShmSingleCopy::mayVote(const AlgoContext& ctx) const {
  if (mode_ == "off" || minBytes_ == 0 || ctx.nranks < 2) return false;
  const ShmSlots* slots = ShmFlags::slotsOf(ctx);
  return slots != nullptr && slots->slotBytes() >= 4096;
}

Status ShmSingleCopy::prepare(AlgoContext& ctx) {
  agreed_ = blocks_ = false;
  // auto: AllReduce not with more ranks than cores, where its n - 1 kernel copies each way per
  // chunk lose to staging at every size. Every rank sees this alike.
  allReduce_ = !(mode_ == "auto" && ctx.oversubscribed);
  nranks_ = ctx.nranks;
  if (!mayVote(ctx)) return Status::ok();
  room_ = ShmFlags::slotsOf(ctx)->slotBytes() - sizeof(SlotFlags);
  ShmFlags f(ShmFlags::slotsOf(ctx), kShmSingleCopyId);
  return vote(ctx, f);
}

Status ShmSingleCopy::vote(AlgoContext& ctx, ShmFlags& f) {
  const CollArgs none;  // the vote's descriptor, alike on every rank
  const uint64_t e = f.take();
  SlotFlags* mine = f.flags(ctx.rank, e);
  mine->sendAddr = reinterpret_cast<uintptr_t>(mine);  // a peer reads this line back
  f.publishStaged(none, ctx, e, kVote);
  COLLIE_RETURN_IF_ERROR(f.waitAll(none, ctx, e, true));
  std::string figures;
  uint32_t permille = 1000;
  mine->singleCopyOk = ownVote(ctx, f, e, &permille, &figures);
  mine->copyPermille = permille;
  mine->reduced.store(e + 1, std::memory_order_release);
  COLLIE_RETURN_IF_ERROR(f.waitAll(none, ctx, e, false));
  bool reach = true, quick = true;
  for (int j = 0; j < ctx.nranks; ++j) {
    reach = reach && f.flags(j, e)->singleCopyOk != kCannotReach;
    quick = quick && f.flags(j, e)->singleCopyOk == kYes;
    permille = std::min(permille, f.flags(j, e)->copyPermille);
  }
  agreed_ = reach && quick;
  // One copy per block replaces two at memcpy's speed, or messages' copies and waits: the model
  // weighs it against those from a quarter of memcpy's speed up.
  blocks_ = reach && permille >= kBlocksPermille;
  copyRatio_ = std::max(1u, permille) / 1000.0;
  COLLIE_INFO(kLogColl,
              "shm_single_copy: single-copy AllReduce from %zu bytes %s; block moves %s%s",
              minBytes_,
              !reach       ? "off (a rank cannot reach a peer's memory)"
              : !quick     ? "off (a rank's cross-process copy is under half as fast as memcpy)"
              : allReduce_ ? "on"
                           : "off (more ranks than cores)",
              blocks_ ? "on" : "off", figures.c_str());
  return Status::ok();
}

Vote ShmSingleCopy::ownVote(const AlgoContext& ctx, ShmFlags& f, uint64_t e, uint32_t* permille,
                            std::string* figures) {
  // The first line of a peer's flags, read through its own address space, must be what the
  // shared mapping shows: then the memory reached is the peer's, and reading it is allowed.
  for (int j = 0; j < ctx.nranks; ++j) {
    if (j == ctx.rank) continue;
    PeerMemory* m = ctx.conns[j]->peerMemory();
    const SlotFlags* fl = f.flags(j, e);
    const size_t head = offsetof(SlotFlags, sendAddr) + sizeof(fl->sendAddr);
    if (m == nullptr || !m->reachable(reinterpret_cast<const void*>(fl->sendAddr), fl, head))
      return kCannotReach;
  }
  return mode_ == "auto" ? timeKernelCopy(ctx, f, e, permille, figures) : kYes;
}

Vote ShmSingleCopy::timeKernelCopy(const AlgoContext& ctx, ShmFlags& f, uint64_t e,
                                   uint32_t* permille, std::string* figures) {
  // Single copy saves a rank one of its two staging copies, so it pays only where the kernel's
  // copy (a system call and a page pin per page) runs at least half as fast as memcpy. Timed
  // on one chunk of the next peer's staging, read both ways, best of four.
  const int j = (ctx.rank + 1) % ctx.nranks;
  const SlotFlags* fl = f.flags(j, e);
  const size_t len = std::min(kChunk, f.room());
  if (tmp_.size() < len) tmp_.resize(len);
  const char* remote = reinterpret_cast<const char*>(fl->sendAddr) + sizeof(SlotFlags);
  uint64_t cmaNs = UINT64_MAX, copyNs = UINT64_MAX;
  for (int rep = 0; rep < 4; ++rep) {
    const uint64_t t0 = nowNs();
    if (!ctx.conns[j]->peerMemory()->read(remote, tmp_.data(), len, ctx.opName).isOk())
      return kCannotReach;
    const uint64_t t1 = nowNs();
    memcpy(tmp_.data(), f.data(j, e), len);
    const uint64_t t2 = nowNs();
    cmaNs = std::min(cmaNs, t1 - t0);
    copyNs = std::min(copyNs, t2 - t1);
  }
  cmaNs = std::max<uint64_t>(cmaNs, 1);
  *permille = static_cast<uint32_t>(std::min<uint64_t>(1000, copyNs * 1000 / cmaNs));
  char buf[128];
  snprintf(buf, sizeof(buf), " (rank %d: cross-process copy %.1f GB/s, memcpy %.1f GB/s)", ctx.rank,
           static_cast<double>(len) / static_cast<double>(cmaNs),
           static_cast<double>(len) / static_cast<double>(std::max<uint64_t>(copyNs, 1)));
  *figures = buf;
  return cmaNs <= 2 * copyNs ? kYes : kTooSlow;
}

Status ShmSingleCopy::reduceChunk(const CollArgs& a, AlgoContext& ctx, ShmFlags& f, uint64_t e,
                                  size_t at, size_t len) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t ce = len / dtypeSize(a.dtype);
  char* out = static_cast<char*>(a.recv) + at;
  const char* acc = static_cast<const char*>(a.send) + at;
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    const char* theirs = reinterpret_cast<const char*>(f.flags(j, e)->sendAddr) + at;
    COLLIE_RETURN_IF_ERROR(ctx.conns[j]->peerMemory()->read(theirs, tmp_.data(), len, ctx.opName));
    reduce(out, acc, tmp_.data(), ce, a.dtype, passOp(a.op));
    acc = out;
  }
  if (a.op == collieAvg) scaleForAvg(out, ce, a.dtype, n);
  for (int j = 0; j < n; ++j) {
    if (j == r) continue;
    char* theirs = reinterpret_cast<char*>(f.flags(j, e)->recvAddr) + at;
    COLLIE_RETURN_IF_ERROR(ctx.conns[j]->peerMemory()->write(theirs, out, len, ctx.opName));
  }
  return Status::ok();
}

Status ShmSingleCopy::run(const CollArgs& a, AlgoContext& ctx) {
  if (a.coll == Collective::kAllReduce) return runAllReduce(a, ctx);
  ShmFlags f(ShmFlags::slotsOf(ctx), kShmSingleCopyId);
  return singleCopyBlocks(a, ctx, f, &tmp_);
}

Status ShmSingleCopy::runAllReduce(const CollArgs& a, AlgoContext& ctx) {
  if (a.count == 0) return Status::ok();
  const int n = ctx.nranks, r = ctx.rank;
  const size_t esz = dtypeSize(a.dtype);
  ShmFlags f(ShmFlags::slotsOf(ctx), kShmSingleCopyId);
  const uint64_t e = f.take();
  SlotFlags* mine = f.flags(r, e);
  mine->sendAddr = reinterpret_cast<uintptr_t>(a.send);
  mine->recvAddr = reinterpret_cast<uintptr_t>(a.recv);
  f.publishStaged(a, ctx, e, kSingle);
  COLLIE_RETURN_IF_ERROR(f.waitAll(a, ctx, e, true));
  // Block r is this rank's alone: only it reads the peers' inputs there and writes their
  // outputs there, chunk by chunk, each chunk read before it is written (so in place is safe).
  const size_t step = std::max<size_t>(1, kChunk / esz);
  if (tmp_.size() < step * esz) tmp_.resize(step * esz);
  const size_t bo = ring::blockOffset(a.count, n, r), bc = ring::blockCount(a.count, n, r);
  for (size_t off = bo; off < bo + bc; off += step)
    COLLIE_RETURN_IF_ERROR(
        reduceChunk(a, ctx, f, e, off * esz, std::min(step, bo + bc - off) * esz));
  // Done with the peers' buffers; return once they are done with this rank's.
  mine->reduced.store(e + 1, std::memory_order_release);
  return f.waitAll(a, ctx, e, false);
}

}  // namespace

std::unique_ptr<Algorithm> makeShmSingleCopyAlgorithm() {
  return std::make_unique<ShmSingleCopy>();
}

}  // namespace collie
