// The C API: argument checks, the live-communicator registry, error strings and last errors.
// No exception crosses this boundary.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "collie/collie.h"
#include "src/base/dtype.h"
#include "src/base/log.h"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"

struct collieComm {
  std::unique_ptr<collie::CommImpl> impl;
};

namespace collie {

namespace {

std::mutex gLiveMu;
std::unordered_set<const collieComm*> gLive;  // guarded by gLiveMu
// Communicators destroyed so far. A thread that found a communicator live finds it live again,
// without the lock, while none was destroyed since: the check costs no lock on every call.
std::atomic<uint64_t> gDestroyed{0};
__attribute__((tls_model("initial-exec"))) thread_local const collieComm* tChecked = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t tCheckedAt = 0;
thread_local std::string tLastError;

collieResult_t report(collieComm_t comm, const Status& s) {
  if (s.isOk()) return collieSuccess;
  if (s.code() == collieInProgress) return collieInProgress;  // queued: not an error
  if (comm != nullptr && checkComm(comm).isOk()) comm->impl->setLastError(s.message());
  tLastError = s.message();
  COLLIE_INFO(kLogColl, "%s", s.toString().c_str());
  return s.code();
}

Status initWith(collieComm_t* out, StatusOr<BootstrapInfo> info) {
  if (!info.isOk()) return info.status();
  auto c = CommImpl::create(info.take());
  if (!c.isOk()) return c.status();
  *out = registerComm(c.take());
  return Status::ok();
}

}  // namespace

Status checkComm(const collieComm* comm) {
  if (comm == nullptr) return invalidArgument("comm is NULL");
  const uint64_t destroyed = gDestroyed.load(std::memory_order_acquire);
  if (comm == tChecked && destroyed == tCheckedAt) return Status::ok();
  std::lock_guard<std::mutex> l(gLiveMu);
  if (gLive.count(comm) == 0)
    return invalidUsage("comm is not a live communicator (destroyed, aborted or never created)");
  tChecked = comm;
  tCheckedAt = destroyed;
  return Status::ok();
}

CommImpl* commImpl(collieComm_t comm) { return comm->impl.get(); }

collieComm_t registerComm(std::unique_ptr<CommImpl> impl) {
  auto* comm = new collieComm{std::move(impl)};
  std::lock_guard<std::mutex> l(gLiveMu);
  gLive.insert(comm);
  return comm;
}

collieResult_t reportStatus(collieComm_t comm, const Status& s) { return report(comm, s); }

collieResult_t reportException(collieComm_t comm) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return report(comm, systemError("out of memory"));
  } catch (const std::exception& e) {
    return report(comm, internalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(comm, internalError("unexpected exception"));
  }
}

}  // namespace collie

using collie::Status;

extern "C" {

collieResult_t collieGetVersion(int* version) {
  if (version == nullptr)
    return collie::report(nullptr, collie::invalidArgument("version is NULL"));
  *version = COLLIE_VERSION_CODE;
  return collieSuccess;
}

collieResult_t collieGetUniqueId(collieUniqueId* uniqueId) {
  return collie::apiCall(nullptr, [&]() -> Status {
    if (uniqueId == nullptr) return collie::invalidArgument("collieGetUniqueId: uniqueId is NULL");
    return collie::makeUniqueId(uniqueId);
  });
}

collieResult_t collieCommInitRank(collieComm_t* comm, int nranks, collieUniqueId commId, int rank) {
  return collie::apiCall(nullptr, [&]() -> Status {
    if (comm == nullptr) return collie::invalidArgument("collieCommInitRank: comm is NULL");
    *comm = nullptr;
    if (nranks < 1)
      return collie::invalidArgument("collieCommInitRank: nranks " + std::to_string(nranks) +
                                     " must be >= 1");
    if (rank < 0 || rank >= nranks)
      return collie::invalidArgument("collieCommInitRank: rank " + std::to_string(rank) +
                                     " is out of range for nranks " + std::to_string(nranks));
    return collie::initWith(comm, collie::bootstrapFromId(commId, nranks, rank));
  });
}

collieResult_t collieCommInitFromEnv(collieComm_t* comm) {
  return collie::apiCall(nullptr, [&]() -> Status {
    if (comm == nullptr) return collie::invalidArgument("collieCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    auto info = collie::bootstrapFromEnv();
    if (info.isOk() && (info.value().nranks < 1 || info.value().rank >= info.value().nranks))
      return collie::invalidArgument(
          "collieCommInitFromEnv: rank " + std::to_string(info.value().rank) +
          " is out of range for world size " + std::to_string(info.value().nranks));
    return collie::initWith(comm, std::move(info));
  });
}

static collieResult_t destroyComm(collieComm_t comm, bool abort) {
  return collie::apiCall(nullptr, [&]() -> Status {
    {
      std::lock_guard<std::mutex> l(collie::gLiveMu);
      if (comm == nullptr) return collie::invalidArgument("comm is NULL");
      if (collie::gLive.erase(comm) == 0)
        return collie::invalidUsage(
            "comm is not a live communicator (destroyed twice, aborted or never created)");
      collie::gDestroyed.fetch_add(1, std::memory_order_release);
    }
    collie::CommImpl::destroy(std::move(comm->impl), abort);
    delete comm;
    return Status::ok();
  });
}

collieResult_t collieCommDestroy(collieComm_t comm) { return destroyComm(comm, false); }
collieResult_t collieCommAbort(collieComm_t comm) { return destroyComm(comm, true); }

collieResult_t collieCommCount(const collieComm_t comm, int* count) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    if (count == nullptr) return collie::invalidArgument("collieCommCount: count is NULL");
    COLLIE_RETURN_IF_ERROR(comm->impl->checkSetUp("collieCommCount"));
    *count = comm->impl->size();
    return Status::ok();
  });
}

