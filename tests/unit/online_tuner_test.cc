// The online tuner's bookkeeping: which algorithms it tries, in what order and how often, and
// which one it settles on given the agreed times. The multiproc test TunerTrials checks the
// whole loop with real ranks.
#include "src/core/tuning/online_tuner.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace collie {
namespace {

// An algorithm that only has a name and a predicted time.
class Fake : public Algorithm {
 public:
  Fake(const char* name, double us, bool usable = true) : name_(name), us_(us), usable_(usable) {}
  const char* name() const override { return name_; }
  uint8_t id() const override { return 0; }
  bool supports(Collective, MemoryKind) const override { return true; }
  bool usable(const AlgoContext&, const CollArgs&) const override { return usable_; }
  double costUs(const CollArgs&, int, const LinkModel&) const override { return us_; }
  Status run(const CollArgs&, AlgoContext&) override { return Status::ok(); }

 private:
  const char* name_;
  double us_;
  bool usable_;
};

Candidates three(double bestUs) {
  static Fake a("a", 1), b("b", 2), c("c", 3);
  return Candidates{{&a, &b, &c}, bestUs};
}

CallShape shape(size_t count) {
  CollArgs a;
  a.count = count;
  return CallShape::of(a);
}

TEST(OnlineTuner, CandidatesAreTheUsableOnesWithinTheSpanCheapestFirst) {
  std::vector<std::unique_ptr<Algorithm>> algos;
  algos.push_back(std::make_unique<Fake>("slow", 50));
  algos.push_back(std::make_unique<Fake>("best", 10));
  algos.push_back(std::make_unique<Fake>("unusable", 1, false));
  algos.push_back(std::make_unique<Fake>("near", 30));
  algos.push_back(std::make_unique<Fake>("also_best", 10));
  CollArgs a;
  a.count = 100;
  AlgoContext ctx;
  Candidates c = modelCandidates(algos, a, ctx, 4);
  ASSERT_EQ(c.algos.size(), 3u);
  EXPECT_STREQ(c.algos[0]->name(), "best");
  EXPECT_STREQ(c.algos[1]->name(), "also_best");  // equal costs keep the registry's order
  EXPECT_STREQ(c.algos[2]->name(), "near");
  EXPECT_DOUBLE_EQ(c.bestUs, 10);
  EXPECT_EQ(modelCandidates(algos, a, ctx, 5).algos.size(), 4u);
  EXPECT_EQ(modelCandidates(algos, a, ctx, 1).algos.size(), 2u);
}

// Runs the trials of one shape of three candidates: per round, each candidate in turn gets an
// untimed call (taking warm) and a timed one (timed[candidate][round]). Returns the names that
// ran, in order.
std::vector<std::string> runTrials(OnlineTuner& t, OnlineTuner::Trial** trial,
                                   const std::vector<std::vector<double>>& timed, double warm) {
  std::vector<std::string> ran;
  for (size_t r = 0; r < timed[0].size(); ++r)
    for (size_t c = 0; c < timed.size(); ++c)
      for (double us : {warm, timed[c][r]}) {
        Algorithm* algo = t.next(
            shape(1000), [] { return three(10000); }, trial);
        if (algo == nullptr || *trial == nullptr) return ran;
        EXPECT_FALSE(t.readyToSettle(*trial));
        ran.push_back(algo->name());
        t.record(*trial, us);
      }
  return ran;
}

// A fresh tuner's trials as runTrials runs them: expects the agreed figures to be want (the
// medians, then the fastest calls) and returns the name it settles on.
std::string choiceAfter(const std::vector<std::vector<double>>& timed, double warm,
                        const std::vector<double>& want) {
  OnlineTuner t(3, 16);
  OnlineTuner::Trial* trial = nullptr;
  runTrials(t, &trial, timed, warm);
  if (trial == nullptr || !t.readyToSettle(trial)) {
    ADD_FAILURE() << "the trials did not end";
    return "";
  }
  EXPECT_EQ(t.times(trial), want);
  return t.settle(trial)->name();
}

TEST(OnlineTuner, TriesTheCandidatesInTurnAndSettlesOnTheAgreedTimes) {
  OnlineTuner t(3, 16);
  OnlineTuner::Trial* trial = nullptr;
  // Predicted long enough that three rounds are all the budget allows. The untimed calls are
  // the quickest and do not count. Medians: a 8, b 3, c 5; fastest: a 7, b 2, c 5.
  std::vector<std::string> ran = runTrials(t, &trial, {{9, 7, 8}, {2, 4, 3}, {5, 5, 6}}, 1);
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "a", "b", "b", "c", "c", "a", "a", "b", "b", "c",
                                           "c", "a", "a", "b", "b", "c", "c"}));
  ASSERT_TRUE(t.readyToSettle(trial));
  EXPECT_EQ(t.times(trial), (std::vector<double>{8, 3, 5, 7, 2, 5}));
  // Both b and c beat a's fastest call. Another rank was slower with b: the agreed (slowest)
  // times make c the fastest.
  t.times(trial)[1] = 6;
  EXPECT_STREQ(t.settle(trial)->name(), "c");
  for (int i = 0; i < 3; ++i) {
    Algorithm* algo = t.next(
        shape(1000), [] { return three(10000); }, &trial);
    EXPECT_STREQ(algo->name(), "c");
    EXPECT_EQ(trial, nullptr);
  }
}

