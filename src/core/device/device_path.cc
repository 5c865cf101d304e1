// The device path: staging made at the first device call, the device ring and tree, NCCL.
#include "src/core/device/device_path.h"

#include <cstring>
#include <mutex>

#include "src/base/params.h"
#ifdef COLLIE_HAVE_CUDA
#include "src/base/cuda_device_guard.h"
#include "src/core/device/cuda_path.h"
#include "src/core/device/device_ipc.h"
#include "src/core/device/device_staging.h"
#endif
#ifdef COLLIE_HAVE_NCCL
#include "src/backends/nccl/nccl_backend.h"
#endif

namespace collie {

namespace {

constexpr const char* kNoCuda = "device memory given but this build has no CUDA support";
#ifdef COLLIE_HAVE_NCCL
constexpr bool kHaveNccl = true;
constexpr const char* kBuildBackends = "collie, nccl";
#else
constexpr bool kHaveNccl = false;
constexpr const char* kBuildBackends = "collie";
#endif

}  // namespace

struct DeviceState {
#ifdef COLLIE_HAVE_CUDA
  std::mutex mu;
  std::unique_ptr<DeviceIpc> ipc;          // guarded by mu; outlives staging's stream
  std::unique_ptr<DeviceStaging> staging;  // guarded by mu: made by the first device call
#endif
#ifdef COLLIE_HAVE_NCCL
  std::unique_ptr<NcclBackend> nccl;  // COLLIE_BACKEND=nccl
#endif
};

Status DevicePath::checkBackend(const std::string& backend) {
  if (backend == "collie" || (backend == "nccl" && kHaveNccl)) return Status::ok();
  return invalidArgument("COLLIE_BACKEND=" + backend + " is not a backend of this build (" +
                         kBuildBackends + ")");
}

DevicePath::DevicePath(int rank, int nranks, int64_t timeoutMs, bool oneHost, Store* store,
                       DeviceHooks hooks)
    : rank_(rank),
      nranks_(nranks),
      timeoutMs_(timeoutMs),
      oneHost_(oneHost),
      store_(store),
      hooks_(std::move(hooks)),
      state_(new DeviceState()) {}

DevicePath::~DevicePath() = default;

Status DevicePath::setUpBackend(const std::string& backend, const std::vector<std::string>& hosts,
                                const Deadline& deadline) {
  if (backend != "nccl") return Status::ok();
#ifdef COLLIE_HAVE_NCCL
  COLLIE_ASSIGN_OR_RETURN(state_->nccl,
                          NcclBackend::create(store_, rank_, nranks_, hosts, timeoutMs_, deadline));
  return Status::ok();
#else
  return invalidArgument("COLLIE_BACKEND=nccl: this build has no NCCL");
#endif
}

bool DevicePath::usesNccl() const {
#ifdef COLLIE_HAVE_NCCL
  return state_->nccl != nullptr;
#else
  return false;
#endif
}

Status DevicePath::runNccl(const CollArgs& args, void* stream) {
#ifdef COLLIE_HAVE_NCCL
  Status s = state_->nccl->run(args, stream);
  if (!s.isOk()) hooks_.fail(s);
  return s;
#else
  return internalError("no NCCL in this build");
#endif
}

void DevicePath::abortNccl() {
#ifdef COLLIE_HAVE_NCCL
  if (state_->nccl) state_->nccl->abort();
#endif
}

#ifdef COLLIE_HAVE_CUDA

Status DevicePath::ensureStaging(int device) {
  std::lock_guard<std::mutex> l(state_->mu);
  if (state_->staging) {
    if (state_->staging->device() == device) return Status::ok();
    return invalidArgument("device buffers on CUDA device " + std::to_string(device) +
                           " but this communicator works on device " +
                           std::to_string(state_->staging->device()) +
                           " (one device per communicator, as with NCCL)");
  }
  CurrentDeviceGuard keep;  // set-up selects the device; the caller's stays current
  // Room for one 4 KiB piece per rank (AllGather, ReduceScatter cut by rank).
  const size_t bytes = std::max(static_cast<size_t>(params().getInt("COLLIE_CUDA_STAGING_BYTES")),
                                size_t(4096) * static_cast<size_t>(nranks_));
  COLLIE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceStaging> staging,
                          DeviceStaging::create(device, bytes));
  state_->staging = std::move(staging);
  Status s = setUpIpc(device);
  if (!s.isOk()) state_->staging.reset();
  return s;
}

