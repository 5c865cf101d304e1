// CommImpl's choice of algorithms: the registry of this communicator, the forced one, the
// tuner's pick per call, and the agreement every rank's pick rests on.
#include "src/core/communicator.h"
#include "src/core/tuning/tuner.h"

namespace collie {

Status CommImpl::findAlgorithm(const std::string& want, Algorithm** out) const {
  *out = nullptr;
  if (want.empty() || want == "auto") return Status::ok();
  for (auto& a : algos_)
    if (want == a->name()) *out = a.get();
  if (*out != nullptr) return Status::ok();
  std::string have;
  for (auto& a : algos_) have += std::string(have.empty() ? "" : ", ") + a->name();
  return invalidArgument("COLLIE_ALGO=" + want + " is not an algorithm of this build (" + have +
                         ", or auto)");
}

Status CommImpl::setAlgorithm(const std::string& name) {
  COLLIE_RETURN_IF_ERROR(checkReady("collieCommSetAlgorithm"));
  progress_.waitIdle();
  std::lock_guard<std::mutex> e(execMu_);
  Algorithm* a = nullptr;
  COLLIE_RETURN_IF_ERROR(findAlgorithm(name, &a));
  forced_ = a;
  return Status::ok();
}

Status CommImpl::pick(const CollArgs& args, const AlgoContext& ctx, Algorithm** algo,
                      OnlineTuner::Trial** trial) {
  LastPick& lp = lastPick_;
  if (lp.algo != nullptr && lp.forced == forced_ && lp.coll == args.coll &&
      lp.count == args.count && lp.dtype == args.dtype && lp.root == args.root &&
      lp.memory == args.memory) {
    *algo = lp.algo;
    return Status::ok();
  }
  // Trials only where the choice is the tuner's and the call moves data; a forced algorithm
  // or a barrier is pickAlgorithm's to check.
  if (forced_ == nullptr && args.coll != Collective::kBarrier && args.count > 0)
    *algo = online_.next(
        CallShape::of(args), [&] { return modelCandidates(algos_, args, ctx, cfg_.tunerSpan); },
        trial);
  if (*algo == nullptr) COLLIE_RETURN_IF_ERROR(pickAlgorithm(algos_, forced_, args, ctx, algo));
  // The op of this shape, with the model's pick or the tuner's once it has settled.
  if (*trial == nullptr)
    lp = LastPick{*algo, forced_, args.coll, args.count, args.dtype, args.root, args.memory};
  return Status::ok();
}

Status CommImpl::agreeOnMax(double* v, size_t n, const char* opName) {
  CollArgs agree;
  agree.send = v;
  agree.recv = v;
  agree.count = n;
  agree.dtype = collieFloat64;
  agree.op = collieMax;
  Algorithm* ring = nullptr;
  COLLIE_RETURN_IF_ERROR(findAlgorithm("ring", &ring));
  AlgoContext ctx = context(agree);
  ctx.opName = opName;
  return ring->run(agree, ctx);
}

}  // namespace collie