// The netns hosts' case: the model's pick is quick once, and then its calls back to back wait
// behind the earlier ones' messages in a network queue. Its timed calls each follow one of its
// own, so its quick first call does not make it stay.
TEST(OnlineTuner, QuickOnceSlowAfterLosesToSteady) {
  EXPECT_EQ(choiceAfter({{40, 44, 42}, {10, 10, 10}, {12, 11, 13}}, 8, {42, 10, 12, 40, 10, 11}),
            "b");
}

// A busy machine: the model's pick had one slow call. A challenger whose median is lower but
// not below the pick's fastest call has not shown it is faster, and the pick stays.
TEST(OnlineTuner, AChallengerWithinThePicksSpreadDoesNotReplaceIt) {
  EXPECT_EQ(choiceAfter({{10, 30, 12}, {11, 11, 11}, {25, 25, 25}}, 10, {12, 11, 25, 10, 11, 25}),
            "a");
}

TEST(OnlineTuner, ShortCallsGetMoreRoundsUpToEight) {
  OnlineTuner t(3, 16);
  OnlineTuner::Trial* trial = nullptr;
  // Three candidates at 1 us: the budget affords far more than eight rounds.
  int calls = 0;
  for (;; ++calls) {
    Algorithm* algo = t.next(
        shape(8), [] { return three(1); }, &trial);
    if (trial == nullptr) break;
    const int c = calls / 2 % 3;
    EXPECT_STREQ(algo->name(), c == 0 ? "a" : c == 1 ? "b" : "c");
    t.record(trial, 1);
    if (t.readyToSettle(trial)) {
      ++calls;
      EXPECT_STREQ(t.settle(trial)->name(), "a");  // equal times: the model's first
      break;
    }
  }
  EXPECT_EQ(calls, 2 * 8 * 3);
  // Trial calls of a new shape whose three candidates the model predicts at us each, until
  // the shape is ready to settle; -1 if a call was not a trial.
  auto callsToSettle = [&t](int id, double us) {
    OnlineTuner::Trial* tr = nullptr;
    for (int n = 1;; ++n) {
      t.next(
          shape(id), [us] { return three(us); }, &tr);
      if (tr == nullptr) return -1;
      t.record(tr, 1);
      if (t.readyToSettle(tr)) return n;
    }
  };
  // 3 candidates at 2.5 ms: 100 ms / (2 calls x 3 candidates x 2.5 ms) affords 6 rounds.
  EXPECT_EQ(callsToSettle(9, 2500), 2 * 3 * 6);
  // At 10 ms they afford fewer than the 3 rounds asked for, which they still get.
  EXPECT_EQ(callsToSettle(10, 10000), 2 * 3 * 3);
}