Status DevicePath::setUpIpc(int device) {
  COLLIE_ASSIGN_OR_RETURN(CudaPath path, parseCudaPath(params().getString("COLLIE_CUDA_PATH")));
  COLLIE_ASSIGN_OR_RETURN(bool tryRing, tryDeviceRing(path, nranks_, oneHost_));
  if (!tryRing) return Status::ok();
  DeviceIpcConfig dc;
  dc.device = device;
  dc.rank = rank_;
  dc.nranks = nranks_;
  dc.path = path;
  dc.slotBytes = static_cast<size_t>(
      std::max<int64_t>(4096, params().getInt("COLLIE_CUDA_SLOT_BYTES")) & ~int64_t(255));
  dc.nslots = static_cast<int>(std::max<int64_t>(1, params().getInt("COLLIE_CUDA_SLOTS")));
  COLLIE_ASSIGN_OR_RETURN(state_->ipc,
                          DeviceIpc::create(dc, store_, Deadline::afterMs(timeoutMs_)));
  DeviceIpc* ipc = state_->ipc.get();
  if (ipc == nullptr) return Status::ok();
  // COLLIE_ALGO / collieCommSetAlgorithm: ring and tree run on the device, the other
  // algorithms over staging.
  auto forcedIs = [this](const char* name) {
    const char* f = hooks_.forcedAlgorithm();
    return f != nullptr && strcmp(f, name) == 0;
  };
  state_->staging->setAllReduce(
      [this, forcedIs](const CollArgs&) {
        return hooks_.forcedAlgorithm() == nullptr || forcedIs("ring") || forcedIs("tree");
      },
      [this, ipc, forcedIs](const CollArgs& a, void* stream, const Deadline& d,
                            const std::atomic<bool>*) {
        AlgoContext ctx = hooks_.context(a);
        ctx.deadline = d;
        const bool tree = hooks_.forcedAlgorithm() != nullptr
                              ? forcedIs("tree")
                              : pickDeviceAlgo(nranks_, a.count * dtypeSize(a.dtype), kDeviceHopUs,
                                               kDeviceGBps) == DeviceAlgo::kTree;
        hooks_.setLastAlgorithm(tree ? "device_tree" : "device_ring");
        return tree ? ipc->runTree(a, stream, ctx) : ipc->runRing(a, stream, ctx);
      });
  return Status::ok();
}

StatusOr<std::shared_ptr<DeviceOp>> DevicePath::newOp(void* stream, bool onStream) {
  auto op = std::make_shared<DeviceOp>();
  if (!onStream) return op;
  // The caller waits a little longer than the op may take, then gives up.
  COLLIE_RETURN_IF_ERROR(state_->staging->enqueue(stream, timeoutMs_ + 10000, op.get()));
  return op;
}

Status DevicePath::finishOp(DeviceOp* op) {
  DeviceStaging* staging = nullptr;
  {
    std::lock_guard<std::mutex> l(state_->mu);  // not held while waiting: execute takes it
    staging = state_->staging.get();
  }
  return staging != nullptr ? staging->finish(op) : internalError("device op without staging");
}

void DevicePath::releaseOp(DeviceOp* op, const Status& s) {
  DeviceStaging* staging = nullptr;
  {
    std::lock_guard<std::mutex> l(state_->mu);
    staging = state_->staging.get();
  }
  if (staging != nullptr) staging->close(op, s);
}

Status DevicePath::execute(const CollArgs& args, DeviceOp* op, const Status& failedEarlier,
                           const std::atomic<bool>* aborting) {
  DeviceOp none;
  if (op == nullptr) op = &none;
  DeviceStaging* staging = nullptr;
  {
    std::lock_guard<std::mutex> l(state_->mu);
    staging = state_->staging.get();
  }
  if (!failedEarlier.isOk() || staging == nullptr) {
    Status s = !failedEarlier.isOk() ? failedEarlier : internalError("device op without staging");
    if (staging != nullptr)
      staging->close(op, s);
    else if (op->gate)
      op->gate->open(s);
    return s;
  }
  Status s = staging->run(args, rank_, nranks_, op, Deadline::afterMs(timeoutMs_), aborting,
                          hooks_.runHost);
  if (!s.isOk())
    hooks_.fail(s.withContext(std::string(collectiveName(args.coll)) + " on device memory, rank " +
                              std::to_string(rank_)));
  return s;
}

#else  // no CUDA

Status DevicePath::ensureStaging(int) { return invalidArgument(kNoCuda); }
Status DevicePath::setUpIpc(int) { return invalidArgument(kNoCuda); }
StatusOr<std::shared_ptr<DeviceOp>> DevicePath::newOp(void*, bool) {
  return invalidArgument(kNoCuda);
}
Status DevicePath::finishOp(DeviceOp*) { return invalidArgument(kNoCuda); }
void DevicePath::releaseOp(DeviceOp*, const Status&) {}
Status DevicePath::execute(const CollArgs&, DeviceOp*, const Status&, const std::atomic<bool>*) {
  return invalidArgument(kNoCuda);
}

#endif

}  // namespace collie
