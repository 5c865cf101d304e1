// Running a group: every communicator it touches is taken (in one global order, so that two
// threads' groups cannot deadlock), their point-to-point calls are all posted, the collectives
// run in call order, then the point-to-point calls complete together.
#include "src/core/group.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "src/core/communicator.h"

namespace collie {

namespace {

struct GroupItem {
  CommImpl* comm = nullptr;
  bool isCollective = false;
  CollArgs args;
  P2PCall call;
};

struct GroupState {
  int depth = 0;
  std::vector<GroupItem> items;
};

// Read on every call: the initial-exec model skips __tls_get_addr (a few bytes of the static
// TLS surplus, which a dlopen of the library may use).
__attribute__((tls_model("initial-exec"))) thread_local GroupState tGroup;

// What one communicator does in a group.
struct CommShare {
  CommImpl* comm = nullptr;
  std::vector<P2PCall> calls;
  P2PBatch batch;
};

// Completes the batches of several communicators together: a wait on one alone could stall a
// peer that waits on another.
Status finishTogether(CommShare* shares, size_t used) {
  unsigned idle = 0;
  for (;;) {
    bool progressed = false, done = true;
    for (size_t i = 0; i < used; ++i) {
      CommShare& s = shares[i];
      COLLIE_RETURN_IF_ERROR(s.comm->progressP2P(&s.batch, &progressed));
      done = done && s.batch.allDone();
    }
    if (done) return Status::ok();
    idle = progressed ? 0 : idle + 1;
    if (idle > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// With every communicator of the group taken: post, run the collectives, complete.
Status runPhases(const GroupItem* items, size_t n, CommShare* shares, size_t used) {
  for (size_t i = 0; i < used; ++i) shares[i].batch.reqs.clear();
  for (size_t i = 0; i < used; ++i)
    COLLIE_RETURN_IF_ERROR(shares[i].comm->postP2P(&shares[i].calls, &shares[i].batch));
  for (size_t i = 0; i < n; ++i)
    if (items[i].isCollective) COLLIE_RETURN_IF_ERROR(items[i].comm->runLocked(items[i].args));
  if (used == 1) return shares[0].comm->finishP2P(&shares[0].batch);
  return finishTogether(shares, used);
}

// A group that failed leaves no call in flight: a communicator with one still posted fails too
// (its connections then drop what was posted), so nothing completes into a later group's calls.
Status runLocked(const GroupItem* items, size_t n, CommShare* shares, size_t used) {
  const Status st = runPhases(items, n, shares, used);
  if (!st.isOk())
    for (size_t i = 0; i < used; ++i)
      if (!shares[i].batch.allDone()) shares[i].comm->failWith(st);
  return st;
}

// A group of one non-blocking communicator: queued to its progress thread, which holds its
// execMu_ while the job runs. (Groups of several communicators run at their end.)
Status queueGroup(CommImpl* comm, const GroupItem* items, size_t n) {
  return comm->queueJob([comm, v = std::vector<GroupItem>(items, items + n)] {
    CommShare share;
    share.comm = comm;
    for (const GroupItem& it : v)
      if (!it.isCollective) share.calls.push_back(it.call);
    return runLocked(v.data(), v.size(), &share, 1);
  });
}

// Reused from group to group on this thread: a group end allocates nothing once warm.
__attribute__((tls_model("initial-exec"))) thread_local std::vector<CommShare> tShares;

Status runItems(const GroupItem* items, size_t n) {
  std::vector<CommShare>& shares = tShares;
  size_t used = 0;
  auto shareOf = [&](CommImpl* c) -> CommShare& {
    for (size_t i = 0; i < used; ++i)
      if (shares[i].comm == c) return shares[i];
    if (used == shares.size()) shares.emplace_back();
    CommShare& s = shares[used++];
    s.comm = c;
    s.calls.clear();
    return s;
  };
  for (size_t i = 0; i < n; ++i)
    if (!items[i].isCollective) shareOf(items[i].comm).calls.push_back(items[i].call);
  for (size_t i = 0; i < n; ++i)
    if (items[i].isCollective) shareOf(items[i].comm);
  if (used == 1 && !shares[0].comm->config().blocking) return queueGroup(shares[0].comm, items, n);
  if (used == 1) {
    std::unique_lock<std::mutex> l = shares[0].comm->lock();
    return runLocked(items, n, &shares[0], 1);
  }
  std::vector<CommImpl*> order;
  for (size_t i = 0; i < used; ++i) order.push_back(shares[i].comm);
  std::sort(order.begin(), order.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (CommImpl* c : order) locks.push_back(c->lock());
  return runLocked(items, n, shares.data(), used);
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void groupStart() { ++tGroup.depth; }

Status groupEnd() {
  if (tGroup.depth == 0)
    return invalidUsage("collieGroupEnd without a collieGroupStart on this thread");
  if (--tGroup.depth > 0) return Status::ok();
  Status st = runItems(tGroup.items.data(), tGroup.items.size());
  tGroup.items.clear();
  return st;
}

void groupAdd(CommImpl* comm, const CollArgs& args) {
  GroupItem& it = tGroup.items.emplace_back();
  it.comm = comm;
  it.isCollective = true;
  it.args = args;
}

void groupAdd(CommImpl* comm, const P2PCall& call) {
  GroupItem& it = tGroup.items.emplace_back();
  it.comm = comm;
  it.call = call;
}

Status runP2PNow(CommImpl* comm, const P2PCall& call) {
  if (call.peer == comm->rank())
    return invalidUsage(std::string(call.send ? "send to" : "recv from") + " this rank (" +
                        std::to_string(call.peer) +
                        ") outside a group: its partner call must be in the same group");
  if (!comm->config().blocking) return comm->queueP2P(call);
  GroupItem item;
  item.comm = comm;
  item.call = call;
  return runItems(&item, 1);
}

}  // namespace collie
