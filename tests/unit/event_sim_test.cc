// Tests of the schedule simulator against closed-form alpha-beta times: one message, a shared
// NIC, the shm tier, reductions, the ring and recursive doubling, and broken schedules.
#include "sim/event_sim.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/chunk_schedule_sim.h"
#include "sim/predict.h"

namespace collie {
namespace sim {
namespace {

using sched::Schedule;

constexpr double kAlpha = 5.0;  // us
constexpr double kGBps = 1.0;   // 1e3 bytes per us
constexpr double kBpus = 1e3;   // kGBps in bytes per us

Links netOnly() {
  Links l;
  l.net = {kAlpha, kGBps};
  l.shm = {0, 0};
  return l;
}

TEST(EventSim, OneMessageIsAlphaPlusBytesOverBeta) {
  std::vector<Schedule> s(2);
  s[0].send(1, 1000000);
  s[1].recv(0, 1000000, false);
  SimResult r = simulate(s, Topology{2, 2}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, kAlpha + 1000000 / kBpus);
}

TEST(EventSim, TwoRanksOfAHostShareItsNic) {
  // Ranks 0, 1 on host 0 send to ranks 2, 3 on host 1 at once: each gets half of the NIC.
  std::vector<Schedule> s(4);
  s[0].send(2, 1000000);
  s[1].send(3, 1000000);
  s[2].recv(0, 1000000, false);
  s[3].recv(1, 1000000, false);
  SimResult r = simulate(s, Topology{4, 2}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, kAlpha + 2 * 1000000 / kBpus);
}

TEST(EventSim, AFlowSpeedsUpWhenItsNeighbourEnds) {
  // 1 MB and 3 MB through one NIC: the small one ends at alpha + 2 MB/beta, the big one then
  // has the NIC to itself for its last 2 MB.
  std::vector<Schedule> s(4);
  s[0].send(2, 1000000);
  s[1].send(3, 3000000);
  s[2].recv(0, 1000000, false);
  s[3].recv(1, 3000000, false);
  SimResult r = simulate(s, Topology{4, 2}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NEAR(r.timeUs, kAlpha + 4000000 / kBpus, 1e-6);
}

TEST(EventSim, FullDuplexLinksDoNotShareDirections) {
  std::vector<Schedule> s(2);
  for (int r = 0; r < 2; ++r) {
    s[r].recv(1 - r, 1000000, false);
    s[r].send(1 - r, 1000000);
  }
  SimResult r = simulate(s, Topology{2, 2}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, kAlpha + 1000000 / kBpus);
}

TEST(EventSim, RanksOfOneHostUseTheShmTier) {
  Links l = netOnly();
  l.shm = {0.5, 10.0};
  std::vector<Schedule> s(2);
  s[0].send(1, 1000000);
  s[1].recv(0, 1000000, false);
  SimResult r = simulate(s, Topology{2, 1}, l);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, 0.5 + 1000000 / 10e3);
}

TEST(EventSim, LocalCopiesShareARanksPortBothWays) {
  // Inside a host the CPU copies: an exchange costs each rank two copies' worth.
  Links l = netOnly();
  l.shm = {0.5, 10.0};
  std::vector<Schedule> s(2);
  for (int r = 0; r < 2; ++r) {
    s[r].recv(1 - r, 1000000, false);
    s[r].send(1 - r, 1000000);
  }
  SimResult r = simulate(s, Topology{2, 1}, l);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, 0.5 + 2 * 1000000 / 10e3);
}

TEST(EventSim, FewerCoresThanRanksSlowLocalCopiesAndReductions) {
  // Two disjoint one-way copies on one host: independent with a core per rank. Each keeps two
  // cores copying (its sender's and its receiver's), so on two cores they run at half speed,
  // on one core at a quarter; at one core per flow (copy ports that also hold waiting), at half.
  Links l = netOnly();
  l.shm = {0.5, 10.0};
  std::vector<Schedule> s(4);
  s[0].send(1, 1000000);
  s[1].recv(0, 1000000, false);
  s[2].send(3, 1000000);
  s[3].recv(2, 1000000, false);
  l.cores = 4;
  EXPECT_DOUBLE_EQ(simulate(s, Topology{4, 1}, l).timeUs, 0.5 + 1000000 / 10e3);
  l.cores = 2;
  EXPECT_DOUBLE_EQ(simulate(s, Topology{4, 1}, l).timeUs, 0.5 + 2 * 1000000 / 10e3);
  l.cores = 1;
  EXPECT_DOUBLE_EQ(simulate(s, Topology{4, 1}, l).timeUs, 0.5 + 4 * 1000000 / 10e3);
  l.flowCores = 1;
  EXPECT_DOUBLE_EQ(simulate(s, Topology{4, 1}, l).timeUs, 0.5 + 2 * 1000000 / 10e3);
  l.flowCores = 2;
  // Reductions share the cores too. Rank 1 reduces while ranks 2 and 3 still copy (3 MB): 3
  // busy ranks on 2 cores go at the pace of the pair on one of them, 1.5 cores' worth, half a
  // core each for the reduction and 3/4 of the copy rate for the copy, until the copy ends and
  // the reduction has both. Alone, a reduction has a whole core.
  std::vector<Schedule> t(4);
  t[0].send(1, 1000000);
  t[1].recv(0, 1000000, true);
  t[2].send(3, 3000000);
  t[3].recv(2, 3000000, false);
  l.cores = 2;
  l.reduceGBps = 1.0;
  const double bothCopies = 1000000 / (0.5 * 10e3);      // 200 us: 1 MB of each, 4 ranks busy
  const double copyAndReduce = 2000000 / (0.75 * 10e3);  // the copy's last 2 MB, 3 ranks busy
  const double reducedMeanwhile = copyAndReduce * 0.5 * 1e3;
  EXPECT_NEAR(simulate(t, Topology{4, 1}, l).timeUs,
              0.5 + bothCopies + copyAndReduce + (1000000 - reducedMeanwhile) / 1e3, 1e-6);
  t[2] = Schedule();
  t[3] = Schedule();
  EXPECT_DOUBLE_EQ(simulate(t, Topology{4, 1}, l).timeUs, 0.5 + 1000000 / 10e3 + 1000000 / 1e3);
}

TEST(EventSim, AnOversubscribedHostGoesAtThePaceOfItsFullestCore) {
  // n ranks on 2 cores, each sending 1 MB to the next and receiving 1 MB from the one before.
  // 4 busy ranks share the cores 2 and 2: both cores' worth, a quarter of the copy rate per
  // flow (each keeps 2 cores busy). 3 share them 2 and 1, and ranks that wait on each other go
  // at the pace of the pair: 1.5 cores' worth, so the same quarter (not a third). Switching
  // between ranks takes its share on top, only while busy ranks outnumber cores; a rank that
  // waits sleeps, so a lone copy on a 3-rank host has its 2 cores.
  Links l = netOnly();
  l.shm = {0.5, 10.0};
  l.cores = 2;
  auto cycle = [&](int n) {
    std::vector<Schedule> s(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      s[static_cast<size_t>(r)].send((r + 1) % n, 1000000);
      s[static_cast<size_t>(r)].recv((r + n - 1) % n, 1000000, false);
    }
    return simulate(s, Topology{n, 1}, l).timeUs;
  };
  auto loneCopyOf3 = [&]() {
    std::vector<Schedule> s(3);
    s[0].send(1, 1000000);
    s[1].recv(0, 1000000, false);
    return simulate(s, Topology{3, 1}, l).timeUs;
  };
  EXPECT_DOUBLE_EQ(cycle(2), 0.5 + 1000000 / (0.5 * 10e3));
  EXPECT_DOUBLE_EQ(cycle(4), 0.5 + 1000000 / (0.25 * 10e3));
  EXPECT_DOUBLE_EQ(cycle(3), 0.5 + 1000000 / (0.25 * 10e3));
  EXPECT_DOUBLE_EQ(loneCopyOf3(), 0.5 + 1000000 / 10e3);
  l.switchLoss = 0.5;
  EXPECT_DOUBLE_EQ(cycle(2), 0.5 + 1000000 / (0.5 * 10e3));
  EXPECT_DOUBLE_EQ(cycle(4), 0.5 + 1000000 / (0.125 * 10e3));
  EXPECT_DOUBLE_EQ(cycle(3), 0.5 + 1000000 / (0.125 * 10e3));
  EXPECT_DOUBLE_EQ(loneCopyOf3(), 0.5 + 1000000 / 10e3);
}

TEST(EventSim, AWorkingSetBeyondTheCacheSlowsLocalCopiesAndReductions) {
  Links l = netOnly();
  l.shm = {0.5, 10.0};
  l.reduceGBps = 1.0;
  l.cacheBytes = 4e6;
  l.memSlowdown = 3;
  EXPECT_DOUBLE_EQ(memoryFactor(l, 2e6), 1.0);
  EXPECT_DOUBLE_EQ(memoryFactor(l, 4e6), 1.0);
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6), 2.0);  // half of it from memory
  EXPECT_DOUBLE_EQ(memoryFactor(l, 16e6), 2.5);
  std::vector<Schedule> s(2);
  s[0].send(1, 1000000);
  s[1].recv(0, 1000000, true);
  const double inCache = 0.5 + 1000000 / 10e3 + 1000000 / 1e3;
  EXPECT_DOUBLE_EQ(simulate(s, Topology{2, 1}, l, 4e6).timeUs, inCache);
  EXPECT_DOUBLE_EQ(simulate(s, Topology{2, 1}, l, 8e6).timeUs,
                   0.5 + 2 * 1000000 / 10e3 + 2 * 1000000 / 1e3);
  // Across hosts only the reduction slows: the network is not the memory.
  EXPECT_DOUBLE_EQ(simulate(s, Topology{2, 2}, l, 8e6).timeUs,
                   kAlpha + 1000000 / kBpus + 2 * 1000000 / 1e3);
  // A received message larger than the cache is read back from memory by its reduction: an
  // 8 MB one reduces 2x slower (half of it fits) in a call whose working set the cache holds,
  // and its copy does not slow.
  std::vector<Schedule> big(2);
  big[0].send(1, 8000000);
  big[1].recv(0, 8000000, true);
  EXPECT_DOUBLE_EQ(simulate(big, Topology{2, 1}, l, 4e6).timeUs,
                   0.5 + 8000000 / 10e3 + 2 * 8000000 / 1e3);
  // predict() counts one rank's input and output: a ring of 2 MB works on 4 MB per rank,
  // which this cache holds, on 2 ranks as on 8; of 4 MB on 8 MB, half of which it does not.
  l.reduceGBps = 0;
  Links noTier = l;
  noTier.cacheBytes = 0;
  const SimAlgorithm* ring = findSimAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  for (int n : {2, 8}) {
    SCOPED_TRACE(n);
    EXPECT_DOUBLE_EQ(
        predict(*ring, Collective::kAllReduce, 2000000, Topology{n, 1}, l).timeUs,
        predict(*ring, Collective::kAllReduce, 2000000, Topology{n, 1}, noTier).timeUs);
    EXPECT_GT(predict(*ring, Collective::kAllReduce, 4000000, Topology{n, 1}, l).timeUs,
              1.5 * predict(*ring, Collective::kAllReduce, 4000000, Topology{n, 1}, noTier).timeUs);
  }
}

