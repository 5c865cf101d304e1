// The dissemination barrier: in round k every rank sends an empty frame to rank + 2^k and
// waits for one from rank - 2^k; after ceil(log2 n) rounds every rank has heard, directly or
// through others, from all of them. Any nranks, no fold needed.
#include "algorithms/algorithm.h"
#include "algorithms/chunk_schedule.h"

namespace collie {

namespace {

constexpr uint8_t kDisseminationId = 4;
char gToken[1];

class Dissemination : public Algorithm {
 public:
  const char* name() const override { return "dissemination"; }
  uint8_t id() const override { return kDisseminationId; }
  bool supports(Collective coll, MemoryKind) const override { return coll == Collective::kBarrier; }
  double costUs(const CollArgs&, int n, const LinkModel& link) const override {
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    return rounds * link.alphaUs;
  }
  Status run(const CollArgs& a, AlgoContext& ctx) override {
    const int n = ctx.nranks, r = ctx.rank;
    ChunkSchedule s;
    for (int d = 1, k = 0; d < n; d <<= 1, ++k) {
      ScheduleSend x;
      x.peer = (r + d) % n;
      x.src = gToken;
      x.dep = k - 1;  // round k starts once round k-1's frame is in
      s.sends.push_back(x);
      ScheduleRecv y;
      y.peer = (r - d + n) % n;
      y.dst = gToken;
      s.recvs.push_back(y);
    }
    return runChunkSchedule(s, a, ctx, kDisseminationId);
  }
};

}  // namespace

std::unique_ptr<Algorithm> makeDisseminationAlgorithm() {
  return std::make_unique<Dissemination>();
}

}  // namespace collie
