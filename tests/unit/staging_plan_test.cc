// The staging plan of device collectives, on the CPU: n ranks are simulated in one process,
// each with its user buffers and two staging slots. Each chunk's copies are applied in the
// order the copy stream runs them (chunk k+1 comes down before chunk k goes up), the host
// collective is computed between the ranks' staging slots, and every user recv is checked
// against the collective computed directly from the inputs.
#include "src/core/device/staging_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace collie {
namespace {

using Buf = std::vector<int32_t>;

void apply(const Copy2D& c, const void* src, void* dst) {
  if (!c.active) return;
  ASSERT_LE(c.width, c.srcPitch);
  ASSERT_LE(c.width, c.dstPitch);
  for (size_t row = 0; row < c.height; ++row)
    memcpy(static_cast<char*>(dst) + c.dstOffset + row * c.dstPitch,
           static_cast<const char*>(src) + c.srcOffset + row * c.srcPitch, c.width);
}

int32_t input(int r, size_t i) { return static_cast<int32_t>(1000 * (r + 1) + i % 997); }

struct Rank {
  Buf send, recv;
  const int32_t* sendPtr = nullptr;  // aliases recv when in place
  int32_t* recvPtr = nullptr;
  Buf slot[2];
};

// The host collective on each rank's staging slot (sum), from its send to its recv offset.
void hostCollective(const CollArgs& a, const std::vector<StagedChunk>& ch, std::vector<Rank>& rs,
                    int slot) {
  const int n = static_cast<int>(rs.size());
  const size_t p = ch[0].hostCount;
  auto at = [&](int r, size_t off) { return rs[r].slot[slot].data() + off / sizeof(int32_t); };
  switch (a.coll) {
    case Collective::kAllGather: {
      std::vector<Buf> parts(n);
      for (int q = 0; q < n; ++q) parts[q].assign(at(q, ch[q].hostSend), at(q, ch[q].hostSend) + p);
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q) memcpy(at(r, ch[r].hostRecv) + q * p, parts[q].data(), p * 4);
      break;
    }
    case Collective::kReduceScatter: {
      std::vector<Buf> out(n, Buf(p, 0));
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < p; ++i) out[r][i] += at(q, ch[q].hostSend)[r * p + i];
      for (int r = 0; r < n; ++r) memcpy(at(r, ch[r].hostRecv), out[r].data(), p * 4);
      break;
    }
    case Collective::kBroadcast: {
      Buf v(at(a.root, ch[a.root].hostSend), at(a.root, ch[a.root].hostSend) + p);
      for (int r = 0; r < n; ++r) {
        if (r != a.root) {
          ASSERT_EQ(ch[r].hostSend, kNoBuffer);
        }
        memcpy(at(r, ch[r].hostRecv), v.data(), p * 4);
      }
      break;
    }
    default: {  // allreduce, reduce
      Buf sum(p, 0);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < p; ++i) sum[i] += at(q, ch[q].hostSend)[i];
      for (int r = 0; r < n; ++r) {
        if (a.coll == Collective::kReduce && r != a.root) {
          ASSERT_EQ(ch[r].hostRecv, kNoBuffer);
          continue;
        }
        memcpy(at(r, ch[r].hostRecv), sum.data(), p * 4);
      }
    }
  }
}

// The expected recv of rank r.
Buf expected(const CollArgs& a, int n, int r) {
  const size_t c = a.count;
  Buf want;
  switch (a.coll) {
    case Collective::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < c; ++i) want.push_back(input(q, i));
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < c; ++i) {
        int32_t s = 0;
        for (int q = 0; q < n; ++q) s += input(q, r * c + i);
        want.push_back(s);
      }
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < c; ++i) want.push_back(input(a.root, i));
      break;
    default:
      for (size_t i = 0; i < c; ++i) {
        int32_t s = 0;
        for (int q = 0; q < n; ++q) s += input(q, i);
        want.push_back(s);
      }
  }
  return want;
}

