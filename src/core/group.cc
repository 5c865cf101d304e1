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

thread_local GroupState tGroup;

// What one communicator does in a group.
struct CommShare {
  CommImpl* comm = nullptr;
  std::vector<P2PCall> calls;
  P2PBatch batch;
};

// Completes the batches of several communicators together: a wait on one alone could stall a
// peer that waits on another.
Status finishTogether(std::vector<CommShare>* shares) {
  unsigned idle = 0;
  for (;;) {
    bool progressed = false, done = true;
    for (CommShare& s : *shares) {
      COLLIE_RETURN_IF_ERROR(s.comm->progressP2P(&s.batch, &progressed));
      done = done && s.batch.allDone();
    }
    if (done) return Status::ok();
    idle = progressed ? 0 : idle + 1;
    if (idle > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status runItems(std::vector<GroupItem>& items) {
  std::vector<CommShare> shares;
  auto shareOf = [&](CommImpl* c) -> CommShare& {
    for (CommShare& s : shares)
      if (s.comm == c) return s;
    shares.emplace_back();
    shares.back().comm = c;
    return shares.back();
  };
  for (GroupItem& it : items)
    if (!it.isCollective) shareOf(it.comm).calls.push_back(it.call);
  for (GroupItem& it : items)
    if (it.isCollective) shareOf(it.comm);
  std::vector<CommImpl*> order;
  for (CommShare& s : shares) order.push_back(s.comm);
  std::sort(order.begin(), order.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (CommImpl* c : order) locks.push_back(c->lock());
  for (CommShare& s : shares) COLLIE_RETURN_IF_ERROR(s.comm->postP2P(&s.calls, &s.batch));
  for (GroupItem& it : items)
    if (it.isCollective) COLLIE_RETURN_IF_ERROR(it.comm->runLocked(it.args));
  if (shares.size() == 1) return shares[0].comm->finishP2P(&shares[0].batch);
  return finishTogether(&shares);
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void groupStart() { ++tGroup.depth; }

Status groupEnd() {
  if (tGroup.depth == 0)
    return invalidUsage("collieGroupEnd without a collieGroupStart on this thread");
  if (--tGroup.depth > 0) return Status::ok();
  std::vector<GroupItem> items;
  items.swap(tGroup.items);
  return runItems(items);
}

void groupAdd(CommImpl* comm, const CollArgs& args) {
  GroupItem it;
  it.comm = comm;
  it.isCollective = true;
  it.args = args;
  tGroup.items.push_back(it);
}

void groupAdd(CommImpl* comm, const P2PCall& call) {
  GroupItem it;
  it.comm = comm;
  it.call = call;
  tGroup.items.push_back(it);
}

Status runP2PNow(CommImpl* comm, const P2PCall& call) {
  if (call.peer == comm->rank())
    return invalidUsage(std::string(call.send ? "send to" : "recv from") + " this rank (" +
                        std::to_string(call.peer) +
                        ") outside a group: its partner call must be in the same group");
  std::vector<GroupItem> items(1);
  items[0].comm = comm;
  items[0].call = call;
  return runItems(items);
}

}  // namespace collie
