// The communicator: rank, size, connections to every peer, the op sequence number, deadlines,
// the error state, and the progress thread for asynchronous calls. A blocking call on host
// memory runs its schedule in the caller's thread (a wake-up costs tens of microseconds here);
// asynchronous calls run on the progress thread; both run the same schedule code, in call order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/core/bootstrap/bootstrap.h"
#include "src/core/bootstrap/store.h"
#include "src/core/online_tuner.h"
#include "src/core/stream_gate.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace collie {

struct DeviceOp;
// What a communicator holds for device memory (staging, the NCCL backend); defined where the
// build has them.
struct DeviceState;
struct DeviceStateDeleter {
  void operator()(DeviceState* d) const;
};

// The completion of one asynchronous call.
class WorkState {
 public:
  void finish(Status s);
  // false if timeoutMs passed first (the op goes on); < 0 waits for the op's own deadline.
  bool wait(int64_t timeoutMs);
  bool test();
  Status status();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  Status status_;      // guarded by mu_
};

// (The public C++ class collie::Communicator wraps a collieComm_t; this is what it points to.)
class CommImpl {
 public:
  ~CommImpl();
  static StatusOr<std::unique_ptr<CommImpl>> create(BootstrapInfo info);

  int rank() const { return rank_; }
  int size() const { return nranks_; }

  // Blocking: returns when the result is in args.recv.
  Status run(const CollArgs& args);
  // Queued to the progress thread; ops run in call order with the blocking ones.
  Status runAsync(const CollArgs& args, std::shared_ptr<WorkState>* work);
  // Device memory (args.memory kCuda): enqueued on stream (a cudaStream_t; null is the legacy
  // default stream), returning before the op completes; errors that come later are the
  // communicator's async error. With COLLIE_BACKEND=nccl the op goes to NCCL.
  Status runDevice(const CollArgs& args, void* stream);

  // First error of any op (collieSuccess if none); the communicator stays failed after it.
  Status asyncError();
  // Makes every pending and future op fail, tells the peers; the caller then destroys it.
  void abort();
  std::string lastError();
  void setLastError(const std::string& msg);
  // Forces an algorithm by name for the following ops ("" or "auto": the tuner picks).
  Status setAlgorithm(const std::string& name);
  // The name of the algorithm the last op ran ("" before the first); a static string.
  const char* lastAlgorithm() const { return lastAlgo_.load(); }

 private:
  CommImpl() = default;
  Status init(BootstrapInfo info);
  Status execute(const CollArgs& args, DeviceOp* device = nullptr);  // caller holds execMu_
  Status executeHost(const CollArgs& args);                          // caller holds execMu_
  Status failedError();
  Status setUpBackend(const std::string& backend, const std::vector<std::string>& hosts,
                      const Deadline& deadline);
  Status ensureStaging(int device);
  AlgoContext context(const CollArgs& args);  // for an op about to run: takes a sequence number
  // Maps the segments of the local ranks, at sizes the user did not set shrunk to what /dev/shm
  // has room for. Where a local rank still could not make its own, or could not map its peers'
  // (another /dev/shm), every local rank leaves shm_ null and its local peers to fallback, or,
  // with none (nullptr), fails saying why.
  Status setUpShm(const std::vector<int>& local, const char* fallback, const Deadline& deadline);
  // Publishes mine as prefix<rank> and reads what every rank of local published there.
  Status exchangeLocal(const std::string& prefix, const std::string& mine,
                       const std::vector<int>& local, const Deadline& deadline,
                       std::vector<std::string>* values);
  // Whether a local rank refused shm in a round of setUpShm (values, by local): then shm_ is
  // gone and *result is ok (fall back) or the error.
  bool shmRefused(const std::vector<std::string>& values, const std::vector<int>& local,
                  const char* fallback, const Deadline& deadline, Status* result);
  // With a network in use: the tuner's figures for it measured on the ring's links
  // (link_probe.h), the same on every rank.
  Status probeNetwork(bool network);
  // Replaces each of v[0..n) with its largest value on any rank (a ring AllReduce, max); every
  // rank calls it at the same point. opName names it in errors.
  Status agreeOnMax(double* v, size_t n, const char* opName);
  // The trials of a call shape are done: every rank takes the slowest rank's times, and the
  // fastest candidate runs that shape from now on.
  Status settleTrial(OnlineTuner::Trial* t, const CollArgs& args);
  // Exchanges worker addresses with the peers in want and connects those that can; forced
  // (COLLIE_TRANSPORT lists ucx) makes any failure an error, else a peer falls back to tcp.
  Status setUpUcx(std::vector<bool>* want, bool forced, const Deadline& deadline);
  // Fails the communicator with s (the first failure stays its error) and tells every peer why.
  // Returns what this rank reports: s, with the peers that stay silent after it named (below).
  Status fail(const Status& s);
  // After a failure that a stuck peer may have caused (a timeout, or a peer's abort that may
  // come from one): every rank that failed has sent its abort, so the peers that say nothing
  // within a grace are the stuck ones. Names them ("" when none is silent or none can tell).
  std::string silentPeers();
  // What a failed op hears in its grace (listenAfterFailure).
  struct Hearing {
    std::vector<int> silent;  // peers that said nothing
    size_t told = 0;          // peers whose transport can tell whether they spoke
    bool cutShort = false;    // collieCommAbort ended it
  };
  // Listens to every peer and pushes what is left of this rank's abort (behind a frame begun),
  // until it has gone to every peer (with forWord: until every peer has spoken and it has gone
  // to each), or the grace ends, or collieCommAbort comes.
  Hearing listenAfterFailure(bool forWord);
  int64_t graceMs() const;  // how long a failed op listens or pushes its abort after it
  void progressLoop();