collieResult_t collieCommUserRank(const collieComm_t comm, int* rank) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    if (rank == nullptr) return collie::invalidArgument("collieCommUserRank: rank is NULL");
    COLLIE_RETURN_IF_ERROR(comm->impl->checkSetUp("collieCommUserRank"));
    *rank = comm->impl->rank();
    return Status::ok();
  });
}

collieResult_t collieCommGetAsyncError(collieComm_t comm, collieResult_t* asyncError) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    if (asyncError == nullptr) return collie::invalidArgument("asyncError is NULL");
    *asyncError = comm->impl->asyncError().code();
    return Status::ok();
  });
}

static collieResult_t runCollective(collie::Collective coll, const void* sendbuff, void* recvbuff,
                                    size_t count, int datatype, int op, int root, collieComm_t comm,
                                    void* stream) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    collie::CollArgs a;
    COLLIE_RETURN_IF_ERROR(
        collie::makeCollArgsOn(comm, coll, sendbuff, recvbuff, count, datatype, op, root, &a));
    // Host memory ignores the stream and returns with the result; device memory returns once
    // the op is done, with the stream's later work ordered after it by an event.
    if (a.memory == collie::MemoryKind::kCuda) return comm->impl->runDevice(a, stream);
    return comm->impl->run(a);
  });
}

collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               collieDataType_t datatype, collieRedOp_t op, collieComm_t comm,
                               void* stream) {
  return runCollective(collie::Collective::kAllReduce, sendbuff, recvbuff, count,
                       collie::enumBits(datatype), collie::enumBits(op), -1, comm, stream);
}

collieResult_t collieReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   collieDataType_t datatype, collieRedOp_t op, collieComm_t comm,
                                   void* stream) {
  return runCollective(collie::Collective::kReduceScatter, sendbuff, recvbuff, recvcount,
                       collie::enumBits(datatype), collie::enumBits(op), -1, comm, stream);
}

collieResult_t collieAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               collieDataType_t datatype, collieComm_t comm, void* stream) {
  return runCollective(collie::Collective::kAllGather, sendbuff, recvbuff, sendcount,
                       collie::enumBits(datatype), collieSum, -1, comm, stream);
}

collieResult_t collieBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               collieDataType_t datatype, int root, collieComm_t comm,
                               void* stream) {
  return runCollective(collie::Collective::kBroadcast, sendbuff, recvbuff, count,
                       collie::enumBits(datatype), collieSum, root, comm, stream);
}

collieResult_t collieReduce(const void* sendbuff, void* recvbuff, size_t count,
                            collieDataType_t datatype, collieRedOp_t op, int root,
                            collieComm_t comm, void* stream) {
  return runCollective(collie::Collective::kReduce, sendbuff, recvbuff, count,
                       collie::enumBits(datatype), collie::enumBits(op), root, comm, stream);
}

collieResult_t collieBarrier(collieComm_t comm) {
  return runCollective(collie::Collective::kBarrier, nullptr, nullptr, 0, collieUint8, collieSum,
                       -1, comm, nullptr);
}

collieResult_t collieCommSetAlgorithm(collieComm_t comm, const char* name) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    return comm->impl->setAlgorithm(name == nullptr ? "" : name);
  });
}

collieResult_t collieCommLastAlgorithm(collieComm_t comm, const char** name) {
  return collie::apiCall(comm, [&]() -> Status {
    COLLIE_RETURN_IF_ERROR(collie::checkComm(comm));
    if (name == nullptr) return collie::invalidArgument("collieCommLastAlgorithm: name is NULL");
    *name = comm->impl->lastAlgorithm();
    return Status::ok();
  });
}

const char* collieGetErrorString(collieResult_t result) {
  switch (result) {
    case collieSuccess:
      return "no error";
    case collieUnhandledSystemError:
      return "unhandled system error";
    case collieSystemError:
      return "system error (a system call failed)";
    case collieInternalError:
      return "internal error (a bug in Collie)";
    case collieInvalidArgument:
      return "invalid argument";
    case collieInvalidUsage:
      return "invalid usage";
    case collieRemoteError:
      return "remote process failed or exited";
    case collieInProgress:
      return "operation in progress";
    case collieTimeout:
      return "operation timed out";
    default:
      return "unknown result code";
  }
}

const char* collieGetLastError(collieComm_t comm) {
  static thread_local std::string copy;
  if (comm != nullptr && collie::checkComm(comm).isOk()) {
    copy = comm->impl->lastError();
    return copy.c_str();
  }
  return collie::tLastError.c_str();
}

}  // extern "C"
