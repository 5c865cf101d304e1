// The event loop of the schedule simulator (see event_sim.h). Times are in microseconds and
// bandwidths in bytes per microsecond (GB/s * 1e3).
#include "sim/event_sim.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <queue>
#include <unordered_map>

namespace collie {
namespace sim {

namespace {

using sched::Op;
using sched::OpKind;
using sched::Schedule;

enum class EvType : uint8_t { kActivate, kFinish, kRecvDone };

struct Event {
  double t;
  uint64_t seq;  // ties go to the earlier event, so runs are deterministic
  int a, b;      // flow id (activate, finish) or rank and op (recv done)
  uint32_t version;
  EvType type;
};
struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.t != y.t ? x.t > y.t : x.seq > y.seq;
  }
};

struct Flow {
  int src = 0, dst = 0, op = 0;  // sender, receiver, the sender's op
  double remaining = 0, rate = 0, last = 0;
  uint32_t version = 0;
  int nports = 0;
  int port[3] = {0, 0, 0};
  int slot[3] = {0, 0, 0};  // index of this flow in each port's list
};

struct Port {
  double cap = 0;  // bytes per us
  std::vector<int> flows;
};

// Messages from one rank to another: arrivals nobody has received yet, or receives posted
// before their data came; and the sends queued behind the one in flight, since a connection
// carries its messages one after another (a queued message's latency hides behind the one
// before it).
struct Channel {
  std::deque<double> arrivals;
  std::deque<int> posted;
  std::deque<int> queued;
  bool busy = false;
};

class Engine {
 public:
  Engine(const std::vector<Schedule>& ranks, const Topology& topo, const Links& links,
         double workingSetBytes)
      : ranks_(ranks), topo_(topo), links_(links), n_(static_cast<int>(ranks.size())) {
    const int h = topo.hosts;
    const bool shm = links.shm.gbps > 0;
    const Tier& local = shm ? links.shm : links.net;
    const double slow = memoryFactor(links, workingSetBytes);
    const double copy = local.gbps * 1e3 / slow;
    ports_.resize(3 * h + n_);
    for (int i = 0; i < 2 * h; ++i) ports_[i].cap = links.net.gbps * 1e3;
    for (int i = 2 * h; i < 2 * h + n_; ++i) ports_[i].cap = copy;
    std::vector<int> perHost(h, 0);
    for (int r = 0; r < n_; ++r) ++perHost[topo.hostOf(r)];
    // The cores a host's copies and reductions have, with more ranks than cores: ranks that
    // wait on each other step by step go at the pace of the fullest core, ceil(ranks / cores)
    // ranks on it, so the others idle part of the time (3 ranks on 2 cores: 1.5 cores); and
    // the host loses switchLoss of that to switching between ranks.
    std::vector<double> cores(h, links.cores);
    for (int i = 0; i < h; ++i) {
      const int c = links.cores, k = perHost[i];
      if (c > 0 && k > c) cores[i] = double(k) / ((k + c - 1) / c) * (1.0 - links.switchLoss);
    }
    // Every local flow keeps flowCores cores copying (sim_model.h).
    for (int i = 0; i < h; ++i) ports_[2 * h + n_ + i].cap = cores[i] * copy / links.flowCores;
    reduceRate_.resize(n_);
    for (int r = 0; r < n_; ++r) {
      const int hr = topo.hostOf(r);
      double share = links.cores > 0 && cores[hr] < perHost[hr] ? cores[hr] / perHost[hr] : 1.0;
      reduceRate_[r] = links.reduceGBps * 1e3 * share / slow;
    }
    cursor_.assign(n_, 0);
    blockedOn_.assign(n_, -1);
    cpuFree_.assign(n_, 0);
    done_.resize(n_);
    for (int r = 0; r < n_; ++r) done_[r].assign(ranks[r].size(), 0);
  }

  SimResult run() {
    for (int r = 0; r < n_; ++r) advance(r);
    while (!events_.empty()) {
      Event e = events_.top();
      events_.pop();
      ++processed_;
      now_ = e.t;
      switch (e.type) {
        case EvType::kActivate:
          activate(e.a);
          break;
        case EvType::kFinish:
          if (flows_[e.a].version == e.version) finish(e.a);
          break;
        case EvType::kRecvDone:
          complete(e.a, e.b);
          break;
      }
    }
    return result();
  }

