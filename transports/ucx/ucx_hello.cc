// The UCX hello: the first message on every endpoint of a communicator proves the job's secret,
// as the tcp transport's hello does, and no frame of a peer is taken before its hello passed.
// UCX matches messages by tag, not by endpoint, so a hello that fails (a stranger that reached
// the worker, another job's rank) is dropped at WARN and the real peer's is still awaited; a peer
// that proves nothing fails the communicator, naming it.
#include <algorithm>
#include <cstring>

#include "src/base/log.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

namespace {

// After a hello that fails, the real peer's (if any) is awaited this much longer.
constexpr int64_t kAfterMisfitMs = 1000;

// One peer's hello being received.
struct HelloIn {
  UcxHello hello{};
  void* req = nullptr;
  bool done = false;
  ucs_status_t status = UCS_OK;
  size_t length = 0;
  bool proved = false;
  std::string misfit;  // why the last hello that came failed
};

void helloArrived(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* in = static_cast<HelloIn*>(user);
  in->done = true;
  in->status = status;
  in->length = info != nullptr ? info->length : 0;
}

}  // namespace

UcxHello makeUcxHello(const Identity& id, int to) {
  UcxHello h{};
  h.magic = kUcxHelloMagic;
  h.version = kUcxHelloVersion;
  memcpy(h.secret, id.secret, sizeof(h.secret));
  h.commId = id.commId;
  h.from = id.rank;
  h.to = to;
  h.nranks = id.nranks;
  return h;
}

const char* ucxHelloMisfit(const UcxHello& h, const Identity& id, int peer) {
  if (h.magic != kUcxHelloMagic || h.version != kUcxHelloVersion)
    return "not a Collie UCX hello (garbage or another protocol)";
  if (!secretEqual(h.secret, id.secret) || h.commId != id.commId)
    return "wrong secret or communicator id";
  if (h.from != peer || h.to != id.rank || h.nranks != id.nranks)
    return "hello does not fit this communicator (rank or size differ)";
  return "";
}

namespace {

// The hellos of one communicator's set-up: this rank's out on every endpoint, each peer's in.
class HelloRound {
 public:
  HelloRound(const UcxApi* api, ucp_worker_h worker, const Identity& id, std::vector<int> peers)
      : api_(api), worker_(worker), id_(id), peers_(std::move(peers)), in_(peers_.size()) {}
  ~HelloRound() {
    for (HelloIn& h : in_) {
      if (h.req == nullptr) continue;
      api_->requestCancel(worker_, h.req);
      const Deadline d = Deadline::afterMs(100);
      while (!h.done && !d.expired()) api_->workerProgress(worker_);
      api_->requestFree(h.req);
    }
  }
  void post(size_t i) {
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = &helloArrived;
    p.user_data = &in_[i];
    in_[i].done = false;
    ucs_status_ptr_t sp = api_->tagRecvNbx(worker_, &in_[i].hello, sizeof(UcxHello),
                                           ucxHelloTag(peers_[i]), ~ucp_tag_t{0}, &p);
    in_[i].req = UCS_PTR_IS_PTR(sp) ? sp : nullptr;
    if (in_[i].req == nullptr) in_[i].done = true, in_[i].status = UCS_PTR_STATUS(sp);
  }
  bool pending() const {
    return std::any_of(in_.begin(), in_.end(), [](const HelloIn& h) { return !h.proved; });
  }
  // Checks the hellos that came; false where one failed (dropped, its receive posted again).
  bool check() {
    bool allFit = true;
    for (size_t i = 0; i < in_.size(); ++i) {
      HelloIn& h = in_[i];
      if (h.proved || !h.done) continue;
      if (h.req != nullptr) api_->requestFree(h.req), h.req = nullptr;
      const char* why = h.status != UCS_OK             ? api_->statusString(h.status)
                        : h.length != sizeof(UcxHello) ? "a message that is not a hello"
                                                       : ucxHelloMisfit(h.hello, id_, peers_[i]);
      h.proved = *why == '\0';
      if (h.proved) continue;
      h.misfit = why;
      allFit = false;
      COLLIE_WARN_LIMITED(kLogNet,
                          "rank %d: dropped a UCX hello that claims to come from peer rank %d: %s",
                          id_.rank, peers_[i], why);
      post(i);
    }
    return allFit;
  }
  std::string unproved() const {
    std::string out;
    for (size_t i = 0; i < in_.size(); ++i)
      if (!in_[i].proved)
        out += (out.empty() ? "" : "; ") + std::to_string(peers_[i]) +
               (in_[i].misfit.empty() ? " (no hello came)" : " (its hello: " + in_[i].misfit + ")");
    return out;
  }

 private:
  const UcxApi* api_;
  ucp_worker_h worker_;
  const Identity& id_;
  std::vector<int> peers_;
  std::vector<HelloIn> in_;
};

}  // namespace

Status UcxTransport::proveSecret(const Identity& id, const Deadline& deadline) {
  std::vector<int> peers;
  for (UcxConnection* c : conns_) peers.push_back(c->peer());
  std::vector<UcxHello> out(conns_.size());
  std::vector<void*> sends;
  std::string unproved;
  {
    HelloRound round(api_, worker_, id, peers);
    for (size_t i = 0; i < conns_.size(); ++i) {
      out[i] = makeUcxHello(id, peers[i]);
      ucp_request_param_t p{};
      ucs_status_ptr_t r = api_->tagSendNbx(conns_[i]->endpoint(), &out[i], sizeof(UcxHello),
                                            ucxHelloTag(id.rank), &p);
      if (UCS_PTR_IS_PTR(r)) sends.push_back(r);
      round.post(i);
    }
    // After a hello that fails, the real peer's still gets a while, not the whole deadline.
    Deadline cap = Deadline::never();
    bool capped = false;
    while (round.pending() && !deadline.expired() && !cap.expired()) {
      if (api_->workerProgress(worker_) == 0) idle(deadline.remainingMs(2));
      if (!round.check() && !capped) cap = Deadline::afterMs(kAfterMisfitMs), capped = true;
    }
    unproved = round.unproved();
  }
  waitAndFree(&sends, Deadline::afterMs(deadline.remainingMs(1000)));
  if (unproved.empty()) return Status::ok();
  return remoteError("UCX: rank " + std::to_string(id.rank) +
                     " could not confirm that its peers belong to this job: peer rank " + unproved +
                     "; every rank must use the same unique id (or COLLIE_SECRET and rendezvous)");
}

}  // namespace collie
