// What a cuda_ipc endpoint publishes through the Store: the process, the GPU, and the IPC
// handles of its device staging buffer and its IPC event, as fixed-size bytes; and the
// decisions connect takes from it. Kept free of CUDA headers so that both are tested where no
// GPU is.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/status.h"

namespace collie {

// Who a process is: its pid and a random token drawn in it. Pids alone collide across PID
// namespaces (containers on one host), so sameness needs the token too.
struct ProcessIdentity {
  int32_t pid = 0;
  uint64_t token = 0;
};

// This process's identity; the token is drawn again after a fork (the pid changed).
ProcessIdentity thisProcess();

struct CudaIpcAddress {
  static constexpr size_t kHandleBytes = 64;  // cudaIpcMemHandle_t and cudaIpcEventHandle_t
  int32_t pid = 0;
  uint64_t token = 0;  // ProcessIdentity::token of the publishing process
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

// Whether the address was published by process self: only then are its raw pointers valid here.
bool sameProcess(const CudaIpcAddress& a, const ProcessIdentity& self);

// How connect reaches a peer's buffer: its raw pointers (same process), or its IPC handles
// opened here (the same GPU, or two GPUs with peer access). Without peer access the handle
// cannot be mapped, so connect refuses and the device path stages through host memory.
enum class CudaIpcRoute { kSameProcess, kMapped, kNoPeerAccess };
CudaIpcRoute cudaIpcRoute(bool sameProcess, bool sameGpu, bool canAccessPeer);

}  // namespace collie
