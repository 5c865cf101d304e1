// Frame header encode and check: the per-message cost every stream transport pays on both sides.
#include <benchmark/benchmark.h>

#include "perf/micro/micro_util.h"
#include "transports/frame.h"

namespace collie::micro {
namespace {

FrameTag sampleTag() {
  FrameTag t;
  t.seq = 12345;
  t.count = 1 << 20;
  t.tag = 7;
  t.coll = 1;
  t.dtype = collieFloat32;
  t.op = collieSum;
  return t;
}

void BM_FrameEncode(benchmark::State& state) {
  FrameTag t = sampleTag();
  uint64_t len = 4096;
  for (auto _ : state) {
    FrameHeader h = encodeFrame(99, t, len);
    benchmark::DoNotOptimize(h);
    ++t.seq;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_FrameDecode(benchmark::State& state) {
  FrameTag t = sampleTag();
  FrameHeader h = encodeFrame(99, t, 4096);
  int64_t bad = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(h);
    bad += !checkFrame(h, 99, t, 4096, 1).isOk();
  }
  if (bad) state.SkipWithError("a valid frame failed its check");
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void registerFrameBenchmarks() {
  benchmark::RegisterBenchmark("frame/encode", BM_FrameEncode);
  benchmark::RegisterBenchmark("frame/check", BM_FrameDecode);
}

}  // namespace collie::micro
