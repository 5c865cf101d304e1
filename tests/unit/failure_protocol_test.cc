// The failure protocol's report after a timeout: silent peers are named, a peer whose link was
// lost is named as lost, and a silent one is called the stuck one only when every other peer
// reported its failure.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "src/core/failure.h"

namespace collie {
namespace {

// A peer that answers every listen with the same word.
class FixedLink : public AbortLink {
 public:
  FixedLink(int peer, Word w) : peer_(peer), word_(w) {}
  int peer() const override { return peer_; }
  void sendAbort(const Status&) override { ++aborts; }
  Word listenAfterFailure() override { return word_; }
  int aborts = 0;

 private:
  int peer_;
  Word word_;
};

using Word = AbortLink::Word;

std::string reportAfterTimeout(std::vector<FixedLink>* links) {
  std::atomic<bool> aborting{false};
  FailureProtocol fp(/*timeoutMs=*/100, &aborting);
  std::vector<AbortLink*> peers;
  for (auto& l : *links) peers.push_back(&l);
  fp.attach(peers);
  const Status s =
      fp.fail(stalledWait("allreduce on rank 0: timed out waiting for peer rank 1", 1));
  for (auto& l : *links) EXPECT_EQ(l.aborts, 1) << "peer " << l.peer() << " was not told";
  EXPECT_EQ(s.code(), collieTimeout);
  return s.message();
}

TEST(FailureProtocol, ASilentPeerAmongPeersThatReportedIsTheStuckOne) {
  std::vector<FixedLink> links{{1, Word::kHeard}, {2, Word::kNothing}, {3, Word::kHeard}};
  const std::string m = reportAfterTimeout(&links);
  EXPECT_NE(m.find("peer rank 2 sent no word"), std::string::npos) << m;
  EXPECT_NE(m.find("that rank is the one stuck"), std::string::npos) << m;
  EXPECT_EQ(m.find("lost"), std::string::npos) << m;
}

TEST(FailureProtocol, PeersWhoseLinksWereLostAreNamedAsLost) {
  std::vector<FixedLink> links{
      {1, Word::kNothing}, {2, Word::kLost}, {3, Word::kLost}, {4, Word::kHeard}};
  const std::string m = reportAfterTimeout(&links);
  EXPECT_NE(m.find("peer rank 1 sent no word"), std::string::npos) << m;
  EXPECT_EQ(m.find("the one stuck"), std::string::npos) << m;
  EXPECT_NE(m.find("the connections to peer ranks 2, 3 were lost"), std::string::npos) << m;
}

TEST(FailureProtocol, LostLinksAloneAreNamed) {
  std::vector<FixedLink> links{{1, Word::kHeard}, {2, Word::kLost}};
  const std::string m = reportAfterTimeout(&links);
  EXPECT_EQ(m.find("sent no word"), std::string::npos) << m;
  EXPECT_NE(m.find("the connection to peer rank 2 was lost"), std::string::npos) << m;
}

TEST(FailureProtocol, EveryPeerHeardAddsNothing) {
  std::vector<FixedLink> links{{1, Word::kHeard}, {2, Word::kUnknown}};
  const std::string m = reportAfterTimeout(&links);
  EXPECT_EQ(m, "allreduce on rank 0: timed out waiting for peer rank 1");
}

}  // namespace
}  // namespace collie
