// collie-micro: Google Benchmark micro-benchmarks of the kernels and transports under the
// collectives. `collie-micro --benchmark_filter=reduce` and the other library flags apply.
#include <benchmark/benchmark.h>

#include "perf/micro/micro_util.h"

int main(int argc, char** argv) {
  collie::micro::registerReduceBenchmarks();
  collie::micro::registerFrameBenchmarks();
  collie::micro::registerTransportBenchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