// Runs the blocks of the runs of *trial (recording us(candidate name, call in its block)),
// and returns the names that ran, in order.
template <typename Us>
std::vector<std::string> runBlocks(OnlineTuner& t, OnlineTuner::Trial* trial, Us us) {
  std::vector<std::string> ran;
  const int calls = trial->blocks * trial->blockCalls * static_cast<int>(trial->runs.size());
  for (int i = 0; i < calls; ++i) {
    OnlineTuner::Trial* tr = nullptr;
    Algorithm* algo = t.next(
        shape(1000), [] { return three(10000); }, &tr);
    EXPECT_EQ(tr, trial);
    EXPECT_FALSE(t.readyToSettle(trial));
    ran.push_back(algo->name());
    t.record(trial, us(ran.back(), i % trial->blockCalls));
  }
  return ran;
}

// The names of blocks of calls each, in order.
std::vector<std::string> blocksOf(std::initializer_list<const char*> names, size_t calls) {
  std::vector<std::string> out;
  for (const char* name : names) out.insert(out.end(), calls, name);
  return out;
}

// Trials in which c is the pick (medians a 8, b 9, c 6; fastest a 7: c beats a's fastest call)
// and a and b follow by median; returns the shape's trial, in its runs (nullptr if it is not).
OnlineTuner::Trial* cPickedThenRuns(OnlineTuner& t) {
  OnlineTuner::Trial* trial = nullptr;
  runTrials(t, &trial, {{8, 7, 9}, {9, 9, 9}, {6, 6, 6}}, 1);
  if (trial == nullptr || !t.readyToSettle(trial) || t.settle(trial) != nullptr || !t.inRuns(trial))
    return nullptr;
  return trial;
}

// The trials pick c (medians c 6, a 8, b 9), two blocks of each candidate run, and the ranks
// agree on times: the means (c, a, b), then each round's blocks. The name it settles on.
std::string settledOnRuns(const std::vector<double>& times) {
  OnlineTuner t(3, 16, 12);
  OnlineTuner::Trial* trial = cPickedThenRuns(t);
  if (trial == nullptr || trial->blocks != 2 || trial->runTrialUs != std::vector<double>{6, 8, 9})
    return "(no runs as planned)";
  runBlocks(t, trial, [](const std::string&, int) { return 8.0; });
  if (!t.readyToSettle(trial)) return "(not ready)";
  t.times(trial) = times;
  return t.settle(trial)->name();
}

// One host, 2 ranks, 64 KiB: the pick took its turns fast and is slow called back to back. The
// pick and the best two medians of the others then run in a row, in blocks, and the fastest
// mean settles the shape.
TEST(OnlineTuner, ThePickAndTheBestOthersRunInBlocksAndTheFastestMeanStays) {
  OnlineTuner t(3, 16, 20);
  OnlineTuner::Trial* trial = cPickedThenRuns(t);
  ASSERT_NE(trial, nullptr);
  // 400 ms affords far more than 20 calls of 9 us: two blocks of 10 each. The first two calls
  // of a block are not timed. c takes 12; b 14; a 8, but one timed call in four stalls at 30:
  // a median of 8 and a mean of 13.5, the one that counts.
  EXPECT_EQ(trial->blockCalls, 10);
  EXPECT_EQ(trial->blocks, 2);
  int timedA = 0;
  const std::vector<std::string> ran = runBlocks(t, trial, [&](const std::string& name, int at) {
    if (at < OnlineTuner::warmCalls(10)) return 1.0;
    if (name == "a") return timedA++ % 4 == 0 ? 30.0 : 8.0;
    return name == "b" ? 14.0 : 12.0;
  });
  // Rounds of a block each, the second with all but its first in reverse.
  EXPECT_EQ(ran, blocksOf({"c", "a", "b", "c", "b", "a"}, 10));
  ASSERT_TRUE(t.readyToSettle(trial));
  // The means, then each round's block means (c, a, b).
  EXPECT_EQ(t.times(trial), (std::vector<double>{12, 13.5, 14, 12, 13.5, 14, 12, 13.5, 14}));
  EXPECT_STREQ(t.settle(trial)->name(), "c");
  Algorithm* algo = t.next(
      shape(1000), [] { return three(10000); }, &trial);
  EXPECT_STREQ(algo->name(), "c");
  EXPECT_EQ(trial, nullptr);
}