TEST(EventSim, PastTheOwnCacheTheSharedCacheServesWhatTheHostsSetLeavesRoom) {
  Links l = netOnly();
  l.cacheBytes = 4e6;
  l.memSlowdown = 3;
  l.sharedCacheBytes = 32e6;
  l.sharedSlowdown = 1.5;
  // Half of an 8 MB set is past the own cache. 2 ranks' 16 MB fit the shared cache: that half
  // costs 1.5x. 8 ranks' 64 MB do not: half of that half from memory (3x), half shared.
  EXPECT_DOUBLE_EQ(memoryFactor(l, 4e6, 8), 1.0);
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6, 2), 1.0 + 0.5 * 0.5);
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6, 4), 1.0 + 0.5 * 0.5);  // 32 MB: just fits
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6, 8), 1.0 + 0.5 * (0.5 * 1.5 + 0.5 * 3 - 1));
  // Without a shared cache all of it comes from memory, however few the ranks.
  l.sharedCacheBytes = 0;
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6, 2), 2.0);
  EXPECT_DOUBLE_EQ(memoryFactor(l, 8e6, 8), 2.0);
}

TEST(EventSim, RecursiveDoublingSlowsOnceTheHostsRanksOutgrowTheSharedCacheAndTheRingDoesNot) {
  // Shared-memory rings of 1 MB: the ring streams chunks through them, its working set stays
  // 2 * (512 KB + 1 MB) whatever the size; recursive doubling's is its input and output.
  Links l;
  l.net = {5.0, 1.0};
  l.shm = {0.5, 10.0};
  l.cacheBytes = 1e6;
  l.memSlowdown = 3;
  l.sharedCacheBytes = 32e6;
  l.sharedSlowdown = 1.5;
  l.localBufferBytes = 1 << 20;
  const SimAlgorithm* ring = findSimAlgorithm("ring");
  const SimAlgorithm* rd = findSimAlgorithm("recursive_doubling");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(rd, nullptr);
  const PredictOptions o;
  const double inFlight = 2.0 * (o.chunkBytes + (1 << 20));
  EXPECT_DOUBLE_EQ(workingSetBytes(*ring, 64 << 20, l, o), inFlight);
  EXPECT_DOUBLE_EQ(workingSetBytes(*ring, 256 << 10, l, o), 2.0 * (256 << 10));
  EXPECT_DOUBLE_EQ(workingSetBytes(*rd, 64 << 20, l, o), 2.0 * (64 << 20));
  Links sockets = l;  // loopback sockets buffer a message whole
  sockets.localBufferBytes = 0;
  EXPECT_DOUBLE_EQ(workingSetBytes(*ring, 64 << 20, sockets, o), 2.0 * (64 << 20));
  // Time per byte from 4 MB to 16 MB, 2 ranks: 2 * 16 MB fits the shared cache, 2 * 32 MB does
  // not; recursive doubling slows, the ring does not.
  auto perByte = [&](const SimAlgorithm& a, size_t bytes) {
    SimResult r = predict(a, Collective::kAllReduce, bytes, Topology{2, 1}, l);
    EXPECT_TRUE(r.ok) << r.error;
    return r.timeUs / static_cast<double>(bytes);
  };
  EXPECT_NEAR(perByte(*ring, 16 << 20) / perByte(*ring, 4 << 20), 1.0, 0.01);
  EXPECT_GT(perByte(*rd, 16 << 20) / perByte(*rd, 4 << 20), 1.2);
  // And the same size on more ranks of the host: 8 ranks' 8 MB sets are past it.
  SimResult two = predict(*rd, Collective::kAllReduce, 4 << 20, Topology{2, 1}, l);
  SimResult eight = predict(*rd, Collective::kAllReduce, 4 << 20, Topology{8, 1}, l);
  Links roomy = l;
  roomy.sharedCacheBytes = 1e12;
  SimResult eightRoomy = predict(*rd, Collective::kAllReduce, 4 << 20, Topology{8, 1}, roomy);
  ASSERT_TRUE(two.ok && eight.ok && eightRoomy.ok);
  EXPECT_DOUBLE_EQ(two.timeUs,
                   predict(*rd, Collective::kAllReduce, 4 << 20, Topology{2, 1}, roomy).timeUs);
  EXPECT_GT(eight.timeUs, 1.2 * eightRoomy.timeUs);
}

