// CommImpl: init in phases, ordered execution, errors and abort.
#include "src/core/communicator.h"

#include <cstring>
#include <thread>

#include "src/base/log.h"
#include "src/core/bootstrap/host_id.h"
#include "src/core/bootstrap/store_exchange.h"
#include "src/core/group.h"
#include "src/core/tuning/agreement.h"
#include "src/core/tuning/link_probe.h"
#include "src/core/tuning/tuner.h"

namespace collie {

StatusOr<std::unique_ptr<CommImpl>> CommImpl::create(BootstrapInfo info) {
  std::unique_ptr<CommImpl> c(new CommImpl());
  c->rank_ = info.rank;
  c->nranks_ = info.nranks;
  Status s = c->init(std::move(info));
  if (!s.isOk()) return s;
  c->logReady();
  return c;
}

Status CommImpl::init(BootstrapInfo info, const CommConfig* given) {
  pairSeq_ = PairSequences(nranks_);
  how_ = info.how;
  commId_ = info.auth.commId;
  family_ = std::make_shared<Family>();
  logSetRank(rank_);
  COLLIE_RETURN_IF_ERROR(configure(given).withContext(initWhere(info)));
  initDeadline_ = Deadline::afterMs(cfg_.connectMs).endedBy(&aborting_);
  Status s = meet(&info);
  const std::string where = initWhere(info);  // where the store was found
  if (s.isOk()) s = connect(info);
  if (s.isOk()) s = setUpWaits();
  const bool together = s.isOk();  // from here on the ranks run set-up ops together
  if (s.isOk()) s = setUpTuning();
  if (s.isOk()) s = prepareAlgorithms();
  // A set-up op that fails tells the peers why, as a call that fails does: a peer waiting on
  // this rank would otherwise name it instead of the rank that failed first.
  if (!s.isOk() && together) s = fail(s);
  if (s.isOk()) s = startProgress();
  if (!s.isOk()) abandonRendezvous(&family_->rv, rank_, nranks_, initDeadline_);
  return s.withContext(where);
}

Status CommImpl::configure(const CommConfig* given) {
  if (given == nullptr) {
    COLLIE_ASSIGN_OR_RETURN(cfg_, readCommConfig());
  } else if (given != &cfg_) {
    cfg_ = *given;
  }
  // Made before init where set-up runs in the background: the last error lives there.
  if (!failure_) failure_.reset(new FailureProtocol(cfg_.timeoutMs, &aborting_));
  algos_ = buildAlgorithms();
  online_ = OnlineTuner(cfg_.tunerTrials, 4096, cfg_.tunerRun);
  return findAlgorithm(cfg_.algorithm, &forced_);
}

Status CommImpl::meet(BootstrapInfo* info) {
  RankRecord mine;
  mine.nranks = nranks_;
  mine.machine = machineId();
  mine.host = hostId(mine.machine);
  COLLIE_RETURN_IF_ERROR(
      rendezvous(info, mine, cfg_.connectMs, cfg_.timeoutMs, initDeadline_, &family_->rv));
  records_ = family_->rv.records;
  layout_ = layoutOf(records_, rank_);
  for (int r = 0; r < nranks_; ++r) familyRank_.push_back(r);
  return Status::ok();
}

Status CommImpl::connect(const BootstrapInfo& info) {
  TransportConfig tc;
  tc.allowed = cfg_.transports;
  memcpy(tc.id.secret, info.auth.secret, sizeof(tc.id.secret));
  tc.id.commId = info.auth.commId;
  tc.id.rank = rank_;
  tc.id.nranks = nranks_;
  tc.tcp = cfg_.tcp;
  tc.shm = cfg_.shm;
  tc.shmShrinkable = cfg_.shmShrinkable;
  if (tc.allowed.tcp) {
    COLLIE_ASSIGN_OR_RETURN(tc.tcpLocal, pickLocalAddress(&info.storeAddr, cfg_.socketIfname));
  }
  COLLIE_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Transport>> transports, makeTransports(tc));
  StoreExchange exchange(family_->rv.store.get(), rank_);
  COLLIE_ASSIGN_OR_RETURN(
      family_->mesh, TransportMesh::connect(std::move(transports), layout_.places, rank_, &exchange,
                                            cfg_.transports.restriction, initDeadline_));
  TransportMesh& mesh = *family_->mesh;
  std::mutex* ucx = nullptr;  // every ucx connection moves the one worker
  for (int p = 0; p < nranks_; ++p) {
    const bool shared = strcmp(mesh.via(p), "ucx") == 0 && ucx != nullptr;
    if (!shared) family_->locks.emplace_back(new std::mutex());
    family_->wire.push_back(shared ? ucx : family_->locks.back().get());
    if (strcmp(mesh.via(p), "ucx") == 0) ucx = family_->wire.back();
    conns_.push_back(mesh.connections()[p]);
    if (p != rank_)
      COLLIE_INFO(kLogInit, "%s -> peer rank %d via %s", who().c_str(), p, mesh.via(p));
  }
  COLLIE_RETURN_IF_ERROR(leaveRendezvous(&family_->rv, rank_, nranks_, initDeadline_));
  attachConnections();
  return Status::ok();
}

