// The tuner (see tuner.h).
#include "src/core/tuning/tuner.h"

#include <cstdlib>

namespace collie {

namespace {

bool parseDouble(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && *v > 0 && *v < 1e9;
}

}  // namespace

StatusOr<TransportLinks> parseTransportLinks(const std::string& spec) {
  TransportLinks t;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    LinkModel* m = name == "tcp"   ? &t.tcp
                   : name == "shm" ? &t.shm
                   : name == "ucx" ? &t.ucx
                                   : nullptr;
    std::vector<std::string> f;
    if (eq != std::string::npos) {
      size_t p = eq + 1;
      for (;;) {
        size_t c = item.find(':', p);
        f.push_back(item.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
        p = c + 1;
      }
    }
    double v[3] = {0, 0, 0};
    bool ok = m != nullptr && (f.size() == 2 || f.size() == 3);
    for (size_t i = 0; ok && i < f.size(); ++i) ok = parseDouble(f[i], &v[i]);
    if (!ok)
      return invalidArgument("COLLIE_TUNER_LINKS: '" + item +
                             "' is not transport=alpha_us:beta_GBps[:reduce_GBps] with transport "
                             "tcp, shm or ucx and positive numbers");
    m->alphaUs = v[0];
    m->betaGBps = v[1];
    if (f.size() == 3) m->reduceGBps = v[2];
  }
  return t;
}

LinkModel linkModelFor(const TransportLinks& t, bool anyTcp, bool anyUcx) {
  if (!anyTcp && !anyUcx) return t.shm;
  if (anyTcp && anyUcx) return t.tcp.betaGBps <= t.ucx.betaGBps ? t.tcp : t.ucx;
  return anyTcp ? t.tcp : t.ucx;
}

Status pickAlgorithm(const std::vector<std::unique_ptr<Algorithm>>& algos, Algorithm* forced,
                     const CollArgs& a, const AlgoContext& ctx, Algorithm** out) {
  // A barrier moves no data: it runs the barrier algorithm whatever is forced.
  if (forced != nullptr && a.coll != Collective::kBarrier) {
    if (!forced->supports(a.coll, a.memory) || !forced->usable(ctx, a))
      return invalidArgument(std::string("the forced algorithm ") + forced->name() +
                             " (COLLIE_ALGO or collieCommSetAlgorithm) cannot run " +
                             collectiveName(a.coll) +
                             " here (this collective or memory is not one it handles, or it "
                             "needs a layout of ranks this communicator does not have)");
    *out = forced;
    return Status::ok();
  }
  double best = 0;
  *out = nullptr;
  for (auto& algo : algos) {
    if (!algo->supports(a.coll, a.memory) || !algo->usable(ctx, a)) continue;
    double c = algo->layoutCostUs(a, ctx);
    if (*out == nullptr || c < best) *out = algo.get(), best = c;
  }
  if (*out != nullptr) return Status::ok();
  return invalidArgument(std::string("no algorithm of this build runs ") + collectiveName(a.coll));
}

}  // namespace collie
