// The project's shm and TCP transports between two threads of this process (the two ranks of
// a 2-rank job): 8-byte ping-pong latency and one-way streaming bandwidth. The peer thread
// serves commands the benchmark thread sends it over the same connection.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "perf/micro/micro_util.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace collie::micro {
namespace {

constexpr int64_t kWaitMs = 30000;  // every wait's deadline: a stuck peer fails, never hangs
constexpr uint32_t kControlTag = 1, kDataTag = 2;
constexpr size_t kMaxStream = 16 << 20;

enum Command : uint64_t { kStop = 0, kPingPong = 1, kStream = 2 };
struct Control {
  uint64_t command;
  uint64_t bytes;
  uint64_t iterations;
};

// Two ranks on two cores: the bench thread on CPU 0, the peer thread on CPU 1 (where there
// are two), so the scheduler cannot put both on one core and time its wake-ups instead.
void pinSelf(int cpu) {
  unsigned n = std::thread::hardware_concurrency();
  if (n < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % n, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

FrameTag tagOf(uint32_t tag) {
  FrameTag t;
  t.tag = tag;
  return t;
}

// One side: its connection to the other and a poller over it.
struct Side {
  std::unique_ptr<Connection> conn;
  std::unique_ptr<Poller> poller;
  Status send(const void* buf, size_t n, uint32_t tag) {
    Request r;
    Status s = conn->isend(buf, n, tagOf(tag), &r);
    return s.isOk() ? poller->wait(&r, Deadline::afterMs(kWaitMs), "micro send") : s;
  }
  Status recv(void* buf, size_t n, uint32_t tag) {
    Request r;
    Status s = conn->irecv(buf, n, tagOf(tag), &r);
    return s.isOk() ? poller->wait(&r, Deadline::afterMs(kWaitMs), "micro recv") : s;
  }
};

// Two connected sides, the peer thread serving commands until it gets kStop.
class Pair {
 public:
  virtual ~Pair() { stop(); }
  Side& bench() { return a_; }
  Status run(Command c, size_t bytes, uint64_t iterations) {
    Control ctl{c, bytes, iterations};
    return a_.send(&ctl, sizeof(ctl), kControlTag);
  }
  std::string error;  // set when setting up failed

 protected:
  void start(int64_t spinUs, Doorbell* da, Doorbell* db) {
    a_.poller.reset(new Poller({a_.conn.get()}, spinUs, nullptr, da));
    b_.poller.reset(new Poller({b_.conn.get()}, spinUs, nullptr, db));
    pinSelf(0);
    peer_ = std::thread([this] {
      pinSelf(1);
      serve();
    });
  }
  void stop() {
    if (!peer_.joinable()) return;
    Control ctl{kStop, 0, 0};
    if (a_.send(&ctl, sizeof(ctl), kControlTag).isOk())
      peer_.join();
    else
      peer_.detach();  // the peer's own deadline ends it
  }
  Side a_, b_;

 private:
  void serve() {
    std::vector<char> buf(kMaxStream);
    for (;;) {
      Control ctl{};
      if (!b_.recv(&ctl, sizeof(ctl), kControlTag).isOk() || ctl.command == kStop) return;
      for (uint64_t i = 0; i < ctl.iterations; ++i) {
        if (!b_.recv(buf.data(), ctl.bytes, kDataTag).isOk()) return;
        if (ctl.command == kPingPong && !b_.send(buf.data(), ctl.bytes, kDataTag).isOk()) return;
      }
      // The end of a stream: tells the bench thread that every byte arrived.
      if (ctl.command == kStream && !b_.send(buf.data(), 8, kControlTag).isOk()) return;
    }
  }
  std::thread peer_;
};

class ShmPair : public Pair {
 public:
  ShmPair() {
    ShmOptions opt;
    auto t0 = ShmTransport::create(4242, 0, {0, 1}, opt);
    auto t1 = ShmTransport::create(4242, 1, {0, 1}, opt);
    if (!t0.isOk() || !t1.isOk()) {
      error = "shm segments: " + (t0.isOk() ? t1.status() : t0.status()).toString();
      return;
    }
    t0_ = t0.take();
    t1_ = t1.take();
    std::vector<std::string> names{t0_->segmentName(), t1_->segmentName()};
    Status s0 = t0_->mapPeers(names), s1 = t1_->mapPeers(names);
    t0_->unlinkOwn();
    t1_->unlinkOwn();
    if (!s0.isOk() || !s1.isOk()) {
      error = "shm map: " + (s0.isOk() ? s1 : s0).toString();
      return;
    }
    std::vector<std::unique_ptr<Connection>> c0(2), c1(2);
    t0_->makeConnections(&c0);
    t1_->makeConnections(&c1);
    a_.conn = std::move(c0[1]);
    b_.conn = std::move(c1[0]);
    start(50, t0_->doorbell(), t1_->doorbell());
  }
  ~ShmPair() override { stop(); }

 private:
  std::unique_ptr<ShmTransport> t0_, t1_;
};

class TcpPair : public Pair {
 public:
  TcpPair() {
    Identity id;
    memset(id.secret, 5, sizeof(id.secret));
    id.commId = 4243;
    id.nranks = 2;
    TcpOptions opt;
    auto lo = resolveHost("127.0.0.1", 0);
    std::vector<std::unique_ptr<TcpTransport>> t;
    std::vector<std::string> addrs;
    for (int r = 0; r < 2 && lo.isOk(); ++r) {
      id.rank = r;
      auto made = TcpTransport::create(id, opt, lo.value());
      if (!made.isOk()) {
        error = "tcp listen: " + made.status().toString();
        return;
      }
      addrs.push_back(made.value()->address());
      t.push_back(made.take());
    }
    if (t.size() != 2) {
      error = "cannot resolve 127.0.0.1";
      return;
    }
    std::vector<std::vector<std::unique_ptr<Connection>>> conns(2);
    Status st[2];
    std::thread other([&] {
      st[1] = t[1]->connectAll(addrs, std::vector<bool>{true, true}, Deadline::afterMs(kWaitMs),
                               &conns[1]);
    });
    st[0] = t[0]->connectAll(addrs, std::vector<bool>{true, true}, Deadline::afterMs(kWaitMs),
                             &conns[0]);
    other.join();
    if (!st[0].isOk() || !st[1].isOk()) {
      error = "tcp connect: " + (st[0].isOk() ? st[1] : st[0]).toString();
      return;
    }
    t_ = std::move(t);
    a_.conn = std::move(conns[0][1]);
    b_.conn = std::move(conns[1][0]);
    start(50, nullptr, nullptr);
  }
  ~TcpPair() override { stop(); }

 private:
  std::vector<std::unique_ptr<TcpTransport>> t_;
};

// One pair per transport for the whole run, made on first use.
Pair& pairFor(bool shm) {
  static ShmPair* shmPair = nullptr;
  static TcpPair* tcpPair = nullptr;
  if (shm) {
    if (!shmPair) shmPair = new ShmPair();
    return *shmPair;
  }
  if (!tcpPair) tcpPair = new TcpPair();
  return *tcpPair;
}

void BM_PingPong(benchmark::State& state, bool shm) {
  Pair& p = pairFor(shm);
  if (!p.error.empty()) return state.SkipWithError(p.error.c_str());
  size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> buf(bytes, 1);
  Status s = p.run(kPingPong, bytes, state.max_iterations);
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (s.isOk()) s = p.bench().send(buf.data(), bytes, kDataTag);
    if (s.isOk()) s = p.bench().recv(buf.data(), bytes, kDataTag);
  }
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (!s.isOk()) return state.SkipWithError(s.toString().c_str());
  // Half a round trip: the one-way latency, in microseconds.
  state.counters["one_way_us"] = us / 2 / static_cast<double>(state.iterations());
}

void BM_Stream(benchmark::State& state, bool shm) {
  Pair& p = pairFor(shm);
  if (!p.error.empty()) return state.SkipWithError(p.error.c_str());
  size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> buf(bytes, 1);
  char done[8];
  Status s = p.run(kStream, bytes, state.max_iterations);
  for (auto _ : state) {
    if (s.isOk()) s = p.bench().send(buf.data(), bytes, kDataTag);
  }
  if (s.isOk()) s = p.bench().recv(done, sizeof(done), kControlTag);
  if (!s.isOk()) return state.SkipWithError(s.toString().c_str());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
}

}  // namespace

void registerTransportBenchmarks() {
  for (bool shm : {true, false}) {
    std::string t = shm ? "shm" : "tcp";
    benchmark::RegisterBenchmark((t + "/pingpong").c_str(), BM_PingPong, shm)
        ->Arg(8)
        ->UseRealTime();
    benchmark::RegisterBenchmark((t + "/stream").c_str(), BM_Stream, shm)
        ->Arg(64 << 10)
        ->Arg(1 << 20)
        ->Arg(kMaxStream)
        ->UseRealTime();
  }
}

}  // namespace collie::micro
