// The order of rhd's schedule: every step after the first can begin sending once the first half
// of the previous step's receives has landed. A rank receives first what it hands on next
// (halving), and sends first what it held before the previous step (doubling).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/chunk_schedule.h"
#include "algorithms/schedules.h"

namespace collie {
namespace {

constexpr size_t kChunk = 1024;
constexpr size_t kChunksPerBlock = 2;

struct Steps {
  std::vector<size_t> recvStart, recvLen;  // per step, in receive order
};

// Steps of a power-of-two n: halving step k moves p >> (k + 1) blocks, doubling step j moves 2^j.
Steps stepsOf(Collective coll, int n) {
  Steps st;
  std::vector<size_t> blocks;
  if (coll != Collective::kAllGather)
    for (int k = n / 2; k >= 1; k /= 2) blocks.push_back(static_cast<size_t>(k));
  if (coll != Collective::kReduceScatter)
    for (int j = 1; j < n; j *= 2) blocks.push_back(static_cast<size_t>(j));
  size_t at = 0;
  for (size_t b : blocks) {
    st.recvStart.push_back(at);
    st.recvLen.push_back(b * kChunksPerBlock);
    at += b * kChunksPerBlock;
  }
  return st;
}

TEST(RhdSchedule, EveryStepCanBeginOnceHalfThePreviousStepHasLanded) {
  for (Collective coll :
       {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
    for (int n : {4, 8, 16}) {
      const size_t blockBytes = kChunk * kChunksPerBlock;
      const size_t count = (coll == Collective::kAllReduce ? blockBytes * n : blockBytes) / 4;
      std::vector<char> in(blockBytes * n), out(blockBytes * n), acc;
      const Steps steps = stepsOf(coll, n);
      for (int r = 0; r < n; ++r) {
        SCOPED_TRACE(std::string(collectiveName(coll)) + " n " + std::to_string(n) + " rank " +
                     std::to_string(r));
        CollArgs a;
        a.coll = coll;
        a.count = count;
        a.dtype = collieFloat32;
        a.send = in.data();
        a.recv = out.data();
        AlgoContext ctx;
        ctx.rank = r;
        ctx.nranks = n;
        ctx.chunkBytes = kChunk;
        ChunkSchedule s;
        ASSERT_TRUE(buildRhdSchedule(a, ctx, &acc, &s).isOk());
        ASSERT_EQ(s.recvs.size(), steps.recvStart.back() + steps.recvLen.back());
        size_t step = 0;
        for (const ScheduleSend& x : s.sends) {
          if (!x.afterSends) continue;  // not the first send of a step
          ++step;
          ASSERT_LT(step, steps.recvStart.size());
          // What it forwards has landed by the middle of the previous step's receives.
          EXPECT_LT(x.dep,
                    static_cast<int>(steps.recvStart[step - 1] + steps.recvLen[step - 1] / 2))
              << "step " << step;
        }
        EXPECT_EQ(step + 1, steps.recvStart.size());
      }
    }
  }
}

}  // namespace
}  // namespace collie
