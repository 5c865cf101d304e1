// What every peer driver (OpenMPI, Gloo) shares: the command line, the collectives and their
// buffer layouts, the size sweep, the check, the timing plan and the result lines perf/compare
// reads. Header-only, because each driver is one file built against one peer library.
//
// Sizes, layouts and bus factors are collie-perf's (perf/perf_collectives.h): a size is the
// per-rank total, split collectives round its float count down to a multiple of the ranks, and
// root collectives use root 0 (collie-perf's default). Timing matches collie-perf's: per size, a
// correctness run, warm-up, then `batches` batches of `iters` back-to-back calls; a batch's
// time is the slowest rank's; the result is the median (and min) over batches.
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

enum class Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kSendRecv,
  kGather,
  kScatter
};

constexpr int kRoot = 0;

// One collective: its name on the command line (perf/compare's), whether its vectors are split
// into one block per rank, and its bus-bandwidth factor's numerator: (n-1) or 2(n-1), or n when
// the factor is 1 (busbw = algbw * factor / n).
struct CollInfo {
  Coll coll;
  const char* name;
  bool split;
  int (*factorTimesN)(int n);
};

inline const CollInfo* collectives(size_t* count) {
  static const CollInfo kColls[] = {
      {Coll::kAllReduce, "allreduce", false, [](int n) { return 2 * (n - 1); }},
      {Coll::kReduceScatter, "reducescatter", true, [](int n) { return n - 1; }},
      {Coll::kAllGather, "allgather", true, [](int n) { return n - 1; }},
      {Coll::kBroadcast, "broadcast", false, [](int n) { return n; }},
      {Coll::kReduce, "reduce", false, [](int n) { return n; }},
      {Coll::kAlltoAll, "alltoall", true, [](int n) { return n - 1; }},
      {Coll::kSendRecv, "sendrecv", false, [](int n) { return n; }},
      {Coll::kGather, "gather", true, [](int n) { return n - 1; }},
      {Coll::kScatter, "scatter", true, [](int n) { return n - 1; }},
  };
  *count = sizeof(kColls) / sizeof(kColls[0]);
  return kColls;
}

inline const CollInfo* findColl(const std::string& name) {
  size_t n = 0;
  const CollInfo* all = collectives(&n);
  for (size_t i = 0; i < n; ++i)
    if (name == all[i].name) return &all[i];
  return nullptr;
}

struct PeerOptions {
  size_t minBytes = 8;
  size_t maxBytes = 64u << 20;
  long factor = 4;
  int iters = 20;
  int warmup = 2;
  int batches = 3;
  const CollInfo* coll = findColl("allreduce");
  std::string label;  // the system name printed in every result line
  std::string algo;   // driver-specific (Gloo: ring, ring_chunked, halving_doubling, default)
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

// -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -R BATCHES --coll NAME --label L --algo A
// --store DIR. Returns false with a message on stderr for anything else.
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
    else if (flag == "--coll")
      ok = (o->coll = findColl(v)) != nullptr;
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

// The float counts of one call: count as collie-perf prints it, block = count / n, and the
// elements of this rank's input and output.
struct Layout {
  size_t count, block, send, recv;
};

inline Layout layoutOf(Coll c, size_t bytes, int n) {
  size_t count = bytes / 4;
  Layout l{count, count / n, count, count};
  switch (c) {
    case Coll::kReduceScatter:
    case Coll::kScatter:
      l.count = l.block * n;
      return {l.count, l.block, l.count, l.block};
    case Coll::kAllGather:
    case Coll::kGather:
      l.count = l.block * n;
      return {l.count, l.block, l.block, l.count};
    case Coll::kAlltoAll:
      l.count = l.block * n;
      return {l.count, l.block, l.count, l.count};
    default:
      return l;
  }
}

// Element i of rank r's vector: small integers, so that every sum of up to 128 ranks is exact in
// float32 whatever the order, and different per rank and position, so that a block put in the
// wrong place is seen.
inline float valueAt(int rank, size_t i) {
  return static_cast<float>(rank + 1 + 64 * static_cast<int>(i % 251));
}

inline float sumAt(int n, size_t i) {
  return static_cast<float>(n * (n + 1) / 2 + n * 64 * static_cast<int>(i % 251));
}

// The index of this rank's input[0] in its whole vector: its own block for the gathers.
inline size_t inputFirst(Coll c, int rank, const Layout& l) {
  return c == Coll::kAllGather || c == Coll::kGather ? static_cast<size_t>(rank) * l.block : 0;
}

// What output[p] holds on this rank after the call.
inline float expectedAt(Coll c, int rank, int n, const Layout& l, size_t p) {
  const size_t b = l.block ? l.block : 1;
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return sumAt(n, p);
    case Coll::kReduceScatter:
      return sumAt(n, static_cast<size_t>(rank) * l.block + p);
    case Coll::kAllGather:
    case Coll::kGather:
      return valueAt(static_cast<int>(p / b), p);
    case Coll::kBroadcast:
      return valueAt(kRoot, p);
    case Coll::kAlltoAll:
      return valueAt(static_cast<int>(p / b), static_cast<size_t>(rank) * l.block + p % b);
    case Coll::kSendRecv:
      return valueAt((rank + n - 1) % n, p);
    case Coll::kScatter:
      return valueAt(kRoot, static_cast<size_t>(rank) * l.block + p);
  }
  return 0;
}

