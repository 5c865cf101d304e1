// Device memory: the staging of device buffers through the host schedules, the device ring and
// tree over CUDA IPC, and the NCCL backend. Built without CUDA, every call says so.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/core/bootstrap/store.h"

namespace collie {

struct DeviceOp;
struct DeviceState;

// What the device path asks of its communicator.
struct DeviceHooks {
  std::function<const char*()> forcedAlgorithm;  // its name, or null where the tuner picks
  std::function<AlgoContext(const CollArgs&)> context;
  std::function<void(const char*)> setLastAlgorithm;
  std::function<Status(const CollArgs&)> runHost;  // a staged op's host schedule
  std::function<Status(const Status&)> fail;       // fails the communicator
};

class DevicePath {
 public:
  // An error where the build has no such backend ("collie" always; "nccl" with NCCL).
  static Status checkBackend(const std::string& backend);
  DevicePath(int rank, int nranks, int64_t timeoutMs, bool oneHost, Store* store,
             DeviceHooks hooks);
  ~DevicePath();
  // COLLIE_BACKEND=nccl: NCCL's communicator, made over this one's store.
  Status setUpBackend(const std::string& backend, const std::vector<std::string>& hosts,
                      const Deadline& deadline);
  bool usesNccl() const;
  Status runNccl(const CollArgs& args, void* stream);
  void abortNccl();
  // The first device call makes the staging for its device; later ones must use the same.
  Status ensureStaging(int device);
  // A new op's bookkeeping; on a stream, the op starts once the stream reaches the call.
  // onStream false: an op that no stream orders (stream is ignored).
  StatusOr<std::shared_ptr<DeviceOp>> newOp(void* stream, bool onStream);
  // Caller's thread, once the op is queued: waits for it, then orders its stream after the op's
  // device work (an event). Returns the op's status.
  Status finishOp(DeviceOp* op);
  // Progress thread: hands back an op that ended before execute() ran it.
  void releaseOp(DeviceOp* op, const Status& s);
  // Runs a queued device op; failedEarlier (an error) opens its gate at once.
  Status execute(const CollArgs& args, DeviceOp* op, const Status& failedEarlier,
                 const std::atomic<bool>* aborting);

 private:
  Status setUpIpc(int device);
  int rank_;
  int nranks_;
  int64_t timeoutMs_;
  bool oneHost_;
  Store* store_;
  DeviceHooks hooks_;
  std::unique_ptr<DeviceState> state_;
};

}  // namespace collie
