// NcclBackend (see nccl_backend.h). The communicator is non-blocking (config.blocking = 0) so
// that its init and every call can be waited for with a deadline instead of hanging.
#include "src/backends/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "src/backends/nccl/nccl_bootstrap.h"
#include "src/base/cuda_status.h"
#include "src/base/dtype.h"
#include "src/base/log.h"

namespace collie {

// The NCCL entry points the backend calls, listed once: X(member of NcclApi, NCCL function).
#define COLLIE_NCCL_API(X)                  \
  X(getUniqueId, ncclGetUniqueId)           \
  X(initRankConfig, ncclCommInitRankConfig) \
  X(allReduce, ncclAllReduce)               \
  X(reduceScatter, ncclReduceScatter)       \
  X(allGather, ncclAllGather)               \
  X(broadcast, ncclBroadcast)               \
  X(reduce, ncclReduce)                     \
  X(finalize, ncclCommFinalize)             \
  X(destroy, ncclCommDestroy)               \
  X(abort, ncclCommAbort)                   \
  X(asyncError, ncclCommGetAsyncError)      \
  X(errorString, ncclGetErrorString)        \
  X(lastError, ncclGetLastError)

struct NcclApi {
#define COLLIE_X(member, fn) decltype(&fn) member = nullptr;
  COLLIE_NCCL_API(COLLIE_X)
#undef COLLIE_X
};

namespace {

#ifndef COLLIE_NCCL_LIBDIR
#define COLLIE_NCCL_LIBDIR ""
#endif

// Loaded once per process; the library stays loaded (NCCL keeps threads of its own).
StatusOr<const NcclApi*> loadNccl() {
  static std::once_flag once;
  static NcclApi api;
  static std::string error;
  std::call_once(once, [] {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    std::string tried = "libnccl.so.2";
    if (h == nullptr && COLLIE_NCCL_LIBDIR[0] != '\0') {
      std::string p = std::string(COLLIE_NCCL_LIBDIR) + "/libnccl.so.2";
      tried += ", " + p;
      h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (h == nullptr) {
      error = "cannot load NCCL (tried " + tried + "): " + dlerror() +
              " (add NCCL's lib folder to LD_LIBRARY_PATH)";
      return;
    }
    bool ok = true;
    auto sym = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(h, name));
      if (*fn == nullptr) ok = false, error = std::string("libnccl lacks ") + name;
    };
#define COLLIE_X(member, fn) sym(&api.member, #fn);
    COLLIE_NCCL_API(COLLIE_X)
#undef COLLIE_X
    if (!ok) api.getUniqueId = nullptr;
  });
  if (api.getUniqueId == nullptr) return systemError(error);
  return &api;
}

// NCCL's dtype and op for each of ours, in the order of collieDataType_t and collieRedOp_t
// (their values are part of the public ABI).
// NCCL has the 8-bit floats from 2.24 on; an older one refuses them (ncclNumTypes).
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 22400
#define COLLIE_NCCL_FP8 ncclFloat8e4m3, ncclFloat8e5m2
#else
#define COLLIE_NCCL_FP8 ncclNumTypes, ncclNumTypes
#endif
constexpr ncclDataType_t kNcclTypes[collieNumTypes] = {
    ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, COLLIE_NCCL_FP8};
#undef COLLIE_NCCL_FP8
constexpr ncclRedOp_t kNcclOps[collieNumOps] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
static_assert(collieFloat16 == 6 && collieBfloat16 == 9 && collieAvg == 4,
              "kNcclTypes and kNcclOps follow the enums' order");

ncclDataType_t ncclType(collieDataType_t t) { return validDtype(t) ? kNcclTypes[t] : ncclNumTypes; }
ncclRedOp_t ncclOp(collieRedOp_t op) { return validRedOp(op) ? kNcclOps[op] : ncclNumOps; }

}  // namespace

