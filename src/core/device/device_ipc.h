// Device-buffer AllReduce among the processes of one host over cuda_ipc: the set-up (every
// rank's device staging buffer and IPC event, mapped by every other rank) and the CUDA side of
// the device schedules (algorithms/device_ring.h, algorithms/device_tree.h): copies into the
// peers' slots over NVLink / PCIe P2P (or within the same GPU), the CUDA
// kernels reducing each slot, IPC events ordering the work across processes, all on the op's
// stream. Built only with CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/base/status.h"
#include "src/core/bootstrap/store.h"
#include "src/core/device/cuda_path.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"

namespace collie {

struct DeviceIpcConfig {
  int device = 0;
  int rank = 0;
  int nranks = 1;
  CudaPath path = CudaPath::kAuto;
  size_t slotBytes = 8 << 20;
  int nslots = 4;
  std::string keyPrefix = "cudaipc/";  // Store keys of the exchange
};

class DeviceIpc {
 public:
  ~DeviceIpc();
  // Collective over all ranks (one host), at their first device call: every rank sets up its
  // cuda_ipc endpoint, publishes it, maps every peer's, and all vote twice through the Store.
  // Returns null (auto) when some rank could not: every rank then stages alike.
  static StatusOr<std::unique_ptr<DeviceIpc>> create(const DeviceIpcConfig& c, Store* store,
                                                     const Deadline& deadline);
  // Enqueue the AllReduce on stream (cudaStream_t), moving the control frames over ctx's
  // connections; return once every frame is through (the stream may still be running).
  Status runRing(const CollArgs& args, void* stream, const AlgoContext& ctx);
  Status runTree(const CollArgs& args, void* stream, const AlgoContext& ctx);

 private:
  DeviceIpc() = default;
  DeviceIpcConfig c_;
  std::unique_ptr<CudaIpcTransport> self_;
  std::vector<std::unique_ptr<CudaIpcPeer>> peers_;  // by rank; null for this rank
};

}  // namespace collie