  int rank_ = 0;
  int nranks_ = 1;
  int localRanks_ = 1;       // ranks on this host, this one included
  int machineRanks_ = 1;     // ranks on this machine (kernel), at least localRanks_
  std::vector<int> hostOf_;  // per rank, the lowest rank on its host
  bool oversubscribed_ = false;
  int64_t timeoutMs_ = 300000;
  size_t chunkBytes_ = 512 << 10;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<TcpStore> store_;
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<ShmTransport> shm_;
  std::unique_ptr<Transport> ucx_;  // a UcxTransport where the build and some peer use UCX
  uint64_t commId_ = 0;
  std::vector<std::unique_ptr<Connection>> conns_;  // by rank; null for this rank
  std::vector<Connection*> connPtrs_;               // the same, as the schedules see them
  std::vector<std::unique_ptr<Algorithm>> algos_;
  Status findAlgorithm(const std::string& name, Algorithm** out) const;
  Algorithm* forced_ = nullptr;  // COLLIE_ALGO or setAlgorithm; guarded by execMu_
  // The last pick and what it was for: a loop calling one collective again skips the cost
  // model (picks depend only on these, the communicator and forced_). Guarded by execMu_.
  struct LastPick {
    Algorithm* algo = nullptr;
    Algorithm* forced = nullptr;
    Collective coll = Collective::kAllReduce;
    size_t count = 0;
    collieDataType_t dtype = collieFloat32;
    int root = -1;
    MemoryKind memory = MemoryKind::kHost;
  } lastPick_;
  OnlineTuner online_{0, 0};  // guarded by execMu_
  double tunerSpan_ = 4;      // COLLIE_TUNER_SPAN
  std::atomic<const char*> lastAlgo_{""};
  LinkModel link_;
  LinkModel localLink_;  // between ranks of this host
  std::unique_ptr<Poller> poller_;
  std::unique_ptr<DeviceState, DeviceStateDeleter> device_;
  std::vector<char> scratch_;  // guarded by execMu_
  uint64_t seq_ = 0;           // guarded by execMu_

  std::mutex execMu_;  // held by whichever thread runs a schedule
  std::atomic<bool> aborting_{false};
  std::atomic<bool> failed_{false};
  std::mutex errMu_;
  Status firstError_;      // guarded by errMu_
  std::string lastError_;  // guarded by errMu_

  // The asynchronous queue.
  struct Pending {
    CollArgs args;
    std::shared_ptr<WorkState> work;   // null for device ops on a stream
    std::shared_ptr<DeviceOp> device;  // device memory: the stream bookkeeping
  };
  std::mutex qMu_;
  std::condition_variable qCv_;
  std::deque<Pending> queue_;  // guarded by qMu_
  // Queued plus running async ops: changed under qMu_; read without it only to skip qMu_
  // when zero (an op queued by this thread before is seen, one of another thread is unordered).
  std::atomic<int> inFlight_{0};
  bool stopping_ = false;  // guarded by qMu_
  std::thread progress_;
};

}  // namespace collie
