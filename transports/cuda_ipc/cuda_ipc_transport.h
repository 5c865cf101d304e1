// cuda_ipc: processes on one host share device staging buffers. Each endpoint allocates a
// staging buffer on its GPU and an interprocess event, and publishes their IPC handles (a
// CudaIpcAddress) through the Store; a peer maps the buffer (cudaIpcOpenMemHandle) and opens
// the event. Copies into a peer's buffer go straight over NVLink / PCIe P2P or within one GPU;
// connect refuses a peer whose GPU this one cannot access (cudaDeviceCanAccessPeer), since its
// handle cannot be mapped. Several processes sharing one GPU work the same way; two endpoints
// in one process use each other's pointers (IPC handles cannot be opened by their own process).
// Streams and events are void* here; built only with CUDA.
#pragma once

#include <memory>
#include <string>

#include "src/base/status.h"
#include "transports/cuda_ipc/cuda_ipc_address.h"
#include "transports/transport.h"

namespace collie {

class CudaIpcPeer {
 public:
  ~CudaIpcPeer();
  void* buffer() const { return buffer_; }  // the peer's staging buffer, mapped here
  size_t bytes() const { return bytes_; }
  // Enqueues on stream a copy of bytes from src (device memory on this rank's GPU) to offset
  // in the peer's buffer.
  Status copyTo(size_t offset, const void* src, size_t bytes, void* stream);
  // Makes stream wait for the peer's last recordReady() (its data is in its buffer).
  Status waitReady(void* stream);

 private:
  friend class CudaIpcTransport;
  CudaIpcPeer() = default;
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;  // opened through IPC (closed at destruction)
  bool ownEvent_ = false;
  void* event_ = nullptr;  // cudaEvent_t of the peer
};

// Maps peers' device staging buffers rather than making Connections: the device path drives it
// (device_ipc), not the host registry.
class CudaIpcTransport {
 public:
  ~CudaIpcTransport();
  static StatusOr<std::unique_ptr<CudaIpcTransport>> create(int device, size_t stagingBytes);
  const char* name() const { return "cuda_ipc"; }
  // Bytes to publish through the Store.
  const std::string& address() const { return address_; }
  void* staging() const { return staging_; }
  size_t stagingBytes() const { return bytes_; }
  // Records the IPC event on stream: "what this rank wrote to its staging buffer is there".
  Status recordReady(void* stream);
  // systemError (why) for a peer on a GPU without peer access to this one.
  StatusOr<std::unique_ptr<CudaIpcPeer>> connect(const std::string& peerAddress);

 private:
  CudaIpcTransport() = default;
  StatusOr<std::unique_ptr<CudaIpcPeer>> openHandles(const CudaIpcAddress& a,
                                                     std::unique_ptr<CudaIpcPeer> p);
  int device_ = 0;
  void* staging_ = nullptr;
  size_t bytes_ = 0;
  void* event_ = nullptr;  // cudaEvent_t, interprocess
  std::string address_;
};

}  // namespace collie
