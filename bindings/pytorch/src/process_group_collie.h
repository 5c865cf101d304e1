// A c10d backend over Collie's API: CPU tensors; collectives block the calling thread, sends
// and receives are posted on the progress thread of a communicator split for them.
#pragma once

#include <collie/collie.h>

#include <collie/collie.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "torch_compat.h"

namespace collie_torch {

// A Work whose future holds the op's output tensors; inline ops return it already finished.
class CollieWork : public c10d::Work {
 public:
  CollieWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  void finishOp(std::exception_ptr error);
  void setSource(int rank) { source_ = rank; }
  int sourceRank() const override { return source_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_ = -1;
};

// A send or receive in flight on Collie's progress thread: it finishes when waited on or found
// complete (isCompleted, or a barrier of its group).
class P2pWork : public CollieWork {
 public:
  P2pWork(int rank, c10d::OpType type, at::Tensor t, collie::Work op, std::string what);
  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  // Its future completes with the op: getFuture waits for the op first.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  // Waits up to timeout for the op and finishes this Work if it ended; true if it has.
  bool settle(std::chrono::milliseconds timeout);

  std::mutex opMu_;
  collie::Work op_;    // guarded by opMu_
  bool done_ = false;  // guarded by opMu_
  std::string what_;
};

class ProcessGroupCollie : public BackendBase {
 public:
  ProcessGroupCollie(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupCollie() override;

  const std::string getBackendName() const override { return "collie"; }
  void setSequenceNumberForGroup() override { seq_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Gloo's protocol: every rank reports to rank 0, which releases them all or raises naming
  // the first rank (every rank, with waitAllRanks) that did not arrive within the timeout.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

 private:
  // Throws a RuntimeError carrying Collie's message (op, rank, peer) unless r is success.
  void check(collieResult_t r, collieComm_t comm, const char* op) const;
  c10::intrusive_ptr<CollieWork> done(c10d::OpType type, std::vector<at::Tensor> outputs);
  // One tensor's AllReduce in place, inline; name is the op in errors.
  void allreduceInPlace(const at::Tensor& t, const c10d::ReduceOp& op, const char* name);
  // ReduceScatter of in (getSize() blocks of out's size) into out.
  void reduceScatter(const at::Tensor& in, const at::Tensor& out, const c10d::ReduceOp& op,
                     const char* name);
  // Every rank's t, one row per rank (an AllGather).
  at::Tensor gatherRows(const at::Tensor& t, const char* name);
  // monitoredBarrier's two sides.
  void reportToRoot(std::chrono::milliseconds timeout);
  void releaseFromRoot(std::chrono::milliseconds timeout, bool waitAllRanks);
  // Where sends and receives go: the split communicator, or the group's where there is none.
  collie::Communicator& p2pComm() { return p2p_.valid() ? p2p_ : world_; }
  c10::intrusive_ptr<c10d::Work> postP2p(c10d::OpType type, const at::Tensor& t, collie::Work op,
                                         const char* what, int peer, int tag);

  collie::Communicator world_;  // owns comm_
  collieComm_t comm_ = nullptr;
  // Sends and receives, split from world_ so that one in flight never holds up a collective;
  // empty where the transports take no second communicator (world_ serves then).
  collie::Communicator p2p_;
  // monitoredBarrier's messages, apart from the user's; its buffers outlive receives that a
  // failed barrier leaves posted, and after a failure the ranks' counts differ for good.
  collie::Communicator monitor_;
  std::vector<uint8_t> monitorBytes_;
  std::vector<collie::Work> monitorLeft_;
  bool monitorFailed_ = false;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
  std::mutex pendingMu_;
  std::vector<c10::intrusive_ptr<P2pWork>> pending_;  // guarded by pendingMu_
};

}  // namespace collie_torch
