// Ranks whose AllToAllv counts disagree, over tcp and shared memory: the ranks that see the
// disagreement return collieInvalidUsage naming it, the others an error too, nobody hangs, and
// no receive buffer holds a truncated or overrun block.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collie/collie.h"
#include "src/base/time.h"
#include "tests/harness/process_world.h"

namespace collie {
namespace testing {
namespace {

constexpr size_t kCount = 4096;
constexpr int32_t kUntouched = 0x5a5a5a5a;

// counts(rank, peer) -> what rank sends peer; want(rank, peer) -> what rank expects from peer.
struct Disagreement {
  size_t (*sends)(int rank, int peer);
  size_t (*expects)(int rank, int peer);
};

// One AllToAllv with the given counts on every rank; notes the code it returned and fails the
// rank where its receive buffer was written past what it expected from a peer.
void runDisagreement(int rank, int n, Reporter& rep, const Disagreement& d) {
  collieComm_t c = nullptr;
  if (collieCommInitFromEnv(&c) != collieSuccess) {
    // Init ends with collective steps (over tcp, the link probe): a rank still in them when a
    // peer has already failed the call learns of that failure in init.
    const std::string msg = collieGetLastError(nullptr);
    if (msg.find("disagree") == std::string::npos && msg.find("itself") == std::string::npos)
      rep.fail("init failed, and not for the disagreement: " + msg);
    rep.note(std::to_string(collieRemoteError));
    return;
  }
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  for (int j = 0; j < n; ++j) {
    sc[j] = d.sends(rank, j);
    rc[j] = d.expects(rank, j);
    sd[j] = rd[j] = static_cast<size_t>(j) * 2 * kCount;
  }
  std::vector<int32_t> send(2 * kCount * n, rank), recv(2 * kCount * n, kUntouched);
  Deadline limit = Deadline::afterMs(10000);
  collieResult_t r = collieAlltoAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(),
                                     rd.data(), collieInt32, c, nullptr);
  const collieResult_t first = r;
  // A rank that saw no disagreement may finish first; its next call learns of the failure.
  if (r == collieSuccess) r = collieBarrier(c);
  std::string msg = collieGetLastError(c);
  if (r == collieSuccess) rep.fail("the call and the next succeeded although ranks disagree");
  if (limit.expired()) rep.fail("took longer than 10 s to fail");
  if (msg.find("disagree") == std::string::npos && msg.find("itself") == std::string::npos &&
      msg.find("aborted") == std::string::npos)
    rep.fail("message names neither the disagreement nor the peer that saw it: " + msg);
  // Nothing lands beyond a peer's expected block, whatever the peer sent.
  for (int j = 0; j < n; ++j)
    for (size_t i = rd[j] + rc[j]; i < rd[j] + 2 * kCount; ++i)
      if (recv[i] != kUntouched) {
        rep.fail("element " + std::to_string(i) + " past the block from rank " + std::to_string(j) +
                 " was written");
        break;
      }
  rep.note(std::to_string(first));
  collieCommAbort(c);
}

std::vector<RankOutcome> disagree(int n, const char* transport, const Disagreement& d) {
  WorldOptions opt;
  opt.env = {{"COLLIE_TIMEOUT_MS", "20000"}, {"COLLIE_TRANSPORT", transport}};
  auto out = runWorld(n, opt, [=](int rank, Reporter& rep) { runDisagreement(rank, n, rep, d); });
  expectAllPassed(out);
  return out;
}

int codeOf(const RankOutcome& o) {
  EXPECT_EQ(o.notes.size(), 1u) << o.output;
  return o.notes.empty() ? -1 : std::stoi(o.notes[0]);
}

// Rank 1 sends rank 0 one element more than rank 0 expects, and expects one more back: each of
// the two sees the other's frame disagree.
const Disagreement kBothWays{
    [](int rank, int peer) { return kCount + (rank == 1 && peer == 0 ? 1 : 0); },
    [](int rank, int peer) { return kCount + (rank == 1 && peer == 0 ? 1 : 0); }};

// Only rank 0 sends rank 1 too much; rank 2 agrees with everyone.
const Disagreement kOneWay{
    [](int rank, int peer) { return kCount + (rank == 0 && peer == 1 ? 7 : 0); },
    [](int, int) { return kCount; }};

// Rank 0 sends itself fewer elements than it expects from itself.
const Disagreement kWithItself{
    [](int rank, int peer) { return rank == 0 && peer == 0 ? kCount - 1 : kCount; },
    [](int, int) { return kCount; }};

class AllToAllvDisagree : public ::testing::TestWithParam<const char*> {};

TEST_P(AllToAllvDisagree, BothRanksOfAPairSeeItAsInvalidUsage) {
  auto out = disagree(2, GetParam(), kBothWays);
  for (const auto& o : out) EXPECT_EQ(codeOf(o), collieInvalidUsage) << "rank " << o.rank;
}

TEST_P(AllToAllvDisagree, TheReceiverSeesItAndNobodySucceeds) {
  auto out = disagree(3, GetParam(), kOneWay);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(codeOf(out[1]), collieInvalidUsage);
}

TEST_P(AllToAllvDisagree, ARankDisagreeingWithItselfSaysSo) {
  auto out = disagree(2, GetParam(), kWithItself);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(codeOf(out[0]), collieInvalidUsage);
}

INSTANTIATE_TEST_SUITE_P(Transports, AllToAllvDisagree, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace collie
