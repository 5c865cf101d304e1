// DeviceIpc (see device_ipc.h).
#include "src/core/device/device_ipc.h"

#include <cuda_runtime_api.h>

#include "algorithms/device_channels.h"
#include "algorithms/device_ring.h"
#include "algorithms/device_tree.h"
#include "src/base/cuda_status.h"
#include "src/base/log.h"
#include "src/reduce/cuda/reduce_cuda.h"

namespace collie {
namespace {

// Publishes this rank's vote for stage and returns every rank's, in rank order.
StatusOr<std::vector<std::string>> vote(Store* store, const DeviceIpcConfig& c,
                                        const std::string& stage, const std::string& mine,
                                        const Deadline& deadline) {
  const std::string base = c.keyPrefix + stage + "/";
  COLLIE_RETURN_IF_ERROR(store->set(base + std::to_string(c.rank), mine));
  std::vector<std::string> keys;
  for (int r = 0; r < c.nranks; ++r) keys.push_back(base + std::to_string(r));
  std::vector<std::string> missing;
  Status w = store->wait(keys, deadline, &missing);
  if (!w.isOk())
    return w.withContext("cuda_ipc " + stage + " of rank " + std::to_string(c.rank) +
                         (missing.empty() ? "" : ": no word from " + missing[0]));
  std::vector<std::string> all;
  for (const auto& k : keys) {
    COLLIE_ASSIGN_OR_RETURN(std::string v, store->get(k, deadline));
    all.push_back(std::move(v));
  }
  return all;
}

}  // namespace

DeviceIpc::~DeviceIpc() = default;

StatusOr<std::unique_ptr<DeviceIpc>> DeviceIpc::create(const DeviceIpcConfig& c, Store* store,
                                                       const Deadline& deadline) {
  std::unique_ptr<DeviceIpc> d(new DeviceIpc());
  d->c_ = c;
  // Round 1: the endpoints; each address goes under its own key before the vote.
  auto made = CudaIpcTransport::create(c.device, c.slotBytes * static_cast<size_t>(c.nslots));
  const std::string mine = cudaPathVote(made.status());
  if (made.isOk()) {
    d->self_ = std::move(made.value());
    COLLIE_RETURN_IF_ERROR(
        store->set(c.keyPrefix + "address/" + std::to_string(c.rank), d->self_->address()));
  }
  COLLIE_ASSIGN_OR_RETURN(std::vector<std::string> addrs,
                          vote(store, c, "endpoint", mine, deadline));
  COLLIE_ASSIGN_OR_RETURN(bool all, decideCudaPath(c.path, addrs, "endpoint"));
  if (!all) {
    COLLIE_INFO(kLogInit, "rank %d: device AllReduce staged through host memory (%s)", c.rank,
                mine.c_str());
    return std::unique_ptr<DeviceIpc>();
  }
  // Round 2: map every peer's buffer and event (the tree's neighbours are not the ring's).
  Status linked = Status::ok();
  d->peers_.resize(static_cast<size_t>(c.nranks));
  for (int q = 0; q < c.nranks && linked.isOk(); ++q) {
    if (q == c.rank) continue;
    auto a = store->get(c.keyPrefix + "address/" + std::to_string(q), deadline);
    if (!a.isOk()) return a.status();
    auto p = d->self_->connect(a.value());
    if (!p.isOk()) {
      linked = p.status().withContext("connecting to rank " + std::to_string(q));
      break;
    }
    if (p.value()->bytes() < d->self_->stagingBytes())
      linked = invalidArgument("rank " + std::to_string(q) + "'s cuda_ipc buffer is smaller " +
                               "than this rank's (COLLIE_CUDA_SLOT_BYTES and COLLIE_CUDA_SLOTS " +
                               "must agree)");
    d->peers_[q] = std::move(p.value());
  }
  COLLIE_ASSIGN_OR_RETURN(std::vector<std::string> links,
                          vote(store, c, "connect", cudaPathVote(linked), deadline));
  COLLIE_ASSIGN_OR_RETURN(all, decideCudaPath(c.path, links, "connect"));
  if (!all) {
    COLLIE_INFO(kLogInit, "rank %d: device AllReduce staged through host memory (%s)", c.rank,
                linked.isOk() ? "a peer could not connect" : linked.message().c_str());
    return std::unique_ptr<DeviceIpc>();
  }
  COLLIE_INFO(kLogInit, "rank %d of %d: device AllReduce over cuda_ipc, %d slots of %zu bytes",
              c.rank, c.nranks, c.nslots, c.slotBytes);
  return d;
}

namespace {

// The schedules' device work on the op's stream: cuda_ipc copies, the CUDA kernels, IPC events.
class CudaDeviceOps : public DeviceOps {
 public:
  CudaDeviceOps(CudaIpcTransport* self, std::vector<std::unique_ptr<CudaIpcPeer>>* peers,
                void* stream)
      : self_(self), peers_(peers), stream_(stream) {}
  Status waitPeer(int peer) override { return (*peers_)[peer]->waitReady(stream_); }
  Status copyToPeer(int peer, size_t offset, const void* src, size_t bytes) override {
    return (*peers_)[peer]->copyTo(offset, src, bytes, stream_);
  }
  Status reduceSlot(void* dst, size_t offset, const void* own, size_t count, collieDataType_t dtype,
                    collieRedOp_t op) override {
    return reduceDevice(dst, nullptr, slot(offset), own, count, dtype, op, stream_);
  }
  Status scale(void* dst, size_t count, collieDataType_t dtype, int divisor) override {
    return scaleDevice(dst, count, dtype, divisor, stream_);
  }
  Status copyFromSlot(void* dst, size_t offset, size_t bytes) override {
    return cudaStatus(cudaMemcpyAsync(dst, slot(offset), bytes, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream_)),
                      "device schedule: cudaMemcpyAsync from a slot");
  }
  Status record() override { return self_->recordReady(stream_); }

 private:
  char* slot(size_t offset) { return static_cast<char*>(self_->staging()) + offset; }
  CudaIpcTransport* self_;
  std::vector<std::unique_ptr<CudaIpcPeer>>* peers_;
  void* stream_;
};

}  // namespace

Status DeviceIpc::runRing(const CollArgs& args, void* stream, const AlgoContext& ctx) {
  CudaDeviceOps ops(self_.get(), &peers_, stream);
  return runDeviceRing(args, ctx, c_.slotBytes, c_.nslots, &ops);
}

Status DeviceIpc::runTree(const CollArgs& args, void* stream, const AlgoContext& ctx) {
  CudaDeviceOps ops(self_.get(), &peers_, stream);
  return runDeviceTree(args, ctx, c_.slotBytes, c_.nslots, &ops);
}

}  // namespace collie
