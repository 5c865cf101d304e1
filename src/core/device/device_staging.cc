// DeviceStaging (see device_staging.h).
#include "src/core/device/device_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <thread>

#include "src/base/cuda_device_guard.h"
#include "src/base/cuda_status.h"
#include "src/core/device/staging_plan.h"

namespace collie {
namespace {

#define COLLIE_CUDA_RETURN(call, what) COLLIE_RETURN_IF_ERROR(cudaStatus((call), (what)))

// Polls an event until it completes, the deadline passes or an abort is asked for: a sleeping
// wait (cudaEventSynchronize) could not be bounded.
Status waitEvent(void* ev, const Deadline& deadline, const std::atomic<bool>* abortFlag,
                 const char* what) {
  for (int spins = 0;; ++spins) {
    cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev));
    if (e == cudaSuccess) return Status::ok();
    if (e != cudaErrorNotReady) return cudaStatus(e, what);
    if (abortFlag != nullptr && abortFlag->load())
      return remoteError(std::string(what) + ": the communicator was aborted");
    if (deadline.expired())
      return timeoutError(std::string(what) +
                          ": the device did not get there before the "
                          "deadline (see COLLIE_TIMEOUT_MS)");
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// After an error, how long the private stream may take to finish the copies it was given.
constexpr int64_t kErrorDrainMs = 10000;

}  // namespace

DeviceOp::~DeviceOp() {
  if (ready != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ready));
  if (done != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(done));
}

