// CUDA runtime errors as Status, for the files built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "src/base/status.h"

namespace collie {

// ok, or collieUnhandledSystemError "what: <the CUDA error>" (the sticky error is cleared).
inline Status cudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status(collieUnhandledSystemError, what + ": " + cudaGetErrorString(e));
}

}  // namespace collie
