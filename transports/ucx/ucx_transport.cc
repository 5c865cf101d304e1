// UCX transport: context and worker set-up, the resources UCX picked, endpoints, the op pool,
// and an orderly teardown.
#include "transports/ucx/ucx_transport.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "src/base/log.h"
#include "transports/ucx/ucx_config.h"

namespace collie {

namespace {

// Ranks fit in 23 bits of a tag (see ucx_connection.cc).
constexpr int kMaxRanks = 1 << 23;

// Transports that move data by RDMA: InfiniBand and RoCE (rc, dc, ud over verbs or mlx5).
bool isRdmaTransport(const std::string& tl) {
  return tl.compare(0, 2, "rc") == 0 || tl.compare(0, 2, "dc") == 0 || tl.compare(0, 2, "ud") == 0;
}

// Transports that can tell UCX a peer died (UCX 1.13's shared-memory ones cannot).
bool detectsPeerFailure(const std::string& tl) { return tl == "tcp" || isRdmaTransport(tl); }

}  // namespace

static Status ucxFailed(const UcxApi* api, const char* call, ucs_status_t st) {
  return systemError(std::string("UCX cannot initialise: ") + call +
                     " failed: " + api->statusString(st) +
                     " (check UCX_TLS and UCX_NET_DEVICES; `ucx_info -d` lists what this host "
                     "has)");
}

StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::create(int rank, int nranks, uint64_t commId,
                                                             bool needRdma) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  COLLIE_RETURN_IF_ERROR(t->init(rank, nranks, commId, needRdma));
  if (needRdma && !t->rdma_) return std::unique_ptr<UcxTransport>();
  return t;
}

Status UcxTransport::init(int rank, int nranks, uint64_t commId, bool needRdma) {
  COLLIE_ASSIGN_OR_RETURN(api_, ucxApi());
  rank_ = rank;
  commId_ = commId;
  if (nranks > kMaxRanks)
    return invalidArgument("UCX: " + std::to_string(nranks) +
                           " ranks do not fit in the tags (at most " + std::to_string(kMaxRanks) +
                           ")");
  // The configuration comes from UCX's own environment (UCX_TLS, UCX_NET_DEVICES, ...), with
  // Collie's defaults where the user set nothing.
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES;
  p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  std::vector<std::string> resources;
  ucs_status_t st = ucxInit(api_, p, &context_, &resources);
  if (st != UCS_OK) return ucxFailed(api_, "ucp_init", st);
  listResources(resources);
  if (needRdma && !rdma_) return Status::ok();  // the worker would go unused

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // The caller's thread and the communicator's progress thread both run schedules, never at
  // the same time (the communicator's execution lock).
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = api_->workerCreate(context_, &wp, &worker_);
  if (st != UCS_OK) {
    worker_ = nullptr;
    return ucxFailed(api_, "ucp_worker_create", st);
  }
  st = api_->workerGetEfd(worker_, &efd_);
  if (st != UCS_OK) return ucxFailed(api_, "ucp_worker_get_efd", st);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = api_->workerGetAddress(worker_, &addr, &len);
  if (st != UCS_OK) return ucxFailed(api_, "ucp_worker_get_address", st);
  address_.assign(reinterpret_cast<const char*>(addr), len);
  api_->workerReleaseAddress(worker_, addr);
  readyFd_ = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  if (readyFd_ < 0) return errnoStatus("UCX transport: eventfd", errno);
  COLLIE_INFO(kLogInit, "UCX %s: %s%s, worker address %zu bytes", api_->getVersionString(),
              resources_.c_str(), rdma_ ? " (RDMA)" : "", address_.size());
  return Status::ok();
}

void UcxTransport::listResources(const std::vector<std::string>& resources) {
  for (const std::string& res : resources) {
    resources_ += (resources_.empty() ? "" : " ") + res;
    const std::string tl = ucxTransportOf(res);
    rdma_ |= isRdmaTransport(tl);
    detectsFailure_ |= detectsPeerFailure(tl);
  }
}

StatusOr<std::unique_ptr<Connection>> UcxTransport::connect(int peer,
                                                            const std::string& peerAddress) {
  return connectPeer(peer, peerAddress, 0);
}