TEST(EventSim, ReductionsQueueOnTheReceiver) {
  Links l = netOnly();
  l.reduceGBps = 2.0;
  std::vector<Schedule> s(2);
  s[0].send(1, 1000000);
  s[1].recv(0, 1000000, true);
  SimResult r = simulate(s, Topology{2, 2}, l);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, kAlpha + 1000000 / kBpus + 1000000 / 2e3);
}

TEST(EventSim, AWaitHoldsTheRank) {
  // Rank 1 forwards to rank 2 only what it received from rank 0: two messages back to back.
  std::vector<Schedule> s(3);
  s[0].send(1, 500000);
  s[1].wait(s[1].recv(0, 500000, false));
  s[1].send(2, 500000);
  s[2].recv(1, 500000, false);
  SimResult r = simulate(s, Topology{3, 3}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_DOUBLE_EQ(r.timeUs, 2 * (kAlpha + 500000 / kBpus));
}

TEST(EventSim, TwoRankRingIsTheAlphaBetaFormula) {
  // One chunk per block: two steps of alpha + (B/2)/beta.
  const size_t bytes = 1 << 20;
  PredictOptions o;
  o.chunkBytes = bytes;
  double t = predictUs("ring", Collective::kAllReduce, bytes, Topology{2, 2}, netOnly(), o);
  EXPECT_DOUBLE_EQ(t, 2 * (kAlpha + (bytes / 2.0) / kBpus));
}

TEST(EventSim, RingOfEightIsTheAlphaBetaFormula) {
  const size_t bytes = 8 << 20;
  PredictOptions o;
  o.chunkBytes = bytes;
  double t = predictUs("ring", Collective::kAllReduce, bytes, Topology{8, 8}, netOnly(), o);
  EXPECT_NEAR(t, 2 * 7 * (kAlpha + (bytes / 8.0) / kBpus), 1e-6);
}

TEST(EventSim, PipelinedRingBeatsTheUnchunkedOneAndNotTheBandwidthBound) {
  const size_t bytes = 8 << 20;
  PredictOptions whole, chunked;
  whole.chunkBytes = bytes;
  chunked.chunkBytes = 64 << 10;
  Links l = netOnly();
  l.reduceGBps = 4.0;  // reductions that pipelining can hide
  double tw = predictUs("ring", Collective::kAllReduce, bytes, Topology{4, 4}, l, whole);
  double tc = predictUs("ring", Collective::kAllReduce, bytes, Topology{4, 4}, l, chunked);
  EXPECT_LT(tc, tw);
  EXPECT_GT(tc, 2.0 * 3 / 4 * bytes / kBpus);
}

TEST(EventSim, RhdOfEightReachesTheBandwidthBound) {
  // Halving and doubling move 2 * 7/8 of the buffer over each NIC. A step's sends wait for the
  // previous step's to finish: sharing the NIC with them would delay what that step's partner
  // waits for (without the rule the time is ~28% over the bound).
  const size_t bytes = 64 << 20;
  PredictOptions o;
  o.chunkBytes = 512 << 10;
  double t = predictUs("rhd", Collective::kAllReduce, bytes, Topology{8, 8}, netOnly(), o);
  const double bound = 2 * 7.0 / 8 * bytes / kBpus;
  EXPECT_GE(t, bound);
  EXPECT_LT(t, 1.02 * bound);
}

TEST(EventSim, RecursiveDoublingStepsAndFold) {
  const size_t bytes = 1 << 20;
  const double step = kAlpha + bytes / kBpus;
  double t4 =
      predictUs("recursive_doubling", Collective::kAllReduce, bytes, Topology{4, 4}, netOnly());
  EXPECT_NEAR(t4, 2 * step, 1e-6);
  // 6 ranks: fold (0 -> 1, 2 -> 3), two doubling steps among 1, 3, 4, 5, unfold. Ranks 4 and 5
  // fold nothing, so their first exchange is done when 1 and 3 start theirs, and 4's second
  // message reaches rank 1 while 3's is still coming in: rank 1's NIC carries 2B at once.
  double t6 =
      predictUs("recursive_doubling", Collective::kAllReduce, bytes, Topology{6, 6}, netOnly());
  EXPECT_NEAR(t6, 4 * kAlpha + 5 * (bytes / kBpus), 1e-6);
}

TEST(EventSim, RingOnePerHostAcrossHostsSharesNoNic) {
  // 8 ranks on 2 hosts: only ranks 3 and 7 cross hosts, one flow per NIC direction. They get
  // what they forward over the fast shm tier, so their sends queue behind each other on the
  // NIC and only the first message's latency shows: alpha + 14 steps of B/8 at beta.
  Links l = netOnly();
  l.shm = {kAlpha, 100.0};
  const size_t bytes = 8 << 20;
  PredictOptions o;
  o.chunkBytes = bytes;
  double t = predictUs("ring", Collective::kAllReduce, bytes, Topology{8, 2}, l, o);
  EXPECT_NEAR(t, kAlpha + 2 * 7 * (bytes / 8.0) / kBpus, 1e-6);
}

TEST(EventSim, UnmatchedScheduleIsAnError) {
  std::vector<Schedule> s(2);
  s[0].wait(s[0].recv(1, 8, false));
  SimResult r = simulate(s, Topology{2, 2}, netOnly());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("rank 0"), std::string::npos) << r.error;
}

