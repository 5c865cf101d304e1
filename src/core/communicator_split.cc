// CommImpl::split: a child communicator on lanes of its parent's connections. The parent's ranks
// agree on colors and keys with one AllGather over the parent; nothing goes through the store
// and no socket or segment is made.
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "src/base/log.h"
#include "src/core/communicator.h"
#include "src/core/shared_link.h"

namespace collie {

namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Alike on every rank of one color of one split: the parent, its count of splits and the color
// name the child, so that its lanes can open before the agreement says who its members are.
uint64_t childCommId(uint64_t parent, uint32_t split, int color) {
  return mix64(mix64(parent ^ (uint64_t{split} << 32)) ^ static_cast<uint32_t>(color));
}

// What each rank contributes to the agreement.
enum : size_t { kAgreedColor, kAgreedKey, kAgreedLane, kAgreedReady, kAgreedFields };

}  // namespace

struct CommImpl::ChildPlan {
  int rank = 0;
  std::vector<int> members;  // parent ranks, by child rank
  uint64_t commId = 0;
  uint32_t lane = 0;
  std::vector<std::unique_ptr<SharedLink>> lanes;  // by parent rank
};

void CommImpl::shareConnections() {
  if (shared_) return;
  // Called under execMu_ with nothing in flight: no wait holds the old connections.
  links_.resize(static_cast<size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    if (conns_[p] == nullptr) continue;
    std::mutex* mu = family_->wire[static_cast<size_t>(familyRank_[p])];
    links_[p].reset(new SharedLink(conns_[p], nullptr, mu));
    conns_[p] = links_[p].get();
  }
  shared_ = true;
  attachConnections();
  setUpWaits();
}

bool CommImpl::openLanes(ChildPlan* plan, bool late) {
  // Before the agreement: lanes that must be open before a peer sends (it may finish first);
  // after it, with the agreed number, those whose transport keeps early messages, to members.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const size_t f = static_cast<size_t>(familyRank_[static_cast<size_t>(p)]);
    Connection* conn = family_->mesh->connections()[f];
    if (conn->lanesOpenLate() != late) continue;
    if (late && std::find(plan->members.begin(), plan->members.end(), p) == plan->members.end())
      continue;
    std::unique_ptr<Connection> lane;
    {
      std::lock_guard<std::mutex> w(*family_->wire[f]);
      lane = conn->openLane(plan->commId, late ? plan->lane : 0);
    }
    if (lane == nullptr) return false;
    plan->lanes[static_cast<size_t>(p)].reset(
        new SharedLink(nullptr, std::move(lane), family_->wire[f]));
  }
  return true;
}

Status CommImpl::agreeOnSplit(int color, int key, bool ready, std::vector<int32_t>* all) {
  all->assign(kAgreedFields * static_cast<size_t>(nranks_), 0);
  int32_t* mine = all->data() + kAgreedFields * static_cast<size_t>(rank_);
  mine[kAgreedColor] = color;
  mine[kAgreedKey] = key;
  mine[kAgreedLane] = static_cast<int32_t>(family_->nextLane.fetch_add(1));
  mine[kAgreedReady] = ready ? 1 : 0;
  CollArgs a;
  a.coll = Collective::kAllGather;
  a.send = mine;
  a.recv = all->data();
  a.count = kAgreedFields;
  a.dtype = collieInt32;
  Algorithm* ring = nullptr;
  COLLIE_RETURN_IF_ERROR(findAlgorithm("ring", &ring));
  AlgoContext ctx = context(a);
  ctx.opName = "collieCommSplit";
  Status s = ring->run(a, ctx);
  return s.isOk() ? s : fail(s.withContext("collieCommSplit on " + who()));
}

Status CommImpl::split(int color, int key, const CommConfig& cfg,
                       std::unique_ptr<CommImpl>* child) {
  child->reset();
  std::unique_ptr<CommImpl> c(new CommImpl());
  c->cfg_ = cfg;
  if (!cfg.blocking && color != kNoColor) {
    CommImpl* shell = c.get();
    shell->placed_.store(false);
    shell->startInBackground([this, shell, color, key] { return splitInto(shell, color, key); });
    *child = std::move(c);
    return Status::ok();
  }
  COLLIE_RETURN_IF_ERROR(splitInto(c.get(), color, key));
  if (color != kNoColor) *child = std::move(c);
  return Status::ok();
}

