// Keeps the caller's current CUDA device: a library call that selects its communicator's device
// must leave the thread's current device as it found it.
#pragma once

#include <cuda_runtime_api.h>

namespace collie {

class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() {
    if (cudaGetDevice(&saved_) != cudaSuccess) {
      cudaGetLastError();
      saved_ = -1;
    }
  }
  ~CurrentDeviceGuard() {
    if (saved_ >= 0 && cudaSetDevice(saved_) != cudaSuccess) cudaGetLastError();
  }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace collie