TEST(EventSim, BadPeerIsAnError) {
  std::vector<Schedule> s(2);
  s[0].send(5, 8);
  EXPECT_FALSE(simulate(s, Topology{2, 2}, netOnly()).ok);
  EXPECT_FALSE(simulate(s, Topology{3, 2}, netOnly()).ok);  // 2 schedules for 3 ranks
}

TEST(EventSim, UnknownAlgorithmOrCollective) {
  EXPECT_LT(predictUs("nope", Collective::kAllReduce, 8, Topology{2, 2}, netOnly()), 0);
  EXPECT_LT(predictUs("recursive_doubling", Collective::kBroadcast, 8, Topology{2, 2}, netOnly()),
            0);
  EXPECT_EQ(predictUs("ring", Collective::kAllReduce, 8, Topology{1, 1}, netOnly()), 0);
}

TEST(EventSim, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busGBps(Collective::kAllReduce, 1000000, 4, 1000.0), 1.0 * 2 * 3 / 4);
  EXPECT_DOUBLE_EQ(busGBps(Collective::kAllGather, 1000000, 4, 1000.0), 1.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(busGBps(Collective::kBroadcast, 1000000, 4, 1000.0), 1.0);
}

// The executor's ring schedules of the other collectives, one chunk per block.
TEST(EventSim, RingReduceScatterAndAllGatherAreNMinusOneSteps) {
  const size_t bytes = 4 << 20;
  PredictOptions o;
  o.chunkBytes = bytes;
  const double step = kAlpha + (bytes / 4.0) / kBpus;
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather}) {
    double t = predictUs("ring", c, bytes, Topology{4, 4}, netOnly(), o);
    EXPECT_NEAR(t, 3 * step, 1e-6) << collectiveName(c);
  }
}

