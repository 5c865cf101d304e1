// DeviceMemory (see device_memory.h).
#include "perf/device_memory.h"

#ifdef COLLIE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace collie::perf {

#ifdef COLLIE_HAVE_CUDA

namespace {
bool ok(cudaError_t e, const char* what, std::string* why) {
  if (e == cudaSuccess) return true;
  *why = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}
}  // namespace

DeviceMemory::~DeviceMemory() {
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  if (send_) cudaFree(send_);
  if (recv_) cudaFree(recv_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

bool DeviceMemory::setUp(int localRank, size_t bytes, std::string* why) {
  int n = 0;
  if (!ok(cudaGetDeviceCount(&n), "--device: cudaGetDeviceCount", why)) return false;
  if (n == 0) {
    *why = "--device: no CUDA device is visible";
    return false;
  }
  device_ = (localRank < 0 ? 0 : localRank) % n;
  if (!ok(cudaSetDevice(device_), "cudaSetDevice", why)) return false;
  size_t rounded = bytes ? bytes : 1;
  void* p = nullptr;
  if (!ok(cudaMalloc(&p, rounded), "cudaMalloc (send)", why)) return false;
  send_ = static_cast<char*>(p);
  if (!ok(cudaMalloc(&p, rounded), "cudaMalloc (recv)", why)) return false;
  recv_ = static_cast<char*>(p);
  cudaStream_t s = nullptr;
  if (!ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", why))
    return false;
  stream_ = s;
  return ok(cudaMemset(send_, 0, rounded), "cudaMemset", why) &&
         ok(cudaMemset(recv_, 0, rounded), "cudaMemset", why);
}

bool DeviceMemory::toDevice(void* dst, const void* src, size_t bytes, std::string* why) {
  return sync(why) && ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy", why);
}

bool DeviceMemory::toHost(void* dst, const void* src, size_t bytes, std::string* why) {
  return sync(why) && ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy", why);
}

bool DeviceMemory::sync(std::string* why) {
  return ok(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize",
            why);
}

#else

DeviceMemory::~DeviceMemory() = default;

bool DeviceMemory::setUp(int, size_t, std::string* why) {
  *why = "--device: this build has no CUDA support";
  return false;
}
bool DeviceMemory::toDevice(void*, const void*, size_t, std::string* why) { return setUp(0, 0, why); }
bool DeviceMemory::toHost(void*, const void*, size_t, std::string* why) { return setUp(0, 0, why); }
bool DeviceMemory::sync(std::string* why) { return setUp(0, 0, why); }

#endif

}  // namespace collie::perf
