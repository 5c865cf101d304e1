// CudaIpcTransport and CudaIpcPeer (see cuda_ipc_transport.h).
#include "transports/cuda_ipc/cuda_ipc_transport.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "src/base/cuda_device_guard.h"
#include "src/base/cuda_status.h"

namespace collie {
namespace {

Status ipcStatus(cudaError_t e, const std::string& what) {
  return cudaStatus(e, "cuda_ipc: " + what);
}

#define COLLIE_CUDA_RETURN(call, what) COLLIE_RETURN_IF_ERROR(ipcStatus((call), (what)))

}  // namespace

StatusOr<std::unique_ptr<CudaIpcTransport>> CudaIpcTransport::create(int device,
                                                                     size_t stagingBytes) {
  if (stagingBytes == 0) return invalidArgument("cuda_ipc: staging buffer of 0 bytes");
  std::unique_ptr<CudaIpcTransport> t(new CudaIpcTransport());
  t->device_ = device;
  t->bytes_ = stagingBytes;
  CurrentDeviceGuard keep;
  COLLIE_CUDA_RETURN(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  COLLIE_CUDA_RETURN(cudaMalloc(&t->staging_, stagingBytes), "cudaMalloc of the staging buffer");
  cudaEvent_t ev = nullptr;
  COLLIE_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming),
                     "cudaEventCreate (interprocess)");
  t->event_ = ev;
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  COLLIE_CUDA_RETURN(cudaIpcGetMemHandle(&mh, t->staging_), "cudaIpcGetMemHandle");
  COLLIE_CUDA_RETURN(cudaIpcGetEventHandle(&eh, ev), "cudaIpcGetEventHandle");
  char bus[32] = {0};
  COLLIE_CUDA_RETURN(cudaDeviceGetPCIBusId(bus, sizeof(bus) - 1, device), "cudaDeviceGetPCIBusId");
  CudaIpcAddress a;
  const ProcessIdentity me = thisProcess();
  a.pid = me.pid;
  a.token = me.token;
  a.device = device;
  a.busId = bus;
  a.buffer = reinterpret_cast<uint64_t>(t->staging_);
  a.bytes = stagingBytes;
  a.event = reinterpret_cast<uint64_t>(ev);
  a.memHandle.assign(reinterpret_cast<const char*>(&mh), sizeof(mh));
  a.eventHandle.assign(reinterpret_cast<const char*>(&eh), sizeof(eh));
  t->address_ = a.encode();
  return t;
}

CudaIpcTransport::~CudaIpcTransport() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (staging_) cudaFree(staging_);
}

Status CudaIpcTransport::recordReady(void* stream) {
  return ipcStatus(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)),
      "cudaEventRecord");
}

StatusOr<std::unique_ptr<CudaIpcPeer>> CudaIpcTransport::connect(const std::string& peerAddress) {
  COLLIE_ASSIGN_OR_RETURN(CudaIpcAddress a, CudaIpcAddress::decode(peerAddress));
  std::unique_ptr<CudaIpcPeer> p(new CudaIpcPeer());
  p->bytes_ = a.bytes;
  CurrentDeviceGuard keep;
  COLLIE_CUDA_RETURN(cudaSetDevice(device_), "cudaSetDevice");
  // The peer's device ordinal is its own process's; the bus id names the same GPU here.
  int peerDev = -1;
  COLLIE_CUDA_RETURN(cudaDeviceGetByPCIBusId(&peerDev, a.busId.c_str()),
                     "the peer's GPU " + a.busId + " is not visible here (CUDA_VISIBLE_DEVICES)");
  int can = 0;
  if (peerDev != device_)
    COLLIE_CUDA_RETURN(cudaDeviceCanAccessPeer(&can, device_, peerDev), "cudaDeviceCanAccessPeer");
  if (can) {
    cudaError_t e = cudaDeviceEnablePeerAccess(peerDev, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
      cudaGetLastError();
    else
      COLLIE_RETURN_IF_ERROR(ipcStatus(e, "cudaDeviceEnablePeerAccess"));
  }
  const bool same = sameProcess(a, thisProcess());
  switch (cudaIpcRoute(same, peerDev == device_, can != 0)) {
    case CudaIpcRoute::kSameProcess:
      p->buffer_ = reinterpret_cast<void*>(a.buffer);
      p->event_ = reinterpret_cast<void*>(a.event);
      return p;
    case CudaIpcRoute::kNoPeerAccess:
      return systemError("cuda_ipc: GPU " + std::to_string(device_) + " has no peer access to " +
                         "the peer's GPU " + a.busId + " (pid " + std::to_string(a.pid) +
                         "), so its buffer cannot be mapped; the device path stages through " +
                         "host memory (COLLIE_CUDA_PATH=auto or staged)");
    case CudaIpcRoute::kMapped:
      break;
  }
  return openHandles(a, std::move(p));
}

StatusOr<std::unique_ptr<CudaIpcPeer>> CudaIpcTransport::openHandles(
    const CudaIpcAddress& a, std::unique_ptr<CudaIpcPeer> p) {
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  memcpy(&mh, a.memHandle.data(), sizeof(mh));
  memcpy(&eh, a.eventHandle.data(), sizeof(eh));
  COLLIE_CUDA_RETURN(cudaIpcOpenMemHandle(&p->buffer_, mh, cudaIpcMemLazyEnablePeerAccess),
                     "cudaIpcOpenMemHandle of peer pid " + std::to_string(a.pid));
  p->mapped_ = true;
  cudaEvent_t ev = nullptr;
  COLLIE_CUDA_RETURN(cudaIpcOpenEventHandle(&ev, eh), "cudaIpcOpenEventHandle");
  p->event_ = ev;
  p->ownEvent_ = true;
  return p;
}

CudaIpcPeer::~CudaIpcPeer() {
  if (mapped_ && buffer_) cudaIpcCloseMemHandle(buffer_);
  if (ownEvent_ && event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

Status CudaIpcPeer::copyTo(size_t offset, const void* src, size_t bytes, void* stream) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    return invalidArgument("cuda_ipc: copy of " + std::to_string(bytes) + " bytes at offset " +
                           std::to_string(offset) + " overruns the peer's " +
                           std::to_string(bytes_) + "-byte buffer");
  char* dst = static_cast<char*>(buffer_) + offset;
  return ipcStatus(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
      "cudaMemcpyAsync to the peer");
}

Status CudaIpcPeer::waitReady(void* stream) {
  return ipcStatus(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
      "cudaStreamWaitEvent on the peer's event");
}

}  // namespace collie