TEST(EventSim, RingBroadcastIsAPipelinedChain) {
  // 4 chunks down a chain of 4 ranks: the last chunk leaves the root after 4 chunk times and
  // needs 2 more hops; the latency of the root's later chunks hides behind the first ones.
  const size_t bytes = 4 << 20, chunk = 1 << 20;
  PredictOptions o;
  o.chunkBytes = chunk;
  double t = predictUs("ring", Collective::kBroadcast, bytes, Topology{4, 4}, netOnly(), o);
  EXPECT_NEAR(t, kAlpha + 4 * (chunk / kBpus) + 2 * (kAlpha + chunk / kBpus), 1e-6);
  double r = predictUs("ring", Collective::kReduce, bytes, Topology{4, 4}, netOnly(), o);
  EXPECT_NEAR(r, t, 1e-6);  // the same chain the other way, reductions free
}

// Every simulated algorithm runs every collective it has a schedule for, on one host or
// several, with ranks that are not powers of two.
TEST(EventSim, EverySimulatedScheduleCompletes) {
  const Collective colls[] = {Collective::kAllReduce, Collective::kReduceScatter,
                              Collective::kAllGather, Collective::kBroadcast, Collective::kReduce};
  PredictOptions o;
  o.chunkBytes = 64 << 10;
  Links l = netOnly();
  l.shm = {1.0, 10.0};
  for (const SimAlgorithm& a : simAlgorithms())
    for (Collective c : colls) {
      if (!a.supports(c)) continue;
      for (int n : {2, 3, 5, 8})
        for (int hosts : {1, 2, n})
          for (size_t bytes : {size_t{8} * 8, size_t{1} << 20}) {
            if (std::string(a.name) == "hierarchical" && (hosts == 1 || hosts == n)) continue;
            SimResult r = predict(a, c, bytes, Topology{n, hosts}, l, o);
            EXPECT_TRUE(r.ok && r.timeUs > 0)
                << a.name << " " << collectiveName(c) << " n=" << n << " hosts=" << hosts
                << " bytes=" << bytes << ": " << r.error;
          }
    }
}