void CommImpl::attachConnections() {
  std::vector<AbortLink*> live;
  for (Connection* c : conns_)
    if (c != nullptr) live.push_back(c);
  failure_->attach(std::move(live));
}

Status CommImpl::setUpWaits() {
  // Busy-polling pays only when every rank has a core of its own: oversubscribed, a spinning
  // rank steals the core its peer needs. Hosts that are namespaces of one machine share cores.
  const unsigned cores = std::thread::hardware_concurrency();
  oversubscribed_ = cores > 0 && layout_.machineRanks > static_cast<int>(cores);
  COLLIE_INFO(kLogInit, "rank %d: %d ranks on this machine, %d on this host, %u cores: %s", rank_,
              layout_.machineRanks, layout_.localRanks, cores,
              oversubscribed_ ? "waits yield the core" : "waits spin");
  std::vector<Connection*> live;
  for (Connection* c : conns_)
    if (c != nullptr) live.push_back(c);
  poller_.reset(new Poller(std::move(live), cfg_.spinUs, &aborting_, family_->mesh->doorbell(),
                           oversubscribed_, shared_));
  return Status::ok();
}

Status CommImpl::setUpTuning() {
  COLLIE_ASSIGN_OR_RETURN(TransportLinks links, parseTransportLinks(cfg_.tunerLinks));
  LinkSetup s;
  const TransportMesh& mesh = *family_->mesh;
  s.network = mesh.uses("tcp") || mesh.uses("ucx");
  s.alone = layout_.localRanks < 2;
  s.probe = cfg_.probeLinks;
  s.shm = mesh.uses("shm");
  s.nranks = nranks_;
  // The tuner's model: the slowest transport in use (see tuner.h).
  link_ = linkModelFor(links, mesh.uses("tcp"), mesh.uses("ucx"));
  localLink_ = s.shm ? links.shm : link_;
  COLLIE_INFO(kLogInit, "rank %d of %d connected (%s%s)", rank_, nranks_, how_.c_str(),
              mesh.uses("ucx") ? ", ucx to some peers" : "");
  // Large enough that the rate, not the latency, sets its time on a fast link.
  constexpr size_t kProbeBytes = 512 << 10;
  auto measure = [this] {
    AlgoContext ctx = context(CollArgs());
    ctx.opName = "the link probe";
    return probeRingLinks(ctx, kProbeBytes);
  };
  auto agree = [this](double* v, size_t n, const char* op) { return agreeOnMax(v, n, op); };
  return agreeOnLinks(s, measure, agree, &link_, &localLink_);
}

Status CommImpl::prepareAlgorithms() {
  // What the algorithms set up together (shm_single_copy's probe and vote): every rank here,
  // before any call.
  AlgoContext setUp = context(CollArgs());
  for (auto& algo : algos_) {
    const std::string phase = std::string("the set-up of ") + algo->name();
    setUp.opName = phase.c_str();
    COLLIE_RETURN_IF_ERROR(algo->prepare(setUp));
  }
  return Status::ok();
}

