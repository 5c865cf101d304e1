// Collie from C++: a blocking AllReduce (sum) and an asynchronous one (max), each checked on
// every rank. Start it with a launcher: collie-run -n 2 ./collie-example-cpp
#include <chrono>
#include <collie/collie.hpp>
#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  collie::Communicator comm;
  if (collie::Result r = collie::Communicator::initFromEnv(&comm); !r) {
    std::fprintf(stderr, "init: %s\n", r.toString().c_str());
    return 1;
  }
  const int rank = comm.rank(), n = comm.size();

  std::vector<int32_t> sum(1 << 16, rank + 1);
  if (collie::Result r = comm.allreduce(collie::View<int32_t>(sum)); !r) {
    std::fprintf(stderr, "allreduce: %s\n", r.toString().c_str());
    return 1;
  }
  std::vector<double> max(1 << 16, static_cast<double>(rank));
  collie::Work w = comm.allreduceAsync(collie::View<double>(max), collieMax);
  if (collie::Result r = w.wait(std::chrono::seconds(30)); !r) {
    std::fprintf(stderr, "allreduce async: %s\n", r.toString().c_str());
    return 1;
  }

  int wrong = 0;
  for (int32_t v : sum) wrong += v != n * (n + 1) / 2;
  for (double v : max) wrong += v != n - 1;
  std::printf("rank %d of %d: AllReduce sum and async max %s\n", rank, n, wrong ? "WRONG" : "ok");
  return wrong ? 1 : 0;
}
