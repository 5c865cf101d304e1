// The shm connections: a peer's segment mapped, and the group step in which the local ranks
// make segments /dev/shm has room for, map each other's, and all keep shm or all give it up.
#include <algorithm>
#include <cstring>

#include "src/base/log.h"
#include "transports/shm/shm_transport.h"

namespace collie {

namespace {

// Sizes the user did not choose are halved up to this many times to fit /dev/shm.
constexpr int kShrinks = 3;

// What a local rank publishes in a round when it cannot go on: '!' and why for a failure of the
// system (the others fall back with it), '#' and why for want of room in /dev/shm (a failure
// of the system that smaller segments may mend), '?' and why for a misuse (they fail too).
std::string refusal(const Status& s, bool full = false) {
  return (s.code() == collieInvalidUsage ? "?" : full ? "#" : "!") + s.message();
}

bool noRoom(const std::string& v) { return !v.empty() && v[0] == '#'; }

bool allSay(const std::vector<std::string>& v, const char* what) {
  return std::all_of(v.begin(), v.end(), [&](const std::string& s) { return s == what; });
}

}  // namespace

StatusOr<std::unique_ptr<ShmTransport>> ShmTransport::create(uint64_t commId, int rank,
                                                             std::vector<int> localRanks,
                                                             const ShmOptions& opt) {
  std::unique_ptr<ShmTransport> t(new ShmTransport(commId, rank, opt, false));
  t->setLocal(std::move(localRanks));
  COLLIE_RETURN_IF_ERROR(t->makeSegment(opt));
  return t;
}

void ShmTransport::setLocal(std::vector<int> localRanks) {
  local_ = std::move(localRanks);
  for (size_t i = 0; i < local_.size(); ++i)
    if (local_[i] == rank_) localIndex_ = static_cast<int>(i);
}

Status ShmTransport::mapPeers(const std::vector<std::string>& names) {
  for (size_t i = 0; i < local_.size(); ++i)
    if (static_cast<int>(i) != localIndex_) COLLIE_RETURN_IF_ERROR(mapPeer(i, names[i]));
  return Status::ok();
}

StatusOr<std::unique_ptr<Connection>> ShmTransport::connect(int peer,
                                                            const std::string& peerBytes) {
  const auto it = std::find(local_.begin(), local_.end(), peer);
  if (it == local_.end() || peer == rank_ || own_ == nullptr)
    return invalidArgument("shm connect: peer rank " + std::to_string(peer) +
                           " is not a local peer of this segment");
  const size_t i = static_cast<size_t>(it - local_.begin());
  COLLIE_RETURN_IF_ERROR(mapPeer(i, peerBytes));
  return connectionTo(i, nullptr);
}

Status ShmTransport::connectGroup(ConnectStep* step, ConnectionTable* conns) {
  std::vector<int> local = step->peers;
  local.insert(std::upper_bound(local.begin(), local.end(), rank_), rank_);
  setLocal(local);
  std::vector<std::string> names, mapped;
  Status result;
  COLLIE_RETURN_IF_ERROR(sizeSegments(step, &names));
  if (refused(step, names, &result)) return result;
  // Every local rank holds its whole segment, so the host has room for the whole layout. No
  // peer writes into this rank's rings before it has published "shmmapped" below.
  releaseRingPages();
  if (opt_.stagingBytes != want_.stagingBytes)
    COLLIE_WARN(kLogInit,
                "shm: /dev/shm has no room for the %d local ranks' segments at the default "
                "sizes: rings of %zu KiB and staging of %zu KiB instead (enlarge /dev/shm, as "
                "docker run --shm-size does, for the defaults)",
                static_cast<int>(local.size()), opt_.ringBytes >> 10, opt_.stagingBytes >> 10);
  const Status m = mapPeers(names);
  COLLIE_RETURN_IF_ERROR(step->exchange->exchange("shmmapped", m.isOk() ? "1" : refusal(m), local,
                                                  step->deadline, &mapped));
  if (refused(step, mapped, &result)) return result;
  // Every local rank has mapped every segment: the names go, so nothing outlives a crash.
  unlinkOwn();
  makeConnections(conns);
  return Status::ok();
}

Status ShmTransport::sizeSegments(ConnectStep* step, std::vector<std::string>* names) {
  std::vector<std::string> votes, freed;
  for (int shrink = 0;; ++shrink) {
    ShmOptions so = want_;
    so.ringBytes >>= shrink;
    so.stagingBytes >>= shrink;
    const Status made = makeSegment(so);
    const std::string round = "/" + std::to_string(shrink);
    COLLIE_RETURN_IF_ERROR(step->exchange->exchange("shm" + round,
                                                    made.isOk() ? name_ : refusal(made, noRoom_),
                                                    local_, step->deadline, names));
    if (shrink >= kShrinks || std::none_of(names->begin(), names->end(), noRoom))
      return Status::ok();
    // Smaller only where no local rank chose its own sizes: each decides from what all say,
    // so that all try again or none does.
    COLLIE_RETURN_IF_ERROR(step->exchange->exchange("shmshrink" + round, shrinkable_ ? "1" : "0",
                                                    local_, step->deadline, &votes));
    if (!allSay(votes, "1")) return Status::ok();
    dropSegment();
    // Every segment of this try is gone before any rank makes one of the next.
    COLLIE_RETURN_IF_ERROR(
        step->exchange->exchange("shmfreed" + round, "1", local_, step->deadline, &freed));
  }
}

bool ShmTransport::refused(ConnectStep* step, const std::vector<std::string>& values,
                           Status* result) {
  // A misuse first: then every rank fails alike, whatever failed elsewhere.
  size_t i = 0;
  for (char kind : {'?', '!', '#'}) {
    for (i = 0; i < values.size() && (values[i].empty() || values[i][0] != kind);) ++i;
    if (i < values.size()) break;
  }
  if (i == values.size()) return false;
  dropSegment();  // nobody uses the segments now
  const bool misuse = values[i][0] == '?';
  const std::string why = "shm: rank " + std::to_string(local_[i]) + ": " + values[i].substr(1);
  if (step->fallback != nullptr && !misuse) {
    COLLIE_WARN(kLogInit, "%s; the peers on this host use %s instead", why.c_str(), step->fallback);
    step->peers.clear();
    *result = Status::ok();
    return true;
  }
  // Briefly, until the other local ranks have read this far: the store may live in this
  // process, and a rank that loses it first would report that instead of the reason.
  std::vector<std::string> seen;
  step->exchange->exchange("shmseen", "1", local_,
                           Deadline::afterMs(step->deadline.remainingMs(2000)), &seen);
  *result = misuse ? invalidUsage(why) : systemError(step->restriction + ": " + why);
  return true;
}

void ShmTransport::threadStarted() {
  if (own_ == nullptr) return;
  aliveHeld_ = holdAlive(1000);
  // A local peer looking at the mark holds it for an instant; stopped there, it keeps it, and
  // this thread takes the mark at a later idle wake-up.
  if (!aliveHeld_)
    COLLIE_WARN(kLogInit,
                "rank %d: its shm alive mark is taken by a local peer; it is held once that peer "
                "lets go",
                rank_);
}

void ShmTransport::threadIdle() {
  if (own_ != nullptr && !aliveHeld_) aliveHeld_ = holdAlive(0);
}

void ShmTransport::threadStopping() {
  if (aliveHeld_) releaseAlive();
  aliveHeld_ = false;
}

}  // namespace collie