Status CommImpl::startProgress() {
  bool oneHost = true;
  std::vector<std::string> hosts;
  for (const RankRecord& r : records_) {
    hosts.push_back(r.host);
    oneHost &= r.host == records_[0].host;
  }
  Store* store = store_ ? store_.get() : family_->rv.store.get();
  device_.reset(new DevicePath(rank_, nranks_, cfg_.timeoutMs, oneHost, store, deviceHooks()));
  COLLIE_RETURN_IF_ERROR(device_->setUpBackend(cfg_.backend, hosts, initDeadline_));
  ProgressHooks hooks;
  // The transports' thread hooks (shm's alive mark) are the first communicator's: a child's
  // progress thread leaves them alone.
  TransportMesh* mesh = store_ ? nullptr : family_->mesh.get();
  hooks.started = [mesh] {
    if (mesh) mesh->threadStarted();
  };
  hooks.idle = [mesh] {
    if (mesh) mesh->threadIdle();
  };
  hooks.stopping = [mesh] {
    if (mesh) mesh->threadStopping();
  };
  hooks.advance = [this] { return advanceP2P(); };
  hooks.abandon = [this] { abandonP2P(); };
  progress_.start(
      [this](PendingOp& p) {
        std::lock_guard<std::mutex> e(execMu_);
        if (p.job) return p.job();
        if (!p.calls.empty()) return postAsyncP2P(&p);
        Status s = execute(p.args, p.device.get());
        if (!s.isOk()) setLastError(s.message());
        if (p.device) device_->releaseOp(p.device.get(), s);  // one that failed before running
        return s;
      },
      std::move(hooks));
  return Status::ok();
}

DeviceHooks CommImpl::deviceHooks() {
  DeviceHooks h;
  h.forcedAlgorithm = [this] { return forced_ != nullptr ? forced_->name() : nullptr; };
  h.context = [this](const CollArgs& a) { return context(a); };
  h.setLastAlgorithm = [this](const char* name) { lastAlgo_.store(name); };
  h.runHost = [this](const CollArgs& a) { return executeHost(a); };
  h.fail = [this](const Status& s) { return failure_->failed() ? s : fail(s); };
  return h;
}

CommImpl::~CommImpl() {
  if (bg_.joinable()) bg_.join();
  progress_.stop();  // queued device ops finish before the device path goes
  device_.reset();
  links_.clear();  // a child's lanes close; the family's connections stay for the others
  store_.reset();
  // Now, while this communicator's buffers live: the last one out lingers on the connections,
  // and a transport may still write into what a failed op had posted until it is closed.
  family_.reset();
}

Family::~Family() {
  if (mesh) mesh->linger(Deadline::afterMs(1000));
  mesh.reset();
  rv.store.reset();
  if (rv.server) rv.server->stop();
}

Status CommImpl::fail(const Status& s) {
  Status r = failure_->fail(s);
  if (family_) family_->noteFailure(r);
  return r;
}

Status CommImpl::checkFailed() {
  if (failure_->failed()) return failure_->failedError();
  if (!family_ || !family_->failed.load()) return Status::ok();
  std::string why;
  {
    std::lock_guard<std::mutex> l(family_->failMu);
    why = family_->firstFailure.message();
  }
  fail(remoteError("rank " + std::to_string(rank_) +
                   ": a communicator sharing this one's connections failed: " + why));
  return failure_->failedError();
}

AlgoContext CommImpl::context(const CollArgs& args) {
  AlgoContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.conns = conns_.data();
  ctx.poller = poller_.get();
  ctx.deadline = Deadline::afterMs(cfg_.timeoutMs);
  ctx.seq = ++seq_;
  ctx.chunkBytes = cfg_.chunkBytes;
  ctx.scratch = &scratch_;
  ctx.opName = collectiveName(args.coll);
  ctx.abortFlag = &aborting_;
  ctx.link = link_;
  ctx.localLink = localLink_;
  ctx.oversubscribed = oversubscribed_;
  ctx.hostOf = layout_.hostOf.data();
  return ctx;
}

