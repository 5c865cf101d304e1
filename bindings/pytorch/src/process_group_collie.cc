// Set-up, Work, and the point-to-point worker of the collie c10d backend.
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

collieUniqueId meet(const c10::intrusive_ptr<c10d::Store>& store, int rank) {
  collieUniqueId id;
  if (rank == 0) {
    collieResult_t r = collieGetUniqueId(&id);
    TORCH_CHECK(r == collieSuccess,
                "collie: making the unique id failed: ", collieGetLastError(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(kIdKey, std::vector<uint8_t>(p, p + sizeof(id)));
    return id;
  }
  std::vector<uint8_t> bytes = store->get(kIdKey);
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

ProcessGroupCollie::ProcessGroupCollie(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  collieUniqueId id = meet(store, rank);
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  // The init timeout is every op's deadline, as c10d's timeout is for its other backends.
  int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT_MAX));
  config.timeoutMs = ms;
  config.connectTimeoutMs = ms;
  config.commName = "torch";
  collieResult_t r = collieCommInitRankConfig(&comm_, size, id, rank, &config);
  TORCH_CHECK(r == collieSuccess, "collie: init of rank ", rank, " of ", size,
              " failed: ", collieGetLastError(nullptr));
  // Over transports that take no second communicator, point-to-point runs on comm_ inline.
  if (collieCommSplit(comm_, 0, rank, &p2p_, nullptr) != collieSuccess) p2p_ = nullptr;
  if (p2p_) worker_ = std::thread([this] { workerLoop(); });
}

ProcessGroupCollie::~ProcessGroupCollie() {
  if (worker_.joinable()) {
    bool stuck;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      stuck = busy_ || !queue_.empty();
    }
    cv_.notify_all();
    // A receive that will never match must not hold the process at exit.
    if (stuck) collieCommAbort(p2p_), p2p_ = nullptr;
    worker_.join();
  }
  if (p2p_) collieCommDestroy(p2p_);
  if (comm_) collieCommDestroy(comm_);
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

void ProcessGroupCollie::workerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    auto job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    job();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void ProcessGroupCollie::drainP2p() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::enqueueP2p(
    c10d::OpType type, at::Tensor t, std::function<void(CollieWork&)> run) {
  ++seq_;
  auto work = c10::make_intrusive<CollieWork>(getRank(), type, std::vector<at::Tensor>{t});
  auto job = [work, run = std::move(run)] {
    try {
      run(*work);
      work->finishOp(nullptr);
    } catch (...) {
      work->finishOp(std::current_exception());
    }
  };
  if (!p2p_) {
    job();
    return work;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::send(std::vector<at::Tensor>& tensors, int dst,
                                                        int tag) {
  TORCH_CHECK(tensors.size() == 1, "collie send: expects one tensor, got ", tensors.size());
  at::Tensor t = tensors[0];
  collieDataType_t type = collieType(t, "send");
  return enqueueP2p(c10d::OpType::SEND, t, [this, t, type, dst, tag](CollieWork&) {
    collieComm_t c = p2p_ ? p2p_ : comm_;
    check(collieSendTagged(t.data_ptr(), t.numel(), type, dst, tag, c, nullptr), c, "send");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  TORCH_CHECK(tensors.size() == 1, "collie recv: expects one tensor, got ", tensors.size());
  at::Tensor t = tensors[0];
  collieDataType_t type = collieType(t, "recv");
  return enqueueP2p(c10d::OpType::RECV, t, [this, t, type, src, tag](CollieWork& w) {
    collieComm_t c = p2p_ ? p2p_ : comm_;
    check(collieRecvTagged(t.data_ptr(), t.numel(), type, src, tag, c, nullptr), c, "recv");
    w.setSource(src);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  TORCH_CHECK(tensors.size() == 1, "collie recv: expects one tensor, got ", tensors.size());
  at::Tensor t = tensors[0];
  collieDataType_t type = collieType(t, "recv");
  return enqueueP2p(c10d::OpType::RECVANYSOURCE, t, [this, t, type, tag](CollieWork& w) {
    collieComm_t c = p2p_ ? p2p_ : comm_;
    int peer = -1;
    check(collieRecvAny(t.data_ptr(), t.numel(), type, tag, &peer, c, nullptr), c, "recv");
    w.setSource(peer);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollie::barrier(const c10d::BarrierOptions&) {
  // As with Gloo, a barrier also waits for this rank's earlier point-to-point ops.
  drainP2p();
  check(collieBarrier(comm_), comm_, "barrier");
  return done(c10d::OpType::BARRIER, {});
}

}  // namespace collie_torch
