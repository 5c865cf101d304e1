// The device ring's arithmetic and flow control, on the CPU: n ranks with host arrays for their
// buffers and staging slots take enabled actions (send the next message, consume the next
// message) in a random order. Every slot must be free when written and hold the expected
// message when read, the ring must never stall, and the result must be the AllReduce (sum, and
// avg from the one scaling each block gets).
#include "algorithms/patterns/device_ring_pattern.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace collie {
namespace {

double input(int r, size_t i) { return static_cast<double>((r + 1) * 10 + i % 13); }

struct SimRank {
  std::vector<double> send, recv;
  std::vector<std::vector<double>> slots;
  std::vector<size_t> occupant;  // the message in each slot, kNone when free
  size_t sent = 0, consumed = 0;
};

void simulate(int n, size_t count, size_t chunkElems, int nslots, bool avg, bool inPlace,
              unsigned seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count) +
               " chunk=" + std::to_string(chunkElems) + " slots=" + std::to_string(nslots) +
               (avg ? " avg" : " sum") + (inPlace ? " in place" : "") +
               " seed=" + std::to_string(seed));
  const devring::Plan p =
      devring::makePlan(count, n, sizeof(double), chunkElems * sizeof(double), nslots);
  ASSERT_EQ(p.chunkElems, chunkElems);
  std::vector<SimRank> rs(n);
  for (int r = 0; r < n; ++r) {
    rs[r].send.resize(count);
    for (size_t i = 0; i < count; ++i) rs[r].send[i] = input(r, i);
    rs[r].recv.assign(count, -1.0);
    if (inPlace) rs[r].recv = rs[r].send;
    rs[r].slots.assign(nslots, std::vector<double>(chunkElems, -2.0));
    rs[r].occupant.assign(nslots, devring::kNone);
  }
  auto canSend = [&](int r) {
    const SimRank& me = rs[r];
    if (me.sent >= p.messages) return false;
    size_t f = devring::forwardsFrom(p, me.sent);
    size_t s = devring::slotFreedBy(p, me.sent);
    return (f == devring::kNone || me.consumed > f) &&
           (s == devring::kNone || rs[ring::next(r, n)].consumed > s);
  };
  auto canConsume = [&](int r) {
    return rs[r].consumed < p.messages && rs[ring::prev(r, n)].sent > rs[r].consumed;
  };
  std::mt19937 rng(seed);
  for (;;) {
    std::vector<std::pair<int, bool>> enabled;  // (rank, isSend)
    for (int r = 0; r < n; ++r) {
      if (canSend(r)) enabled.push_back({r, true});
      if (canConsume(r)) enabled.push_back({r, false});
    }
    bool done = true;
    for (auto& x : rs) done = done && x.sent == p.messages && x.consumed == p.messages;
    if (done) break;
    ASSERT_FALSE(enabled.empty()) << "the ring stalled";
    auto [r, isSend] = enabled[rng() % enabled.size()];
    SimRank& me = rs[r];
    if (isSend) {
      const size_t m = me.sent++;
      devring::Piece x = devring::sendPiece(p, r, m);
      SimRank& nx = rs[ring::next(r, n)];
      const int slot = devring::slotOf(p, m);
      ASSERT_EQ(nx.occupant[slot], devring::kNone) << "slot " << slot << " overwritten by " << m;
      nx.occupant[slot] = m;
      const std::vector<double>& src = x.fromSend && !inPlace ? me.send : me.recv;
      ASSERT_LE(x.count, chunkElems);
      for (size_t i = 0; i < x.count; ++i) nx.slots[slot][i] = src[x.offset + i];
    } else {
      const size_t m = me.consumed++;
      devring::Piece x = devring::recvPiece(p, r, m);
      const int slot = devring::slotOf(p, m);
      ASSERT_EQ(me.occupant[slot], m);
      me.occupant[slot] = devring::kNone;
      const std::vector<double>& own = inPlace ? me.recv : me.send;
      for (size_t i = 0; i < x.count; ++i) {
        double v = me.slots[slot][i];
        if (x.reduce) v += own[x.offset + i];
        if (x.reduce && x.lastReduce && avg) v /= n;
        me.recv[x.offset + i] = v;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int q = 0; q < n; ++q) want += input(q, i);
      if (avg) want /= n;
      ASSERT_NEAR(rs[r].recv[i], want, 1e-9 * std::fabs(want)) << "rank " << r << " element " << i;
    }
}

TEST(DeviceRingPattern, AnyInterleavingGivesTheAllReduceWithoutOverwritingASlot) {
  for (int n = 2; n <= 6; ++n)
    for (size_t count : {size_t(1), size_t(n - 1), size_t(7), size_t(1003)})
      for (size_t chunk : {size_t(1), size_t(3), size_t(64)})
        for (int slots : {1, 2, 4})
          for (unsigned seed : {1u, 2u}) {
            simulate(n, count, chunk, slots, seed == 2, seed == 1, seed * 31 + n);
            if (HasFatalFailure()) return;
          }
}

TEST(DeviceRingPattern, MessagesAndSlots) {
  devring::Plan p = devring::makePlan(1000, 4, 4, 64, 4);  // blocks of 250, chunks of 16
  EXPECT_EQ(p.chunkElems, 16u);
  EXPECT_EQ(p.chunksPerStep, 16u);
  EXPECT_EQ(p.steps, 6);
  EXPECT_EQ(p.messages, 96u);
  EXPECT_EQ(devring::slotOf(p, 5), 1);
  EXPECT_EQ(devring::forwardsFrom(p, 15), devring::kNone);
  EXPECT_EQ(devring::forwardsFrom(p, 16), 0u);
  EXPECT_EQ(devring::slotFreedBy(p, 3), devring::kNone);
  EXPECT_EQ(devring::slotFreedBy(p, 4), 0u);
  // The last chunk of a block: 250 = 15 * 16 + 10.
  devring::Piece x = devring::sendPiece(p, 0, 15);
  EXPECT_EQ(x.block, 0);
  EXPECT_EQ(x.offset, 240u);
  EXPECT_EQ(x.count, 10u);
  EXPECT_TRUE(x.fromSend);
  // Rank 0 receives block 3 at step 0 and completes block 1 at step 2.
  EXPECT_EQ(devring::recvPiece(p, 0, 0).block, 3);
  devring::Piece last = devring::recvPiece(p, 0, 2 * 16);
  EXPECT_EQ(last.block, 1);
  EXPECT_TRUE(last.reduce && last.lastReduce);
  EXPECT_FALSE(devring::recvPiece(p, 0, 3 * 16).reduce);
}

}  // namespace
}  // namespace collie
