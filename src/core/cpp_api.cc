// The C++ API over the communicator.
#include <climits>

#include "collie/collie.hpp"
#include "src/core/api_internal.h"
#include "src/core/communicator.h"
#include "src/core/group.h"

namespace collie {

std::string Result::toString() const {
  if (ok()) return "ok";
  return std::string(collieGetErrorString(code_)) + ": " + message_;
}

static Result fromC(collieResult_t r, collieComm_t comm) {
  if (r == collieSuccess) return Result();
  return Result(r, collieGetLastError(comm));
}

static Result fromStatus(const Status& s) { return Result(s.code(), s.message()); }

Result Work::wait(std::chrono::milliseconds timeout) {
  if (!state_) return immediate_.ok() ? Result(collieInvalidUsage, "empty Work") : immediate_;
  int64_t ms = timeout == std::chrono::milliseconds::max() ? -1 : timeout.count();
  if (!state_->wait(ms))
    return Result(collieInProgress, "the operation is still running after the wait's timeout");
  return fromStatus(state_->status());
}

bool Work::test() { return !state_ || state_->test(); }

Communicator::~Communicator() {
  if (comm_ != nullptr) collieCommDestroy(comm_);
}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    if (comm_ != nullptr) collieCommDestroy(comm_);
    comm_ = o.comm_;
    o.comm_ = nullptr;
  }
  return *this;
}

Result Communicator::initFromEnv(Communicator* out) {
  if (out == nullptr) return Result(collieInvalidArgument, "out is null");
  collieComm_t c = nullptr;
  Result r = fromC(collieCommInitFromEnv(&c), nullptr);
  if (r.ok()) *out = Communicator(), out->comm_ = c;
  return r;
}

Result Communicator::initRank(Communicator* out, int nranks, const collieUniqueId& id, int rank) {
  if (out == nullptr) return Result(collieInvalidArgument, "out is null");
  collieComm_t c = nullptr;
  Result r = fromC(collieCommInitRank(&c, nranks, id, rank), nullptr);
  if (r.ok()) *out = Communicator(), out->comm_ = c;
  return r;
}

int Communicator::rank() const {
  int r = -1;
  if (comm_) collieCommUserRank(comm_, &r);
  return r;
}

int Communicator::size() const {
  int n = 0;
  if (comm_) collieCommCount(comm_, &n);
  return n;
}

Result Communicator::allreduce(const void* send, void* recv, size_t count, collieDataType_t dtype,
                               collieRedOp_t op) {
  return fromC(collieAllReduce(send, recv, count, dtype, op, comm_, nullptr), comm_);
}

