// Tests of the schedules the simulator runs: they move the bytes the algorithms move, to the
// peers the pattern arithmetic names, and every send has its matching receive.
#include <map>
#include <utility>

#include "algorithms/patterns/recursive_doubling_schedule.h"
#include "algorithms/patterns/ring_schedule.h"
#include "gtest/gtest.h"

namespace collie {
namespace sched {
namespace {

struct Totals {
  uint64_t sent = 0, received = 0, reduced = 0;
  int sends = 0, recvs = 0, waits = 0;
};

Totals totals(const Schedule& s) {
  Totals t;
  for (const Op& op : s.ops()) {
    if (op.kind == OpKind::kSend) t.sent += op.bytes, ++t.sends;
    if (op.kind == OpKind::kRecv) t.received += op.bytes, ++t.recvs;
    if (op.kind == OpKind::kRecv && op.reduce) t.reduced += op.bytes;
    if (op.kind == OpKind::kWait) ++t.waits;
  }
  return t;
}

// Bytes and message counts per (src, dst) must agree between senders and receivers.
void expectMatched(const std::vector<Schedule>& ranks) {
  std::map<std::pair<int, int>, std::pair<uint64_t, int>> sent, recv;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const Op& op : ranks[r].ops()) {
      if (op.kind == OpKind::kSend) {
        auto& e = sent[{static_cast<int>(r), op.peer}];
        e.first += op.bytes, ++e.second;
      } else if (op.kind == OpKind::kRecv) {
        auto& e = recv[{op.peer, static_cast<int>(r)}];
        e.first += op.bytes, ++e.second;
      }
    }
  }
  EXPECT_EQ(sent, recv);
}

TEST(RingSchedule, EachRankSendsTwiceAllButOneBlock) {
  for (int n : {2, 3, 5, 8}) {
    const size_t count = 1000003;  // not a multiple of n or of the chunk
    std::vector<Schedule> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(ringAllReduce(r, n, count, 4, 64 << 10));
    expectMatched(ranks);
    uint64_t all = 0;
    for (int r = 0; r < n; ++r) {
      Totals t = totals(ranks[r]);
      all += t.sent;
      for (const Op& op : ranks[r].ops()) {
        if (op.kind == OpKind::kSend) {
          EXPECT_EQ(op.peer, (r + 1) % n);
        }
      }
      // Reduce-scatter receives n-1 blocks and reduces them all.
      EXPECT_GT(t.reduced, 0u);
      EXPECT_LT(t.reduced, t.received);
    }
    // Over all ranks: every block travels 2(n-1) times.
    EXPECT_EQ(all, 2ull * (n - 1) * count * 4) << n;
  }
}

TEST(RingSchedule, EmptyBlocksStillSendOneFrame) {
  Schedule s = ringAllReduce(0, 4, 2, 4, 1024);  // 2 elements over 4 blocks
  Totals t = totals(s);
  EXPECT_EQ(t.sends, 6);
  EXPECT_EQ(t.recvs, 6);
  EXPECT_EQ(t.sent, 4u * 3);  // blocks 0, 3, 2, 1, 0, 3: three of them hold an element
}

TEST(RingSchedule, NothingForOneRankOrNoData) {
  EXPECT_EQ(ringAllReduce(0, 1, 100, 4, 1024).size(), 0u);
  EXPECT_EQ(ringAllReduce(0, 4, 0, 4, 1024).size(), 0u);
}

TEST(RecursiveDoublingSchedule, PowersOfTwoExchangeLogNTimes) {
  const int n = 8;
  std::vector<Schedule> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(recursiveDoublingAllReduce(r, n, 4096));
  expectMatched(ranks);
  for (int r = 0; r < n; ++r) {
    Totals t = totals(ranks[r]);
    EXPECT_EQ(t.sends, 3);
    EXPECT_EQ(t.sent, 3u * 4096);
    int k = 0;
    for (const Op& op : ranks[r].ops()) {
      if (op.kind == OpKind::kSend) {
        EXPECT_EQ(op.peer, r ^ (1 << k++));
      }
    }
  }
}

TEST(RecursiveDoublingSchedule, FoldForNonPowersOfTwo) {
  for (int n : {3, 5, 6, 7}) {
    std::vector<Schedule> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(recursiveDoublingAllReduce(r, n, 64));
    expectMatched(ranks);
    // Even ranks below 2*rem only fold and unfold.
    int rem = n - (n >= 4 ? 4 : 2);
    for (int r = 0; r < 2 * rem; r += 2) {
      Totals t = totals(ranks[r]);
      EXPECT_EQ(t.sends, 1);
      EXPECT_EQ(t.recvs, 1);
      EXPECT_EQ(t.reduced, 0u);
    }
  }
}

}  // namespace
}  // namespace sched
}  // namespace collie
