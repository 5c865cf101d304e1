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
  int src = 0, dst = 0, op = 0;  // sender, receiver, the sender's op; a reduction: its rank
                                 // twice and the receive it reduces
  bool reduction = false;
  double remaining = 0, rate = 0, last = 0;
  uint32_t version = 0;
  int nports = 0;
  int port[3] = {0, 0, 0};
  int slot[3] = {0, 0, 0};  // index of this flow in each port's list
};

// A port shares cap equally among its flows; a host's reductions port instead holds the
// reductions running there, each at the rate its rank's share of the cores gives.
struct Port {
  double cap = 0;  // bytes per us
  bool reductions = false;
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
    // Ranks sit on hosts in blocks: the fullest host stands for every host.
    ranksPerHost_ = (n_ + h - 1) / h;
    const double slow = memoryFactor(links, workingSetBytes, ranksPerHost_);
    const double copy = local.gbps * 1e3 / slow;
    ports_.resize(4 * h + n_);
    for (int i = 0; i < 2 * h; ++i) ports_[i].cap = links.net.gbps * 1e3;
    for (int i = 2 * h; i < 2 * h + n_; ++i) ports_[i].cap = copy;
    copy_ = copy;
    reduceRate_ = links.reduceGBps * 1e3 / slow;
    busy_.assign(n_, 0);
    active_.assign(h, 0);
    for (int i = 0; i < h; ++i) {
      ports_[corePort(i)].cap = coresFor(0) * copy / links.flowCores;
      ports_[reducePort(i)].reductions = true;
    }
    reducing_.assign(n_, -1);
    reduceQueue_.resize(n_);
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
    fl.reduction = false;
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

  // The cores a host's k busy ranks have (sim_model.h): all of them while k is no more than
  // cores. With more, ranks that wait on each other step by step go at the pace of the fullest
  // core, ceil(k / cores) ranks on it, so the others idle part of the time (3 ranks on 2 cores:
  // 1.5 cores); and the host loses switchLoss of that to switching between ranks.
  double coresFor(int k) const {
    const int c = links_.cores;
    if (c <= 0 || k <= c) return c;
    return double(k) / ((k + c - 1) / c) * (1.0 - links_.switchLoss);
  }
  int corePort(int host) const { return 2 * topo_.hosts + n_ + host; }
  int reducePort(int host) const { return 3 * topo_.hosts + n_ + host; }

  // A rank is busy while a local flow it sends or receives, or a reduction of its, is on; a
  // host's cores serve its busy ranks (a rank that waits sleeps). Changes the rates of the
  // host's local flows and reductions.
  void setBusy(int r, int delta) {
    const int h = topo_.hostOf(r);
    if (busy_[r] == 0) ++active_[h];
    busy_[r] += delta;
    if (busy_[r] == 0) --active_[h];
    ports_[corePort(h)].cap = coresFor(active_[h]) * copy_ / links_.flowCores;
    reshare(corePort(h));
    reshare(reducePort(h));
  }

  // The data of receive i of rank r is there at t; the reduction (if any) queues on r's CPU.
  // With a host's cores modelled it runs as a flow on them, at r's share of them.
  void arrive(int r, int i, double t) {
    const Op& op = ranks_[r][i];
    if (op.reduce && reduceRate_ > 0 && links_.cores > 0) {
      reduceQueue_[r].push_back(i);
      if (reducing_[r] < 0) startReduction(r);
      return;
    }
    if (op.reduce && reduceRate_ > 0) {
      double start = std::max(t, cpuFree_[r]);
      cpuFree_[r] = start + reduceWork(op.bytes) / reduceRate_;
      t = cpuFree_[r];
    }
    push(t, EvType::kRecvDone, r, i, 0);
  }

  // A reduction of a received message larger than the cache reads it back from memory.
  double reduceWork(uint64_t bytes) const {
    const double b = static_cast<double>(bytes);
    return b * memoryFactor(links_, b, ranksPerHost_);
  }

  void startReduction(int r) {
    const int i = reduceQueue_[r].front();
    reduceQueue_[r].pop_front();
    const int f = newFlow();
    Flow& fl = flows_[f];
    fl.src = fl.dst = r;
    fl.op = i;
    fl.reduction = true;
    fl.remaining = reduceWork(ranks_[r][i].bytes);
    fl.rate = 0;
    fl.port[0] = reducePort(topo_.hostOf(r));
    fl.nports = 1;
    reducing_[r] = f;
    activate(f);
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
    if (fl.reduction || fl.nports == 3) {
      const int src = fl.src, dst = fl.dst;
      setBusy(src, +1);
      if (dst != src) setBusy(dst, +1);
    }
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
    if (fl.nports == 3 || (fl.reduction && fl.nports > 0)) {
      setBusy(fl.src, -1);
      if (fl.dst != fl.src) setBusy(fl.dst, -1);
    }
    if (fl.reduction) {
      reducing_[fl.src] = -1;
      if (!reduceQueue_[fl.src].empty()) startReduction(fl.src);
      complete(fl.src, fl.op);
      return;
    }
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
      if (p.reductions) {
        const int a = std::max(1, active_[topo_.hostOf(fl.src)]);
        rate = std::min(rate, reduceRate_ * std::min(1.0, coresFor(a) / a));
      } else {
        rate = std::min(rate, p.cap / static_cast<double>(p.flows.size()));
      }
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
  // NIC out per host, NIC in per host, copy port per rank, cores per host, reductions per host.
  std::vector<Port> ports_;
  int ranksPerHost_ = 1;       // on the fullest host
  double copy_ = 0;            // a local flow's rate alone, bytes per us
  double reduceRate_ = 0;      // a rank's with a core of its own, bytes per us; 0: free
  std::vector<int> busy_;      // per rank: its local flows and reduction on
  std::vector<int> active_;    // per host: its busy ranks
  std::vector<int> reducing_;  // per rank: the reduction flow it runs, or -1
  std::vector<std::deque<int>> reduceQueue_;  // per rank: receives whose reduction waits
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