Work Communicator::allreduceAsync(const void* send, void* recv, size_t count,
                                  collieDataType_t dtype, collieRedOp_t op) {
  Work w;
  Status s = checkComm(comm_);
  CollArgs a;
  if (s.isOk())
    s = makeCollArgsOn(comm_, Collective::kAllReduce, send, recv, count, enumBits(dtype),
                       enumBits(op), -1, &a);
  if (s.isOk() && a.memory != MemoryKind::kHost)
    s = invalidArgument(
        "allreduceAsync takes host buffers; device buffers go through "
        "collieAllReduce with a stream");
  if (s.isOk()) s = commImpl(comm_)->runAsync(a, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Result Communicator::reduceScatter(const void* send, void* recv, size_t recvcount,
                                   collieDataType_t dtype, collieRedOp_t op) {
  return fromC(collieReduceScatter(send, recv, recvcount, dtype, op, comm_, nullptr), comm_);
}

Result Communicator::allgather(const void* send, void* recv, size_t sendcount,
                               collieDataType_t dtype) {
  return fromC(collieAllGather(send, recv, sendcount, dtype, comm_, nullptr), comm_);
}

Result Communicator::broadcast(const void* send, void* recv, size_t count, collieDataType_t dtype,
                               int root) {
  return fromC(collieBroadcast(send, recv, count, dtype, root, comm_, nullptr), comm_);
}

Result Communicator::reduce(const void* send, void* recv, size_t count, collieDataType_t dtype,
                            collieRedOp_t op, int root) {
  return fromC(collieReduce(send, recv, count, dtype, op, root, comm_, nullptr), comm_);
}

Result Communicator::barrier() { return fromC(collieBarrier(comm_), comm_); }

Result Communicator::alltoall(const void* send, void* recv, size_t count, collieDataType_t dtype) {
  return fromC(collieAlltoAll(send, recv, count, dtype, comm_, nullptr), comm_);
}

Result Communicator::alltoallv(const void* send, const size_t* sendcounts, const size_t* sdispls,
                               void* recv, const size_t* recvcounts, const size_t* rdispls,
                               collieDataType_t dtype) {
  return fromC(
      collieAlltoAllv(send, sendcounts, sdispls, recv, recvcounts, rdispls, dtype, comm_, nullptr),
      comm_);
}

Result Communicator::gather(const void* send, void* recv, size_t count, collieDataType_t dtype,
                            int root) {
  return fromC(collieGather(send, recv, count, dtype, root, comm_, nullptr), comm_);
}

Result Communicator::scatter(const void* send, void* recv, size_t count, collieDataType_t dtype,
                             int root) {
  return fromC(collieScatter(send, recv, count, dtype, root, comm_, nullptr), comm_);
}

// Queues the host-memory call that make builds (make(impl, &args) -> Status) on comm.
template <typename Make>
static Status queueHost(collieComm_t comm, Make&& make, std::shared_ptr<WorkState>* state) {
  COLLIE_RETURN_IF_ERROR(checkComm(comm));
  CollArgs a;
  COLLIE_RETURN_IF_ERROR(make(commImpl(comm), &a));
  COLLIE_RETURN_IF_ERROR(requireHostMemory(a));
  return commImpl(comm)->runAsync(a, state);
}

// A call of coll with the C API's (send, recv, count, dtype, root), queued on comm.
static Status queueBlocks(collieComm_t comm, Collective coll, const void* send, void* recv,
                          size_t count, collieDataType_t dtype, int root,
                          std::shared_ptr<WorkState>* state) {
  return queueHost(
      comm,
      [&](CommImpl* c, CollArgs* a) {
        return makeCollArgs(coll, send, recv, count, enumBits(dtype), collieSum, root, c->rank(),
                            c->size(), a);
      },
      state);
}

Work Communicator::alltoallAsync(const void* send, void* recv, size_t count,
                                 collieDataType_t dtype) {
  Work w;
  Status s = queueBlocks(comm_, Collective::kAllToAll, send, recv, count, dtype, -1, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Work Communicator::alltoallvAsync(const void* send, const size_t* sendcounts, const size_t* sdispls,
                                  void* recv, const size_t* recvcounts, const size_t* rdispls,
                                  collieDataType_t dtype) {
  Work w;
  Status s = queueHost(
      comm_,
      [&](CommImpl* c, CollArgs* a) {
        return makeAllToAllvArgs(send, sendcounts, sdispls, recv, recvcounts, rdispls,
                                 enumBits(dtype), c->size(), a);
      },
      &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Work Communicator::gatherAsync(const void* send, void* recv, size_t count, collieDataType_t dtype,
                               int root) {
  Work w;
  Status s = queueBlocks(comm_, Collective::kGather, send, recv, count, dtype, root, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Work Communicator::scatterAsync(const void* send, void* recv, size_t count, collieDataType_t dtype,
                                int root) {
  Work w;
  Status s = queueBlocks(comm_, Collective::kScatter, send, recv, count, dtype, root, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Result Communicator::setAlgorithm(const std::string& name) {
  return fromC(collieCommSetAlgorithm(comm_, name.c_str()), comm_);
}

std::string Communicator::lastAlgorithm() const {
  const char* name = "";
  if (comm_) collieCommLastAlgorithm(comm_, &name);
  return name;
}

Result Communicator::abort() {
  if (comm_ == nullptr) return Result(collieInvalidUsage, "abort of an empty Communicator");
  Result r = fromC(collieCommAbort(comm_), nullptr);
  comm_ = nullptr;
  return r;
}

Result Communicator::initRank(Communicator* out, int nranks, const collieUniqueId& id, int rank,
                              const Config& config) {
  if (out == nullptr) return Result(collieInvalidArgument, "out is null");
  collieComm_t c = nullptr;
  collieConfig_t raw = config.toC();
  const collieResult_t r = collieCommInitRankConfig(&c, nranks, id, rank, &raw);
  if (c != nullptr) *out = Communicator(), out->comm_ = c;
  if (r == collieInProgress) return Result(r, "init is in progress (non-blocking)");
  return fromC(r, nullptr);
}

namespace {

Result splitInto(collieComm_t comm, int color, int key, Communicator* out, collieConfig_t* cfg,
                 collieComm_t* made) {
  if (out == nullptr) return Result(collieInvalidArgument, "split: out is null");
  const collieResult_t r = collieCommSplit(comm, color, key, made, cfg);
  if (r == collieInProgress) return Result(r, "split is in progress (non-blocking)");
  return fromC(r, comm);
}

}  // namespace

Result Communicator::split(int color, int key, Communicator* out) const {
  collieComm_t c = nullptr;
  Result r = splitInto(comm_, color, key, out, nullptr, &c);
  if (out != nullptr) *out = Communicator(), out->comm_ = c;
  return r;
}

Result Communicator::split(int color, int key, Communicator* out, const Config& config) const {
  collieComm_t c = nullptr;
  collieConfig_t raw = config.toC();
  Result r = splitInto(comm_, color, key, out, &raw, &c);
  if (out != nullptr) *out = Communicator(), out->comm_ = c;
  return r;
}

Result Communicator::asyncError() const {
  collieResult_t state = collieSuccess;
  const collieResult_t r = collieCommGetAsyncError(comm_, &state);
  if (r != collieSuccess) return fromC(r, comm_);
  if (state == collieInProgress) return Result(state, "in progress");
  return fromC(state, comm_);
}

Result Communicator::finalize() {
  const collieResult_t r = collieCommFinalize(comm_);
  if (r == collieInProgress) return Result(r, "finalize is in progress (non-blocking)");
  return fromC(r, comm_);
}

Result Communicator::sizeMismatch() {
  return Result(collieInvalidArgument,
                "send and recv views do not have the sizes the collective needs");
}

Result Communicator::send(const void* buf, size_t count, collieDataType_t dtype, int peer,
                          int tag) {
  return fromC(collieSendTagged(buf, count, dtype, peer, tag, comm_, nullptr), comm_);
}

Result Communicator::recv(void* buf, size_t count, collieDataType_t dtype, int peer, int tag) {
  return fromC(collieRecvTagged(buf, count, dtype, peer, tag, comm_, nullptr), comm_);
}

static Status p2pAsync(collieComm_t comm, bool send, const void* buf, size_t count,
                       collieDataType_t dtype, int peer, int tag,
                       std::shared_ptr<WorkState>* state) {
  P2PCall c;
  COLLIE_RETURN_IF_ERROR(makeP2PCall(send ? "sendAsync" : "recvAsync", send, buf, count,
                                     enumBits(dtype), peer, tag, comm, &c));
  if (inGroup()) return invalidUsage("sendAsync and recvAsync are not for groups: use send, recv");
  return commImpl(comm)->runP2PAsync(c, state);
}

Work Communicator::sendAsync(const void* buf, size_t count, collieDataType_t dtype, int peer,
                             int tag) {
  Work w;
  Status s = p2pAsync(comm_, true, buf, count, dtype, peer, tag, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Work Communicator::recvAsync(void* buf, size_t count, collieDataType_t dtype, int peer, int tag) {
  Work w;
  Status s = p2pAsync(comm_, false, buf, count, dtype, peer, tag, &w.state_);
  if (!s.isOk()) w.immediate_ = fromStatus(s);
  return w;
}

Result Communicator::recvAny(void* buf, size_t count, collieDataType_t dtype, int tag, int* peer) {
  return fromC(collieRecvAny(buf, count, dtype, tag, peer, comm_, nullptr), comm_);
}

}  // namespace collie

namespace collie {

RedOp::~RedOp() {
  if (comm_ != nullptr) collieRedOpDestroy(op_, comm_);
}

RedOp& RedOp::operator=(RedOp&& o) noexcept {
  if (this != &o) {
    if (comm_ != nullptr) collieRedOpDestroy(op_, comm_);
    comm_ = o.comm_;
    op_ = o.op_;
    o.comm_ = nullptr;
  }
  return *this;
}

Result RedOp::destroy() {
  if (comm_ == nullptr) return Result(collieInvalidUsage, "destroy of an empty RedOp");
  collieComm_t c = comm_;
  comm_ = nullptr;
  return fromC(collieRedOpDestroy(op_, c), c);
}

Result Communicator::createPreMulSum(const void* scalar, collieDataType_t dtype, RedOp* out) {
  if (out == nullptr) return Result(collieInvalidArgument, "out is null");
  collieRedOp_t op = collieSum;
  Result r = fromC(collieRedOpCreatePreMulSum(&op, const_cast<void*>(scalar), dtype,
                                              collieScalarHostImmediate, comm_),
                   comm_);
  if (r.ok()) {
    *out = RedOp();
    out->comm_ = comm_;
    out->op_ = op;
  }
  return r;
}

}  // namespace collie