 private:
  void push(double t, EvType type, int a, int b, uint32_t version) {
    events_.push(Event{t, seq_++, a, b, version, type});
  }

  // Issues rank r's operations until it reaches a wait on something not yet complete.
  void advance(int r) {
    const Schedule& s = ranks_[r];
    while (cursor_[r] < s.size()) {
      const int i = static_cast<int>(cursor_[r]);
      const Op& op = s[i];
      if (op.kind == OpKind::kWait) {
        if (!done_[r][op.target]) {
          blockedOn_[r] = op.target;
          return;
        }
        done_[r][i] = 1;
      } else if (op.kind == OpKind::kSend) {
        issueSend(r, i);
      } else {
        postRecv(r, i);
      }
      ++cursor_[r];
    }
  }

  void issueSend(int r, int i) {
    const Op& op = ranks_[r][i];
    int f = newFlow();
    Flow& fl = flows_[f];
    fl.src = r;
    fl.dst = op.peer;
    fl.op = i;
    fl.remaining = static_cast<double>(op.bytes);
    fl.rate = 0;
    const int hs = topo_.hostOf(r), hd = topo_.hostOf(op.peer), h = topo_.hosts;
    double alpha;
    if (hs != hd) {
      fl.port[0] = hs;      // NIC out of the sender's host
      fl.port[1] = h + hd;  // NIC in of the receiver's host
      fl.nports = 2;
      alpha = links_.net.alphaUs;
    } else {
      fl.port[0] = 2 * h + r;  // the copy ports of both ranks
      fl.port[1] = 2 * h + op.peer;
      fl.port[2] = 2 * h + n_ + hs;  // the host's cores
      fl.nports = links_.cores > 0 ? 3 : 2;
      alpha = links_.shm.gbps > 0 ? links_.shm.alphaUs : links_.net.alphaUs;
    }
    Channel& c = channel(r, op.peer);
    if (c.busy) {
      c.queued.push_back(f);
      return;
    }
    c.busy = true;
    push(now_ + alpha, EvType::kActivate, f, 0, 0);
  }

  void postRecv(int r, int i) {
    Channel& c = channel(ranks_[r][i].peer, r);
    if (c.arrivals.empty()) {
      c.posted.push_back(i);
      return;
    }
    double t = c.arrivals.front();
    c.arrivals.pop_front();
    arrive(r, i, std::max(t, now_));
  }

  // The data of receive i of rank r is there at t; the reduction (if any) queues on r's CPU.
  void arrive(int r, int i, double t) {
    const Op& op = ranks_[r][i];
    if (op.reduce && reduceRate_[r] > 0) {
      double start = std::max(t, cpuFree_[r]);
      cpuFree_[r] = start + static_cast<double>(op.bytes) / reduceRate_[r];
      t = cpuFree_[r];
    }
    push(t, EvType::kRecvDone, r, i, 0);
  }

  void complete(int r, int i) {
    done_[r][i] = 1;
    end_ = std::max(end_, now_);
    if (blockedOn_[r] == i) {
      blockedOn_[r] = -1;
      done_[r][cursor_[r]] = 1;  // the wait itself
      ++cursor_[r];
      advance(r);
    }
  }

  void activate(int f) {
    Flow& fl = flows_[f];
    fl.last = now_;
    if (fl.remaining <= 0) {
      fl.nports = 0;
      finish(f);
      return;
    }
    for (int k = 0; k < fl.nports; ++k) {
      Port& p = ports_[fl.port[k]];
      fl.slot[k] = static_cast<int>(p.flows.size());
      p.flows.push_back(f);
    }
    for (int k = 0; k < fl.nports; ++k) reshare(fl.port[k]);
  }

  void finish(int f) {
    Flow fl = flows_[f];
    for (int k = 0; k < fl.nports; ++k) {
      Port& p = ports_[fl.port[k]];
      int last = p.flows.back();
      p.flows[fl.slot[k]] = last;
      Flow& moved = flows_[last];
      for (int j = 0; j < moved.nports; ++j)
        if (moved.port[j] == fl.port[k]) moved.slot[j] = fl.slot[k];
      p.flows.pop_back();
    }
    ++flows_[f].version;  // drops any finish event still queued for it
    freeFlows_.push_back(f);
    for (int k = 0; k < fl.nports; ++k) reshare(fl.port[k]);
    Channel& c = channel(fl.src, fl.dst);
    if (c.queued.empty()) {
      c.busy = false;
    } else {
      push(now_, EvType::kActivate, c.queued.front(), 0, 0);
      c.queued.pop_front();
    }
    if (c.posted.empty()) {
      c.arrivals.push_back(now_);
    } else {
      int j = c.posted.front();
      c.posted.pop_front();
      arrive(fl.dst, j, now_);
    }
    complete(fl.src, fl.op);
  }

