// What a cuda_ipc endpoint publishes through the Store: the process, the GPU, and the IPC
// handles of its device staging buffer and its IPC event, as fixed-size bytes. Kept free of
// CUDA headers so that the encoding is tested where no GPU is.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/status.h"

namespace collie {

struct CudaIpcAddress {
  static constexpr size_t kHandleBytes = 64;  // cudaIpcMemHandle_t and cudaIpcEventHandle_t
  int32_t pid = 0;
  int32_t device = -1;
  std::string busId;        // PCI bus id of the GPU, e.g. "0000:19:00.0" (at most 31 chars)
  uint64_t buffer = 0;      // the staging buffer's address in its own process
  uint64_t bytes = 0;       // its length
  uint64_t event = 0;       // the cudaEvent_t in its own process (used within one process)
  std::string memHandle;    // kHandleBytes
  std::string eventHandle;  // kHandleBytes

  std::string encode() const;
  // invalidArgument (what is wrong) for bytes that are not an address of this version.
  static StatusOr<CudaIpcAddress> decode(const std::string& bytes);
};

}  // namespace collie
