// What every peer driver (OpenMPI, Gloo) shares: the command line, the size sweep, the timing
// plan and the result lines perf/compare reads. Header-only, because each driver is one file
// built against one peer library.
//
// Timing matches collie-perf's: per size, a correctness run, warm-up, then `batches` batches
// of `iters` back-to-back all-reduces; a batch's time is the slowest rank's; the result is the
// median (and min) over batches. Inputs are rank + 1 so the sum is n(n+1)/2 everywhere.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace collie::peers {

struct PeerOptions {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  long factor = 4;
  int iters = 20;
  int warmup = 2;
  int batches = 3;
  std::string label;  // the system name printed in every result line
  std::string algo;   // driver-specific (Gloo: ring, ring_chunked, halving_doubling)
  std::string store;  // driver-specific (Gloo: rendezvous directory)
};

inline bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  const char* units = "KMG";
  double unit = 1;
  const char* u = *end ? strchr(units, toupper(static_cast<unsigned char>(*end))) : nullptr;
  if (u) {
    unit = std::pow(1024.0, static_cast<double>(u - units + 1));
    ++end;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

// -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -R BATCHES --label L --algo A --store DIR.
// Returns false with a message on stderr for anything else.
inline bool parsePeerOptions(int argc, char** argv, PeerOptions* o) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: flag %s needs a value\n", argv[0], flag.c_str());
      return false;
    }
    const char* v = argv[++i];
    bool ok = true;
    if (flag == "-b")
      ok = parseBytes(v, &o->minBytes);
    else if (flag == "-e")
      ok = parseBytes(v, &o->maxBytes);
    else if (flag == "-f")
      ok = (o->factor = atol(v)) >= 2;
    else if (flag == "-n")
      ok = (o->iters = atoi(v)) >= 1;
    else if (flag == "-w")
      ok = (o->warmup = atoi(v)) >= 0;
    else if (flag == "-R")
      ok = (o->batches = atoi(v)) >= 1;
    else if (flag == "--label")
      o->label = v;
    else if (flag == "--algo")
      o->algo = v;
    else if (flag == "--store")
      o->store = v;
    else
      ok = false;
    if (!ok) {
      fprintf(stderr, "%s: bad flag or value: %s %s\n", argv[0], flag.c_str(), v);
      return false;
    }
  }
  if (o->minBytes > o->maxBytes || o->minBytes < 4) {
    fprintf(stderr, "%s: need 4 <= -b <= -e\n", argv[0]);
    return false;
  }
  return true;
}

inline std::vector<size_t> sweepSizes(const PeerOptions& o) {
  std::vector<size_t> sizes;
  for (size_t s = o.minBytes; s <= o.maxBytes; s *= static_cast<size_t>(o.factor)) {
    sizes.push_back(s / 4 * 4);
  }
  return sizes;
}

inline double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The hooks a driver gives: run one all-reduce of count floats, a barrier, the max over ranks
// of a double, and the input/output buffers for the check.
struct PeerHooks {
  std::function<void(size_t count)> allreduce;
  std::function<void()> barrier;
  std::function<double(double)> maxOverRanks;
  std::function<void(size_t count, float value)> fillInput;
  std::function<const float*()> output;
};

// Runs the sweep; rank 0 prints one "result" line per size. Returns the number of sizes whose
// check failed on any rank.
inline int runSweep(const PeerOptions& o, int rank, int nranks, const PeerHooks& h) {
  int failed = 0;
  const double busFactor = 2.0 * (nranks - 1) / nranks;
  const float want = static_cast<float>(nranks * (nranks + 1) / 2);
  for (size_t bytes : sweepSizes(o)) {
    size_t count = bytes / 4;
    h.fillInput(count, static_cast<float>(rank + 1));
    h.allreduce(count);
    const float* out = h.output();
    double wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != want;
    wrong = h.maxOverRanks(wrong);
    if (wrong > 0) ++failed;
    // Timed runs reduce zeros: in-place peers keep reducing one buffer, and sums of zeros
    // stay zero instead of growing towards infinity.
    h.fillInput(count, 0.0f);
    for (int w = 0; w < o.warmup; ++w) h.allreduce(count);
    std::vector<double> per;
    for (int b = 0; b < o.batches; ++b) {
      h.barrier();
      double t0 = nowSeconds();
      for (int it = 0; it < o.iters; ++it) h.allreduce(count);
      per.push_back(h.maxOverRanks(nowSeconds() - t0) / o.iters * 1e6);
    }
    std::sort(per.begin(), per.end());
    double med = per[(per.size() - 1) / 2];
    if (rank == 0) {
      printf(
          "result system=%s ranks=%d bytes=%zu iters=%d batches=%d time_us=%.3f "
          "time_us_min=%.3f busbw=%.6f wrong=%.0f\n",
          o.label.c_str(), nranks, bytes, o.iters, o.batches, med, per[0],
          bytes * busFactor / (med * 1e3), wrong);
      fflush(stdout);
    }
  }
  return failed;
}

}  // namespace collie::peers
