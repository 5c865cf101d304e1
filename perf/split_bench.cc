// collie-split-bench: how long collieCommSplit takes, beside a fresh init of the same ranks.
// Each rank times splits (by parity, and one color for all) followed by the destroy of the
// child, and the first AllReduce on a child; rank 0 prints the medians and extremes over
// ranks' maxima. Run under collie-run: collie-run -n 8 collie-split-bench [rounds].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "collie/collie.h"

namespace {

double nowUs() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

bool check(collieResult_t r, collieComm_t c, const char* what) {
  if (r == collieSuccess) return true;
  fprintf(stderr, "collie-split-bench: %s: %s: %s\n", what, collieGetErrorString(r),
          collieGetLastError(c));
  return false;
}

// The slowest rank's time of each round (the split is collective: it ends when the last ends).
std::vector<double> slowest(collieComm_t world, std::vector<double> mine) {
  check(collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat64, collieMax, world,
                        nullptr),
        world, "allreduce of the times");
  std::sort(mine.begin(), mine.end());
  return mine;
}

void print(int rank, const char* what, const std::vector<double>& t) {
  if (rank == 0 && !t.empty())
    printf("%-34s %10.1f %10.1f %10.1f\n", what, t[t.size() / 2], t.front(), t.back());
}

// Per-call times of count floats' AllReduce on comm, each the mean of a block of calls.
std::vector<double> timeAllReduce(collieComm_t comm, size_t count, int blocks) {
  std::vector<float> buf(count, 1.0f);
  std::vector<double> t;
  const int calls = count > 4096 ? 10 : 200;
  for (int b = -1; b < blocks; ++b) {  // the first block warms up
    const double t0 = nowUs();
    for (int i = 0; i < calls; ++i)
      collieAllReduce(buf.data(), buf.data(), count, collieFloat32, collieSum, comm, nullptr);
    if (b >= 0) t.push_back((nowUs() - t0) / calls);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, atoi(argv[1])) : 50;
  double t0 = nowUs();
  collieComm_t world = nullptr;
  if (!check(collieCommInitFromEnv(&world), nullptr, "init")) return 1;
  std::vector<double> init{nowUs() - t0};
  int rank = 0, n = 0;
  collieCommUserRank(world, &rank);
  collieCommCount(world, &n);
  std::vector<double> parity, whole, first;
  for (int i = 0; i < rounds; ++i) {
    for (int all = 0; all < 2; ++all) {
      collieComm_t child = nullptr;
      t0 = nowUs();
      if (!check(collieCommSplit(world, all ? 0 : rank % 2, rank, &child, nullptr), world, "split"))
        return 1;
      (all ? whole : parity).push_back(nowUs() - t0);
      float x = 1;
      t0 = nowUs();
      if (!check(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, child, nullptr), child,
                 "allreduce"))
        return 1;
      if (all) first.push_back(nowUs() - t0);
      collieCommDestroy(child);
    }
  }
  // The same calls on the world and on a child of every rank: what a child's lanes cost.
  collieComm_t all = nullptr;
  if (!check(collieCommSplit(world, 0, rank, &all, nullptr), world, "split")) return 1;
  const std::vector<double> w8 = timeAllReduce(world, 2, rounds),
                            c8 = timeAllReduce(all, 2, rounds);
  const std::vector<double> w1m = timeAllReduce(world, 1 << 18, rounds);
  const std::vector<double> c1m = timeAllReduce(all, 1 << 18, rounds);
  collieCommDestroy(all);
  if (rank == 0) printf("%d ranks, %d rounds; microseconds: median, min, max\n", n, rounds);
  print(rank, "init (collieCommInitFromEnv)", slowest(world, init));
  print(rank, "split by parity", slowest(world, parity));
  print(rank, "split, one color", slowest(world, whole));
  print(rank, "first allreduce on the child", slowest(world, first));
  print(rank, "allreduce 8 B, world", slowest(world, w8));
  print(rank, "allreduce 8 B, child of all", slowest(world, c8));
  print(rank, "allreduce 1 MiB, world", slowest(world, w1m));
  print(rank, "allreduce 1 MiB, child of all", slowest(world, c1m));
  collieCommDestroy(world);
  return 0;
}
