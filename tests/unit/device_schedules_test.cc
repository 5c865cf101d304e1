// The device schedules (ring and tree) on the CPU: ranks are threads joined by real TCP
// connections over loopback, and the DeviceOps are host memory (each op done at once, so the
// waits and records have nothing to order). It checks the control frames, the flow control
// and the arithmetic end to end: several back-to-back AllReduces per world (the frames of one
// op are never taken for another's), ranks of different speeds, every slot count, and a rank
// that goes away.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/device_ring.h"
#include "algorithms/device_tree.h"
#include "src/reduce/reduce.h"
#include "tests/unit/tcp_mesh.h"

namespace collie {
namespace {

// Every rank's staging buffer, visible to all (the mapped peer buffers of cuda_ipc).
struct Slots {
  std::vector<std::vector<char>> of;
};

class HostDeviceOps : public DeviceOps {
 public:
  HostDeviceOps(Slots* slots, int rank, int delayUs) : s_(slots), me_(rank), delayUs_(delayUs) {}
  Status waitPeer(int) override { return Status::ok(); }
  Status copyToPeer(int peer, size_t off, const void* src, size_t bytes) override {
    lag();
    std::vector<char>& dst = s_->of[peer];
    if (off + bytes > dst.size()) return internalError("copy past the peer's slots");
    memcpy(dst.data() + off, src, bytes);
    return Status::ok();
  }
  Status reduceSlot(void* dst, size_t off, const void* own, size_t count, collieDataType_t dtype,
                    collieRedOp_t op) override {
    lag();
    reduce(dst, s_->of[me_].data() + off, own, count, dtype, op);
    return Status::ok();
  }
  Status scale(void* dst, size_t count, collieDataType_t dtype, int divisor) override {
    scaleForAvg(dst, count, dtype, divisor);
    return Status::ok();
  }
  Status copyFromSlot(void* dst, size_t off, size_t bytes) override {
    lag();
    memcpy(dst, s_->of[me_].data() + off, bytes);
    return Status::ok();
  }
  Status record() override { return Status::ok(); }

