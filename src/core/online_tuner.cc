// The online tuner (see online_tuner.h).
#include "src/core/online_tuner.h"

#include <algorithm>
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

int OnlineTuner::roundsFor(size_t n, double bestUs) const {
  const double affordable = kRoundsBudgetUs / (2 * static_cast<double>(n) * std::max(bestUs, 0.1));
  return std::max(trials_, std::min(kMaxRounds, static_cast<int>(affordable)));
}

void OnlineTuner::record(Trial* t, double us) {
  const size_t n = t->candidates.size(), i = static_cast<size_t>(t->calls) / 2 % n;
  const bool timed = t->calls % 2 == 1;
  ++t->calls;
  if (!timed) return;
  std::vector<double>& b = t->samples[i];
  b.push_back(us);
  std::vector<double> sorted = b;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size() / 2;
  t->timesUs[i] = sorted.size() % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
  t->timesUs[n + i] = sorted.front();
}

bool OnlineTuner::readyToSettle(const Trial* t) const {
  return t->chosen == nullptr && t->calls >= 2 * t->rounds * static_cast<int>(t->candidates.size());
}

std::vector<double>& OnlineTuner::times(Trial* t) { return t->timesUs; }

const std::vector<Algorithm*>& OnlineTuner::candidates(const Trial* t) const {
  return t->candidates;
}

Algorithm* OnlineTuner::settle(Trial* t) {
  const size_t n = t->candidates.size();
  const double* median = t->timesUs.data();
  const double* fastest = median + n;
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (median[i] < fastest[0] && (best == 0 || median[i] < median[best])) best = i;
  t->chosen = t->candidates[best];
  return t->chosen;
}

}  // namespace collie
