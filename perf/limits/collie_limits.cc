// collie-limits: the physical limits an all-reduce on this machine is measured against.
//
// Prints one "limit" line per probe (memory bandwidth of memcpy, a streaming copy and the
// "read two, write one" f32 add, on one thread and on two at once; data handed between two
// cores both ways at once; loopback TCP one way and both ways at once), a "latency" line for a
// cache line's trip between two cores, and one "bound" line per derived 2-rank all-reduce
// bound:
//  - shm: each rank reduces its half straight from the peer's buffer (R = two-thread add with
//    streaming stores, bytes of output) and writes it into the peer's output (C = two-thread
//    streaming copy): T = S/R + S/C, so busbw = 1 / (1/R + 1/C). And each rank takes S bytes
//    another core wrote (the peer's half of the input, and its reduced half), both ranks at
//    once: busbw <= X, the per-direction rate of the core-to-core probe. The bound is the lower.
//  - tcp: each rank sends S and receives S at once, so busbw <= the per-direction rate of a
//    loopback connection with both directions busy.
// Lines are "key=value" words, for perf/compare to read. --core-latency prints the latency
// line alone, from one short probe: perf/compare looks at it around every command, since on a
// VM the host moves the virtual CPUs, and with them the cost of everything the cores share.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "perf/limits/core_probe.h"
#include "perf/limits/memory_probe.h"
#include "perf/limits/tcp_probe.h"

namespace {

using collie::limits::Kernel;

void printLimit(const char* name, int threads, size_t bytes, double gbs) {
  printf("limit name=%s threads=%d bytes=%zu GBps=%.3f\n", name, threads, bytes, gbs);
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, latencyOnly = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (strcmp(argv[i], "--core-latency") == 0) {
      latencyOnly = true;
    } else {
      fprintf(stderr, "usage: collie-limits [--quick | --core-latency]\n");
      return 2;
    }
  }
  if (latencyOnly) {
    double us = collie::limits::coreLatencyUs();
    if (us <= 0) {
      fprintf(stderr, "collie-limits: the core-to-core probe needs 2 CPUs (or ran past its limit)\n");
      return 1;
    }
    printf("latency name=core_to_core_oneway us=%.3f\n", us);
    return 0;
  }
  const size_t kDram = 64u << 20, kCache = 1u << 20;
  const int runs = quick ? 2 : 5;
  double add2 = 0, copy2 = 0;
  for (int threads : {1, 2}) {
    for (Kernel k : {Kernel::kMemcpy, Kernel::kStreamCopy, Kernel::kAddStream}) {
      double gbs = collie::limits::measureMemory(k, kDram, threads, runs);
      printLimit(collie::limits::kernelName(k), threads, kDram, gbs);
      if (threads == 2 && k == Kernel::kAddStream) add2 = gbs;
      if (threads == 2 && k == Kernel::kStreamCopy) copy2 = gbs;
    }
  }
  printLimit("add_f32_cached", 1, kCache,
             collie::limits::measureMemory(Kernel::kAddCached, kCache, 1, runs));
  printLimit("memcpy", 1, kCache, collie::limits::measureMemory(Kernel::kMemcpy, kCache, 1, runs));
  collie::limits::CoreRates cores = collie::limits::measureCores(quick ? 0.3 : 1.0);
  if (cores.ok) {
    printLimit("core_to_core_bidir_per_direction", 2, 0, cores.bidirGBs);
    printf("latency name=core_to_core_oneway us=%.3f\n", cores.oneWayUs);
  } else {
    fprintf(stderr, "collie-limits: the core-to-core probe needs 2 CPUs (or ran past its limit)\n");
  }
  collie::limits::TcpRates tcp = collie::limits::measureTcp(quick ? 0.3 : 1.0);
  if (tcp.ok) {
    printLimit("tcp_loopback_oneway", 1, 0, tcp.oneWayGBs);
    printLimit("tcp_loopback_bidir_per_direction", 2, 0, tcp.bidirGBs);
  } else {
    fprintf(stderr, "collie-limits: the loopback TCP probe failed\n");
  }
  if (add2 > 0 && copy2 > 0) {
    const double memory = 1.0 / (1.0 / add2 + 1.0 / copy2);
    if (cores.ok) {
      printf(
          "bound name=shm ranks=2 GBps=%.3f from=add_f32_stream:%.3f,copy_stream:%.3f,"
          "core_to_core_bidir_per_direction:%.3f\n",
          std::min(memory, cores.bidirGBs), add2, copy2, cores.bidirGBs);
    } else {
      printf("bound name=shm ranks=2 GBps=%.3f from=add_f32_stream:%.3f,copy_stream:%.3f\n", memory,
             add2, copy2);
    }
  }
  if (tcp.ok) {
    printf("bound name=tcp ranks=2 GBps=%.3f from=tcp_loopback_bidir_per_direction:%.3f\n",
           tcp.bidirGBs, tcp.bidirGBs);
  }
  return tcp.ok && add2 > 0 ? 0 : 1;
}
