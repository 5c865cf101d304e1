// shm_direct: every collective for ranks that all share a host, through the staging buffers the
// peers have mapped, synchronised by flags in shared memory (shm_flags.h), not messages.
//
// AllReduce: every rank copies a chunk of its input into its staging buffer, all but its own 1/n
// slice; once every peer's chunk is there each rank reduces its slice of the chunk from its
// input and the peers' staging buffers (reduce-scatter through shared memory) into its own
// staging slice, and once every slice is reduced everyone copies all n slices out (all-gather).
// Chunks go round the three staging slots and are sized to stay in cache. Small messages take
// the one-shot path instead: one copy-in, one wait, and every rank reduces the whole message
// from all staging buffers; the smallest go in one cache line each (shm_flags.h). The other
// collectives take the same road (shm_collectives.cc), and a barrier is a one-line call
// without data.
#include <algorithm>
#include <cstring>

#include "algorithms/shm_paths.h"
#include "src/base/params.h"

namespace collie {

namespace {

constexpr uint8_t kShmDirectId = 2;

ShmDirectSettings settingsFromParams() {
  ShmDirectSettings s;
  s.chunkBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_CHUNK_BYTES"));
  s.oneShotBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_ONESHOT_BYTES"));
  s.lineBytes = static_cast<size_t>(std::min<int64_t>(
      kLineBytes, std::max<int64_t>(0, params().getInt("COLLIE_SHM_LINE_BYTES"))));
  s.streamBytes = static_cast<size_t>(params().getInt("COLLIE_SHM_STREAM_BYTES"));
  return s;
}

class ShmDirect : public Algorithm {
 public:
  ShmDirect() : s_(settingsFromParams()) {}
  const char* name() const override { return "shm_direct"; }
  uint8_t id() const override { return kShmDirectId; }
  bool supports(Collective coll, MemoryKind kind) const override {
    return isClassicCollective(coll) && kind == MemoryKind::kHost;  // the barrier too
  }
  bool usable(const AlgoContext& ctx, const CollArgs& a) const override;
  double costUs(const CollArgs& a, int n, const LinkModel& link) const override;
  Status run(const CollArgs& a, AlgoContext& ctx) override;

 private:
  ShmDirectSettings s_;
};

bool ShmDirect::usable(const AlgoContext& ctx, const CollArgs& a) const {
  if (ctx.nranks == 1) return true;
  const ShmSlots* slots = ShmFlags::slotsOf(ctx);
  if (slots == nullptr || slots->slotBytes() < 4096) return false;
  // ReduceScatter splits a slot into one region per block.
  return a.coll != Collective::kReduceScatter ||
         (slots->slotBytes() - sizeof(SlotFlags)) / static_cast<size_t>(ctx.nranks) >= kLine;
}

double ShmDirect::costUs(const CollArgs& a, int n, const LinkModel& link) const {
  // Usable only when every peer is on this host: then nothing moves through a network, and it
  // beats the stream-based algorithms at every size: one or two flag waits and a few passes
  // over the data per rank, counted per collective.
  (void)link;
  const double bytes = static_cast<double>(argBytes(a)), dn = n;
  // A barrier: every rank reads every peer's line, one after another.
  if (a.coll == Collective::kBarrier) return 0.3 + 0.1 * (dn - 1);
  double passes = 3;  // AllReduce: copy in, reduce n slices of 1/n, copy out
  switch (a.coll) {
    case Collective::kReduceScatter:
      passes = 2 * dn;  // n blocks in, n reads of one
      break;
    case Collective::kAllGather:
    case Collective::kReduce:
      passes = dn + 1;
      break;
    case Collective::kBroadcast:
      passes = 2;
      break;
    default:
      break;
  }
  return 0.3 + bytes * passes / kShmCopyBytesPerUs;
}

Status ShmDirect::run(const CollArgs& a, AlgoContext& ctx) {
  const int n = ctx.nranks;
  if (n == 1 || (a.count == 0 && a.coll != Collective::kBarrier)) {
    if (a.send != a.recv && a.count > 0) memcpy(a.recv, a.send, argBytes(a));
    return Status::ok();
  }
  ShmFlags f(ShmFlags::slotsOf(ctx), kShmDirectId);
  switch (a.coll) {
    case Collective::kBarrier:
      return shmInOneLine(a, ctx, f);
    case Collective::kReduceScatter:
      return shmReduceScatter(a, ctx, f, s_);
    case Collective::kAllGather:
      return shmAllGather(a, ctx, f, s_);
    case Collective::kBroadcast:
    case Collective::kReduce:
      return shmRooted(a, ctx, f, s_);
    default:
      break;
  }
  const size_t bytes = argBytes(a);
  if (bytes <= s_.lineBytes) return shmInOneLine(a, ctx, f);
  if (bytes <= std::min(s_.oneShotBytes, f.room())) return shmOneShot(a, ctx, f);
  return shmChunked(a, ctx, f, s_);
}

}  // namespace

std::unique_ptr<Algorithm> makeShmDirectAlgorithm() { return std::make_unique<ShmDirect>(); }

}  // namespace collie
