// Set-up, Work, and the point-to-point ops of the collie c10d backend.
#include "process_group_collie.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "tensors.h"

namespace collie_torch {

namespace {

// The key rank 0 publishes its unique id under; torch's prefix store makes it per group.
constexpr const char* kIdKey = "collie_unique_id";

// The number of this init among the inits of the group through this store (a re-init over one
// file:// path meets the keys of the last): every rank adds 1 per init, and all the adds of one
// init come before any of the next, which needs every rank to have met in this one.
int64_t initNumber(const c10::intrusive_ptr<c10d::Store>& store, int size) {
  return (store->add("collie_inits", 1) - 1) / size + 1;
}

collieUniqueId meet(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  const std::string key = std::string(kIdKey) + "/" + std::to_string(initNumber(store, size));
  collieUniqueId id;
  if (rank == 0) {
    collieResult_t r = collieGetUniqueId(&id);
    TORCH_CHECK(r == collieSuccess,
                "collie: making the unique id failed: ", collieGetLastError(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(p, p + sizeof(id)));
    return id;
  }
  std::vector<uint8_t> bytes = store->get(key);
  TORCH_CHECK(bytes.size() == sizeof(id), "collie: the store holds a unique id of ", bytes.size(),
              " bytes, expected ", sizeof(id));
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

}  // namespace

CollieWork::CollieWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void CollieWork::finishOp(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

P2pWork::P2pWork(int rank, c10d::OpType type, at::Tensor t, collie::Work op, std::string what)
    : CollieWork(rank, type, {std::move(t)}), op_(std::move(op)), what_(std::move(what)) {}

bool P2pWork::settle(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(opMu_);
  if (done_) return true;
  collie::Result r = op_.wait(timeout);
  if (r.code() == collieInProgress) return false;
  done_ = true;
  std::exception_ptr error;
  if (!r.ok())
    error = std::make_exception_ptr(std::runtime_error(what_ + " failed: " + r.toString()));
  finishOp(error);
  return true;
}

bool P2pWork::isCompleted() { return settle(std::chrono::milliseconds(0)); }

bool P2pWork::wait(std::chrono::milliseconds timeout) {
  // c10d's kNoTimeout (0) waits for good; Collie's own deadline still ends a stuck op.
  auto limit = timeout.count() > 0 ? timeout : std::chrono::milliseconds::max();
  TORCH_CHECK(settle(limit), "collie ", what_, ": not complete after ", timeout.count(), " ms");
  return c10d::Work::wait(timeout);
}

c10::intrusive_ptr<c10::ivalue::Future> P2pWork::getFuture() {
  settle(std::chrono::milliseconds::max());
  return CollieWork::getFuture();
}

ProcessGroupCollie::ProcessGroupCollie(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout) {
  collieUniqueId id = meet(store, rank, size);
  // The init timeout is every op's deadline, as c10d's timeout is for its other backends.
  int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  collie::Config config = collie::Config().timeoutMs(ms).connectTimeoutMs(ms).name("torch");
  collie::Result r = collie::Communicator::initRank(&world_, size, id, rank, config);
  TORCH_CHECK(r.ok(), "collie: init of rank ", rank, " of ", size, " failed: ", r.toString());
  comm_ = world_.handle();
  if (!world_.split(0, rank, &p2p_).ok()) p2p_ = collie::Communicator();
  if (!world_.split(0, rank, &monitor_).ok()) monitor_ = collie::Communicator();
}

ProcessGroupCollie::~ProcessGroupCollie() {
  // The communicators go first: until they are destroyed, an op in flight may touch a tensor
  // that only pending_ keeps alive.
  monitor_ = collie::Communicator();
  p2p_ = collie::Communicator();
  world_ = collie::Communicator();
}

void ProcessGroupCollie::check(collieResult_t r, collieComm_t comm, const char* op) const {
  TORCH_CHECK(r == collieSuccess, "collie ", op, " failed on rank ", getRank(), ": ",
              collieGetErrorString(r), ": ", collieGetLastError(comm));
}

c10::intrusive_ptr<CollieWork> ProcessGroupCollie::done(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs) {
  ++seq_;
  auto work = c10::make_intrusive<CollieWork>(getRank(), type, std::move(outputs));
  work->finishOp(nullptr);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::postP2p(c10d::OpType type, const at::Tensor& t,
                                                           collie::Work op, const char* what,
                                                           int peer, int tag) {
  ++seq_;
  std::string name = std::string(what) + " of " + std::to_string(t.numel()) + " elements, tag " +
                     std::to_string(tag) + ", rank " + std::to_string(getRank()) + " and peer " +
                     std::to_string(peer);
  auto work = c10::make_intrusive<P2pWork>(getRank(), type, t, std::move(op), std::move(name));
  work->setSource(peer);
  std::lock_guard<std::mutex> lock(pendingMu_);
  // Finished ones leave at the next post, so the list stays as short as the ops in flight.
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const auto& w) { return w->isCompleted(); }),
                 pending_.end());
  pending_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  TORCH_CHECK(tensors.size() == 1, "collie send: expects one tensor, got ", tensors.size());
  const at::Tensor& t = tensors[0];
  collieDataType_t type = collieType(t, "send");
  collie::Communicator& c = p2pComm();
  collie::Work op = c.sendAsync(t.data_ptr(), t.numel(), type, dst, tag);
  return postP2p(c10d::OpType::SEND, t, std::move(op), "send", dst, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  TORCH_CHECK(tensors.size() == 1, "collie recv: expects one tensor, got ", tensors.size());
  const at::Tensor& t = tensors[0];
  collieDataType_t type = collieType(t, "recv");
  collie::Communicator& c = p2pComm();
  collie::Work op = c.recvAsync(t.data_ptr(), t.numel(), type, src, tag);
  return postP2p(c10d::OpType::RECV, t, std::move(op), "recv", src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  // Collie has no asynchronous receive from any peer: this one blocks the caller.
  TORCH_CHECK(tensors.size() == 1, "collie recv: expects one tensor, got ", tensors.size());
  const at::Tensor& t = tensors[0];
  collieDataType_t type = collieType(t, "recv");
  collie::Communicator& c = p2pComm();
  int peer = -1;
  check(collieRecvAny(t.data_ptr(), t.numel(), type, tag, &peer, c.handle(), nullptr), c.handle(),
        "recv from any source");
  auto work = done(c10d::OpType::RECVANYSOURCE, tensors);
  work->setSource(peer);
  return work;
}

}  // namespace collie_torch
