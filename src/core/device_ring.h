// The device ring: AllReduce on device buffers among the processes of one host, over cuda_ipc.
// Each rank's device staging buffer holds nslots slots that its prev copies into (NVLink /
// PCIe P2P, or the same GPU); the CUDA kernels reduce each slot into the recv buffer, then the
// all-gather steps copy the finished blocks around the ring. All device work is enqueued on the
// op's private stream and ordered across processes by each rank's IPC event; the host thread
// only moves 16-byte control frames over the communicator's host connections ("message m is in
// your slot" to next, "I have consumed m" to prev) as device_ring_pattern.h lays out. Every
// wait is bounded by the op's deadline and the abort flag. Built only with CUDA.
#pragma once

#include <memory>
#include <string>

#include "algorithms/algorithm.h"
#include "src/base/status.h"
#include "src/core/cuda_path.h"
#include "src/core/store.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"

namespace collie {

struct DeviceRingConfig {
  int device = 0;
  int rank = 0;
  int nranks = 1;
  CudaPath path = CudaPath::kAuto;
  size_t slotBytes = 8 << 20;
  int nslots = 4;
  std::string keyPrefix = "cudaipc/";  // Store keys of the exchange
};

class DeviceRing {
 public:
  ~DeviceRing();
  // Collective over all ranks (one host), at their first device call: every rank sets up its
  // cuda_ipc endpoint, publishes it, connects to its prev and next, and all vote twice through
  // the Store. Returns null (auto) when some rank could not: every rank then stages alike.
  static StatusOr<std::unique_ptr<DeviceRing>> create(const DeviceRingConfig& c, Store* store,
                                                      const Deadline& deadline);
  // Enqueues the AllReduce on stream (cudaStream_t), moving the control frames over ctx's
  // connections; returns once every frame is through (the stream may still be running).
  Status run(const CollArgs& args, void* stream, const AlgoContext& ctx);

 private:
  DeviceRing() = default;
  DeviceRingConfig c_;
  std::unique_ptr<CudaIpcTransport> self_;
  std::unique_ptr<CudaIpcPeer> next_;
  std::unique_ptr<CudaIpcPeer> prevOwn_;  // null with two ranks: prev is next
  CudaIpcPeer* prev_ = nullptr;
};

}  // namespace collie
