// The UCX group step: every rank publishes its worker address, or why it has none, so that the
// peers connect, fall back to tcp, or fail at once instead of waiting.
#include "src/base/hex.h"
#include "src/base/log.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

std::unique_ptr<UcxTransport> UcxTransport::forGroup(int rank, int nranks, uint64_t commId,
                                                     bool required) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  t->rank_ = rank;
  t->nranks_ = nranks;
  t->commId_ = commId;
  t->required_ = required;
  return t;
}

std::string UcxTransport::unusable(const std::string& theirs, std::string* addr) {
  // Never "" for a failure, and never an empty address: either would be connected to.
  if (!theirs.empty() && theirs[0] == '!')
    return theirs.size() > 1 ? theirs.substr(1) : "its UCX failed to start";
  if (theirs == "-") return "its UCX offers no RDMA resource";
  return fromHex(theirs, addr) && !addr->empty() ? "" : "it published a garbled address";
}

Status UcxTransport::giveUp(ConnectStep* step, const Status& made) {
  if (!made.isOk() && required_) {
    // Briefly, until the peers have come this far: the store may live in this process, and a
    // peer that loses it first would report that instead of the reason.
    std::vector<std::string> seen;
    step->exchange->collect("ucx", step->peers, Deadline::afterMs(step->deadline.remainingMs(2000)),
                            &seen);
    return Status(made.code(), step->restriction + ": " + made.message());
  }
  const char* next = step->fallback != nullptr ? step->fallback : "tcp";
  if (!made.isOk())
    COLLIE_WARN(kLogInit, "%s; peers on other hosts use %s instead", made.message().c_str(), next);
  else
    COLLIE_INFO(kLogInit, "UCX offers no RDMA resource here; peers on other hosts use %s", next);
  step->peers.clear();
  return Status::ok();
}

Status UcxTransport::connectGroup(ConnectStep* step, ConnectionTable* conns) {
  const Status made = init(rank_, nranks_, commId_, /*needRdma=*/!required_);
  const bool usable = made.isOk() && (required_ || rdma_);
  const std::string mine = !made.isOk() ? "!" + made.message() : usable ? toHex(address_) : "-";
  COLLIE_RETURN_IF_ERROR(step->exchange->publish("ucx", mine));
  if (!usable) return giveUp(step, made);
  std::vector<std::string> theirs;
  COLLIE_RETURN_IF_ERROR(step->exchange->collect("ucx", step->peers, step->deadline, &theirs));
  std::vector<int> kept;
  for (size_t i = 0; i < step->peers.size(); ++i) {
    const int p = step->peers[i];
    std::string addr;
    const std::string why = unusable(theirs[i], &addr);
    if (!why.empty() && required_)
      return invalidUsage(step->restriction + ": peer rank " + std::to_string(p) +
                          " cannot use UCX: " + why);
    if (!why.empty()) {
      COLLIE_INFO(kLogInit, "peer rank %d uses tcp, not UCX: %s", p, why.c_str());
      continue;
    }
    COLLIE_ASSIGN_OR_RETURN((*conns)[static_cast<size_t>(p)], connect(p, addr));
    kept.push_back(p);
  }
  step->peers = kept;
  return Status::ok();
}

}  // namespace collie