TEST(EventSim, TreeBroadcastOnTwoRanksIsOneMessagePerChunk) {
  const size_t bytes = 1 << 20;
  PredictOptions o;
  o.chunkBytes = bytes;
  double t = predictUs("tree", Collective::kBroadcast, bytes, Topology{2, 2}, netOnly(), o);
  EXPECT_NEAR(t, kAlpha + bytes / kBpus, 1e-6);
}

TEST(EventSim, PhasesRunOneAfterTheOther) {
  // Two phases of one message each, 0 -> 1 then 1 -> 0: the second starts when the first ends.
  Schedule p0, p1;
  p0.send(1, 1000);
  p1.recv(0, 1000, false);
  std::vector<Schedule> s(2);
  appendPhase(p0, {0, 1}, &s[0]);
  appendPhase(p1, {0, 1}, &s[1]);
  Schedule q0, q1;
  q0.recv(1, 1000, false);
  q1.send(0, 1000);
  appendPhase(q0, {0, 1}, &s[0]);
  appendPhase(q1, {0, 1}, &s[1]);
  SimResult r = simulate(s, Topology{2, 2}, netOnly());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_NEAR(r.timeUs, 2 * (kAlpha + 1000 / kBpus), 1e-6);
}

TEST(EventSim, HierarchicalLargeRunsTheLeadersRingAndBeatsTheFlatTree) {
  // 8 ranks on 4 hosts, a fast shm tier: at 16 MiB the leaders' ring carries 2 * 3/4 of the
  // buffer over each NIC, so the time is at least that, and well under a flat tree's.
  Links l = netOnly();
  l.shm = {1.0, 50.0};
  const size_t bytes = 16 << 20;
  const Topology topo{8, 4};
  double h = predictUs("hierarchical", Collective::kAllReduce, bytes, topo, l);
  double tr = predictUs("tree", Collective::kAllReduce, bytes, topo, l);
  ASSERT_GT(h, 0);
  EXPECT_GE(h, 2 * 0.75 * bytes / kBpus);
  EXPECT_LT(h, tr);
}

}  // namespace
}  // namespace sim
}  // namespace collie
