// The tuner's second opinion: the cost model ranks the algorithms, and for each new call shape
// (collective, count, dtype, op, root, memory) the first calls try every algorithm the model
// puts within a span of its best, a few times each. The ranks then agree on the times (the
// slowest rank's, as a collective ends when its last rank does) and pick the model's first
// candidate, unless another candidate beat it clearly: its median call was faster than the
// pick's fastest call (then the fastest such candidate). A model with a handful of link figures
// cannot see what decides the race between algorithms that lie close: how the caches and cores
// of this machine hand data from rank to rank, or how busy the host is. Trying them can. But a
// few calls are a small sample on a busy machine, and a choice stays for the communicator's
// life: a challenger that wins by less than the spread of the pick's own calls does not replace
// the pick.
//
// Trials take turns, and that hides what some algorithms cost when a program calls them back to
// back, as training loops and benchmarks do: ranks drift apart over a few calls, and a rank's
// next call sends to a peer still busy with the last one, or finds the shared buffers in use.
// So the trials' pick and the two best medians of the others then run in a row: blocks of calls
// of one candidate, in rounds of one block of each, in an order in which every candidate
// follows every other alike. The ranks agree on each candidate's mean call, and the shape
// settles on the fastest, if its blocks also beat the pick's in most rounds (or in half, by
// more than they lost by in the others).
//
// This class holds the bookkeeping only; the communicator runs the calls, times them and
// agrees on the times with its peers. Every rank must see the same shapes in the same order
// with the same candidates, so each one settles at the same call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <tuple>
#include <vector>

#include "algorithms/algorithm.h"

namespace collie {

struct CallShape {
  Collective coll = Collective::kAllReduce;
  size_t count = 0;
  collieDataType_t dtype = collieFloat32;
  collieRedOp_t op = collieSum;
  int root = -1;
  MemoryKind memory = MemoryKind::kHost;

  static CallShape of(const CollArgs& a) {
    return CallShape{a.coll, a.count, a.dtype, a.op, a.root, a.memory};
  }
  bool operator<(const CallShape& o) const {
    return std::tie(coll, count, dtype, op, root, memory) <
           std::tie(o.coll, o.count, o.dtype, o.op, o.root, o.memory);
  }
};

// The algorithms the tuner should try for a call: every one that can run it and whose
// predicted time is within span times the cheapest, cheapest first, with the cheapest's
// predicted time.
struct Candidates {
  std::vector<Algorithm*> algos;
  double bestUs = 0;
};
Candidates modelCandidates(const std::vector<std::unique_ptr<Algorithm>>& algos, const CollArgs& a,
                           const AlgoContext& ctx, double span);

// "<name> (trial)": what collieCommLastAlgorithm reports for a trial call. The string is
// static, as algorithm names are.
const char* trialName(const Algorithm* algo);

class OnlineTuner {
 public:
  // trials: rounds (0: never try, the model decides), more for calls the model predicts to be
  // short, whose times one disturbed call would decide (up to kMaxRounds,
  // while the trials are predicted under kRoundsBudgetUs); maxShapes: how many shapes are
  // tuned (later ones take the model's pick); runCalls: the most calls each candidate makes in
  // a row after the trials, in blocks (0: settle on the trials alone).
  OnlineTuner(int trials, size_t maxShapes, int runCalls = 0)
      : trials_(trials), maxShapes_(maxShapes), runCalls_(runCalls) {}
  static constexpr int kMaxRounds = 8;
  // Rounds short calls may take: enough rounds that a disturbed call does not decide the median.
  static constexpr double kRoundsBudgetUs = 100000;
  // Up to kRunCandidates run in a row, in blocks of up to kMaxBlockCalls calls, at least
  // kMinRunBlocks per candidate: as many as fit in kRunBudgetUs per candidate at the slowest of
  // their trial medians, up to runCalls calls in all. The first warmCalls() of a block are not
  // timed: they pay the switch from the other algorithm. A shape whose calls are too long for
  // kMinRunBlocks blocks of kMinBlockCalls skips the runs: such calls hardly overlap, and a
  // block of a few calls lets one stalled call decide its mean.
  static constexpr int kRunCandidates = 3;
  static constexpr int kMinRunBlocks = 2;
  static constexpr int kMaxBlockCalls = 25;
  static constexpr double kRunBudgetUs = 400000;
  static constexpr int kMinBlockCalls = 6;
  static constexpr int kRunWarmCalls = 2;
  // Means of the runs this close to the lowest are a tie, which the trials' medians break:
  // a mean of a few blocks is noisier than a median.
  static constexpr double kRunTie = 1.05;
  // The calls of a block of blockCalls that are not timed: a quarter, at least kRunWarmCalls.
  static int warmCalls(int blockCalls) { return std::max(kRunWarmCalls, blockCalls / 4); }