StatusOr<std::unique_ptr<Connection>> UcxTransport::connectPeer(int peer,
                                                                const std::string& peerAddress,
                                                                int pid) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  // Mode PEER: a peer that dies fails its endpoint (and what is posted on it) instead of
  // leaving this rank waiting; the cost is that UCX admits only transports that detect a dead
  // peer (tcp, RDMA), tcp even between processes of one host. Mode NONE would let those use
  // posix and cma, but cma aborts the process when its peer dies mid-copy.
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxTransport::onEndpointError;
  ep.err_handler.arg = this;
  ucp_ep_h h = nullptr;
  ucs_status_t st = UCS_ERR_UNREACHABLE;
  if (detectsFailure_) st = api_->epCreate(worker_, &ep, &h);
  bool peerMode = st == UCS_OK;
  if (st == UCS_ERR_UNREACHABLE) {
    // Only transports that cannot detect a dead peer connect (shared memory alone): the
    // connection watches the peer's process where it is on this host (pid), and elsewhere a
    // dead peer is noticed at the op's deadline (COLLIE_TIMEOUT_MS).
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.field_mask &= ~static_cast<uint64_t>(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    st = api_->epCreate(worker_, &ep, &h);
    if (st == UCS_OK && pid <= 0 && !warnedNoFailureMode_) {
      warnedNoFailureMode_ = true;
      COLLIE_WARN(kLogInit,
                  "UCX transports %s cannot report a dead peer: a peer that dies is noticed only "
                  "at the deadline (COLLIE_TIMEOUT_MS); tcp and RDMA transports report it at once",
                  resources_.c_str());
    }
  }
  if (st != UCS_OK)
    return systemError("UCX: cannot create an endpoint to peer rank " + std::to_string(peer) +
                       ": " + api_->statusString(st) + " (its worker address does not reach " +
                       "this host with the transports UCX chose: " + resources_ + ")");
  std::unique_ptr<UcxConnection> c(new UcxConnection(this, peer, h, peerMode, peerMode ? 0 : pid));
  conns_.push_back(c.get());
  COLLIE_RETURN_IF_ERROR(c->postAbortRecv());
  COLLIE_RETURN_IF_ERROR(c->postByeRecv());
  return std::unique_ptr<Connection>(c.release());
}

void UcxTransport::onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
  // UCX calls this from ucp_worker_progress; the endpoint may belong to a connection already
  // destroyed (its close still in flight), which has nothing left to fail.
  auto* t = static_cast<UcxTransport*>(arg);
  for (UcxConnection* c : t->conns_)
    if (c->endpoint() == ep) return c->onEndpointError(status);
}

UcxOp* UcxTransport::takeOp() {
  if (free_.empty()) {
    ops_.push_back(std::make_unique<UcxOp>());
    ops_.back()->owner = this;
    return ops_.back().get();
  }
  UcxOp* op = free_.back();
  free_.pop_back();
  return op;
}

void UcxTransport::releaseOp(UcxOp* op) {
  op->reset();
  free_.push_back(op);
}

void UcxTransport::detachAll() {
  for (UcxConnection* c : conns_) c->detach();
}

void UcxTransport::retire(UcxConnection* conn, ucp_ep_h ep, bool peerMode, void* flushRequest) {
  conns_.erase(std::remove(conns_.begin(), conns_.end(), conn), conns_.end());
  retired_.push_back(Retired{ep, peerMode});
  if (flushRequest != nullptr) flushing_.push_back(flushRequest);
}

void UcxTransport::waitAndFree(std::vector<void*>* requests, const Deadline& deadline) {
  while (!requests->empty() && !deadline.expired()) {
    unsigned n = api_->workerProgress(worker_);
    for (size_t i = 0; i < requests->size();) {
      if (api_->requestCheckStatus((*requests)[i]) != UCS_INPROGRESS) {
        api_->requestFree((*requests)[i]);
        (*requests)[i] = requests->back();
        requests->pop_back();
      } else {
        ++i;
      }
    }
    if (n == 0) sched_yield();
  }
  for (void* r : *requests) api_->requestFree(r);
  requests->clear();
}

UcxTransport::~UcxTransport() {
  if (worker_ != nullptr) {
    // First what was sent leaves (the flushes), then the endpoints go: after farewell, where
    // each peer has said goodbye (it read all it needed) or is gone, or the grace has passed. A
    // graceful close would wait for the peer to answer, which a peer that has already destroyed
    // its worker never does, and one still in flight when the worker goes makes UCX abort the
    // process: in mode PEER it is forced. The others close gracefully, bounded like everything
    // here, since a peer that is gone or stuck must not hold up this rank's exit.
    waitAndFree(&flushing_, Deadline::afterMs(1000));
    std::vector<void*> closes;
    for (const Retired& r : retired_) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = r.peerMode ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      ucs_status_ptr_t sp = api_->epCloseNbx(r.ep, &p);
      if (UCS_PTR_IS_PTR(sp)) closes.push_back(sp);
    }
    waitAndFree(&closes, Deadline::afterMs(500));
    // Ops still in flight complete (cancelled) inside this call; the pool is still there.
    api_->workerDestroy(worker_);
  }
  if (context_ != nullptr) api_->cleanup(context_);
  if (readyFd_ >= 0) close(readyFd_);
}

}  // namespace collie
