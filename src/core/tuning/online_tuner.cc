// The online tuner (see online_tuner.h).
#include "src/core/tuning/online_tuner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>

namespace collie {

Candidates modelCandidates(const std::vector<std::unique_ptr<Algorithm>>& algos, const CollArgs& a,
                           const AlgoContext& ctx, double span) {
  std::vector<std::pair<double, Algorithm*>> costs;
  for (auto& algo : algos)
    if (algo->supports(a.coll, a.memory) && algo->usable(ctx, a))
      costs.emplace_back(algo->layoutCostUs(a, ctx), algo.get());
  // Stable: equal costs keep the registry's order, the same on every rank.
  std::stable_sort(costs.begin(), costs.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  Candidates out;
  if (!costs.empty()) out.bestUs = costs.front().first;
  for (auto& c : costs)
    if (out.algos.empty() || c.first <= span * out.bestUs) out.algos.push_back(c.second);
  return out;
}

const char* trialName(const Algorithm* algo) {
  static std::mutex mu;
  static std::map<std::string, std::string>* names = new std::map<std::string, std::string>;
  std::lock_guard<std::mutex> l(mu);
  std::string& n = (*names)[algo->name()];
  if (n.empty()) n = std::string(algo->name()) + " (trial)";
  return n.c_str();
}

size_t OnlineTuner::runIndex(const Trial& t) {
  const size_t m = t.runs.size(), block = static_cast<size_t>(t.runsDone / t.blockCalls);
  const size_t pos = block % m;
  return block / m % 2 == 0 || pos == 0 ? pos : m - pos;
}

int OnlineTuner::roundsFor(size_t n, double bestUs) const {
  const double affordable = kRoundsBudgetUs / (2 * static_cast<double>(n) * std::max(bestUs, 0.1));
  return std::max(trials_, std::min(kMaxRounds, static_cast<int>(affordable)));
}

namespace {

// Adds us to samples; returns their median, and their fastest in *fastest.
double addSample(std::vector<double>& samples, double us, double* fastest) {
  samples.push_back(us);
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size() / 2;
  *fastest = sorted.front();
  return sorted.size() % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
}

}  // namespace

void OnlineTuner::record(Trial* t, double us) {
  if (t->blockCalls > 0) {
    const size_t run = runIndex(*t);
    const int at = t->runsDone % t->blockCalls;
    ++t->runsDone;
    if (at < warmCalls(t->blockCalls)) return;
    // The mean, not the median: a call in a few that stalls (a TCP loss probe, a peer late)
    // costs a training loop its whole time.
    const size_t m = t->runs.size();
    t->runSum[run] += us;
    ++t->runTimed[run];
    t->timesUs[run] = t->runSum[run] / t->runTimed[run];
    t->blockSum += us;
    ++t->blockTimed;
    if (at + 1 == t->blockCalls) {  // the block's mean, in its round
      const size_t round = static_cast<size_t>((t->runsDone - 1) / t->blockCalls) / m;
      t->timesUs[m + round * m + run] = t->blockSum / t->blockTimed;
      t->blockSum = 0;
      t->blockTimed = 0;
    }
    return;
  }
  const size_t n = t->candidates.size(), i = static_cast<size_t>(t->calls) / 2 % n;
  const bool timed = t->calls % 2 == 1;
  ++t->calls;
  if (!timed) return;
  double fastest = 0;
  t->timesUs[i] = addSample(t->samples[i], us, &fastest);
  t->timesUs[n + i] = fastest;
}

bool OnlineTuner::readyToSettle(const Trial* t) const {
  if (t->chosen != nullptr) return false;
  if (t->blockCalls > 0)
    return t->runsDone >= t->blocks * t->blockCalls * static_cast<int>(t->runs.size());
  return t->calls >= 2 * t->rounds * static_cast<int>(t->candidates.size());
}

std::vector<double>& OnlineTuner::times(Trial* t) { return t->timesUs; }

const std::vector<Algorithm*>& OnlineTuner::candidates(const Trial* t) const {
  return t->candidates;
}

namespace {

// The fastest mean of the runs; of means within kRunTie of it, the candidate fastest in the
// trials; of equals the earlier one. It replaces the trials' pick (run 0) only if its blocks
// also beat the pick's in most rounds, or in half with a product of per-round ratios below 1:
// blocks follow each other in time, and a slow spell that ends during the runs favours the
// later blocks.
size_t runsWinner(const OnlineTuner::Trial& t) {
  const size_t m = t.runs.size();
  const double* mean = t.timesUs.data();
  const double* block = mean + m;  // [round][candidate]
  size_t best = 0;
  for (size_t i = 1; i < m; ++i)
    if (mean[i] < mean[best]) best = i;
  const double tie = mean[best] * OnlineTuner::kRunTie;
  for (size_t i = 0; i < m; ++i)
    if (mean[i] <= tie && t.runTrialUs[i] < t.runTrialUs[best]) best = i;
  int won = 0;
  double logRatio = 0;
  for (int r = 0; r < t.blocks; ++r) {
    const double c = block[static_cast<size_t>(r) * m + best];
    const double p = block[static_cast<size_t>(r) * m];
    if (c < p) ++won;
    if (c > 0 && p > 0) logRatio += std::log(c / p);
  }
  const bool takes = 2 * won > t.blocks || (2 * won == t.blocks && logRatio < 0);
  return takes ? best : 0;
}

// The trials' pick: the model's first, unless a challenger's median beat its fastest call
// (then the fastest such challenger).
size_t trialsWinner(const double* median, const double* fastest, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (median[i] < fastest[0] && (best == 0 || median[i] < median[best])) best = i;
  return best;
}

// Who runs in a row: the pick, then the others by median (of equals the model's order).
std::vector<size_t> runOrder(const double* median, size_t n, size_t best) {
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (i != best) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return median[x] < median[y]; });
  order.insert(order.begin(), best);
  order.resize(std::min<size_t>(order.size(), OnlineTuner::kRunCandidates));
  return order;
}

}  // namespace

Algorithm* OnlineTuner::settle(Trial* t) {
  if (t->blockCalls > 0) {
    t->chosen = t->runs[runsWinner(*t)];
    return t->chosen;
  }
  const size_t n = t->candidates.size();
  const double* median = t->timesUs.data();
  const size_t best = trialsWinner(median, median + n, n);
  const std::vector<size_t> order = runOrder(median, n, best);
  // The agreed medians size the blocks alike on every rank.
  double slowest = 0;
  for (size_t i : order) slowest = std::max(slowest, median[i]);
  const double affordable = kRunBudgetUs / std::max(slowest, 0.1);  // calls per candidate
  const int calls = static_cast<int>(std::min(affordable, static_cast<double>(runCalls_)));
  const int block = std::min(kMaxBlockCalls, calls / kMinRunBlocks);
  if (n < 2 || block < kMinBlockCalls) {
    t->chosen = t->candidates[best];
    return t->chosen;
  }
  t->blockCalls = block;
  t->blocks = calls / block;
  for (size_t i : order) {
    t->runs.push_back(t->candidates[i]);
    t->runTrialUs.push_back(median[i]);
  }
  // Each candidate's mean, then each block's mean by round and candidate.
  t->timesUs.assign(t->runs.size() * (1 + static_cast<size_t>(t->blocks)), 0);
  t->runSum.assign(t->runs.size(), 0);
  t->runTimed.assign(t->runs.size(), 0);
  return nullptr;
}

}  // namespace collie