  struct Trial;
  // What runs for a call of this shape: the settled algorithm (trial is then nullptr), or the
  // next candidate to try, whose time goes to record(). candidates is asked for only when the
  // shape is new. Returns nullptr when the shape is not tuned (the caller asks the model).
  template <typename MakeCandidates>
  Algorithm* next(const CallShape& s, MakeCandidates candidates, Trial** trial);

  // A trial call of *t took us on this rank.
  void record(Trial* t, double us);
  // Whether every candidate of *t has had its calls, in the trials or in the runs: then the
  // ranks agree on times() (in the trials each candidate's median, then each one's fastest
  // call; in the runs each candidate's mean call, then each block's; all on this rank: replace
  // each by the slowest rank's) and settle().
  bool readyToSettle(const Trial* t) const;
  std::vector<double>& times(Trial* t);
  // After the trials: picks the model's first candidate or the challenger that beat it clearly
  // (see above); returns it when the shape settles on it, or nullptr when the runs come next
  // (inRuns()). After the runs: settles on the fastest and returns it.
  Algorithm* settle(Trial* t);
  bool inRuns(const Trial* t) const { return t->blockCalls > 0; }
  const std::vector<Algorithm*>& candidates(const Trial* t) const;

  struct Trial {
    std::vector<Algorithm*> candidates;
    // Per candidate, the median of its timed calls, then per candidate the fastest of them. A
    // challenger is judged by its median: an algorithm that is quick once and then slows down
    // when called again (its messages pile up in a network queue) must not win on its one
    // quick call. In the runs: per candidate, its mean call; then per round, each candidate's
    // block's mean call.
    std::vector<double> timesUs;
    std::vector<std::vector<double>> samples;  // per candidate, its calls' times so far
    int calls = 0;                             // trial calls made
    int rounds = 0;                            // each: two calls of every candidate
    // The runs: the trials' pick, then the best medians of the others, blocks per candidate
    // of blockCalls calls (0: the runs have not begun), in rounds of one block each
    // (runIndex()).
    std::vector<Algorithm*> runs;
    std::vector<double> runTrialUs;  // per candidate of the runs, its median in the trials
    int blockCalls = 0;
    int blocks = 0;
    int runsDone = 0;            // calls made in the runs
    std::vector<double> runSum;  // per candidate of the runs, its timed calls' sum
    std::vector<int> runTimed;   // and count
    double blockSum = 0;         // the current block's timed calls
    int blockTimed = 0;
    Algorithm* chosen = nullptr;
  };

 private:
  // Rounds of trials for n candidates, the cheapest predicted to take bestUs.
  int roundsFor(size_t n, double bestUs) const;
  // The candidate of the runs that makes the next call: rounds of one block of each, every
  // other round with all but the first in reverse (a b c, a c b): in two rounds every
  // candidate follows every other once: a candidate whose calls stall may leave the network
  // congested for the block after it, which must not always be the same one's.
  static size_t runIndex(const Trial& t);

  int trials_;
  size_t maxShapes_;
  int runCalls_;
  std::map<CallShape, Trial> shapes_;
};

template <typename MakeCandidates>
Algorithm* OnlineTuner::next(const CallShape& s, MakeCandidates candidates, Trial** trial) {
  *trial = nullptr;
  auto it = shapes_.find(s);
  if (it == shapes_.end()) {
    if (trials_ <= 0 || shapes_.size() >= maxShapes_) return nullptr;
    Trial t;
    const Candidates c = candidates();
    if (c.algos.empty()) return nullptr;
    t.candidates = c.algos;
    t.rounds = roundsFor(t.candidates.size(), c.bestUs);
    if (t.candidates.size() == 1) t.chosen = t.candidates[0];
    t.timesUs.assign(2 * t.candidates.size(), 0);
    t.samples.resize(t.candidates.size());
    it = shapes_.emplace(s, std::move(t)).first;
  }
  Trial& t = it->second;
  if (t.chosen != nullptr) return t.chosen;
  *trial = &t;
  if (t.blockCalls > 0) return t.runs[runIndex(t)];
  // Rounds, each with two calls of every candidate in turn, the second one timed: a spell in
  // which the machine runs slow (another job, the hypervisor) falls on every candidate alike,
  // not on one candidate's calls, and the timed call finds the caches and threads as the
  // candidate itself leaves them, not as the one before it did (a transport's progress thread
  // still spinning on a core the next call needs).
  return t.candidates[static_cast<size_t>(t.calls) / 2 % t.candidates.size()];
}

}  // namespace collie
