// The tuner: its link table and overrides, and which algorithm it picks where the answer is
// not in doubt.
#include "src/core/tuning/tuner.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace collie {
namespace {

TEST(Tuner, OverridesReplaceOnlyTheNamedTransports) {
  auto t = parseTransportLinks("tcp=20:0.125,shm=0.5:10:12");
  ASSERT_TRUE(t.isOk()) << t.status().toString();
  EXPECT_DOUBLE_EQ(t.value().tcp.alphaUs, 20);
  EXPECT_DOUBLE_EQ(t.value().tcp.betaGBps, 0.125);
  EXPECT_DOUBLE_EQ(t.value().shm.reduceGBps, 12);
  TransportLinks def;
  EXPECT_DOUBLE_EQ(t.value().ucx.alphaUs, def.ucx.alphaUs);
  EXPECT_TRUE(parseTransportLinks("").isOk());
}

TEST(Tuner, BadOverridesAreInvalidArguments) {
  for (const char* bad :
       {"tcp", "tcp=1", "tcp=1:2:3:4", "nvlink=1:2", "tcp=-1:2", "tcp=a:b", "shm=1:0"}) {
    auto t = parseTransportLinks(bad);
    ASSERT_FALSE(t.isOk()) << bad;
    EXPECT_EQ(t.status().code(), collieInvalidArgument);
    EXPECT_NE(t.status().message().find("COLLIE_TUNER_LINKS"), std::string::npos);
  }
}

TEST(Tuner, TheSlowestTransportInUseSetsTheModel) {
  TransportLinks t;
  EXPECT_DOUBLE_EQ(linkModelFor(t, false, false).betaGBps, t.shm.betaGBps);
  EXPECT_DOUBLE_EQ(linkModelFor(t, true, false).betaGBps, t.tcp.betaGBps);
  t.ucx.betaGBps = 0.5;
  EXPECT_DOUBLE_EQ(linkModelFor(t, true, true).betaGBps, 0.5);
}

CollArgs call(Collective coll, size_t count) {
  CollArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = collieFloat32;
  return a;
}

TEST(Tuner, SmallMessagesGoToFewRoundsLargeOnesToTheRing) {
  auto algos = buildAlgorithms();
  std::vector<Connection*> none(8, nullptr);  // no peer over shared memory
  AlgoContext ctx;
  ctx.conns = none.data();
  ctx.nranks = 8;
  ctx.link = TransportLinks().tcp;
  Algorithm* small = nullptr;
  Algorithm* large = nullptr;
  ASSERT_TRUE(pickAlgorithm(algos, nullptr, call(Collective::kAllReduce, 2), ctx, &small).isOk());
  ASSERT_TRUE(
      pickAlgorithm(algos, nullptr, call(Collective::kAllReduce, 16 << 20), ctx, &large).isOk());
  EXPECT_STRNE(small->name(), "ring");                // 14 latency-bound steps lose to log2(8) = 3
  EXPECT_STRNE(large->name(), "recursive_doubling");  // whole-buffer exchanges lose
}

// 4 hosts x 2 ranks on a 1 Gbit/s network, shared memory inside each host: the leaders' ring
// moves 2 * 3/4 of the buffer per host where a flat ring moves 2 * 7/8, which pays for the two
// local phases over shm once the network is this much slower than the host.
TEST(Tuner, HostsWithSeveralRanksTakeHierarchicalForLargeMessages) {
  auto algos = buildAlgorithms();
  std::vector<Connection*> none(8, nullptr);
  const int hostOf[8] = {0, 0, 2, 2, 4, 4, 6, 6};
  AlgoContext ctx;
  ctx.conns = none.data();
  ctx.nranks = 8;
  ctx.rank = 3;
  ctx.hostOf = hostOf;
  ctx.link = LinkModel{50.0, 0.125, 5.0};
  ctx.localLink = TransportLinks().shm;
  Algorithm* large = nullptr;
  ASSERT_TRUE(
      pickAlgorithm(algos, nullptr, call(Collective::kAllReduce, 16 << 20), ctx, &large).isOk());
  EXPECT_STREQ(large->name(), "hierarchical");
  // Without the layout it is never the pick.
  ctx.hostOf = nullptr;
  ASSERT_TRUE(
      pickAlgorithm(algos, nullptr, call(Collective::kAllReduce, 16 << 20), ctx, &large).isOk());
  EXPECT_STRNE(large->name(), "hierarchical");
}

// Staging slots in this process, as shared memory offers them: both ranks' in one buffer.
class LocalSlots : public ShmSlots {
 public:
  LocalSlots() : ShmSlots({buf_, buf_}, kSlotBytes) {}