// On the netns hosts the block after a stalling candidate's finds the network congested. Every
// other round reverses all but its first block, so that every candidate follows every other
// alike: c stalls, and the block after each of c's is slow (20, against 10). a follows c in
// rounds 1 and 3, b in rounds 2 and 4.
TEST(OnlineTuner, EveryCandidateFollowsEveryOtherAlike) {
  OnlineTuner t(3, 16, 100);
  OnlineTuner::Trial* trial = cPickedThenRuns(t);
  ASSERT_NE(trial, nullptr);
  ASSERT_EQ(trial->blockCalls, 25);
  ASSERT_EQ(trial->blocks, 4);
  std::string previousBlock, block;
  const std::vector<std::string> ran = runBlocks(t, trial, [&](const std::string& name, int at) {
    if (at == 0) previousBlock = block, block = name;
    if (name == "c") return 30.0;
    return previousBlock == "c" ? 20.0 : 10.0;
  });
  EXPECT_EQ(ran, blocksOf({"c", "a", "b", "c", "b", "a", "c", "a", "b", "c", "b", "a"}, 25));
  ASSERT_TRUE(t.readyToSettle(trial));
  EXPECT_EQ(t.times(trial), (std::vector<double>{30, 15, 15,  // means
                                                 30, 20, 10, 30, 10, 20, 30, 20, 10, 30, 10, 20}));
}

// The agreed figures decide: another rank's calls of the pick were slower than a's.
TEST(OnlineTuner, TheFastestAgreedMeanReplacesThePick) {
  OnlineTuner t(3, 16, 12);
  OnlineTuner::Trial* trial = cPickedThenRuns(t);
  ASSERT_NE(trial, nullptr);
  EXPECT_EQ(trial->blockCalls, 6);  // 12 calls each, as COLLIE_TUNER_RUN asks
  const std::vector<std::string> ran =
      runBlocks(t, trial, [](const std::string& name, int) { return name == "c" ? 7.0 : 8.0; });
  EXPECT_EQ(ran.size(), 36u);
  ASSERT_TRUE(t.readyToSettle(trial));
  t.times(trial) = {9, 8.5, 8.7, 9, 8.5, 8.7, 9, 8.5, 8.7};
  EXPECT_STREQ(t.settle(trial)->name(), "a");
}

// A slow spell of the machine that ends during the runs favours the later blocks of a round:
// the pick's block comes first. A challenger with the lower mean replaces the pick only if its
// block beat the pick's in most rounds.
TEST(OnlineTuner, AChallengerMustWinMostRoundsToo) {
  for (int pickSlowRounds : {1, 2}) {
    SCOPED_TRACE(pickSlowRounds);
    OnlineTuner t(3, 16, 75);
    OnlineTuner::Trial* trial = cPickedThenRuns(t);
    ASSERT_NE(trial, nullptr);
    ASSERT_EQ(trial->blocks, 3);
    int pickBlocks = 0;
    // c's first pickSlowRounds blocks take 50 (the spell), then 10; a takes 12, b 20.
    runBlocks(t, trial, [&](const std::string& name, int at) {
      if (name == "c") {
        if (at == 0) ++pickBlocks;
        return pickBlocks <= pickSlowRounds ? 50.0 : 10.0;
      }
      return name == "a" ? 12.0 : 20.0;
    });
    ASSERT_TRUE(t.readyToSettle(trial));
    // a's mean is the lowest either way (c: 23.3 or 36.7); it won one round of three, or two.
    EXPECT_STREQ(t.settle(trial)->name(), pickSlowRounds == 1 ? "c" : "a");
  }
}

// Half the rounds each: the product of the per-round ratios decides. c stalls in one block of
// two (21 against a's 8.8) and wins the other narrowly (8): a takes its place. c's block is
// slowed in one round (20 against 10) and wins the other by more (4 against 10): c stays,
// though a's mean is the lower (10 against 12).
TEST(OnlineTuner, HalfTheRoundsEachTheRatiosDecide) {
  EXPECT_EQ(settledOnRuns({14.5, 8.8, 30, 21, 8.8, 30, 8, 8.8, 30}), "a");
  EXPECT_EQ(settledOnRuns({12, 10, 30, 20, 10, 30, 4, 10, 30}), "c");
}

