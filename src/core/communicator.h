// The communicator: rank, size, connections to every peer, the op sequence number, deadlines,
// the error state, and the progress thread for asynchronous calls. A blocking call on host
// memory runs its schedule in the caller's thread (a wake-up costs tens of microseconds here);
// asynchronous calls run on the progress thread; both run the same schedule code, in call order.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/core/bootstrap/bootstrap.h"
#include "src/core/bootstrap/rendezvous.h"
#include "src/core/comm_config.h"
#include "src/core/device/device_path.h"
#include "src/core/failure.h"
#include "src/core/family.h"
#include "src/core/p2p.h"
#include "src/core/progress.h"
#include "src/core/red_ops.h"
#include "src/core/tuning/online_tuner.h"
#include "transports/registry.h"

namespace collie {

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
  // collieInProgress while background set-up or a non-blocking communicator's op runs.
  Status asyncError();
  // Makes every pending and future op fail, tells the peers; the caller then destroys it.
  void abort();
  std::string lastError() { return failure_->lastError(); }
  void setLastError(const std::string& msg) { failure_->setLastError(msg); }
  // Forces an algorithm by name for the following ops ("" or "auto": the tuner picks).
  Status setAlgorithm(const std::string& name);
  // The name of the algorithm the last op ran ("" before the first); a static string.
  const char* lastAlgorithm() const { return lastAlgo_.load(); }

  // Groups and point-to-point (communicator_p2p.cc). A group takes each of its communicators
  // for itself (lock), posts their point-to-point calls (postP2P), runs their collectives in
  // order (runLocked), then completes the calls (finishP2P, or progressP2P across several).
  std::unique_lock<std::mutex> lock();
  Status postP2P(std::vector<P2PCall>* calls, P2PBatch* batch);
  Status runLocked(const CollArgs& args) { return execute(args); }
  Status finishP2P(P2PBatch* batch);
  Status progressP2P(P2PBatch* batch, bool* progressed);
  // Queued to the progress thread, which posts the call and completes *work when it is done,
  // while later ops go on (a receive posted so never waits for a later send of this rank).
  Status runP2PAsync(const P2PCall& call, std::shared_ptr<WorkState>* work);
  // A blocking receive of the first message with tag from any peer; *peer names the sender.
  Status recvAny(const P2PCall& call, int* peer);
  // Fails the communicator with s where it has not failed yet (what a group's error does).
  Status failWith(const Status& s) { return failure_->failed() ? s : fail(s); }

  // Collective over this communicator (communicator_split.cc): the ranks that pass one color
  // make a communicator, ranked by key (ties by rank here); kNoColor makes none (*child null).
  // The child talks on lanes of this communicator's connections: no store, no new socket or
  // segment. cfg: the child's settings. With cfg.blocking false the child comes back at once,
  // made by its background set-up (startInBackground), which uses this communicator.
  static constexpr int kNoColor = -1;
  Status split(int color, int key, const CommConfig& cfg, std::unique_ptr<CommImpl>* child);

  // The ops this communicator made (collieRedOpCreatePreMulSum); calls hold theirs until run.
  RedOpTable& redOps() { return redOps_; }

  // ---- Configs, background set-up, non-blocking ops, finalize (communicator_async.cc) ----
  // Blocking init with settings read already (readCommConfig).
  static StatusOr<std::unique_ptr<CommImpl>> create(BootstrapInfo info, const CommConfig& cfg);
  // Non-blocking init: returns at once, init running through startInBackground.
  static std::unique_ptr<CommImpl> createInBackground(BootstrapInfo info, CommConfig cfg);
  // Runs work (set-up that must not block its caller: a non-blocking init or split) on a thread
  // of its own and returns at once. Call once, before any op, with rank_, nranks_ and cfg_ set.
  // While work runs, asyncError() is collieInProgress and checkReady refuses every op with
  // collieInvalidUsage; its error then becomes asyncError() and every op's. work runs when the
  // communicator is destroyed too: destroy() leaves the object to it, with aborting_ set.
  void startInBackground(std::function<Status()> work);
  // Frees c (abort: as abort() first), or while background set-up runs, sets aborting_ and
  // leaves c to that thread, which frees it when its work returns: returns at once either way.
  static void destroy(std::unique_ptr<CommImpl> c, bool abort);
  // Ok where an op may start: set-up done and good, not finalized. One atomic load when ok.
  Status checkReady(const char* op) const {
    const int g = gate_.load(std::memory_order_acquire);
    return g == kReady ? Status::ok() : notReady(op, g);
  }
  // Ok once the rank and size are known: a split's set-up learns them in the background.
  Status checkSetUp(const char* op) const {
    return placed_.load(std::memory_order_acquire) ? Status::ok() : notReady(op, kSettingUp);
  }
  const CommConfig& config() const { return cfg_; }
  // collieCommFinalize: refuses new ops; blocking, waits for every op issued and returns the
  // first error; non-blocking, returns collieInProgress and asyncError() says when done.
  Status finalize();
  // A non-blocking communicator's ops: queued to the progress thread behind the earlier ones,
  // returning collieInProgress; asyncError() follows them. queueJob runs job there with
  // execMu_ held (a group of this communicator alone).
  Status queueCollective(const CollArgs& args);
  Status queueP2P(const P2PCall& call);
  Status queueJob(std::function<Status()> job);
  // "rank R", with " of communicator 'name'" where the config names it: for messages.
  std::string who() const;
  // Names the communicator while its set-up runs in the background (who() reads the rank).
  std::string settingUp() const;

