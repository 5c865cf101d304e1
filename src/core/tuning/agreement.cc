// Agreement on link figures and on the tuner's trial times.
#include "src/core/tuning/agreement.h"

#include <algorithm>
#include <cstdio>

#include "src/base/log.h"

namespace collie {

namespace {

void takeFigures(const double* f, LinkModel* m) {
  m->alphaUs = f[0];
  m->betaGBps = 1.0 / f[1];
  m->reduceGBps = 1.0 / f[2];
}

// "ring 12.0/10.5 us, tree 9.1/8.7 us": per candidate, the agreed times (the trials' median
// and fastest, or the runs' mean).
std::string agreedTimes(OnlineTuner* online, const OnlineTuner::Trial* t,
                        const std::vector<double>& agreed, bool runs) {
  std::string line;
  const auto& algos = runs ? t->runs : online->candidates(t);
  const size_t n = algos.size();
  for (size_t i = 0; i < n; ++i) {
    char buf[128];
    if (runs)
      snprintf(buf, sizeof(buf), "%s%s %.1f us", i ? ", " : "", algos[i]->name(), agreed[i]);
    else
      snprintf(buf, sizeof(buf), "%s%s %.1f/%.1f us", i ? ", " : "", algos[i]->name(), agreed[i],
               agreed[n + i]);
    line += buf;
  }
  return line;
}

void logSettled(OnlineTuner* online, const OnlineTuner::Trial* t, const CollArgs& args,
                const std::vector<double>& agreed, bool runs, const Algorithm* chosen) {
  std::string line = std::string(runs ? "in a row (mean) " : "tried (median/fastest) ") +
                     agreedTimes(online, t, agreed, runs);
  if (chosen != nullptr) {
    line += std::string("; takes ") + chosen->name();
  } else {
    line += "; runs in a row";
    for (size_t i = 0; i < t->runs.size(); ++i)
      line += std::string(i ? ", " : " ") + t->runs[i]->name();
    line += " (" + std::to_string(t->blocks) + " blocks of " + std::to_string(t->blockCalls) +
            " calls each)";
  }
  COLLIE_INFO(kLogColl, "tuner: %s count %zu %s: %s", collectiveName(args.coll), args.count,
              dtypeName(args.dtype), line.c_str());
}

}  // namespace

Status agreeOnLinks(const LinkSetup& s, const std::function<StatusOr<LinkProbe>()>& measure,
                    const AgreeOnMax& agree, LinkModel* net, LinkModel* local) {
  if (s.nranks < 2 || !s.network) return Status::ok();  // one host: the same links everywhere
  if (s.probe) {
    COLLIE_ASSIGN_OR_RETURN(LinkProbe p, measure());
    net->alphaUs = std::min(std::max(p.alphaUs, 0.5), 1e5);
    net->betaGBps = std::min(std::max(p.betaGBps, 0.01), 1e3);
    if (!s.shm) *local = *net;
  }
  // A rank alone on its host has no local link: it offers zeros, and where no rank has one,
  // the network's figures stand for it.
  double v[6] = {net->alphaUs,
                 1.0 / net->betaGBps,
                 1.0 / net->reduceGBps,
                 s.alone ? 0.0 : local->alphaUs,
                 s.alone ? 0.0 : 1.0 / local->betaGBps,
                 s.alone ? 0.0 : 1.0 / local->reduceGBps};
  COLLIE_RETURN_IF_ERROR(agree(v, 6, s.probe ? "the link probe" : "the tuner's link figures"));
  takeFigures(v, net);
  if (v[4] > 0)
    takeFigures(v + 3, local);
  else
    *local = *net;
  if (s.probe)
    COLLIE_INFO(kLogInit, "network measured at init: %.1f us per step, %.3f GB/s per link",
                net->alphaUs, net->betaGBps);
  return Status::ok();
}

Status settleTrial(OnlineTuner* online, OnlineTuner::Trial* t, const CollArgs& args,
                   const AgreeOnMax& agree) {
  std::vector<double>& us = online->times(t);
  const bool runs = online->inRuns(t);
  COLLIE_RETURN_IF_ERROR(agree(us.data(), us.size(), "the tuner's trials"));
  const std::vector<double> agreed = us;  // settle() may start the runs, which clear us
  const Algorithm* chosen = online->settle(t);
  if (logEnabled(LogLevel::kInfo, kLogColl)) logSettled(online, t, args, agreed, runs, chosen);
  return Status::ok();
}

}  // namespace collie