// Means within 5% of the lowest are a tie, and the trials' medians break it (8 netns hosts,
// 512 KiB: the pick stalls, the other two ran 10.5 and 10.9 ms in a row, 10.4 and 8.4 in the
// trials). The trials had a at 8 and b at 9: a takes the place of the stalling pick c when its
// mean is within 5% of b's, b when it is not.
TEST(OnlineTuner, ATieInTheRunsGoesToTheFasterInTheTrials) {
  EXPECT_EQ(settledOnRuns({25, 10.9, 10.5, 40, 10.9, 10.5, 10, 10.9, 10.5}), "a");
  EXPECT_EQ(settledOnRuns({25, 11.5, 10.5, 40, 11.5, 10.5, 10, 11.5, 10.5}), "b");
}

// The blocks fit their budget of 400 ms per candidate and COLLIE_TUNER_RUN calls: 4 blocks of
// 25 for calls of 9 us, 2 of 16 for 12 ms, 2 of 6 for 33 ms, and calls too long for that none
// (the trials decide): at 49 ms, 2 blocks of 4 would time 2 calls each.
TEST(OnlineTuner, RunsFitTheirBudgetAndLongCallsSkipThem) {
  struct Case {
    double us;
    int blocks, blockCalls;
  };
  for (const Case& c : {Case{9, 4, 25}, Case{12000, 2, 16}, Case{33000, 2, 6}, Case{49000, 0, 0},
                        Case{80000, 0, 0}}) {
    SCOPED_TRACE(c.us);
    const double us = c.us;
    OnlineTuner t(3, 16, 100);
    OnlineTuner::Trial* trial = nullptr;
    runTrials(t, &trial, {{us, us, us}, {us + 1, us + 1, us + 1}, {us, us, us}}, us);
    ASSERT_TRUE(trial != nullptr && t.readyToSettle(trial));
    Algorithm* chosen = t.settle(trial);
    EXPECT_EQ(trial->blocks, c.blocks);
    EXPECT_EQ(trial->blockCalls, c.blockCalls);
    if (c.blocks > 0) {
      EXPECT_EQ(chosen, nullptr);
      ASSERT_EQ(trial->runs.size(), 3u);
      EXPECT_STREQ(trial->runs[0]->name(), "a");
      EXPECT_STREQ(trial->runs[1]->name(), "c");  // then the others by median
      EXPECT_STREQ(trial->runs[2]->name(), "b");
    } else {
      ASSERT_NE(chosen, nullptr);
      EXPECT_STREQ(chosen->name(), "a");
      EXPECT_FALSE(t.inRuns(trial));
    }
  }
}

TEST(OnlineTuner, OneCandidateNeedsNoTrial) {
  OnlineTuner t(3, 16);
  OnlineTuner::Trial* trial = nullptr;
  static Fake only("only", 1);
  Algorithm* algo = t.next(
      shape(5),
      [] {
        return Candidates{{&only}, 1};
      },
      &trial);
  EXPECT_EQ(algo, &only);
  EXPECT_EQ(trial, nullptr);
}

TEST(OnlineTuner, OffOrFullLeavesTheChoiceToTheModel) {
  OnlineTuner off(0, 16);
  OnlineTuner::Trial* trial = nullptr;
  EXPECT_EQ(off.next(
                shape(5), [] { return three(1); }, &trial),
            nullptr);
  OnlineTuner full(3, 1);
  EXPECT_NE(full.next(
                shape(5), [] { return three(1); }, &trial),
            nullptr);
  EXPECT_EQ(full.next(
                shape(6), [] { return three(1); }, &trial),
            nullptr);
  // The shape it holds goes on.
  EXPECT_NE(full.next(
                shape(5), [] { return three(1); }, &trial),
            nullptr);
}

TEST(OnlineTuner, AQuarterOfABlockWarmsUpAtLeastTwoCalls) {
  EXPECT_EQ(OnlineTuner::warmCalls(4), 2);
  EXPECT_EQ(OnlineTuner::warmCalls(10), 2);
  EXPECT_EQ(OnlineTuner::warmCalls(25), 6);
}

TEST(OnlineTuner, TrialNamesSayTrialAndStay) {
  Fake a("ring", 1);
  const char* n = trialName(&a);
  EXPECT_STREQ(n, "ring (trial)");
  EXPECT_EQ(trialName(&a), n);
}

}  // namespace
}  // namespace collie