void check(Collective coll, int n, size_t count, size_t stagingBytes, bool inPlace, int root) {
  SCOPED_TRACE(std::string(collectiveName(coll)) + " n=" + std::to_string(n) +
               " count=" + std::to_string(count) + " staging=" + std::to_string(stagingBytes) +
               (inPlace ? " in place" : "") + " root=" + std::to_string(root));
  CollArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = collieInt32;
  a.root = root;
  const size_t all = count * static_cast<size_t>(n);
  const size_t sendN = coll == Collective::kReduceScatter ? all : count;
  const size_t recvN = coll == Collective::kAllGather ? all : count;
  std::vector<Rank> rs(n);
  for (int r = 0; r < n; ++r) {
    Rank& k = rs[r];
    k.recv.assign(std::max(recvN, sendN), -7);
    k.send.resize(sendN);
    for (size_t i = 0; i < sendN; ++i) k.send[i] = input(r, i);
    k.recvPtr = k.recv.data();
    k.sendPtr = k.send.data();
    if (inPlace) {
      // The in-place relation of each collective.
      if (coll == Collective::kAllGather) {
        memcpy(k.recv.data() + r * count, k.send.data(), count * 4);
        k.sendPtr = k.recv.data() + r * count;
      } else if (coll == Collective::kReduceScatter) {
        memcpy(k.recv.data(), k.send.data(), all * 4);
        k.sendPtr = k.recv.data();
        k.recvPtr = k.recv.data() + r * count;
      } else {
        memcpy(k.recv.data(), k.send.data(), count * 4);
        k.sendPtr = k.recv.data();
      }
    }
    for (auto& s : k.slot) s.assign(stagingBytes / 4, -9);
  }
  const size_t per = stagingPerChunk(coll, 4, n, stagingBytes);
  ASSERT_GT(per, 0u);
  const size_t chunks = stagingChunks(count, per);
  auto plan = [&](size_t k) {
    std::vector<StagedChunk> ch;
    for (int r = 0; r < n; ++r) ch.push_back(stagedChunk(a, r, n, per, k));
    return ch;
  };
  auto down = [&](size_t k) {
    auto ch = plan(k);
    for (int r = 0; r < n; ++r) {
      if (ch[r].down.active) {
        ASSERT_LE(
            ch[r].down.dstOffset + (ch[r].down.height - 1) * ch[r].down.dstPitch + ch[r].down.width,
            stagingBytes);
      }
      apply(ch[r].down, rs[r].sendPtr, rs[r].slot[k % 2].data());
    }
  };
  if (chunks > 0) down(0);
  for (size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) down(k + 1);
    auto ch = plan(k);
    hostCollective(a, ch, rs, static_cast<int>(k % 2));
    for (int r = 0; r < n; ++r) apply(ch[r].up, rs[r].slot[k % 2].data(), rs[r].recvPtr);
  }
  for (int r = 0; r < n; ++r) {
    if (coll == Collective::kReduce && r != root) continue;
    Buf want = expected(a, n, r);
    Buf got(rs[r].recvPtr, rs[r].recvPtr + recvN);
    ASSERT_EQ(got, want) << "rank " << r;
  }
}

TEST(StagingPlan, EveryCollectiveMatchesItsDefinition) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce})
    for (int n : {1, 2, 3, 4})
      for (size_t count : {size_t(1), size_t(5), size_t(1003)})
        for (size_t staging : {size_t(64), size_t(4096)})
          for (bool inPlace : {false, true}) check(c, n, count, staging, inPlace, n - 1);
}

TEST(StagingPlan, PerChunkLeavesRoomForEveryRankOfGatheringCollectives) {
  EXPECT_EQ(stagingPerChunk(Collective::kAllReduce, 4, 8, 4096), 1024u);
  EXPECT_EQ(stagingPerChunk(Collective::kAllGather, 4, 8, 4096), 128u);
  EXPECT_EQ(stagingPerChunk(Collective::kReduceScatter, 8, 4, 4096), 128u);
  EXPECT_EQ(stagingPerChunk(Collective::kAllGather, 8, 1024, 4096), 0u);
  EXPECT_EQ(stagingChunks(0, 16), 0u);
  EXPECT_EQ(stagingChunks(17, 16), 2u);
  EXPECT_EQ(stagingChunks(17, 0), 0u);
}

}  // namespace
}  // namespace collie
