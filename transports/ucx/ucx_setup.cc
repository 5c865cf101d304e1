// The UCX group step: every rank publishes its worker address, or why it has none, so that the
// peers connect, fall back to tcp, or fail at once instead of waiting; and the watch over the
// processes of peers on this host.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "src/base/hex.h"
#include "src/base/log.h"
#include "src/base/time.h"
#include "transports/ucx/ucx_transport.h"

namespace collie {

namespace {

// This process's PID namespace (/proc/self/ns/pid's device and inode); "" if unknown.
std::string pidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

}  // namespace

std::unique_ptr<UcxTransport> UcxTransport::forGroup(const Identity& id, bool required) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  t->id_ = id;
  t->rank_ = id.rank;
  t->nranks_ = id.nranks;
  t->commId_ = id.commId;
  t->required_ = required;
  return t;
}

std::string UcxTransport::unusable(const std::string& theirs, std::string* addr, int* pid) {
  // Never "" for a failure, and never an empty address: either would be connected to.
  if (!theirs.empty() && theirs[0] == '!')
    return theirs.size() > 1 ? theirs.substr(1) : "its UCX failed to start";
  if (theirs == "-") return "its UCX offers no RDMA resource";
  const size_t a = theirs.find('/'), b = a == std::string::npos ? a : theirs.find('/', a + 1);
  if (b == std::string::npos || !fromHex(theirs.substr(0, a), addr) || addr->empty())
    return "it published a garbled address";
  // The pid: 1 to 9 digits (Linux pids stay below 2^22), so no value overflows or is negative.
  const std::string digits = theirs.substr(a + 1, b - a - 1);
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return "it published a garbled address";
  const std::string ns = theirs.substr(b + 1);
  *pid = !ns.empty() && ns == pidNamespace() ? std::stoi(digits) : 0;
  return "";
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
  const std::string mine =
      !made.isOk() ? "!" + made.message()
      : usable     ? toHex(address_) + "/" + std::to_string(getpid()) + "/" + pidNamespace()
                   : "-";
  COLLIE_RETURN_IF_ERROR(step->exchange->publish("ucx", mine));
  if (!usable) return giveUp(step, made);
  std::vector<std::string> theirs;
  COLLIE_RETURN_IF_ERROR(step->exchange->collect("ucx", step->peers, step->deadline, &theirs));
  std::vector<int> kept;
  for (size_t i = 0; i < step->peers.size(); ++i) {
    const int p = step->peers[i];
    std::string addr;
    int pid = 0;
    const std::string why = unusable(theirs[i], &addr, &pid);
    if (!why.empty() && required_)
      return invalidUsage(step->restriction + ": peer rank " + std::to_string(p) +
                          " cannot use UCX: " + why);
    if (!why.empty()) {
      COLLIE_INFO(kLogInit, "peer rank %d uses tcp, not UCX: %s", p, why.c_str());
      continue;
    }
    COLLIE_ASSIGN_OR_RETURN((*conns)[static_cast<size_t>(p)],
                            connectPeer(p, addr, step->sameHost(p) ? pid : 0));
    kept.push_back(p);
  }
  step->peers = kept;
  Status proved = proveSecret(id_, step->deadline);
  if (!proved.isOk() && !step->restriction.empty())
    return Status(proved.code(), step->restriction + ": " + proved.message());
  return proved;
}

}  // namespace collie

namespace collie {

void UcxConnection::watchPeer() {
  // Rate-limited: a pidfd poll is a system call, and even reading the clock costs.
  uint64_t now = 0;
  if ((++looks_ & 31) != 0 || (now = nowNs()) - lastLookNs_ < 2000000) return;
  lastLookNs_ = now;
  bool gone;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    gone = poll(&p, 1, 0) == 1;
  } else {
    gone = kill(peerPid_, 0) != 0 && errno == ESRCH;
  }
  if (!gone) return;
  // As a failed endpoint: an error where something waits on the peer (after the grace its
  // abort frame gets), and nothing more is sent to it.
  epFailed_ = true;
  if (peerLost_.isOk())
    peerLost_ = remoteError("lost " + who() + ": its process exited (the peer process died)");
  COLLIE_INFO(kLogNet, "UCX peer rank %d: its process exited", peer_);
}

}  // namespace collie