Status NcclBackend::waitInProgress(const char* what, const Deadline& deadline) {
  auto comm = static_cast<ncclComm_t>(comm_);
  for (;;) {
    ncclResult_t r = ncclInProgress;
    ncclResult_t q = api_->asyncError(comm, &r);
    if (q != ncclSuccess) r = q;
    if (r == ncclSuccess) return Status::ok();
    if (r != ncclInProgress)
      return remoteError(std::string("NCCL ") + what + " failed: " + api_->errorString(r) + ": " +
                         api_->lastError(comm));
    if (deadline.expired())
      return timeoutError(std::string("NCCL ") + what + " did not finish before the deadline " +
                          "(see COLLIE_TIMEOUT_MS; NCCL_SOCKET_IFNAME=lo for local runs)");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

StatusOr<std::unique_ptr<NcclBackend>> NcclBackend::create(Store* store, int rank, int nranks,
                                                           const std::vector<std::string>& hosts,
                                                           int64_t timeoutMs,
                                                           const Deadline& deadline) {
  COLLIE_ASSIGN_OR_RETURN(const NcclApi* api, loadNccl());
  int dev = 0;
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaGetDevice(&dev), "COLLIE_BACKEND=nccl: cudaGetDevice"));
  char bus[64] = {0};
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev),
                                    "COLLIE_BACKEND=nccl: cudaDeviceGetPCIBusId"));
  COLLIE_RETURN_IF_ERROR(store->set("ncclgpu/" + std::to_string(rank), bus));
  std::vector<std::string> keys, gpus(nranks);
  for (int r = 0; r < nranks; ++r) keys.push_back("ncclgpu/" + std::to_string(r));
  COLLIE_RETURN_IF_ERROR(store->wait(keys, deadline, nullptr));
  for (int r = 0; r < nranks; ++r) {
    COLLIE_ASSIGN_OR_RETURN(gpus[r], store->get(keys[r], deadline));
  }
  COLLIE_RETURN_IF_ERROR(checkOneGpuPerRank(hosts, gpus, rank));

  std::string id;
  auto make = [api](std::string* out) -> Status {
    ncclUniqueId u;
    ncclResult_t r = api->getUniqueId(&u);
    if (r != ncclSuccess)
      return systemError(std::string("ncclGetUniqueId: ") + api->errorString(r));
    out->assign(u.internal, sizeof(u.internal));
    return Status::ok();
  };
  COLLIE_RETURN_IF_ERROR(
      shareNcclId(store, "ncclid", rank, NCCL_UNIQUE_ID_BYTES, make, deadline, &id));
  ncclUniqueId u;
  memcpy(u.internal, id.data(), sizeof(u.internal));

  std::unique_ptr<NcclBackend> b(new NcclBackend());
  b->api_ = api;
  b->rank_ = rank;
  b->timeoutMs_ = timeoutMs;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = api->initRankConfig(&comm, nranks, u, rank, &config);
  b->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress)
    return systemError(std::string("ncclCommInitRankConfig: ") + api->errorString(r) + ": " +
                       api->lastError(comm));
  COLLIE_RETURN_IF_ERROR(b->waitInProgress("communicator init", deadline));
  COLLIE_INFO(kLogInit, "rank %d of %d: NCCL communicator on GPU %s", rank, nranks, bus);
  return b;
}

Status NcclBackend::run(const CollArgs& args, void* stream) {
  auto comm = static_cast<ncclComm_t>(comm_);
  auto st = static_cast<cudaStream_t>(stream);
  const ncclDataType_t t = ncclType(args.dtype);
  const ncclRedOp_t op = ncclOp(args.op);
  ncclResult_t r = ncclInvalidUsage;
  const char* what = "ncclAllReduce";
  switch (args.coll) {
    case Collective::kAllReduce:
      r = api_->allReduce(args.send, args.recv, args.count, t, op, comm, st);
      break;
    case Collective::kReduceScatter:
      what = "ncclReduceScatter";
      r = api_->reduceScatter(args.send, args.recv, args.count, t, op, comm, st);
      break;
    case Collective::kAllGather:
      what = "ncclAllGather";
      r = api_->allGather(args.send, args.recv, args.count, t, comm, st);
      break;
    case Collective::kBroadcast:
      what = "ncclBroadcast";
      r = api_->broadcast(args.send, args.recv, args.count, t, args.root, comm, st);
      break;
    case Collective::kReduce:
      what = "ncclReduce";
      r = api_->reduce(args.send, args.recv, args.count, t, op, args.root, comm, st);
      break;
    default:
      return invalidArgument(std::string(collectiveName(args.coll)) +
                             " is not forwarded to NCCL (COLLIE_BACKEND=nccl)");
  }
  if (r == ncclInProgress) return waitInProgress(what, Deadline::afterMs(timeoutMs_));
  if (r != ncclSuccess)
    return remoteError(std::string(what) + ": " + api_->errorString(r) + ": " +
                       api_->lastError(comm));
  return Status::ok();
}

void NcclBackend::abort() {
  if (comm_ != nullptr) api_->abort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
}

NcclBackend::~NcclBackend() {
  if (comm_ == nullptr) return;
  auto comm = static_cast<ncclComm_t>(comm_);
  ncclResult_t r = api_->finalize(comm);
  Status s = r == ncclSuccess || r == ncclInProgress
                 ? waitInProgress("finalize", Deadline::afterMs(timeoutMs_))
                 : remoteError("ncclCommFinalize failed");
  if (s.isOk())
    api_->destroy(comm);
  else
    api_->abort(comm);
}

}  // namespace collie
