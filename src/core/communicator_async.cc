// CommImpl's configured and non-blocking side: init with given settings, set-up on a thread of
// its own (startInBackground), a non-blocking communicator's queued ops and the state
// collieCommGetAsyncError reports, and finalize.
#include <chrono>
#include <thread>

#include "src/base/log.h"
#include "src/core/communicator.h"

namespace collie {

namespace {

// Past this many ops not yet seen done, a new op looks through them first.
constexpr size_t kPruneAt = 64;

std::string nameOf(const CommConfig& cfg) {
  return cfg.name.empty() ? std::string() : " of communicator '" + cfg.name + "'";
}

// An init's error, led by the communicator's name where it has one.
Status named(const CommConfig& cfg, const Status& s) {
  return cfg.name.empty() ? s : s.withContext("communicator '" + cfg.name + "'");
}

}  // namespace

std::string CommImpl::who() const { return "rank " + std::to_string(rank_) + nameOf(cfg_); }

std::string CommImpl::settingUp() const {
  // Not the rank: a split's set-up learns it meanwhile, on its own thread.
  return cfg_.name.empty() ? std::string("a communicator") : "communicator '" + cfg_.name + "'";
}

void CommImpl::logReady() const {
  std::string peers;
  for (int p = 0; p < nranks_; ++p)
    if (p != rank_)
      peers +=
          " " + std::to_string(p) + ":" + family_->mesh->via(familyRank_[static_cast<size_t>(p)]);
  COLLIE_INFO(kLogInit,
              "%s ready (%d ranks, %s): peers%s; timeout %lld ms, connect %lld ms; algorithm %s; "
              "socket interface '%s'; nsocks %d; chunk %zu bytes",
              who().c_str(), nranks_, cfg_.blocking ? "blocking" : "non-blocking", peers.c_str(),
              static_cast<long long>(cfg_.timeoutMs), static_cast<long long>(cfg_.connectMs),
              cfg_.algorithm.empty() ? "auto" : cfg_.algorithm.c_str(), cfg_.socketIfname.c_str(),
              cfg_.tcp.nsocks, cfg_.chunkBytes);
}

StatusOr<std::unique_ptr<CommImpl>> CommImpl::create(BootstrapInfo info, const CommConfig& cfg) {
  std::unique_ptr<CommImpl> c(new CommImpl());
  c->rank_ = info.rank;
  c->nranks_ = info.nranks;
  c->cfg_ = cfg;
  Status s = c->init(std::move(info), &c->cfg_);
  if (!s.isOk()) return named(cfg, s);
  c->logReady();
  return c;
}

std::unique_ptr<CommImpl> CommImpl::createInBackground(BootstrapInfo info, CommConfig cfg) {
  std::unique_ptr<CommImpl> c(new CommImpl());
  c->rank_ = info.rank;
  c->nranks_ = info.nranks;
  c->cfg_ = std::move(cfg);
  CommImpl* self = c.get();
  // The thread owns info (the store server rank 0 may have adopted lives in it).
  auto box = std::make_shared<BootstrapInfo>(std::move(info));
  c->startInBackground([self, box] {
    Status s = self->init(std::move(*box), &self->cfg_);
    if (s.isOk()) self->logReady();
    return named(self->cfg_, s);
  });
  return c;
}

void CommImpl::startInBackground(std::function<Status()> work) {
  // The last error of a communicator lives here, and callers may ask for it while work runs.
  if (!failure_) failure_.reset(new FailureProtocol(cfg_.timeoutMs, &aborting_));
  gate_.store(kSettingUp, std::memory_order_release);
  bg_ = std::thread([this, work = std::move(work)] {
    Status s;
    try {
      s = work();
    } catch (const std::exception& e) {
      s = internalError(std::string("unexpected exception in background set-up: ") + e.what());
    }
    finishBackground(s);
  });
}

void CommImpl::finishBackground(const Status& s) {
  bool orphaned = false;
  {
    std::lock_guard<std::mutex> l(bgMu_);
    if (!s.isOk()) {
      setUpError_ = s;
      failure_->setLastError(s.message());
    }
    orphaned = orphaned_;
    gate_.store(s.isOk() ? kReady : kSetUpFailed, std::memory_order_release);
  }
  if (!s.isOk()) COLLIE_INFO(kLogInit, "background set-up failed: %s", s.message().c_str());
  if (!orphaned) return;
  // Destroyed while it ran: this thread frees it (its peers hear of the abort first).
  bg_.detach();
  if (s.isOk()) abort();
  delete this;
}

void CommImpl::destroy(std::unique_ptr<CommImpl> c, bool abort) {
  {
    std::lock_guard<std::mutex> l(c->bgMu_);
    if (c->gate_.load() == kSettingUp) {
      c->orphaned_ = true;
      c->aborting_.store(true);  // waits that watch it end early
      (void)c.release();         // finishBackground frees it
      return;
    }
  }
  if (abort && c->gate_.load() != kSetUpFailed) c->abort();
  c.reset();
}

Status CommImpl::notReady(const char* op, int gate) const {
  if (gate == kSettingUp)
    return invalidUsage(std::string(op) + " on " + settingUp() +
                        ": init is still in progress (poll collieCommGetAsyncError until it is "
                        "no longer collieInProgress)");
  if (gate == kFinalized)
    return invalidUsage(std::string(op) + " on " + who() +
                        ": the communicator was finalized; only collieCommDestroy may follow");
  std::lock_guard<std::mutex> l(bgMu_);
  return Status(setUpError_.code(),
                std::string(op) + " on " + who() + ": init failed: " + setUpError_.message());
}

Status CommImpl::asyncError() {
  switch (gate_.load(std::memory_order_acquire)) {
    case kSettingUp:
      return Status(collieInProgress, "init of " + settingUp() + " is still in progress");
    case kSetUpFailed: {
      std::lock_guard<std::mutex> l(bgMu_);
      return setUpError_;
    }
    default:
      break;
  }
  Status first = failure_->firstError();
  if (!first.isOk() || cfg_.blocking) return first;
  std::lock_guard<std::mutex> l(nbMu_);
  return nonBlockingState();
}

Status CommImpl::nonBlockingState() {
  // Read before the ops' states: an op ends its work before it leaves the queue or the set in
  // flight, so idle here means every op queued before was seen done below.
  const bool busy = !progress_.idle() || inFlightCount_.load() > 0;
  for (auto it = nbWork_.begin(); it != nbWork_.end();) {
    if (!(*it)->test()) {
      ++it;
      continue;
    }
    const Status s = (*it)->status();
    if (!s.isOk() && nbError_.isOk()) nbError_ = s;
    it = nbWork_.erase(it);
  }
  if (!nbError_.isOk()) return nbError_;
  if (busy || !nbWork_.empty())
    return Status(collieInProgress, "operations of " + who() + " are in flight");
  return Status::ok();
}

Status CommImpl::track(std::shared_ptr<WorkState> work) {
  std::lock_guard<std::mutex> l(nbMu_);
  if (nbWork_.size() >= kPruneAt) nonBlockingState();
  nbWork_.push_back(std::move(work));
  return Status(collieInProgress, "queued on non-blocking " + who());
}

Status CommImpl::queueCollective(const CollArgs& args) {
  std::shared_ptr<WorkState> work;
  COLLIE_RETURN_IF_ERROR(runAsync(args, &work));
  return track(std::move(work));
}

Status CommImpl::queueP2P(const P2PCall& call) {
  std::shared_ptr<WorkState> work;
  COLLIE_RETURN_IF_ERROR(runP2PAsync(call, &work));
  return track(std::move(work));
}

Status CommImpl::queueJob(std::function<Status()> job) {
  PendingOp op;
  op.work = std::make_shared<WorkState>();
  op.job = [this, job = std::move(job)] {
    Status s = job();
    if (!s.isOk()) setLastError(s.message());
    return s;
  };
  std::shared_ptr<WorkState> work = op.work;
  progress_.push(std::move(op));
  return track(std::move(work));
}

Status CommImpl::finalize() {
  int g = kReady;
  if (!gate_.compare_exchange_strong(g, kFinalized, std::memory_order_acq_rel))
    return notReady("collieCommFinalize", g);
  if (!cfg_.blocking)
    return Status(collieInProgress, "finalize of " + who() + " waits for its operations");
  progress_.waitIdle();
  {
    std::lock_guard<std::mutex> e(execMu_);  // a blocking op of another thread ends first
  }
  // Asynchronous sends and receives complete in flight, each by its own deadline.
  while (inFlightCount_.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  return failure_->firstError();
}

}  // namespace collie