Status CommImpl::execute(const CollArgs& args, DeviceOp* device) {
  if (isCreatedRedOp(args.op)) return executePreMulSum(args, device);
  if (args.memory == MemoryKind::kHost) {
    COLLIE_RETURN_IF_ERROR(checkFailed());
    return executeHost(args);
  }
  const Status failed = failure_->failed() ? failure_->failedError() : Status::ok();
  return device_->execute(args, device, failed, &aborting_);
}

Status CommImpl::executeHost(const CollArgs& args) {
  AlgoContext ctx = context(args);
  Algorithm* algo = nullptr;
  OnlineTuner::Trial* trial = nullptr;
  Status picked = pick(args, ctx, &algo, &trial);
  if (!picked.isOk()) {
    --seq_;
    return picked;
  }
  lastAlgo_.store(trial != nullptr ? trialName(algo) : algo->name());
  const uint64_t t0 = trial != nullptr ? nowNs() : 0;
  Status s = algo->run(args, ctx);
  if (s.isOk() && trial != nullptr) {
    online_.record(trial, static_cast<double>(nowNs() - t0) / 1e3);
    auto agree = [this](double* v, size_t n, const char* op) { return agreeOnMax(v, n, op); };
    if (online_.readyToSettle(trial)) s = settleTrial(&online_, trial, args, agree);
  }
  if (!s.isOk())
    s = fail(s.withContext(describeFrameTag(ctx.tagFor(args, 0, algo->id())) + " on " + who()));
  return s;
}

Status CommImpl::run(const CollArgs& args) {
  const int gate = gate_.load(std::memory_order_acquire);
  if (gate != kReady) return notReady(collectiveName(args.coll), gate);
  if (inGroup()) {  // runs at the group's end
    groupAdd(this, args);
    return Status::ok();
  }
  if (!cfg_.blocking) return queueCollective(args);
  progress_.waitIdle();
  std::lock_guard<std::mutex> e(execMu_);
  return execute(args);
}

Status CommImpl::runAsync(const CollArgs& args, std::shared_ptr<WorkState>* work) {
  COLLIE_RETURN_IF_ERROR(checkReady(collectiveName(args.coll)));
  *work = std::make_shared<WorkState>();
  std::shared_ptr<DeviceOp> op;
  if (args.memory == MemoryKind::kCuda) {
    // No stream: the op runs when the progress thread gets to it, in order with the others.
    COLLIE_RETURN_IF_ERROR(device_->ensureStaging(args.device));
    COLLIE_ASSIGN_OR_RETURN(op, device_->newOp(nullptr, false));
  }
  progress_.push(PendingOp{args, *work, op, {}, {}});
  return Status::ok();
}

Status CommImpl::runDevice(const CollArgs& args, void* stream) {
  COLLIE_RETURN_IF_ERROR(checkReady(collectiveName(args.coll)));
  COLLIE_RETURN_IF_ERROR(checkFailed());
  if (device_->usesNccl()) {
    // In call order with Collie's own queued ops, as every collective is.
    progress_.waitIdle();
    std::lock_guard<std::mutex> e(execMu_);
    return device_->runNccl(args, stream);
  }
  COLLIE_RETURN_IF_ERROR(device_->ensureStaging(args.device));
  COLLIE_ASSIGN_OR_RETURN(std::shared_ptr<DeviceOp> op, device_->newOp(stream, true));
  progress_.push(PendingOp{args, nullptr, op, {}, {}});
  // The stream's later work waits on an event recorded after the op, handed back here.
  return device_->finishOp(op.get());
}

void CommImpl::abort() {
  aborting_.store(true);
  std::lock_guard<std::mutex> e(execMu_);  // the running op sees the flag and returns
  if (device_) device_->abortNccl();
  fail(Status(collieRemoteError, "rank " + std::to_string(rank_) + " called collieCommAbort"));
}

}  // namespace collie
