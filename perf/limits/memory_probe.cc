// Memory-bandwidth probes (see memory_probe.h).
#include "perf/limits/memory_probe.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "perf/limits/pin.h"
#include "perf/limits/stream_loops.h"

namespace collie::limits {
namespace {

// c = a + b with ordinary stores, for buffers that stay in cache.
void addCached(float* __restrict dst, const float* __restrict a, const float* __restrict b,
               size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

struct FreeDeleter {
  void operator()(float* p) const { free(p); }
};
using Floats = std::unique_ptr<float[], FreeDeleter>;

// Page-aligned (streaming stores need 64-byte alignment) and filled, so pages are mapped.
Floats alignedFloats(size_t n, float value) {
  size_t bytes = (n * sizeof(float) + 4095) / 4096 * 4096;
  Floats p(static_cast<float*>(aligned_alloc(4096, bytes ? bytes : 4096)));
  if (p) std::fill(p.get(), p.get() + n, value);
  return p;
}

struct Buffers {
  size_t n;
  Floats a, b, c;
  explicit Buffers(size_t bytes)
      : n(bytes / sizeof(float)),
        a(alignedFloats(n, 1.0f)),
        b(alignedFloats(n, 2.0f)),
        c(alignedFloats(n, 0.0f)) {}
};

void runOnce(Kernel k, Buffers* buf) {
  size_t n = buf->n;
  switch (k) {
    case Kernel::kMemcpy:
      memcpy(buf->c.get(), buf->a.get(), n * sizeof(float));
      break;
    case Kernel::kStreamCopy:
      copyStream(buf->c.get(), buf->a.get(), n * sizeof(float));
      break;
    case Kernel::kAddStream:
      addStream(buf->c.get(), buf->a.get(), buf->b.get(), n);
      break;
    case Kernel::kAddCached:
      addCached(buf->c.get(), buf->a.get(), buf->b.get(), n);
      break;
  }
}

}  // namespace

const char* kernelName(Kernel k) {
  switch (k) {
    case Kernel::kMemcpy:
      return "memcpy";
    case Kernel::kStreamCopy:
      return "copy_stream";
    case Kernel::kAddStream:
      return "add_f32_stream";
    case Kernel::kAddCached:
      return "add_f32_cached";
  }
  return "?";
}

double measureMemory(Kernel kernel, size_t bytes, int threads, int runs) {
  using Clock = std::chrono::steady_clock;
  // Small buffers repeat inside one timed pass so that the clock's resolution does not matter.
  int reps = static_cast<int>(std::max<size_t>(1, (64u << 20) / std::max<size_t>(bytes, 1)));
  double best = 0;
  std::vector<std::unique_ptr<Buffers>> bufs;
  for (int t = 0; t < threads; ++t) {
    bufs.push_back(std::make_unique<Buffers>(bytes));
    if (!bufs.back()->a || !bufs.back()->b || !bufs.back()->c) return 0;
  }
  for (int r = 0; r < runs; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> secs(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        pinThisThread(t);
        runOnce(kernel, bufs[t].get());  // warm: pages mapped, cache state as in steady use
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) {
        }
        Clock::time_point t0 = Clock::now();
        for (int i = 0; i < reps; ++i) runOnce(kernel, bufs[t].get());
        secs[t] = std::chrono::duration<double>(Clock::now() - t0).count();
      });
    }
    // Bounded: threads that cannot start within 10 s mean a broken machine, not a slow one.
    Clock::time_point limit = Clock::now() + std::chrono::seconds(10);
    while (ready.load() < threads && Clock::now() < limit) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (std::thread& th : pool) th.join();
    double slowest = *std::max_element(secs.begin(), secs.end());
    double rate = slowest > 0 ? static_cast<double>(bytes) * reps * threads / slowest / 1e9 : 0;
    best = std::max(best, rate);
  }
  return best;
}

}  // namespace collie::limits