 private:
  void lag() {
    if (delayUs_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(delayUs_));
  }
  Slots* s_;
  int me_, delayUs_;
};

// Not periodic in any power of two, so that a chunk in the wrong slot shows.
double valueOf(int r, size_t i, int op) {
  return static_cast<double>((r * 7 + i * 3 + op) % 13 + 1);
}

struct Call {
  collieDataType_t dtype;
  collieRedOp_t op;
  size_t count;
  bool inPlace;
};

using Schedule = Status (*)(const CollArgs&, const AlgoContext&, size_t, int, DeviceOps*);

// Each rank runs calls in order; returns the failures of rank r.
std::string runRank(Schedule run, Mesh& m, Slots& slots, int r, int n,
                    const std::vector<Call>& calls, size_t slotBytes, int nslots, int delayUs,
                    int64_t timeoutMs) {
  std::vector<Connection*> conns(n, nullptr), live;
  for (int q = 0; q < n; ++q)
    if (q != r) conns[q] = m.conns[r][q].get(), live.push_back(conns[q]);
  Poller poller(live, 20, nullptr);
  HostDeviceOps dev(&slots, r, delayUs);
  uint64_t seq = 0;
  for (const Call& c : calls) {
    std::vector<double> in(c.count), out(c.count, -5.0);
    for (size_t i = 0; i < c.count; ++i) in[i] = valueOf(r, i, c.op);
    if (c.inPlace) out = in;
    AlgoContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.conns = conns.data();
    ctx.poller = &poller;
    ctx.deadline = Deadline::afterMs(timeoutMs);
    ctx.seq = ++seq;
    CollArgs a;
    a.dtype = c.dtype;
    a.op = c.op;
    a.count = c.count;
    a.send = c.inPlace ? out.data() : in.data();
    a.recv = out.data();
    Status s = run(a, ctx, slotBytes, nslots, &dev);
    if (!s.isOk()) return s.toString();
    for (size_t i = 0; i < c.count; ++i) {
      double want = c.op == collieMax ? 0 : c.op == collieProd ? 1 : 0;
      for (int q = 0; q < n; ++q) {
        double v = valueOf(q, i, c.op);
        want = c.op == collieMax ? std::max(want, v) : c.op == collieProd ? want * v : want + v;
      }
      if (c.op == collieAvg) want /= n;
      if (std::fabs(out[i] - want) > 1e-12 * std::fabs(want))  // avg scales by 1/n
        return "call seq " + std::to_string(seq) + " element " + std::to_string(i) + ": " +
               std::to_string(out[i]) + " != " + std::to_string(want);
    }
  }
  return "";
}

void runWorld(Schedule run, int n, const std::vector<Call>& calls, size_t slotBytes, int nslots,
              bool skew) {
  SCOPED_TRACE(std::string(run == &runDeviceRing ? "ring" : "tree") + " n=" + std::to_string(n) +
               " slotBytes=" + std::to_string(slotBytes) + " slots=" + std::to_string(nslots) +
               (skew ? " skewed" : ""));
  Mesh m = connectMesh(n, 1);
  Slots slots;
  slots.of.assign(n, std::vector<char>(slotBytes * nslots, 0));
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      errors[r] =
          runRank(run, m, slots, r, n, calls, slotBytes, nslots, skew && r == 1 ? 200 : 0, 20000);
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

const std::vector<Call> kCalls = {
    {collieFloat64, collieSum, 1000, false}, {collieFloat64, collieAvg, 999, true},
    {collieFloat64, collieMax, 3, false},    {collieFloat64, collieProd, 17, true},
    {collieFloat64, collieSum, 0, false},    {collieFloat64, collieSum, 4099, false}};

TEST(DeviceSchedules, RingBackToBackOverTcpMatchesTheReference) {
  for (int n : {2, 3, 5})
    for (int nslots : {1, 2, 4}) runWorld(&runDeviceRing, n, kCalls, 256, nslots, false);
}

TEST(DeviceSchedules, TreeBackToBackOverTcpMatchesTheReference) {
  // Tree slots of 256 bytes: 32 doubles, several chunks per call.
  for (int n : {2, 3, 4, 5, 7})
    for (int nslots : {1, 2, 4}) runWorld(&runDeviceTree, n, kCalls, 800, nslots, false);
}

TEST(DeviceSchedules, ASlowRankOnlySlowsTheSchedule) {
  std::vector<Call> calls = {{collieFloat64, collieSum, 3000, false},
                             {collieFloat64, collieAvg, 2000, true}};
  runWorld(&runDeviceRing, 3, calls, 512, 2, true);
  runWorld(&runDeviceRing, 2, calls, 512, 1, true);
  runWorld(&runDeviceTree, 5, calls, 1024, 1, true);
}

TEST(DeviceSchedules, ARankThatGoesAwayIsAnErrorNamingIt) {
  for (Schedule run : {&runDeviceRing, &runDeviceTree}) {
    const int n = 3;
    Mesh m = connectMesh(n, 1);
    Slots slots;
    slots.of.assign(n, std::vector<char>(4096, 0));
    std::vector<Call> calls = {{collieFloat64, collieSum, 5000, false}};
    std::vector<std::string> errors(n);
    // Rank 2 is gone before the op: in tree 0 of 3 ranks it is rank 1's child, in the ring
    // rank 0's prev and rank 1's next.
    m.conns[2].clear();
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back(
          [&, r] { errors[r] = runRank(run, m, slots, r, n, calls, 1024, 2, 0, 1500); });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) EXPECT_NE(errors[r], "") << "rank " << r;
    EXPECT_NE(errors[1].find("rank 2"), std::string::npos) << errors[1];
  }
}

}  // namespace
}  // namespace collie
