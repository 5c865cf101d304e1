// The transport registry: the allowed set, one transport of each, the choice per peer pair and
// the group steps in priority order.
#include "transports/registry.h"

#include <algorithm>
#include <cstring>

#ifdef COLLIE_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif

namespace collie {

#ifdef COLLIE_HAVE_UCX
constexpr bool kHaveUcx = true;
#else
constexpr bool kHaveUcx = false;
#endif

const char* buildTransports() { return kHaveUcx ? "tcp, shm, ucx" : "tcp, shm"; }

StatusOr<AllowedTransports> parseAllowedTransports(const std::string& list) {
  AllowedTransports a;
  a.ucx = kHaveUcx;
  if (list.empty()) return a;
  a.tcp = a.shm = a.ucx = false;
  a.restriction = "COLLIE_TRANSPORT=" + list;
  for (size_t pos = 0; pos <= list.size();) {
    size_t e = std::min(list.find(',', pos), list.size());
    const std::string t = list.substr(pos, e - pos);
    if (t == "tcp")
      a.tcp = true;
    else if (t == "shm")
      a.shm = true;
    else if (t == "ucx" && kHaveUcx)
      a.ucx = a.ucxRequired = true;
    else
      return invalidArgument(a.restriction + ": '" + t + "' is not a transport of this build (" +
                             buildTransports() + ")");
    pos = e + 1;
  }
  return a;
}

StatusOr<std::vector<std::unique_ptr<Transport>>> makeTransports(const TransportConfig& cfg) {
  std::vector<std::unique_ptr<Transport>> out;
  const Identity& id = cfg.id;
  if (cfg.allowed.shm)
    out.emplace_back(new ShmTransport(id.commId, id.rank, cfg.shm, cfg.shmShrinkable));
#ifdef COLLIE_HAVE_UCX
  if (cfg.allowed.ucx) out.push_back(UcxTransport::forGroup(id, cfg.allowed.ucxRequired));
#endif
  if (cfg.allowed.tcp) {
    COLLIE_ASSIGN_OR_RETURN(std::unique_ptr<TcpTransport> tcp,
                            TcpTransport::create(id, cfg.tcp, cfg.tcpLocal));
    out.push_back(std::move(tcp));
  }
  return out;
}

std::vector<std::vector<Transport*>> choosePerPeer(const std::vector<Transport*>& byPriority,
                                                   const std::vector<RankPlace>& ranks, int self) {
  std::vector<std::vector<Transport*>> choice(ranks.size());
  for (size_t p = 0; p < ranks.size(); ++p) {
    if (static_cast<int>(p) == self) continue;
    for (Transport* t : byPriority)
      if (t->canConnect(ranks[static_cast<size_t>(self)], ranks[p])) choice[p].push_back(t);
  }
  return choice;
}

StatusOr<std::unique_ptr<TransportMesh>> TransportMesh::connect(
    std::vector<std::unique_ptr<Transport>> transports, const std::vector<RankPlace>& ranks,
    int self, AddressExchange* exchange, const std::string& restriction, const Deadline& deadline) {
  std::unique_ptr<TransportMesh> m(new TransportMesh());
  m->transports_ = std::move(transports);
  std::vector<Transport*> order;
  for (auto& t : m->transports_) order.push_back(t.get());
  auto choice = choosePerPeer(order, ranks, self);
  for (size_t p = 0; p < ranks.size(); ++p)
    if (static_cast<int>(p) != self && choice[p].empty())
      return invalidArgument(restriction + " cannot reach peer rank " + std::to_string(p) +
                             " on host " + ranks[p].host + " (shm reaches only this host)");
  m->conns_.resize(ranks.size());
  m->via_.assign(ranks.size(), "");
  std::vector<size_t> next(ranks.size(), 0);
  for (Transport* t : order)
    COLLIE_RETURN_IF_ERROR(
        m->runStep(t, &choice, &next, ranks, self, exchange, restriction, deadline));
  auto unused = [&](const std::unique_ptr<Transport>& t) { return !m->uses(t->name()); };
  m->transports_.erase(std::remove_if(m->transports_.begin(), m->transports_.end(), unused),
                       m->transports_.end());
  for (auto& c : m->conns_) m->ptrs_.push_back(c.get());
  return m;
}

Status TransportMesh::runStep(Transport* t, std::vector<std::vector<Transport*>>* choice,
                              std::vector<size_t>* next, const std::vector<RankPlace>& ranks,
                              int self, AddressExchange* exchange, const std::string& restriction,
                              const Deadline& deadline) {
  ConnectStep step;
  for (size_t p = 0; p < choice->size(); ++p)
    if ((*next)[p] < (*choice)[p].size() && (*choice)[p][(*next)[p]] == t)
      step.peers.push_back(static_cast<int>(p));
  if (step.peers.empty()) return Status::ok();
  const std::vector<Transport*>& first = (*choice)[static_cast<size_t>(step.peers[0])];
  const size_t after = (*next)[static_cast<size_t>(step.peers[0])] + 1;
  step.exchange = exchange;
  step.ranks = &ranks;
  step.self = self;
  step.fallback = after < first.size() ? first[after]->name() : nullptr;
  step.restriction = restriction;
  step.deadline = deadline;
  const std::vector<int> asked = step.peers;
  COLLIE_RETURN_IF_ERROR(t->connectGroup(&step, &conns_));
  for (int p : asked) {
    const size_t i = static_cast<size_t>(p);
    if (std::find(step.peers.begin(), step.peers.end(), p) != step.peers.end()) {
      via_[i] = t->name();
    } else if (++(*next)[i] == (*choice)[i].size()) {
      return internalError(std::string(t->name()) + " gave up peer rank " + std::to_string(p) +
                           " with no transport left to reach it");
    }
  }
  return Status::ok();
}

TransportMesh::~TransportMesh() {
  conns_.clear();
  for (auto& t : transports_) t.reset();  // in priority order, after every connection
}

std::vector<Connection*> TransportMesh::live() const {
  std::vector<Connection*> out;
  for (Connection* c : ptrs_)
    if (c != nullptr) out.push_back(c);
  return out;
}

bool TransportMesh::uses(const char* name) const {
  return std::any_of(via_.begin(), via_.end(), [&](const char* v) { return strcmp(v, name) == 0; });
}

Doorbell* TransportMesh::doorbell() const {
  for (auto& t : transports_)
    if (Doorbell* d = t->doorbell()) return d;
  return nullptr;
}

void TransportMesh::threadStarted() {
  for (auto& t : transports_) t->threadStarted();
}

void TransportMesh::threadIdle() {
  for (auto& t : transports_) t->threadIdle();
}

void TransportMesh::threadStopping() {
  for (auto& t : transports_) t->threadStopping();
}

void TransportMesh::linger(const Deadline& deadline) {
  for (auto& t : transports_) t->farewell(deadline);
  for (auto& c : conns_)
    if (c) c->linger(deadline);
}

}  // namespace collie