 private:
  static constexpr size_t kSlotBytes = 16 << 10;
  alignas(64) char buf_[kSlots * kSlotBytes];
};

// A peer reached through shared memory, as far as the tuner looks.
class MappedPeer : public Connection {
 public:
  int peer() const override { return 1; }
  Status isend(const void*, size_t, const FrameTag&, Request*) override { return Status::ok(); }
  Status irecv(void*, size_t, const FrameTag&, Request*) override { return Status::ok(); }
  Status progress(bool*) override { return Status::ok(); }
  void appendPollFds(std::vector<struct pollfd>*) const override {}
  void sendAbort(const Status&) override {}
  bool hasPending() const override { return false; }
  ShmSlots* shmSlots() override { return &slots_; }

 private:
  LocalSlots slots_;
};

// Rank 0 of two on one host, its peer reached through shared memory.
struct OneHostPair {
  OneHostPair() {
    ctx.conns = conns;
    ctx.nranks = 2;
    ctx.link = linkModelFor(TransportLinks(), false, false);
  }
  MappedPeer peer;
  Connection* conns[2] = {nullptr, &peer};
  AlgoContext ctx;
};

Algorithm* named(const std::vector<std::unique_ptr<Algorithm>>& algos, const std::string& name) {
  for (auto& a : algos)
    if (a->name() == name) return a.get();
  return nullptr;
}

TEST(Tuner, OneHostOverSharedMemoryTakesShmDirectAtEverySize) {
  auto algos = buildAlgorithms();
  OneHostPair pair;
  const AlgoContext& ctx = pair.ctx;
  for (size_t count : {size_t{2}, size_t{1} << 18, size_t{1} << 24, size_t{1} << 26}) {
    for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kBroadcast}) {
      Algorithm* got = nullptr;
      ASSERT_TRUE(pickAlgorithm(algos, nullptr, call(c, count), ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "shm_direct") << collectiveName(c) << " count " << count;
    }
  }
  // Barriers too: one cache line each way, where the dissemination barrier sends a frame.
  Algorithm* got = nullptr;
  ASSERT_TRUE(pickAlgorithm(algos, nullptr, call(Collective::kBarrier, 0), ctx, &got).isOk());
  EXPECT_STREQ(got->name(), "shm_direct");
}

// The single copy runs only where its set-up at init agreed on it (never here, where none ran),
// and the model keeps calls under COLLIE_SHM_CMA_BYTES on shm_direct's paths. Above it, with a
// kernel copy as fast as memcpy, one copy each way beats staging's two.
TEST(Tuner, SingleCopyNeedsItsSetUpAndLargeCalls) {
  auto algos = buildAlgorithms();
  Algorithm* single = named(algos, "shm_single_copy");
  Algorithm* direct = named(algos, "shm_direct");
  ASSERT_NE(single, nullptr);
  ASSERT_NE(direct, nullptr);
  OneHostPair pair;
  const AlgoContext& ctx = pair.ctx;
  EXPECT_FALSE(single->usable(ctx, call(Collective::kAllReduce, 1 << 24)));
  EXPECT_FALSE(single->usable(ctx, call(Collective::kAllToAll, 1 << 24)));
  EXPECT_FALSE(single->supports(Collective::kReduceScatter, MemoryKind::kHost));
  const CollArgs small = call(Collective::kAllReduce, 1024),
                 large = call(Collective::kAllReduce, 1 << 24);
  EXPECT_GT(single->costUs(small, 2, ctx.link), direct->costUs(small, 2, ctx.link));
  EXPECT_LT(single->costUs(large, 2, ctx.link), direct->costUs(large, 2, ctx.link));
}

// The block moves: under COLLIE_SHM_CMA_BYTES never the model's pick; above it, with a kernel
// copy as fast as memcpy, one copy per block beats every algorithm that sends messages, and
// staging too but for Broadcast, whose root out of place copies as much as staging does (the
// two come within a few microseconds, where the tuner's trials decide). AllToAllv, whose sizes
// the ranks do not share, is left to pairwise.
TEST(Tuner, SingleCopyMovesLargeBlocks) {
  auto algos = buildAlgorithms();
  Algorithm* single = named(algos, "shm_single_copy");
  ASSERT_NE(single, nullptr);
  OneHostPair pair;
  const LinkModel& link = pair.ctx.link;
  for (Collective c : {Collective::kBroadcast, Collective::kAllGather, Collective::kAllToAll,
                       Collective::kGather, Collective::kScatter})
    for (int n : {2, 4}) {
      CollArgs small = call(c, 256), large = call(c, 1 << 24);
      small.root = large.root = 0;
      for (auto& other : algos) {
        if (other.get() == single || !other->supports(c, MemoryKind::kHost)) continue;
        EXPECT_GT(single->costUs(small, n, link), other->costUs(small, n, link))
            << collectiveName(c) << " n=" << n << " against " << other->name();
        const bool tie = c == Collective::kBroadcast && std::string(other->name()) == "shm_direct";
        EXPECT_LT(single->costUs(large, n, link), other->costUs(large, n, link) + (tie ? 10 : 0))
            << collectiveName(c) << " n=" << n << " against " << other->name();
      }
    }
  EXPECT_GT(single->costUs(call(Collective::kAllToAllv, 0), 2, link),
            named(algos, "pairwise")->costUs(call(Collective::kAllToAllv, 0), 2, link));
}

