// The core-to-core probes of collie-limits (see core_probe.h).
#include "perf/limits/core_probe.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "perf/limits/pin.h"

namespace collie::limits {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLine = 64;
constexpr size_t kSlotBytes = 256 << 10;  // a chunk: stays in a core's cache
constexpr uint64_t kSlots = 4;
constexpr size_t kRunBytes = 128 << 20;  // per direction and run
constexpr std::chrono::seconds kRunLimit{10};

struct alignas(kLine) Counter {
  std::atomic<uint64_t> v{0};
};

// The first two CPUs this process may run on; false when it has fewer.
bool twoCpus(int* a, int* b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  int found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    (found == 0 ? *a : *b) = c;
    ++found;
  }
  return found == 2;
}

// Spins until c reaches want; false once the deadline passes (looked at every 1024 spins).
bool waitFor(const Counter& c, uint64_t want, Clock::time_point deadline) {
  for (unsigned spins = 0; c.v.load(std::memory_order_acquire) < want; ++spins)
    if ((spins & 1023) == 1023 && Clock::now() > deadline) return false;
  return true;
}

// Runs body(0) and body(1) on threads pinned to the two CPUs, started together; false when
// either gave up.
template <typename Body>
bool onBothCores(int cpuA, int cpuB, Body body) {
  Counter ready;
  std::atomic<bool> failed{false};
  auto run = [&](int side) {
    pinThisThread(side == 0 ? cpuA : cpuB);
    ready.v.fetch_add(1);
    if (!waitFor(ready, 2, Clock::now() + kRunLimit) || !body(side)) failed = true;
  };
  std::thread t(run, 1);
  run(0);
  t.join();
  return !failed;
}

// Half the round trip of a cache line written in turn by each core, in microseconds.
double pingPongUs(int cpuA, int cpuB, uint64_t iters) {
  Counter ping, pong;
  double us = 0;
  bool ok = onBothCores(cpuA, cpuB, [&](int side) {
    const Clock::time_point deadline = Clock::now() + kRunLimit;
    const Clock::time_point start = Clock::now();
    for (uint64_t i = 1; i <= iters; ++i) {
      if (side == 0) {
        ping.v.store(i, std::memory_order_release);
        if (!waitFor(pong, i, deadline)) return false;
      } else {
        if (!waitFor(ping, i, deadline)) return false;
        pong.v.store(i, std::memory_order_release);
      }
    }
    if (side == 0)
      us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters / 2;
    return true;
  });
  return ok ? us : 0;
}

// Per-direction GB/s of both cores handing kRunBytes to each other through slot rings.
double bidirGBs(int cpuA, int cpuB) {
  const uint64_t chunks = kRunBytes / kSlotBytes;
  std::vector<char> ring[2], src[2], dst[2];
  for (int s = 0; s < 2; ++s) {
    ring[s].assign(kSlots * kSlotBytes, 1);
    src[s].assign(kSlotBytes, static_cast<char>(s));
    dst[s].assign(kSlotBytes, 0);
  }
  Counter produced[2], consumed[2];  // chunks put in ring[s], and taken out of it by the other
  double secs[2] = {0, 0};
  bool ok = onBothCores(cpuA, cpuB, [&](int s) {
    const int peer = 1 - s;
    const Clock::time_point deadline = Clock::now() + kRunLimit;
    const Clock::time_point start = Clock::now();
    for (uint64_t k = 0; k < chunks; ++k) {
      const size_t at = (k % kSlots) * kSlotBytes;
      if (k >= kSlots && !waitFor(consumed[s], k - kSlots + 1, deadline)) return false;
      memcpy(ring[s].data() + at, src[s].data(), kSlotBytes);
      produced[s].v.store(k + 1, std::memory_order_release);
      if (!waitFor(produced[peer], k + 1, deadline)) return false;
      memcpy(dst[s].data(), ring[peer].data() + at, kSlotBytes);
      consumed[peer].v.store(k + 1, std::memory_order_release);
    }
    secs[s] = std::chrono::duration<double>(Clock::now() - start).count();
    return true;
  });
  const double slowest = std::max(secs[0], secs[1]);
  return ok && slowest > 0 ? static_cast<double>(chunks * kSlotBytes) / slowest / 1e9 : 0;
}

}  // namespace

double coreLatencyUs() {
  int a = 0, b = 0;
  if (!twoCpus(&a, &b)) return 0;
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    double us = pingPongUs(a, b, 5000);
    if (us <= 0) return 0;
    best = best == 0 ? us : std::min(best, us);
  }
  return best;
}

CoreRates measureCores(double seconds) {
  CoreRates r;
  int a = 0, b = 0;
  if (!twoCpus(&a, &b)) return r;
  // A few runs each, the best one: the figure the machine can reach, as the memory probes.
  const int runs = seconds < 0.5 ? 2 : 5;
  for (int i = 0; i < runs; ++i) {
    double us = pingPongUs(a, b, 20000);
    double gbs = bidirGBs(a, b);
    if (us <= 0 || gbs <= 0) return CoreRates{};
    r.oneWayUs = r.oneWayUs == 0 ? us : std::min(r.oneWayUs, us);
    r.bidirGBs = std::max(r.bidirGBs, gbs);
  }
  r.ok = true;
  return r;
}

}  // namespace collie::limits