StatusOr<std::unique_ptr<DeviceStaging>> DeviceStaging::create(int device, size_t chunkBytes) {
  std::unique_ptr<DeviceStaging> s(new DeviceStaging());
  s->device_ = device;
  s->chunkBytes_ = std::max<size_t>(chunkBytes & ~size_t(63), 4096);
  CurrentDeviceGuard keep;
  COLLIE_CUDA_RETURN(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  cudaStream_t st = nullptr;
  COLLIE_CUDA_RETURN(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
  s->stream_ = st;
  for (int i = 0; i < 2; ++i) {
    void* p = nullptr;
    COLLIE_CUDA_RETURN(cudaHostAlloc(&p, s->chunkBytes_, cudaHostAllocPortable),
                       "cudaHostAlloc of " + std::to_string(s->chunkBytes_) + " staging bytes");
    s->pinned_[i] = static_cast<char*>(p);
    cudaEvent_t ev = nullptr;
    COLLIE_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    s->downDone_[i] = ev;
  }
  return s;
}

DeviceStaging::~DeviceStaging() {
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (int i = 0; i < 2; ++i) {
    if (downDone_[i]) cudaEventDestroy(static_cast<cudaEvent_t>(downDone_[i]));
    if (pinned_[i]) cudaFreeHost(pinned_[i]);
  }
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

Status DeviceStaging::enqueue(void* stream, int64_t gateTimeoutMs, DeviceOp* op) {
  CurrentDeviceGuard keep;
  COLLIE_CUDA_RETURN(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  auto st = static_cast<cudaStream_t>(stream);
  op->stream = stream;
  cudaEvent_t ev = nullptr;
  COLLIE_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  op->ready = ev;
  COLLIE_CUDA_RETURN(cudaEventRecord(ev, st), "cudaEventRecord on the caller's stream");
  cudaEvent_t done = nullptr;
  COLLIE_CUDA_RETURN(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  op->done = done;
  op->gate = std::make_shared<StreamGate>(gateTimeoutMs);
  return Status::ok();
}

Status DeviceStaging::finish(DeviceOp* op) {
  if (!op->gate) return Status::ok();
  Status s = op->gate->wait();
  if (!op->gate->isOpen()) return s;  // the op may still run: its done event means nothing yet
  s = op->gate->wait();
  CurrentDeviceGuard keep;
  Status w = cudaStatus(cudaSetDevice(device_), "cudaSetDevice");
  if (w.isOk())
    w = cudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(op->stream),
                                       static_cast<cudaEvent_t>(op->done), 0),
                   "cudaStreamWaitEvent on the caller's stream");
  return s.isOk() ? w : s;
}

Status DeviceStaging::run(const CollArgs& args, int rank, int nranks, DeviceOp* op,
                          const Deadline& deadline, const std::atomic<bool>* abortFlag,
                          const HostRun& hostRun) {
  Status s = runOp(args, rank, nranks, op, deadline, abortFlag, hostRun);
  if (!s.isOk()) {
    // A failed step can leave copies into recv or the peers' slots on the private stream: they
    // end before the caller hears of the error and may reuse its buffers. An abort does not
    // cut this wait short, since the copies would still run.
    Status d = drain(Deadline::afterMs(kErrorDrainMs), nullptr, "draining after the error");
    if (!d.isOk())
      s = Status(s.code(), s.message() + "; " + d.message() +
                               " (the caller's stream waits for those copies)");
  }
  close(op, s);
  return s;
}

void DeviceStaging::close(DeviceOp* op, Status s) {
  if (!op->gate || op->gate->isOpen()) return;
  if (op->done != nullptr) {
    // The caller's stream waits on this: after everything the private stream was given.
    Status r = cudaStatus(cudaSetDevice(device_), "cudaSetDevice");
    if (r.isOk())
      r = cudaStatus(
          cudaEventRecord(static_cast<cudaEvent_t>(op->done), static_cast<cudaStream_t>(stream_)),
          "cudaEventRecord of the op's end");
    if (s.isOk()) s = r;
  }
  op->gate->open(std::move(s));
}

Status DeviceStaging::runOp(const CollArgs& args, int rank, int nranks, DeviceOp* op,
                            const Deadline& deadline, const std::atomic<bool>* abortFlag,
                            const HostRun& hostRun) {
  Status s = cudaStatus(cudaSetDevice(device_), "cudaSetDevice");
  if (s.isOk() && op->ready != nullptr)
    s = waitEvent(op->ready, deadline, abortFlag, "waiting for the caller's stream");
  auto st = static_cast<cudaStream_t>(stream_);
  const size_t bytes = args.count * dtypeSize(args.dtype);
  if (s.isOk() && nranks == 1) {
    // Nothing to exchange: the result is the input (avg over one rank divides by one).
    if (args.send != args.recv && args.send != nullptr && args.recv != nullptr)
      s = cudaStatus(cudaMemcpyAsync(args.recv, args.send, bytes, cudaMemcpyDeviceToDevice, st),
                     "cudaMemcpyAsync");
    if (s.isOk()) s = drain(deadline, abortFlag, "one-rank copy");
  } else if (s.isOk() && allReduce_ && args.coll == Collective::kAllReduce && takes_(args)) {
    s = allReduce_(args, st, deadline, abortFlag);
    if (s.isOk()) s = drain(deadline, abortFlag, "device schedule");
  } else if (s.isOk()) {
    s = runStaged(args, rank, nranks, deadline, abortFlag, hostRun);
  }
  if (op->ready != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(op->ready));
  op->ready = nullptr;
  return s;
}

namespace {

Status copy2D(const Copy2D& c, const void* src, void* dst, cudaMemcpyKind kind, cudaStream_t st) {
  if (!c.active) return Status::ok();
  return cudaStatus(cudaMemcpy2DAsync(static_cast<char*>(dst) + c.dstOffset, c.dstPitch,
                                      static_cast<const char*>(src) + c.srcOffset, c.srcPitch,
                                      c.width, c.height, kind, st),
                    kind == cudaMemcpyDeviceToHost ? "cudaMemcpy2DAsync device to host"
                                                   : "cudaMemcpy2DAsync host to device");
}

}  // namespace

Status DeviceStaging::runStaged(const CollArgs& args, int rank, int nranks,
                                const Deadline& deadline, const std::atomic<bool>* abortFlag,
                                const HostRun& hostRun) {
  auto st = static_cast<cudaStream_t>(stream_);
  const size_t perChunk = stagingPerChunk(args.coll, dtypeSize(args.dtype), nranks, chunkBytes_);
  if (perChunk == 0)
    return invalidArgument("the device staging buffer of " + std::to_string(chunkBytes_) +
                           " bytes cannot hold one element per rank (COLLIE_CUDA_STAGING_BYTES)");
  const size_t nchunks = stagingChunks(args.count, perChunk);
  auto down = [&](size_t k) -> Status {
    StagedChunk c = stagedChunk(args, rank, nranks, perChunk, k);
    COLLIE_RETURN_IF_ERROR(copy2D(c.down, args.send, pinned_[k % 2], cudaMemcpyDeviceToHost, st));
    COLLIE_CUDA_RETURN(cudaEventRecord(static_cast<cudaEvent_t>(downDone_[k % 2]), st),
                       "cudaEventRecord");
    return Status::ok();
  };
  if (nchunks > 0) COLLIE_RETURN_IF_ERROR(down(0));
  for (size_t k = 0; k < nchunks; ++k) {
    // The stream runs in order, so chunk k+1's copy into the other slot comes after that slot's
    // previous upload (chunk k-1) has read it, and before chunk k's upload writes the user's
    // recv (in place, chunk k+1's input is not chunk k's output).
    if (k + 1 < nchunks) COLLIE_RETURN_IF_ERROR(down(k + 1));
    COLLIE_RETURN_IF_ERROR(waitEvent(downDone_[k % 2], deadline, abortFlag, "staging copy"));
    StagedChunk c = stagedChunk(args, rank, nranks, perChunk, k);
    char* slot = pinned_[k % 2];
    CollArgs h = args;
    h.send = c.hostSend == kNoBuffer ? nullptr : slot + c.hostSend;
    h.recv = c.hostRecv == kNoBuffer ? nullptr : slot + c.hostRecv;
    h.count = c.hostCount;
    h.memory = MemoryKind::kHost;
    h.device = -1;
    COLLIE_RETURN_IF_ERROR(hostRun(h));
    COLLIE_RETURN_IF_ERROR(copy2D(c.up, slot, args.recv, cudaMemcpyHostToDevice, st));
  }
  return drain(deadline, abortFlag, "staging upload");  // the last uploads
}

// Until the private stream has done all it was given, bounded like every other wait.
Status DeviceStaging::drain(const Deadline& deadline, const std::atomic<bool>* abortFlag,
                            const char* what) {
  cudaEvent_t done = nullptr;
  COLLIE_CUDA_RETURN(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  Status s =
      cudaStatus(cudaEventRecord(done, static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
  if (s.isOk()) s = waitEvent(done, deadline, abortFlag, what);
  cudaEventDestroy(done);
  return s;
}

}  // namespace collie
