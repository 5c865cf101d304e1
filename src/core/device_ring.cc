// DeviceRing (see device_ring.h).
#include "src/core/device_ring.h"

#include <cuda_runtime_api.h>

#include "algorithms/device_ring.h"
#include "algorithms/patterns/ring_pattern.h"
#include "src/base/log.h"
#include "src/reduce/cuda/reduce_cuda.h"

namespace collie {
namespace {

Status cudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  cudaGetLastError();
  return Status(collieUnhandledSystemError,
                std::string("device ring: ") + what + ": " + cudaGetErrorString(e));
}

// Publishes this rank's vote for stage and returns every rank's, in rank order.
StatusOr<std::vector<std::string>> vote(Store* store, const DeviceRingConfig& c,
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

DeviceRing::~DeviceRing() = default;

StatusOr<std::unique_ptr<DeviceRing>> DeviceRing::create(const DeviceRingConfig& c, Store* store,
                                                         const Deadline& deadline) {
  std::unique_ptr<DeviceRing> ring(new DeviceRing());
  ring->c_ = c;
  const int next = ring::next(c.rank, c.nranks), prev = ring::prev(c.rank, c.nranks);
  // Round 1: the endpoints; each address goes under its own key before the vote.
  auto made = CudaIpcTransport::create(c.device, c.slotBytes * static_cast<size_t>(c.nslots));
  const std::string mine = cudaPathVote(made.status());
  if (made.isOk()) {
    ring->self_ = std::move(made.value());
    COLLIE_RETURN_IF_ERROR(
        store->set(c.keyPrefix + "address/" + std::to_string(c.rank), ring->self_->address()));
  }
  COLLIE_ASSIGN_OR_RETURN(std::vector<std::string> addrs,
                          vote(store, c, "endpoint", mine, deadline));
  COLLIE_ASSIGN_OR_RETURN(bool all, decideCudaPath(c.path, addrs, "endpoint"));
  if (!all) {
    COLLIE_INFO(kLogInit, "rank %d: device AllReduce staged through host memory (%s)", c.rank,
                mine.c_str());
    return std::unique_ptr<DeviceRing>();
  }
  // Round 2: map next's and prev's buffers and events.
  auto connectTo = [&](int peer) -> StatusOr<std::unique_ptr<CudaIpcPeer>> {
    COLLIE_ASSIGN_OR_RETURN(std::string a,
                            store->get(c.keyPrefix + "address/" + std::to_string(peer), deadline));
    auto p = ring->self_->connect(a);
    if (!p.isOk()) return p.status().withContext("connecting to rank " + std::to_string(peer));
    return p;
  };
  Status linked = Status::ok();
  {
    auto n = connectTo(next);
    if (n.isOk()) ring->next_ = std::move(n.value());
    linked = n.status();
  }
  if (linked.isOk() && prev != next) {
    auto p = connectTo(prev);
    if (p.isOk()) ring->prevOwn_ = std::move(p.value());
    linked = p.status();
  }
  ring->prev_ = prev != next ? ring->prevOwn_.get() : ring->next_.get();
  if (linked.isOk() && ring->next_->bytes() < ring->self_->stagingBytes())
    linked =
        invalidArgument("rank " + std::to_string(next) + "'s cuda_ipc buffer is smaller than " +
                        "this rank's (COLLIE_CUDA_SLOT_BYTES and COLLIE_CUDA_SLOTS must agree)");
  COLLIE_ASSIGN_OR_RETURN(std::vector<std::string> links,
                          vote(store, c, "connect", cudaPathVote(linked), deadline));
  COLLIE_ASSIGN_OR_RETURN(all, decideCudaPath(c.path, links, "connect"));
  if (!all) {
    COLLIE_INFO(kLogInit, "rank %d: device AllReduce staged through host memory (%s)", c.rank,
                linked.isOk() ? "a peer could not connect" : linked.message().c_str());
    return std::unique_ptr<DeviceRing>();
  }
  COLLIE_INFO(kLogInit, "rank %d of %d: device ring over cuda_ipc, %d slots of %zu bytes, %s",
              c.rank, c.nranks, c.nslots, c.slotBytes,
              ring->next_->direct() ? "peer access" : "copies through host memory");
  return ring;
}

namespace {

// The ring's device work on the op's stream: cuda_ipc copies, the CUDA kernels, IPC events.
class CudaRingDevice : public RingDevice {
 public:
  CudaRingDevice(CudaIpcTransport* self, CudaIpcPeer* prev, CudaIpcPeer* next, void* stream)
      : self_(self), prev_(prev), next_(next), stream_(stream) {}
  Status waitPrev() override { return prev_->waitReady(stream_); }
  Status waitNext() override { return next_->waitReady(stream_); }
  Status copyToNext(size_t slotOffset, const void* src, size_t bytes) override {
    return next_->copyTo(slotOffset, src, bytes, stream_);
  }
  Status reduceSlot(void* dst, size_t slotOffset, const void* own, size_t count,
                    collieDataType_t dtype, collieRedOp_t op) override {
    return reduceDevice(dst, nullptr, slot(slotOffset), own, count, dtype, op, stream_);
  }
  Status scale(void* dst, size_t count, collieDataType_t dtype, int divisor) override {
    return scaleDevice(dst, count, dtype, divisor, stream_);
  }
  Status copyFromSlot(void* dst, size_t slotOffset, size_t bytes) override {
    return cudaStatus(cudaMemcpyAsync(dst, slot(slotOffset), bytes, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(stream_)),
                      "cudaMemcpyAsync from a slot");
  }
  Status record() override { return self_->recordReady(stream_); }

 private:
  char* slot(size_t offset) { return static_cast<char*>(self_->staging()) + offset; }
  CudaIpcTransport* self_;
  CudaIpcPeer* prev_;
  CudaIpcPeer* next_;
  void* stream_;
};

}  // namespace

Status DeviceRing::run(const CollArgs& args, void* stream, const AlgoContext& ctx) {
  CudaRingDevice dev(self_.get(), prev_, next_.get(), stream);
  return runDeviceRing(args, ctx, c_.slotBytes, c_.nslots, &dev);
}

}  // namespace collie