 private:
  enum Gate : int { kReady = 0, kSettingUp, kSetUpFailed, kFinalized };
  Status notReady(const char* op, int gate) const;
  void finishBackground(const Status& s);
  Status track(std::shared_ptr<WorkState> work);
  Status nonBlockingState();  // caller holds nbMu_
  void logReady() const;

  CommImpl() = default;
  // init's phases, in order; each fails with what went wrong, init adds where.
  Status init(BootstrapInfo info, const CommConfig* given = nullptr);
  Status configure(const CommConfig* given);
  Status meet(BootstrapInfo* info);
  Status connect(const BootstrapInfo& info);
  Status setUpWaits();
  Status setUpTuning();
  Status prepareAlgorithms();
  Status startProgress();
  // A split child's init, from what its parent agreed (communicator_split.cc).
  struct ChildPlan;
  Status initChild(CommImpl* parent, ChildPlan& plan);
  // The split itself, making child (a shell with its config) the new communicator.
  Status splitInto(CommImpl* child, int color, int key);
  // Puts this communicator's connections behind their locks (SharedLink), once they are shared.
  void shareConnections();
  Status agreeOnSplit(int color, int key, bool ready, std::vector<int32_t>* all);
  // Opens plan's lanes on the family's connections (see Connection::lanesOpenLate): false where
  // a connection refused one.
  bool openLanes(ChildPlan* plan, bool late);
  void attachConnections();

  Status execute(const CollArgs& args, DeviceOp* device = nullptr);  // caller holds execMu_
  Status executeHost(const CollArgs& args);                          // caller holds execMu_
  Status pick(const CollArgs& args, const AlgoContext& ctx, Algorithm** algo,
              OnlineTuner::Trial** trial);
  AlgoContext context(const CollArgs& args);  // for an op about to run: takes a sequence number
  Status agreeOnMax(double* v, size_t n, const char* opName);
  Status findAlgorithm(const std::string& name, Algorithm** out) const;
  Status fail(const Status& s);
  // The communicator's error where it failed, or where another communicator of its family
  // did (it then fails too: they share connections); ok otherwise.
  Status checkFailed();
  Status postOne(const P2PCall& c, Request* req);
  Status p2pFail(const Status& s);  // fails the communicator with s, naming this rank
  // The progress thread's part in asynchronous point-to-point calls (communicator_p2p.cc).
  Status postAsyncP2P(PendingOp* p);  // caller holds execMu_
  bool advanceP2P();
  void abandonP2P();
  struct InFlightP2P {
    P2PBatch batch;
    std::shared_ptr<WorkState> work;
  };
  DeviceHooks deviceHooks();

  int rank_ = 0;
  int nranks_ = 1;
  CommConfig cfg_;
  HostLayout layout_;
  bool oversubscribed_ = false;
  std::shared_ptr<Family> family_;
  uint64_t commId_ = 0;
  std::vector<int> familyRank_;      // by rank: the rank of the family's connection to it
  std::vector<RankRecord> records_;  // by rank
  // By rank (this rank's null): what the algorithms use, the family's connections, or links
  // to them (SharedLink) once they are shared. links_ owns the links.
  std::vector<Connection*> conns_;
  std::vector<std::unique_ptr<Connection>> links_;
  bool shared_ = false;
  uint32_t splits_ = 0;             // guarded by execMu_
  std::atomic<bool> placed_{true};  // rank_ and nranks_ are set (see checkSetUp)
  std::unique_ptr<Store> store_;    // a child's names in the family's store
  std::vector<std::unique_ptr<Algorithm>> algos_;
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
  std::atomic<const char*> lastAlgo_{""};
  LinkModel link_;
  LinkModel localLink_;  // between ranks of this host
  std::unique_ptr<Poller> poller_;
  std::unique_ptr<DevicePath> device_;
  std::vector<char> scratch_;           // guarded by execMu_
  uint64_t seq_ = 0;                    // guarded by execMu_
  PairSequences pairSeq_;               // guarded by execMu_
  std::list<InFlightP2P> inFlightP2P_;  // guarded by execMu_
  std::atomic<size_t> inFlightCount_{0};
  std::string how_;        // how the ranks found each other, for messages
  Deadline initDeadline_;  // of every wait of init

  // A call with a created op (communicator_redop.cc): the input scaled, then a sum.
  Status executePreMulSum(const CollArgs& args, DeviceOp* device);  // caller holds execMu_
  RedOpTable redOps_;
  std::vector<char> preMulInput_;  // the scaled input of such a call; guarded by execMu_

  std::mutex execMu_;  // held by whichever thread runs a schedule
  std::atomic<bool> aborting_{false};
  std::unique_ptr<FailureProtocol> failure_;
  ProgressQueue progress_;

  // Background set-up and non-blocking ops (communicator_async.cc).
  std::atomic<int> gate_{kReady};  // a Gate; leaves kSettingUp under bgMu_
  std::thread bg_;
  mutable std::mutex bgMu_;
  bool orphaned_ = false;  // guarded by bgMu_: destroyed while set-up ran
  Status setUpError_;      // guarded by bgMu_
  std::mutex nbMu_;
  std::vector<std::shared_ptr<WorkState>> nbWork_;  // guarded by nbMu_: not yet seen done
  Status nbError_;                                  // guarded by nbMu_: first failed op's
};

}  // namespace collie