Status CommImpl::splitInto(CommImpl* child, int color, int key) {
  progress_.waitIdle();
  std::lock_guard<std::mutex> e(execMu_);
  COLLIE_RETURN_IF_ERROR(checkFailed());
  shareConnections();
  ChildPlan plan;
  plan.commId = childCommId(commId_, splits_++, color);
  // The lanes open before this rank's part of the agreement leaves: a member done first may
  // send on them at once.
  plan.lanes.resize(static_cast<size_t>(nranks_));
  const bool ready = color == kNoColor || openLanes(&plan, /*late=*/false);
  std::vector<int32_t> all;
  COLLIE_RETURN_IF_ERROR(agreeOnSplit(color, key, ready, &all));
  std::vector<std::pair<int32_t, int>> byKey;
  for (int p = 0; p < nranks_; ++p) {
    const int32_t* f = &all[kAgreedFields * static_cast<size_t>(p)];
    if (f[kAgreedReady] == 0)
      return invalidUsage("collieCommSplit: rank " + std::to_string(p) + " reaches a peer " +
                          "over a transport whose connections take no further communicator");
    plan.lane = std::max(plan.lane, static_cast<uint32_t>(f[kAgreedLane]));
    if (color != kNoColor && f[kAgreedColor] == color) byKey.emplace_back(f[kAgreedKey], p);
  }
  uint32_t next = family_->nextLane.load();
  while (next <= plan.lane && !family_->nextLane.compare_exchange_weak(next, plan.lane + 1)) {
  }
  if (color == kNoColor) return Status::ok();
  std::sort(byKey.begin(), byKey.end());
  for (const auto& k : byKey) {
    if (k.second == rank_) plan.rank = static_cast<int>(plan.members.size());
    plan.members.push_back(k.second);
  }
  if (!openLanes(&plan, /*late=*/true))
    return invalidUsage("collieCommSplit on " + who() + ": lane " + std::to_string(plan.lane) +
                        " is taken on a ucx connection (over 1023 splits of one family)");
  return child->initChild(this, plan)
      .withContext("collieCommSplit color " + std::to_string(color) + " on " + who());
}

Status CommImpl::initChild(CommImpl* parent, ChildPlan& plan) {
  rank_ = plan.rank;
  nranks_ = static_cast<int>(plan.members.size());
  placed_.store(true, std::memory_order_release);
  pairSeq_ = PairSequences(nranks_);
  commId_ = plan.commId;
  family_ = parent->family_;
  how_ =
      "split from rank " + std::to_string(parent->rank_) + " of " + std::to_string(parent->nranks_);
  // A background split made its failure protocol already: it holds the last error meanwhile.
  if (!failure_) failure_.reset(new FailureProtocol(cfg_.timeoutMs, &aborting_));
  algos_ = buildAlgorithms();
  online_ = OnlineTuner(cfg_.tunerTrials, 4096, cfg_.tunerRun);
  COLLIE_RETURN_IF_ERROR(findAlgorithm(cfg_.algorithm, &forced_));
  initDeadline_ = Deadline::afterMs(cfg_.connectMs).endedBy(&aborting_);
  links_.resize(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    const int p = plan.members[static_cast<size_t>(r)];
    const int f = parent->familyRank_[static_cast<size_t>(p)];
    familyRank_.push_back(f);
    records_.push_back(parent->records_[static_cast<size_t>(p)]);
    links_[r] = std::move(plan.lanes[static_cast<size_t>(p)]);
    conns_.push_back(links_[r].get());
  }
  layout_ = layoutOf(records_, rank_);
  shared_ = true;
  attachConnections();
  COLLIE_RETURN_IF_ERROR(setUpWaits());
  link_ = parent->link_;
  localLink_ = parent->localLink_;
  char prefix[40];
  snprintf(prefix, sizeof(prefix), "split/%016" PRIx64 "/", commId_);
  store_.reset(new PrefixStore(family_->rv.store.get(), prefix));
  COLLIE_RETURN_IF_ERROR(prepareAlgorithms());
  return startProgress();
}

Status PrefixStore::wait(const std::vector<std::string>& keys, const Deadline& deadline,
                         std::vector<std::string>* missing) {
  std::vector<std::string> full;
  for (const std::string& k : keys) full.push_back(prefix_ + k);
  Status s = inner_->wait(full, deadline, missing);
  if (missing != nullptr)
    for (std::string& m : *missing) m.erase(0, std::min(m.size(), prefix_.size()));
  return s;
}

}  // namespace collie