// The hooks a driver gives: run one collective of the layout, a barrier, the max over ranks of
// a double, and where this rank's input goes and its result is read (the one buffer for
// in-place peers; input is written before output is read).
struct PeerHooks {
  std::function<void(const Layout& l)> run;
  std::function<void()> barrier;
  std::function<double(double)> maxOverRanks;
  std::function<float*()> input;
  std::function<float*()> output;
};

// Wrong elements of this rank's result after one call on checkable inputs.
inline double checkOnce(Coll c, int rank, int n, const Layout& l, const PeerHooks& h) {
  std::fill(h.output(), h.output() + l.recv, 0.0f);
  float* in = h.input();
  const size_t first = inputFirst(c, rank, l);
  for (size_t i = 0; i < l.send; ++i) in[i] = valueAt(rank, first + i);
  h.run(l);
  // Rooted results exist on root only.
  if ((c == Coll::kReduce || c == Coll::kGather) && rank != kRoot) return 0;
  const float* out = h.output();
  double wrong = 0;
  for (size_t p = 0; p < l.recv; ++p) wrong += out[p] != expectedAt(c, rank, n, l, p);
  return wrong;
}

// Runs the sweep; rank 0 prints one "result" line per size. Returns the number of sizes whose
// check failed on any rank.
inline int runSweep(const PeerOptions& o, int rank, int nranks, const PeerHooks& h) {
  int failed = 0;
  const Coll c = o.coll->coll;
  const double busFactor = static_cast<double>(o.coll->factorTimesN(nranks)) / nranks;
  for (size_t bytes : sweepSizes(o)) {
    const Layout l = layoutOf(c, bytes, nranks);
    double wrong = h.maxOverRanks(checkOnce(c, rank, nranks, l, h));
    if (wrong > 0) ++failed;
    // Timed runs move zeros: in-place peers keep reducing one buffer, and sums of zeros
    // stay zero instead of growing towards infinity.
    std::fill(h.input(), h.input() + l.send, 0.0f);
    std::fill(h.output(), h.output() + l.recv, 0.0f);
    for (int w = 0; w < o.warmup; ++w) h.run(l);
    std::vector<double> per;
    for (int b = 0; b < o.batches; ++b) {
      h.barrier();
      double t0 = nowSeconds();
      for (int it = 0; it < o.iters; ++it) h.run(l);
      per.push_back(h.maxOverRanks(nowSeconds() - t0) / o.iters * 1e6);
    }
    std::sort(per.begin(), per.end());
    double med = per[(per.size() - 1) / 2];
    if (rank == 0) {
      printf(
          "result system=%s ranks=%d coll=%s bytes=%zu iters=%d batches=%d time_us=%.3f "
          "time_us_min=%.3f busbw=%.6f wrong=%.0f\n",
          o.label.c_str(), nranks, o.coll->name, bytes, o.iters, o.batches, med, per[0],
          l.count * 4 * busFactor / (med * 1e3), wrong);
      fflush(stdout);
    }
  }
  return failed;
}

}  // namespace collie::peers
