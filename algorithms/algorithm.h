// The algorithm interface: a schedule of chunked send / recv / recv-reduce steps over
// Connections. Algorithms see no sockets, stores or communicators.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/base/dtype.h"
#include "src/base/status.h"
#include "src/reduce/reduce.h"
#include "transports/transport.h"

namespace collie {

// One collective call as every algorithm sees it, already checked by the API. count is in
// elements of dtype, per the NCCL convention of each collective:
//   AllReduce      send and recv hold count.
//   ReduceScatter  count = recvcount: send holds nranks * count, rank r's recv gets block r.
//   AllGather      count = sendcount: recv holds nranks * count, block r from rank r.
//   Broadcast      root's send (count) lands in every recv; send is nullptr off root.
//   Reduce         every send (count) reduces into root's recv; recv is nullptr off root.
//   Barrier        count 0, no buffers.
//   AllToAll       count per peer: send and recv hold nranks * count, block j to/from rank j.
//   AllToAllv      sendCounts/sendDispls/recvCounts/recvDispls (elements, nranks each); count 0.
//   Gather         every send (count) lands at root's recv + rank * count; recv null off root.
//   Scatter        block r of root's send (nranks * count) lands in rank r's recv.
// In place means send == recv (AllReduce, Broadcast, Reduce), recv == send + rank * count
// (ReduceScatter) or send == recv + rank * count (AllGather).
struct CollArgs {
  Collective coll = Collective::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  collieDataType_t dtype = collieFloat32;
  collieRedOp_t op = collieSum;
  int root = -1;
  MemoryKind memory = MemoryKind::kHost;
  int device = -1;  // the CUDA device of kCuda buffers
  // AllToAllv only: per peer, in elements; the caller's arrays, valid for the call.
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
};

// Link parameters for the cost model: a message costs alpha + bytes / beta, and reducing
// bytes that are not overlapped with transfers costs bytes / reduce.
struct LinkModel {
  double alphaUs = 10.0;
  double betaGBps = 2.0;
  double reduceGBps = 5.0;
};

struct AlgoContext {
  int rank = 0;
  int nranks = 1;
  Connection* const* conns = nullptr;  // indexed by rank; nullptr for this rank
  Poller* poller = nullptr;
  Deadline deadline;
  uint64_t seq = 0;
  size_t chunkBytes = 512 << 10;
  std::vector<char>* scratch = nullptr;  // reusable staging, grown on demand
  const char* opName = "allreduce";
  const std::atomic<bool>* abortFlag = nullptr;  // set by collieCommAbort from another thread
  LinkModel link;       // of the slowest transport in use, for the cost model
  LinkModel localLink;  // between ranks of one host (shared memory when set up)
  bool oversubscribed = false;  // more local ranks than cores: yield instead of spinning
  const int* hostOf = nullptr;  // per rank, the lowest rank on its host (nullptr: unknown)

  FrameTag tagFor(const CollArgs& a, uint32_t step, uint8_t algo) const {
    FrameTag t;
    t.seq = seq;
    t.count = a.count;
    t.tag = step;
    t.coll = static_cast<uint8_t>(a.coll);
    t.dtype = static_cast<uint8_t>(a.dtype);
    t.op = static_cast<uint8_t>(a.op);
    t.algo = algo;
    t.root = a.root;
    return t;
  }
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual const char* name() const = 0;
  virtual uint8_t id() const = 0;  // goes into every frame header
  virtual bool supports(Collective coll, MemoryKind kind) const = 0;
  // Whether this call can run here (e.g. every peer reachable through shared memory).
  virtual bool usable(const AlgoContext& ctx, const CollArgs& args) const { return true; }
  // Predicted time of the call on nranks ranks over links like link (the tuner's model).
  virtual double costUs(const CollArgs& args, int nranks, const LinkModel& link) const = 0;
  // What the tuner asks: the cost on this communicator. costUs over ctx's slowest link, unless
  // the algorithm prices the host layout (ctx.hostOf, ctx.localLink) itself.
  virtual double layoutCostUs(const CollArgs& args, const AlgoContext& ctx) const {
    return costUs(args, ctx.nranks, ctx.link);
  }
  virtual Status run(const CollArgs& args, AlgoContext& ctx) = 0;
  // Once per communicator, on every rank at the same point of init, once the connections are
  // up: set-up the ranks agree on (it may communicate), which usable() and costUs then read.
  virtual Status prepare(AlgoContext& ctx) { return Status::ok(); }
};

// Every algorithm this build has, registered explicitly (no static self-registration).
std::vector<std::unique_ptr<Algorithm>> buildAlgorithms();

std::unique_ptr<Algorithm> makeRingAlgorithm();
std::unique_ptr<Algorithm> makeShmDirectAlgorithm();
std::unique_ptr<Algorithm> makeShmSingleCopyAlgorithm();
std::unique_ptr<Algorithm> makeRecursiveDoublingAlgorithm();
std::unique_ptr<Algorithm> makeDisseminationAlgorithm();
std::unique_ptr<Algorithm> makeTreeAlgorithm();
std::unique_ptr<Algorithm> makeRhdAlgorithm();
std::unique_ptr<Algorithm> makeHierarchicalAlgorithm();
std::unique_ptr<Algorithm> makePairwiseAlgorithm();
std::unique_ptr<Algorithm> makeBruckAlgorithm();
std::unique_ptr<Algorithm> makeLinearAlgorithm();
std::unique_ptr<Algorithm> makeBinomialAlgorithm();

// Bytes of one rank's contribution: count elements of dtype.
inline size_t argBytes(const CollArgs& a) { return a.count * dtypeSize(a.dtype); }

}  // namespace collie