  void reshare(int port) {
    for (int g : ports_[port].flows) setRate(g);
  }

  void setRate(int g) {
    Flow& fl = flows_[g];
    double rate = std::numeric_limits<double>::infinity();
    for (int k = 0; k < fl.nports; ++k) {
      const Port& p = ports_[fl.port[k]];
      rate = std::min(rate, p.cap / static_cast<double>(p.flows.size()));
    }
    fl.remaining = std::max(0.0, fl.remaining - fl.rate * (now_ - fl.last));
    fl.last = now_;
    if (rate == fl.rate) return;
    fl.rate = rate;
    ++fl.version;
    push(now_ + fl.remaining / rate, EvType::kFinish, g, 0, fl.version);
  }

  int newFlow() {
    if (!freeFlows_.empty()) {
      int f = freeFlows_.back();
      freeFlows_.pop_back();
      return f;
    }
    flows_.emplace_back();
    return static_cast<int>(flows_.size() - 1);
  }

  Channel& channel(int src, int dst) {
    return chans_[static_cast<uint64_t>(src) * static_cast<uint64_t>(n_) + dst];
  }

  SimResult result() const {
    SimResult res;
    res.events = processed_;
    for (int r = 0; r < n_; ++r) {
      for (size_t i = 0; i < ranks_[r].size(); ++i) {
        if (done_[r][i]) continue;
        res.error =
            "rank " + std::to_string(r) + " never completed op " + std::to_string(i) + " of " +
            std::to_string(ranks_[r].size()) +
            (blockedOn_[r] >= 0 ? " (waiting for op " + std::to_string(blockedOn_[r]) + ")" : "") +
            ": the schedules do not match";
        return res;
      }
    }
    res.ok = true;
    res.timeUs = end_;
    return res;
  }

  const std::vector<Schedule>& ranks_;
  const Topology topo_;
  const Links links_;
  const int n_;
  // NIC out per host, NIC in per host, copy port per rank, cores per host.
  std::vector<Port> ports_;
  std::vector<double> reduceRate_;  // bytes per us; 0: free
  std::vector<Flow> flows_;
  std::vector<int> freeFlows_;
  std::vector<size_t> cursor_;
  std::vector<int> blockedOn_;
  std::vector<double> cpuFree_;
  std::vector<std::vector<char>> done_;
  std::unordered_map<uint64_t, Channel> chans_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t seq_ = 0, processed_ = 0;
  double now_ = 0, end_ = 0;
};

}  // namespace

SimResult simulate(const std::vector<sched::Schedule>& ranks, const Topology& topo,
                   const Links& links, double workingSetBytes) {
  SimResult bad;
  if (static_cast<int>(ranks.size()) != topo.nranks || topo.hosts < 1 || topo.hosts > topo.nranks) {
    bad.error = "topology of " + std::to_string(topo.nranks) + " ranks on " +
                std::to_string(topo.hosts) + " hosts does not fit " + std::to_string(ranks.size()) +
                " schedules";
    return bad;
  }
  if (links.net.gbps <= 0) {
    bad.error = "the network needs a bandwidth above 0";
    return bad;
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (size_t i = 0; i < ranks[r].size(); ++i) {
      const sched::Op& op = ranks[r][i];
      bool ok = op.kind == sched::OpKind::kWait
                    ? op.target >= 0 && static_cast<size_t>(op.target) < i
                    : op.peer >= 0 && op.peer < topo.nranks && static_cast<size_t>(op.peer) != r;
      if (!ok) {
        bad.error = "rank " + std::to_string(r) + " op " + std::to_string(i) +
                    ": a bad peer or wait target";
        return bad;
      }
    }
  }
  return Engine(ranks, topo, links, workingSetBytes).run();
}

}  // namespace sim
}  // namespace collie