TEST(Tuner, ForcedAlgorithmWinsOrFailsClearlyButNotForBarriers) {
  auto algos = buildAlgorithms();
  Algorithm* ring = nullptr;
  for (auto& a : algos)
    if (std::string(a->name()) == "ring") ring = a.get();
  ASSERT_NE(ring, nullptr);
  std::vector<Connection*> none(4, nullptr);
  AlgoContext ctx;
  ctx.conns = none.data();
  ctx.nranks = 4;
  Algorithm* got = nullptr;
  ASSERT_TRUE(pickAlgorithm(algos, ring, call(Collective::kAllReduce, 1), ctx, &got).isOk());
  EXPECT_EQ(got, ring);
  ASSERT_TRUE(pickAlgorithm(algos, ring, call(Collective::kBarrier, 0), ctx, &got).isOk());
  EXPECT_STREQ(got->name(), "dissemination");
  Algorithm* barrierOnly = got;
  Status s = pickAlgorithm(algos, barrierOnly, call(Collective::kAllGather, 4), ctx, &got);
  EXPECT_EQ(s.code(), collieInvalidArgument);
  EXPECT_NE(s.message().find("dissemination"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("allgather"), std::string::npos) << s.message();
}

// AllToAll: Bruck's log2(n) rounds for small blocks, pairwise exchange for large ones, over the
// network and shared memory alike; two ranks always pairwise (one round either way, without
// Bruck's copies). No other algorithm claims the collectives that move blocks but shm_single_copy
// (where its vote took it), and none takes device memory for them yet.
TEST(Tuner, AllToAllTakesBruckForSmallBlocksAndPairwiseForLarge) {
  auto algos = buildAlgorithms();
  std::vector<Connection*> none(8, nullptr);
  AlgoContext ctx;
  ctx.conns = none.data();
  for (const LinkModel& link : {TransportLinks().tcp, TransportLinks().shm}) {
    ctx.link = link;
    for (int n : {4, 8}) {
      ctx.nranks = n;
      Algorithm* got = nullptr;
      ASSERT_TRUE(pickAlgorithm(algos, nullptr, call(Collective::kAllToAll, 4), ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "bruck") << n;
      ASSERT_TRUE(
          pickAlgorithm(algos, nullptr, call(Collective::kAllToAll, 1 << 18), ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "pairwise") << n;
    }
    ctx.nranks = 2;
    Algorithm* got = nullptr;
    ASSERT_TRUE(pickAlgorithm(algos, nullptr, call(Collective::kAllToAll, 1), ctx, &got).isOk());
    EXPECT_STREQ(got->name(), "pairwise");
  }
  for (auto& a : algos) {
    const std::string name = a->name();
    // shm_single_copy too, where its vote at init took it (not here).
    const bool single = name == "shm_single_copy";
    EXPECT_EQ(a->supports(Collective::kAllToAllv, MemoryKind::kHost), name == "pairwise" || single)
        << name;
    EXPECT_EQ(a->supports(Collective::kAllToAll, MemoryKind::kHost),
              name == "pairwise" || name == "bruck" || single)
        << name;
    for (Collective c : {Collective::kGather, Collective::kScatter})
      EXPECT_EQ(a->supports(c, MemoryKind::kHost), name == "linear" || name == "binomial" || single)
          << name;
    for (Collective c :
         {Collective::kAllToAll, Collective::kAllToAllv, Collective::kGather, Collective::kScatter})
      EXPECT_FALSE(a->supports(c, MemoryKind::kCuda)) << name;
  }
}

// Gather and Scatter: the binomial tree's log2(n) rounds for small blocks, the linear
// algorithm's direct transfers for large ones (the tree stages and rotates every block); two
// ranks always linear.
TEST(Tuner, GatherAndScatterTakeTheTreeForSmallBlocksAndLinearForLarge) {
  auto algos = buildAlgorithms();
  std::vector<Connection*> none(8, nullptr);
  AlgoContext ctx;
  ctx.conns = none.data();
  for (const LinkModel& link : {TransportLinks().tcp, TransportLinks().shm})
    for (Collective c : {Collective::kGather, Collective::kScatter}) {
      ctx.link = link;
      ctx.nranks = 8;
      Algorithm* got = nullptr;
      CollArgs small = call(c, 4), large = call(c, 1 << 18);
      small.root = large.root = 3;
      ASSERT_TRUE(pickAlgorithm(algos, nullptr, small, ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "binomial") << collectiveName(c);
      ASSERT_TRUE(pickAlgorithm(algos, nullptr, large, ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "linear") << collectiveName(c);
      ctx.nranks = 2;
      ASSERT_TRUE(pickAlgorithm(algos, nullptr, small, ctx, &got).isOk());
      EXPECT_STREQ(got->name(), "linear") << collectiveName(c);
    }
}

}  // namespace
}  // namespace collie
