// Device buffers over host transports: a collective on device memory runs on the progress
// thread as the host schedule over pinned staging chunks (staging_plan.h cuts each collective). Two
// chunks are in flight: while the host schedule reduces one, the copy stream brings the next one
// down and the previous result back up, each step ordered by events. The user's stream is honoured
// with events only: the op starts once the stream has reached the call (an event recorded there),
// and the stream's later work waits (cudaStreamWaitEvent) on an event recorded on the private
// stream after the op's last copy, handed back to the caller's thread through a StreamGate. No
// host callback ever blocks. Built only with CUDA; streams and events are void* here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "algorithms/algorithm.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "src/core/device/stream_gate.h"

namespace collie {

// What the caller's thread leaves for the progress thread, and what comes back.
struct DeviceOp {
  ~DeviceOp();
  void* stream = nullptr;  // the user's cudaStream_t; null for an op without a stream
  void* ready = nullptr;   // cudaEvent_t recorded on the user's stream at the call; may be null
  void* done = nullptr;    // cudaEvent_t recorded on the private stream after the op's work
  std::shared_ptr<StreamGate> gate;  // opened once done is recorded; may be null
};

class DeviceStaging {
 public:
  using HostRun = std::function<Status(const CollArgs&)>;
  // An AllReduce that stays on the device (device_ring.h): runs on stream, returns once the
  // stream has finished it.
  using DeviceRun = std::function<Status(const CollArgs&, void* stream, const Deadline&,
                                         const std::atomic<bool>* abortFlag)>;
  ~DeviceStaging();
  // On the caller's thread (pinned allocation may synchronise the device, which must not happen
  // while a stream waits at a gate).
  static StatusOr<std::unique_ptr<DeviceStaging>> create(int device, size_t chunkBytes);
  int device() const { return device_; }
  // Caller's thread: records the ready event on stream and makes the op's gate.
  Status enqueue(void* stream, int64_t gateTimeoutMs, DeviceOp* op);
  // Caller's thread, after the op was queued: waits at its gate, then orders the user's stream
  // after the op's device work (cudaStreamWaitEvent). Returns the op's status.
  Status finish(DeviceOp* op);
  using Takes = std::function<bool(const CollArgs&)>;
  // Set once before the first op: the AllReduces that takes says yes to run through run
  // instead of staging.
  void setAllReduce(Takes takes, DeviceRun run) {
    takes_ = std::move(takes);
    allReduce_ = std::move(run);
  }
  // Progress thread: runs the op (hostRun runs the schedule on host buffers), drains the
  // private stream after an error, then records done and opens the gate.
  Status run(const CollArgs& args, int rank, int nranks, DeviceOp* op, const Deadline& deadline,
             const std::atomic<bool>* abortFlag, const HostRun& hostRun);
  // Progress thread: hands op back with s unless run already did (an op that never ran).
  void close(DeviceOp* op, Status s);

 private:
  DeviceStaging() = default;
  Status runStaged(const CollArgs& args, int rank, int nranks, const Deadline& deadline,
                   const std::atomic<bool>* abortFlag, const HostRun& hostRun);
  Status runOp(const CollArgs& args, int rank, int nranks, DeviceOp* op, const Deadline& deadline,
               const std::atomic<bool>* abortFlag, const HostRun& hostRun);
  Status drain(const Deadline& deadline, const std::atomic<bool>* abortFlag, const char* what);
  int device_ = 0;
  size_t chunkBytes_ = 0;
  void* stream_ = nullptr;  // cudaStream_t, non-blocking: never waits on the legacy stream
  char* pinned_[2] = {};    // chunkBytes_ each
  void* downDone_[2] = {};  // cudaEvent_t: chunk in pinned_[i] is on the host
  Takes takes_;
  DeviceRun allReduce_;
};

}  // namespace collie
